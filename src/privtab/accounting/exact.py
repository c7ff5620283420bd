"""Exact scalar guarantees: pure ε-DP and ρ-zCDP as rationals, and safe rounding to floats.

The float guarantee types (:class:`~privtab.accounting.PureDP`, :class:`~privtab.accounting.ZCDP`)
are for conversions and reporting. Where a guarantee is *charged* against a budget, stored in
a ledger or published, privtab keeps the exact rational (:class:`ExactGuarantee`) and rounds
to a float only for display, and then *up* (:func:`float_up`): a published float is never
below the privacy loss it states.

Rules (Bun & Steinke 2016, arXiv:1605.02065):

* sequential composition adds ε (pure DP) and ρ (zCDP) (Lemma 2.3 / Lemma 1.7);
* ε-DP implies (ε²/2)-zCDP (Prop. 1.4; Prop. 3.3 in the body), so a mixture of pure and
  zCDP guarantees composes in zCDP with each pure ε entering as ε²/2 — tighter than
  converting the pure sum, since Σε²/2 ≤ (Σε)²/2;
* zCDP does not imply pure DP: a zCDP guarantee never fits a pure-DP budget;
* ``k``-fold composition (:meth:`ExactGuarantee.times`), e.g. a person in at most ``k``
  population groups of a level (generalized parallel composition by degree, SafeTab seed
  Lemmas 9, 10); parallel composition over disjoint persons
  (:meth:`ExactGuarantee.parallel`): the larger guarantee.

Two JSON forms: :meth:`ExactGuarantee.to_dict` (the release ledger's) and
:meth:`ExactGuarantee.to_json` (``release.json``'s ``{"zcdp": {"rho": ρ↑, "rho_exact":
"p/q"}}``, which tools that read only the float still understand).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal, TypeAlias

from privtab.accounting.guarantees import ZCDP, PureDP
from privtab.random import RationalLike
from privtab.random.rational import as_rational

__all__ = [
    "Definition",
    "ExactGuarantee",
    "compose_exact",
    "exact_or_up",
    "float_down",
    "float_up",
]

Definition: TypeAlias = Literal["pure", "zcdp"]
_DEFINITIONS: tuple[Definition, ...] = ("pure", "zcdp")


def float_up(value: Fraction) -> float:
    """The smallest float ≥ ``value`` (for stating privacy costs conservatively)."""
    f = float(value)
    if Fraction(f) < value:
        f = math.nextafter(f, math.inf)
    return f


def float_down(value: Fraction) -> float:
    """The largest float ≤ ``value``."""
    f = float(value)
    if Fraction(f) > value:
        f = math.nextafter(f, -math.inf)
    return f


def _short_decimal(v: Fraction, max_digits: int = 12) -> str | None:
    """``v`` as an exact decimal of at most ``max_digits`` significant digits, or ``None``."""
    d = v.denominator
    twos = fives = 0
    while d % 2 == 0:
        d //= 2
        twos += 1
    while d % 5 == 0:
        d //= 5
        fives += 1
    places = max(twos, fives)
    if d != 1 or places > max_digits:
        return None
    scaled = v * 10**places
    assert scaled.denominator == 1
    text = str(scaled.numerator).rjust(places + 1, "0")
    if len(text.lstrip("0")) > max_digits:
        return None
    whole, frac = text[: len(text) - places], text[len(text) - places :]
    return whole if not frac else f"{whole}.{frac}"


def _digits_up(v: Fraction, sig: int = 6) -> str:
    """``v > 0`` to ``sig`` significant digits, rounded up (``1/3`` → ``0.333334``)."""
    e = math.floor(math.log10(float_up(v)))
    scale = Fraction(10) ** (sig - 1 - e)
    if v * scale > Fraction(10) ** sig:  # log10 of the float rounded across a power of 10
        e += 1
        scale /= 10
    n = math.ceil(v * scale)
    d = Decimal(n).scaleb(e - sig + 1)
    return f"{d.normalize():f}" if -7 <= e < 16 else f"{d.normalize():g}"


def exact_or_up(value: Fraction | int, digits: int = 6) -> str:
    """How privtab prints a privacy parameter it knows exactly (a budget ρ or ε, a
    composed total): the exact decimal when it has at most ``digits`` significant digits
    (``618/125`` → ``4.944``), else rounded *up* to ``digits`` significant digits
    (``1/3`` → ``0.333334``) — never a number below the value. The one rule for every
    published ρ and ε (issue 31); a bound known only as a float (an ε at δ) is printed by
    :func:`privtab.report.round_up_sig`."""
    v = Fraction(value)
    if v <= 0:
        return str(v)
    short = _short_decimal(v, digits)
    return short if short is not None else _digits_up(v, digits)


@dataclass(frozen=True)
class ExactGuarantee:
    """A pure ε-DP (``definition="pure"``) or ρ-zCDP (``"zcdp"``) guarantee, exactly.

    ``value`` is a non-negative :class:`~fractions.Fraction`. Build one with
    :meth:`pure` / :meth:`zcdp` (which accept a Fraction, an int, a decimal string such as
    ``"0.1"`` read exactly, or a float taken at its exact binary value) or
    :meth:`from_guarantee`.

    >>> compose_exact([ExactGuarantee.pure("0.1"), ExactGuarantee.pure("0.2")])
    ExactGuarantee(definition='pure', value=Fraction(3, 10))
    >>> compose_exact([ExactGuarantee.pure(1), ExactGuarantee.zcdp("0.25")]).value  # 1/2 + 1/4
    Fraction(3, 4)
    """

    definition: Definition
    value: Fraction

    def __post_init__(self) -> None:
        if self.definition not in _DEFINITIONS:
            raise ValueError(f"definition must be 'pure' or 'zcdp', got {self.definition!r}")
        name = "epsilon" if self.definition == "pure" else "rho"
        object.__setattr__(self, "value", as_rational(self.value, name, nonnegative=True))

    @classmethod
    def pure(cls, epsilon: RationalLike) -> ExactGuarantee:
        """ε-DP with ε exact (a float is its binary value; ``"0.1"`` is 1/10)."""
        return cls("pure", as_rational(epsilon, "epsilon", nonnegative=True))

    @classmethod
    def zcdp(cls, rho: RationalLike) -> ExactGuarantee:
        """ρ-zCDP with ρ exact (a float is its binary value; ``"0.1"`` is 1/10)."""
        return cls("zcdp", as_rational(rho, "rho", nonnegative=True))

    @classmethod
    def from_guarantee(cls, g: PureDP | ZCDP) -> ExactGuarantee:
        """The exact value of a float guarantee: its binary value, never a shorter decimal
        (a float guarantee from privtab is already rounded up from the exact loss)."""
        if isinstance(g, PureDP):
            return cls("pure", Fraction(g.epsilon))
        if isinstance(g, ZCDP):
            return cls("zcdp", Fraction(g.rho))
        raise TypeError(f"only pure DP and zCDP have exact scalar forms, got {g!r}")

    def as_zcdp(self) -> ExactGuarantee:
        """The same guarantee in zCDP: ε-DP ⇒ (ε²/2)-zCDP (Bun & Steinke 2016, Prop. 1.4)."""
        if self.definition == "zcdp":
            return self
        return ExactGuarantee("zcdp", self.value * self.value / 2)

    def to_guarantee(self) -> PureDP | ZCDP:
        """The float guarantee, rounded up (never below the exact value)."""
        v = float_up(self.value)
        return PureDP(v) if self.definition == "pure" else ZCDP(v)

    def fits(self, budget: ExactGuarantee) -> bool:
        """Whether this guarantee is within ``budget`` (compared exactly).

        A pure guarantee is compared with a zCDP budget as ε²/2; a zCDP guarantee never
        fits a pure budget (zCDP does not imply pure DP).
        """
        if budget.definition == "pure":
            return self.definition == "pure" and self.value <= budget.value
        return self.as_zcdp().value <= budget.value

    @classmethod
    def zero(cls, definition: Definition) -> ExactGuarantee:
        """No privacy loss (a level that drew no noise)."""
        return cls(definition, Fraction(0))

    def __add__(self, other: ExactGuarantee) -> ExactGuarantee:
        """Sequential composition of two guarantees (see :func:`compose_exact`)."""
        out = compose_exact([self, other])
        assert out is not None
        return out

    def times(self, k: int) -> ExactGuarantee:
        """``k``-fold sequential composition (exact)."""
        if int(k) != k or k < 0:
            raise ValueError(f"k must be a non-negative integer, got {k!r}")
        return ExactGuarantee(self.definition, self.value * int(k))

    @staticmethod
    def parallel(items: Iterable[ExactGuarantee]) -> ExactGuarantee:
        """Parallel composition over disjoint persons: the largest guarantee (in zCDP if
        the definitions differ)."""
        xs = list(items)
        if not xs:
            raise ValueError("parallel composition of nothing")
        if len({x.definition for x in xs}) > 1:
            xs = [x.as_zcdp() for x in xs]
        return max(xs, key=lambda x: x.value)

    @property
    def parameter(self) -> str:
        """``rho`` or ``epsilon``."""
        return "epsilon" if self.definition == "pure" else "rho"

    def upper(self) -> float:
        """The value as a float, rounded up."""
        return float_up(self.value)

    def to_json(self) -> dict[str, Any]:
        """``{"zcdp": {"rho": ρ↑, "rho_exact": "p/q"}}`` (or ``pure`` / ``epsilon``)."""
        k = self.parameter
        return {self.definition: {k: self.upper(), f"{k}_exact": str(self.value)}}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ExactGuarantee:
        """Inverse of :meth:`to_json` (the exact string is authoritative and required)."""
        if not isinstance(doc, Mapping) or len(doc) != 1:
            raise ValueError("a guarantee is one object: {'zcdp': {...}} or {'pure': {...}}")
        ((definition, body),) = doc.items()
        if definition not in _DEFINITIONS or not isinstance(body, Mapping):
            raise ValueError(f"unknown guarantee {definition!r} (zcdp or pure)")
        key = f"{'epsilon' if definition == 'pure' else 'rho'}_exact"
        if key not in body or not isinstance(body[key], str):
            raise ValueError(f"guarantee {definition!r} lacks the exact value {key!r}")
        return cls(definition, as_rational(body[key], key, nonnegative=True))

    @property
    def symbol(self) -> str:
        """``ε`` or ``ρ``."""
        return "ε" if self.definition == "pure" else "ρ"

    def __str__(self) -> str:
        """``ρ = 4.944`` when the value is a short decimal, else the float rounded up and
        the exact fraction: ``ε = 0.333334 (exactly 1/3)``."""
        short = _short_decimal(self.value)
        if short is not None:
            return f"{self.symbol} = {short}"
        return f"{self.symbol} = {exact_or_up(self.value)} (exactly {self.value})"

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the exact value as a string and a float rounded up beside it."""
        return {
            "definition": self.definition,
            "value": str(self.value),
            "value_float": float_up(self.value),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExactGuarantee:
        """Read :meth:`to_dict` output (the exact string is authoritative)."""
        try:
            definition, value = d["definition"], d["value"]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"a guarantee needs 'definition' and 'value', got {d!r}") from exc
        if not isinstance(value, str):
            raise ValueError(f"a guarantee's value must be an exact string, got {value!r}")
        return cls(definition, as_rational(value, "value", nonnegative=True))


def compose_exact(guarantees: Iterable[ExactGuarantee]) -> ExactGuarantee | None:
    """Sequential composition of exact guarantees (``None`` for none): Σε if all are pure,
    else Σρ with *each* pure ε entering as ε²/2 (see the module docstring).

    Each pure term is converted on its own: converting a pure subtotal instead would give
    (Σε)²/2, a valid but looser bound, so composition is done here in one pass, not pairwise.
    """
    items = list(guarantees)
    if not items:
        return None
    if all(g.definition == "pure" for g in items):
        return ExactGuarantee("pure", sum((g.value for g in items), Fraction(0)))
    return ExactGuarantee("zcdp", sum((g.as_zcdp().value for g in items), Fraction(0)))
