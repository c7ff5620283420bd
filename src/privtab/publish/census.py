"""Writing a release's tables: T1/T2 in the Census layout, plus privtab's error tables.

The layout is the one the 2020 production code wrote (``safetab_p_analytics.py``: Spark
``write.csv(sep="|", header=True)`` after ``repartition(1)``, the PR run appended to the US
run's folders):

- ``t1/`` — ``part-00000-us-c000.csv`` (then ``part-00000-pr-c000.csv`` when Puerto Rico is
  run too): pipe-delimited, a header line, exactly ``REGION_ID|REGION_TYPE|ITERATION_CODE|
  COUNT``; ``headers.csv`` (the header, no newline) and an empty ``_SUCCESS``;
- ``t2/`` — the same with ``REGION_ID|REGION_TYPE|ITERATION_CODE|AGESTART|AGEEND|SEX|COUNT``
  (sex marginals are rows with ``AGESTART = AGEEND = *``);
- ``t1-error.parquet`` / ``t2-error.parquet`` — the **companion tables**: one row per
  published row, keyed by its Census key columns (every Census column but ``COUNT``), with
  what privtab knows about that row's noise: ``NOISE`` (law), ``NOISE_SCALE``, ``VARIANCE``,
  ``MOE95`` (exact), and in T1 ``STAT_LEVEL``, ``COUNT_SOURCE``, ``STAGE1_COUNT`` and its
  law (:data:`privtab.tabulate.tables.T1_SCHEMA` / ``T2_SCHEMA`` minus ``COUNT``). All of it
  is public (the plan) or noisy output (the stage-1 count), so publishing it costs nothing;
  it is read back by :func:`privtab.analysis.safetab.load_release`.
- ``t1.parquet`` / ``t2.parquet`` — Parquet copies of T1/T2 (Census columns only), only with
  the ``parquet`` format.

Every Parquet file carries the release's key-value metadata
(:func:`privtab.release.marking.parquet_metadata`). Frames are appended level by level and
chunk by chunk, so memory holds one chunk's output at most.

Use::

    with CensusWriter(tmp, formats=("txt",), metadata=parquet_metadata(private)) as w:
        w.start_run("US")
        for part in chunks:            # frames with T1_SCHEMA / T2_SCHEMA columns
            w.write(part.t1, part.t2)  # already suppressed, clamped, with marginals
        w.start_run("PR")
        ...
    files = w.files                    # every file written, its table, kind and rows
    outputs = outputs_manifest(tmp, files)   # for release.json (SHA-256 of each file)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import polars as pl

__all__ = [
    "CENSUS_COLUMNS",
    "ERROR_FILES",
    "FORMATS",
    "CensusWriter",
    "OutputFile",
    "census_header",
    "error_schema",
    "outputs_manifest",
    "part_file_name",
    "part_files",
    "read_census_table",
]

FORMATS = ("txt", "parquet")
"""``txt``: the Census text folders ``t1/`` and ``t2/``; ``parquet``: ``t1.parquet`` and
``t2.parquet`` (Census columns). The companion error tables are always written."""

CENSUS_COLUMNS: dict[str, tuple[str, ...]] = {
    "t1": ("REGION_ID", "REGION_TYPE", "ITERATION_CODE", "COUNT"),
    "t2": ("REGION_ID", "REGION_TYPE", "ITERATION_CODE", "AGESTART", "AGEEND", "SEX", "COUNT"),
}
"""The published columns of each table, in Census order (production ``T1_COLUMNS``,
``T2_COLUMNS``)."""
ERROR_FILES = {"t1": "t1-error.parquet", "t2": "t2-error.parquet"}
"""The companion table of each table."""
SEPARATOR = "|"
HEADERS_FILE = "headers.csv"
SUCCESS_FILE = "_SUCCESS"


def census_header(table: str) -> str:
    """The header line of a Census table (no newline), e.g. ``REGION_ID|…|COUNT``."""
    return SEPARATOR.join(CENSUS_COLUMNS[table])


def part_file_name(scope: str) -> str:
    """The part file of one run in ``t1/`` or ``t2/`` (Spark's ``part-00000-…-c000.csv``
    shape, with the run's name in place of Spark's random job id)."""
    return f"part-00000-{scope.lower()}-c000.csv"


def census_schema(table: str) -> dict[str, Any]:
    """Polars schema of a Census table: strings and an Int64 ``COUNT``."""
    return {c: (pl.Int64 if c == "COUNT" else pl.String) for c in CENSUS_COLUMNS[table]}


def error_schema(table: str, full: dict[str, Any]) -> dict[str, Any]:
    """The companion table's schema: the key columns, then every column of ``full`` (the
    engine's wide schema) that is not a Census column."""
    census = CENSUS_COLUMNS[table]
    keys = {c: full[c] for c in census if c != "COUNT"}
    return {**keys, **{c: t for c, t in full.items() if c not in census}}


@dataclass(frozen=True)
class OutputFile:
    """One file of the release's tables: its path relative to the release folder, the table
    it belongs to (``t1``/``t2``), its kind and its data rows."""

    path: str
    table: str
    kind: str
    """``census_text`` (a part file), ``census_parquet``, ``error`` (companion table),
    ``header`` (``headers.csv``) or ``marker`` (``_SUCCESS``)."""
    rows: int


class _ParquetAppender:
    def __init__(self, path: Path, schema: dict[str, Any], metadata: dict[str, str]) -> None:
        import pyarrow.parquet as pq

        self.path = path
        self.schema = schema
        self.rows = 0
        self._arrow = pl.DataFrame(schema=schema).to_arrow().schema.with_metadata(metadata)
        self._writer: Any = pq.ParquetWriter(path, self._arrow, compression="zstd")

    def write(self, frame: pl.DataFrame) -> None:
        if frame.height == 0:
            return
        table = frame.select(list(self.schema)).cast(pl.Schema(self.schema)).to_arrow()
        self._writer.write_table(table.cast(self._arrow), row_group_size=1 << 20)
        self.rows += frame.height

    def close(self) -> None:
        self._writer.close()


class CensusWriter:
    """Writes T1 and T2 of a release in the Census layout and the companion error tables.

    ``schemas`` maps ``t1``/``t2`` to the wide frames the engine produces (default
    :data:`privtab.tabulate.tables.T1_SCHEMA` / ``T2_SCHEMA``): :meth:`write` splits each
    frame into its Census columns (the text part file of the current run, and the Parquet
    copy with the ``parquet`` format) and the rest (the companion table, keyed by the
    Census key columns). The caller passes rows as they are to be published (suppressed,
    clamped, with sex marginals); nothing is dropped or changed here.
    """

    def __init__(
        self,
        directory: Path,
        *,
        formats: tuple[str, ...] = ("txt",),
        metadata: dict[str, str] | None = None,
        schemas: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        unknown = set(formats) - set(FORMATS)
        if unknown or not formats:
            raise ValueError(f"formats must be a non-empty subset of {FORMATS}, got {formats}")
        if schemas is None:
            from privtab.tabulate.tables import T1_SCHEMA, T2_SCHEMA

            schemas = {"t1": T1_SCHEMA, "t2": T2_SCHEMA}
        for table, schema in schemas.items():
            missing = [c for c in CENSUS_COLUMNS[table] if c not in schema]
            if missing:
                raise ValueError(f"{table} schema lacks the Census columns {missing}")
        self.directory = Path(directory)
        self.formats = tuple(formats)
        self.schemas = schemas
        meta = dict(metadata or {})
        self._text = "txt" in formats
        self._scope: str | None = None
        self._scopes: list[str] = []
        self._parts: dict[str, IO[bytes]] = {}
        self._part_rows: dict[tuple[str, str], int] = {}
        self._errors = {
            t: _ParquetAppender(self.directory / ERROR_FILES[t], error_schema(t, s), meta)
            for t, s in schemas.items()
        }
        self._copies = (
            {
                t: _ParquetAppender(self.directory / f"{t}.parquet", census_schema(t), meta)
                for t in schemas
            }
            if "parquet" in formats
            else {}
        )
        self.rows = dict.fromkeys(schemas, 0)
        self._closed = False
        if self._text:
            for t in schemas:
                (self.directory / t).mkdir(exist_ok=False)

    # -- writing --------------------------------------------------------------------------
    def start_run(self, scope: str) -> None:
        """Start the part files of a run (``US``, ``PR``): later rows go there, as
        production appends the PR run to the US run's folders."""
        if scope in self._scopes:
            raise ValueError(f"run {scope!r} was already written")
        self._close_parts()
        self._scope = scope
        self._scopes.append(scope)
        if not self._text:
            return
        for t in self.schemas:
            fh = (self.directory / t / part_file_name(scope)).open("wb")
            fh.write((census_header(t) + "\n").encode())
            self._parts[t] = fh
            self._part_rows[(t, scope)] = 0

    def write(self, t1: pl.DataFrame, t2: pl.DataFrame) -> None:
        """Append one chunk's published T1 and T2 rows (frames with the wide schemas)."""
        if self._scope is None:
            raise ValueError("start_run(scope) before writing rows")
        for table, frame in (("t1", t1), ("t2", t2)):
            if frame.height == 0:
                continue
            schema = self.schemas[table]
            missing = [c for c in schema if c not in frame.columns]
            if missing:
                raise ValueError(f"{table} frame lacks columns {missing}")
            frame = frame.select(list(schema)).cast(pl.Schema(schema))
            census = frame.select(CENSUS_COLUMNS[table])
            if self._text:
                census.write_csv(
                    self._parts[table], separator=SEPARATOR, include_header=False, null_value=""
                )
                self._part_rows[(table, self._scope)] += census.height
            if table in self._copies:
                self._copies[table].write(census)
            self._errors[table].write(frame)
            self.rows[table] += frame.height

    # -- finishing ------------------------------------------------------------------------
    def _close_parts(self) -> None:
        for fh in self._parts.values():
            fh.close()
        self._parts = {}

    def close(self) -> None:
        """Close every file; write ``headers.csv`` and ``_SUCCESS`` in the text folders."""
        if self._closed:
            return
        self._closed = True
        self._close_parts()
        for appender in (*self._errors.values(), *self._copies.values()):
            appender.close()
        if self._text:
            for t in self.schemas:
                (self.directory / t / HEADERS_FILE).write_text(census_header(t))
                (self.directory / t / SUCCESS_FILE).write_bytes(b"")

    @property
    def files(self) -> list[OutputFile]:
        """Every file written (after :meth:`close`), in a stable order."""
        out: list[OutputFile] = []
        for t in self.schemas:
            if self._text:
                for scope in self._scopes:
                    rows = self._part_rows[(t, scope)]
                    out.append(OutputFile(f"{t}/{part_file_name(scope)}", t, "census_text", rows))
                out.append(OutputFile(f"{t}/{HEADERS_FILE}", t, "header", 0))
                out.append(OutputFile(f"{t}/{SUCCESS_FILE}", t, "marker", 0))
            if t in self._copies:
                out.append(OutputFile(f"{t}.parquet", t, "census_parquet", self._copies[t].rows))
            out.append(OutputFile(ERROR_FILES[t], t, "error", self._errors[t].rows))
        return out

    def __enter__(self) -> CensusWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def outputs_manifest(directory: Path, files: list[OutputFile]) -> dict[str, Any]:
    """``release.json``'s ``outputs``: every file with its SHA-256, table, kind and rows,
    and the published rows of each table."""
    from privtab.data.inputs import sha256_file

    listed = {
        f.path: {
            "sha256": sha256_file(Path(directory) / f.path),
            "bytes": (Path(directory) / f.path).stat().st_size,
            "table": f.table,
            "kind": f.kind,
            "rows": f.rows,
        }
        for f in files
    }
    rows = {
        t: sum(f.rows for f in files if f.table == t and f.kind == "error") for t in ("t1", "t2")
    }
    return {
        "layout": "census",
        "files": listed,
        "t1_rows": rows["t1"],
        "t2_rows": rows["t2"],
    }


def part_files(directory: Path, table: str) -> list[Path]:
    """The data files of a Census text folder ``directory/table/`` in name order: every file
    but ``headers.csv`` and hidden or ``_``-prefixed ones (what a Spark reader of the folder
    reads as data)."""
    folder = Path(directory) / table
    return sorted(
        p
        for p in folder.iterdir()
        if p.is_file() and p.name != HEADERS_FILE and not p.name.startswith(("_", "."))
    )


def read_census_table(directory: Path, table: str) -> pl.DataFrame | None:
    """A Census table of a release, typed (strings and Int64 ``COUNT``): the text folder
    ``table/`` (every part file, each with its header) or else the Parquet copy
    ``table.parquet``; ``None`` if the release has neither. Raises ``ValueError`` for a
    file whose header is not the Census header."""
    d = Path(directory)
    schema = census_schema(table)
    if (d / table).is_dir():
        frames = []
        for part in part_files(d, table):
            with part.open("rb") as fh:
                head = fh.readline().decode("utf-8", errors="replace").rstrip("\r\n")
            if head != census_header(table):
                raise ValueError(f"{part}: header {head!r} is not {census_header(table)!r}")
            frames.append(
                pl.read_csv(part, separator=SEPARATOR, schema=schema, null_values=None)
                if part.stat().st_size > len(head) + 1
                else pl.DataFrame(schema=schema)
            )
        return pl.concat(frames) if frames else pl.DataFrame(schema=schema)
    if (d / f"{table}.parquet").exists():
        df = pl.read_parquet(d / f"{table}.parquet")
        return df.select(list(schema)).cast(pl.Schema(schema))
    return None
