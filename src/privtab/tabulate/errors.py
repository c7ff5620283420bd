"""The error model of released counts: one noisy count, or a sum of i.i.d. noisy cells.

A SafeTab-P count is either one draw of the level's mechanism (a stage-2 total, a
TotalOnly total, one Sex × Age cell) or — for a T1 total of a group that received Sex × Age
cells — the sum of the group's ``k`` cells (post-processing; no privacy cost). Its noise is
then the ``k``-fold convolution of the cell noise. :func:`count_error` gives the variance,
the exact 95 % margin of error (the smallest integer ``m`` with ``P(|noise| ≤ m) ≥ 0.95``)
and the exact coverage ``P(|noise| ≤ m)`` of either kind. For one draw the mechanism's own
exact MOE is used (:meth:`privtab.mechanisms.NoiseMechanism.moe`); for sums, the pmf is
convolved numerically (FFT, float64) on a support holding all but 1e-15 of the mass — the
coverage is then exact to about 1e-12, far below any sampling error a user could observe.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from privtab.mechanisms import NoiseMechanism

__all__ = ["CountError", "count_error"]

LEVEL = Fraction(19, 20)


@dataclass(frozen=True)
class CountError:
    """Noise of a released count: variance, exact 95 % MOE and its exact coverage."""

    variance: float
    moe95: int
    coverage: float


def _noise_pmf(mech: NoiseMechanism) -> tuple[int, np.ndarray]:
    half = int(mech.moe(1 - Fraction(1, 10**15))) + 1
    xs = np.arange(-half, half + 1)
    law = mech.law  # type: ignore[attr-defined]
    p = np.asarray(law.pmf(xs), dtype=np.float64)
    return half, p / p.sum()


@lru_cache(maxsize=256)
def _sum_error(mech: NoiseMechanism, k: int) -> CountError:
    half, p = _noise_pmf(mech)
    size = k * (p.size - 1) + 1
    n = 1 << int(np.ceil(np.log2(size)))
    # the k-fold convolution in one step: the k-th power of the pmf's transform
    total = np.clip(np.fft.irfft(np.fft.rfft(p, n) ** k, n)[:size], 0.0, None)
    total = total / total.sum()
    centre = half * k
    # P(|S| <= m) for m = 0, 1, ...: centre + symmetric pairs
    sym = total[centre:] + total[centre::-1]
    sym[0] = total[centre]
    cover = np.cumsum(sym)
    m = int(np.searchsorted(cover, float(LEVEL) - 1e-13))
    return CountError(k * mech.variance, m, float(min(cover[m], 1.0)))


def count_error(mech: NoiseMechanism, cells: int = 1) -> CountError:
    """Error of one draw of ``mech`` (``cells = 1``) or of the sum of ``cells`` i.i.d. draws."""
    if cells < 1:
        raise ValueError(f"cells must be at least 1, got {cells}")
    if cells == 1:
        m = int(mech.moe(LEVEL))
        law = mech.law  # type: ignore[attr-defined]
        return CountError(float(mech.variance), m, float(law.coverage(m)))
    return _sum_error(mech, cells)
