"""GDP power vs Monte Carlo of the likelihood-ratio test; pbdp curves (seed §5.2, Fig. 1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtri

from privtab.accounting import GDP, ZCDP, PureDP
from privtab.accounting.conversions import gdp_delta
from privtab.semantics import pbdp_curve
from privtab.semantics.pbdp import (
    gaussian_plrv_tail,
    pbdp_delta_from_power,
    pbdp_delta_from_power_table,
    pbdp_delta_gdp,
    rdp_tail_bound,
    zcdp_tail_bound,
)
from privtab.semantics.power import gdp_power, profile_power, pure_power

MU = 2.293468988235943  # √(2 · 2.63), seed §5.2.1 footnote 15


@pytest.mark.parametrize("mu", [0.5, 1.0, MU])
def test_gdp_power_matches_monte_carlo_of_likelihood_ratio_test(mu: float) -> None:
    """200 000 draws per hypothesis (seeded); tolerance 5 standard errors.

    The false-failure probability of each comparison is below 6e-7.
    """
    rng = np.random.default_rng(20240531)
    n = 200_000
    x0 = rng.standard_normal(n)  # H0: N(0, 1)
    x1 = rng.standard_normal(n) + mu  # H1: N(μ, 1)
    for alpha in (0.01, 0.05, 0.1, 0.3):
        t = ndtri(1 - alpha)  # the LR test rejects for large x
        level, power = np.mean(x0 > t), np.mean(x1 > t)
        p = float(gdp_power(mu, alpha))
        assert abs(level - alpha) < 5 * math.sqrt(alpha * (1 - alpha) / n)
        assert abs(power - p) < 5 * math.sqrt(p * (1 - p) / n) + 1e-12


def test_profile_of_gdp_reproduces_its_tradeoff() -> None:
    a = np.array([1e-4, 0.01, 0.05, 0.1, 0.5])
    prof = profile_power(lambda e: np.asarray(gdp_delta(MU, e)), a)
    np.testing.assert_allclose(prof, gdp_power(MU, a), atol=2e-6)


PBDP = {
    1.0: 0.9731774443871523,
    2.0: 0.8651579988006363,
    5.0: 0.26912614833571785,
    10.0: 0.0013931620072138,
    15.0: 7.915816800929598e-08,
}
TAIL = {
    1.0: 0.7613691887675295,
    2.0: 0.608223965862211,
    5.0: 0.15071559900818401,
    10.0: 0.0006557013029932334,
    15.0: 3.453448660126612e-08,
}
ZTAIL = {5.0: 0.586298721573458, 10.0: 0.005723336027236173, 15.0: 4.819947092480884e-07}


def test_seed_figure1_curves() -> None:
    """pbdp of the production Gaussian (μ = √5.26), its PLRV tail, the zCDP bound."""
    for e, v in PBDP.items():
        assert pbdp_delta_gdp(MU, e) == pytest.approx(v, abs=1e-9)
        assert pbdp_delta_gdp(MU, e) >= gaussian_plrv_tail(MU, e)
    for e, v in TAIL.items():
        assert gaussian_plrv_tail(MU, e) == pytest.approx(v, abs=1e-12)
    for e, v in ZTAIL.items():
        assert zcdp_tail_bound(2.63, e) == pytest.approx(v, abs=1e-12)
        assert rdp_tail_bound(ZCDP(2.63), e) == pytest.approx(v, rel=1e-9)
        assert zcdp_tail_bound(2.63, e) >= pbdp_delta_gdp(MU, e) * 0  # defined


def test_scenario_a_pbdp_figure8() -> None:
    mu = math.sqrt(2 * 0.11150074378640834)
    for e, v in {
        0.5: 0.441307093559853,
        1.0: 0.07058046997910472,
        2.0: 8.03912723577395e-05,
    }.items():
        assert pbdp_delta_gdp(mu, e) == pytest.approx(v, abs=1e-9)


def test_pbdp_zcdp_bound_dominates_gaussian_pbdp() -> None:
    eps = np.array([0.5, 1, 2, 5, 8])
    z = pbdp_curve(ZCDP(2.63), eps)
    g = np.asarray(pbdp_delta_gdp(MU, eps))
    assert np.all(z >= g - 1e-9)
    assert np.all(z <= np.asarray(zcdp_tail_bound(2.63, eps)) + 1e-9)


def test_pbdp_from_table_is_conservative() -> None:
    lv = np.concatenate([[0.0], np.geomspace(1e-12, 1, 300)])
    eps = np.linspace(0.1, 10, 30)
    table = pbdp_delta_from_power_table(lv, gdp_power(1.5, lv), eps)
    exact = pbdp_delta_gdp(1.5, eps)
    assert np.all(table >= exact - 1e-12)
    assert np.all(table - exact < 0.05)


def test_pure_dp_pbdp_is_zero_from_epsilon_on() -> None:
    d = pbdp_curve(PureDP(1.0), [0.5, 0.99, 1.0, 2.0])
    assert d[0] > 0
    assert d[1] > 0
    assert d[2] == 0.0
    assert d[3] == 0.0
    fixed = pbdp_delta_from_power(lambda a: np.asarray(pure_power(1.0, a)), 0.5)
    assert fixed == pytest.approx(float(pure_power(1.0, math.exp(-0.5) * fixed)), abs=1e-12)


def test_gdp_zero_is_no_information() -> None:
    assert pbdp_delta_gdp(0.0, 1.0) == 0.0
    assert float(pbdp_curve(GDP(0.0), [1.0])[0]) == 0.0
