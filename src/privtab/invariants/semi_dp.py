"""Semi-DP accounting: what a DP guarantee becomes when an invariant is published.

Seed: ``semi-dp-invariant-statistics.txt``. If ``M`` is f-DP for neighbouring datasets and
the invariant ``T(x) = t`` is published with it, the pair ``(T(x), M(x))`` protects the
invariant-conforming datasets ``D_t`` that are at most ``a`` replacements apart, with the
group-privacy trade-off (Prop. 15, Cor. 18, Lemma 39):

=================  =====================================================================
base guarantee     Semi-DP guarantee (on ``D_t``, adjacency ``d(x, x') ≤ a``)
=================  =====================================================================
ε-DP               ``a·ε``-DP
(ε, δ)-DP          ``(a·ε, δ·(e^{aε} − 1)/(e^ε − 1))`` (tight group privacy of f_{ε,δ})
ρ-zCDP             ``a²·ρ``-zCDP (Bun & Steinke 2016, Prop. 1.9; seed Lemma 39)
μ-GDP              ``a·μ``-GDP (Dong, Roth & Su 2022, Thm 2.14)
f-DP (PL)          ``1 − (1 − f)^{∘a}`` (:meth:`TradeOff.group`)
=================  =====================================================================

``a = 0`` (a single conforming dataset, Example 3) leaves nothing to protect: the Semi-DP
statement is vacuous and is reported as the perfect guarantee.

:func:`compare_composition_order` implements Prop. 21: analysing each mechanism's Semi-DP
guarantee first and composing (``⊗_i f_i^{(a)}``) is never weaker than composing first
and then applying the invariant (``(⊗_i f_i)^{(a)}``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from privtab.accounting import GDP, RDP, ZCDP, ApproxDP, Guarantee, PureDP, compose, zcdp_epsilon
from privtab.accounting.conversions import epsilon_at
from privtab.invariants.tradeoff import TradeOff

__all__ = [
    "CensusSemiDP",
    "CompositionOrder",
    "census_semi_dp",
    "compare_composition_order",
    "semi_dp",
    "semi_dp_summary",
]


def _check_a(a: int) -> int:
    if isinstance(a, bool) or int(a) != a or a < 0:
        raise ValueError(f"the semi-adjacent parameter must be a non-negative integer, got {a!r}")
    return int(a)


def _approx_group_delta(epsilon: float, delta: float, a: int) -> float:
    """``δ · Σ_{i<a} e^{iε} = δ (e^{aε} − 1)/(e^ε − 1)``, the tight group δ for f_{ε,δ}."""
    if epsilon == 0:
        return min(1.0, a * delta)
    return min(1.0, delta * math.expm1(a * epsilon) / math.expm1(epsilon))


def semi_dp(g: Guarantee | TradeOff, a: int) -> Guarantee | TradeOff:
    """The Semi-DP guarantee of ``g`` given semi-adjacent parameter ``a`` (table above)."""
    k = _check_a(a)
    if isinstance(g, TradeOff):
        return g.group(k)
    if isinstance(g, PureDP):
        return PureDP(k * g.epsilon)
    if isinstance(g, ApproxDP):
        if k == 0:
            return ApproxDP(0.0, 0.0)
        return ApproxDP(k * g.epsilon, _approx_group_delta(g.epsilon, g.delta, k))
    if isinstance(g, ZCDP):
        return ZCDP(k * k * g.rho)
    if isinstance(g, GDP):
        return GDP(k * g.mu)
    if isinstance(g, RDP):
        raise TypeError(
            "a general RDP curve has no tight group-privacy rule; compute the mechanism's "
            "Rényi divergence at shift a "
            "(e.g. privtab.accounting.curves.geometric_rdp(a*eps, sensitivity=a))"
        )
    raise TypeError(f"unsupported guarantee {g!r}")


def semi_dp_summary(g: Guarantee, a: int, delta: float) -> dict[str, Any]:
    """Base and Semi-DP guarantees with ε at ``delta`` by every applicable conversion."""
    from privtab.accounting.summary import epsilon_by_method

    semi = semi_dp(g, a)
    assert not isinstance(semi, TradeOff)
    return {
        "semi_adjacent": _check_a(a),
        "base": str(g),
        "semi": str(semi),
        "delta": delta,
        "epsilon_base": {m: r["epsilon"] for m, r in epsilon_by_method(g, delta).items()},
        "epsilon_semi": {m: r["epsilon"] for m, r in epsilon_by_method(semi, delta).items()},
    }


@dataclass(frozen=True)
class CensusSemiDP:
    """Seed §6.1: the 2020 Census's advertised ρ-zCDP and its Semi-DP counterpart.

    The ``epsilon_*`` fields use the Bun–Steinke conversion ``ε = ρ + 2√(ρ ln(1/δ))``
    (Lemma 40, as the seed does); the ``*_optimal`` fields the tight conversion of Canonne,
    Kamath & Steinke (``privtab.accounting.zcdp_epsilon(..., "optimal")``).
    """

    rho: float
    semi_adjacent: int
    rho_semi: float
    epsilon_advertised: float
    epsilon_semi: float
    epsilon_advertised_optimal: float
    epsilon_semi_optimal: float
    delta: float

    def to_dict(self) -> dict[str, float | int]:
        return {
            "rho": self.rho,
            "semi_adjacent": self.semi_adjacent,
            "rho_semi": self.rho_semi,
            "epsilon_advertised": self.epsilon_advertised,
            "epsilon_semi": self.epsilon_semi,
            "epsilon_advertised_optimal": self.epsilon_advertised_optimal,
            "epsilon_semi_optimal": self.epsilon_semi_optimal,
            "delta": self.delta,
        }


def census_semi_dp(rho: float = 2.56, semi_adjacent: int = 2, delta: float = 1e-10) -> CensusSemiDP:
    """§6.1: ρ = 2.56 with the state totals invariant (a = 2) is 10.24-zCDP on ``D_t``.

    Defaults are the seed's (ρ = 2.56 for the person tables, a = 2, δ = 1e-10).
    """
    base = ZCDP(rho)
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie strictly between 0 and 1, got {delta!r}")
    semi = semi_dp(base, semi_adjacent)
    assert isinstance(semi, ZCDP)

    def eps(r: float, method: str) -> float:
        if r == 0:
            return 0.0
        return float(zcdp_epsilon(r, delta, method))  # type: ignore[arg-type]

    return CensusSemiDP(
        rho=base.rho,
        semi_adjacent=_check_a(semi_adjacent),
        rho_semi=semi.rho,
        epsilon_advertised=eps(base.rho, "analytic"),
        epsilon_semi=eps(semi.rho, "analytic"),
        epsilon_advertised_optimal=eps(base.rho, "optimal"),
        epsilon_semi_optimal=eps(semi.rho, "optimal"),
        delta=delta,
    )


@dataclass(frozen=True)
class CompositionOrder:
    """Prop. 21: the two ways of accounting for ``m`` mechanisms and one invariant."""

    semi_first: Guarantee | TradeOff
    composition_first: Guarantee | TradeOff
    semi_first_at_least_as_strong: bool
    strictly_stronger: bool

    def to_dict(self, delta: float | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "semi_first": str(self.semi_first),
            "composition_first": str(self.composition_first),
            "semi_first_at_least_as_strong": self.semi_first_at_least_as_strong,
            "strictly_stronger": self.strictly_stronger,
        }
        if delta is not None:
            for key, g in (
                ("semi_first", self.semi_first),
                ("composition_first", self.composition_first),
            ):
                if not isinstance(g, TradeOff | ApproxDP):
                    out[f"{key}_epsilon"] = epsilon_at(g, delta)
        return out


def _stronger_or_equal(g1: Guarantee | TradeOff, g2: Guarantee | TradeOff) -> tuple[bool, bool]:
    """(g1 ⪰ g2, g1 ≻ g2) for guarantees of the same kind."""
    if isinstance(g1, TradeOff) and isinstance(g2, TradeOff):
        ge = g1.dominates(g2, 1e-12)
        return ge, ge and not g2.dominates(g1, 1e-12)
    if isinstance(g1, PureDP) and isinstance(g2, PureDP):
        return _cmp(-g1.epsilon, -g2.epsilon)
    if isinstance(g1, ZCDP) and isinstance(g2, ZCDP):
        return _cmp(-g1.rho, -g2.rho)
    if isinstance(g1, GDP) and isinstance(g2, GDP):
        return _cmp(-g1.mu, -g2.mu)
    if isinstance(g1, ApproxDP) and isinstance(g2, ApproxDP):
        ge = g1.epsilon <= g2.epsilon * (1 + 1e-12) and g1.delta <= g2.delta * (1 + 1e-12)
        strict = ge and (g1.epsilon < g2.epsilon * (1 - 1e-12) or g1.delta < g2.delta * (1 - 1e-12))
        return ge, strict
    raise TypeError(f"cannot compare {g1} with {g2}")


def _cmp(x: float, y: float) -> tuple[bool, bool]:
    tol = 1e-12 * max(1.0, abs(x), abs(y))
    return x >= y - tol, x > y + tol


def compare_composition_order(
    guarantees: Sequence[Guarantee | TradeOff], a: int
) -> CompositionOrder:
    """Prop. 21: Semi-DP first (``⊗ f_i^{(a)}``) versus composition first (``(⊗ f_i)^{(a)}``).

    All guarantees must be of one kind. For pure DP, zCDP and GDP the two orders coincide
    (the group rules are linear in the parameter that composition adds); for (ε, δ)-DP and
    general trade-off functions Semi-DP first is strictly stronger in general.
    """
    if not guarantees:
        raise ValueError("need at least one guarantee")
    k = _check_a(a)
    if all(isinstance(g, TradeOff) for g in guarantees):
        trade = [g for g in guarantees if isinstance(g, TradeOff)]
        semi_parts = [g.group(k) for g in trade]
        semi_first: Guarantee | TradeOff = semi_parts[0]
        for part in semi_parts[1:]:
            assert isinstance(semi_first, TradeOff)
            semi_first = semi_first.tensor(part)
        comp: TradeOff = trade[0]
        for part in trade[1:]:
            comp = comp.tensor(part)
        composition_first: Guarantee | TradeOff = comp.group(k)
    else:
        if any(isinstance(g, TradeOff) for g in guarantees):
            raise TypeError("mix of trade-off functions and other guarantees: convert first")
        gs = [g for g in guarantees if not isinstance(g, TradeOff)]
        parts = [semi_dp(g, k) for g in gs]
        semi_first = compose(*[p for p in parts if not isinstance(p, TradeOff)])
        composition_first = semi_dp(compose(*gs), k)
    ge, strict = _stronger_or_equal(semi_first, composition_first)
    return CompositionOrder(semi_first, composition_first, ge, strict)
