"""Discrete Gaussian trade-off: pmf vs mpmath, closeness to the Gaussian, Table 2 DGM."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from privtab.semantics.discrete_gaussian import (
    discrete_gaussian_gap,
    discrete_gaussian_pmf,
    discrete_gaussian_tradeoff,
)
from privtab.semantics.power import gaussian_power


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.7])
def test_pmf_and_survival_match_mpmath(sigma: float) -> None:
    mp.mp.dps = 50
    q = mp.e ** (-1 / (2 * mp.mpf(sigma) ** 2))
    z = mp.jtheta(3, 0, q)  # Σ_x q^{x²}
    x, pmf, dropped = discrete_gaussian_pmf(sigma)
    assert dropped < 1e-70
    for k in (0, 1, 3):
        exact = q ** (k * k) / z
        assert float(pmf[x == k][0]) == pytest.approx(float(exact), rel=1e-13)
    tr = discrete_gaussian_tradeoff(sigma)
    # vertex at threshold t = 2: level P[X ≥ 2], power P[X ≥ 1]
    sf2 = mp.nsum(lambda j: q ** (j * j), [2, mp.inf]) / z
    sf1 = mp.nsum(lambda j: q ** (j * j), [1, mp.inf]) / z
    assert float(tr.power(float(sf2))) == pytest.approx(float(sf1), rel=1e-12)


# sup_α |power_DG − power_G| (computed by discrete_gaussian_gap; documented in docs)
GAP_BOUND = {1.0: 0.035, 1.5: 0.011, 2.0: 0.0043, 3.0: 0.0013, 5.0: 2.7e-4, 10.0: 3.4e-5}


@pytest.mark.parametrize(("sigma", "bound"), GAP_BOUND.items())
def test_discrete_close_to_continuous_for_sigma_at_least_one(sigma: float, bound: float) -> None:
    gap = discrete_gaussian_gap(sigma)
    assert gap <= bound
    assert gap > bound / 20  # the comparison is not vacuous


def test_gap_below_stated_error_on_a_sigma_grid() -> None:
    for sigma in np.linspace(1.0, 3.0, 9):
        assert discrete_gaussian_gap(float(sigma), points=2001) <= 0.035


def test_table2_dgm_column_by_exact_composition() -> None:
    """Seed Table 2 'Power (DGM)' ≈ Gaussian within 0.01: 16 discrete Gaussians, ρ = 2.63."""
    k = 16
    tr = discrete_gaussian_tradeoff(math.sqrt(k / (2 * 2.63)), 1, k)
    assert tr.rho == pytest.approx(2.63)
    np.testing.assert_allclose(
        tr.power([0.01, 0.05, 0.1]),
        [0.4868855851890849, 0.7417064880000932, 0.8442112309356556],
        atol=0.01,
    )
    # Table 6 (Scenario A): one query per affected cell is plenty at this small ρ
    rho_a = 0.11150074378640834
    tr1 = discrete_gaussian_tradeoff(math.sqrt(1 / (2 * rho_a)))
    np.testing.assert_allclose(
        tr1.power([0.01, 0.05, 0.1]), gaussian_power(rho_a, [0.01, 0.05, 0.1]), atol=0.01
    )


def test_curve_is_a_valid_tradeoff() -> None:
    tr = discrete_gaussian_tradeoff(0.8, sensitivity=2, queries=3)
    a = np.linspace(0, 1, 501)
    p = np.asarray(tr.power(a))
    assert p[0] == pytest.approx(0.0, abs=1e-60)
    assert p[-1] == 1.0
    assert np.all(np.diff(p) >= -1e-15)
    assert np.all(p >= a - 1e-15)
    assert np.all(np.diff(p, 2) <= 1e-12)  # concave
    with pytest.raises(ValueError, match="sigma"):
        discrete_gaussian_tradeoff(0.0)
    with pytest.raises(ValueError, match="support"):
        discrete_gaussian_pmf(1e6)
