"""Oracle tests: the course's numbers (intro-to-dp-jsm2019-course.md §4–5).

Expected values are the independently recomputed ones (seed-checks, ids 004.*), which
agree with the course's printed roundings except where the course is wrong (Example 4.1's
combined variance: the course code drops the factor 2 of the geometric variance).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privtab.accounting import PrivacyLedger, PureDP
from privtab.accounting.composition import poisson_subsample
from privtab.analysis import noise_interval, proportion_test, simultaneous_intervals
from privtab.analysis.combine import gls, inverse_variance
from privtab.analysis.error_budget import release_error_estimate
from privtab.analysis.intervals import laplace_max_error_bound
from privtab.mechanisms import Geometric, Laplace
from privtab.random import SeededSource


def test_q11_laplace_ci_eps1() -> None:
    """Course §4.2 Q11: ε = 1, z = 4, 90% CI (1.7, 6.3) = 4 ± ln 10."""
    iv = noise_interval(4, Laplace(1.0), 0.9)
    assert iv.lower == pytest.approx(1.6974149070059543, abs=1e-9)
    assert iv.upper == pytest.approx(6.302585092994046, abs=1e-9)
    assert (round(iv.lower, 2), round(iv.upper, 2)) == (1.70, 6.30)


def test_q12_laplace_ci_eps10() -> None:
    """Course §4.2 Q12: ε = 10 → (3.77, 4.23)."""
    iv = noise_interval(4, Laplace(10.0), 0.9)
    assert iv.lower == pytest.approx(3.7697414907005955, abs=1e-9)
    assert iv.upper == pytest.approx(4.2302585092994045, abs=1e-9)
    assert (round(iv.lower, 2), round(iv.upper, 2)) == (3.77, 4.23)


def test_q13_simultaneous_bound() -> None:
    """Course §4.2 Thm. 4.1 / Q13: k = 3, Δ = 3, ε = 1, β = .05 → 12.28 and the box."""
    assert laplace_max_error_bound(3, 1, 3, 0.05) == pytest.approx(12.283033686666302, abs=1e-12)
    box = simultaneous_intervals([5, -3, 1], Laplace(1.0, 3), 0.95, "bonferroni")
    np.testing.assert_allclose(box.moe, 12.283033686666302, atol=1e-8)
    lower = [-7.283033686666302, -15.283033686666302, -11.283033686666302]
    upper = [17.2830336866663, 9.283033686666302, 13.283033686666302]
    np.testing.assert_allclose(box.lower, lower, atol=1e-8)
    np.testing.assert_allclose(box.upper, upper, atol=1e-8)
    assert box.coverage >= 0.95
    # the exact (i.i.d.) box is narrower and still covers with probability exactly 0.95
    exact = simultaneous_intervals([5, -3, 1], Laplace(1.0, 3), 0.95, "exact")
    assert exact.moe[0] < box.moe[0]
    assert exact.coverage == pytest.approx(0.95, abs=1e-9)
    assert exact.moe[0] == pytest.approx(-3 * math.log(1 - 0.95 ** (1 / 3)), abs=1e-8)


def test_example_4_1_combined_estimate() -> None:
    """Course §4.1 Example 4.1 / Q10: estimate 11/3, variance (2/3)·2(1−p)/p² = 11.8895
    (the course code's (1−p)/p² gives 5.9448: it drops the two-sided factor 2)."""
    z = np.array([3, 0, -1, 4, 2, 4, 2, 7])
    g = Geometric(1.0, sensitivity=3)
    p = 1 - math.exp(-1 / 3)
    assert p == pytest.approx(0.28346868942621073, abs=1e-12)
    v = g.variance
    assert v == pytest.approx(17.834255192513016, rel=1e-12)  # 2(1−p)/p²
    c = inverse_variance([z[6], z[0] + z[3]], [v, 2 * v])
    assert c.estimate == pytest.approx(3.6666666666666665, abs=1e-12)
    np.testing.assert_allclose(c.weights, [2 / 3, 1 / 3], atol=1e-12)
    assert c.variance == pytest.approx(11.889503461675343, rel=1e-12)
    as_coded = inverse_variance([2, 7], [(1 - p) / p**2, 2 * (1 - p) / p**2])
    assert as_coded.variance == pytest.approx(5.944751730837671, rel=1e-12)
    # GLS on all eight measurements: same target, smaller variance still
    a = np.vstack([np.eye(6), [[1, 0, 0, 1, 0, 0], [0, 0, 0, 1, 1, 1]]])
    est, var = gls(a, z, np.full(8, v)).estimate([1, 0, 0, 1, 0, 0])
    assert var < c.variance
    assert np.isfinite(est)


def test_sampling_amplification() -> None:
    """Course §5.2: β = 0.05, ε = 1 → ln(1 + 0.05(e − 1)) = 0.0824."""
    g = poisson_subsample(PureDP(1.0), 0.05)
    assert isinstance(g, PureDP)
    assert g.epsilon == pytest.approx(0.08242211287901112, abs=1e-12)
    assert round(g.epsilon, 4) == 0.0824


def test_example_4_3_pvalues() -> None:
    """Course §4.4 Example 4.3: z = 1.9983; naive p 0.0457; exact DP p 0.09224."""
    r = proportion_test(34.21, 100, 0.255, Laplace(0.5))
    assert r.statistic == pytest.approx(1.9983425162399295, abs=1e-9)
    assert r.naive_p_value == pytest.approx(0.04567953909627406, abs=1e-9)
    assert r.p_value == pytest.approx(0.0922425639107668, abs=1e-10)
    mc = proportion_test(
        34.21, 100, 0.255, Laplace(0.5), method="monte_carlo", reps=40_000,
        source=SeededSource(43), seed=43,
    )  # fmt: skip
    se = math.sqrt(0.0922 * 0.9078 / 40_000)
    assert abs(mc.p_value - 0.0922425639107668) < 4 * se


def test_q15_q16_error_estimate_charged() -> None:
    """Course §4.3 Q15–16: release (3 − 0) + Lap(1) with ε = 1, 90% CI ± ln 10; the total
    privacy-loss budget becomes 2 (sequential composition)."""
    ledger = PrivacyLedger(PureDP(2.0))
    ledger.charge(PureDP(1.0), "published counts (Laplace, ε = 1)")
    with pytest.warns(UserWarning, match="private: false"):
        est = release_error_estimate(
            3, 0, Laplace(1.0), ledger, level=0.9, source=SeededSource(42), allow_insecure=True
        )
    assert est.moe == pytest.approx(math.log(10), abs=1e-9)
    assert est.private is False
    assert ledger.spent == PureDP(2.0)
    assert est.upper[0] - est.lower[0] == pytest.approx(2 * math.log(10), abs=1e-9)
