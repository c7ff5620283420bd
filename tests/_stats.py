"""Goodness-of-fit tools for the sampler tests: exact reference laws, chi-square, DKW/KS.

The reference pmfs/CDFs here are computed independently of privtab (closed forms or direct
numpy summation), so the tests compare the samplers with the mathematics, not with
privtab's own law classes.

* :func:`chi_square_pvalue` bins the integer support into roughly equal-probability bins
  (both tails pooled into the end bins, every bin with expected count ≥ 20) and returns the
  chi-square p-value.
* :func:`ks_statistic` is ``sup_x |F_n(x) − F(x)|`` over the integers; by the
  Dvoretzky–Kiefer–Wolfowitz inequality with Massart's constant,
  ``P(D > ε) ≤ 2 exp(−2nε²)`` for *every* distribution (discrete included), so
  :func:`ks_threshold` gives a test of exact size ≤ α.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import stats

ALPHA = 1e-6


@dataclass(frozen=True)
class IntegerLaw:
    """A law on the integers given by its CDF ``F(k) = P(X ≤ k)`` on an integer range."""

    name: str
    cdf: Callable[[NDArray[np.float64]], NDArray[np.float64]]
    lo: int  # P(X < lo) negligible (< 1e-12)
    hi: int  # P(X > hi) negligible
    mean: float
    variance: float
    fourth: float  # E (X − mean)^4


def discrete_laplace_law(t: float) -> IntegerLaw:
    """pmf ∝ exp(−|x|/t): closed forms (course Defs. 9–10)."""
    r = math.exp(-1.0 / t)

    def cdf(k: NDArray[np.float64]) -> NDArray[np.float64]:
        k = np.floor(np.asarray(k, dtype=np.float64))
        neg = np.exp(np.minimum(k, 0) / t) / (1 + r)
        pos = 1 - np.exp(-(np.maximum(k, 0) + 1) / t) / (1 + r)
        return np.where(k < 0, neg, pos)

    span = int(math.ceil(t * 30)) + 5
    var = 2 * r / (1 - r) ** 2
    # E X^4 for the two-sided geometric: 2 r (1 + 11 r + 11 r² + r³) / ((1−r)^4 (1+r))
    fourth = 2 * r * (1 + 11 * r + 11 * r * r + r**3) / ((1 - r) ** 4 * (1 + r))
    return IntegerLaw(f"DLap({t})", cdf, -span, span, 0.0, var, fourth)


def discrete_gaussian_law(sigma2: float) -> IntegerLaw:
    """pmf ∝ exp(−x²/(2σ²)): direct summation over |x| ≤ 40σ + 10 in float64."""
    sigma = math.sqrt(sigma2)
    span = int(40 * sigma) + 10
    xs = np.arange(-span, span + 1, dtype=np.float64)
    w = np.exp(-(xs * xs) / (2 * sigma2))
    p = w / w.sum()
    cum = np.cumsum(p)

    def cdf(k: NDArray[np.float64]) -> NDArray[np.float64]:
        k = np.floor(np.asarray(k, dtype=np.float64))
        idx = np.clip(k + span, -1, 2 * span).astype(np.int64)
        return np.where(idx < 0, 0.0, cum[np.maximum(idx, 0)])

    var = float((p * xs * xs).sum())
    fourth = float((p * xs**4).sum())
    return IntegerLaw(f"DG({sigma2})", cdf, -span, span, 0.0, var, fourth)


def geometric_law(t: float) -> IntegerLaw:
    """One-sided: P(G = k) = (1 − r) r^k, k ≥ 0."""
    r = math.exp(-1.0 / t)

    def cdf(k: NDArray[np.float64]) -> NDArray[np.float64]:
        k = np.floor(np.asarray(k, dtype=np.float64))
        return np.where(k < 0, 0.0, -np.expm1((np.maximum(k, 0) + 1) * math.log(r)))

    mean = r / (1 - r)
    var = r / (1 - r) ** 2
    # 4th central moment from the cumulants κ2 = var, κ4 = r(1 + 4r + r²)/(1 − r)⁴
    fourth = r * (1 + 4 * r + r * r) / (1 - r) ** 4 + 3 * var * var
    return IntegerLaw(f"Geom({t})", cdf, 0, int(math.ceil(t * 60)) + 5, mean, var, fourth)


def _bin_edges(law: IntegerLaw, n: int, max_bins: int = 200) -> NDArray[np.float64]:
    """Integer upper edges ``e_j`` of bins ``(e_{j−1}, e_j]`` with ≥ 20 expected each."""
    nbins = int(min(max_bins, max(2, n // 50)))
    qs = np.linspace(0, 1, nbins + 1)[1:-1]
    if law.hi - law.lo <= 400_000:
        support = np.arange(law.lo, law.hi + 1, dtype=np.float64)
        cdf = law.cdf(support)
        idx = np.searchsorted(cdf, qs)
        edges = np.unique(support[np.clip(idx, 0, support.size - 1)])
    else:  # huge support: bisection for each quantile
        edges_l = []
        for q in qs:
            a, b = float(law.lo), float(law.hi)
            while b - a > 1:
                mid = math.floor((a + b) / 2)
                if law.cdf(np.array([mid]))[0] >= q:
                    b = mid
                else:
                    a = mid
            edges_l.append(b)
        edges = np.unique(np.array(edges_l))
    # merge bins with small expected counts
    probs = np.diff(np.concatenate([[0.0], law.cdf(edges), [1.0]]))
    keep: list[float] = []
    acc = 0.0
    for e, pr in zip(edges, probs[:-1], strict=True):
        acc += pr
        if acc * n >= 20:
            keep.append(float(e))
            acc = 0.0
    if keep and (1 - law.cdf(np.array([keep[-1]]))[0]) * n < 20:
        keep.pop()
    return np.array(keep, dtype=np.float64)


def chi_square_pvalue(samples: NDArray[np.int64], law: IntegerLaw) -> float:
    """Chi-square goodness of fit with pooled tails (see module docstring)."""
    n = samples.size
    edges = _bin_edges(law, n)
    if edges.size == 0:
        return 1.0
    cdf = np.concatenate([[0.0], law.cdf(edges), [1.0]])
    expected = np.diff(cdf) * n
    observed = np.bincount(
        np.searchsorted(edges, samples.astype(np.float64), side="left"), minlength=edges.size + 1
    )
    stat = float(((observed - expected) ** 2 / expected).sum())
    return float(stats.chi2.sf(stat, df=edges.size))


def ks_statistic(samples: NDArray[np.int64], law: IntegerLaw) -> float:
    """``sup_k |F_n(k) − F(k)|`` over the integers in the samples' range and the law's."""
    s = np.sort(samples.astype(np.float64))
    lo = min(float(s[0]), float(law.lo))
    hi = max(float(s[-1]), float(law.hi))
    # (for huge ranges: F_n jumps at sample values and F is monotone between them)
    small = hi - lo <= 2_000_000
    ks = np.arange(lo, hi + 1) if small else np.unique(np.concatenate([s, s - 1]))
    fn = np.searchsorted(s, ks, side="right") / s.size
    return float(np.abs(fn - law.cdf(ks)).max())


def ks_threshold(n: int, alpha: float = ALPHA) -> float:
    """DKW–Massart: ``P(D > ε) ≤ 2e^{−2nε²}`` ⇒ reject when ``D > √(ln(2/α)/(2n))``."""
    return math.sqrt(math.log(2 / alpha) / (2 * n))


def fits(samples: NDArray[np.int64], law: IntegerLaw, alpha: float = ALPHA) -> tuple[bool, str]:
    """Both tests pass at level ``alpha`` each; returns (ok, diagnostic)."""
    p = chi_square_pvalue(samples, law)
    d = ks_statistic(samples, law)
    thr = ks_threshold(samples.size, alpha)
    return p >= alpha and d <= thr, f"{law.name}: chi2 p={p:.3g}, KS D={d:.4g} (thr {thr:.4g})"


def moments_ok(samples: NDArray[np.int64], law: IntegerLaw, z: float = 6.0) -> tuple[bool, str]:
    """Sample mean and variance within ``z`` standard errors of the exact values."""
    x = samples.astype(np.float64)
    n = x.size
    mean = float(x.mean())
    var = float(((x - law.mean) ** 2).mean())
    se_mean = math.sqrt(law.variance / n)
    se_var = math.sqrt(max(law.fourth - law.variance**2, 1e-300) / n)
    ok = abs(mean - law.mean) <= z * se_mean and abs(var - law.variance) <= z * se_var
    return ok, (
        f"{law.name}: mean {mean:.5g} (exact {law.mean:.5g} ± {se_mean:.2g}), "
        f"var {var:.6g} (exact {law.variance:.6g} ± {se_var:.2g})"
    )
