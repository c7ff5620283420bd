"""The error model of released counts: one noisy count, or a sum of i.i.d. noisy cells.

A SafeTab-P count is either one draw of the level's mechanism (a stage-2 total, a
TotalOnly total, one Sex × Age cell) or — for a T1 total of a group that received Sex × Age
cells — the sum of the group's ``k`` cells (post-processing; no privacy cost). Its noise is
then the ``k``-fold convolution of the cell noise. :func:`count_error` gives the variance,
the exact 95 % margin of error (the smallest integer ``m`` with ``P(|noise| ≤ m) ≥ 0.95``)
and the exact coverage ``P(|noise| ≤ m)`` of either kind. For one draw the mechanism's own
exact MOE is used (:meth:`privtab.mechanisms.NoiseMechanism.moe`); for sums, the law of
the sum is :class:`privtab.mechanisms.LinearNoise` (the pmf's FFT raised to the ``k``-th
power, exact to about 1e-13, decided conservatively; at scales where that pmf would not
fit, the certified large-scale enclosure, whose MOE is never below the exact one).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from privtab.mechanisms import LinearNoise, NoiseMechanism

__all__ = ["CountError", "count_error"]

LEVEL = Fraction(19, 20)


@dataclass(frozen=True)
class CountError:
    """Noise of a released count: variance, exact 95 % MOE and its exact coverage."""

    variance: float
    moe95: int
    coverage: float


@lru_cache(maxsize=256)
def _sum_error(mech: NoiseMechanism, k: int) -> CountError:
    law = LinearNoise([(1, mech)] * k)
    m = int(law.moe(LEVEL))
    return CountError(k * mech.variance, m, law.central_mass(m))


def count_error(mech: NoiseMechanism, cells: int = 1) -> CountError:
    """Error of one draw of ``mech`` (``cells = 1``) or of the sum of ``cells`` i.i.d. draws."""
    if cells < 1:
        raise ValueError(f"cells must be at least 1, got {cells}")
    if cells == 1:
        m = int(mech.moe(LEVEL))
        return CountError(float(mech.variance), m, float(mech.law.coverage(m)))
    return _sum_error(mech, cells)
