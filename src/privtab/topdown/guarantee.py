"""TopDown's privacy guarantee, derived from the mechanisms and stated every way.

For a strategy (and, when given, a spine's per-geounit shares after the bypass):

* **ρ per record** (person, or housing unit in the units run): every measured query is a
  discrete Gaussian with variance parameter σ² on a query whose answers move by −1 and +1
  in two cells under a replace-one change (Δ₂² = 2), so it costs ``Δ₂²/(2σ²) = 1/σ²``
  zCDP (Canonne, Kamath & Steinke 2020, Thm. 4) and zCDP composes by addition; ρ is the
  sum over a block's geounit chain, exact (:class:`fractions.Fraction`) and checked equal
  to ``1/global_scale²`` for every block pattern of the spine — 293764/114921 and
  11417641/152349649 for the 2020 runs. Published as the exact fraction and a decimal
  rounded **up**.
* **ε(δ)** by every analysis: the zCDP conversions (``analytic``: Bun & Steinke 2016;
  ``optimal``/``grid``: Canonne, Kamath & Steinke 2020 — the certificates' "zCDP-implied
  ε"; :func:`privtab.accounting.summary.epsilon_by_method`) and the worst-case
  privacy-loss distribution (``pld``: every (level, query) contributes two discrete
  Gaussian coordinates shifted by 1 — a replace-one change in the worst case moves two
  cells of every query at every level — composed with certified upper and lower bounds,
  :mod:`privtab.accounting.pld`; σ² rounded down before the float computation).
* **Semi-DP** (seed 003 §6.1, :func:`privtab.invariants.census_semi_dp`): the invariant
  totals (state totals; block housing-unit totals in the units run) make invariant-
  conforming neighbours at most a = 2 replacements apart, so the release is a²ρ-zCDP on
  them.
* **per attribute and per geography** (seed 000 §8, :mod:`privtab.semantics.allocation`):
  the ρ of a concern is the sum over the queries whose answers can change when only that
  attribute changes (hhgq, votingage, hispanic, cenrace; h1), or over the levels below
  ``X`` when only the block within ``X`` changes ("Block-within-X") — the certificates'
  per-attribute and per-geography tables. With a spine, the worst block pattern is taken.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from privtab.accounting.guarantees import ZCDP
from privtab.accounting.pld import LossFactor, discrete_gaussian_loss, worst_of
from privtab.accounting.summary import epsilon_by_method
from privtab.invariants import census_semi_dp
from privtab.semantics.allocation import Allocation, Concern, UniverseProportions
from privtab.topdown.spine import BudgetShares
from privtab.topdown.strategy import Strategy

__all__ = ["TopDownGuarantee", "allocation", "float_up", "guarantee", "round_up"]

#: The privacy-loss distribution is composed for every pair of block patterns (the two
#: records' blocks) when there are at most this many patterns; above, ``pld`` is left out
#: of :attr:`TopDownGuarantee.epsilon` (the zCDP bounds remain; each pattern's ρ is exact).
MAX_PLD_PATTERNS = 8

#: Invariant-conforming neighbours are at most this many replacements apart (one-way
#: margin of one feature: seed 003 Theorem 16 with k = 1).
SEMI_ADJACENT = 2


def float_up(x: Fraction) -> float:
    """The smallest float ≥ ``x`` (the float nearest ``x``, moved up if below)."""
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def round_up(x: Fraction, digits: int = 6) -> float:
    """``x`` rounded up to ``digits`` decimals (a published number never understates)."""
    scale = 10**digits
    up = math.ceil(Fraction(x) * scale)
    return float(Fraction(int(up), scale))


@dataclass(frozen=True)
class TopDownGuarantee:
    """The guarantee of one TopDown run (module docstring); :meth:`to_dict` is what
    ``release.json`` and ``privtab topdown plan --json`` carry (exact fractions as
    strings, ε rounded up)."""

    histogram: str
    record: str
    rho: Fraction
    delta: Fraction
    epsilon: dict[str, float]
    semi_adjacent: int
    rho_semi: Fraction
    epsilon_semi: dict[str, float]
    per_attribute: dict[str, Fraction]
    per_geography: dict[str, Fraction]
    epsilon_per_attribute: dict[str, float]
    epsilon_per_geography: dict[str, float]
    block_patterns: int
    blocks_checked: int

    def to_dict(self) -> dict[str, Any]:
        def fr(x: Fraction) -> dict[str, Any]:
            return {"exact": str(x), "value": round_up(x)}

        return {
            "histogram": self.histogram,
            "record": self.record,
            "neighbours": "bounded: replace one record (Δ₂² = 2 per query)",
            "rho": fr(self.rho),
            "delta": str(self.delta),
            "epsilon": {m: round_up(Fraction(e)) for m, e in self.epsilon.items()},
            "semi_dp": {
                "invariant": "state totals" if self.histogram == "persons" else "block totals",
                "semi_adjacent": self.semi_adjacent,
                "rho": fr(self.rho_semi),
                "epsilon": {m: round_up(Fraction(e)) for m, e in self.epsilon_semi.items()},
            },
            "per_attribute": {
                a: {"rho": fr(r), "epsilon": round_up(Fraction(self.epsilon_per_attribute[a]))}
                for a, r in self.per_attribute.items()
            },
            "per_geography": {
                g: {"rho": fr(r), "epsilon": round_up(Fraction(self.epsilon_per_geography[g]))}
                for g, r in self.per_geography.items()
            },
            "spine": {"block_patterns": self.block_patterns, "blocks_checked": self.blocks_checked},
        }


def allocation(strategy: Strategy, shares: Sequence[Fraction] | None = None) -> Allocation:
    """The strategy as a :class:`privtab.semantics.allocation.Allocation` (one universe:
    the histogram), with ``shares`` (per level, summing to 1) in place of the geolevel
    shares — a block's chain after the bypass."""
    geo = (
        dict(zip(strategy.levels, shares, strict=True))
        if shares
        else dict(strategy.geolevel_shares)
    )
    sch = strategy.schema
    names = {q for lv in strategy.levels for q in strategy.queries(lv)}
    queries = {
        q: {
            lv: strategy.query_shares[lv][q]
            for lv in strategy.levels
            if q in strategy.query_shares[lv]
        }
        for q in names
    }
    attrs = {q: sch.query_attributes(q) for q in names}
    u = UniverseProportions(strategy.histogram, strategy.rho, geo, queries, attrs)
    return Allocation.from_proportions(strategy.name, strategy.levels, [u], origin=strategy.name)


def _patterns(strategy: Strategy, shares: BudgetShares | None) -> list[tuple[Fraction, ...]]:
    if shares is None:
        return [tuple(strategy.geolevel_shares[lv] for lv in strategy.levels)]
    pats, _ = shares.signatures()
    return [tuple(Fraction(int(n), shares.denominator) for n in row) for row in pats]


def _chain_factors(strategy: Strategy, pattern: Sequence[Fraction]) -> list[tuple[LossFactor, int]]:
    out: list[tuple[LossFactor, int]] = []
    for lv, s in zip(strategy.levels, pattern, strict=True):
        if s == 0:
            continue
        for q in strategy.queries(lv):
            sigma2 = float(strategy.sigma2(lv, q, s))
            out.append((discrete_gaussian_loss(math.nextafter(sigma2, 0.0)), 1))
    return out


def _pld_epsilon(
    strategy: Strategy, patterns: list[tuple[Fraction, ...]], delta: float, grid: float
) -> tuple[float, float]:
    """Upper and lower ε(δ) of the worst pair of block chains (the two records' blocks)."""
    chains = [_chain_factors(strategy, p) for p in patterns]
    pairs = [a + b for i, a in enumerate(chains) for b in chains[i:]]
    upper: float = worst_of(pairs, grid=grid, pessimistic=True).epsilon(delta)
    lower: float = worst_of(pairs, grid=grid, pessimistic=False).epsilon(delta)
    return float(upper), float(lower)


def guarantee(
    strategy: Strategy,
    shares: BudgetShares | None = None,
    *,
    pld: bool = True,
    grid: float = 1e-3,
) -> TopDownGuarantee:
    """The guarantee of ``strategy`` (module docstring). ``shares``: the spine's shares
    after the bypass (every block pattern is checked to have ρ = 1/global_scale²);
    ``pld=False`` skips the privacy-loss-distribution bound (about a second per pair of
    block patterns; left out above :data:`MAX_PLD_PATTERNS` patterns)."""
    delta = float(strategy.delta)
    rho = strategy.rho
    patterns = _patterns(strategy, shares)
    for p in patterns:
        chain_rho = sum(p, Fraction(0)) / strategy.global_scale**2
        if chain_rho != rho:
            raise AssertionError(f"a block's chain of shares {p} gives ρ = {chain_rho} ≠ {rho}")
    by_method = epsilon_by_method(ZCDP(float_up(rho)), delta)
    epsilon = {m: r["epsilon"] for m, r in by_method.items()}
    if pld and len(patterns) <= MAX_PLD_PATTERNS:
        epsilon["pld"], epsilon["pld_lower"] = _pld_epsilon(strategy, patterns, delta, grid)
    semi = census_semi_dp(float_up(rho), SEMI_ADJACENT, delta)
    rho_semi = SEMI_ADJACENT**2 * rho
    eps_semi = {"analytic": semi.epsilon_semi, "optimal": semi.epsilon_semi_optimal}
    attrs: dict[str, Fraction] = {}
    geos: dict[str, Fraction] = {}
    for p in patterns:
        alloc = allocation(strategy, p if shares is not None else None)
        for a, r in alloc.rho_by_attribute().items():
            attrs[a] = max(attrs.get(a, Fraction(0)), r)
        for lv in strategy.levels[:-1]:
            key = f"{strategy.levels[-1]}-within-{lv}"
            r = alloc.concern_rho(Concern(frozenset(), lv))
            geos[key] = max(geos.get(key, Fraction(0)), r)
    attrs = {a: attrs[a] for a in strategy.schema.attributes if a in attrs}  # certificate order
    opt = "optimal"
    return TopDownGuarantee(
        strategy.histogram,
        strategy.schema.record,
        rho,
        strategy.delta,
        epsilon,
        SEMI_ADJACENT,
        rho_semi,
        eps_semi,
        attrs,
        geos,
        {a: _eps(r, delta, opt) for a, r in attrs.items()},
        {g: _eps(r, delta, opt) for g, r in geos.items()},
        len(patterns),
        0 if shares is None else int(np.sum(shares.signatures()[1])),
    )


def _eps(rho: Fraction, delta: float, method: str) -> float:
    if rho == 0:
        return 0.0
    return float(epsilon_by_method(ZCDP(float_up(rho)), delta)[method]["epsilon"])
