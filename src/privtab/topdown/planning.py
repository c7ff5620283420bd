"""A TopDown plan without data: the noise of every query at every level, and the guarantee.

``plan("us")`` (or a :class:`~privtab.topdown.strategy.Strategy`, e.g. a user's file) gives
for every level and measured query the exact σ² = global_scale²/(share_level·share_query),
σ, the cells measured per geounit and the query's ρ = 1/σ² at one geounit (bounded
neighbours, Δ₂² = 2), and the run's :class:`~privtab.topdown.guarantee.TopDownGuarantee`.
This is what ``privtab topdown plan`` prints; nothing here reads data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from privtab.topdown.guarantee import TopDownGuarantee, guarantee, round_up
from privtab.topdown.spine import BudgetShares
from privtab.topdown.strategy import Strategy, production_strategy

__all__ = ["QueryNoise", "TopDownPlan", "plan"]


@dataclass(frozen=True)
class QueryNoise:
    """One query at one level: exact σ² and ρ at one geounit, σ, cells per geounit."""

    level: str
    query: str
    cells: int
    share_level: Fraction
    share_query: Fraction
    sigma2: Fraction
    rho: Fraction

    @property
    def sigma(self) -> float:
        return math.sqrt(float(self.sigma2))

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "query": self.query,
            "cells": self.cells,
            "share_level": str(self.share_level),
            "share_query": str(self.share_query),
            "sigma2": str(self.sigma2),
            "sigma": self.sigma,
            "rho": {"exact": str(self.rho), "value": round_up(self.rho, 9)},
        }


@dataclass(frozen=True)
class TopDownPlan:
    """A strategy's noise table and guarantee (module docstring)."""

    strategy: Strategy
    noise: tuple[QueryNoise, ...]
    guarantee: TopDownGuarantee

    def rho_by_level(self) -> dict[str, Fraction]:
        out = {lv: Fraction(0) for lv in self.strategy.levels}
        for n in self.noise:
            out[n.level] += n.rho
        return out

    def to_dict(self) -> dict[str, Any]:
        s = self.strategy
        return {
            "strategy": {
                "name": s.name,
                "source": s.source,
                "histogram": s.histogram,
                "global_scale": str(s.global_scale),
                "levels": list(s.levels),
            },
            "levels": [
                {
                    "level": lv,
                    "share": str(s.geolevel_shares[lv]),
                    "cells": s.measured_cells[lv],
                    "rho": {"exact": str(r), "value": round_up(r, 9)},
                }
                for lv, r in self.rho_by_level().items()
            ],
            "queries": [n.to_dict() for n in self.noise],
            "l2_passes": {lv: [list(p) for p in ps] for lv, ps in s.l2_passes.items()},
            "rounder_passes": {lv: [list(p) for p in ps] for lv, ps in s.rounder_passes.items()},
            "guarantee": self.guarantee.to_dict(),
        }


def plan(
    strategy: Strategy | str = "us", shares: BudgetShares | None = None, *, pld: bool = True
) -> TopDownPlan:
    """The plan of ``strategy`` (a packaged run name: ``us``, ``pr``, ``units``,
    ``units-pr``; or a :class:`Strategy`). ``shares``: a spine's shares after the bypass,
    for the guarantee of that spine."""
    s = production_strategy(strategy) if isinstance(strategy, str) else strategy
    rows = []
    for lv in s.levels:
        for q in s.queries(lv):
            rows.append(
                QueryNoise(
                    lv,
                    q,
                    s.schema.query(q).size,
                    s.geolevel_shares[lv],
                    s.query_shares[lv][q],
                    s.sigma2(lv, q),
                    s.rho_query(lv, q),
                )
            )
    return TopDownPlan(s, tuple(rows), guarantee(s, shares, pld=pld))
