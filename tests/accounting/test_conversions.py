"""Conversions: oracle values from the seeds and independent high-precision cross-checks.

Expected values are the independently recomputed ones of shared/seed-checks (copied here).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from privtab.accounting import GDP, ZCDP, PureDP, to_approx, zcdp_delta, zcdp_epsilon
from privtab.accounting.conversions import (
    gdp_delta,
    gdp_epsilon,
    gdp_to_zcdp,
    pure_to_approx,
    pure_to_rdp,
    pure_to_zcdp,
    rdp_delta,
    rdp_epsilon,
    rdp_epsilon_order,
    zcdp_optimal_order,
    zcdp_to_rdp,
)

# --------------------------------------------------------------------- seed oracles


def test_semi_dp_paper_section_6_1_analytic() -> None:
    # semi-dp-invariant-statistics.txt §6.1 (seed-checks 003.census.eps_bs.*):
    # rho = 2.56 advertised and its semi-DP counterpart 4 * 2.56 = 10.24, delta = 1e-10.
    assert zcdp_epsilon(2.56, 1e-10, "analytic") == pytest.approx(17.91528291900186, abs=1e-9)
    assert zcdp_epsilon(10.24, 1e-10, "analytic") == pytest.approx(40.95056583800372, abs=1e-9)
    # the tight (CKS) conversion (seed-checks README): 17.158 and 39.823
    assert zcdp_epsilon(2.56, 1e-10) == pytest.approx(17.158, abs=5e-4)
    assert zcdp_epsilon(10.24, 1e-10) == pytest.approx(39.823, abs=5e-4)


def test_safetab_table2_zcdp_numbers() -> None:
    # safetab-detailed-dhc-race-ethnicity.txt Table 2 (seed-checks 002.table2.*): rho_total is
    # the sum of Table 4's Total column; printed 12.8 (analytic) and 12.2 (grid).
    rho_total = 0.5333333333333333 * 2 + 0.15867768595041323 * 2 + 0.00768 * 3
    assert rho_total == pytest.approx(1.407062038567493, rel=1e-12)
    analytic = zcdp_epsilon(rho_total, 1e-10, "analytic")
    grid = zcdp_epsilon(rho_total, 1e-10, "grid")
    assert analytic == pytest.approx(12.791050926340219, abs=1e-9)
    assert grid == pytest.approx(12.162913471569961, abs=1e-9)
    assert round(analytic, 1) == 12.8
    assert round(grid, 1) == 12.2
    assert zcdp_epsilon(rho_total, 1e-10) <= grid
    # with the printed (rounded) rho_total = 1.41 (seed-checks 002.table2.*_printed_totals)
    assert zcdp_epsilon(1.41, 1e-10, "analytic") == pytest.approx(12.805867638967388, abs=1e-9)
    assert zcdp_epsilon(1.41, 1e-10, "grid") == pytest.approx(12.177309482589244, abs=1e-9)


def test_pure_conversions() -> None:
    assert pure_to_zcdp(PureDP(1.0)) == ZCDP(0.5)
    assert pure_to_approx(PureDP(0.7)).delta == 0.0
    bs = pure_to_rdp(PureDP(1.0))
    np.testing.assert_allclose(bs([1.5, 2.0, 4.0]), [0.75, 1.0, 1.0])
    tight = pure_to_rdp(PureDP(1.0), "tight")
    alphas = np.linspace(1.01, 50, 500)
    assert np.all(tight(alphas) <= bs(alphas) + 1e-12)
    # seed-checks 002.note.pure_to_zcdp: eps = ln 20 / 7 -> rho = eps^2 / 2
    assert pure_to_zcdp(PureDP(math.log(20) / 7)).rho == pytest.approx(0.09157563117156085)


def test_gdp_profile_matches_semantics_paper() -> None:
    # semantics-of-dp-variants-2020-census.txt Fig. 1 (seed-checks 000.gdp.approx_dp_delta.*),
    # mu = sqrt(2 * 2.63) (production persons + housing).
    mu = 2.293468988235943
    assert math.sqrt(2 * 2.63) == pytest.approx(mu)
    for eps, expected in [
        (1, 0.6071375908122615),
        (2, 0.4474731535338632),
        (5, 0.08553447467885635),
        (10, 0.00025358491230447757),
        (15, 9.923388985536076e-09),
    ]:
        assert gdp_delta(mu, eps) == pytest.approx(expected, rel=1e-9)
        assert gdp_epsilon(mu, expected) == pytest.approx(eps, rel=1e-9)
    assert gdp_to_zcdp(GDP(mu)).rho == pytest.approx(2.63)


# ------------------------------------------------------------ independent cross-checks


def _mp_cks_objective(rho: mp.mpf, L: mp.mpf, alpha: mp.mpf) -> mp.mpf:
    return rho * alpha + (L + (alpha - 1) * mp.log(1 - 1 / alpha) - mp.log(alpha)) / (alpha - 1)


def _mp_golden_min(f, lo: mp.mpf, hi: mp.mpf, iters: int = 220) -> mp.mpf:
    """Golden-section search on a unimodal function (independent of privtab's solver)."""
    g = (mp.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return min(fc, fd)


RHOS = [1e-4, 3e-3, 0.05, 0.5, 2.63, 10.0, 50.0]
DELTAS = [1e-15, 1e-10, 1e-6, 1e-2]


def test_optimal_matches_mpmath_minimisation_to_1e9() -> None:
    mp.mp.dps = 40
    rhos = np.array(RHOS)[:, None]
    deltas = np.array(DELTAS)[None, :]
    ours = zcdp_epsilon(rhos, deltas, "optimal")
    analytic = zcdp_epsilon(rhos, deltas, "analytic")
    grid = zcdp_epsilon(rhos, deltas, "grid")
    assert ours.shape == (len(RHOS), len(DELTAS))
    for i, rho in enumerate(RHOS):
        for j, delta in enumerate(DELTAS):
            r, L = mp.mpf(rho), -mp.log(mp.mpf(delta))

            # minimise in t = log(alpha - 1) over a wide bracket
            def f(t, r=r, L=L):
                return _mp_cks_objective(r, L, 1 + mp.exp(t))

            ref = max(float(_mp_golden_min(f, mp.mpf(-20), mp.mpf(20))), 0.0)
            assert ours[i, j] == pytest.approx(ref, rel=1e-9, abs=1e-300), (rho, delta)
            assert ours[i, j] <= min(grid[i, j], analytic[i, j]) + 1e-12


def test_optimal_order_satisfies_first_order_condition() -> None:
    a = zcdp_optimal_order(2.63, 1e-10)
    assert 2.63 * (a - 1) ** 2 + math.log(a) == pytest.approx(-math.log(1e-10), rel=1e-12)


def test_zcdp_delta_inverts_epsilon() -> None:
    for rho in [1e-3, 0.1, 1.0, 4.944]:
        for delta in [1e-12, 1e-8, 1e-4]:
            eps = zcdp_epsilon(rho, delta)
            assert zcdp_delta(rho, eps) == pytest.approx(delta, rel=1e-8)
    # analytic inverse
    eps = zcdp_epsilon(1.0, 1e-6, "analytic")
    assert zcdp_delta(1.0, eps, "analytic") == pytest.approx(1e-6, rel=1e-9)


def test_zcdp_edge_cases() -> None:
    assert zcdp_epsilon(0.0, 1e-10) == 0.0
    assert zcdp_epsilon(1.0, 1.0) == 0.0
    assert math.isinf(zcdp_epsilon(1.0, 0.0))
    assert zcdp_delta(0.0, 1.0) == 0.0
    with pytest.raises(ValueError, match="delta"):
        zcdp_epsilon(1.0, 1.5)
    with pytest.raises(ValueError, match="rho"):
        zcdp_epsilon(-1.0, 1e-5)
    with pytest.raises(ValueError, match="method"):
        zcdp_epsilon(1.0, 1e-5, "bogus")  # type: ignore[arg-type]


def test_rdp_of_zcdp_reproduces_zcdp_conversion() -> None:
    g = zcdp_to_rdp(ZCDP(1.3))
    for delta in [1e-12, 1e-6]:
        assert rdp_epsilon(g, delta) == pytest.approx(zcdp_epsilon(1.3, delta), rel=1e-9)
        assert rdp_epsilon(g, delta, "grid") == pytest.approx(
            zcdp_epsilon(1.3, delta, "grid"), rel=1e-12
        )
        # Mironov's bound is looser than CKS's
        assert rdp_epsilon(g, delta, "mironov") > rdp_epsilon(g, delta)
    eps = rdp_epsilon(g, 1e-8)
    assert rdp_delta(g, eps) == pytest.approx(1e-8, rel=1e-6)


def test_rdp_epsilon_vectorised_over_delta() -> None:
    g = zcdp_to_rdp(ZCDP(0.5))
    out = rdp_epsilon(g, np.array([1e-9, 1e-5]))
    assert out.shape == (2,)
    assert out[0] > out[1]
    _eps, alpha = rdp_epsilon_order(g, 1e-9)
    assert alpha == pytest.approx(zcdp_optimal_order(0.5, 1e-9), rel=1e-5)


def test_gdp_delta_against_mpmath() -> None:
    mp.mp.dps = 50
    for mu in [0.1, 1.0, 2.29, 5.0]:
        for eps in [0.0, 0.5, 3.0, 12.0]:
            m, e = mp.mpf(mu), mp.mpf(eps)
            ref = mp.ncdf(-e / m + m / 2) - mp.exp(e) * mp.ncdf(-e / m - m / 2)
            assert gdp_delta(mu, eps) == pytest.approx(float(ref), rel=1e-9, abs=1e-300)


def test_gdp_edge_cases() -> None:
    assert gdp_delta(0.0, 1.0) == 0.0
    assert gdp_epsilon(1.0, 1.0) == 0.0
    assert math.isinf(gdp_epsilon(1.0, 0.0))
    assert gdp_epsilon(1.0, 0.5) == 0.0  # delta(0) = 2 Phi(1/2) - 1 = 0.383 < 0.5


def test_to_approx_dispatch() -> None:
    assert to_approx(PureDP(2.0), 1e-9).delta == 0.0
    z = to_approx(ZCDP(1.0), 1e-9)
    assert z.epsilon == pytest.approx(zcdp_epsilon(1.0, 1e-9))
    assert to_approx(GDP(1.0), 1e-6).epsilon == pytest.approx(gdp_epsilon(1.0, 1e-6))


def test_scalar_fast_path_agrees_with_vectorised() -> None:
    rhos = np.geomspace(1e-4, 50, 37)
    for delta in DELTAS:
        vec = zcdp_epsilon(rhos, delta)
        scal = np.array([zcdp_epsilon(float(r), delta) for r in rhos])
        np.testing.assert_allclose(scal, vec, rtol=1e-11)
