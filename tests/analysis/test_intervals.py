"""Intervals: exact laws cross-checked independently, and coverage by simulation.

Coverage tests draw ≥ 10⁴ releases per mechanism with a fixed SeededSource and require
the empirical rate to be within 4 binomial standard errors of the exact coverage (which
is ≥ the nominal level; for continuous noise it equals it). With 10⁴ draws the test has
power against a coverage error of about 1.2 points at 90% (4 s.e. = 1.2%). The slow
variants use 2·10⁵ draws.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privtab.analysis import (
    combined_interval,
    difference_interval,
    noise_interval,
    ratio_interval,
    simultaneous_intervals,
    sum_interval,
)
from privtab.analysis.intervals import combination_interval, coordinate_level
from privtab.mechanisms import (
    DiscreteGaussian,
    Gaussian,
    Geometric,
    Laplace,
    LinearNoise,
    NoiseMechanism,
)
from privtab.random import SeededSource


def _sizes(default: int, large: int) -> list[object]:
    """The default size and a larger ``@pytest.mark.slow`` variant."""
    return [
        pytest.param(default, id=f"n{default}"),
        pytest.param(large, id=f"n{large}", marks=pytest.mark.slow),
    ]


MECHS: list[NoiseMechanism] = [
    Geometric(0.5),
    DiscreteGaussian(0.05),
    Laplace(0.5),
    Gaussian(0.05),
]


def _within(rate: float, p: float, n: int, k: float = 4.0) -> bool:
    return abs(rate - p) <= k * math.sqrt(max(p * (1 - p), 1e-12) / n) + 1e-12


def _geo_pmf(b: float, m: int) -> np.ndarray:
    """Two-sided geometric pmf on [−m, m], closed form (course Defs. 9–10)."""
    r = math.exp(-1 / b)
    x = np.arange(-m, m + 1)
    return (1 - r) / (1 + r) * r ** np.abs(x)


def _dg_pmf(s2: float, m: int) -> np.ndarray:
    x = np.arange(-m, m + 1, dtype=float)
    w = np.exp(-(x * x) / (2 * s2))
    return w / w.sum()


# ------------------------------------------------------------------ exact laws
def test_difference_of_geometrics_matches_direct_convolution() -> None:
    b, m = 2.0, 120
    law = LinearNoise([(1, Geometric.from_scale(b)), (-1, Geometric.from_scale(b))])
    p = np.convolve(_geo_pmf(b, m), _geo_pmf(b, m))
    x = np.arange(-2 * m, 2 * m + 1)
    for t in (0, 1, 3, 7, 15):
        assert law.central_mass(t) == pytest.approx(p[np.abs(x) <= t].sum(), abs=1e-12)
        assert law.central_mass(t, strict=True) == pytest.approx(p[np.abs(x) < t].sum(), abs=1e-12)
    moe = law.moe(0.9)
    assert p[np.abs(x) <= moe].sum() >= 0.9 > p[np.abs(x) <= moe - 1].sum()
    assert law.is_lattice
    assert law.variance == pytest.approx(2 * Geometric.from_scale(b).variance, rel=1e-12)


def test_weighted_discrete_gaussians_match_enumeration() -> None:
    """A fractional combination (inverse-variance weights) by brute-force enumeration."""
    s1, s2, w = 9.0, 4.0, 0.3
    m = 60
    a, b = DiscreteGaussian.from_sigma2(s1), DiscreteGaussian.from_sigma2(s2)
    law = LinearNoise([(w, a), (1 - w, b)])
    x = np.arange(-m, m + 1, dtype=float)
    vals = (w * x[:, None] + (1 - w) * x[None, :]).ravel()
    probs = (_dg_pmf(s1, m)[:, None] * _dg_pmf(s2, m)[None, :]).ravel()
    for t in (0.5, 1.0, 2.35, 4.0):
        assert law.central_mass(t) == pytest.approx(
            probs[np.abs(vals) <= t + 1e-12].sum(), abs=1e-10
        )


def test_continuous_combinations_match_quadrature() -> None:
    from scipy import integrate, stats

    la, ga = Laplace(1.0), Gaussian(0.5)  # b = 1, σ = 1
    law = LinearNoise([(1, la), (2, ga)])

    def f(u: float) -> float:
        return stats.laplace.pdf(u) * (
            stats.norm.cdf((1.5 - u) / 2) - stats.norm.cdf((-1.5 - u) / 2)
        )

    ref = integrate.quad(f, -50, 50, limit=200)[0]
    assert law.central_mass(1.5) == pytest.approx(ref, abs=1e-9)
    two = LinearNoise([(1, la), (1, Laplace(0.5))])  # Laplace(1) + Laplace(2): Gil-Pelaez

    def g(u: float) -> float:
        return stats.laplace.pdf(u) * (
            stats.laplace.cdf((2 - u) / 2) - stats.laplace.cdf((-2 - u) / 2)
        )

    assert two.central_mass(2.0) == pytest.approx(
        integrate.quad(g, -60, 60, limit=200)[0], abs=1e-7
    )


def test_integer_bounds_and_coverage_fields() -> None:
    iv = noise_interval(10, Geometric(1.0), 0.9)
    assert isinstance(iv.moe, int)
    assert iv.lower == 10 - iv.moe
    assert iv.coverage is not None
    assert iv.coverage >= 0.9
    g = Geometric(1.0)
    # the shortest symmetric integer interval: one less does not reach the level
    assert g.law.coverage(iv.moe - 1) < 0.9 <= g.law.coverage(iv.moe)
    s = sum_interval([3, 4, 5], g, 0.9)
    assert s.estimate == 12
    assert float(s.moe).is_integer()
    d = difference_interval(7, 3, g, g, 0.95)
    assert d.estimate == 4
    assert d.coverage is not None
    assert d.coverage >= 0.95


def test_coordinate_levels() -> None:
    from fractions import Fraction

    assert coordinate_level(0.95, 3, "bonferroni") == 1 - Fraction(1, 20) / 3
    lv = coordinate_level(0.95, 4, "exact")
    assert float(lv) ** 4 >= 0.95
    assert float(lv) ** 4 - 0.95 < 1e-15


# ------------------------------------------------------------------ coverage
@pytest.mark.parametrize("mech", MECHS, ids=lambda m: m.name)
@pytest.mark.parametrize("level", [0.9, 0.95])
@pytest.mark.parametrize("n", _sizes(10_000, 200_000))
def test_single_interval_coverage(mech: NoiseMechanism, level: float, n: int) -> None:
    e = mech.sample_noise(n, source=SeededSource(f"cov-{mech.name}-{level}"))
    truth = np.random.default_rng(7).integers(0, 1000, n)
    released = truth + e
    iv = noise_interval(0.0, mech, level)
    covered = np.abs(released - truth) <= iv.moe
    assert iv.coverage is not None
    assert iv.coverage >= level
    assert _within(float(covered.mean()), iv.coverage, n)


@pytest.mark.parametrize("mech", MECHS, ids=lambda m: m.name)
@pytest.mark.parametrize("method", ["exact", "bonferroni"])
@pytest.mark.parametrize("n", _sizes(10_000, 100_000))
def test_simultaneous_coverage(mech: NoiseMechanism, method: str, n: int) -> None:
    k = 5
    e = mech.sample_noise((n, k), source=SeededSource(f"sim-{mech.name}-{method}"))
    box = simultaneous_intervals(np.zeros(k), mech, 0.9, method)  # type: ignore[arg-type]
    rate = float((np.abs(e) <= box.moe).all(axis=1).mean())
    assert box.coverage >= 0.9
    assert rate >= 0.9 - 4 * math.sqrt(0.09 / n)
    assert _within(rate, box.coverage, n)


def test_combination_coverage() -> None:
    n = 10_000
    g, d = Geometric(0.5), DiscreteGaussian(0.05)
    src = SeededSource("combo")
    e = g.sample_noise((n, 3), source=src)
    iv = combination_interval([0, 0, 0], [1, 1, -1], g, 0.9)
    rate = float((np.abs(e[:, 0] + e[:, 1] - e[:, 2]) <= iv.moe).mean())
    assert iv.coverage is not None
    assert _within(rate, iv.coverage, n)
    # inverse-variance combination of two measurements with different discrete noises
    e1, e2 = g.sample_noise(n, source=src), d.sample_noise(n, source=src)
    ci = combined_interval([0, 0], [g, d], 0.95)
    w = d.variance / (g.variance + d.variance)
    rate = float((np.abs(w * e1 + (1 - w) * e2) <= ci.moe + 1e-9).mean())
    assert ci.coverage is not None
    assert _within(rate, ci.coverage, n)


@pytest.mark.parametrize("n", _sizes(100, 2_000))
def test_ratio_interval_coverage(n: int) -> None:
    g = Geometric(0.5)
    src = SeededSource("ratio")
    a_true, b_true = 30, 60
    ea, eb = g.sample_noise(n, source=src), g.sample_noise(n, source=src)
    # the interval depends on the released pair alone: each distinct pair is computed once
    # (the 2,000 draws hold 246 distinct pairs; ~8 ms per interval)
    covers: dict[tuple[int, int], bool] = {}
    hits = 0
    for pair in zip((a_true + ea).tolist(), (b_true + eb).tolist(), strict=True):
        if pair not in covers:
            r = ratio_interval(*pair, g, g, 0.9)
            covers[pair] = r.lower <= a_true / b_true <= r.upper
        hits += covers[pair]
    assert hits / n >= 0.9 - 4 * math.sqrt(0.09 / n)
    r = ratio_interval(30, 60, g, g, 0.9)
    assert r.lower < 0.5 < r.upper
    assert math.isinf(ratio_interval(3, -1, g, g, 0.9).upper)
