"""One rule for guarantee arguments across privtab.accounting (issue 19).

A function named after a definition (``pure_*``, ``zcdp_*``, ``gdp_*``) takes that
definition's guarantee object, an exact one, or its parameter as a bare number; ``rdp_*``
take an RDP curve; every other function takes guarantee objects only and refuses a bare
number with a TypeError (never an AttributeError). The first test makes the rule cover
every function: a new function with a guarantee parameter must be listed here.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from privtab.accounting import (
    GDP,
    RDP,
    ZCDP,
    ApproxDP,
    ExactGuarantee,
    PrivacyLedger,
    PureDP,
    compose,
    epsilon_at,
    group_privacy,
    parallel,
    to_approx,
    to_rdp,
    zcdp_delta,
    zcdp_epsilon,
)
from privtab.accounting.composition import compose_by_degree, poisson_subsample
from privtab.accounting.conversions import (
    gdp_delta,
    gdp_epsilon,
    gdp_to_zcdp,
    pure_to_approx,
    pure_to_rdp,
    pure_to_zcdp,
    randomized_response_rdp,
    rdp_delta,
    rdp_epsilon,
    rdp_epsilon_order,
    zcdp_optimal_order,
    zcdp_to_rdp,
)
from privtab.accounting.summary import epsilon_by_method

GUARANTEE_TYPES = (PureDP, ApproxDP, ZCDP, RDP, GDP, ExactGuarantee)
MODULES = ["composition", "conversions", "curves", "exact", "ledger", "pld", "summary"]

# name -> (call with the guarantee argument first, the bare number, the matching object,
#          the exact form or None, an object of another definition)
NAMED: dict[str, tuple[Callable[[Any], Any], float, Any, Any, Any]] = {
    "pure_to_zcdp": (pure_to_zcdp, 1.0, PureDP(1.0), ExactGuarantee.pure(1), ZCDP(1.0)),
    "pure_to_approx": (pure_to_approx, 0.5, PureDP(0.5), ExactGuarantee.pure("1/2"), GDP(1)),
    "pure_to_rdp": (pure_to_rdp, 0.5, PureDP(0.5), ExactGuarantee.pure("1/2"), ZCDP(1.0)),
    "randomized_response_rdp": (
        randomized_response_rdp,
        0.5,
        PureDP(0.5),
        ExactGuarantee.pure("1/2"),
        ZCDP(1.0),
    ),
    "zcdp_to_rdp": (zcdp_to_rdp, 0.25, ZCDP(0.25), ExactGuarantee.zcdp("1/4"), PureDP(1)),
    "zcdp_epsilon": (
        lambda g: zcdp_epsilon(g, 1e-10),
        2.63,
        ZCDP(2.63),
        ExactGuarantee.zcdp("2.63"),
        PureDP(2.63),
    ),
    "zcdp_delta": (lambda g: zcdp_delta(g, 10.0), 1.0, ZCDP(1.0), ExactGuarantee.zcdp(1), GDP(1)),
    "zcdp_optimal_order": (
        lambda g: zcdp_optimal_order(g, 1e-10),
        1.0,
        ZCDP(1.0),
        ExactGuarantee.zcdp(1),
        PureDP(1.0),
    ),
    "gdp_to_zcdp": (gdp_to_zcdp, 1.5, GDP(1.5), None, ZCDP(1.5)),
    "gdp_delta": (lambda g: gdp_delta(g, 1.0), 1.5, GDP(1.5), None, ZCDP(1.5)),
    "gdp_epsilon": (lambda g: gdp_epsilon(g, 1e-6), 1.5, GDP(1.5), None, PureDP(1.5)),
}
RDP_NAMED: dict[str, Callable[[Any], Any]] = {
    "rdp_epsilon": lambda g: rdp_epsilon(g, 1e-10),
    "rdp_epsilon_order": lambda g: rdp_epsilon_order(g, 1e-10),
    "rdp_delta": lambda g: rdp_delta(g, 5.0),
}
GENERIC: dict[str, Callable[[Any], Any]] = {
    "compose": compose,
    "parallel": parallel,
    "compose_by_degree": lambda g: compose_by_degree(g, 2),
    "group_privacy": lambda g: group_privacy(g, 2),
    "poisson_subsample": lambda g: poisson_subsample(g, 0.1),
    "to_rdp": to_rdp,
    "epsilon_at": lambda g: epsilon_at(g, 1e-10),
    "to_approx": lambda g: to_approx(g, 1e-10),
    "epsilon_by_method": lambda g: epsilon_by_method(g, 1e-10),
}
# functions with a guarantee-typed parameter that are not conversions of a guarantee
EXEMPT = {
    "compose_exact",  # composes ExactGuarantees exactly (no float form at all)
}


def _takes_a_guarantee(fn: Callable[..., Any]) -> bool:
    params = list(inspect.signature(fn).parameters)
    if not params:
        return False
    # only the first parameter's annotation: the others may name TYPE_CHECKING-only types
    first = fn.__annotations__.get(params[0])
    if isinstance(first, str):
        try:
            first = eval(first, fn.__globals__)
        except NameError:  # a type imported only for type checking: not a guarantee type
            return False
    args = typing.get_args(first) or (first,)
    return any(isinstance(a, type) and issubclass(a, GUARANTEE_TYPES) for a in args)


def test_every_function_taking_a_guarantee_is_covered_by_the_rule() -> None:
    found = set()
    for name in MODULES:
        mod = importlib.import_module(f"privtab.accounting.{name}")
        for attr in mod.__all__:
            obj = getattr(mod, attr)
            if inspect.isfunction(obj) and _takes_a_guarantee(obj):
                found.add(attr)
    covered = set(NAMED) | set(RDP_NAMED) | set(GENERIC) | EXEMPT
    assert found - covered == set(), "a new function must follow (and be listed in) the rule"
    assert covered - found == set()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, RDP):
        alphas = np.array([1.5, 2.0, 10.0, 100.0])
        return bool(np.allclose(a(alphas), b(alphas), rtol=1e-12)) and a.limit == b.limit
    if isinstance(a, dict):
        return repr(a) == repr(b)  # NaN entries: compare the text
    if isinstance(a, tuple | float | np.floating):
        return bool(np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float)))
    return bool(a == b)


@pytest.mark.parametrize("name", sorted(NAMED))
def test_named_functions_take_the_object_the_exact_form_or_the_number(name: str) -> None:
    fn, number, obj, exact, other = NAMED[name]
    by_number = fn(number)
    assert _same(fn(obj), by_number)
    if exact is not None:
        assert _same(fn(exact), by_number)
    with pytest.raises(TypeError, match=name):
        fn(other)


@pytest.mark.parametrize("name", sorted(RDP_NAMED))
def test_rdp_functions_take_a_curve_and_refuse_a_number(name: str) -> None:
    fn = RDP_NAMED[name]
    fn(zcdp_to_rdp(1.0))
    with pytest.raises(TypeError, match=name):
        fn(1.0)
    with pytest.raises(TypeError, match=name):
        fn(ZCDP(1.0))


@pytest.mark.parametrize("name", sorted(GENERIC))
def test_generic_functions_take_any_guarantee_object_and_refuse_a_number(name: str) -> None:
    fn = GENERIC[name]
    exact = ExactGuarantee.pure("1/2")
    assert _same(fn(exact), fn(PureDP(0.5)))  # 1/2 is a float exactly
    with pytest.raises(TypeError, match=rf"{name} takes a guarantee.*ambiguous"):
        fn(1.0)


def test_an_exact_guarantee_is_read_rounded_up() -> None:
    # 1/3 has no float: the float read must be the one above it, so ε is never understated
    exact = ExactGuarantee.zcdp("1/3")
    assert zcdp_to_rdp(exact)(np.array([2.0]))[0] >= 2 / 3
    assert ZCDP(1 / 3).rho < exact.to_guarantee().rho


def test_the_ledger_refuses_a_bare_number_as_budget_or_charge() -> None:
    with pytest.raises(TypeError, match="PrivacyLedger takes a guarantee"):
        PrivacyLedger(1.0)  # type: ignore[arg-type]
    ledger = PrivacyLedger(ZCDP(1.0))
    with pytest.raises(TypeError, match="charge takes a guarantee"):
        ledger.charge(0.5)  # type: ignore[arg-type]
