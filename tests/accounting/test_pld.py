"""Privacy-loss distributions: exact profiles of discrete noise and their composition."""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from privtab.accounting import zcdp_delta, zcdp_epsilon
from privtab.accounting.pld import compose_plds, discrete_gaussian_loss, geometric_loss


def _dg_delta_direct(eps: float, sigma2: float) -> float:
    """δ(ε) of N_Z(0,σ²) vs N_Z(1,σ²) by direct summation over Z at 40 digits."""
    mp.mp.dps = 40
    n = int(60 * math.sqrt(sigma2)) + 60
    xs = range(-n, n + 1)
    z = mp.fsum(mp.exp(-(mp.mpf(y) ** 2) / (2 * sigma2)) for y in xs)
    tot = mp.mpf(0)
    for x in xs:
        p = mp.exp(-(mp.mpf(x) ** 2) / (2 * sigma2)) / z
        q = mp.exp(-(mp.mpf(x - 1) ** 2) / (2 * sigma2)) / z
        tot += max(p - mp.exp(eps) * q, 0)
    return float(tot)


@pytest.mark.parametrize("sigma2", [0.25, 4.0, 37.5])
def test_single_discrete_gaussian_matches_direct_sum(sigma2: float) -> None:
    up = compose_plds([(discrete_gaussian_loss(sigma2), 1)], grid=1e-4)
    low = compose_plds([(discrete_gaussian_loss(sigma2), 1)], grid=1e-4, pessimistic=False)
    for eps in [0.0, 0.3, 1.0, 2.0]:
        exact = _dg_delta_direct(eps, sigma2)
        if exact < 1e-280:
            continue
        assert low.delta(eps) <= exact * (1 + 1e-9) + 1e-300
        assert up.delta(eps) >= exact * (1 - 1e-9)
        assert up.delta(eps) == pytest.approx(exact, rel=1e-3)


def test_geometric_composition_is_binomial() -> None:
    n, e = 10, 0.5
    prof = compose_plds([(geometric_loss(e), n)], grid=1e-3)
    p = 1 / (1 + math.exp(-e))
    for eps in [0.0, 1.0, 2.5, 4.9]:
        exact = sum(
            math.comb(n, k) * p**k * (1 - p) ** (n - k) * (1 - math.exp(eps - (2 * k - n) * e))
            for k in range(n + 1)
            if (2 * k - n) * e > eps
        )
        assert prof.delta(eps) == pytest.approx(exact, rel=1e-6)
    # pure DP: no mass beyond n * eps
    assert prof.delta(n * e) == pytest.approx(0.0, abs=1e-12)
    assert prof.epsilon(0.0) == pytest.approx(n * e, abs=2e-3)


def test_composition_is_tighter_than_zcdp_and_close_to_it() -> None:
    rhos = [0.005, 0.02, 0.0004]
    factors = [(discrete_gaussian_loss(1 / (2 * r)), 9) for r in rhos]
    rho_total = 9 * sum(rhos)
    up = compose_plds(factors, grid=1e-3)
    low = compose_plds(factors, grid=1e-3, pessimistic=False)
    eps_up, eps_low = up.epsilon(1e-10), low.epsilon(1e-10)
    assert eps_low <= eps_up
    assert eps_up - eps_low < 0.01
    assert eps_up < zcdp_epsilon(rho_total, 1e-10)
    # delta at the zCDP epsilon is below the zCDP delta bound
    e = zcdp_epsilon(rho_total, 1e-10)
    assert up.delta(e) <= zcdp_delta(rho_total, e)


def test_matches_dp_accounting_when_installed() -> None:
    pld_mod = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    sigma = 3.0
    theirs = pld_mod.from_discrete_gaussian_mechanism(
        sigma, sensitivity=1, value_discretization_interval=1e-4
    ).self_compose(20)
    ours = compose_plds([(discrete_gaussian_loss(sigma**2), 20)], grid=1e-4)
    assert ours.epsilon(1e-8) == pytest.approx(theirs.get_epsilon_for_delta(1e-8), rel=2e-3)


def test_validation() -> None:
    with pytest.raises(ValueError, match="at least one"):
        compose_plds([])
    with pytest.raises(ValueError, match="count"):
        compose_plds([(geometric_loss(1.0), 0)])
    with pytest.raises(ValueError, match="sigma2"):
        discrete_gaussian_loss(0.0)


def test_epsilon_solver_matches_exact_enumeration_at_large_rho() -> None:
    # 9 discrete Gaussians with sigma^2 = 1/4 (rho = 2 each): the loss is a function of the
    # sum of 9 i.i.d. N_Z(0, 1/4), enumerated exactly here.
    import numpy as np

    s2, n = 0.25, 9
    xs = np.arange(-10, 11)
    p = np.exp(-(xs**2) / (2 * s2))
    p /= p.sum()
    q = p.copy()
    for _ in range(n - 1):
        q = np.convolve(q, p)
    losses = (n - 2 * np.arange(-10 * n, 10 * n + 1)) / (2 * s2)

    def exact(e: float) -> float:
        m = losses > e
        return float(np.sum(q[m] * -np.expm1(e - losses[m])))

    prof = compose_plds([(discrete_gaussian_loss(s2), n)], grid=1e-3)
    eps = prof.epsilon(1e-10)
    assert exact(eps) <= 1e-10 * (1 + 1e-6)
    assert exact(eps - 0.02) > 1e-10  # and it is tight to within the grid
    assert eps < zcdp_epsilon(n / (2 * s2), 1e-10)


def test_either_of_dominates_each_option() -> None:
    import numpy as np

    from privtab.accounting.pld import either_of

    for rho in [0.005, 0.5, 2.0]:
        two = [
            (discrete_gaussian_loss(1 / (2 * 0.1 * rho)), 1),
            (discrete_gaussian_loss(1 / (2 * 0.9 * rho)), 1),
        ]
        one = [(discrete_gaussian_loss(1 / (2 * rho)), 1)]
        both = either_of([two, one], grid=1e-3)
        assert sum(np.exp(both.log_probs)) + both.tail == pytest.approx(1.0, abs=1e-6)
        pe = compose_plds([(both, 1)], grid=1e-3)
        pa, pb = compose_plds(two, grid=1e-3), compose_plds(one, grid=1e-3)
        for e in np.linspace(-0.5, 4 * np.sqrt(rho) + 3 * rho, 7):
            assert pe.delta(e) >= max(pa.delta(e), pb.delta(e)) * (1 - 1e-6) - 1e-15
        # composing 9 of them is no tighter than either homogeneous composition
        eps_e = compose_plds([(both, 9)], grid=1e-3).epsilon(1e-10)
        eps_a = compose_plds([(f, 9) for f, _ in two], grid=1e-3).epsilon(1e-10)
        eps_b = compose_plds([(one[0][0], 9)], grid=1e-3).epsilon(1e-10)
        # (each homogeneous composition carries up to 9-18 grid roundings of pessimism)
        assert eps_e >= max(eps_a, eps_b) - 0.02
        assert eps_e <= zcdp_epsilon(9 * rho, 1e-10)
