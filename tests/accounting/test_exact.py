"""Exact scalar guarantees: rounding direction, conversion, comparison, JSON round trip."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privtab.accounting import ZCDP, ExactGuarantee, PureDP
from privtab.accounting.exact import float_down, float_up

fractions = st.fractions(min_value=Fraction(1, 10**9), max_value=10**6)


@given(fractions)
@settings(max_examples=100, deadline=None)
def test_published_floats_never_understate(v: Fraction) -> None:
    g = ExactGuarantee.zcdp(v)
    assert Fraction(g.to_guarantee().rho) >= v  # type: ignore[union-attr]
    assert Fraction(g.to_dict()["value_float"]) >= v
    assert Fraction(float_down(v)) <= v <= Fraction(float_up(v))
    shown = str(g).split("= ")[1].split(" ")[0]
    assert Fraction(shown) >= v
    assert ExactGuarantee.from_dict(g.to_dict()) == g


def test_constructors_are_exact() -> None:
    assert ExactGuarantee.pure("0.1").value == Fraction(1, 10)
    assert ExactGuarantee.pure(0.1).value == Fraction(0.1) != Fraction(1, 10)
    assert ExactGuarantee.zcdp("1/3").value == Fraction(1, 3)
    assert ExactGuarantee.from_guarantee(PureDP(0.1)) == ExactGuarantee.pure(0.1)
    assert ExactGuarantee.from_guarantee(ZCDP(2.0)) == ExactGuarantee.zcdp(2)
    assert ExactGuarantee.pure(2).as_zcdp() == ExactGuarantee.zcdp(2)
    with pytest.raises(ValueError, match="rho must be non-negative"):
        ExactGuarantee.zcdp(-1)
    with pytest.raises(ValueError, match="definition"):
        ExactGuarantee("gdp", Fraction(1))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exact string"):
        ExactGuarantee.from_dict({"definition": "zcdp", "value": 0.5})


def test_fits() -> None:
    assert ExactGuarantee.pure(1).fits(ExactGuarantee.pure(1))
    assert not ExactGuarantee.pure(0.1).fits(ExactGuarantee.pure("0.1"))
    assert ExactGuarantee.pure(1).fits(ExactGuarantee.zcdp("0.5"))
    assert not ExactGuarantee.zcdp("0.01").fits(ExactGuarantee.pure(100))
