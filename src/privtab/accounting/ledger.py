"""A privacy ledger: a budget that records measurements and refuses to be overspent.

Budgets and charges are compared in exact rational arithmetic on the decimal values given
(``0.1`` means 1/10), so ten charges of 0.1 fit a budget of 1 and no rounding can let the
spent total creep past the budget.

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
from typing import Any, Literal

from privtab.accounting.composition import compose
from privtab.accounting.conversions import epsilon_at, gdp_to_zcdp, pure_to_zcdp, to_rdp
from privtab.accounting.guarantees import GDP, RDP, ZCDP, ApproxDP, Guarantee, PureDP

__all__ = ["BudgetExceededError", "Charge", "PrivacyLedger"]


class BudgetExceededError(RuntimeError):
    """A charge would have taken the ledger over its budget; nothing was recorded."""


@dataclass(frozen=True)
class Charge:
    """One recorded measurement: its label, its guarantee as given and as charged."""

    label: str
    guarantee: Guarantee
    charged: Guarantee


def _q(x: float) -> Fraction:
    """The decimal a user typed, as an exact rational (``0.1`` → 1/10)."""
    if math.isinf(x):
        raise ValueError("infinite privacy parameters cannot be charged to a budget")
    return Fraction(repr(float(x)))


def _cost(g: Guarantee) -> tuple[Fraction, ...]:
    """Additive cost vector of a guarantee in its own definition."""
    if isinstance(g, PureDP):
        return (_q(g.epsilon),)
    if isinstance(g, ApproxDP):
        return (_q(g.epsilon), _q(g.delta))
    if isinstance(g, ZCDP):
        return (_q(g.rho),)
    if isinstance(g, GDP):
        return (_q(g.mu) ** 2,)
    raise TypeError("RDP curves are not additive scalars")


class PrivacyLedger:
    """A privacy budget with a record of what has been spent.

    Parameters
    ----------
    budget:
        The total guarantee allowed: :class:`PureDP`, :class:`ApproxDP`, :class:`ZCDP` or
        :class:`GDP`.
    accountant:
        How charges are combined. ``"native"`` (default) sums in the budget's definition
        (ε; (ε, δ) basic composition; ρ; μ²). ``"rdp"`` is for an (ε, δ) budget: charges
        are composed as Rényi curves and the total is converted to ε at the budget's δ
        (tighter; requires ``adaptive=False``).
    adaptive:
        Whether charges may be chosen after seeing earlier outputs (see module docstring).
    """

    def __init__(
        self,
        budget: Guarantee,
        *,
        accountant: Literal["native", "rdp"] = "native",
        adaptive: bool = True,
    ) -> None:
        if isinstance(budget, RDP):
            raise TypeError(
                "an RDP curve is not a budget; use an (ε, δ) budget with accountant='rdp'"
            )
        if accountant not in ("native", "rdp"):
            raise ValueError(f"accountant must be 'native' or 'rdp', got {accountant!r}")
        if accountant == "rdp" and not isinstance(budget, ApproxDP):
            raise ValueError("accountant='rdp' needs an (ε, δ) budget (ApproxDP)")
        if adaptive and (isinstance(budget, GDP) or accountant == "rdp"):
            raise ValueError(
                "fully adaptive composition is only supported for pure DP, (ε, δ)-DP with "
                "basic composition and zCDP; pass adaptive=False to declare that the "
                "sequence of mechanisms is fixed in advance"
            )
        self.budget = budget
        self.accountant = accountant
        self.adaptive = adaptive
        self._entries: list[Charge] = []

    # ------------------------------------------------------------------ charging
    def _convert(self, g: Guarantee) -> Guarantee:
        b = self.budget
        if self.accountant == "rdp":
            if isinstance(g, ApproxDP):
                raise TypeError("an (ε, δ) charge cannot be composed through RDP curves")
            return g
        if isinstance(b, PureDP):
            if isinstance(g, PureDP):
                return g
        elif isinstance(b, ApproxDP):
            if isinstance(g, PureDP):
                return ApproxDP(g.epsilon, 0.0)
            if isinstance(g, ApproxDP):
                return g
        elif isinstance(b, ZCDP):
            if isinstance(g, ZCDP):
                return g
            if isinstance(g, PureDP):
                return pure_to_zcdp(g)
            if isinstance(g, GDP):
                return gdp_to_zcdp(g)
        elif isinstance(b, GDP) and isinstance(g, GDP):
            return g
        raise TypeError(f"a {type(g).__name__} charge cannot be spent from a {b} budget")

    def _fits(self, extra: Guarantee | None) -> bool:
        charged = [e.charged for e in self._entries] + ([extra] if extra is not None else [])
        if self.accountant == "rdp":
            assert isinstance(self.budget, ApproxDP)
            if not charged:
                return True
            total = compose(*charged)
            return epsilon_at(total, self.budget.delta) <= self.budget.epsilon
        limit = _cost(self.budget)
        spent = [Fraction(0)] * len(limit)
        for g in charged:
            spent = [s + c for s, c in zip(spent, _cost(g), strict=True)]
        return all(s <= lim for s, lim in zip(spent, limit, strict=True))

    def charge(self, guarantee: Guarantee, label: str = "") -> Charge:
        """Record a measurement's guarantee; raise :class:`BudgetExceededError` if it
        would overspend (in which case nothing is recorded)."""
        converted = self._convert(guarantee)
        if not self._fits(converted):
            raise BudgetExceededError(
                f"charge {label or '(unlabelled)'!r} of {guarantee} would exceed the budget "
                f"{self.budget} (already spent {self.spent}); nothing was recorded"
            )
        entry = Charge(label, guarantee, converted)
        self._entries.append(entry)
        return entry

    def can_afford(self, guarantee: Guarantee) -> bool:
        """Whether :meth:`charge` would accept this guarantee now."""
        try:
            return self._fits(self._convert(guarantee))
        except TypeError:
            return False

    # ------------------------------------------------------------------ reporting
    @property
    def entries(self) -> tuple[Charge, ...]:
        return tuple(self._entries)

    @property
    def spent(self) -> Guarantee:
        """Total spent so far, in the budget's definition (an RDP curve for ``rdp``)."""
        b = self.budget
        charged = [e.charged for e in self._entries]
        if self.accountant == "rdp":
            return compose(*charged) if charged else PureDP(0.0)
        if not charged:
            return ApproxDP(0.0, 0.0) if isinstance(b, ApproxDP) else type(b)(0.0)  # type: ignore[call-arg]
        return compose(*charged)

    @property
    def remaining(self) -> Guarantee | None:
        """What is left in the budget's definition (``None`` for the RDP accountant)."""
        b, s = self.budget, self.spent
        if isinstance(b, PureDP) and isinstance(s, PureDP):
            return PureDP(max(b.epsilon - s.epsilon, 0.0))
        if isinstance(b, ZCDP) and isinstance(s, ZCDP):
            return ZCDP(max(b.rho - s.rho, 0.0))
        if isinstance(b, GDP) and isinstance(s, GDP):
            return GDP(math.sqrt(max(b.mu**2 - s.mu**2, 0.0)))
        if isinstance(b, ApproxDP) and isinstance(s, ApproxDP) and self.accountant == "native":
            return ApproxDP(max(b.epsilon - s.epsilon, 0.0), max(b.delta - s.delta, 0.0))
        return None

    def epsilon_at(self, delta: float) -> float:
        """Total spent, as ε at ``delta`` by the tightest conversion available.

        The spent total in the budget's definition, converted (zCDP, GDP, RDP: optimal
        order; pure: ε). For a non-adaptive ledger (the sequence was fixed in advance) with
        ``delta > 0`` and no (ε, δ) charge, the charges *as given* are also composed as
        Rényi curves (pure ε as randomized response, the tightest ε-DP curve) and the
        smaller of the two valid bounds is returned — e.g. many small pure-DP charges.
        """
        base = epsilon_at(self.spent, delta)
        gs = [e.guarantee for e in self._entries]
        if self.adaptive or delta <= 0 or not gs or any(isinstance(g, ApproxDP) for g in gs):
            return base
        curves = compose(*[to_rdp(g) for g in gs])
        return min(base, epsilon_at(curves, delta))

    def to_dict(self, delta: float | None = None) -> dict[str, Any]:
        """A JSON-ready summary (``delta`` adds the total ε at that δ)."""
        out: dict[str, Any] = {
            "budget": str(self.budget),
            "accountant": self.accountant,
            "adaptive": self.adaptive,
            "spent": str(self.spent),
            "remaining": None if self.remaining is None else str(self.remaining),
            "charges": [
                {"label": e.label, "guarantee": str(e.guarantee), "charged": str(e.charged)}
                for e in self._entries
            ],
        }
        if delta is not None:
            out["epsilon_at_delta"] = {"delta": delta, "epsilon": self.epsilon_at(delta)}
        return out
