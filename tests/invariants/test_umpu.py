"""The semi-private UMPU odds-ratio test (seed §5.3, Definition 35, Lemma 36, Theorem 37).

Simulations use fixed seeds with tolerances of ≥ 4.5 standard errors (a false failure
would have probability < 10⁻⁵ under a random seed).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from math import comb

import numpy as np
import pytest
from scipy import stats

from privtab.invariants import OddsRatioTest, TradeOff
from privtab.invariants.tradeoff import gaussian_tradeoff
from privtab.invariants.umpu import (
    GaussianCND,
    Margins2x2,
    TradeOffCND,
    TulapCND,
    fisher_exact_umpu_power,
    fisher_nch_pmf,
    naive_test,
)
from privtab.mechanisms import InsecureSourceError
from privtab.random import RandomSource

Seeded = Callable[[int], RandomSource]

# releases here use seeded (test-only) sources on purpose
pytestmark = pytest.mark.filterwarnings("ignore::privtab.mechanisms.InsecureReleaseWarning")
M = Margins2x2(20, 30, 25)


def test_fisher_pmf_exact_rational() -> None:
    m = Margins2x2(5, 7, 6)
    theta = Fraction(3, 2)
    xs = range(max(0, m.c1 - m.r2), min(m.r1, m.c1) + 1)
    w = [comb(m.r1, x) * comb(m.r2, m.c1 - x) * theta**x for x in xs]
    exact = [float(v / sum(w)) for v in w]
    x, p = fisher_nch_pmf(1.5, m)
    assert x.tolist() == list(xs)
    assert np.allclose(p, exact, rtol=1e-13, atol=0)


def test_fisher_pmf_matches_scipy() -> None:
    for theta in (0.3, 1.0, 2.5, 10.0):
        x, p = fisher_nch_pmf(theta, M)
        ref = stats.nchypergeom_fisher(M.n, M.r1, M.c1, theta).pmf(x)
        assert np.allclose(p, ref, atol=1e-12)


def test_tulap_cdf_brute_force_and_lemma36() -> None:
    eps = 0.8
    xs = np.linspace(-7.3, 7.3, 147)
    b = math.exp(-eps)
    z = np.arange(-400, 401)
    pz = (1 - b) / (1 + b) * b ** np.abs(z)
    brute = np.array([(pz * np.clip(x - z + 0.5, 0, 1)).sum() for x in xs])
    tul = TulapCND(eps).cdf(xs)
    assert np.abs(tul - brute).max() < 1e-14
    lemma36 = TradeOffCND(TradeOff.pure(eps)).cdf(xs)
    assert np.abs(tul - lemma36).max() < 1e-13
    assert np.allclose(tul + TulapCND(eps).cdf(-xs), 1.0, atol=1e-15)  # symmetric


@pytest.mark.parametrize("cnd", [TulapCND(0.5), TulapCND(2.0), GaussianCND(0.7)])
def test_cnd_matches_tradeoff_at_shift_one(cnd: TulapCND | GaussianCND) -> None:
    # Definition 35(2): thresholds t give α = 1 − F(t), β = F(t − 1) on the trade-off curve
    ts = np.linspace(-3.0, 4.0, 71)
    alpha = 1 - cnd.cdf(ts)
    beta = cnd.cdf(ts - 1)
    if isinstance(cnd, TulapCND):
        expected = TradeOff.pure(cnd.epsilon)(alpha)
    else:
        expected = gaussian_tradeoff(cnd.mu, alpha)
    assert np.allclose(beta, expected, atol=1e-12)


@pytest.mark.parametrize("cnd", [TulapCND(1.0), GaussianCND(1.0)])
def test_size_and_p_value_consistency(cnd: TulapCND | GaussianCND) -> None:
    t = OddsRatioTest(cnd)
    m = t.critical_value(M, 0.05)
    assert t.rejection_probability(m, 1.0, M) == pytest.approx(0.05, abs=1e-12)
    assert t.p_value(m, M) == pytest.approx(0.05, abs=1e-12)
    for stat in np.linspace(m - 3, m + 3, 13):
        assert (t.p_value(stat, M) <= 0.05) == (stat >= m)


def test_p_value_uniform_under_null(seeded: Seeded) -> None:
    # conditional on the margins, p(T) ~ U(0, 1) at θ = θ₀ (F continuous)
    t = OddsRatioTest(TulapCND(1.0))
    src = seeded(31)
    x, p = fisher_nch_pmf(1.0, M)
    n = 4000
    rng = np.random.default_rng(32)
    draws = rng.choice(x, size=n, p=p)
    stats_t = draws + TulapCND(1.0).sample(n, src)
    pvals = np.array([t.p_value(s, M) for s in stats_t])
    assert stats.kstest(pvals, "uniform").pvalue > 1e-5


def _simulated_size(test: OddsRatioTest, n_tables: int, seed: int, seeded: Seeded) -> float:
    """Unconditional size: rows ~ Bin(20, p), Bin(30, p) with a common p (θ = 1)."""
    rng = np.random.default_rng(seed)
    src = seeded(seed + 1)
    x11 = rng.binomial(20, 0.4, n_tables)
    x21 = rng.binomial(30, 0.4, n_tables)
    noise = test.cnd.sample(n_tables, src)
    rejects = 0
    for a, c, e in zip(x11, x21, noise, strict=True):
        margins = Margins2x2(20, 30, int(a + c))
        if test.p_value(float(a + e), margins) <= 0.05:
            rejects += 1
    return rejects / n_tables


@pytest.mark.parametrize("cnd", [TulapCND(1.0), GaussianCND(0.5)])
def test_size_under_null_by_simulation(cnd: TulapCND | GaussianCND, seeded: Seeded) -> None:
    n = 6000
    rate = _simulated_size(OddsRatioTest(cnd), n, 41, seeded)
    assert abs(rate - 0.05) < 4.5 * math.sqrt(0.05 * 0.95 / n)


def test_power_semi_private_beats_naive() -> None:
    for eps in (0.5, 1.0, 2.0):
        semi = OddsRatioTest(TulapCND(eps))
        naive = naive_test(TulapCND(eps), 3)
        assert naive.cnd == TulapCND(eps / 3)
        prev = 0.05
        for theta in (1.5, 2.0, 3.0, 5.0):
            ps, pn = semi.power(theta, M, 0.05), naive.power(theta, M, 0.05)
            fisher = fisher_exact_umpu_power(theta, M, 0.05)
            assert 0.05 < pn < ps < fisher
            assert ps > prev
            prev = ps


def test_large_epsilon_recovers_fisher_tocher() -> None:
    # ε → ∞: Tulap → U(−½, ½), and thresholding x + U is the randomised UMPU test
    t = OddsRatioTest(TulapCND(60.0))
    for theta in (1.0, 2.0, 4.0):
        assert t.power(theta, M, 0.05) == pytest.approx(
            fisher_exact_umpu_power(theta, M, 0.05), abs=1e-12
        )


def test_alternative_less_by_symmetry() -> None:
    # swapping the columns maps θ to 1/θ: x11' = r1 − x11 with margins (r1, r2, n − c1)
    less = OddsRatioTest(TulapCND(1.0), alternative="less")
    greater = OddsRatioTest(TulapCND(1.0), alternative="greater")
    swapped = Margins2x2(M.r1, M.r2, M.n - M.c1)
    for theta in (0.2, 0.5, 1.0):
        assert less.power(theta, M, 0.05) == pytest.approx(
            greater.power(1 / theta, swapped, 0.05), abs=1e-10
        )


def test_run_releases_only_the_statistic(seeded: Seeded) -> None:
    t = OddsRatioTest(TulapCND(1.0))
    table = np.array([[15, 5], [6, 14]])
    res = t.run(table, 0.05, source=seeded(5), allow_insecure=True)
    assert res.private is False
    assert res.margins == Margins2x2(20, 20, 21)
    assert res.reject == (res.p_value <= 0.05)
    d = res.to_dict()
    assert set(d) >= {"statistic", "p_value", "reject", "critical_value", "guarantee", "private"}
    assert "3 replacements" in d["guarantee"]
    with pytest.raises(InsecureSourceError, match="refuses"):
        t.run(table, 0.05, source=seeded(5))
    with pytest.raises(ValueError, match="2 × 2"):
        t.run(np.ones((2, 3), dtype=int))


def test_input_validation() -> None:
    with pytest.raises(ValueError, match="exceeds the total"):
        Margins2x2(2, 3, 6)
    with pytest.raises(ValueError, match="alpha"):
        OddsRatioTest(TulapCND(1.0)).critical_value(M, 1.5)
    with pytest.raises(ValueError, match="theta"):
        fisher_nch_pmf(0.0, M)
    with pytest.raises(ValueError, match="symmetric"):
        TradeOffCND(TradeOff.from_distributions([0.5, 0.3, 0.2], [0.1, 0.3, 0.6]))


@pytest.mark.slow
def test_size_and_power_by_simulation_slow(seeded: Seeded) -> None:
    n = 100_000
    rate = _simulated_size(OddsRatioTest(TulapCND(1.0)), n, 77, seeded)
    assert abs(rate - 0.05) < 4.5 * math.sqrt(0.05 * 0.95 / n)
    # conditional power at θ = 3 by simulation vs the exact formula
    t = OddsRatioTest(TulapCND(1.0))
    x, p = fisher_nch_pmf(3.0, M)
    rng = np.random.default_rng(78)
    draws = rng.choice(x, size=n, p=p) + TulapCND(1.0).sample(n, seeded(79))
    m = t.critical_value(M, 0.05)
    emp = float(np.mean(draws >= m))
    exact = t.power(3.0, M, 0.05)
    assert abs(emp - exact) < 4.5 * math.sqrt(exact * (1 - exact) / n)
