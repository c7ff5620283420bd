"""Privacy accounting: guarantee types, conversions, composition and a budget ledger.

Quick start::

    >>> from privtab.accounting import ZCDP, zcdp_epsilon
    >>> round(zcdp_epsilon(2.63, 1e-10, "analytic"), 3)
    18.194
    >>> round(zcdp_epsilon(2.63, 1e-10), 3)  # the tight (Canonne-Kamath-Steinke) conversion
    17.431
    >>> ZCDP(2.63).rho
    2.63

See ``docs/accounting.md`` for every conversion and its source.
"""

from privtab.accounting.composition import (
    compose,
    compose_by_degree,
    group_privacy,
    parallel,
    poisson_subsample,
)
from privtab.accounting.conversions import (
    SAFETAB_ALPHA_GRID,
    epsilon_at,
    gdp_delta,
    gdp_epsilon,
    gdp_to_zcdp,
    pure_to_approx,
    pure_to_rdp,
    pure_to_zcdp,
    randomized_response_rdp,
    rdp_delta,
    rdp_epsilon,
    rdp_epsilon_order,
    to_approx,
    to_rdp,
    zcdp_delta,
    zcdp_epsilon,
    zcdp_optimal_order,
    zcdp_to_rdp,
)
from privtab.accounting.curves import (
    discrete_gaussian_zcdp,
    gaussian_zcdp,
    geometric_rdp,
    geometric_rdp_divergence,
    geometric_rdp_paper,
)
from privtab.accounting.exact import ExactGuarantee, compose_exact
from privtab.accounting.guarantees import GDP, RDP, ZCDP, ApproxDP, Guarantee, PureDP
from privtab.accounting.ledger import BudgetExceededError, Charge, PrivacyLedger
from privtab.accounting.pld import (
    LossFactor,
    PLDProfile,
    compose_plds,
    discrete_gaussian_loss,
    geometric_loss,
)

__all__ = [
    "GDP",
    "RDP",
    "SAFETAB_ALPHA_GRID",
    "ZCDP",
    "ApproxDP",
    "BudgetExceededError",
    "Charge",
    "ExactGuarantee",
    "Guarantee",
    "LossFactor",
    "PLDProfile",
    "PrivacyLedger",
    "PureDP",
    "compose",
    "compose_by_degree",
    "compose_exact",
    "compose_plds",
    "discrete_gaussian_loss",
    "discrete_gaussian_zcdp",
    "epsilon_at",
    "gaussian_zcdp",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_to_zcdp",
    "geometric_loss",
    "geometric_rdp",
    "geometric_rdp_divergence",
    "geometric_rdp_paper",
    "group_privacy",
    "parallel",
    "poisson_subsample",
    "pure_to_approx",
    "pure_to_rdp",
    "pure_to_zcdp",
    "randomized_response_rdp",
    "rdp_delta",
    "rdp_epsilon",
    "rdp_epsilon_order",
    "to_approx",
    "to_rdp",
    "zcdp_delta",
    "zcdp_epsilon",
    "zcdp_optimal_order",
    "zcdp_to_rdp",
]
