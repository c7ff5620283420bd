"""SafeTab-H for the groups of one chunk: exact slot counts in, noisy T3/T4 rows out.

Every engine computes the exact counts of a chunk of groups — households per group and
slot (``4 · (HOUSEHOLD_TYPE − 1) + (TEN − 1)``) — and hands them to :func:`tabulate_chunk`,
which runs production's algorithm (``safetab_h_analytics.py``, ``preprocessing.py``,
``postprocessing.py``) on arrays:

1. each group's **statistic level** per table from its public T1 count
   (:meth:`~privtab.safetab_h.tables.TableDesign.stat_level`): T3 0–3, T4 0–1;
2. the group's **noisy cells** at that level: the exact cell counts (slots summed per cell)
   plus one independent draw each of the query's per-cell mechanism
   (:class:`CellNoise` — the only privacy-critical step);
3. **clamping** of each noisy cell at 0 when negative counts are not allowed
   (production: per query result, before the marginals);
4. the **marginals**: every published cell is the sum of the noisy cells below it
   (:attr:`~privtab.safetab_h.tables.TableDesign.sums`); its noise is the sum of ``k``
   draws (variance ``k σ²``, exact MOE of the ``k``-fold convolution).

Privacy: a household is in one cell per group and in at most ``s`` groups of a query,
each cell drawn with ``ρ_q/s`` — the query costs ``ρ_q`` (see :mod:`privtab.safetab_h.
plan`); steps 1, 3 and 4 read public or noisy values only (post-processing).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl
from numpy.typing import NDArray

from privtab.mechanisms.counts import count_error
from privtab.random import RandomSource
from privtab.safetab_h.domain import LevelGroups
from privtab.safetab_h.queries import QueryPlan
from privtab.safetab_h.tables import TableDesign, wide_schema

__all__ = ["CellNoise", "ChunkOutput", "QueryOutput", "tabulate_chunk"]


class CellNoise:
    """Adds one query's noise to exact cells: ``exact + Z``, ``Z`` independent draws of the
    query's per-cell mechanism from ``source``, one per cell. ``enabled=False`` (tests
    only: exact counts, not private) adds nothing but counts the draws the same way.
    :attr:`used` lists the queries that drew (the run charges them)."""

    def __init__(self, source: RandomSource | None, enabled: bool = True) -> None:
        self.source = source
        self.enabled = enabled
        self.draws = 0
        self.used: set[str] = set()

    def __call__(self, query: QueryPlan, exact: NDArray[np.int64]) -> NDArray[np.int64]:
        size = int(exact.size)
        self.draws += size
        if size == 0:
            return exact.copy()
        self.used.add(query.key)
        if not self.enabled:
            return exact.copy()
        noise = query.cell.mechanism.sample_noise(size, source=self.source)
        return exact + np.asarray(noise, dtype=np.int64).reshape(exact.shape)


@dataclass(frozen=True)
class QueryOutput:
    """One query's published rows for a chunk (wide frame, :func:`~privtab.safetab_h.
    tables.wide_schema`) per Census table, and its tallies (public: noisy output and plan)."""

    query: QueryPlan
    frames: dict[str, pl.DataFrame]
    levels: dict[int, int]
    """Groups per statistic level."""
    cells: int
    """Noisy cells drawn."""


@dataclass
class ChunkOutput:
    """What a chunk publishes: per query, its rows; plus the exact households of its groups
    (memberships: for the confidential run record only, never published)."""

    queries: list[QueryOutput] = field(default_factory=list)
    memberships: int = 0
    groups: int = 0

    def frames(self) -> dict[str, pl.DataFrame]:
        """Rows per Census table (tables without rows absent)."""
        out: dict[str, list[pl.DataFrame]] = {}
        for q in self.queries:
            for name, frame in q.frames.items():
                out.setdefault(name, []).append(frame)
        return {name: pl.concat(parts) for name, parts in out.items()}


def _cells(exact: NDArray[np.int64], design: TableDesign, level: int) -> NDArray[np.int64]:
    """Exact noisy-cell counts (groups × cells of ``level``) from slot counts."""
    cells = len(design.noisy(level))
    out = np.zeros((exact.shape[0], cells), dtype=np.int64)
    for c in range(cells):
        out[:, c] = exact[:, design.slot_cells[level] == c].sum(axis=1)
    return out


def _frame(
    query: QueryPlan,
    groups: LevelGroups,
    rows: NDArray[np.int64],
    level: int,
    values: NDArray[np.int64],
) -> pl.DataFrame:
    """The published rows of ``groups[rows]`` at ``level``: every published cell, in cell
    order, with its noise (``values``: groups × published cells)."""
    d = query.design
    published = d.published(level)
    k = [len(d.below(level, c)) for c in published]
    n, m = rows.size, len(published)
    mech = query.cell.mechanism
    moe = [count_error(mech, x).moe95 for x in k]
    take = pl.Series(np.repeat(rows, m))
    ids, codes = groups.series()
    frame = pl.DataFrame(
        {
            "REGION_ID": ids.gather(take),
            "ITERATION_CODE": codes.gather(take),
            d.cell_column: np.tile(np.asarray(published, dtype=np.int64), n),
            "COUNT": values.reshape(-1),
            "NOISY_CELLS": np.tile(np.asarray(k, dtype=np.int64), n),
            "VARIANCE": np.tile(np.asarray(k, dtype=np.float64) * query.cell.variance, n),
            "MOE95": np.tile(np.asarray(moe, dtype=np.int64), n),
        }
    ).with_columns(
        pl.lit(groups.geo.value).alias("REGION_TYPE"),
        pl.lit(level, pl.Int8).alias("STAT_LEVEL"),
        pl.lit(query.cell.noise).alias("NOISE"),
        pl.lit(query.cell.noise_scale, pl.Float64).alias("NOISE_SCALE"),
    )
    return frame.select(list(wide_schema(d)))


def tabulate_query(
    query: QueryPlan,
    groups: LevelGroups,
    exact: NDArray[np.int64],
    draw: CellNoise,
    *,
    nonnegative: bool,
) -> QueryOutput:
    """One query over a chunk's groups (``exact``: groups × slots): statistic levels,
    noisy cells, clamping, marginals (module docstring)."""
    d = query.design
    stat = d.stat_level(groups.t1_count, query.thresholds)
    frames: dict[str, pl.DataFrame] = {}
    levels: dict[int, int] = {}
    cells = 0
    for level in range(d.levels):
        rows = np.flatnonzero(stat == level)
        levels[level] = int(rows.size)
        if rows.size == 0:
            continue
        noisy = draw(query, _cells(exact[rows], d, level))
        cells += int(noisy.size)
        if nonnegative:
            noisy = np.maximum(noisy, 0)
        values = noisy @ d.sums[level].T
        frames[d.table(level)] = _frame(query, groups, rows, level, values)
    return QueryOutput(query, frames, levels, cells)


def tabulate_chunk(
    queries: list[QueryPlan],
    groups: LevelGroups,
    exact: NDArray[np.int64],
    draw: CellNoise,
    *,
    nonnegative: bool,
) -> ChunkOutput:
    """Every query of a level (T3, then T4: production's order) over a chunk's groups."""
    out = ChunkOutput(memberships=int(exact.sum()), groups=groups.size)
    for q in queries:
        out.queries.append(tabulate_query(q, groups, exact, draw, nonnegative=nonnegative))
    return out
