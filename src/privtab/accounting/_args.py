"""How :mod:`privtab.accounting` reads a guarantee argument — one rule for every function.

* A function named after a definition (``pure_*``, ``zcdp_*``, ``gdp_*``) takes that
  definition's guarantee object, an :class:`~privtab.accounting.exact.ExactGuarantee` of
  that definition, or its one parameter as a bare number: ε for ``pure_*``, ρ for
  ``zcdp_*``, μ for ``gdp_*`` (the name says which number it is). ``rdp_*`` functions take
  an :class:`~privtab.accounting.guarantees.RDP` object (a curve has no one-number form).
* Every other function (``compose``, ``parallel``, ``epsilon_at``, ``to_approx``, ...)
  takes guarantee objects only — a bare number would be ambiguous (ε or ρ?) — and raises
  :class:`TypeError` naming what it accepts.

An :class:`~privtab.accounting.exact.ExactGuarantee` is read as its float guarantee rounded
**up** (never below the exact value), so every conversion of it stays valid.
"""

from __future__ import annotations

from numbers import Real
from typing import Any

from privtab.accounting.exact import ExactGuarantee
from privtab.accounting.guarantees import GDP, RDP, ZCDP, ApproxDP, Guarantee, PureDP

_KINDS = "PureDP, ApproxDP, ZCDP, RDP, GDP or ExactGuarantee"


def _name(value: Any) -> str:
    text = repr(value)
    kind = type(value).__name__
    return text if text.startswith(kind) else f"{kind} {text}"


def guarantee_arg(value: Any, fn: str) -> Guarantee:
    """A guarantee object (an exact one as its float rounded up); ``TypeError`` otherwise."""
    g = exact_or_guarantee_arg(value, fn)
    return g.to_guarantee() if isinstance(g, ExactGuarantee) else g


def exact_or_guarantee_arg(value: Any, fn: str) -> Guarantee | ExactGuarantee:
    """A guarantee object as it is (exact ones kept exact); ``TypeError`` otherwise."""
    if isinstance(value, PureDP | ApproxDP | ZCDP | RDP | GDP | ExactGuarantee):
        return value
    hint = (
        " (a bare number is ambiguous here: pass PureDP(epsilon), ZCDP(rho), ...)"
        if isinstance(value, Real)
        else ""
    )
    raise TypeError(f"{fn} takes a guarantee ({_KINDS}), got {_name(value)}{hint}")


def pure_arg(value: Any, fn: str) -> PureDP:
    """ε-DP from a :class:`PureDP`, an exact pure guarantee, or ε itself."""
    if isinstance(value, Real) and not isinstance(value, bool):
        return PureDP(float(value))
    g = _object(value, fn, "PureDP", "epsilon")
    if not isinstance(g, PureDP):
        raise _mismatch(fn, "PureDP", "epsilon", value)
    return g


def zcdp_arg(value: Any, fn: str) -> ZCDP:
    """ρ-zCDP from a :class:`ZCDP`, an exact zCDP guarantee, or ρ itself."""
    if isinstance(value, Real) and not isinstance(value, bool):
        return ZCDP(float(value))
    g = _object(value, fn, "ZCDP", "rho")
    if not isinstance(g, ZCDP):
        raise _mismatch(fn, "ZCDP", "rho", value)
    return g


def gdp_arg(value: Any, fn: str) -> GDP:
    """μ-GDP from a :class:`GDP` or μ itself."""
    if isinstance(value, Real) and not isinstance(value, bool):
        return GDP(float(value))
    g = _object(value, fn, "GDP", "mu")
    if not isinstance(g, GDP):
        raise _mismatch(fn, "GDP", "mu", value)
    return g


def rdp_arg(value: Any, fn: str) -> RDP:
    """An :class:`RDP` curve (``TypeError`` for anything else, numbers included)."""
    if isinstance(value, RDP):
        return value
    raise TypeError(
        f"{fn} takes an RDP curve, got {_name(value)} "
        "(privtab.accounting.to_rdp converts other guarantees)"
    )


def parameter_or_array(value: Any, fn: str, kind: type[ZCDP] | type[GDP]) -> Any:
    """For the vectorised ``zcdp_*``/``gdp_*`` functions: ρ (μ) from a guarantee object,
    else the value itself (a number or an array of them)."""
    if isinstance(value, PureDP | ApproxDP | ZCDP | RDP | GDP | ExactGuarantee):
        if kind is ZCDP:
            return zcdp_arg(value, fn).rho
        return gdp_arg(value, fn).mu
    return value


def _object(value: Any, fn: str, kind: str, number: str) -> Guarantee:
    if isinstance(value, PureDP | ApproxDP | ZCDP | RDP | GDP | ExactGuarantee):
        return guarantee_arg(value, fn)
    raise TypeError(f"{fn} takes a {kind} guarantee or {number} (a number), got {_name(value)}")


def _mismatch(fn: str, kind: str, number: str, value: Any) -> TypeError:
    return TypeError(
        f"{fn} takes a {kind} guarantee or {number} (a number), got {_name(value)} "
        "(privtab.accounting.epsilon_at / to_rdp accept any guarantee)"
    )
