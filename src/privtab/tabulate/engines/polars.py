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
level and a coarse geography's is a sum of rows of a finer one's, so each geography's is
computed once per run and the nest TRACT → COUNTY → STATE → USA costs one pass over the
cells (:class:`~privtab.tabulate.counts.RegionProducts`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import polars as pl
from scipy import sparse

from privtab.accounting.digest import RecordDigest
from privtab.data import SafeTabInputs
from privtab.data.membership import iteration_matrix
from privtab.tabulate.aggregate import PERSONS_SCHEMA, aggregate_persons
from privtab.tabulate.chunk import Drawing, tabulate_groups
from privtab.tabulate.counts import (
    CellMatrix,
    RegionProducts,
    StateRows,
    exact_counts,
    region_rows,
    state_units,
)
from privtab.tabulate.domain import Domain, level_domain
from privtab.tabulate.plan import LevelPlan
from privtab.tabulate.results import ChunkResult

__all__ = ["DEFAULT_CHUNK_CELLS", "DEFAULT_CHUNK_GROUPS", "PolarsEngine", "default_threads"]

Say = Callable[[str], None]

DEFAULT_CHUNK_GROUPS = 1 << 23
DEFAULT_CHUNK_CELLS = 1 << 25
"""A chunk holds at most this many cells (≈ 33.5 M) unless one state has more: bounds the
sparse products of a chunk (tens of bytes per cell) at national scale."""


KEPT_ITERATION_MATRICES = 2
"""Iteration incidences kept (the newest): a run's levels go geography by geography, each
with iteration levels 1 and 2, so two cover every reuse (≈ 0.2 GB each nationally)."""


def default_threads() -> int:
    """Threads for the sparse products: the machine's cores, at most 8."""
    return max(1, min(8, os.cpu_count() or 1))


class PolarsEngine:
    """The embedded engine (see the module docstring)."""

    name = "polars"

    def __init__(
        self,
        max_chunk_groups: int = DEFAULT_CHUNK_GROUPS,
        max_chunk_cells: int = DEFAULT_CHUNK_CELLS,
        threads: int | None = None,
    ) -> None:
        self.max_chunk_groups = max_chunk_groups
        self.max_chunk_cells = max_chunk_cells
        self.threads = threads if threads is not None else default_threads()
        self.matrix: CellMatrix | None = None
        self.inputs: SafeTabInputs | None = None
        self.combos = pl.DataFrame()
        self._states: StateRows | None = None
        self._iterations: dict[tuple[object, ...], sparse.csr_array] = {}
        self.products: RegionProducts | None = None
        self.records: RecordDigest | None = None

    def prepare(self, inputs: SafeTabInputs, say: Say) -> int:
        say(f"validating and aggregating {inputs.persons_path}")
        last = [0.0]

        def progress(rows: int, seconds: float) -> None:
            if seconds - last[0] >= 10:
                last[0] = seconds
                say(f"  {rows:,} persons read ({rows / max(seconds, 1e-9) / 1e6:.2f} M/s)")

        self.records = RecordDigest(PERSONS_SCHEMA)
        cells = aggregate_persons(inputs, progress=progress, digest=self.records)
        self.matrix = CellMatrix.from_cells(cells)
        self.products = RegionProducts(self.matrix, inputs.geography, self.threads)
        self.combos = cells.combos
        self.inputs = inputs
        self._states = StateRows(self.matrix, state_units(inputs.geography))
        say(f"{cells.persons:,} persons in {cells.cells.height:,} cells")
        return cells.persons

    def _iteration_matrix(self, plan: LevelPlan, dom: Domain) -> sparse.csr_array:
        """Combination × iteration incidence; the same for every geography of a
        granularity: built once per iteration level and granularity."""
        assert self.inputs is not None
        assert self.matrix is not None
        memo = (plan.iteration_level, dom.geo.granularity, dom.codes)
        if memo not in self._iterations:
            while len(self._iterations) >= KEPT_ITERATION_MATRICES:
                del self._iterations[next(iter(self._iterations))]  # the oldest
            b = iteration_matrix(
                self.combos, self.inputs.reference, plan.iteration_level, dom.geo.granularity
            )
            self._iterations[memo] = b.astype(self.matrix.counts)
        return self._iterations[memo]

    def tabulate(self, plan: LevelPlan, drawing: Drawing) -> Iterator[ChunkResult]:
        assert self.products is not None, "call prepare() first"
        assert self.inputs is not None
        dom = level_domain(plan, self.inputs.geography, self.inputs.reference)
        iterations = self._iteration_matrix(plan, dom)
        assert self._states is not None
        self.products.retain(dom.geo)
        whole = self.products.get(dom.geo)
        for part, _ in self._states.chunks(dom, self.max_chunk_groups, self.max_chunk_cells):
            exact = exact_counts(region_rows(whole, part), iterations, part, self.threads)
            yield tabulate_groups(
                plan,
                part,
                exact,
                source=drawing.source,
                noise=drawing.noise,
                evaluate=drawing.evaluate,
            )

    def close(self) -> None:
        if self.products is not None:
            self.products.clear()
        self.products = None
        self.matrix = None
        self._states = None
        self._iterations.clear()
