"""The embedded engine: Polars, numpy and scipy.sparse in one process.

One streaming pass over the person file into a cell table (persons per geo unit × code
combination × sex × age, :mod:`privtab.tabulate.aggregate`), read as a sparse matrix
(:class:`~privtab.tabulate.counts.CellMatrix`); per level, the exact counts are products
of sparse incidence matrices (:mod:`privtab.tabulate.counts`) and each chunk is tabulated
by :func:`privtab.tabulate.chunk.tabulate_groups` (SafeTab seed Algorithms 1–3). The
public domain of a level nested in states (county, tract, place) is processed in chunks of
whole states, so memory per chunk is bounded by the largest state's slice of the domain
and its cells, not by the number of persons.

(COUNTY, ·) used to take 1.7–3.4 s longer than (TRACT, ·) at 10⁷ persons although their
domains are the same size: COUNTY is the first geography of its granularity, so it paid
for the memoised combination → iteration expansion (then polars joins) that TRACT reused,
and, as the first level with ≈ 7 M groups, for first-touch page faults of its buffers. The
iteration incidence now costs ≈ 0.1–0.2 s once, and measured in CPU seconds (10⁶ persons,
levels run in both orders) the two levels are equal: COUNTY 2 3.7/3.4 s, TRACT 2 4.1/3.3 s.

A level with a tiny domain (USA: 1 region) still costs ≈ 0.6–1 s at 10⁷ persons: its
``S X`` reads every cell of ``X`` (5.8 M at 10⁷; its 256 output rows each gather ≈ 5,000
of 354,000 combinations, ≈ 0.5 s), ``(S X) B`` ≈ 0.3 s, and the first level of each
iteration level and granularity builds ``B`` (≈ 0.3 s). The noise, the tables and the
report data of such a level cost milliseconds. ``S X`` does not depend on the iteration
level, so the second level of a geography reuses the first one's (:meth:`PolarsEngine.
_region_counts`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import polars as pl
from numpy.typing import NDArray
from scipy import sparse

from privtab.data import GeoLevel, SafeTabInputs
from privtab.data.membership import iteration_matrix
from privtab.tabulate.aggregate import aggregate_persons
from privtab.tabulate.chunk import Drawing, tabulate_groups
from privtab.tabulate.counts import (
    CellMatrix,
    StateRows,
    exact_counts,
    region_counts,
    state_units,
    unit_regions,
)
from privtab.tabulate.domain import Domain, level_domain
from privtab.tabulate.plan import LevelPlan
from privtab.tabulate.results import ChunkResult

__all__ = ["DEFAULT_CHUNK_CELLS", "DEFAULT_CHUNK_GROUPS", "PolarsEngine"]

Say = Callable[[str], None]

DEFAULT_CHUNK_GROUPS = 1 << 23
DEFAULT_CHUNK_CELLS = 1 << 25
"""A chunk holds at most this many cells (≈ 33.5 M) unless one state has more: bounds the
sparse products of a chunk (tens of bytes per cell) at national scale."""


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
        self.matrix: CellMatrix | None = None
        self.inputs: SafeTabInputs | None = None
        self.combos = pl.DataFrame()
        self._states: StateRows | None = None
        self._iterations: dict[tuple[object, ...], sparse.csr_array] = {}
        self._regions: dict[GeoLevel, NDArray[np.int64]] = {}
        self._by_region: tuple[tuple[object, ...], sparse.csr_array] | None = None

    def prepare(self, inputs: SafeTabInputs, say: Say) -> int:
        say(f"validating and aggregating {inputs.persons_path}")
        last = [0.0]

        def progress(rows: int, seconds: float) -> None:
            if seconds - last[0] >= 10:
                last[0] = seconds
                say(f"  {rows:,} persons read ({rows / max(seconds, 1e-9) / 1e6:.2f} M/s)")

        cells = aggregate_persons(inputs, progress=progress)
        self.matrix = CellMatrix.from_cells(cells)
        self.combos = cells.combos
        self.inputs = inputs
        self._states = StateRows(self.matrix, state_units(inputs.geography))
        say(f"{cells.persons:,} persons in {cells.cells.height:,} cells")
        return cells.persons

    def _iteration_matrix(self, plan: LevelPlan, dom: Domain) -> sparse.csr_array:
        """Combination × iteration incidence; the same for every geography of a
        granularity: built once per iteration level and granularity."""
        assert self.inputs is not None
        memo = (plan.iteration_level, dom.geo.granularity, dom.codes)
        if memo not in self._iterations:
            self._iterations[memo] = iteration_matrix(
                self.combos, self.inputs.reference, plan.iteration_level, dom.geo.granularity
            )
        return self._iterations[memo]

    def _unit_regions(self, geo: GeoLevel) -> NDArray[np.int64]:
        assert self.inputs is not None
        if geo not in self._regions:
            self._regions[geo] = unit_regions(self.inputs.geography, geo)
        return self._regions[geo]

    def tabulate(self, plan: LevelPlan, drawing: Drawing) -> Iterator[ChunkResult]:
        assert self.matrix is not None, "call prepare() first"
        assert self.inputs is not None
        dom = level_domain(plan, self.inputs.geography, self.inputs.reference)
        iterations = self._iteration_matrix(plan, dom)
        unit_region = self._unit_regions(dom.geo)
        assert self._states is not None
        chunks = self._states.chunks(dom, self.max_chunk_groups, self.max_chunk_cells)
        for part, rows in chunks:
            by_region = self._region_counts(part, rows, unit_region, keep=len(chunks) == 1)
            exact = exact_counts(self.matrix, rows, unit_region, iterations, part, by_region)
            yield tabulate_groups(
                plan,
                part,
                exact,
                source=drawing.source,
                noise=drawing.noise,
                evaluate=drawing.evaluate,
            )

    def _region_counts(
        self, part: Domain, rows: tuple[int, int], unit_region: NDArray[np.int64], *, keep: bool
    ) -> sparse.csr_array:
        """``S X`` of a chunk. The levels of a geography follow each other (iteration levels
        1 and 2), so a one-chunk level's ``S X`` (``keep``) is kept for the next level: one
        product fewer per geography. A level in several chunks keeps none (its next level
        starts with another chunk): memory stays that of one chunk."""
        assert self.matrix is not None
        key = (part.geo, part.first_region, len(part.regions), rows)
        if self._by_region is not None and self._by_region[0] == key:
            return self._by_region[1]
        self._by_region = None  # free the previous one before computing the next
        product = region_counts(self.matrix, rows, unit_region, part)
        if keep:
            self._by_region = (key, product)
        return product

    def close(self) -> None:
        self._by_region = None
        self.matrix = None
        self._states = None
        self._iterations.clear()
        self._regions.clear()
