"""Exact guarantees: a zCDP ρ or a pure-DP ε as a rational number, composed exactly.

The guarantee a release *states* is derived in exact arithmetic from the mechanisms that
drew its noise, and published as a float rounded **up** (never below the exact value) with
the exact value beside it as a string (:meth:`ExactGuarantee.to_json`). Composition:

* sequential (``a + b``): ρ's add (Bun & Steinke 2016, Lemma 2.3), ε's add (Dwork, McSherry,
  Nissim & Smith 2006); a pure-DP ε composed with zCDP is first converted to
  ρ = ε²/2 (Bun & Steinke 2016, Prop. 1.4);
* ``k``-fold (``a.times(k)``), e.g. a person in at most ``k`` population groups of a level
  (generalized parallel composition by degree, SafeTab seed Lemmas 9, 10);
* parallel over disjoint persons (``ExactGuarantee.parallel``): the larger of the two.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from privtab.accounting.guarantees import ZCDP, Guarantee, PureDP

__all__ = ["Definition", "ExactGuarantee", "float_up"]

Definition = Literal["zcdp", "pure"]
_KEY: dict[str, str] = {"zcdp": "rho", "pure": "epsilon"}


def float_up(value: Fraction) -> float:
    """The smallest float ≥ ``value`` (privacy costs are stated conservatively)."""
    f = float(value)
    if Fraction(f) < value:
        f = math.nextafter(f, math.inf)
    return f


@dataclass(frozen=True)
class ExactGuarantee:
    """ρ-zCDP (``definition="zcdp"``) or ε-DP (``"pure"``) with an exact rational value."""

    definition: Definition
    value: Fraction

    def __post_init__(self) -> None:
        if self.definition not in _KEY:
            raise ValueError(f"definition must be 'zcdp' or 'pure', got {self.definition!r}")
        object.__setattr__(self, "value", Fraction(self.value))
        if self.value < 0:
            raise ValueError(f"a privacy parameter is non-negative, got {self.value}")

    @classmethod
    def zero(cls, definition: Definition) -> ExactGuarantee:
        return cls(definition, Fraction(0))

    def as_zcdp(self) -> ExactGuarantee:
        """The same guarantee as zCDP (ε-DP ⇒ ε²/2-zCDP, Bun & Steinke 2016 Prop. 1.4)."""
        if self.definition == "zcdp":
            return self
        return ExactGuarantee("zcdp", self.value**2 / 2)

    def __add__(self, other: ExactGuarantee) -> ExactGuarantee:
        """Sequential composition (exact)."""
        if self.definition == other.definition:
            return ExactGuarantee(self.definition, self.value + other.value)
        return ExactGuarantee("zcdp", self.as_zcdp().value + other.as_zcdp().value)

    def times(self, k: int) -> ExactGuarantee:
        """``k``-fold sequential composition."""
        if int(k) != k or k < 0:
            raise ValueError(f"k must be a non-negative integer, got {k!r}")
        return ExactGuarantee(self.definition, self.value * int(k))

    @staticmethod
    def parallel(items: Iterable[ExactGuarantee]) -> ExactGuarantee:
        """Parallel composition over disjoint persons: the largest guarantee."""
        xs = list(items)
        if not xs:
            raise ValueError("parallel composition of nothing")
        defs = {x.definition for x in xs}
        if len(defs) > 1:
            xs = [x.as_zcdp() for x in xs]
        return max(xs, key=lambda x: x.value)

    @staticmethod
    def sequential(items: Iterable[ExactGuarantee], definition: Definition) -> ExactGuarantee:
        total = ExactGuarantee.zero(definition)
        for x in items:
            total = total + x
        return total

    @property
    def parameter(self) -> str:
        """``rho`` or ``epsilon``."""
        return _KEY[self.definition]

    def upper(self) -> float:
        """The value as a float, rounded up."""
        return float_up(self.value)

    def guarantee(self) -> Guarantee:
        """The float guarantee object (value rounded up) for the conversions of
        :mod:`privtab.accounting`."""
        return ZCDP(self.upper()) if self.definition == "zcdp" else PureDP(self.upper())

    def to_json(self) -> dict[str, Any]:
        """``{"zcdp": {"rho": ρ↑, "rho_exact": "p/q"}}`` (or ``pure``/``epsilon``)."""
        k = self.parameter
        return {self.definition: {k: self.upper(), f"{k}_exact": str(self.value)}}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ExactGuarantee:
        """Inverse of :meth:`to_json` (the exact string is required)."""
        if not isinstance(doc, Mapping) or len(doc) != 1:
            raise ValueError("a guarantee is one object: {'zcdp': {...}} or {'pure': {...}}")
        ((definition, body),) = doc.items()
        if definition not in _KEY or not isinstance(body, Mapping):
            raise ValueError(f"unknown guarantee {definition!r} (zcdp or pure)")
        key = f"{_KEY[definition]}_exact"
        if key not in body:
            raise ValueError(f"guarantee {definition!r} lacks the exact value {key!r}")
        try:
            value = Fraction(str(body[key]))
        except (ValueError, ZeroDivisionError) as exc:
            raise ValueError(f"{key} is not a rational number: {body[key]!r}") from exc
        return cls(definition, value)  # type: ignore[arg-type]

    def __str__(self) -> str:
        sym = "ρ" if self.definition == "zcdp" else "ε"
        return f"{sym} = {self.upper():.6g} ({'zCDP' if self.definition == 'zcdp' else 'pure DP'})"
