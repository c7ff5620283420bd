"""Exact trade-off curve of the discrete Gaussian mechanism, from its pmf.

The discrete Gaussian ``N_ℤ(0, σ²)`` has pmf ``p(x) = e^{−x²/(2σ²)} / Z`` on the integers
(Canonne, Kamath & Steinke 2020), ``Z = Σ_{x∈ℤ} e^{−x²/(2σ²)}``. It is the noise of the
2020 TopDown algorithm (semantics seed §8.1) and of SafeTab's zCDP variant.

For a counting query with integer sensitivity Δ, the neighbouring output distributions are
``X`` and ``X + Δ``; for ``k`` such queries each shifted by Δ (the worst case of the
seed's §6.3 observations) the likelihood ratio depends on the data only through the
integer ``S = X₁ + … + X_k``, whose pmf is the k-fold convolution. The pmf of ``S`` is
log-concave, so the likelihood ratio ``p_S(s − kΔ)/p_S(s)`` is increasing in ``s`` and the
Neyman–Pearson tests reject for ``S ≥ t`` (randomising at the boundary). The trade-off is
therefore *exactly* the piecewise-linear curve through the points

    (α_t, power_t) = (P[S ≥ t], P[S ≥ t − kΔ]),   t ∈ ℤ.

**Truncation and error.** The pmf is evaluated on ``|x| ≤ M`` with
``M = ⌈σ √(2 · 75 ln 10)⌉ + 2``; the mass outside is at most
``2 e^{−(M+1)²/(2σ²)} / (1 − e^{−(M+1)/σ²})`` (each tail is dominated by a geometric
series because ``x² ≥ (M+1)² + 2(M+1)(x−M−1)`` for ``x > M``), i.e. below 1e−75, so the
computed trade-off differs from the exact one by floating-point rounding only (≤ 1e−13
in power at any level; survival probabilities are summed from the tail up so small levels
keep their relative accuracy). :func:`discrete_gaussian_tradeoff` reports the certified
truncation bound. The tests recompute the pmf with mpmath at 50 digits.

**Comparison with the continuous Gaussian.** ``N(0, σ²)`` noise gives the GDP trade-off
with ``μ = √k Δ/σ``. :func:`discrete_gaussian_gap` measures ``sup_α |power_DG − power_G|``;
for σ ≥ 1 it is below 1e−3 (documented table in ``docs/semantics.md``, asserted in the
tests), confirming the seed's observation that the two are nearly identical.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtr, ndtri

from privtab.accounting.guarantees import check_parameter
from privtab.semantics._levels import as_probability, shape_out
from privtab.semantics._numeric import FloatArray

__all__ = [
    "DiscreteGaussianTradeoff",
    "discrete_gaussian_gap",
    "discrete_gaussian_pmf",
    "discrete_gaussian_power",
    "discrete_gaussian_tradeoff",
]

_TAIL_DIGITS = 75
_MAX_SUPPORT = 4_000_000


def _support_radius(sigma: float) -> int:
    return math.ceil(sigma * math.sqrt(2.0 * _TAIL_DIGITS * math.log(10.0))) + 2


def _tail_bound(sigma: float, m: int) -> float:
    """Upper bound on the unnormalised mass ``Σ_{|x|>M} e^{−x²/(2σ²)}``."""
    s2 = sigma * sigma
    return 2.0 * math.exp(-((m + 1) ** 2) / (2.0 * s2)) / (-math.expm1(-(m + 1) / s2))


def discrete_gaussian_pmf(sigma: float) -> tuple[FloatArray, FloatArray, float]:
    """``(x, pmf, dropped)``: N_ℤ(0, σ²) on ``|x| ≤ M`` and a bound on the mass outside.

    The pmf is normalised over the truncated support; ``dropped`` bounds the exact mass
    of ``|x| > M`` (below 1e−75, see the module docstring).
    """
    s = check_parameter("sigma", sigma)
    if s == 0.0:
        raise ValueError("sigma must be positive")
    m = _support_radius(s)
    if 2 * m + 1 > _MAX_SUPPORT:
        raise ValueError(
            f"sigma={s:g} needs {float(2 * m + 1):.3g} support points (limit "
            f"{_MAX_SUPPORT:,}); "
            "at this scale the discrete and continuous Gaussians coincide to ~1e-12"
        )
    x = np.arange(-m, m + 1, dtype=np.float64)
    w = np.exp(-(x * x) / (2.0 * s * s))
    z = math.fsum(w.tolist())
    return x, w / z, _tail_bound(s, m) / z


def _survival(pmf: FloatArray) -> FloatArray:
    """``P[S ≥ x_i]`` for each support point, summed from the tail for accuracy."""
    upper = np.cumsum(pmf[::-1])[::-1]  # accurate where small (right tail)
    lower = np.concatenate([[0.0], np.cumsum(pmf)[:-1]])  # P[S < x_i], accurate left
    return np.where(upper <= 0.5, upper, 1.0 - lower)


@dataclass(frozen=True)
class DiscreteGaussianTradeoff:
    """Vertices of the exact trade-off of ``k`` discrete Gaussian queries.

    ``levels`` (increasing, from 0 to 1) and ``powers`` are the Neyman–Pearson vertices;
    the trade-off is their linear interpolation. ``truncation_error`` bounds the total
    variation between the truncated and exact distributions (both hypotheses), hence the
    error of any level or power read off the curve.
    """

    sigma: float
    sensitivity: int
    queries: int
    levels: FloatArray
    powers: FloatArray
    truncation_error: float

    @property
    def mu(self) -> float:
        """GDP parameter of the continuous Gaussian with the same σ: √k Δ/σ."""
        return math.sqrt(self.queries) * self.sensitivity / self.sigma

    @property
    def rho(self) -> float:
        """zCDP parameter of this mechanism: k Δ²/(2σ²) (Canonne, Kamath & Steinke)."""
        return self.queries * self.sensitivity**2 / (2.0 * self.sigma**2)

    def power(self, alpha: ArrayLike) -> float | FloatArray:
        """Maximum power at level ``α`` (exact, by linear interpolation of the vertices)."""
        a = as_probability("alpha", alpha)
        return shape_out(np.interp(a, self.levels, self.powers), alpha)


def discrete_gaussian_tradeoff(
    sigma: float, sensitivity: int = 1, queries: int = 1
) -> DiscreteGaussianTradeoff:
    """Exact trade-off of ``queries`` discrete Gaussian N_ℤ(0, σ²) counts, shift Δ each.

    See the module docstring for the method and its certified truncation error.
    """
    if int(sensitivity) != sensitivity or sensitivity < 1:
        raise ValueError(f"sensitivity must be a positive integer, got {sensitivity!r}")
    if int(queries) != queries or queries < 1:
        raise ValueError(f"queries must be a positive integer, got {queries!r}")
    _, pmf, dropped = discrete_gaussian_pmf(sigma)
    pmf_s = pmf
    for _ in range(int(queries) - 1):
        pmf_s = np.convolve(pmf_s, pmf)
        if pmf_s.size > _MAX_SUPPORT:
            raise ValueError(f"{queries} queries at sigma={sigma:g} exceed the support limit")
    pmf_s = pmf_s / math.fsum(pmf_s.tolist())
    sf = np.concatenate([_survival(pmf_s), [0.0]])  # P[S ≥ x_i], i = 0..n (x_n past the end)
    c = int(queries) * int(sensitivity)
    # threshold x_i: level P[S ≥ x_i] = sf[i], power P[S ≥ x_i − c] = sf[i − c] (1 if i < c)
    pw = np.concatenate([np.ones(min(c, sf.size)), sf[: max(sf.size - c, 0)]])
    levels, powers = sf[::-1], pw[::-1]
    return DiscreteGaussianTradeoff(
        sigma=float(sigma),
        sensitivity=int(sensitivity),
        queries=int(queries),
        levels=np.ascontiguousarray(levels),
        powers=np.maximum.accumulate(np.ascontiguousarray(powers)),
        truncation_error=float(queries) * dropped,
    )


def discrete_gaussian_power(
    sigma: float, alpha: ArrayLike, sensitivity: int = 1, queries: int = 1
) -> float | FloatArray:
    """Exact maximum power at level ``α`` against the discrete Gaussian mechanism."""
    return discrete_gaussian_tradeoff(sigma, sensitivity, queries).power(alpha)


def discrete_gaussian_gap(
    sigma: float, sensitivity: int = 1, queries: int = 1, points: int = 20_001
) -> float:
    """``sup_α |power_DG(α) − Φ(Φ⁻¹(α) + μ)|`` with ``μ = √k Δ/σ`` (dense α grid).

    The grid mixes ``points`` linear and log-spaced levels (down to 1e−12) and every
    Neyman–Pearson vertex, so both the vertices and the segment interiors are covered.
    """
    tr = discrete_gaussian_tradeoff(sigma, sensitivity, queries)
    grid = np.unique(
        np.concatenate(
            [
                np.linspace(0.0, 1.0, points),
                np.geomspace(1e-12, 1.0, points),
                tr.levels,
                0.5 * (tr.levels[1:] + tr.levels[:-1]),
            ]
        )
    )
    dg = np.asarray(tr.power(grid))
    with np.errstate(divide="ignore"):
        g = np.where(grid <= 0, 0.0, np.where(grid >= 1, 1.0, ndtr(ndtri(grid) + tr.mu)))
    return float(np.max(np.abs(dg - g)))
