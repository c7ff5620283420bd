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

from privtab.semantics.allocation import Allocation, builtin_allocation, load_allocation
from privtab.semantics.release import load_release_guarantee
from privtab.semantics.summary import (
    epsilon_delta_curves,
    pbdp_curve,
    posterior_bounds,
    power_bounds,
    prior_posterior_bounds,
    tightest_power,
)

__all__ = [
    "Allocation",
    "builtin_allocation",
    "epsilon_delta_curves",
    "load_allocation",
    "load_release_guarantee",
    "pbdp_curve",
    "posterior_bounds",
    "power_bounds",
    "prior_posterior_bounds",
    "tightest_power",
]
