"""Using noisy outputs correctly: intervals, combining measurements, DP-aware tests,
post-processing and error estimates with extra budget (course seed §4–5).

Quick start::

    >>> from privtab.mechanisms import Laplace
    >>> from privtab.analysis import noise_interval
    >>> iv = noise_interval(4, Laplace(1.0), 0.9)        # course Q11: (1.70, 6.30)
    >>> round(iv.lower, 2), round(iv.upper, 2)
    (1.7, 6.3)

* :mod:`~privtab.analysis.intervals` — exact noise intervals, simultaneous intervals
  (Bonferroni and exact), sums/differences/ratios from the exact law of the combination;
* :mod:`~privtab.analysis.combine` — inverse-variance / GLS combination (Example 4.1);
* :mod:`~privtab.analysis.dptests` — the §4.4 test with the correct null law (exact or
  Monte Carlo) and the naive test's inflated size;
* :mod:`~privtab.analysis.postprocess` — non-negativity, rounding, total/parts
  consistency (no privacy cost; effect on bias stated);
* :mod:`~privtab.analysis.error_budget` — §4.3: spend budget on an error estimate,
  charged to the ledger;
* :mod:`~privtab.analysis.safetab` — the same on a SafeTab release (polars).

Heavy libraries (scipy, polars) are imported inside the functions that need them.
See ``docs/analysis.md``.
"""

from privtab.analysis.combine import combined_interval
from privtab.analysis.dptests import proportion_test
from privtab.analysis.intervals import (
    Interval,
    difference_interval,
    noise_interval,
    ratio_interval,
    simultaneous_intervals,
    sum_interval,
)
from privtab.analysis.safetab import (
    SafeTabRelease,
    add_intervals,
    combine_totals,
    consistent_t2,
    load_release,
)

__all__ = [
    "Interval",
    "SafeTabRelease",
    "add_intervals",
    "combine_totals",
    "combined_interval",
    "consistent_t2",
    "difference_interval",
    "load_release",
    "noise_interval",
    "proportion_test",
    "ratio_interval",
    "simultaneous_intervals",
    "sum_interval",
]
