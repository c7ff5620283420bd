"""Guarantee types: validation and immutability."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from privtab.accounting import GDP, RDP, ZCDP, ApproxDP, PureDP


@pytest.mark.parametrize(
    ("factory", "name"),
    [
        (lambda v: PureDP(v), "epsilon"),
        (lambda v: ZCDP(v), "rho"),
        (lambda v: GDP(v), "mu"),
        (lambda v: ApproxDP(v, 1e-6), "epsilon"),
        (lambda v: ApproxDP(1.0, v), "delta"),
    ],
)
@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf])
def test_bad_parameters_name_the_parameter(factory, name, bad) -> None:
    with pytest.raises(ValueError, match=name):
        factory(bad)


def test_delta_above_one_rejected() -> None:
    with pytest.raises(ValueError, match="delta must be at most 1"):
        ApproxDP(1.0, 1.5)


def test_non_numeric_rejected() -> None:
    with pytest.raises(ValueError, match="rho must be a real number"):
        ZCDP("abc")  # type: ignore[arg-type]


def test_guarantees_are_immutable_and_hashable() -> None:
    g = ZCDP(1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.rho = 2.0  # type: ignore[misc]
    assert {ZCDP(1.0), ZCDP(1.0), PureDP(1.0)} == {ZCDP(1.0), PureDP(1.0)}


def test_rdp_closed_form_evaluates_anywhere() -> None:
    g = RDP(lambda a: 0.5 * a, "half")
    assert g(2.0) == pytest.approx(1.0)
    np.testing.assert_allclose(g([1.5, 3.0]), [0.75, 1.5])
    with pytest.raises(ValueError, match="alpha must be > 1"):
        g(1.0)


def test_rdp_rejects_negative_or_nan_curves() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        RDP(lambda a: -a)
    with pytest.raises(ValueError, match="NaN"):
        RDP(lambda a: a * np.nan)


def test_tabulated_rdp_is_a_valid_upper_bound_of_a_convex_cgf() -> None:
    # zCDP curve tau = rho * alpha tabulated at a few orders: (alpha-1)tau is convex, so
    # interpolation of (alpha-1)tau must never fall below the true curve.
    rho = 0.3
    orders = np.array([1.5, 2.0, 4.0, 8.0, 16.0])
    tab = RDP.tabulated(orders, rho * orders)
    between = np.linspace(1.01, 16.0, 400)
    assert np.all(tab(between) >= rho * between - 1e-12)
    np.testing.assert_allclose(tab(orders), rho * orders)
    assert np.isinf(tab(17.0))
    # below the smallest order the value at that order is used (D_alpha is non-decreasing)
    assert tab(1.2) == pytest.approx(rho * 1.5)


def test_tabulated_rdp_validation() -> None:
    with pytest.raises(ValueError, match="alphas must all be > 1"):
        RDP.tabulated([1.0, 2.0], [0.1, 0.2])
    with pytest.raises(ValueError, match="same non-zero length"):
        RDP.tabulated([2.0, 3.0], [0.1])
    with pytest.raises(ValueError, match="taus must be non-negative"):
        RDP.tabulated([2.0, 3.0], [0.1, -0.2])
