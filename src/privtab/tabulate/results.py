"""What tabulating a level produces: one value per chunk, one per level.

* :class:`ChunkResult` — one chunk's noisy counts (arrays) and its :class:`Tallies`;
* :class:`Tallies` — counts about a chunk or a level: the public ones (rows, statistic
  levels, noisy draws — all derived from noisy output or the public domain) and the
  confidential ones (exact memberships, the non-private evaluation), which only the run
  record may hold;
* :class:`LevelSummary` — a level's tallies summed over its chunks
  (:func:`summarize`), with :meth:`LevelSummary.public` for ``release.json``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from privtab.tabulate.algorithm import NoisyGroups
from privtab.tabulate.domain import Domain
from privtab.tabulate.evaluation import merge_evaluations
from privtab.tabulate.plan import LevelPlan

__all__ = ["ChunkResult", "LevelSummary", "Tallies", "summarize"]


@dataclass(frozen=True)
class Tallies:
    """Counts about a chunk (or, summed, a level) — see the module docstring."""

    regions: int
    iterations: int
    t1_rows: int
    t2_rows: int
    stat_levels: dict[int, int]
    noise_draws: int
    stages_used: frozenset[str]
    """The stages whose mechanisms drew noise (what the run charges)."""
    memberships: int
    """Σ exact group counts (confidential: run record only)."""
    evaluation: dict[str, Any] = field(default_factory=dict)
    """The non-private evaluation (empty unless asked; run record only)."""


@dataclass(frozen=True)
class ChunkResult:
    """One chunk of a level: its groups' noisy counts as arrays (no exact count), its
    domain and tallies. The release publishes it from the arrays
    (:func:`privtab.tabulate.publish.publish_chunk`: frames only for the rows it keeps);
    :attr:`t1` / :attr:`t2` are the chunk's whole raw tables (every group, unclamped)."""

    plan: LevelPlan
    dom: Domain
    groups: NoisyGroups
    tallies: Tallies

    @property
    def t1(self) -> pl.DataFrame:
        """One raw T1 row per group of the chunk (:func:`privtab.tabulate.tables.t1_frame`)."""
        from privtab.tabulate.tables import t1_frame

        return t1_frame(self.plan, self.dom, self.groups)

    @property
    def t2(self) -> pl.DataFrame:
        """One raw T2 row per Sex × Age cell (:func:`privtab.tabulate.tables.t2_frame`)."""
        from privtab.tabulate.tables import t2_frame

        return t2_frame(self.plan, self.dom, self.groups)


@dataclass(frozen=True)
class LevelSummary:
    """One level, its chunks' tallies summed."""

    plan: LevelPlan
    tallies: Tallies
    chunks: int

    @property
    def evaluation(self) -> dict[str, Any]:
        return self.tallies.evaluation

    @property
    def memberships(self) -> int:
        return self.tallies.memberships

    @property
    def stages_used(self) -> frozenset[str]:
        return self.tallies.stages_used

    def public(self) -> dict[str, Any]:
        """The level's public tallies (for ``release.json``)."""
        t = self.tallies
        return {
            "level": self.plan.key,
            "regions": t.regions,
            "iterations": t.iterations,
            "groups": t.regions * t.iterations,
            "t1_rows": t.t1_rows,
            "t2_rows": t.t2_rows,
            "noise_draws": t.noise_draws,
            "stat_levels": {str(k): v for k, v in sorted(t.stat_levels.items())},
        }


def summarize(plan: LevelPlan, parts: Iterable[Tallies]) -> LevelSummary:
    """A level's summary from its chunks' tallies (at least one chunk)."""
    xs = list(parts)
    if not xs:
        raise ValueError(f"level {plan.key}: a tabulated level has at least one chunk")
    stat: dict[int, int] = {}
    for t in xs:
        for k, v in t.stat_levels.items():
            stat[k] = stat.get(k, 0) + v
    total = Tallies(
        regions=sum(t.regions for t in xs),
        iterations=xs[0].iterations,
        t1_rows=sum(t.t1_rows for t in xs),
        t2_rows=sum(t.t2_rows for t in xs),
        stat_levels=stat,
        noise_draws=sum(t.noise_draws for t in xs),
        stages_used=frozenset().union(*(t.stages_used for t in xs)),
        memberships=sum(t.memberships for t in xs),
        evaluation=merge_evaluations([t.evaluation for t in xs]),
    )
    return LevelSummary(plan, total, len(xs))
