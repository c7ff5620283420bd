"""DP-aware tests (course §4.4): size by simulation, the naive test's inflation, p-values.

Size: under H₀ (n = 100, p₀ = 0.255) the rejection rate at α = 0.05 over ≥ 2,000
simulated tests must be within 3.5 binomial standard errors of α (continuous noise, where
the exact p-value is uniform) or at most α + 3.5 s.e. (integer noise: the statistic is
discrete, the test is conservative, and its exact size is computed and compared). The
naive test (ignoring the noise) rejects about twice as often: with Laplace ε = 0.5 the
noise s.d. is 2.83 against a binomial s.d. of 4.36, so its true size is
2Φ(−1.96·4.36/5.20) ≈ 0.10.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privtab.analysis import proportion_test
from privtab.analysis.dptests import monte_carlo_pvalue, proportion_pvalues, type_one_error
from privtab.mechanisms import DiscreteGaussian, Gaussian, Geometric, Laplace, NoiseMechanism
from privtab.random import SeededSource

SLOW_TESTS = pytest.param(20_000, id="n20000", marks=pytest.mark.slow)
N, P0, ALPHA = 100, 0.255, 0.05


def _naive_size(b: float) -> float:
    """Exact size of the naive 5% test under Binomial(100, .255) + Laplace(b) noise."""
    k = np.arange(N + 1)
    w = stats.binom.pmf(k, N, P0)
    t = stats.norm.ppf(1 - ALPHA / 2) * math.sqrt(N * P0 * (1 - P0))
    tail = stats.laplace.sf(t + N * P0 - k, scale=b) + stats.laplace.cdf(-t + N * P0 - k, scale=b)
    return float(np.sum(w * tail))


NAIVE_SIZE_LAPLACE = _naive_size(2.0)  # 0.0984: the course's naive test rejects twice as often


def _se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize("mech", [Laplace(0.5), Gaussian(0.0625)], ids=lambda m: m.name)
@pytest.mark.parametrize("tests", [4_000, SLOW_TESTS])
def test_exact_test_size_continuous(mech: NoiseMechanism, tests: int) -> None:
    r = type_one_error(N, P0, mech, tests=tests, source=SeededSource(f"size-{mech.name}"), seed=5)
    assert abs(r["dp_rejection_rate"] - ALPHA) <= 3.5 * _se(ALPHA, tests)
    naive_size = 2 * stats.norm.cdf(
        -1.96 * math.sqrt(N * P0 * (1 - P0)) / math.sqrt(N * P0 * (1 - P0) + mech.variance)
    )
    assert r["naive_rejection_rate"] > ALPHA + 5 * _se(ALPHA, tests)  # inflated
    # the naive test's true size is about that of its normal approximation
    assert abs(r["naive_rejection_rate"] - naive_size) < 0.02


@pytest.mark.parametrize("mech", [Geometric(0.5), DiscreteGaussian(0.0625)], ids=lambda m: m.name)
@pytest.mark.parametrize("tests", [4_000, SLOW_TESTS])
def test_exact_test_size_discrete(mech: NoiseMechanism, tests: int) -> None:
    r = type_one_error(N, P0, mech, tests=tests, source=SeededSource(f"size-{mech.name}"), seed=6)
    # exact size: P(p ≤ α) under H0 from the exact law of the statistic
    lo, hi = -60, N + 60
    t = np.arange(lo, hi + 1)
    pv = proportion_pvalues(t, N, P0, mech)
    pmf_noise = mech.noise_pmf(np.arange(-60, 61))
    law = np.convolve(stats.binom.pmf(np.arange(N + 1), N, P0), pmf_noise)
    size = float(law[pv <= ALPHA].sum())
    assert size <= ALPHA
    assert abs(r["dp_rejection_rate"] - size) <= 3.5 * _se(size, tests)
    assert r["naive_rejection_rate"] > ALPHA + 3 * _se(ALPHA, tests)


@pytest.mark.parametrize(
    ("tests", "reps"), [(2_000, 499), pytest.param(10_000, 2_000, marks=pytest.mark.slow)]
)
def test_monte_carlo_test_size(tests: int, reps: int) -> None:
    """The course's Monte Carlo test (with the +1 correction) over ≥ 2,000 simulated tests."""
    r = type_one_error(
        N, P0, Laplace(0.5), tests=tests, method="monte_carlo", reps=reps,
        source=SeededSource("mc-size"), seed=8,
    )  # fmt: skip
    assert r["dp_rejection_rate"] <= ALPHA + 3.5 * _se(ALPHA, tests)
    assert r["dp_rejection_rate"] >= ALPHA - 3.5 * _se(ALPHA, tests) - 1 / (reps + 1)
    assert r["naive_rejection_rate"] > ALPHA + 3 * _se(ALPHA, tests)  # inflated
    assert abs(r["naive_rejection_rate"] - NAIVE_SIZE_LAPLACE) <= 4 * _se(NAIVE_SIZE_LAPLACE, tests)


def test_exact_pvalue_cross_check_by_summation() -> None:
    """Exact p-value against an independent mid-level computation with scipy's laplace."""
    b = 2.0
    k = np.arange(N + 1)
    w = stats.binom.pmf(k, N, P0)
    d = abs(34.21 - N * P0)
    ref = float(
        np.sum(
            w
            * (
                stats.laplace.sf(d + N * P0 - k, scale=b)
                + stats.laplace.cdf(-d + N * P0 - k, scale=b)
            )
        )
    )
    assert proportion_test(34.21, N, P0, Laplace(0.5)).p_value == pytest.approx(ref, abs=1e-12)
    greater = proportion_test(34.21, N, P0, Laplace(0.5), alternative="greater").p_value
    ref_g = float(np.sum(w * stats.laplace.sf(34.21 - k, scale=b)))
    assert greater == pytest.approx(ref_g, abs=1e-12)


def test_discrete_pvalue_counts_ties() -> None:
    g = Geometric(0.5)
    # statistic exactly at the mean: every outcome is at least as extreme
    assert proportion_pvalues([25.5], N, P0, g)[0] == pytest.approx(1.0, abs=1e-12)
    p = proportion_pvalues([34, 35], N, P0, g)
    assert p[0] > p[1]


def test_monte_carlo_pvalue_rule() -> None:
    assert monte_carlo_pvalue(3.0, [0.0, 1.0, 4.0]) == pytest.approx(2 / 4)
    assert monte_carlo_pvalue(-3.0, [-4.0, 1.0], "less") == pytest.approx(2 / 3)
