"""Property tests (hypothesis) of the conversions not covered in test_composition.py.

Issue 2 acceptance: "conversions are monotone in their parameters; composition is
associative and commutative". test_composition.py covers zCDP → (ε, δ) in ρ and δ, group
privacy in k, and associativity/commutativity of pure, zCDP and GDP composition. Here:
GDP ↔ (ε, δ), zCDP δ(ε), pure → zCDP/RDP, the geometric mechanism's exact RDP curve,
RDP → (ε, δ) (CKS and Mironov), Poisson subsampling; and composition of (ε, δ) and RDP
guarantees and the parallel maximum.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privtab.accounting import RDP, ZCDP, ApproxDP, PureDP, compose, parallel, zcdp_delta
from privtab.accounting.composition import poisson_subsample
from privtab.accounting.conversions import (
    gdp_delta,
    gdp_epsilon,
    pure_to_rdp,
    pure_to_zcdp,
    rdp_epsilon,
)
from privtab.accounting.curves import geometric_rdp

mus = st.floats(min_value=0.01, max_value=10.0)
epss = st.floats(min_value=0.0, max_value=30.0)
small_eps = st.floats(min_value=0.01, max_value=3.0)
deltas = st.floats(min_value=1e-15, max_value=1e-2)
rhos = st.floats(min_value=1e-4, max_value=50.0)
ALPHAS = np.array([1.01, 1.5, 2.0, 3.0, 8.0, 32.0, 200.0])
TOL = 1e-12


def _pair(strategy: st.SearchStrategy[float]) -> st.SearchStrategy[tuple[float, float]]:
    return st.tuples(strategy, strategy).map(lambda t: (min(t), max(t)))


@given(mus, _pair(epss))
@settings(max_examples=80, deadline=None)
def test_gdp_delta_decreasing_in_epsilon(mu: float, e: tuple[float, float]) -> None:
    lo, hi = e
    assert gdp_delta(mu, hi) <= gdp_delta(mu, lo) + TOL


@given(_pair(mus), epss)
@settings(max_examples=80, deadline=None)
def test_gdp_delta_increasing_in_mu(m: tuple[float, float], eps: float) -> None:
    lo, hi = m
    assert gdp_delta(lo, eps) <= gdp_delta(hi, eps) + TOL


@given(_pair(mus), deltas)
@settings(max_examples=60, deadline=None)
def test_gdp_epsilon_increasing_in_mu(m: tuple[float, float], delta: float) -> None:
    lo, hi = m
    assert gdp_epsilon(lo, delta) <= gdp_epsilon(hi, delta) * (1 + 1e-9) + 1e-12


@given(mus, _pair(deltas))
@settings(max_examples=60, deadline=None)
def test_gdp_epsilon_decreasing_in_delta(mu: float, d: tuple[float, float]) -> None:
    lo, hi = d
    assert gdp_epsilon(mu, hi) <= gdp_epsilon(mu, lo) * (1 + 1e-9) + 1e-12


@given(_pair(rhos), st.floats(min_value=0.0, max_value=60.0))
@settings(max_examples=60, deadline=None)
def test_zcdp_delta_increasing_in_rho(r: tuple[float, float], eps: float) -> None:
    lo, hi = r
    for method in ("optimal", "analytic"):
        assert zcdp_delta(lo, eps, method) <= zcdp_delta(hi, eps, method) * (1 + 1e-9) + 1e-300


@given(rhos, _pair(st.floats(min_value=0.0, max_value=60.0)))
@settings(max_examples=60, deadline=None)
def test_zcdp_delta_decreasing_in_epsilon(rho: float, e: tuple[float, float]) -> None:
    lo, hi = e
    for method in ("optimal", "analytic"):
        assert zcdp_delta(rho, hi, method) <= zcdp_delta(rho, lo, method) * (1 + 1e-9) + 1e-300


@given(_pair(epss))
@settings(max_examples=50, deadline=None)
def test_pure_conversions_increasing_in_epsilon(e: tuple[float, float]) -> None:
    lo, hi = e
    assert pure_to_zcdp(PureDP(lo)).rho <= pure_to_zcdp(PureDP(hi)).rho
    for method in ("bun_steinke", "tight"):
        a = pure_to_rdp(PureDP(lo), method)(ALPHAS)
        b = pure_to_rdp(PureDP(hi), method)(ALPHAS)
        assert np.all(a <= b + TOL)


@given(_pair(small_eps), st.integers(min_value=1, max_value=4))
@settings(max_examples=60, deadline=None)
def test_geometric_rdp_increasing_in_epsilon_and_order(e: tuple[float, float], k: int) -> None:
    lo, hi = e
    a, b = geometric_rdp(lo, k)(ALPHAS), geometric_rdp(hi, k)(ALPHAS)
    assert np.all(a <= b * (1 + 1e-10) + TOL)
    # Rényi divergences are non-decreasing in the order, and bounded by the pure k·ε
    assert np.all(np.diff(b) >= -1e-10 * b[1:])
    assert np.all(b <= k * hi * (1 + 1e-12))


@given(_pair(small_eps), deltas, st.integers(min_value=1, max_value=20))
@settings(max_examples=40, deadline=None)
def test_rdp_epsilon_increasing_in_epsilon(e: tuple[float, float], delta: float, n: int) -> None:
    lo, hi = e
    a, b = compose([geometric_rdp(lo)] * n), compose([geometric_rdp(hi)] * n)
    assert isinstance(a, RDP)
    assert isinstance(b, RDP)
    for method in ("optimal", "mironov"):
        assert rdp_epsilon(a, delta, method) <= rdp_epsilon(b, delta, method) * (1 + 1e-7)


@given(small_eps, _pair(deltas), st.integers(min_value=1, max_value=20))
@settings(max_examples=40, deadline=None)
def test_rdp_epsilon_decreasing_in_delta(eps: float, d: tuple[float, float], n: int) -> None:
    lo, hi = d
    g = compose([geometric_rdp(eps)] * n)
    assert isinstance(g, RDP)
    for method in ("optimal", "mironov"):
        assert rdp_epsilon(g, hi, method) <= rdp_epsilon(g, lo, method) * (1 + 1e-7)


@given(_pair(epss), _pair(st.floats(min_value=0.0, max_value=1.0)))
@settings(max_examples=60, deadline=None)
def test_poisson_subsampling_monotone(e: tuple[float, float], r: tuple[float, float]) -> None:
    (elo, ehi), (rlo, rhi) = e, r
    f = poisson_subsample
    assert f(PureDP(elo), rlo).epsilon <= f(PureDP(ehi), rlo).epsilon * (1 + 1e-12) + TOL  # type: ignore[union-attr]
    assert f(PureDP(elo), rlo).epsilon <= f(PureDP(elo), rhi).epsilon * (1 + 1e-12) + TOL  # type: ignore[union-attr]
    # never worse than no subsampling; rate 1 changes nothing
    assert f(PureDP(ehi), rhi).epsilon <= ehi * (1 + 1e-12) + TOL  # type: ignore[union-attr]
    assert f(PureDP(ehi), 1.0).epsilon == pytest.approx(ehi, rel=1e-12, abs=TOL)  # type: ignore[union-attr]


approx = st.tuples(
    st.floats(min_value=0.0, max_value=10.0), st.floats(min_value=0.0, max_value=0.01)
).map(lambda t: ApproxDP(*t))


@given(approx, approx, approx)
@settings(max_examples=60, deadline=None)
def test_approx_composition_associative_and_commutative(
    x: ApproxDP, y: ApproxDP, z: ApproxDP
) -> None:
    left, right, flat = compose(compose(x, y), z), compose(x, compose(y, z)), compose(z, y, x)
    for u in (right, flat):
        assert isinstance(u, ApproxDP)
        assert isinstance(left, ApproxDP)
        assert u.epsilon == pytest.approx(left.epsilon, rel=1e-12, abs=1e-300)
        assert u.delta == pytest.approx(left.delta, rel=1e-12, abs=1e-300)


@given(small_eps, st.floats(min_value=0.0, max_value=5.0), small_eps)
@settings(max_examples=40, deadline=None)
def test_rdp_composition_associative(a: float, b: float, c: float) -> None:
    x, y, z = geometric_rdp(a), ZCDP(b), PureDP(c)
    left, right = compose(compose(x, y), z), compose(x, compose(y, z))
    assert isinstance(left, RDP)
    assert isinstance(right, RDP)
    np.testing.assert_allclose(left(ALPHAS), right(ALPHAS), rtol=1e-12)
    # the curve of a composition is the pointwise sum
    expected = geometric_rdp(a)(ALPHAS) + b * ALPHAS + pure_to_rdp(PureDP(c), "tight")(ALPHAS)
    np.testing.assert_allclose(left(ALPHAS), expected, rtol=1e-12)


@given(st.lists(epss, min_size=1, max_size=6))
@settings(max_examples=40, deadline=None)
def test_parallel_is_order_free_and_never_below_a_part(es: list[float]) -> None:
    gs = [PureDP(e) for e in es]
    fwd, rev = parallel(*gs), parallel(*reversed(gs))
    assert fwd == rev
    assert isinstance(fwd, PureDP)
    assert math.isclose(fwd.epsilon, max(es))
