"""Semi-DP accounting: §6.1 (Census), Prop. 15/Cor. 18, Lemma 39, Example 6, Prop. 21.

Expected values copied from seed-checks (``semi-dp-invariant-statistics.txt``):
003.census.group_rho.rho2.56 = 10.24; 003.census.eps_bs.advertised.rho2.56 = 17.91528291900186;
003.census.eps_bs.semi.rho2.56 = 40.95056583800372; README: tight conversion 17.158 / 39.823;
003.census.gdp_mu(_semi).rho2.56/2.63.
"""

from __future__ import annotations

import itertools
import math

import mpmath
import pytest

from privtab.accounting import GDP, ZCDP, ApproxDP, PureDP
from privtab.accounting.curves import geometric_rdp
from privtab.invariants import TradeOff, census_semi_dp, semi_dp
from privtab.invariants.semi_dp import compare_composition_order, semi_dp_summary
from privtab.invariants.tradeoff import gaussian_tradeoff


def test_census_section_6_1() -> None:
    out = census_semi_dp()
    assert (out.rho, out.semi_adjacent, out.delta) == (2.56, 2, 1e-10)
    assert out.rho_semi == pytest.approx(10.24, abs=1e-12)
    assert out.epsilon_advertised == pytest.approx(17.91528291900186, abs=1e-9)
    assert out.epsilon_semi == pytest.approx(40.95056583800372, abs=1e-9)
    assert round(out.epsilon_advertised_optimal, 3) == 17.158
    assert round(out.epsilon_semi_optimal, 3) == 39.823
    assert list(out.to_dict()) == [
        "rho",
        "semi_adjacent",
        "rho_semi",
        "epsilon_advertised",
        "epsilon_semi",
        "epsilon_advertised_optimal",
        "epsilon_semi_optimal",
        "delta",
    ]


def test_bun_steinke_formula_second_computation() -> None:
    mpmath.mp.dps = 40
    for rho in (0.5, 2.56, 10.24):
        expected = mpmath.mpf(rho) + 2 * mpmath.sqrt(
            mpmath.mpf(rho) * mpmath.log(mpmath.mpf(10) ** 10)
        )
        got = census_semi_dp(rho, 1, 1e-10).epsilon_advertised
        assert got == pytest.approx(float(expected), rel=1e-13)


@pytest.mark.parametrize(
    ("rho", "mu", "mu_semi"),
    [(2.56, 2.262741699796952, 4.525483399593904), (2.63, 2.293468988235943, 4.586937976471886)],
)
def test_gdp_view(rho: float, mu: float, mu_semi: float) -> None:
    # seed-checks 003.census.gdp_mu / gdp_mu_semi: μ = √(2ρ), semi μ = a·μ with a = 2
    g = GDP(math.sqrt(2 * rho))
    assert g.mu == pytest.approx(mu, abs=1e-12)
    semi = semi_dp(g, 2)
    assert isinstance(semi, GDP)
    assert semi.mu == pytest.approx(mu_semi, abs=1e-12)


def test_semi_dp_rules() -> None:
    assert semi_dp(PureDP(0.5), 3) == PureDP(1.5)
    assert semi_dp(ZCDP(2.56), 2) == ZCDP(4 * 2.56)
    assert semi_dp(GDP(1.0), 3) == GDP(3.0)
    approx = semi_dp(ApproxDP(1.0, 1e-6), 3)
    assert isinstance(approx, ApproxDP)
    assert approx.epsilon == 3.0
    assert approx.delta == pytest.approx(1e-6 * (1 + math.e + math.e**2), rel=1e-12)
    # a = 0: nothing to protect (Example 3, T(x) = 3)
    assert semi_dp(PureDP(1.0), 0) == PureDP(0.0)
    with pytest.raises(TypeError, match="shift a"):
        semi_dp(geometric_rdp(1.0), 2)
    with pytest.raises(ValueError, match="non-negative integer"):
        semi_dp(PureDP(1.0), -1)


def test_approx_semi_dp_matches_tradeoff_group() -> None:
    # the tight group δ equals what the exact trade-off arithmetic gives at ε' = aε
    for eps, delta, a in [(0.5, 1e-3, 3), (1.0, 1e-6, 2), (0.1, 0.01, 5)]:
        semi = semi_dp(ApproxDP(eps, delta), a)
        assert isinstance(semi, ApproxDP)
        f = TradeOff.approx(eps, delta).group(a)
        assert f.delta(a * eps) == pytest.approx(semi.delta, rel=1e-9)


def test_semi_dp_summary_lists_conversions() -> None:
    s = semi_dp_summary(ZCDP(2.56), 2, 1e-10)
    assert s["semi"] == "10.24-zCDP"
    assert s["epsilon_semi"]["analytic"] == pytest.approx(40.95056583800372, abs=1e-9)
    assert s["epsilon_base"]["optimal"] < s["epsilon_base"]["analytic"]


def test_example6_same_parameter_different_pairs() -> None:
    # Example 6 / Definitions 19–20: group privacy of size 2 and Semi-DP with a = 2 carry the
    # same trade-off, but Semi-DP protects only the pairs inside D_t (Example 2's three
    # datasets), a strict subset of the pairs at Hamming distance ≤ 2.
    space = list(itertools.product((0, 1), repeat=3))
    conforming = [x for x in space if sum(x) == 1]

    def ham(x: tuple[int, ...], y: tuple[int, ...]) -> int:
        return sum(p != q for p, q in zip(x, y, strict=True))

    group_pairs = {(x, y) for x in space for y in space if 0 < ham(x, y) <= 2}
    semi_pairs = {(x, y) for x in conforming for y in conforming if 0 < ham(x, y) <= 2}
    assert semi_pairs < group_pairs
    assert len(semi_pairs) == 6
    assert len(group_pairs) == 8 * 6
    assert semi_dp(GDP(1.0), 2) == GDP(2.0)


def test_prop21_equal_for_linear_rules() -> None:
    for gs in ([PureDP(0.3), PureDP(0.7)], [ZCDP(0.1), ZCDP(0.4)], [GDP(0.5), GDP(1.2)]):
        res = compare_composition_order(gs, 3)
        assert res.semi_first_at_least_as_strong
        assert not res.strictly_stronger
        assert str(res.semi_first) == str(res.composition_first)


def test_prop21_semi_first_strictly_stronger_approx() -> None:
    res = compare_composition_order([ApproxDP(0.5, 1e-6), ApproxDP(0.5, 1e-6)], 3)
    assert res.semi_first_at_least_as_strong
    assert res.strictly_stronger
    assert isinstance(res.semi_first, ApproxDP)
    assert isinstance(res.composition_first, ApproxDP)
    assert res.semi_first.epsilon == res.composition_first.epsilon == 3.0
    assert res.semi_first.delta < res.composition_first.delta


def test_prop21_tradeoff_functions() -> None:
    f1, f2 = TradeOff.approx(0.4, 1e-3), TradeOff.approx(0.8, 1e-3)
    res = compare_composition_order([f1, f2], 2)
    assert res.semi_first_at_least_as_strong
    assert res.strictly_stronger
    # Lemma 41 direction, checked pointwise on a grid as a second computation
    assert isinstance(res.semi_first, TradeOff)
    assert isinstance(res.composition_first, TradeOff)
    grid = [i / 200 for i in range(201)]
    assert all(res.semi_first(a) >= res.composition_first(a) - 1e-12 for a in grid)


def test_gaussian_group_is_k_mu() -> None:
    # 1 − (1 − G_μ)^{∘k} = G_{kμ} (Dong et al. Thm 2.14), evaluated directly
    mu, k = 0.7, 3
    alphas = [0.001, 0.01, 0.1, 0.3, 0.7]
    for a in alphas:
        h = a
        for _ in range(k):
            h = 1 - float(gaussian_tradeoff(mu, h))
        assert 1 - h == pytest.approx(float(gaussian_tradeoff(k * mu, a)), abs=1e-12)
