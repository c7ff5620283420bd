"""The Spark engine of SafeTab-P: the same plan and per-level steps, aggregated on PySpark.

``privtab safetab run --engine spark`` (or ``RunOptions(engine="spark")``) runs the release
with :class:`SparkEngine`. The algorithm is defined once: every chunk of a level's public
domain is tabulated by :func:`privtab.tabulate.chunk.tabulate_groups` (SafeTab seed
Algorithms 1–3) — on the **executors**, with noise from privtab's exact samplers
(:mod:`privtab.random`). What differs from the embedded engine is only how persons are
aggregated and joined to population groups:

1. **Read + validate + aggregate** (:meth:`SparkEngine.prepare`, one pass over the person
   file, text or Parquet, read by Spark). The header is checked by privtab's reader; every
   row is then checked by the rules of :func:`privtab.data.spec.person_spec` compiled to
   Spark SQL (:func:`privtab.data.spec.bad_row_sql` — the same declarations the polars
   reader compiles: ids, age 0–115, sex, householder, CENRACE, race codes known / not
   duplicated / no code after ``Null`` / at most ``max_race_codes``, ethnicity code, field
   count, missing values, invalid UTF-8) plus the join with the GRF-C blocks, and typed;
   the race codes are sorted and packed
   into ``RACE_KEY1``/``RACE_KEY2`` (:func:`privtab.data.pack_race_codes`'s layout), and
   rows are counted per (bad flag, geo unit, code combination, ethnicity, sex, age). If any
   row is flagged, privtab's naming validation (:func:`privtab.data.validate_persons`) runs
   on the driver and raises the same :class:`~privtab.data.InputValidationError` (file, row,
   column, value) as the polars engine — before anything is written. A valid file costs one
   Spark pass; an invalid one also one streaming polars pass on the driver (which must then
   be able to read the file).
2. **Per level** (:meth:`SparkEngine.tabulate`): cells → regions (broadcast join with the
   unit → region table of the level, from the GRF-C) → iterations (broadcast join with the
   expansion of the *distinct* code combinations, :func:`privtab.data.iteration_matrix`,
   computed on the driver) → exact counts per (group, sex, age). The public domain
   (regions × iterations, region-major) is cut into chunks of whole regions; one marker row
   per chunk guarantees that every chunk — empty groups included — reaches an executor,
   which runs the algorithm on it and returns the chunk's noisy counts (arrays, pickled;
   no exact count) to the driver, one partition at a time (:meth:`pyspark.RDD.
   toLocalIterator` of the DataFrame's rows); the driver publishes them as the polars
   engine's (:func:`privtab.tabulate.publish.publish_chunk`).

**Privacy.** The guarantee is the plan's (seed Theorems 1 and 3; :mod:`privtab.tabulate.
engine`): every group of the public domain is tabulated exactly once, with the parameters
of the plan. Noise is drawn on the executors from the exact samplers: each task creates its
own :class:`privtab.random.SecureSource` (AES-256-CTR keyed from the executor's
``os.urandom``; no seed is shared or shipped). For tests only, a seeded source may be given:
chunk ``c`` of level ``L`` then uses ``SeededSource(f"{seed}-{L}-{c}")`` (all stages of the
chunk are drawn from it in order), independent of Spark's partitioning, and the release is
marked not private (:func:`privtab.tabulate.run_release` refuses seeded sources unless
``allow_insecure``). Exact counts never leave the executors (the chunk outputs hold noisy
counts only; ``evaluate=True`` adds non-private error statistics, for tests).

Spark session: pass one (``SparkEngine(spark=...)``), or let the engine use the active one
(``spark-submit`` — master and configuration then come from its command line), or create
``master`` (default ``local[2]``, or ``$PRIVTAB_SPARK_MASTER``) with ``config``.
"""

from __future__ import annotations

import gc
import os
import pickle
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
from scipy import sparse

from privtab.data import SafeTabInputs
from privtab.data.ages import MAX_AGE
from privtab.data.errors import ProblemLog
from privtab.data.geography import UNIT
from privtab.data.membership import RACE_KEYS, iteration_matrix
from privtab.data.persons import code_strings, scan_persons, validate_persons
from privtab.data.spec import FIELDS, PERSON_COLUMNS, RACE_COLUMNS, bad_row_sql, person_spec
from privtab.random import RandomSource, SecureSource, SeededSource
from privtab.tabulate.aggregate import COMBO
from privtab.tabulate.algorithm import ExactCounts, NoisyGroups
from privtab.tabulate.chunk import Drawing, tabulate_groups
from privtab.tabulate.domain import Domain, level_domain
from privtab.tabulate.plan import LevelPlan
from privtab.tabulate.results import ChunkResult, Tallies

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["DEFAULT_CHUNK_GROUPS", "SparkEngine"]

Say = Callable[[str], None]

DEFAULT_CHUNK_GROUPS = 1 << 20
"""Population groups per chunk of a level's domain (one executor call each)."""
_LINE = "_LINE"
_SEP = "\x1f"  # never occurs in Census text files: each line is read as one field
_DEFAULT_CONF = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.showConsoleProgress": "false",
}
_OUT_SCHEMA = "chunk long, groups binary, meta binary"
_CELLS_PER_PARTITION = 250_000
"""Cells per partition of the cached cell table (:meth:`SparkEngine.prepare`)."""
_KEYS_PER_TASK = 1_000_000
"""Estimated (group, sex, age) keys per reduce task of a level's exact counts."""
_PREAGG_FACTOR = 4
"""Levels with at most 1/_PREAGG_FACTOR as many regions as geo units pre-aggregate the
cells per region before the expansion to iterations (:meth:`SparkEngine.tabulate`)."""


def _spark_modules() -> tuple[Any, Any]:
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql import types as T  # noqa: N812

    return F, T


class SparkEngine:
    """SafeTab-P on Spark (see the module docstring for the algorithm and the guarantee).

    ``spark``: a session to use (not stopped by :meth:`close`). Otherwise the active session
    (e.g. under ``spark-submit``) is used, or one is created with ``master`` (default
    ``$PRIVTAB_SPARK_MASTER`` or ``local[2]``) and ``config`` (any ``spark.*`` settings).
    ``max_chunk_groups`` bounds the groups of a level tabulated by one executor call.
    """

    name = "spark"

    def __init__(
        self,
        spark: SparkSession | None = None,
        master: str | None = None,
        config: Mapping[str, str] | None = None,
        *,
        max_chunk_groups: int = DEFAULT_CHUNK_GROUPS,
        app_name: str = "privtab-safetab",
    ) -> None:
        if max_chunk_groups < 1:
            raise ValueError("max_chunk_groups must be positive")
        self._spark = spark
        self._own = False
        self.master = master or os.environ.get("PRIVTAB_SPARK_MASTER", "local[2]")
        self.config = dict(config or {})
        self.max_chunk_groups = int(max_chunk_groups)
        self.app_name = app_name
        self.inputs: SafeTabInputs | None = None
        self.combos: pl.DataFrame | None = None
        self._cells: DataFrame | None = None
        self._n_units = 0
        self._n_cells = 0
        # driver-created tables, built once and reused by the levels that share them: the
        # combination → iteration maps, one per (iteration level, granularity) — the same
        # for every geography of a granularity — and the unit → region tables, one per
        # geography (US and PR levels of a geography, both iteration levels)
        self._combo_its: dict[tuple[object, ...], tuple[pl.DataFrame, DataFrame]] = {}
        self._unit_regions: dict[str, DataFrame] = {}

    # ------------------------------------------------------------------ session
    @property
    def spark(self) -> SparkSession:
        """The session (created on first use)."""
        if self._spark is None:
            from pyspark.sql import SparkSession

            active = SparkSession.getActiveSession()
            if active is not None:
                self._spark = active
            else:
                builder = SparkSession.builder.appName(self.app_name)
                if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit
                    builder = builder.master(self.master)
                    if self.master.startswith("local"):
                        # local workers must run this interpreter (privtab importable)
                        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
                for k, v in {**_DEFAULT_CONF, **self.config}.items():
                    builder = builder.config(k, v)
                self._spark = builder.getOrCreate()
                self._own = True
        return self._spark

    def close(self) -> None:
        """Release cached data; stop the session if this engine created it."""
        self._combo_its.clear()
        self._unit_regions.clear()
        gc.collect()  # the last level's DataFrames (see tabulate)
        if self._cells is not None:
            self._cells.unpersist()
            self._cells = None
        if self._own and self._spark is not None:
            self._spark.stop()
            self._spark = None
            self._own = False

    # ------------------------------------------------------------------ prepare
    def prepare(self, inputs: SafeTabInputs, say: Say) -> int:
        """Validate and aggregate the person file in Spark (one pass); return the persons.

        Raises :class:`privtab.data.InputValidationError` (file, row, column, value, from
        privtab's naming validation) if any row is invalid; nothing is written before.
        """
        F, _ = _spark_modules()
        self._combo_its.clear()
        self._unit_regions.clear()
        path = Path(inputs.persons_path)
        scan_persons(path)  # header / format check (raises InputValidationError)
        say(f"validating and aggregating {path} with Spark ({self.spark.sparkContext.master})")
        # the row checks are wide expressions: constraint propagation only costs time here
        self.spark.conf.set("spark.sql.constraintPropagation.enabled", "false")
        typed = _typed_persons(self.spark, path, inputs)
        keys = [UNIT, *RACE_KEYS, "QSPAN", "QSEX", "QAGE"]
        agg = typed.groupBy("_BAD", *keys).agg(F.count(F.lit(1)).alias("N")).persist()
        try:
            bad = agg.filter(F.col("_BAD")).agg(F.sum("N")).collect()[0][0]
            if bad:
                say(f"{int(bad):,} invalid rows: naming every problem")
                log = ProblemLog()
                validate_persons(
                    path, inputs.reference, inputs.geography, inputs.config.max_race_codes, log
                )
                log.raise_if_any()
                raise RuntimeError(  # pragma: no cover - the two checks agree (tested)
                    f"{int(bad)} rows of {path} were flagged invalid by Spark but not explained"
                )
            good = agg.filter(~F.col("_BAD")).drop("_BAD")
            combos_rows = good.select(*RACE_KEYS, "QSPAN").distinct().toArrow()
            combos = (
                pl.DataFrame(pl.from_arrow(combos_rows))
                .select(
                    pl.col(RACE_KEYS[0]).cast(pl.UInt64),
                    pl.col(RACE_KEYS[1]).cast(pl.UInt64),
                    pl.col("QSPAN").cast(pl.UInt16),
                )
                .sort(*RACE_KEYS, "QSPAN")
                .with_row_index(COMBO)
                .with_columns(pl.col(COMBO).cast(pl.UInt32))
            )
            combo_df = _to_spark(
                self.spark,
                combos.select(
                    pl.col(COMBO).cast(pl.Int64),
                    pl.col(RACE_KEYS[0]).cast(pl.Int64),
                    pl.col(RACE_KEYS[1]).cast(pl.Int64),
                    pl.col("QSPAN").cast(pl.Int32),
                ),
            )
            joined = good.join(F.broadcast(combo_df), on=[*RACE_KEYS, "QSPAN"], how="inner")
            n_cells = joined.count()
            # partitions of at most _CELLS_PER_PARTITION cells: every level expands them to
            # its iterations and sums them per task, a hash table that must fit the task's
            # share of the execution memory (local[2] at 10^7 persons: 4 partitions failed
            # with AGGREGATE_OUT_OF_MEMORY under spark.driver.memory=6g)
            n_parts = max(
                self.spark.sparkContext.defaultParallelism,
                -(-n_cells // _CELLS_PER_PARTITION),
            )
            cells = joined.select(UNIT, COMBO, "QSEX", "QAGE", "N").repartition(n_parts).persist()
            persons = int(cells.agg(F.sum("N")).collect()[0][0] or 0)
        finally:
            agg.unpersist()
        self._cells = cells
        self._n_units = inputs.geography.units.height
        self._n_cells = int(n_cells)
        self.combos = combos
        self.inputs = inputs
        say(f"{persons:,} persons in {n_cells:,} cells")
        return persons

    # ------------------------------------------------------------------ tabulate
    def tabulate(self, plan: LevelPlan, drawing: Drawing) -> Iterator[ChunkResult]:
        """The level's noisy T1/T2, one :class:`ChunkResult` per chunk of its domain, in
        domain order (region-major). Noise is drawn on the executors (module docstring)."""
        if self._cells is None or self.inputs is None or self.combos is None:
            raise RuntimeError("call prepare() first")
        # the previous level's DataFrames sit in Python reference cycles that keep their
        # JVM plans, and with them the broadcast relations, alive through py4j until
        # Python's cyclic GC runs — which a driver busy in polars rarely triggers
        gc.collect()
        dom = level_domain(plan, self.inputs.geography, self.inputs.reference)
        per_chunk = max(1, self.max_chunk_groups // len(dom.codes))
        n_chunks = -(-len(dom.regions) // per_chunk)
        combo_it, ci = self._combo_table(plan, dom)
        fine = self._fine_counts(dom, ci, per_chunk).unionByName(self._markers(n_chunks))
        spark = self.spark
        parts = max(1, min(n_chunks, spark.sparkContext.defaultParallelism * 4))
        shared = spark.sparkContext.broadcast(
            pickle.dumps(
                (plan, dom, per_chunk, _seed_of(drawing.source), drawing.noise, drawing.evaluate)
            )
        )
        session_parts = int(spark.conf.get("spark.sql.shuffle.partitions") or "200")
        spark.conf.set("spark.sql.shuffle.partitions", str(self._agg_parts(combo_it, dom)))
        try:
            out = fine.repartitionByRange(parts, "chunk").mapInArrow(
                _chunk_task(shared), _OUT_SCHEMA
            )
            # RDD.toLocalIterator, not DataFrame.toLocalIterator (which serves partitions
            # after its SQL execution has ended): with the DataFrame one the JVM kept every
            # level's broadcast hash relations alive (jmap -histo:live, pyspark 4.3: two
            # more live LongToUnsafeRowMap per level; 135 MB more live heap per level at
            # 10^6 persons) — the cause of the 6 GB heap failures at 10^7. Same rows, same
            # pickle serialization. Test: test_levels_leave_no_broadcast_relations_behind.
            for row in out.rdd.toLocalIterator(prefetchPartitions=True):
                tallies = pickle.loads(row["meta"])
                groups = pickle.loads(row["groups"])
                assert isinstance(tallies, Tallies)
                assert isinstance(groups, NoisyGroups)
                c = int(row["chunk"])
                part = dom.slice(c * per_chunk, min((c + 1) * per_chunk, len(dom.regions)))
                yield ChunkResult(plan, part, groups, tallies)
        finally:
            spark.conf.set("spark.sql.shuffle.partitions", str(session_parts))
            shared.destroy()  # the driver's copy too (unpersist keeps it)

    def _combo_table(self, plan: LevelPlan, dom: Domain) -> tuple[pl.DataFrame, DataFrame]:
        """Code combination → iteration of the level (driver side; one per iteration level
        and granularity, reused by every geography) and its Spark copy."""
        assert self.inputs is not None
        assert self.combos is not None
        memo = (plan.iteration_level, dom.geo.granularity, dom.codes)
        if memo not in self._combo_its:
            incidence = sparse.coo_array(
                iteration_matrix(
                    self.combos, self.inputs.reference, plan.iteration_level, dom.geo.granularity
                )
            )
            combo_it = pl.DataFrame(
                {COMBO: incidence.row.astype(np.int64), "_I": incidence.col.astype(np.int64)}
            )
            ci_df = _to_spark(self.spark, combo_it.select(pl.col(COMBO).cast(pl.Int64), "_I"))
            self._combo_its[memo] = (combo_it, ci_df)
        return self._combo_its[memo]

    def _unit_region_table(self, dom: Domain) -> DataFrame:
        """Geo unit → region index of the level (from the GRF-C), one per geography."""
        assert self.inputs is not None
        if dom.geo.value not in self._unit_regions:
            units = self.inputs.geography.units.select(
                pl.col(UNIT).cast(pl.Int64), pl.col(dom.geo.value).to_physical().alias("_R")
            )
            self._unit_regions[dom.geo.value] = _to_spark(
                self.spark, units.drop_nulls().with_columns(pl.col("_R").cast(pl.Int64))
            )
        return self._unit_regions[dom.geo.value]

    def _fine_counts(self, dom: Domain, ci: DataFrame, per_chunk: int) -> DataFrame:
        """Exact persons per (chunk, group, sex, age) of the level (rows only where > 0)."""
        F, _ = _spark_modules()
        assert self._cells is not None
        n_it = len(dom.codes)
        regional = self._cells.join(F.broadcast(self._unit_region_table(dom)), on=UNIT)
        if len(dom.regions) * _PREAGG_FACTOR <= self._n_units:
            # a coarse level (few regions for many units): sum the cells per (region, code
            # combination, sex, age) first, so that only these few rows are expanded to
            # the iterations and summed again (instead of every cell's expansion)
            regional = regional.groupBy("_R", COMBO, "QSEX", "QAGE").agg(F.sum("N").alias("N"))
        # exact counts per (region, iteration, sex, age), keyed by one packed long
        # ((region · iterations + iteration) · 4 + sex) · 128 + age: a one-column hash key
        # is smaller and faster to hash than four columns (sex < 4, age ≤ 115 < 128)
        g_all = F.col("_R").cast("long") * n_it + F.col("_I")
        packed = (g_all * 4 + F.col("QSEX")) * 128 + F.col("QAGE")
        g_of = F.shiftright(F.col("K"), 9)
        chunk_of = F.floor(g_of / (per_chunk * n_it)).cast("long")
        return (
            regional.join(F.broadcast(ci), on=COMBO)
            .select(packed.alias("K"), "N")
            .groupBy("K")
            .agg(F.sum("N").alias("N"))
            .select(
                chunk_of.alias("chunk"),
                (g_of - chunk_of * (per_chunk * n_it)).alias("G"),
                (F.shiftright(F.col("K"), 7) % 4).cast("int").alias("QSEX"),
                (F.col("K") % 128).cast("int").alias("QAGE"),
                F.col("N").cast("long").alias("N"),
            )
        )

    def _markers(self, n_chunks: int) -> DataFrame:
        """One empty row per chunk: every chunk (empty groups included) reaches a task."""
        F, _ = _spark_modules()
        return self.spark.range(n_chunks).select(
            F.col("id").alias("chunk"),
            F.lit(-1).cast("long").alias("G"),
            F.lit(0).alias("QSEX"),
            F.lit(0).alias("QAGE"),
            F.lit(0).cast("long").alias("N"),
        )

    def _agg_parts(self, combo_it: pl.DataFrame, dom: Domain) -> int:
        """Reduce tasks of the exact counts: enough for about ``_KEYS_PER_TASK`` keys each
        (an upper bound: cells × mean iterations per code combination, at most the domain's
        cells); never fewer than the session's ``spark.sql.shuffle.partitions``."""
        assert self.combos is not None
        fan_out = combo_it.height / max(1, self.combos.height)
        keys = min(self._n_cells * fan_out, dom.size * 2 * (MAX_AGE + 1))
        session = int(self.spark.conf.get("spark.sql.shuffle.partitions") or "200")
        return max(session, -(-int(keys) // _KEYS_PER_TASK))


# ---------------------------------------------------------------------- executors
def _chunk_task(shared: Any) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The executor function: tabulate every chunk present in a partition."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        plan, dom, per_chunk, seed, noise, evaluate = pickle.loads(shared.value)
        frames = [pl.DataFrame(pl.from_arrow(b)) for b in batches if b.num_rows]
        if not frames:
            return
        rows = pl.concat(frames)
        secure: RandomSource | None = None
        n_reg = len(dom.regions)
        for (chunk,), part in sorted(rows.partition_by("chunk", as_dict=True).items()):
            c = int(chunk)
            if seed is not None:
                src: RandomSource = SeededSource(f"{seed}-{plan.key}-{c}")
            else:
                if secure is None:
                    secure = SecureSource()  # this task's own OS entropy, never shared
                src = secure
            lo, hi = c * per_chunk, min((c + 1) * per_chunk, n_reg)
            fine = part.filter(pl.col("G") >= 0).select(
                pl.col("G").cast(pl.Int64),
                pl.col("QSEX").cast(pl.UInt8),
                pl.col("QAGE").cast(pl.UInt8),
                pl.col("N").cast(pl.Int64),
            )
            part_dom = dom.slice(lo, hi)
            res = tabulate_groups(
                plan,
                part_dom,
                ExactCounts.from_frame(fine, part_dom.size),
                source=src,
                noise=noise,
                evaluate=evaluate,
            )
            # the chunk's noisy counts (arrays; no exact count) and tallies, pickled
            groups, meta = pickle.dumps(res.groups), pickle.dumps(res.tallies)
            yield pa.RecordBatch.from_pydict(
                {"chunk": [c], "groups": [groups], "meta": [meta]},
                schema=pa.schema(
                    [("chunk", pa.int64()), ("groups", pa.binary()), ("meta", pa.binary())]
                ),
            )

    return run


# ---------------------------------------------------------------------- helpers
def _seed_of(source: RandomSource | None) -> str | None:
    """``None`` for a secure source (executors draw their own entropy); for a seeded test
    source, its seed (or, for another non-private source, 128 bits drawn from it)."""
    if source is None or source.is_private:
        return None
    if isinstance(source, SeededSource):
        return str(source.seed)
    return f"{source.random_bits(128):032x}"


def _to_spark(spark: SparkSession, frame: pl.DataFrame) -> DataFrame:
    """A small driver-side polars frame as a Spark DataFrame (Arrow when supported)."""
    table = frame.to_arrow()
    try:
        return spark.createDataFrame(table)
    except (TypeError, ValueError):  # pragma: no cover - pyspark < 4 (no Arrow tables)
        return spark.createDataFrame(frame.to_pandas())


def _raw_persons(spark: SparkSession, path: Path) -> DataFrame:
    """The person file's fields as strings (text or Parquet), blank lines dropped."""
    F, T = _spark_modules()
    n = len(PERSON_COLUMNS)
    if path.suffix.lower() == ".txt":
        lines = (
            spark.read.option("header", True)
            .option("sep", _SEP)
            .option("quote", "")
            .option("escape", "")
            .option("nullValue", "\u0000")
            .option("mode", "PERMISSIVE")
            .option("encoding", "UTF-8")
            # the field is named after the (already checked) header: no header warning
            .schema(T.StructType([T.StructField("|".join(PERSON_COLUMNS), T.StringType())]))
            .csv(str(path))
        )
        line = F.coalesce(F.col(f"`{'|'.join(PERSON_COLUMNS)}`"), F.lit(""))
        arr = F.split(line, "\\|", -1)
        raw = lines.select(
            line.alias(_LINE),
            F.size(arr).alias(FIELDS),
            *(F.get(arr, i).alias(c) for i, c in enumerate(PERSON_COLUMNS)),
        )
    else:
        pq = spark.read.parquet(str(path))
        raw = pq.select(
            F.lit("x").alias(_LINE),
            F.lit(n).alias(FIELDS),
            *(
                F.coalesce(F.col(c).cast("string"), F.lit("Null")).alias(c)
                if c in RACE_COLUMNS
                else F.col(c).cast("string").alias(c)
                for c in PERSON_COLUMNS
            ),
        )
    # a blank line (no field holds anything) carries no data, as in the polars reader
    blank = F.col(_LINE) == ""
    only_separators = F.lit(True)
    for c in PERSON_COLUMNS:
        only_separators = only_separators & (F.coalesce(F.col(c), F.lit("")) == "")
    return raw.filter(~(blank | only_separators)).drop(_LINE)


def _typed_persons(spark: SparkSession, path: Path, inputs: SafeTabInputs) -> DataFrame:
    """Canonical typed columns + ``_BAD``: the person rules compiled to Spark SQL."""
    F, _ = _spark_modules()
    raw = _raw_persons(spark, path)
    spec = person_spec(inputs.config.max_race_codes)
    codes = code_strings(inputs.reference)
    bad = F.expr(bad_row_sql(spec, None if codes is None else codes.to_list(), FIELDS))
    ids = ", ".join(f"`{c}`" for c in ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK"))
    race = F.array(
        *(F.expr(f"CASE WHEN `{c}` = 'Null' THEN 0 ELSE TRY_CAST(`{c}` AS INT) END")
          for c in RACE_COLUMNS)
    )  # fmt: skip
    typed = raw.select(
        bad.alias("_BAD"),
        F.expr(f"TRY_CAST(concat({ids}) AS BIGINT)").alias("BLOCK"),
        F.expr("TRY_CAST(`QAGE` AS INT)").alias("QAGE"),
        F.expr("TRY_CAST(`QSEX` AS INT)").alias("QSEX"),
        race.alias("_RC"),
        F.expr("TRY_CAST(`QSPAN` AS INT)").alias("QSPAN"),
    )
    blocks = _to_spark(
        spark,
        inputs.geography.blocks.select(pl.col("BLOCK").cast(pl.Int64), pl.col(UNIT).cast(pl.Int64)),
    )
    typed = typed.join(blocks, on="BLOCK", how="left")
    rc = F.col("_RC")
    srt = F.sort_array(F.transform(rc, lambda x: F.coalesce(x, F.lit(0))), asc=False)
    key = [
        sum(
            (F.get(srt, 4 * part + i).cast("long") * (1 << (48 - 16 * i)) for i in range(4)),
            F.lit(0).cast("long"),
        )
        for part in (0, 1)
    ]
    return typed.select(
        (F.col("_BAD") | F.col(UNIT).isNull()).alias("_BAD"),  # block not in the GRF-C
        F.col(UNIT),
        key[0].alias(RACE_KEYS[0]),
        key[1].alias(RACE_KEYS[1]),
        F.col("QSPAN"),
        F.col("QSEX"),
        F.col("QAGE"),
    )
