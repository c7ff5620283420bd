"""Privacy semantics: what a budget means — power, Bayesian and per-attribute bounds.

For any guarantee privtab holds (pure, approximate, zCDP, Rényi, Gaussian DP) this package
answers "what can an attacker learn?":

* hypothesis-testing power bounds (:mod:`.power`, :mod:`.renyi`) and the exact trade-off
  of the discrete Gaussian (:mod:`.discrete_gaussian`);
* probabilistically-bounded DP / f-DP curves (:mod:`.pbdp`);
* Bayesian posterior-to-posterior, prior-to-posterior (complement-coherent by default,
  and their zCDP/RDP analogue in probability) and Pufferfish bounds (:mod:`.bayes`), with
  the course's Alice and Bob examples;
* fine-grained accounting of a per-query, per-level zCDP allocation (:mod:`.allocation`,
  the 2020 TopDown allocation built in with its published proportions, Tables 3–5) and
  its Scenarios A–H;
* tables (:mod:`.summary`) and self-contained HTML reports (:mod:`.report`).

Sources: ``semantics-of-dp-variants-2020-census.txt`` §4–8,
``inferential-limits-dp-pufferfish.txt`` §4–8, ``intro-to-dp-jsm2019-course.md`` §3.
See ``docs/semantics.md``. matplotlib is imported only when a report is drawn.
"""

from privtab.semantics.allocation import (
    Allocation,
    AllocationCell,
    AllocationError,
    Concern,
    UniverseProportions,
    builtin_allocation,
    load_allocation,
)
from privtab.semantics.bayes import (
    alice_premium_bound,
    bob_max_epsilon,
    counterfactual_odds_bound,
    data_probability_bounds,
    laplace_binary_sum_bounds,
    posterior_interval,
    posterior_ratio_tail_arbitrary_prior,
    posterior_ratio_tail_rest_known,
    probable_posterior_interval,
    pufferfish_odds_bounds,
    pure_posterior_ratio_bounds,
    randomized_response_bounds,
    randomized_response_flip,
)
from privtab.semantics.discrete_gaussian import (
    DiscreteGaussianTradeoff,
    discrete_gaussian_gap,
    discrete_gaussian_pmf,
    discrete_gaussian_power,
    discrete_gaussian_tradeoff,
)
from privtab.semantics.pbdp import (
    gaussian_plrv_tail,
    pbdp_delta_from_power,
    pbdp_delta_from_power_table,
    pbdp_delta_gdp,
    rdp_tail_bound,
    zcdp_tail_bound,
)
from privtab.semantics.power import (
    approx_power,
    gaussian_power,
    gdp_power,
    profile_power,
    pufferfish_power_bounds,
    pure_power,
    pure_power_bounds,
)
from privtab.semantics.release import (
    ReleaseError,
    guarantee_from_release,
    load_rdp_file,
    load_release_guarantee,
)
from privtab.semantics.renyi import rdp_power, rdp_type2_floor, zcdp_power
from privtab.semantics.summary import (
    BOUNDS,
    epsilon_delta_curves,
    pbdp_curve,
    posterior_bounds,
    power_bounds,
    prior_posterior_bounds,
    tightest_power,
)

__all__ = [
    "BOUNDS",
    "Allocation",
    "AllocationCell",
    "AllocationError",
    "Concern",
    "DiscreteGaussianTradeoff",
    "ReleaseError",
    "UniverseProportions",
    "alice_premium_bound",
    "approx_power",
    "bob_max_epsilon",
    "builtin_allocation",
    "counterfactual_odds_bound",
    "data_probability_bounds",
    "discrete_gaussian_gap",
    "discrete_gaussian_pmf",
    "discrete_gaussian_power",
    "discrete_gaussian_tradeoff",
    "epsilon_delta_curves",
    "gaussian_plrv_tail",
    "gaussian_power",
    "gdp_power",
    "guarantee_from_release",
    "laplace_binary_sum_bounds",
    "load_allocation",
    "load_rdp_file",
    "load_release_guarantee",
    "pbdp_curve",
    "pbdp_delta_from_power",
    "pbdp_delta_from_power_table",
    "pbdp_delta_gdp",
    "posterior_bounds",
    "posterior_interval",
    "posterior_ratio_tail_arbitrary_prior",
    "posterior_ratio_tail_rest_known",
    "power_bounds",
    "prior_posterior_bounds",
    "probable_posterior_interval",
    "profile_power",
    "pufferfish_odds_bounds",
    "pufferfish_power_bounds",
    "pure_posterior_ratio_bounds",
    "pure_power",
    "pure_power_bounds",
    "randomized_response_bounds",
    "randomized_response_flip",
    "rdp_power",
    "rdp_tail_bound",
    "rdp_type2_floor",
    "tightest_power",
    "zcdp_power",
    "zcdp_tail_bound",
]
