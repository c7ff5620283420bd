"""Combining several noisy measurements of the same target (course seed §4.1).

When independent noisy measurements share a target — a count released directly and as
the sum of its parts, a SafeTab stage-1 total and its stage-2 total — the minimum-variance
unbiased linear estimate weights each by its inverse variance. In matrix form, for
measurements ``y = A x + e`` with independent noise of variances ``vᵢ``, generalized least
squares gives ``x̂ = (AᵀWA)⁻¹AᵀWy`` (``W = diag(1/vᵢ)``) with covariance ``(AᵀWA)⁻¹``;
it is unbiased and, by Gauss–Markov, has the least variance among linear unbiased
estimators. Combining is post-processing: it costs no privacy.

Course Example 4.1 (Q10): from the geometric release ``(3, 0, −1, 4, 2, 4, 2, 7)`` with
ε = 1, Δ = 3 the married count is estimated from ``z₇`` (variance ``v``) and ``z₁ + z₄``
(variance ``2v``) as ``(2/3)·2 + (1/3)·7 = 11/3`` with variance ``(2/3)v = 11.8895`` —
the course's code drops the factor 2 of the two-sided geometric variance and prints
5.9448 (see ``docs/analysis.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privtab._json import Record
from privtab.random import RationalLike

if TYPE_CHECKING:
    from privtab.analysis.intervals import Interval
    from privtab.mechanisms import NoiseMechanism

__all__ = ["CombinedEstimate", "GLSEstimate", "combined_interval", "gls", "inverse_variance"]


@dataclass(frozen=True)
class CombinedEstimate(Record):
    """An inverse-variance combination: estimate, its variance and the weights used."""

    estimate: float
    variance: float
    weights: NDArray[np.float64]


def inverse_variance(values: ArrayLike, variances: ArrayLike) -> CombinedEstimate:
    """The inverse-variance weighted mean of unbiased independent measurements.

    Weights ``wᵢ = (1/vᵢ)/Σ(1/vⱼ)``, variance ``1/Σ(1/vⱼ)`` — the least variance of any
    unbiased linear combination (course seed §4.1, Example 4.1).

    >>> c = inverse_variance([2, 7], [1.0, 2.0])
    >>> round(c.estimate, 6), round(c.variance, 6)
    (3.666667, 0.666667)
    """
    y = np.atleast_1d(np.asarray(values, dtype=np.float64))
    v = np.atleast_1d(np.asarray(variances, dtype=np.float64))
    if y.shape != v.shape:
        raise ValueError("values and variances must have the same shape")
    if y.size == 0 or not np.all(v > 0) or not np.all(np.isfinite(v)):
        raise ValueError("variances must be positive and finite")
    inv = 1.0 / v
    w = inv / inv.sum()
    return CombinedEstimate(float(w @ y), float(1.0 / inv.sum()), w)


@dataclass(frozen=True)
class GLSEstimate:
    """GLS solution ``x̂`` of ``y = Ax + e`` and its covariance ``(AᵀWA)⁻¹``."""

    coef: NDArray[np.float64]
    covariance: NDArray[np.float64]

    def estimate(self, c: ArrayLike) -> tuple[float, float]:
        """``(cᵀx̂, cᵀ Cov c)``: a linear functional's estimate and variance."""
        cv = np.asarray(c, dtype=np.float64)
        return float(cv @ self.coef), float(cv @ self.covariance @ cv)


def gls(design: ArrayLike, values: ArrayLike, variances: ArrayLike) -> GLSEstimate:
    """Generalized least squares for independent measurements ``y = A x + e``.

    ``A`` must have full column rank (every unknown identified). The estimate is unbiased
    with covariance ``(AᵀWA)⁻¹``, the least among linear unbiased estimators.
    """
    a = np.atleast_2d(np.asarray(design, dtype=np.float64))
    y = np.asarray(values, dtype=np.float64).ravel()
    v = np.asarray(variances, dtype=np.float64).ravel()
    if a.shape[0] != y.size or y.size != v.size:
        raise ValueError("design rows, values and variances must have the same length")
    if not np.all(v > 0):
        raise ValueError("variances must be positive")
    w = 1.0 / v
    info = a.T @ (a * w[:, None])
    if np.linalg.matrix_rank(info) < a.shape[1]:
        raise ValueError("the design does not identify every unknown (rank deficient)")
    cov = np.asarray(np.linalg.inv(info), dtype=np.float64)
    coef = cov @ (a.T @ (w * y))
    return GLSEstimate(coef, cov)


def combined_interval(
    values: ArrayLike,
    mechanisms: Sequence[NoiseMechanism],
    level: RationalLike = 0.95,
    counts: Sequence[int] | None = None,
) -> Interval:
    """Inverse-variance combination of measurements of one target, with an interval
    from the exact law of the combined noise ``Σ wᵢ eᵢ``.

    ``counts[i]`` (default 1) says that measurement ``i`` is the sum of that many
    independent draws of ``mechanisms[i]`` (e.g. a total obtained by adding T2 cells).
    """
    from privtab.analysis.intervals import Interval
    from privtab.mechanisms import LinearNoise
    from privtab.mechanisms.laws import as_level

    y = np.atleast_1d(np.asarray(values, dtype=np.float64))
    ns = list(counts) if counts is not None else [1] * y.size
    if not (y.size == len(mechanisms) == len(ns)):
        raise ValueError("values, mechanisms and counts must have the same length")
    var = np.array([n * m.variance for n, m in zip(ns, mechanisms, strict=True)])
    comb = inverse_variance(y, var)
    terms: list[tuple[RationalLike, NoiseMechanism]] = []
    for w, n, m in zip(comb.weights.tolist(), ns, mechanisms, strict=True):
        terms += [(w, m)] * n
    law = LinearNoise(terms)
    moe = float(law.moe(level))
    return Interval(
        estimate=comb.estimate,
        lower=comb.estimate - moe,
        upper=comb.estimate + moe,
        level=float(as_level(level)),
        moe=moe,
        method="inverse-variance combination, exact law of the combined noise",
        coverage=law.central_mass(moe),
    )
