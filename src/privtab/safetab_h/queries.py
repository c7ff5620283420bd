"""The SafeTab-H plan: per query (table × geography × iteration level), the noise of a cell.

Production (``safetab_h_analytics.py``) makes one Tumult Analytics count query per (table
T3 or T4, region type, iteration level) with a positive budget ``ρ_q`` (zCDP) or ``ε_q``
(pure DP), over the households flat-mapped to their iterations with
``max_num_rows = s`` — the flat map's *stability*, the most iterations of that level and
granularity one household can be in: Census rule ``h_r · max(2, r) + h_e`` from the
reference files and ``max_race_codes`` (:func:`privtab.data.stability.level_stability`;
9 at every level of the 2020 files) — and ``grouping=True``: a household adds at most one
row to each of at most ``s`` groups, and within a group it is in exactly one cell of the
table (a histogram). Tumult then adds to every cell of the keyset (every group of the
query × the cells of its statistic level) independent noise of

- zCDP: a discrete Gaussian with σ² = Δ₂²/(2ρ_q) = **s/(2ρ_q)** (Δ₂ = √s: ``s`` ones, in
  ``s`` different cells);
- pure DP: a geometric (discrete Laplace) with scale Δ₁/ε_q = **s/ε_q**.

privtab draws the same noise from its exact samplers: each cell is a sensitivity-1 count
with per-cell parameter ``ρ_q/s`` (``ε_q/s``), whose σ² is ``1/(2ρ_q/s) = s/(2ρ_q)``
(:class:`privtab.mechanisms.counts.CountNoise`). A household is in at most ``s`` cells of
the query, one per group, so the query costs ``s · ρ_q/s = ρ_q`` (generalized parallel
composition by degree, SafeTab seed Lemmas 9, 10; for zCDP equivalently the L2
sensitivity √s); a run costs ``Σ_q ρ_q`` — 8.895302 (US) and 4.754134 (PR) for NMFv5.
The statistic levels come from the public T1: no budget is spent on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from privtab.accounting.exact import ExactGuarantee
from privtab.mechanisms.counts import CountNoise, count_error
from privtab.safetab_h.tables import DESIGNS, TableDesign

if TYPE_CHECKING:
    from privtab.data import ReferenceData, Scope
    from privtab.safetab_h.config import HConfig

__all__ = ["HPlan", "QueryPlan"]


@dataclass(frozen=True)
class QueryPlan:
    """One production query: a table at a population-group level (geography × iteration
    level), its budget, the stability of the level's flat map and the per-cell noise."""

    table: str
    geo: str
    iteration_level: int
    privacy_defn: str
    budget: Fraction
    stability: int
    thresholds: tuple[int, ...]
    cell: CountNoise

    @classmethod
    def build(
        cls,
        *,
        table: str,
        geo: str,
        iteration_level: int,
        privacy_defn: str,
        budget: Fraction,
        stability: int,
        thresholds: tuple[int, ...],
    ) -> QueryPlan:
        """The query's plan: per-cell parameter ``budget / stability``."""
        if budget <= 0:
            raise ValueError(f"{table} ({geo}, {iteration_level}): budget must be positive")
        if stability < 1:
            raise ValueError(f"stability must be a positive integer, got {stability}")
        try:
            cell = CountNoise.build(privacy_defn, Fraction(budget) / stability)
        except ValueError as exc:
            raise ValueError(f"{table} ({geo}, {iteration_level}): per-cell {exc}") from exc
        return cls(table, geo, iteration_level, privacy_defn, Fraction(budget), stability,
                   thresholds, cell)  # fmt: skip

    @property
    def design(self) -> TableDesign:
        return DESIGNS[self.table]

    @property
    def level_key(self) -> str:
        """``(COUNTY, 2)``."""
        return f"({self.geo}, {self.iteration_level})"

    @property
    def key(self) -> str:
        """``T3 (COUNTY, 2)``."""
        return f"{self.table.upper()} {self.level_key}"

    def moe95(self, cells: int = 1) -> int:
        """Exact 95 % MOE of a published cell that sums ``cells`` noisy cells."""
        return count_error(self.cell.mechanism, cells).moe95

    def cell_moes(self) -> dict[str, dict[str, int]]:
        """Exact 95 % MOE of every published cell at every statistic level:
        ``{"T03002": {"0": 15, "1": 11, "6": 11}, …}``."""
        d = self.design
        return {
            d.table(k): {str(c): self.moe95(len(d.below(k, c))) for c in d.published(k)}
            for k in range(d.levels)
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.key,
            "table": self.table,
            "geo": self.geo,
            "iteration_level": self.iteration_level,
            "level": self.level_key,
            "privacy_defn": self.privacy_defn,
            "budget": float(self.budget),
            "budget_exact": str(self.budget),
            "stability": self.stability,
            "thresholds": list(self.thresholds),
            "cell": self.cell.to_dict(),
            "moe95": self.cell_moes(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> QueryPlan:
        """Rebuild a query from :meth:`to_dict` output (exact fields)."""
        try:
            return cls.build(
                table=str(d["table"]),
                geo=str(d["geo"]),
                iteration_level=int(d["iteration_level"]),
                privacy_defn=str(d["privacy_defn"]),
                budget=Fraction(str(d["budget_exact"])),
                stability=int(d["stability"]),
                thresholds=tuple(int(t) for t in d["thresholds"]),
            )
        except KeyError as exc:
            raise ValueError(f"query description is missing the field {exc}") from exc


@dataclass(frozen=True)
class HPlan:
    """Every query of a SafeTab-H run (US or PR) with a positive budget, production order
    (geography, iteration level, then T3 before T4)."""

    privacy_defn: str
    queries: tuple[QueryPlan, ...]
    source: str = ""

    @classmethod
    def from_config(cls, config: HConfig, reference: ReferenceData, scope: Scope) -> HPlan:
        """The plan of one run of a validated config and its reference files."""
        from privtab.data.stability import level_stability

        queries = []
        stabilities: dict[tuple[int, object], int] = {}
        for geo, lv in config.levels(scope):
            key = (lv, geo.granularity)
            if key not in stabilities:  # the same for every geography of a granularity
                found = level_stability(reference, config.max_race_codes, lv, geo.granularity)
                stabilities[key] = found.value
            for table in DESIGNS:
                budget = config.budget(table, geo, lv)  # type: ignore[arg-type]
                if budget == 0:
                    continue  # production: no query when the budget is 0
                th = (
                    config.thresholds_t3[(geo, lv)]
                    if table == "t3"
                    else (config.thresholds_t4[(geo, lv)],)
                )
                queries.append(
                    QueryPlan.build(
                        table=table,
                        geo=geo.value,
                        iteration_level=lv,
                        privacy_defn=config.privacy_defn,
                        budget=budget,
                        stability=stabilities[key],
                        thresholds=th,
                    )
                )
        return cls(config.privacy_defn, tuple(queries), f"{config.source} [{scope}]")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HPlan:
        queries = tuple(QueryPlan.from_dict(q) for q in d["queries"])
        return cls(str(d["privacy_defn"]), queries, str(d.get("source", "")))

    @property
    def total_budget(self) -> Fraction:
        return sum((q.budget for q in self.queries), Fraction(0))

    def exact_guarantee(self) -> ExactGuarantee:
        """Σρ_q (zCDP) or Σε_q (pure DP), exactly: the guarantee per household."""
        return ExactGuarantee("zcdp" if self.privacy_defn == "zcdp" else "pure", self.total_budget)

    def query(self, table: str, geo: str, iteration_level: int) -> QueryPlan | None:
        for q in self.queries:
            if (q.table, q.geo, q.iteration_level) == (table, geo, iteration_level):
                return q
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "privacy_defn": self.privacy_defn,
            "source": self.source,
            "total_budget": float(self.total_budget),
            "total_budget_exact": str(self.total_budget),
            "queries": [q.to_dict() for q in self.queries],
        }
