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

from privtab.accounting.composition import compose, group_privacy, parallel
from privtab.accounting.conversions import epsilon_at, to_approx, to_rdp, zcdp_delta, zcdp_epsilon
from privtab.accounting.exact import ExactGuarantee
from privtab.accounting.guarantees import GDP, RDP, ZCDP, ApproxDP, Guarantee, PureDP
from privtab.accounting.ledger import BudgetExceededError, PrivacyLedger

__all__ = [
    "GDP",
    "RDP",
    "ZCDP",
    "ApproxDP",
    "BudgetExceededError",
    "ExactGuarantee",
    "Guarantee",
    "PrivacyLedger",
    "PureDP",
    "compose",
    "epsilon_at",
    "group_privacy",
    "parallel",
    "to_approx",
    "to_rdp",
    "zcdp_delta",
    "zcdp_epsilon",
]
