"""Composition, group privacy, subsampling — and their algebraic properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privtab.accounting import (
    GDP,
    RDP,
    ZCDP,
    ApproxDP,
    PureDP,
    compose,
    group_privacy,
    parallel,
    zcdp_epsilon,
)
from privtab.accounting.composition import compose_by_degree, poisson_subsample
from privtab.accounting.conversions import pure_to_rdp
from privtab.accounting.curves import geometric_rdp

params = st.floats(min_value=0.0, max_value=20.0, allow_nan=False)
small_ints = st.integers(min_value=1, max_value=50)


def test_sequential_composition_by_type() -> None:
    assert compose(PureDP(1), PureDP(0.5)) == PureDP(1.5)
    assert compose(ZCDP(1), ZCDP(0.25)) == ZCDP(1.25)
    assert compose(GDP(3), GDP(4)) == GDP(5)
    assert compose(ApproxDP(1, 1e-6), PureDP(1)) == ApproxDP(2, 1e-6)
    assert compose([ZCDP(1), ZCDP(2)]) == ZCDP(3)
    assert compose(ZCDP(1), GDP(2)) == ZCDP(3)


def test_mixed_composition_is_an_rdp_sum_tighter_than_zcdp() -> None:
    g = compose(PureDP(1.0), ZCDP(0.5))
    assert isinstance(g, RDP)
    a = np.linspace(1.01, 30, 100)
    # pure eps as randomized response is below eps^2/2 * alpha
    assert np.all(g(a) <= 0.5 * a + 0.5 * a + 1e-12)
    np.testing.assert_allclose(g(a), pure_to_rdp(PureDP(1.0), "tight")(a) + 0.5 * a)


def test_approx_cannot_mix_with_renyi_kinds() -> None:
    with pytest.raises(TypeError, match="convert those"):
        compose(ApproxDP(1, 1e-6), ZCDP(1))
    with pytest.raises(ValueError, match="at least one"):
        compose()


def test_parallel_is_max() -> None:
    assert parallel(PureDP(1), PureDP(3)) == PureDP(3)
    assert parallel(ZCDP(1), ZCDP(0.2)) == ZCDP(1)
    assert parallel(ApproxDP(1, 1e-5), ApproxDP(2, 1e-7)) == ApproxDP(2, 1e-5)
    g = parallel(ZCDP(0.1), PureDP(1.0))
    a = np.array([2.0, 20.0])
    np.testing.assert_allclose(g(a), np.maximum(0.1 * a, geometric_rdp(1.0)(a)))


def test_generalized_parallel_composition() -> None:
    # SafeTab Lemmas 9, 10, 12: degree z multiplies epsilon, rho and tau
    assert compose_by_degree(PureDP(0.5), 9) == PureDP(4.5)
    assert compose_by_degree(ZCDP(0.1), 9).rho == pytest.approx(0.9)
    assert compose_by_degree(GDP(1.0), 4) == GDP(2.0)
    a3 = compose_by_degree(ApproxDP(1, 1e-9), 3)
    assert isinstance(a3, ApproxDP)
    assert (a3.epsilon, a3.delta) == (3.0, pytest.approx(3e-9))
    g = compose_by_degree(geometric_rdp(0.3), 9)
    a = np.array([2.0, 5.0])
    np.testing.assert_allclose(g(a), 9 * geometric_rdp(0.3)(a))
    assert isinstance(g, RDP)
    assert g.description.startswith("9 × geometric")  # not "sum of 1 curves"
    with pytest.raises(ValueError, match="degree"):
        compose_by_degree(PureDP(1), 0)


def test_group_privacy() -> None:
    assert group_privacy(PureDP(0.5), 3) == PureDP(1.5)
    assert group_privacy(ZCDP(0.5), 3).rho == pytest.approx(4.5)
    assert group_privacy(GDP(1.0), 2) == GDP(2.0)
    g = group_privacy(ApproxDP(1.0, 1e-6), 2)
    assert g.epsilon == 2.0
    assert g.delta == pytest.approx(2 * math.e * 1e-6)
    # the semi-DP paper's census example: rho -> k^2 rho with k = 2
    assert group_privacy(ZCDP(2.56), 2).rho == pytest.approx(10.24)
    with pytest.raises(TypeError, match="shift k"):
        group_privacy(geometric_rdp(1.0), 2)


def test_poisson_subsampling() -> None:
    # course seed §5.2 (seed-checks 004.sampling.b0.05.e1): beta = 0.05, eps = 1 -> 0.0824
    g = poisson_subsample(PureDP(1.0), 0.05)
    assert g.epsilon == pytest.approx(0.08242211287901112, rel=1e-12)
    a = poisson_subsample(ApproxDP(1.0, 1e-6), 0.05)
    assert a.delta == pytest.approx(5e-8)
    with pytest.raises(TypeError, match="pure"):
        poisson_subsample(ZCDP(1.0), 0.1)
    with pytest.raises(ValueError, match="rate"):
        poisson_subsample(PureDP(1.0), 1.5)


# -------------------------------------------------------------------- properties


@given(params, params, params)
def test_composition_associative_and_commutative(a: float, b: float, c: float) -> None:
    for kind in (PureDP, ZCDP, GDP):
        x, y, z = kind(a), kind(b), kind(c)
        left = compose(compose(x, y), z)
        right = compose(x, compose(y, z))
        flat = compose(z, x, y)
        for u, v in [(left, right), (left, flat)]:
            assert float(next(iter(vars(u).values()))) == pytest.approx(
                float(next(iter(vars(v).values()))), rel=1e-12, abs=1e-300
            )


@given(params, params)
@settings(max_examples=50)
def test_rdp_composition_commutative(a: float, b: float) -> None:
    x, y = compose(PureDP(a), ZCDP(b)), compose(ZCDP(b), PureDP(a))
    alphas = np.array([1.5, 3.0, 10.0])
    np.testing.assert_allclose(x(alphas), y(alphas), rtol=1e-12)


@given(
    st.floats(min_value=1e-4, max_value=50.0),
    st.floats(min_value=1e-4, max_value=50.0),
    st.floats(min_value=1e-15, max_value=1e-2),
)
@settings(max_examples=60, deadline=None)
def test_zcdp_conversion_monotone_in_rho(r1: float, r2: float, delta: float) -> None:
    lo, hi = sorted((r1, r2))
    for method in ("optimal", "analytic", "grid"):
        assert zcdp_epsilon(lo, delta, method) <= zcdp_epsilon(hi, delta, method) + 1e-9


@given(
    st.floats(min_value=1e-4, max_value=50.0),
    st.floats(min_value=1e-15, max_value=1e-2),
    st.floats(min_value=1e-15, max_value=1e-2),
)
@settings(max_examples=60, deadline=None)
def test_zcdp_conversion_monotone_in_delta(rho: float, d1: float, d2: float) -> None:
    lo, hi = sorted((d1, d2))
    for method in ("optimal", "analytic", "grid"):
        assert zcdp_epsilon(rho, hi, method) <= zcdp_epsilon(rho, lo, method) + 1e-9


@given(small_ints, st.floats(min_value=0.01, max_value=3.0))
@settings(max_examples=30)
def test_group_privacy_monotone_in_k(k: int, eps: float) -> None:
    assert group_privacy(ZCDP(eps), k).rho <= group_privacy(ZCDP(eps), k + 1).rho
    assert group_privacy(PureDP(eps), k).epsilon <= group_privacy(PureDP(eps), k + 1).epsilon
