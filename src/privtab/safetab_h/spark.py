"""SafeTab-H on Spark: the embedded engine's steps, run in Spark tasks.

``privtab safetab-h run --engine spark`` runs the release with :class:`SparkHEngine`, on
SafeTab-P's Spark machinery (:mod:`privtab.tabulate.engines.spark`: the session and its
settings, the public partition map of whole states, the combination numbering and the
cell shuffle) and the same Python code as the embedded engine
(:mod:`privtab.safetab_h.engine`):

1. **read + validate + aggregate**: the household file is cut into parts (whole Parquet
   row groups, or text byte ranges); each task reads its part with
   :class:`privtab.data.households.HouseholdReader` (every row validated, only the run's
   states kept) and aggregates it (:func:`privtab.tabulate.aggregate.aggregate_typed`).
   The driver learns each part's rows, problems and records digest (never a count;
   :func:`~privtab.safetab_h.engine.household_words`, merged in any order: the polars
   engine's key) and raises the polars engine's :class:`~privtab.data.InputValidationError`,
   before anything is written;
   a shuffle brings each partition's cells together into its cell matrix (cached).
2. **per level** (one Spark job): a level nested in states is tabulated inside the task of
   each partition — ``F = (S X) B`` of its states' chunks, the chunk's T1 groups gathered
   (:func:`~privtab.safetab_h.engine.exact_chunks`), noise, clamping and marginals drawn
   there (:func:`~privtab.safetab_h.algorithm.tabulate_chunk`); only published rows go to
   the driver. USA and AIANNH (regions across states): partial ``S X`` per partition,
   summed by a shuffle between executors; one task draws the level.

**Noise**: each task creates its own :class:`privtab.random.SecureSource` (no seed shared
or shipped). For tests, a seeded source: state ``s`` of level ``L`` is drawn from
``SeededSource(f"{seed}-{L}-{s}")`` (a level across states from ``f"{seed}-{L}"``) — the
same release whatever the partitions — marked not private by the run. The groups of T1
whose state holds no GRF-C region of the level have no household: the driver draws them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
from numpy.typing import NDArray
from scipy import sparse

from privtab.accounting.digest import RecordDigest
from privtab.data import Geography, GeoLevel, ReferenceData
from privtab.data.errors import ProblemLog
from privtab.data.households import SLOTS, HouseholdReader
from privtab.data.membership import iteration_matrix
from privtab.data.persons import FilePart, format_of, person_parts
from privtab.publish.spark import SparkSessionHolder
from privtab.random import RandomSource
from privtab.safetab_h.algorithm import CellNoise, ChunkOutput, tabulate_chunk
from privtab.safetab_h.domain import LevelGroups
from privtab.safetab_h.engine import (
    HOUSEHOLDS_SCHEMA,
    IDENTITY_SLOTS,
    digested,
    exact_chunks,
    level_domain,
    state_slices,
)
from privtab.safetab_h.inputs import HInputs
from privtab.safetab_h.queries import QueryPlan
from privtab.tabulate.aggregate import Cells, aggregate_typed
from privtab.tabulate.chunk import Drawing
from privtab.tabulate.counts import StateRows, region_counts, unit_regions
from privtab.tabulate.domain import NESTED_IN_STATE, Domain
from privtab.tabulate.engines.spark import (
    PART_BYTES,
    PART_ROWS,
    PARTITION_PERSONS,
    StateLayout,
    add_matrices,
    identity_partition,
    numbered_combos,
    parquet_rows,
    partition_cells,
    seed_of,
    split_cells,
    task_source,
)

if TYPE_CHECKING:
    from pyspark import RDD, Broadcast
    from pyspark.sql import SparkSession

__all__ = ["SparkHEngine"]

Say = Callable[[str], None]
_TEXT_BYTES_PER_HOUSEHOLD = 60


@dataclass(frozen=True)
class _Reading:
    """What the reading tasks need (one broadcast per run): public inputs only."""

    path: str
    reference: ReferenceData
    geography: Geography  # its blocks only
    max_race_codes: int
    run_states: tuple[str, ...]
    layout: StateLayout


@dataclass(frozen=True)
class _Part:
    """A part's rows, households and problems (rows numbered within the part), its cells
    and records digest if it had no problem, or ``unreadable``."""

    index: int
    rows: int
    households: int
    log: ProblemLog | None
    cells: Cells | None
    unreadable: bool = False
    records: RecordDigest | None = None
    skipped: int = 0
    """Rows left out because their state is not a run's (:class:`HouseholdReader`)."""

    @property
    def report(self) -> _Part:
        """The part itself (SafeTab-P's :func:`~privtab.tabulate.engines.spark.split_cells`
        reads ``report.index`` and ``cells``)."""
        return self


@dataclass(frozen=True)
class _Level:
    """What the tasks of one level need (public: the plan, the T1 groups, the seed)."""

    groups: LevelGroups
    queries: tuple[QueryPlan, ...]
    dom: Domain
    seed: str | None
    noise: bool
    nonnegative: bool
    max_groups: int
    max_cells: int

    def source(self, secure: list[RandomSource], label: str | None) -> RandomSource:
        """The chunk's source: seeded per (level, state) for tests, else the task's own."""
        return task_source(self.seed, self.groups.key, secure, label)

    def draw(self, groups: LevelGroups, exact: NDArray[np.int64], src: RandomSource) -> ChunkOutput:
        draw = CellNoise(src, enabled=self.noise)
        return tabulate_chunk(list(self.queries), groups, exact, draw, nonnegative=self.nonnegative)


class SparkHEngine:
    """SafeTab-H on Spark (module docstring). The session (``spark``, ``master``,
    ``config``): a :class:`privtab.publish.spark.SparkSessionHolder`, as every product's."""

    name = "spark"

    def __init__(
        self,
        spark: SparkSession | None = None,
        master: str | None = None,
        config: Mapping[str, str] | None = None,
        *,
        partitions: int | None = None,
        max_chunk_groups: int = 1 << 23,
        max_chunk_cells: int = 1 << 25,
    ) -> None:
        if (partitions or 1) < 1:
            raise ValueError("partitions must be positive")
        self.session = SparkSessionHolder(spark, master, config, "privtab-safetab-h")
        self.partitions = partitions
        self.max_chunk_groups = max_chunk_groups
        self.max_chunk_cells = max_chunk_cells
        self.inputs: HInputs | None = None
        self.combos: pl.DataFrame | None = None
        self._cells: RDD[tuple[int, StateRows]] | None = None
        self._layout: StateLayout | None = None
        self._shared: dict[object, Broadcast[Any]] = {}
        self.records: RecordDigest | None = None
        self.skipped = 0

    def start(self) -> None:
        self.session.start()

    @property
    def spark(self) -> SparkSession:
        return self.session.spark

    def close(self) -> None:
        for shared in self._shared.values():
            with contextlib.suppress(Exception):  # the session may be gone already
                shared.destroy()
        self._shared.clear()
        if self._cells is not None:
            with contextlib.suppress(Exception):
                self._cells.unpersist()
            self._cells = None
        self.session.join()
        self.session.stop()  # only a session created here

    # ------------------------------------------------------------------ prepare
    def prepare(self, inputs: HInputs, say: Say) -> dict[str, int]:
        """Validate and aggregate the household file in Spark tasks; return households per
        run (confidential). Raises the polars engine's validation error."""
        from pyspark import StorageLevel

        path = Path(inputs.households_path)
        sc = self.spark.sparkContext
        cores = max(1, sc.defaultParallelism)
        layout = StateLayout.of(inputs.geography, self._partitions(path, cores))
        parts = person_parts(path, self._parts(path, cores))
        say(
            f"validating and aggregating {path} with Spark ({sc.master}): {len(parts)} parts "
            f"→ {len(layout.states)} partitions of whole states"
        )
        geo = inputs.geography
        slim = replace(geo, units=geo.units.head(0), domains={})
        reading = _Reading(str(path), inputs.reference, slim, inputs.config.max_race_codes,
                           inputs.config.states(), layout)  # fmt: skip
        self._shared["reading"] = shared = sc.broadcast(reading)
        read: RDD[_Part] = sc.parallelize(list(enumerate(parts)), max(1, len(parts))).map(
            partial(_read_part, shared)
        )
        read = read.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            found = sorted(read.map(_summary).collect(), key=lambda r: r[0])
            _raise_if_invalid(inputs, [f[:5] for f in found])
            digest = RecordDigest(HOUSEHOLDS_SCHEMA)
            for f in found:
                if f[5] is not None:
                    digest.merge(f[5])
            self.skipped = sum(f[6] for f in found)
            combos, ids = numbered_combos([f[4] for f in found])
            self._shared["ids"] = ids_b = sc.broadcast(ids)
            cells = (
                read.filter(lambda r: r.cells is not None)
                .flatMap(partial(split_cells, ids_b, layout))
                .partitionBy(len(layout.states), identity_partition)
                .mapPartitionsWithIndex(
                    partial(partition_cells, layout, combos.height), preservesPartitioning=True
                )
                .persist(StorageLevel.MEMORY_AND_DISK)
            )
            per_run = _per_run(inputs)
            totals = cells.map(partial(_households, per_run)).collect()
        finally:
            read.unpersist()
        self._cells, self._layout, self.combos, self.inputs = cells, layout, combos, inputs
        self.records = digest
        out = {run: sum(t.get(run, 0) for t in totals) for run in per_run}
        say(f"{sum(out.values()):,} households of the runs' states")
        return out

    def _parts(self, path: Path, cores: int) -> int:
        if format_of(path) == "parquet":
            size, unit = parquet_rows(path), PART_ROWS
        else:
            size, unit = path.stat().st_size, PART_BYTES
        return cores * -(-max(1, size) // (unit * cores))

    def _partitions(self, path: Path, cores: int) -> int:
        if self.partitions is not None:
            return self.partitions
        rows = (
            parquet_rows(path)
            if format_of(path) == "parquet"
            else path.stat().st_size // _TEXT_BYTES_PER_HOUSEHOLD
        )
        return cores * -(-max(1, rows) // (PARTITION_PERSONS * cores))

    # ------------------------------------------------------------------ tabulate
    def tabulate(
        self, groups: LevelGroups, queries: list[QueryPlan], drawing: Drawing, nonnegative: bool
    ) -> Iterator[ChunkOutput]:
        """The level's published rows, in group order (module docstring)."""
        if self._cells is None or self._layout is None or self.inputs is None:
            raise RuntimeError("call prepare() first")
        if groups.size == 0:
            return
        sc = self.spark.sparkContext
        dom = level_domain(self.inputs, groups)
        seed = seed_of(drawing.source)
        job = _Level(groups, tuple(queries), dom, seed, drawing.noise, nonnegative,
                     1 if seed is not None else self.max_chunk_groups,
                     self.max_chunk_cells)  # fmt: skip
        its, regions = self._iterations(groups, dom), self._unit_regions(dom.geo)
        job_b = sc.broadcast(job)
        try:
            if dom.geo not in NESTED_IN_STATE:
                partials = self._cells.mapPartitions(partial(_partial_counts, job_b, regions))
                whole = partials.reduceByKey(add_matrices, 1)
                outs = whole.mapPartitions(partial(_whole_level, job_b, its)).collect()
            else:
                ranges = self._layout.region_ranges(dom)
                slices = [
                    state_slices(groups, list(states)) if states else (0, 0)
                    for states in self._layout.states
                ]
                task = partial(_nested_level, job_b, its, regions, ranges, slices)
                outs = self._cells.mapPartitions(task).collect()
                outs += self._uncovered(job, slices)
        finally:
            job_b.destroy()
        for _, out in sorted(outs, key=lambda o: o[0]):
            yield out

    def _uncovered(
        self, job: _Level, slices: list[tuple[int, int]]
    ) -> list[tuple[int, ChunkOutput]]:
        """The groups of states no partition holds (no GRF-C block): no household; drawn
        on the driver, state by state."""
        covered = np.zeros(job.groups.size, dtype=bool)
        for a, b in slices:
            covered[a:b] = True
        out = []
        secure: list[RandomSource] = []
        idx = np.flatnonzero(~covered)
        for start in _runs(idx):
            end = start
            while end < job.groups.size and not covered[end]:
                end += 1
            chunk = job.groups.take(start, end)
            src = job.source(secure, chunk.region_id[0][:2])
            out.append((start, job.draw(chunk, np.zeros((end - start, SLOTS), np.int64), src)))
        return out

    def _iterations(self, groups: LevelGroups, dom: Domain) -> Broadcast[Any]:
        assert self.inputs is not None
        assert self.combos is not None
        memo = ("B", groups.iteration_level, dom.geo.granularity)
        if memo not in self._shared:
            b = iteration_matrix(
                self.combos, self.inputs.reference, groups.iteration_level, dom.geo.granularity
            )
            self._shared[memo] = self.spark.sparkContext.broadcast(b)
        return self._shared[memo]

    def _unit_regions(self, geo: GeoLevel) -> Broadcast[Any]:
        assert self.inputs is not None
        memo = ("R", geo)
        if memo not in self._shared:
            ur = unit_regions(self.inputs.geography, geo)
            self._shared[memo] = self.spark.sparkContext.broadcast(ur)
        return self._shared[memo]


# ---------------------------------------------------------------------- helpers
def _runs(idx: NDArray[np.int64]) -> list[int]:
    """The starts of the runs of consecutive indices."""
    if idx.size == 0:
        return []
    starts = np.r_[True, np.diff(idx) != 1]
    return [int(i) for i in idx[starts]]


def _per_run(inputs: HInputs) -> dict[str, tuple[str, ...]]:
    return {s.value: inputs.config.run_states(s) for s in inputs.config.scopes}


def _raise_if_invalid(
    inputs: HInputs, found: list[tuple[int, int, bool, ProblemLog | None, Any]]
) -> None:
    """The file's validation error, from the parts' logs numbered in the file (the log of
    one whole-file reader); a part the reader could not parse is diagnosed on the driver."""
    if not any(unreadable or log for _, _, unreadable, log, _ in found):
        return
    log = ProblemLog()
    if any(unreadable for _, _, unreadable, _, _ in found):
        reader = inputs.household_reader()
        reader.log = log
        for _ in reader.households():
            pass
    else:
        before = 1 if format_of(Path(inputs.households_path)) == "txt" else 0
        for _, rows, _, part_log, _ in found:
            if part_log is not None:
                log.extend(part_log.shifted(before))
            before += rows
    log.raise_if_any()
    raise RuntimeError(  # pragma: no cover - a part's reader flagged a row it did not name
        f"invalid rows in {inputs.households_path} were flagged but not explained"
    )


# ---------------------------------------------------------------------- tasks
def _read_part(shared: Broadcast[_Reading], item: tuple[int, FilePart]) -> _Part:
    """Read, validate and aggregate one part of the household file (privtab's reader and
    aggregation); a part with a problem keeps no cell."""
    r = shared.value
    index, part = item
    reader = HouseholdReader(Path(r.path), r.reference, r.geography, r.max_race_codes,
                             part=part, run_states=r.run_states)  # fmt: skip
    starts = sorted(a for a, _ in r.layout.state_units.values())
    digest = RecordDigest(HOUSEHOLDS_SCHEMA)
    try:
        cells = aggregate_typed(digested(reader.households(), digest), r.reference.codes, starts)
    except pl.exceptions.ComputeError:
        return _Part(index, 0, 0, None, None, unreadable=True)
    if reader.log:
        return _Part(index, reader.part_rows, 0, reader.log, None)
    return _Part(
        index, reader.part_rows, cells.persons, None, cells, records=digest, skipped=reader.skipped
    )


def _summary(
    p: _Part,
) -> tuple[int, int, bool, ProblemLog | None, pl.DataFrame | None, RecordDigest | None, int]:
    """What the driver learns of a part: its rows, problems, distinct combinations, records
    digest and rows left out (no count of households)."""
    combos = None if p.cells is None else p.cells.combos
    return p.index, p.rows, p.unreadable, p.log, combos, p.records, p.skipped


def _households(runs: dict[str, tuple[str, ...]], item: tuple[int, StateRows]) -> dict[str, int]:
    """A partition's households per run (summed on the driver: confidential counts that
    only decide production's "no units data for the run")."""
    _, rows = item
    totals = np.asarray(rows.matrix.matrix.sum(axis=1)).ravel()
    out = {}
    for run, states in runs.items():
        n = 0
        for s in states:
            if s in rows.state_units:
                a, b = rows.rows_of([s])
                n += int(totals[a:b].sum())
        out[run] = n
    return out


def _nested_level(
    job_b: Broadcast[_Level],
    its: Broadcast[Any],
    regions: Broadcast[Any],
    ranges: list[tuple[int, int]],
    slices: list[tuple[int, int]],
    items: Iterable[tuple[int, StateRows]],
) -> Iterator[tuple[int, ChunkOutput]]:
    """A level nested in states on one partition: its groups' rows, chunk by chunk."""
    job = job_b.value
    secure: list[RandomSource] = []
    for p, rows in items:
        lo, hi = ranges[p]
        a, b = slices[p]
        if b <= a:
            continue
        groups = job.groups.take(a, b)
        here = job.dom.slice(lo, hi)
        chunks = rows.chunks(here, job.max_groups, job.max_cells) if hi > lo else []

        def by_region(part: Domain, span: tuple[int, int], rows: StateRows = rows) -> Any:
            return region_counts(rows.matrix, span, regions.value, part, slot_map=IDENTITY_SLOTS)

        done = a
        for chunk, exact in exact_chunks(groups, here, chunks, by_region, its.value):
            label = chunk.region_id[0][:2] if job.seed is not None else None
            yield done, job.draw(chunk, exact, job.source(secure, label))
            done += chunk.size


def _partial_counts(
    job_b: Broadcast[_Level], regions: Broadcast[Any], items: Iterable[tuple[int, StateRows]]
) -> Iterator[tuple[int, sparse.csr_array]]:
    """``S X`` of a level across states over one partition's rows (exact; summed by a
    shuffle between executors)."""
    job = job_b.value
    for _, rows in items:
        every = (0, rows.matrix.unit.size)
        yield 0, region_counts(rows.matrix, every, regions.value, job.dom, slot_map=IDENTITY_SLOTS)


def _whole_level(
    job_b: Broadcast[_Level], its: Broadcast[Any], items: Iterable[tuple[int, sparse.csr_array]]
) -> Iterator[tuple[int, ChunkOutput]]:
    """A level across states, in one chunk: ``(Σ S X) B``, its groups and noise."""
    job = job_b.value
    secure: list[RandomSource] = []
    for _, summed in items:
        chunks = [(job.dom, (0, 0))]

        def by_region(_: Domain, __: tuple[int, int], m: sparse.csr_array = summed) -> Any:
            return m

        for chunk, exact in exact_chunks(job.groups, job.dom, chunks, by_region, its.value):
            yield 0, job.draw(chunk, exact, job.source(secure, None))
