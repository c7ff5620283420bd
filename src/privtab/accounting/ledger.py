"""A privacy ledger: a budget that records measurements and refuses to be overspent.

Exactness. Charges and budgets are compared as exact rationals, with one rule for each:

* a **charge** is never rounded down. A :class:`~fractions.Fraction` (in an
  :class:`~privtab.accounting.exact.ExactGuarantee`) is taken as it is; a float guarantee
  is taken at its exact binary value (``Fraction(float)``), never at a shorter decimal. A
  mechanism's float guarantee is its exact loss rounded *up* (``Geometric(0.1).guarantee``
  is ε = 0.1000000000000000055…, the binary value of ``0.1`` the mechanism was built with),
  so ten ``Geometric(0.1)`` charges exceed ε = 1 and are refused, while ten exact
  ``ExactGuarantee.pure(Fraction(1, 10))`` charges fit. Derived costs are exact too
  (pure → zCDP ε²/2 and GDP → zCDP μ²/2 are computed on the rationals).
* a **budget** is a policy a person wrote down: a float budget is read as the decimal it
  prints as (``1.0`` → 1, ``0.3`` → 3/10), which is what the user typed; pass an
  :class:`~privtab.accounting.exact.ExactGuarantee` for any other rational. A budget may be
  rounded down; a charge never is.

What the ledger reports (``spent``, the float ``charged`` of each charge) is rounded up;
``remaining`` is rounded down.

Adaptivity. A ledger whose charges may be chosen *after* seeing earlier outputs is a
privacy filter. Filters are valid for pure DP (Rogers, Roth, Ullman & Vadhan 2016), for
(ε, δ)-DP under basic composition (same paper) and for zCDP (Whitehouse, Ramdas, Rogers &
Wu 2023). For a GDP budget or for an (ε, δ) budget accounted through RDP curves, privtab
requires ``adaptive=False``: the caller declares the sequence of mechanisms fixed in advance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, TypeAlias

from privtab.accounting._args import exact_or_guarantee_arg
from privtab.accounting.composition import compose
from privtab.accounting.conversions import epsilon_at, to_rdp
from privtab.accounting.exact import ExactGuarantee, float_down, float_up
from privtab.accounting.guarantees import GDP, RDP, ZCDP, ApproxDP, Guarantee, PureDP

__all__ = ["BudgetExceededError", "Charge", "PrivacyLedger"]

Chargeable: TypeAlias = Guarantee | ExactGuarantee
_Cost: TypeAlias = tuple[Fraction, ...]


class BudgetExceededError(RuntimeError):
    """A charge would have taken the ledger over its budget; nothing was recorded."""


@dataclass(frozen=True)
class Charge:
    """One recorded measurement.

    ``guarantee`` is as given; ``cost`` is its exact cost in the budget's definition (ε;
    (ε, δ); ρ; μ²); ``charged`` is that cost as a float guarantee, rounded up.
    """

    label: str
    guarantee: Chargeable
    charged: Guarantee
    cost: _Cost = ()


def _decimal(x: float) -> Fraction:
    """A budget's float as the decimal a user typed (``0.1`` → 1/10)."""
    if math.isinf(x):
        raise ValueError("an infinite budget is not a budget")
    return Fraction(repr(float(x)))


def _binary(x: float) -> Fraction:
    """A charge's float at its exact binary value (never rounded down)."""
    if math.isinf(x):
        raise ValueError("infinite privacy parameters cannot be charged to a budget")
    return Fraction(float(x))


def _sqrt_up(x: Fraction) -> float:
    r = math.sqrt(float_up(x))
    while Fraction(r) ** 2 < x:
        r = math.nextafter(r, math.inf)
    return r


def _sqrt_down(x: Fraction) -> float:
    r = math.sqrt(float_down(x))
    while r > 0 and Fraction(r) ** 2 > x:
        r = math.nextafter(r, -math.inf)
    return r


def _budget_cost(b: Guarantee | ExactGuarantee) -> _Cost:
    """The budget's limit vector (ε; (ε, δ); ρ; μ²), exactly."""
    if isinstance(b, ExactGuarantee):
        return (b.value,)
    if isinstance(b, PureDP):
        return (_decimal(b.epsilon),)
    if isinstance(b, ApproxDP):
        return (_decimal(b.epsilon), _decimal(b.delta))
    if isinstance(b, ZCDP):
        return (_decimal(b.rho),)
    if isinstance(b, GDP):
        return (_decimal(b.mu) ** 2,)
    raise TypeError("an RDP curve is not a budget; use an (ε, δ) budget with accountant='rdp'")


def _charge_cost(g: Chargeable, b: Guarantee) -> _Cost:
    """The exact cost of ``g`` in the definition of the budget ``b`` (TypeError if none)."""
    if isinstance(g, ExactGuarantee):
        if isinstance(b, PureDP) and g.definition == "pure":
            return (g.value,)
        if isinstance(b, ApproxDP) and g.definition == "pure":
            return (g.value, Fraction(0))
        if isinstance(b, ZCDP):
            return (g.as_zcdp().value,)
    elif isinstance(b, PureDP):
        if isinstance(g, PureDP):
            return (_binary(g.epsilon),)
    elif isinstance(b, ApproxDP):
        if isinstance(g, PureDP):
            return (_binary(g.epsilon), Fraction(0))
        if isinstance(g, ApproxDP):
            return (_binary(g.epsilon), _binary(g.delta))
    elif isinstance(b, ZCDP):
        if isinstance(g, ZCDP):
            return (_binary(g.rho),)
        if isinstance(g, PureDP):  # Bun & Steinke 2016, Prop. 1.4
            return (_binary(g.epsilon) ** 2 / 2,)
        if isinstance(g, GDP):
            return (_binary(g.mu) ** 2 / 2,)
    elif isinstance(b, GDP) and isinstance(g, GDP):
        return (_binary(g.mu) ** 2,)
    raise TypeError(f"a {_kind(g)} charge cannot be spent from a {b} budget")


def _kind(g: Chargeable) -> str:
    if isinstance(g, ExactGuarantee):
        return "pure DP" if g.definition == "pure" else "zCDP"
    return type(g).__name__


def _as_guarantee(cost: _Cost, b: Guarantee, up: bool) -> Guarantee:
    """An exact cost vector as a float guarantee of the budget's type, rounded up or down."""
    r = float_up if up else float_down
    if isinstance(b, PureDP):
        return PureDP(r(cost[0]))
    if isinstance(b, ApproxDP):
        return ApproxDP(r(cost[0]), min(r(cost[1]), 1.0))
    if isinstance(b, ZCDP):
        return ZCDP(r(cost[0]))
    assert isinstance(b, GDP)
    return GDP(_sqrt_up(cost[0]) if up else _sqrt_down(cost[0]))


class PrivacyLedger:
    """A privacy budget with a record of what has been spent.

    Parameters
    ----------
    budget:
        The total guarantee allowed: :class:`PureDP`, :class:`ApproxDP`, :class:`ZCDP` or
        :class:`GDP` (floats read as the decimals they print as), or an exact pure/zCDP
        :class:`~privtab.accounting.exact.ExactGuarantee`.
    accountant:
        How charges are combined. ``"native"`` (default) sums in the budget's definition
        (ε; (ε, δ) basic composition; ρ; μ²), exactly. ``"rdp"`` is for an (ε, δ) budget:
        charges are composed as Rényi curves and the total is converted to ε at the
        budget's δ (tighter; requires ``adaptive=False``).
    adaptive:
        Whether charges may be chosen after seeing earlier outputs (see module docstring).
    """

    def __init__(
        self,
        budget: Guarantee | ExactGuarantee,
        *,
        accountant: Literal["native", "rdp"] = "native",
        adaptive: bool = True,
    ) -> None:
        budget = exact_or_guarantee_arg(budget, "PrivacyLedger")
        if isinstance(budget, RDP):
            raise TypeError(
                "an RDP curve is not a budget; use an (ε, δ) budget with accountant='rdp'"
            )
        if accountant not in ("native", "rdp"):
            raise ValueError(f"accountant must be 'native' or 'rdp', got {accountant!r}")
        self._limit = _budget_cost(budget)
        if isinstance(budget, ExactGuarantee):
            v = float_down(budget.value)
            budget = PureDP(v) if budget.definition == "pure" else ZCDP(v)
        if accountant == "rdp" and not isinstance(budget, ApproxDP):
            raise ValueError("accountant='rdp' needs an (ε, δ) budget (ApproxDP)")
        if adaptive and (isinstance(budget, GDP) or accountant == "rdp"):
            raise ValueError(
                "fully adaptive composition is only supported for pure DP, (ε, δ)-DP with "
                "basic composition and zCDP; pass adaptive=False to declare that the "
                "sequence of mechanisms is fixed in advance"
            )
        self.budget: Guarantee = budget
        self.accountant = accountant
        self.adaptive = adaptive
        self._entries: list[Charge] = []

    # ------------------------------------------------------------------ charging
    def _price(self, g: Chargeable) -> Charge:
        """The charge ``g`` would make (TypeError if it cannot be spent from this budget)."""
        g = exact_or_guarantee_arg(g, "PrivacyLedger.charge")
        if self.accountant == "rdp":
            if isinstance(g, ApproxDP):
                raise TypeError("an (ε, δ) charge cannot be composed through RDP curves")
            charged = g.to_guarantee() if isinstance(g, ExactGuarantee) else g
            return Charge("", g, charged)
        cost = _charge_cost(g, self.budget)
        return Charge("", g, _as_guarantee(cost, self.budget, up=True), cost)

    def _spent_cost(self, extra: Charge | None = None) -> _Cost:
        entries = self._entries + ([extra] if extra is not None else [])
        total = [Fraction(0)] * len(self._limit)
        for e in entries:
            total = [t + c for t, c in zip(total, e.cost, strict=True)]
        return tuple(total)

    def _fits(self, extra: Charge | None) -> bool:
        if self.accountant == "rdp":
            assert isinstance(self.budget, ApproxDP)
            charged = [e.charged for e in self._entries] + (
                [extra.charged] if extra is not None else []
            )
            if not charged:
                return True
            total = compose(*charged)
            return epsilon_at(total, self.budget.delta) <= self.budget.epsilon
        spent = self._spent_cost(extra)
        return all(s <= lim for s, lim in zip(spent, self._limit, strict=True))

    def charge(self, guarantee: Chargeable, label: str = "") -> Charge:
        """Record a measurement's guarantee; raise :class:`BudgetExceededError` if it
        would overspend (in which case nothing is recorded). Compared exactly (see the
        module docstring)."""
        priced = self._price(guarantee)
        if not self._fits(priced):
            name = label or "(unlabelled)"
            if self.accountant == "rdp":
                detail = f"of {guarantee} would exceed the budget {self.budget}"
            else:
                detail = (
                    f"of {self._describe(priced.cost)} would exceed the budget "
                    f"{self._describe(self._limit)} (already spent "
                    f"{self._describe(self._spent_cost())}; exact values compared)"
                )
            raise BudgetExceededError(f"charge {name!r} {detail}; nothing was recorded")
        entry = Charge(label, priced.guarantee, priced.charged, priced.cost)
        self._entries.append(entry)
        return entry

    def _describe(self, cost: _Cost) -> str:
        """A cost vector in the budget's definition, to 17 significant digits (rounded up)."""
        names = {PureDP: ("ε",), ApproxDP: ("ε", "δ"), ZCDP: ("ρ",), GDP: ("μ²",)}
        parts = [
            f"{n} = {float_up(c):.17g}"
            for n, c in zip(names[type(self.budget)], cost, strict=True)  # type: ignore[index]
        ]
        return ", ".join(parts)

    def can_afford(self, guarantee: Chargeable) -> bool:
        """Whether :meth:`charge` would accept this guarantee now."""
        try:
            return self._fits(self._price(guarantee))
        except TypeError:
            return False

    # ------------------------------------------------------------------ reporting
    @property
    def entries(self) -> tuple[Charge, ...]:
        return tuple(self._entries)

    @property
    def spent_exact(self) -> tuple[Fraction, ...]:
        """Total spent, exactly, in the budget's definition: (ε,), (ε, δ), (ρ,) or (μ²,)
        (native accountant only)."""
        if self.accountant == "rdp":
            raise ValueError("the RDP accountant has no exact scalar total; use spent")
        return self._spent_cost()

    @property
    def spent(self) -> Guarantee:
        """Total spent so far, in the budget's definition, rounded up (an RDP curve for
        ``accountant="rdp"``)."""
        if self.accountant == "rdp":
            charged = [e.charged for e in self._entries]
            return compose(*charged) if charged else PureDP(0.0)
        return _as_guarantee(self._spent_cost(), self.budget, up=True)

    @property
    def remaining(self) -> Guarantee | None:
        """What is left in the budget's definition, rounded down (``None`` for the RDP
        accountant)."""
        if self.accountant == "rdp":
            return None
        left = tuple(
            max(lim - s, Fraction(0))
            for lim, s in zip(self._limit, self._spent_cost(), strict=True)
        )
        return _as_guarantee(left, self.budget, up=False)

    def epsilon_at(self, delta: float) -> float:
        """Total spent, as ε at ``delta`` by the tightest conversion available.

        The spent total in the budget's definition, converted (zCDP, GDP, RDP: optimal
        order; pure: ε). For a non-adaptive ledger (the sequence was fixed in advance) with
        ``delta > 0`` and no (ε, δ) charge, the charges *as given* are also composed as
        Rényi curves (pure ε as randomized response, the tightest ε-DP curve) and the
        smaller of the two valid bounds is returned — e.g. many small pure-DP charges.
        """
        base = epsilon_at(self.spent, delta)
        gs = [
            e.guarantee.to_guarantee() if isinstance(e.guarantee, ExactGuarantee) else e.guarantee
            for e in self._entries
        ]
        if self.adaptive or delta <= 0 or not gs or any(isinstance(g, ApproxDP) for g in gs):
            return base
        curves = compose(*[to_rdp(g) for g in gs])
        return min(base, epsilon_at(curves, delta))

    def to_dict(self, delta: float | None = None) -> dict[str, Any]:
        """A JSON-ready summary (``delta`` adds the total ε at that δ). Exact totals are
        strings beside the floats (which are rounded up, or down for ``remaining``)."""
        out: dict[str, Any] = {
            "budget": str(self.budget),
            "budget_exact": [str(x) for x in self._limit],
            "accountant": self.accountant,
            "adaptive": self.adaptive,
            "spent": str(self.spent),
            "remaining": None if self.remaining is None else str(self.remaining),
            "charges": [
                {"label": e.label, "guarantee": str(e.guarantee), "charged": str(e.charged)}
                for e in self._entries
            ],
        }
        if self.accountant == "native":
            out["spent_exact"] = [str(x) for x in self._spent_cost()]
        if delta is not None:
            out["epsilon_at_delta"] = {"delta": delta, "epsilon": self.epsilon_at(delta)}
        return out
