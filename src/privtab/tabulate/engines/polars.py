"""The embedded engine: Polars and numpy in one process.

One streaming pass over the person file into a cell table (persons per geo unit × code
combination × sex × age, :mod:`privtab.tabulate.aggregate`); per level, the public domain is
processed in chunks of whole states for geographies nested in states (county, tract,
place), so memory per chunk is bounded by the largest state's slice of the domain and the
cell table, not by the number of persons. Exact counts come from
:mod:`privtab.tabulate.counts`; each chunk is tabulated by
:func:`privtab.tabulate.chunk.tabulate_groups` (SafeTab seed Algorithms 1–3).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import polars as pl

from privtab.data import GeoLevel, SafeTabInputs
from privtab.data.geography import UNIT
from privtab.random import RandomSource
from privtab.tabulate.aggregate import Cells, aggregate_persons
from privtab.tabulate.chunk import tabulate_groups
from privtab.tabulate.counts import combo_iterations, true_counts, unit_regions
from privtab.tabulate.domain import BY_STATE, NESTED_IN_STATE, level_domain, state_chunks
from privtab.tabulate.plan import LevelPlan
from privtab.tabulate.results import ChunkResult

__all__ = ["DEFAULT_CHUNK_CELLS", "DEFAULT_CHUNK_GROUPS", "PolarsEngine"]

Say = Callable[[str], None]

DEFAULT_CHUNK_GROUPS = 1 << 23
DEFAULT_CHUNK_CELLS = 1 << 25
"""A chunk holds at most this many cells (≈ 33.5 M) unless one state has more: the joins
of a chunk take tens of bytes per cell, so this bounds a level's memory at national scale."""


class PolarsEngine:
    """The embedded engine (see the module docstring)."""

    name = "polars"

    def __init__(
        self,
        max_chunk_groups: int = DEFAULT_CHUNK_GROUPS,
        max_chunk_cells: int = DEFAULT_CHUNK_CELLS,
    ) -> None:
        self.max_chunk_groups = max_chunk_groups
        self.max_chunk_cells = max_chunk_cells
        self.cells: Cells | None = None
        self.inputs: SafeTabInputs | None = None
        self._unit_state: np.ndarray | None = None
        self._by_state: Cells | None = None
        self._combo_it: dict[tuple[object, ...], pl.DataFrame] = {}

    def prepare(self, inputs: SafeTabInputs, say: Say) -> int:
        say(f"validating and aggregating {inputs.persons_path}")
        last = [0.0]

        def progress(rows: int, seconds: float) -> None:
            if seconds - last[0] >= 10:
                last[0] = seconds
                say(f"  {rows:,} persons read ({rows / max(seconds, 1e-9) / 1e6:.2f} M/s)")

        cells = aggregate_persons(inputs, progress=progress)
        frame = cells.cells if cells.cells[UNIT].is_sorted() else cells.cells.sort(UNIT)
        self.cells = Cells(frame, cells.combos, cells.persons)
        self.inputs = inputs
        units = inputs.geography.units.sort(UNIT)
        self._units = units[UNIT].to_numpy()
        self._unit_state = units["TABBLKST"].to_numpy()
        say(f"{cells.persons:,} persons in {cells.cells.height:,} cells")
        return cells.persons

    def _state_rep_units(self) -> np.ndarray:
        """For every UNIT (sorted ids), the first UNIT of its state."""
        assert self._unit_state is not None
        first = np.r_[True, self._unit_state[1:] != self._unit_state[:-1]]
        rep = np.where(first, self._units, 0)
        return np.maximum.accumulate(rep)

    def _coarse_by_state(self, geo: GeoLevel) -> Cells | None:
        """The cells summed over the units of each state (kept on the state's first unit),
        if ``geo``'s region of a unit depends only on its state (USA, STATE, PR-STATE);
        ``None`` otherwise. Levels of such geographies then group ~52 × combinations ×
        sex × age rows instead of every cell."""
        assert self.cells is not None
        assert self.inputs is not None
        if geo not in BY_STATE:
            return None
        region = unit_regions(self.inputs.geography, geo)[self._units]
        rep = self._state_rep_units()
        if not np.array_equal(region, region[np.searchsorted(self._units, rep)]):
            return None  # pragma: no cover - a region crossing states (not in Census geography)
        if self._by_state is None:
            # state by state (a contiguous slice of the unit-sorted cells): bounded memory
            col = self.cells.cells[UNIT].to_numpy()
            parts = []
            for first in np.unique(rep):
                last = self._units[rep == first].max()
                lo, hi = np.searchsorted(col, [first, last + 1])
                if hi > lo:
                    parts.append(
                        _sum_on_unit(self.cells.cells.slice(int(lo), int(hi - lo)), int(first))
                    )
            frame = pl.concat(parts) if parts else self.cells.cells.clear()
            self._by_state = Cells(frame, self.cells.combos, self.cells.persons)
        return self._by_state

    def _cells_per_state(self, table: Cells) -> dict[str, int]:
        """Rows of ``table`` (sorted by UNIT) per state: a state's units are contiguous."""
        assert self._unit_state is not None
        col = table.cells[UNIT].to_numpy()
        out = {}
        for st in np.unique(self._unit_state):
            u = self._units[self._unit_state == st]
            a, b = np.searchsorted(col, [u.min(), u.max() + 1])
            out[str(st)] = int(b - a)
        return out

    def _cells_of(self, states: list[str], table: Cells) -> Cells:
        assert self._unit_state is not None
        col = table.cells[UNIT].to_numpy()
        parts = []
        # a state's units are one contiguous UNIT range (units are sorted by state first)
        for st in states:
            u = self._units[self._unit_state == st]
            if u.size == 0:
                continue
            a, b = np.searchsorted(col, [u.min(), u.max() + 1])
            parts.append(table.cells.slice(int(a), int(b - a)))
        frame = pl.concat(parts) if parts else table.cells.clear()
        return Cells(frame, table.combos, int(frame["N"].sum() or 0))

    def tabulate(
        self,
        plan: LevelPlan,
        *,
        source: RandomSource | None,
        noise: bool,
        evaluate: bool,
        nonnegative: bool,
    ) -> Iterator[ChunkResult]:
        assert self.cells is not None, "call prepare() first"
        assert self.inputs is not None
        ref, geo = self.inputs.reference, self.inputs.geography
        dom = level_domain(plan, geo, ref)
        # the same for every geography of a granularity: computed once per iteration level
        memo = (plan.iteration_level, dom.geo.granularity, dom.codes)
        combo_it = self._combo_it.get(memo)
        if combo_it is None:
            combo_it = combo_iterations(self.cells, dom, ref, plan.iteration_level)
            self._combo_it[memo] = combo_it
        table = self._coarse_by_state(dom.geo) or self.cells
        if dom.geo in NESTED_IN_STATE:
            per_state = self._cells_per_state(table)
            chunks = state_chunks(dom, self.max_chunk_groups, per_state, self.max_chunk_cells)
        else:
            chunks = [(0, len(dom.regions), [])]
        for lo, hi, states in chunks:
            part = dom.slice(lo, hi)
            cells = self._cells_of(states, table) if states else table
            fine = true_counts(cells, part, geo, combo_it)
            yield tabulate_groups(
                plan,
                part,
                fine,
                source=source,
                noise=noise,
                evaluate=evaluate,
                nonnegative=nonnegative,
            )

    def close(self) -> None:
        self.cells = None
        self._by_state = None
        self._combo_it.clear()


def _sum_on_unit(cells: pl.DataFrame, unit: int) -> pl.DataFrame:
    """``cells`` summed over units per (combination, sex, age), all put on ``unit``."""
    return (
        cells.group_by("C", "QSEX", "QAGE")
        .agg(pl.col("N").sum().cast(pl.UInt32))
        .sort("C", "QSEX", "QAGE")
        .select(pl.lit(unit, dtype=pl.UInt32).alias(UNIT), "C", "QSEX", "QAGE", "N")
    )
