"""Exact piecewise-linear trade-off arithmetic, checked against closed forms."""

from __future__ import annotations

import math
from math import comb

import numpy as np
import pytest

from privtab.invariants import TradeOff


def kov_delta(eps: float, k: int, eps_prime: float) -> float:
    """δ(ε') of the k-fold composition of ε-DP (Kairouz, Oh & Viswanath 2015, Thm 3.3,
    exact privacy region), evaluated by summing over the binomial privacy loss."""
    total = 0.0
    for ell in range(k + 1):  # number of "bad" outcomes
        loss = (k - 2 * ell) * eps
        p = comb(k, ell) * math.exp((k - ell) * eps) / (1 + math.exp(eps)) ** k
        q = comb(k, ell) * math.exp(ell * eps) / (1 + math.exp(eps)) ** k
        if loss > eps_prime:
            total += p - math.exp(eps_prime) * q
    return total


def test_pure_tradeoff_shape() -> None:
    f = TradeOff.pure(1.0)
    a1 = 1 / (1 + math.e)
    assert f(0.0) == 1.0
    assert f(a1) == pytest.approx(a1)
    assert f(1.0) == 0.0
    assert f.is_symmetric()
    assert f.delta(1.0) == pytest.approx(0.0, abs=1e-15)
    assert f.delta(0.0) == pytest.approx((math.e - 1) / (math.e + 1))


def test_randomized_response_is_pure() -> None:
    eps = 0.8
    p = np.array([math.exp(eps), 1.0]) / (1 + math.exp(eps))
    f = TradeOff.from_distributions(p, p[::-1])
    g = TradeOff.pure(eps)
    assert f.dominates(g)
    assert g.dominates(f)


def test_group_of_pure_is_at_least_k_epsilon() -> None:
    # 1 − (1 − f_ε)^{∘k} is kε-DP (δ(kε) = 0) and, for k ≥ 2, strictly stronger than f_{kε}:
    # e.g. k = 2 has a middle piece of slope −1 (1 − e^{−ε}(1 − e^ε α) = 1 − e^{−ε} + α)
    for eps, k in [(0.3, 2), (1.0, 3), (0.05, 7)]:
        f = TradeOff.pure(eps).group(k)
        g = TradeOff.pure(k * eps)
        assert f.dominates(g, 1e-12)
        assert not g.dominates(f, 1e-9)
        assert f.delta(k * eps) == pytest.approx(0.0, abs=1e-12)
        assert f.delta(k * eps * 0.9) > 0
        assert f(1e-4) == pytest.approx(1 - math.exp(k * eps) * 1e-4, rel=1e-12)
    f2 = TradeOff.pure(0.4).group(2)
    mid = 0.99 / (1 + math.exp(0.4))  # inside [1/(e^ε(1+e^ε)), 1/(1+e^ε)]
    assert f2(mid) == pytest.approx(math.exp(-0.4) - mid, rel=1e-12)


def test_group_of_approx_delta() -> None:
    eps, delta, k = 0.5, 1e-3, 3
    f = TradeOff.approx(eps, delta).group(k)
    tight = delta * math.expm1(k * eps) / math.expm1(eps)
    assert f.delta(k * eps) == pytest.approx(tight, rel=1e-10)
    assert f.dominates(TradeOff.approx(k * eps, tight))
    assert TradeOff.approx(eps, delta).group(0).dominates(TradeOff.perfect())


@pytest.mark.parametrize(("eps", "k"), [(0.5, 2), (1.0, 3), (0.3, 5)])
def test_tensor_matches_kairouz_oh_viswanath(eps: float, k: int) -> None:
    f = TradeOff.pure(eps)
    g = f
    for _ in range(k - 1):
        g = g.tensor(f)
    for eps_prime in np.linspace(0.0, k * eps, 7):
        assert g.delta(float(eps_prime)) == pytest.approx(
            kov_delta(eps, k, float(eps_prime)), abs=1e-12
        )
    assert g.is_symmetric()


def test_inverse_and_validation() -> None:
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.1, 0.3, 0.6])
    f = TradeOff.from_distributions(p, q)
    g = TradeOff.from_distributions(q, p)
    inv = f.inverse()
    assert inv.dominates(g, 1e-12)
    assert g.dominates(inv, 1e-12)
    assert not f.is_symmetric()
    with pytest.raises(ValueError, match="convex"):
        TradeOff(np.array([0.0, 0.5, 1.0]), np.array([0.5, 0.4, 0.0]))
    with pytest.raises(ValueError, match="1 − α"):
        TradeOff(np.array([0.0, 0.5, 1.0]), np.array([1.0, 0.6, 0.0]))
    with pytest.raises(ValueError, match="sum to 1"):
        TradeOff.from_distributions([0.5, 0.4], [0.5, 0.5])


def test_tensor_is_the_neyman_pearson_envelope() -> None:
    # second computation: every deterministic test (a subset of product atoms) gives a point
    # (α, β) on or above f ⊗ g, and the envelope is attained at its breakpoints
    f, g = TradeOff.approx(0.4, 1e-3), TradeOff.approx(0.8, 2e-3)
    p1, q1 = f.to_distributions()
    p2, q2 = g.to_distributions()
    p, q = np.outer(p1, p2).ravel(), np.outer(q1, q2).ravel()
    t = f.tensor(g)
    masks = ((np.arange(2**p.size)[:, None] >> np.arange(p.size)) & 1).astype(np.float64)
    alphas, betas = masks @ p, 1 - masks @ q
    assert np.min(betas - t(alphas)) >= -1e-12
    for a, b in zip(t.alphas, t.betas, strict=True):
        assert np.min(np.abs(alphas - a) + np.abs(betas - b)) < 1e-12
