"""The Spark engine of SafeTab-P: the embedded engine's algorithm, run in Spark tasks.

``privtab safetab run --engine spark`` (or ``RunOptions(engine="spark")``) runs the release
with :class:`SparkEngine`. One algorithm, two places to run it: the Spark tasks run the
same Python code as the embedded engine (:mod:`privtab.tabulate.engines.polars`) — the
reader and validation of :class:`privtab.data.persons.PersonReader`, the aggregation of
:func:`privtab.tabulate.aggregate.aggregate_typed`, the sparse algebra of
:mod:`privtab.tabulate.counts` (``F = (S X) B``) and the algorithm of
:func:`privtab.tabulate.chunk.tabulate_groups` — on pieces of the data; Spark only decides
where each piece runs and moves the pieces between processes.

1. **Partition map** (public, from the GRF-C): consecutive states are grouped into
   partitions of about equal GRF-C blocks (:class:`StateLayout`; how many: ``partitions``,
   the Spark setting :data:`PARTITIONS_CONF`, or from the file's size and the cluster's
   cores); a partition holds whole states, so every level nested in states (state, county,
   tract, place) is tabulated inside one task per partition, without any shuffle.
2. **Read + validate + aggregate** (:meth:`SparkEngine.prepare`). The person file (text or
   Parquet) is cut into parts (:func:`privtab.data.persons.person_parts`: whole Parquet row
   groups, or text byte ranges cut at line starts); each task reads its parts with
   privtab's reader, validates every row with privtab's checks and aggregates the valid
   rows into cells, split by partition. A Spark shuffle brings each partition's partial
   cells together; a task sums them (exactly) and numbers its code combinations. The
   driver gets, per part, the rows it holds and its problems (rows numbered within the
   part), numbers them in the file and raises the same :class:`~privtab.data.
   InputValidationError` (file, row, column, value) as the polars engine — before anything
   is written, and without reading the file itself (except for a file the reader cannot
   parse, which the driver's reader diagnoses). It also gets each partition's distinct code
   combinations (no count), numbers them globally and broadcasts them; each partition then
   becomes a :class:`~privtab.tabulate.counts.CellMatrix` of its states (global combination
   ids), cached in Spark (memory, spilled to disk if needed). Cells never go to the driver.
3. **Per level** (:meth:`SparkEngine.tabulate`), one Spark job. The small public things go
   to the tasks once per run as broadcasts: the combination × iteration incidence ``B`` of
   each iteration level and granularity, the unit → region map of each geography. *A level
   nested in states*: each task of the partitions holding regions of the level computes
   ``(S X) B`` for its states, cuts them into chunks of whole states
   (:meth:`~privtab.tabulate.counts.StateRows.chunks`, as the embedded engine does), draws
   each chunk's noise and returns its noisy counts (:class:`~privtab.tabulate.results.
   ChunkResult`, no exact count) to the driver; partitions are run in *waves* of at most
   ``max_wave_groups`` population groups (one job each), so the driver holds one wave's
   noisy counts at a time, and publishes them in domain order
   (:func:`privtab.tabulate.publish.publish_chunk`). *USA and AIANNH levels* (regions
   across states): each task computes its partial ``S X``; a Spark shuffle sums them on an
   executor (exact counts cross the shuffle between executors, never the driver), where
   one task multiplies by ``B`` and draws the level's noise.

**Privacy.** The guarantee is the plan's (seed Theorems 1 and 3): every group of the
public domain is tabulated exactly once, with the parameters of the plan (the chunks of a
level partition its domain: whole states, each state in one partition). Noise is drawn in
the tasks from the exact samplers: each task creates its own
:class:`privtab.random.SecureSource` (AES-256-CTR keyed from the executor's
``os.urandom``; no seed is shared or shipped). For tests only, a seeded source may be
given: a level nested in states is then drawn state by state, state ``s`` of level ``L``
from ``SeededSource(f"{seed}-{L}-{s}")``, and a level across states from
``SeededSource(f"{seed}-{L}")`` — independent of the partitioning, the chunk size and the
cluster — and the release is marked not private (:func:`privtab.tabulate.run_release`
refuses seeded sources unless ``allow_insecure``). Exact counts never reach the driver
(``evaluate=True`` adds non-private error statistics, for tests).

Spark session: pass one (``SparkEngine(spark=...)``), or let the engine use the active one
(``spark-submit`` — master and configuration then come from its command line), or create
``master`` (default ``local[2]``, or ``$PRIVTAB_SPARK_MASTER``) with ``config``. The tasks
read the person file by its path: on a cluster it must be at the same path on every node
(a shared volume). Cluster settings and sizing: docs/safetab.md §8.
"""

from __future__ import annotations

import gc
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
from privtab.data import Geography, GeoLevel, ReferenceData, SafeTabInputs
from privtab.data.errors import ProblemLog
from privtab.data.geography import UNIT
from privtab.data.membership import RACE_KEYS, iteration_matrix
from privtab.data.persons import (
    FilePart,
    PersonReader,
    format_of,
    person_parts,
    scan_persons,
    validate_persons,
)
from privtab.publish.spark import SparkSessionHolder
from privtab.random import RandomSource, SecureSource, SeededSource
from privtab.tabulate.aggregate import (
    COMBO,
    PERSONS_SCHEMA,
    Cells,
    aggregate_typed,
    merge_packed,
    packed_cells,
)
from privtab.tabulate.algorithm import SEX_AGES, ExactCounts
from privtab.tabulate.chunk import Drawing, tabulate_groups
from privtab.tabulate.counts import (
    CellMatrix,
    Nesting,
    StateRows,
    coarser_counts,
    exact_counts,
    region_counts,
    row_slice,
    state_units,
    unit_regions,
)
from privtab.tabulate.domain import NESTED_IN_STATE, Domain, level_domain, state_chunks
from privtab.tabulate.plan import LevelPlan
from privtab.tabulate.results import ChunkResult

if TYPE_CHECKING:
    from pyspark import RDD, Broadcast
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_CHUNK_GROUPS",
    "DEFAULT_WAVE_GROUPS",
    "SparkEngine",
    "StateLayout",
    "add_matrices",
    "identity_partition",
    "numbered_combos",
    "parquet_rows",
    "partition_cells",
    "seed_of",
    "split_cells",
    "task_source",
]

Say = Callable[[str], None]

DEFAULT_CHUNK_GROUPS = 1 << 23
"""Population groups per chunk of a level (as the embedded engine): one ``tabulate_groups``."""
DEFAULT_CHUNK_CELLS = 1 << 25
"""Cells per chunk (unless one state has more), as the embedded engine."""
DEFAULT_WAVE_GROUPS = 1 << 23
"""Population groups of a level whose noisy counts the driver fetches in one job (at least
one partition's): bounds the driver's memory (≈ 30-60 bytes per group)."""
PART_ROWS = 1 << 23
"""Rows per part of a Parquet person file (whole row groups) read by one task (a multiple
of the cores in all, :meth:`SparkEngine._parts`). The reader streams a part in batches, so
a bigger part costs a task no more memory (10⁷ persons, ``local[2]``: Python workers peaked
at 637 MiB with 6 parts of 2²¹ rows, 647 MiB with 2 of 2²³) and saves the start-up of the
extra tasks (≈ 0.25 s each here)."""
PART_BYTES = 1 << 27
"""Bytes per part of a text person file read by one task."""
PARTITIONS_CONF = "spark.privtab.partitions"
"""A Spark setting (``--spark-conf``, ``spark-submit --conf``): the partitions of the cells
(whole states; at most one per state), instead of the engine's default."""
WAVE_CONF = "spark.privtab.waveGroups"
"""A Spark setting: the engine's ``max_wave_groups`` (a larger wave keeps more executors busy
on a big level, and costs the driver ≈ 30 bytes per group)."""
PARTITION_PERSONS = 1 << 23
"""Persons per partition aimed at (estimated from the file's size before it is read)."""
_TEXT_BYTES_PER_PERSON = 60


@dataclass(frozen=True)
class StateLayout:
    """The public partition map: the states of each partition (consecutive, whole) and
    the first geo unit of each (units are numbered state by state)."""

    states: tuple[tuple[str, ...], ...]
    first_units: tuple[int, ...]
    state_units: Mapping[str, tuple[int, int]]

    @classmethod
    def of(cls, geography: Geography, partitions: int) -> StateLayout:
        """At most ``partitions`` runs of consecutive states, each of at most its share of
        the GRF-C's blocks unless one state has more."""
        spans = state_units(geography)
        order = sorted(spans, key=lambda s: spans[s][0])
        blocks = geography.blocks[UNIT].to_numpy()
        weight = [
            int(np.count_nonzero((blocks >= spans[s][0]) & (blocks <= spans[s][1]))) for s in order
        ]
        n = max(1, min(partitions, len(order)))
        target = sum(weight) / n
        groups: list[list[str]] = [[]]
        held = 0
        for s, w in zip(order, weight, strict=True):
            if groups[-1] and held + w > target and len(groups) < n:
                groups.append([])
                held = 0
            groups[-1].append(s)
            held += w
        firsts = tuple(spans[g[0]][0] if g else 0 for g in groups)
        return cls(tuple(tuple(g) for g in groups), firsts, spans)

    def partition_of(self, units: NDArray[np.integer]) -> NDArray[np.int64]:
        starts = np.asarray(self.first_units, dtype=np.int64)
        found: NDArray[np.int64] = np.searchsorted(starts, units, side="right") - 1
        return np.maximum(found, 0)

    def state_rows(self, p: int, matrix: CellMatrix) -> StateRows:
        return StateRows(matrix, {s: self.state_units[s] for s in self.states[p]})

    def region_ranges(self, dom: Domain) -> list[tuple[int, int]]:
        """The regions ``[lo, hi)`` of a level nested in states in each partition."""
        prefix = np.asarray([r[:2] for r in dom.regions], dtype="U2")
        return [
            (
                int(np.searchsorted(prefix, states[0], side="left")),
                int(np.searchsorted(prefix, states[-1], side="right")),
            )
            if states
            else (0, 0)
            for states in self.states
        ]


@dataclass(frozen=True)
class _Reading:
    """What the reading tasks need (one broadcast per run): public inputs only."""

    path: str
    reference: ReferenceData
    geography: Geography  # its blocks (BLOCK → UNIT) only
    max_race_codes: int
    layout: StateLayout


@dataclass(frozen=True)
class _PartReport:
    """A part's rows (text: lines), valid persons and problems (rows numbered within the
    part), or ``unreadable`` when its lines could not be parsed."""

    index: int
    rows: int
    persons: int
    log: ProblemLog | None
    unreadable: bool = False
    records: RecordDigest | None = None
    """The part's records digest (merged by the driver: the order does not matter)."""


@dataclass(frozen=True)
class _PartCells:
    """A part's report and, if it had no problem, its cells (combinations numbered by the
    part's reader: ``combos``)."""

    report: _PartReport
    cells: Cells | None


@dataclass(frozen=True)
class _Nest:
    """How the tasks build one nest's region products on each partition (public): the
    levels finest first (:meth:`privtab.tabulate.counts.Nesting.nest`), the index of the
    member each is derived from (−1: the root, from the cells) with the map of the source's
    regions to its own (:func:`privtab.tabulate.counts.coarsening`), and each member's
    regions ``[lo, hi)`` in each partition (every region for a level across states: a
    partial product, summed by a shuffle)."""

    members: tuple[GeoLevel, ...]
    root: Domain
    sources: tuple[int, ...]
    maps: tuple[NDArray[np.int64] | None, ...]
    ranges: tuple[tuple[tuple[int, int], ...], ...]


@dataclass(frozen=True)
class _Products:
    """A partition's region products of one nest (``M = S X`` of its regions of each
    member level) and the cells of each of its states (for cutting chunks as
    :meth:`privtab.tabulate.counts.StateRows.chunks` does). Exact; never sent to the driver."""

    per_state: Mapping[str, int]
    by_geo: Mapping[GeoLevel, sparse.csr_array]


@dataclass(frozen=True)
class _Level:
    """What the tasks of one level need (shipped with the job; public)."""

    plan: LevelPlan
    dom: Domain
    seed: str | None
    noise: bool
    evaluate: bool
    max_groups: int
    max_cells: int

    def source(self, secure: list[RandomSource], label: str | None) -> RandomSource:
        """The chunk's source: seeded per (level, state) for tests, else the task's own."""
        return task_source(self.seed, self.plan.key, secure, label)

    def draw(self, dom: Domain, exact: Any, src: RandomSource) -> ChunkResult:
        """The chunk's noisy counts, their integers narrowed for the trip to the driver
        (:func:`_widened` restores them)."""
        res = tabulate_groups(
            self.plan, dom, exact, source=src, noise=self.noise, evaluate=self.evaluate
        )
        g = res.groups
        cells = tuple(replace(t, groups=_narrow(t.groups), noisy=_narrow(t.noisy)) for t in g.cells)
        narrow = replace(g, count=_narrow(g.count), stage1=_narrow(g.stage1), cells=cells)
        return replace(res, groups=narrow)


def task_source(
    seed: str | None, level: str, secure: list[RandomSource], label: str | None
) -> RandomSource:
    """A task's random source for a chunk: for tests, ``SeededSource(f"{seed}-{level}")``
    (``-{label}``: the chunk's state) — the same draws whatever the partitions; else the
    task's own secure source (its OS entropy, never shared), created once in ``secure``."""
    if seed is not None:
        tail = "" if label is None else f"-{label}"
        return SeededSource(f"{seed}-{level}{tail}")
    if not secure:
        secure.append(SecureSource())
    return secure[0]


def _narrow(values: NDArray[np.int64]) -> NDArray[np.signedinteger[Any]]:
    """The smallest signed integer type that holds ``values`` (exactly)."""
    if values.size == 0:
        return values
    lo, hi = int(values.min()), int(values.max())
    for kind in (np.int8, np.int16, np.int32):
        info = np.iinfo(kind)
        if info.min <= lo and hi <= info.max:
            return values.astype(kind)
    return values


def _widened(res: ChunkResult) -> ChunkResult:
    """A chunk as it left the task, with its integers back in ``int64``."""
    g = res.groups
    i64 = np.int64
    cells = tuple(
        replace(t, groups=t.groups.astype(i64), noisy=t.noisy.astype(i64)) for t in g.cells
    )
    wide = replace(g, count=g.count.astype(i64), stage1=g.stage1.astype(i64), cells=cells)
    return replace(res, groups=wide)


def _spark_context(spark: SparkSession) -> Any:
    return spark.sparkContext


class SparkEngine:
    """SafeTab-P on Spark (see the module docstring for the algorithm and the guarantee).

    ``spark``: a session to use (not stopped by :meth:`close`). Otherwise the active session
    (e.g. under ``spark-submit``) is used, or one is created with ``master`` (default
    ``$PRIVTAB_SPARK_MASTER`` or ``local[2]``) and ``config`` (any ``spark.*`` settings).
    ``max_chunk_groups`` bounds the groups of one ``tabulate_groups`` call, ``partitions``
    (default: from the file's size and the cluster's cores) the partitions of the cells,
    ``max_wave_groups`` the groups whose noisy counts the driver fetches at once.
    """

    name = "spark"

    def __init__(
        self,
        spark: SparkSession | None = None,
        master: str | None = None,
        config: Mapping[str, str] | None = None,
        *,
        max_chunk_groups: int = DEFAULT_CHUNK_GROUPS,
        max_wave_groups: int = DEFAULT_WAVE_GROUPS,
        partitions: int | None = None,
        app_name: str = "privtab-safetab",
    ) -> None:
        if max_chunk_groups < 1 or max_wave_groups < 1 or (partitions or 1) < 1:
            raise ValueError("max_chunk_groups, max_wave_groups and partitions must be positive")
        self.session = SparkSessionHolder(spark, master, config, app_name)
        self.max_chunk_groups = int(max_chunk_groups)
        self.max_chunk_cells = DEFAULT_CHUNK_CELLS
        self.max_wave_groups = int(max_wave_groups)
        self.partitions = partitions
        self.records: RecordDigest | None = None
        self.inputs: SafeTabInputs | None = None
        self.combos: pl.DataFrame | None = None
        self._cells: RDD[tuple[int, StateRows]] | None = None
        self._layout: StateLayout | None = None
        # broadcast once per run, reused by the levels that share them: the combination →
        # iteration incidence per (iteration level, granularity) and the unit → region
        # map per geography
        self._shared: dict[object, Broadcast[Any]] = {}
        self._nesting: Nesting | None = None
        self._nest: tuple[tuple[GeoLevel, ...], RDD[tuple[int, _Products]]] | None = None

    # ------------------------------------------------------------------ session
    def start(self) -> None:
        """Start creating the session in the background (the JVM takes seconds to start:
        it then overlaps the reading of the config, reference files and GRF-C); a failure
        is raised where the session is first used."""
        self.session.start()

    @property
    def spark(self) -> SparkSession:
        """The session (created on first use, or by :meth:`start`;
        :class:`privtab.publish.spark.SparkSessionHolder`)."""
        return self.session.spark

    def close(self) -> None:
        """Release cached data and broadcasts; stop the session if this engine created it."""
        self.session.join()
        if self.session.owned:
            # stopping the session frees its cache and broadcasts at once
            self._shared.clear()
            self._cells, self._nest = None, None
            self.session.stop()
        else:
            self._release()

    def _release(self) -> None:
        """Drop the cached cells and the broadcasts of the last run."""
        self._drop_nest()
        for shared in self._shared.values():
            shared.destroy()
        self._shared.clear()
        if self._cells is not None:
            self._cells.unpersist()
            self._cells = None
        gc.collect()

    # ------------------------------------------------------------------ prepare
    def prepare(self, inputs: SafeTabInputs, say: Say) -> int:
        """Validate and aggregate the person file in Spark tasks; return the persons.

        Raises :class:`privtab.data.InputValidationError` (file, row, column, value, from
        privtab's validation in the tasks) if any row is invalid; nothing is written before.
        """
        from pyspark import StorageLevel

        self._release()
        path = Path(inputs.persons_path)
        scan_persons(path)  # header / format check (raises InputValidationError)
        sc = _spark_context(self.spark)
        layout = StateLayout.of(inputs.geography, self._partitions(path, sc.defaultParallelism))
        parts = person_parts(path, self._parts(path, sc.defaultParallelism))
        say(
            f"validating and aggregating {path} with Spark ({sc.master}): "
            f"{len(parts)} parts → {len(layout.states)} partitions of whole states"
        )
        read = self._read(sc, inputs, layout, parts).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            found = sorted(read.map(_summary).collect(), key=lambda r: r[0].index)
            self._raise_if_invalid(inputs, [report for report, _ in found])
            combos, ids = numbered_combos([c for _, c in found])
            # kept until close(): the cached cells' lineage refers to it
            self._shared["ids"] = shared = sc.broadcast(ids)
            cells = (
                read.flatMap(partial(split_cells, shared, layout))
                .partitionBy(len(layout.states), identity_partition)
                .mapPartitionsWithIndex(
                    partial(partition_cells, layout, combos.height), preservesPartitioning=True
                )
                .persist(StorageLevel.MEMORY_AND_DISK)
            )
            n_cells = sum(cells.map(lambda pc: pc[1].matrix.cells).collect())
        finally:
            read.unpersist()
        persons = sum(r.persons for r, _ in found)
        self.records = RecordDigest(PERSONS_SCHEMA)
        for r, _ in found:
            if r.records is not None:
                self.records.merge(r.records)
        self._cells, self._layout = cells, layout
        self._nesting = Nesting(inputs.geography)
        self.combos, self.inputs = combos, inputs
        say(f"{persons:,} persons in {n_cells:,} cells")
        return persons

    def _parts(self, path: Path, cores: int) -> int:
        """Parts of the person file, one task each: about :data:`PART_ROWS` rows (text:
        :data:`PART_BYTES` bytes) each, a multiple of the cluster's cores."""
        cores = max(1, cores)
        if format_of(path) == "parquet":
            size, unit = parquet_rows(path), PART_ROWS
        else:
            size, unit = path.stat().st_size, PART_BYTES
        return cores * -(-max(1, size) // (unit * cores))

    def _partitions(self, path: Path, cores: int) -> int:
        """Partitions of whole states: the engine's ``partitions``, else the session's
        :data:`PARTITIONS_CONF`, else enough for about :data:`PARTITION_PERSONS` persons
        each (estimated from the file's size), rounded up to a multiple of the cluster's
        cores (each wave of tasks then keeps every core busy)."""
        if self.partitions is not None:
            return self.partitions
        conf = _spark_context(self.spark).getConf().get(PARTITIONS_CONF)
        if conf:
            return max(1, int(conf))
        if format_of(path) == "parquet":
            rows = parquet_rows(path)
        else:
            rows = path.stat().st_size // _TEXT_BYTES_PER_PERSON
        cores = max(1, cores)
        return cores * -(-max(1, rows) // (PARTITION_PERSONS * cores))

    def _read(
        self, sc: Any, inputs: SafeTabInputs, layout: StateLayout, parts: list[FilePart]
    ) -> RDD[_PartCells]:
        """Each part of the person file read, validated and aggregated by a task."""
        geo = inputs.geography
        slim = replace(geo, units=geo.units.head(0), domains={})
        reading = _Reading(str(inputs.persons_path), inputs.reference, slim,
                           inputs.config.max_race_codes, layout)  # fmt: skip
        self._shared["reading"] = shared = sc.broadcast(reading)
        read: RDD[_PartCells] = sc.parallelize(list(enumerate(parts)), max(1, len(parts)))
        return read.map(partial(_read_part, shared))

    def _raise_if_invalid(self, inputs: SafeTabInputs, ordered: list[_PartReport]) -> None:
        """Raise the file's validation error if any part had a problem: the parts' logs
        numbered in the file and merged in file order (the log of one whole-file reader)."""
        if not any(r.unreadable or r.log for r in ordered):
            return
        log = ProblemLog()
        if any(r.unreadable for r in ordered):
            # a line the reader cannot parse: the driver's reader names it (file numbering)
            validate_persons(inputs.persons_path, inputs.reference, inputs.geography,
                             inputs.config.max_race_codes, log)  # fmt: skip
        else:
            before = 1 if format_of(Path(inputs.persons_path)) == "txt" else 0  # header line
            for r in ordered:
                if r.log is not None:
                    log.extend(r.log.shifted(before))
                before += r.rows
        log.raise_if_any()
        raise RuntimeError(  # pragma: no cover - a part's reader flagged a row it did not name
            f"invalid rows in {inputs.persons_path} were flagged but not explained"
        )

    # ------------------------------------------------------------------ tabulate
    def tabulate(self, plan: LevelPlan, drawing: Drawing) -> Iterator[ChunkResult]:
        """The level's noisy T1/T2, one :class:`ChunkResult` per chunk of its domain, in
        domain order. Noise is drawn in the tasks (module docstring)."""
        if self._cells is None or self._layout is None or self.inputs is None:
            raise RuntimeError("call prepare() first")
        dom = level_domain(plan, self.inputs.geography, self.inputs.reference)
        job = _Level(plan, dom, seed_of(drawing.source), drawing.noise, drawing.evaluate,
                     self.max_chunk_groups, self.max_chunk_cells)  # fmt: skip
        its, nest = self._iterations(plan, dom), self._nest_products(dom.geo)
        if dom.geo not in NESTED_IN_STATE:
            if nest is not None:
                partials = nest.mapPartitions(partial(_partial_product, job))
            else:
                regions = self._unit_regions(dom.geo)
                partials = self._cells.mapPartitions(partial(_partial_counts, job, regions))
            whole = partials.reduceByKey(add_matrices, 1).mapPartitions(
                partial(_whole_level, job, its)
            )
            yield from map(_widened, whole.collect())
            return
        sc = _spark_context(self.spark)
        ranges = self._layout.region_ranges(dom)
        conf = sc.getConf().get(WAVE_CONF)
        most = int(conf) if conf else self.max_wave_groups
        source: RDD[tuple[int, Any]] = self._cells if nest is None else nest
        if nest is not None:
            chunks = partial(_product_chunks, job, its)
        else:
            chunks = partial(_cell_chunks, job, its, self._unit_regions(dom.geo))
        task = partial(_nested_level, job, ranges, chunks)
        for wave in _waves(ranges, len(dom.codes), max(1, most)):
            yield from map(_widened, sc.runJob(source, task, wave))

    def _nest_products(self, geo: GeoLevel) -> RDD[tuple[int, _Products]] | None:
        """The cached region products of ``geo``'s nest (built by the first level of the
        nest that runs, dropped when a level of another nest runs), or ``None`` when
        ``geo`` is alone in its nest or the nest's finest level is not nested in states
        (its levels then read the cells)."""
        from pyspark import StorageLevel

        assert self._nesting is not None
        assert self._cells is not None
        members = self._nesting.nest(geo)
        if self._nest is not None and self._nest[0] == members:
            return self._nest[1]
        self._drop_nest()
        if len(members) < 2 or members[0] not in NESTED_IN_STATE:
            return None
        plan = self._nest_plan(members)
        build = partial(_build_products, plan, self._unit_regions(members[0]))
        rdd = self._cells.mapPartitions(build, preservesPartitioning=True)
        self._nest = (members, rdd.persist(StorageLevel.MEMORY_AND_DISK))
        return self._nest[1]

    def _nest_plan(self, members: tuple[GeoLevel, ...]) -> _Nest:
        """The public plan of a nest's products (:class:`_Nest`)."""
        assert self._nesting is not None
        assert self._layout is not None
        doms = [self._nesting.whole(g) for g in members]
        n = len(self._layout.states)
        ranges = tuple(
            tuple(self._layout.region_ranges(d)) if d.geo in NESTED_IN_STATE
            else ((0, len(d.regions)),) * n
            for d in doms
        )  # fmt: skip
        sources, maps = [], []
        for i, geo in enumerate(members):
            src = self._nesting.source(geo, members[:i])
            sources.append(-1 if src is None else members.index(src))
            maps.append(None if src is None else self._nesting.map(src, geo))
        return _Nest(members, doms[0], tuple(sources), tuple(maps), ranges)

    def _drop_nest(self) -> None:
        if self._nest is not None:
            self._nest[1].unpersist()
            self._nest = None

    def _iterations(self, plan: LevelPlan, dom: Domain) -> Broadcast[Any]:
        """Combination × iteration incidence (one per iteration level and granularity,
        reused by every geography of the granularity), broadcast."""
        assert self.inputs is not None
        assert self.combos is not None
        memo = ("B", plan.iteration_level, dom.geo.granularity, dom.codes)
        if memo not in self._shared:
            b = iteration_matrix(
                self.combos, self.inputs.reference, plan.iteration_level, dom.geo.granularity
            )
            self._shared[memo] = _spark_context(self.spark).broadcast(b)
        return self._shared[memo]

    def _unit_regions(self, geo: GeoLevel) -> Broadcast[Any]:
        """Geo unit → region index of the level (from the GRF-C), one per geography."""
        assert self.inputs is not None
        memo = ("R", geo)
        if memo not in self._shared:
            ur = unit_regions(self.inputs.geography, geo)
            self._shared[memo] = _spark_context(self.spark).broadcast(ur)
        return self._shared[memo]


def _waves(ranges: list[tuple[int, int]], n_it: int, most: int) -> Iterator[list[int]]:
    """Runs of consecutive partitions holding regions, of at most ``most`` groups each
    (at least one partition)."""
    wave: list[int] = []
    held = 0
    for p, (lo, hi) in enumerate(ranges):
        if hi <= lo:
            continue
        size = (hi - lo) * n_it
        if wave and held + size > most:
            yield wave
            wave, held = [], 0
        wave.append(p)
        held += size
    if wave:
        yield wave


# ---------------------------------------------------------------------- tasks
def identity_partition(p: int) -> int:
    return p


def add_matrices(a: sparse.csr_array, b: sparse.csr_array) -> sparse.csr_array:
    total: sparse.csr_array = a + b
    return total


def _read_part(shared: Broadcast[_Reading], item: tuple[int, FilePart]) -> _PartCells:
    """Read, validate and aggregate one part of the person file (privtab's reader and
    aggregation); a part with a problem keeps no cell (the run stops at the driver)."""
    r = shared.value
    index, part = item
    reader = PersonReader(Path(r.path), r.reference, r.geography, r.max_race_codes, part=part)
    starts = sorted(a for a, _ in r.layout.state_units.values())
    digest = RecordDigest(PERSONS_SCHEMA)
    try:
        cells = aggregate_typed(reader.typed_batches(), r.reference.codes, starts, digest=digest)
    except pl.exceptions.ComputeError:
        return _PartCells(_PartReport(index, 0, 0, None, unreadable=True), None)
    if reader.log:
        return _PartCells(_PartReport(index, reader.part_rows, 0, reader.log), None)
    report = _PartReport(index, reader.part_rows, cells.persons, None, records=digest)
    return _PartCells(report, cells)


def _summary(read: _PartCells) -> tuple[_PartReport, pl.DataFrame | None]:
    """What the driver learns of a part: its report and distinct combinations (no count)."""
    return read.report, None if read.cells is None else read.cells.combos


def numbered_combos(
    found: list[pl.DataFrame | None],
) -> tuple[pl.DataFrame, dict[int, NDArray[np.uint32]]]:
    """The distinct code combinations of every part, numbered in sorted order, and each
    part's own numbering → the run's."""
    keys = [*RACE_KEYS, "QSPAN"]
    frames = [f for f in found if f is not None and f.height]
    every = (
        pl.concat([f.select(keys) for f in frames]).unique()
        if frames
        else pl.DataFrame(schema={keys[0]: pl.UInt64, keys[1]: pl.UInt64, keys[2]: pl.UInt16})
    )
    combos = every.sort(keys).with_row_index(COMBO).with_columns(pl.col(COMBO).cast(pl.UInt32))
    ids = {}
    for index, f in enumerate(found):
        if f is not None:
            joined = f.join(combos.rename({COMBO: "_G"}), on=keys, how="left").sort(COMBO)
            ids[index] = joined["_G"].to_numpy().astype(np.uint32)
    return combos, ids


def split_cells(
    shared: Broadcast[dict[int, NDArray[np.uint32]]], layout: StateLayout, read: _PartCells
) -> Iterator[tuple[int, pl.DataFrame]]:
    """A part's cells with the run's combination ids, packed, split by partition."""
    if read.cells is None:
        return
    packed = packed_cells(read.cells, shared.value[read.report.index])
    units = packed["K"].to_numpy() >> np.uint64(32)  # sorted: cells come sorted by unit
    bounds = [0, *np.searchsorted(units, layout.first_units[1:]).tolist(), packed.height]
    for p in range(len(layout.states)):
        if bounds[p + 1] > bounds[p]:
            yield p, packed.slice(bounds[p], bounds[p + 1] - bounds[p])


def partition_cells(
    layout: StateLayout, n_combos: int, p: int, items: Iterable[tuple[int, pl.DataFrame]]
) -> Iterator[tuple[int, StateRows]]:
    """A partition's cell matrix: the exact sum of its parts' cells."""
    keys, n = merge_packed([frame for _, frame in items])
    yield p, layout.state_rows(p, CellMatrix.from_packed(keys, n, n_combos))


def _nested_level(
    job: _Level,
    ranges: list[tuple[int, int]],
    chunks_of: Callable[[Any, Domain, int], Iterator[tuple[Domain, ExactCounts]]],
    items: Iterable[tuple[int, Any]],
) -> Iterator[ChunkResult]:
    """A level nested in states on one partition: its chunks' noisy counts, in order
    (``chunks_of``: the chunks of the partition's regions and their exact counts, from its
    cells, :func:`_cell_chunks`, or its nest's products, :func:`_product_chunks`)."""
    secure: list[RandomSource] = []
    for p, held in items:
        lo, hi = ranges[p]
        if hi <= lo:
            continue
        seeded = job.seed is not None  # tests: one chunk per state, seeded per state
        most = 1 if seeded else job.max_groups
        for part, exact in chunks_of(held, job.dom.slice(lo, hi), most):
            label = part.regions[0][:2] if seeded else None
            yield job.draw(part, exact, job.source(secure, label))


def _cell_chunks(
    job: _Level,
    its: Broadcast[Any],
    regions: Broadcast[Any],
    rows: StateRows,
    here: Domain,
    most: int,
) -> Iterator[tuple[Domain, ExactCounts]]:
    """Chunks of whole states (:meth:`StateRows.chunks`) and their ``(S X) B`` from the
    partition's cells."""
    for part, span in rows.chunks(here, most, job.max_cells):
        by_region = region_counts(rows.matrix, span, regions.value, part)
        yield part, exact_counts(by_region, its.value, part)


def _product_chunks(
    job: _Level, its: Broadcast[Any], products: _Products, here: Domain, most: int
) -> Iterator[tuple[Domain, ExactCounts]]:
    """The same chunks (the same cells per state) and counts from the nest's products."""
    m = products.by_geo[job.dom.geo]
    for a, b, _ in state_chunks(here, most, products.per_state, job.max_cells):
        part = here.slice(a, b)
        yield part, exact_counts(row_slice(m, a * SEX_AGES, b * SEX_AGES), its.value, part)


def _partial_counts(
    job: _Level, regions: Broadcast[Any], items: Iterable[tuple[int, StateRows]]
) -> Iterator[tuple[int, sparse.csr_array]]:
    """``S X`` of a level across states over one partition's rows (exact; summed by a
    shuffle on the executors). Every partition emits one, so the level always runs."""
    for _, rows in items:
        every = (0, rows.matrix.unit.size)
        yield 0, region_counts(rows.matrix, every, regions.value, job.dom)


def _build_products(
    plan: _Nest, regions: Broadcast[Any], items: Iterable[tuple[int, StateRows]]
) -> Iterator[tuple[int, _Products]]:
    """A partition's products of one nest: the root's ``S X`` from its cells, every other
    member's from the member it is derived from (exact; the same matrices as ``S X`` of
    the member's regions from the cells)."""
    for p, rows in items:
        every = (0, rows.matrix.unit.size)
        made: dict[GeoLevel, sparse.csr_array] = {}
        for i, geo in enumerate(plan.members):
            lo, hi = plan.ranges[i][p]
            src, to_coarse = plan.sources[i], plan.maps[i]
            if to_coarse is None:  # the root (src −1): from the cells
                root = plan.root.slice(lo, hi)
                made[geo] = region_counts(rows.matrix, every, regions.value, root)
                continue
            flo, fhi = plan.ranges[src][p]
            local = to_coarse[flo:fhi] - lo  # a fine region's coarse one is in this partition
            local = np.where((local >= 0) & (local < hi - lo), local, -1)
            made[geo] = coarser_counts(made[plan.members[src]], local, hi - lo)
        per_state = {s: rows.matrix.cells_in(rows.rows_of([s])) for s in rows.state_units}
        yield p, _Products(per_state, made)


def _partial_product(
    job: _Level, items: Iterable[tuple[int, _Products]]
) -> Iterator[tuple[int, sparse.csr_array]]:
    """A level across states: one partition's part of its nest's product (summed by a
    shuffle, as :func:`_partial_counts`)."""
    for _, products in items:
        yield 0, products.by_geo[job.dom.geo]


def _whole_level(
    job: _Level, its: Broadcast[Any], items: Iterable[tuple[int, sparse.csr_array]]
) -> Iterator[ChunkResult]:
    """A level across states, in one chunk: ``(Σ S X) B`` and its noise."""
    secure: list[RandomSource] = []
    for _, by_region in items:
        exact = exact_counts(by_region, its.value, job.dom)
        yield job.draw(job.dom, exact, job.source(secure, None))


# ---------------------------------------------------------------------- helpers
def parquet_rows(path: Path) -> int:
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as pf:
        return int(pf.metadata.num_rows)


def seed_of(source: RandomSource | None) -> str | None:
    """``None`` for a secure source (tasks draw their own entropy); for a seeded test
    source, its seed (or, for another non-private source, 128 bits drawn from it)."""
    if source is None or source.is_private:
        return None
    if isinstance(source, SeededSource):
        return str(source.seed)
    return f"{source.random_bits(128):032x}"
