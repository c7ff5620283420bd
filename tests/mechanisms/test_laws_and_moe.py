"""Exact noise laws: MOE vs brute-force pmf summation, the seeds' MOE formulas, CIs.

Seed values are copied from shared/seed-checks (recomputed independently there):
SafeTab seed ``safetab-detailed-dhc-race-ethnicity.txt`` App. D.3 eq. (36)/Cor. 2 (ids
002.cor2.*), App. E.2/Cor. 4 (002.cor4.*), App. D.3/E.2 cell MOEs (002.moe.*); course seed
``intro-to-dp-jsm2019-course.md`` Defs. 9–10, Q4, Q11–Q14 (ids 004.*).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from privtab.mechanisms import DiscreteGaussian, Gaussian, Geometric, Laplace
from privtab.mechanisms.calibration import paper_discrete_gaussian_moe, paper_geometric_moe
from privtab.mechanisms.laws import DiscreteGaussianLaw, DiscreteLaplaceLaw

LN20 = math.log(20.0)


def _brute_moe(pmf_abs: list[mpmath.mpf], level: float) -> int:
    """Smallest m with Σ_{|x|≤m} p(x) ≥ level, from P(|X| = k) listed for k = 0, 1, …"""
    total = mpmath.mpf(0)
    target = mpmath.mpf(repr(level))
    for m, p in enumerate(pmf_abs):
        total += p
        if total >= target:
            return m
    raise AssertionError("support too short")


def _laplace_abs_pmf(t: float, kmax: int) -> list[mpmath.mpf]:
    mpmath.mp.prec = 200
    r = mpmath.exp(-1 / mpmath.mpf(t))
    c = (1 - r) / (1 + r)
    return [c] + [2 * c * r**k for k in range(1, kmax)]


def _gauss_abs_pmf(sigma2: float, kmax: int) -> list[mpmath.mpf]:
    mpmath.mp.prec = 200
    s2 = mpmath.mpf(sigma2)
    w = [mpmath.exp(-mpmath.mpf(k * k) / (2 * s2)) for k in range(kmax)]
    z = w[0] + 2 * mpmath.fsum(w[1:])
    return [w[0] / z] + [2 * x / z for x in w[1:]]


@pytest.mark.parametrize("t", [0.3, 1.0, 2.3366574048673385, 7.7, 55.0])
@pytest.mark.parametrize("level", [0.5, 0.9, 0.95, 0.99])
def test_laplace_moe_matches_brute_force(t: float, level: float) -> None:
    pmf = _laplace_abs_pmf(t, int(60 * t) + 20)
    assert DiscreteLaplaceLaw(t).moe_index(level) == _brute_moe(pmf, level)


@pytest.mark.parametrize("sigma", [0.3, 0.5, 1.0, 3.7, 10.0, 29.95, 120.0])
@pytest.mark.parametrize("level", [0.5, 0.9, 0.95, 0.99])
def test_gaussian_moe_matches_brute_force(sigma: float, level: float) -> None:
    pmf = _gauss_abs_pmf(sigma * sigma, int(12 * sigma) + 12)
    assert DiscreteGaussianLaw(sigma * sigma).moe_index(level) == _brute_moe(pmf, level)


# 002.cor2.*: b = (MOE+1)/ln 20; paper MOE = MOE, exact = MOE + 1, exact coverage at MOE.
COR2 = {
    1: 0.9182743997631557,
    2: 0.9269221208604089,
    3: 0.9321053824311226,
    6: 0.9394613150929668,
    11: 0.9437911037126827,
    20: 0.9464396877462822,
    50: 0.9485319258797522,
    100: 0.9492585364687519,
}


@pytest.mark.parametrize(("moe", "coverage"), sorted(COR2.items()))
def test_safetab_cor2_is_off_by_one(moe: int, coverage: float) -> None:
    b = (moe + 1) / LN20
    assert paper_geometric_moe(b) == moe  # what the paper prints
    law = DiscreteLaplaceLaw(b)
    assert law.moe_index(0.95) == moe + 1  # the truth
    assert law.coverage(moe) == pytest.approx(coverage, abs=1e-12)
    assert Geometric.from_scale(b).moe(0.95) == moe + 1


@pytest.mark.parametrize("moe", [1, 2, 3, 6, 11, 20, 50, 100])
def test_safetab_cor4_holds_at_calibrated_points(moe: int) -> None:
    """002.cor4.*: at σ² = MOE²/3.84 (ρ = 1.92/MOE²) ⌊1.96σ⌋ equals the exact MOE."""
    sigma2 = moe * moe / 3.84
    assert paper_discrete_gaussian_moe(math.sqrt(sigma2)) == moe
    assert DiscreteGaussianLaw(sigma2).moe_index(0.95) == moe
    assert DiscreteGaussian(1.92 / moe**2).moe() == moe


@pytest.mark.parametrize(("sigma", "paper", "exact"), [(0.5, 0, 1), (29.95, 58, 59)])
def test_floor_196_sigma_is_not_a_bound_in_general(sigma: float, paper: int, exact: int) -> None:
    assert paper_discrete_gaussian_moe(sigma) == paper
    assert DiscreteGaussianLaw(sigma * sigma).moe_index(0.95) == exact


# 002.moe.*: the paper's per-cell MOE formulas, rho_i the level's total budget, s = 9
# characteristic cells, gamma = 0.1 (Sex x Age cells) or 0 (TotalOnly totals).
CELL_MOES = [
    # (mechanism, rho_i, gamma, expected paper MOE)
    ("geo", 4.279617533648558, 0.1, 6),
    ("geo", 4.279617533648558, 0.0, 5),
    ("geo", 2.4964435612949925, 0.1, 11),
    ("geo", 2.4964435612949925, 0.0, 10),
    ("geo", 0.5873984850105864, 0.1, 50),
    ("geo", 0.5873984850105864, 0.0, 45),
    ("geo", 4.27, 0.1, 6),
    ("geo", 2.49, 0.1, 11),
    ("geo", 0.59, 0.0, 45),
    ("dg", 0.5333333333333333, 0.1, 6),
    ("dg", 0.5333333333333333, 0.0, 5),
    ("dg", 0.15867768595041323, 0.1, 11),
    ("dg", 0.15867768595041323, 0.0, 10),
    ("dg", 0.00768, 0.1, 50),
    ("dg", 0.00768, 0.0, 47),
    ("dg", 0.534, 0.1, 5),
    ("dg", 0.159, 0.1, 10),
    ("dg", 0.008, 0.1, 48),
    ("dg", 0.008, 0.0, 46),
]


@pytest.mark.parametrize(("mech", "rho_i", "gamma", "expected"), CELL_MOES)
def test_safetab_cell_moes(mech: str, rho_i: float, gamma: float, expected: int) -> None:
    s = 9
    share = (1 - gamma) * rho_i
    if mech == "geo":
        b = s / share
        assert paper_geometric_moe(b) == expected
        # the exact MOE is never smaller than the paper's (its floor is one short)
        assert DiscreteLaplaceLaw(b).moe_index(0.95) >= expected
    else:
        sigma = math.sqrt(s / (2 * share))
        assert paper_discrete_gaussian_moe(sigma) == expected


@pytest.mark.parametrize(
    ("eps", "sens", "variance"),
    [(1.0, 1, 1.8413471884155845), (1.0, 3, 17.834255192513016), (0.5, 1, 7.835396178065528)],
)
def test_geometric_variance_course_defs_9_10(eps: float, sens: int, variance: float) -> None:
    """004.geom.var.*: 2(1−p)/p², p = 1 − e^{−ε/Δ} (course Defs. 9–10)."""
    assert Geometric(eps, sens).variance == pytest.approx(variance, rel=1e-13)


@pytest.mark.parametrize(("eps", "sens", "variance"), [(1, 3, 18.0), (10, 3, 0.18), (1, 1, 2.0)])
def test_laplace_variance_course_q4_q14(eps: float, sens: float, variance: float) -> None:
    """004.q4.*, 004.q14: 2(Δ/ε)² (the lattice law's variance is within 2⁻⁷⁰ of it)."""
    assert Laplace(eps, sens).variance == pytest.approx(variance, rel=1e-12)


@pytest.mark.parametrize(
    ("eps", "expected"),
    [(1, (1.6974149070059543, 6.302585092994046)), (10, (3.7697414907005955, 4.2302585092994045))],
)
def test_course_laplace_confidence_intervals(eps: float, expected: tuple[float, float]) -> None:
    """004.q11/q12: z = 4, 90% CI = z ± (Δ/ε) ln(1/β) (printed (1.7, 6.3) and (3.77, 4.23))."""
    lo, hi = Laplace(eps).confidence_interval(4, 0.9)
    assert lo == pytest.approx(expected[0], abs=1e-9)
    assert hi == pytest.approx(expected[1], abs=1e-9)
    assert round(lo, 2) == round(expected[0], 2)


def test_course_q13_simultaneous_box() -> None:
    """004.q13: Δ = 3, ε = 1, k = 3 answers, 95% simultaneous: half-width 3·ln 60."""
    half = Laplace(1, 3).moe(1 - 0.05 / 3)
    assert half == pytest.approx(12.283033686666302, abs=1e-9)
    lo, hi = Laplace(1, 3).confidence_interval(np.array([5, -3, 1]), 1 - 0.05 / 3)
    assert lo == pytest.approx([-7.283033686666302, -15.283033686666302, -11.283033686666302])
    assert hi == pytest.approx([17.2830336866663, 9.283033686666302, 13.283033686666302])


def test_variance_matches_brute_force() -> None:
    for sigma2 in (0.09, 0.25, 1.0, 13.69, 1e4):
        sigma = math.sqrt(sigma2)
        xs = np.arange(-int(40 * sigma) - 10, int(40 * sigma) + 11, dtype=np.float64)
        w = np.exp(-(xs * xs) / (2 * sigma2))
        brute = float((w * xs * xs).sum() / w.sum())
        assert DiscreteGaussianLaw(sigma2).variance == pytest.approx(brute, rel=1e-12)
    for t in (0.3, 1.0, 40.0):
        xs = np.arange(-int(80 * t) - 10, int(80 * t) + 11, dtype=np.float64)
        w = np.exp(-np.abs(xs) / t)
        brute = float((w * xs * xs).sum() / w.sum())
        assert DiscreteLaplaceLaw(t).variance == pytest.approx(brute, rel=1e-12)


@pytest.mark.parametrize("law", [DiscreteLaplaceLaw(2.5), DiscreteGaussianLaw(6.25)])
def test_cdf_pmf_quantile_are_consistent(law: DiscreteLaplaceLaw | DiscreteGaussianLaw) -> None:
    xs = np.arange(-60, 61)
    pmf = law.pmf(xs)
    cdf = law.cdf(xs)
    assert np.allclose(law.cdf(-61) + np.cumsum(pmf), cdf, atol=1e-14)
    assert law.pmf(np.arange(-400, 401)).sum() == pytest.approx(1.0, abs=1e-14)
    assert np.allclose(pmf, pmf[::-1])
    for q in (0.001, 0.025, 0.3, 0.5, 0.7, 0.975, 0.999):
        x = int(law.quantile(q))
        assert law.cdf(x) >= q
        assert law.cdf(x - 1) < q
    assert law.pmf(0.5) == 0.0  # off the lattice


def test_laplace_sf_has_no_cancellation() -> None:
    law = DiscreteLaplaceLaw(1.0)
    assert law.sf(60) == pytest.approx(math.exp(-61) / (1 + math.exp(-1)), rel=1e-12)
    assert law.sf(-1) == pytest.approx(1 - law.cdf(-1), rel=1e-14)


def test_continuous_moe_is_the_continuous_value_to_lattice_precision() -> None:
    assert Gaussian(0.5).moe(0.95) == pytest.approx(1.959963984540054, abs=1e-11)
    assert Laplace(0.5).moe(0.95) == pytest.approx(2 * math.log(20), abs=1e-11)


def test_large_sigma_uses_the_certified_midpoint_rule() -> None:
    law = DiscreteGaussianLaw(1e12)
    m = law.moe_index(0.95)
    assert m == 1959964  # ⌈1.959963984540054·10⁶ − ½⌉
    assert law.coverage(m) >= 0.95 > law.coverage(m - 1)


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.1, float("nan"), "x"])
def test_levels_are_validated(bad: object) -> None:
    with pytest.raises(ValueError, match="level"):
        Geometric(1).moe(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("b", [0.4, 1.0, 2.3366574048673385, 17.0])
def test_safetab_lemma_13_tail(b: float) -> None:
    """Lemma 13 (CKS Lemma 30): P[Y ≥ y] = e^{−⌈y⌉/b}/(1 + e^{−1/b}) (equality on ℤ)."""
    law = DiscreteLaplaceLaw(b)
    for y in (0.5, 1.0, 2.0, 3.3, 7.0, 20.0):
        k = math.ceil(y)
        tail = float(law.sf(k - 1))  # P[Y ≥ k] = P[Y > k − 1]
        assert tail == pytest.approx(math.exp(-k / b) / (1 + math.exp(-1 / b)), rel=1e-12)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.7, 10.0, 29.95])
def test_safetab_proposition_1_tail_bound(sigma: float) -> None:
    """Prop. 1 (CKS Prop. 25): P[X ≥ m] for N_ℤ(σ²) ≤ P[X ≥ m − 1] for N(0, σ²), m ≥ 1.

    It holds — but the paper's step from it to "the 95% MOE is ⌊1.96σ⌋" does not
    (σ = 0.5 and 29.95 above)."""
    from scipy import stats

    law = DiscreteGaussianLaw(sigma * sigma)
    for m in range(1, int(6 * sigma) + 3):
        dg_tail = 0.5 * (1 - law.coverage(m - 1))  # P[X ≥ m]
        assert dg_tail <= stats.norm.sf((m - 1) / sigma) + 1e-15
