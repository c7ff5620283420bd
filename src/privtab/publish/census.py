"""The Census part-file layout of a release's tables, and its writer (any product).

The 2020 production systems (SafeTab-P's ``safetab_p_analytics.py``, SafeTab-H's
``safetab_h_analytics.py``) wrote every table with Spark's ``write.csv(sep="|",
header=True)`` after ``repartition(1)``, a second run (Puerto Rico) appending to the first's
folder. A product declares its tables (:class:`CensusTable`: name, folder, Census columns,
companion file, whether ``headers.csv`` is written) and this module writes them:

- ``<folder>/`` — ``part-00000-us-c000.csv`` (then ``part-00000-pr-c000.csv`` when a second
  run is written): pipe-delimited, a header line, exactly the table's Census columns; an
  empty ``_SUCCESS``; and — for tables declared so (SafeTab-P's ``t1/``, ``t2/``) —
  ``headers.csv`` (the header, no newline);
- the **companion table** (``<name>-error.parquet`` by default; several tables may share
  one): one row per published row, keyed by its Census key columns (every Census column
  but ``COUNT``), with what privtab knows about that row's noise — every column of the
  product's wide frame that is not a Census column. All of it is public (the plan) or noisy
  output, so publishing it costs nothing;
- ``<name>.parquet`` — a Parquet copy of the table (Census columns only), only with the
  ``parquet`` format.

Every Parquet file carries the release's key-value metadata
(:func:`privtab.release.marking.parquet_metadata`). Frames are appended chunk by chunk, so
memory holds one chunk's output at most.

Use::

    tables = [CensusTable("t1", T1_COLUMNS), ...]
    with CensusWriter(tmp, tables, schemas, formats=("txt",), metadata=meta) as w:
        w.start_run("US")
        for part in chunks:                  # wide frames, one per table
            w.write({"t1": part.t1, ...})    # rows as published
        w.start_run("PR")
        ...
    outputs = outputs_manifest(tmp, w.files)   # for release.json (SHA-256 of each file)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import polars as pl

__all__ = [
    "FORMATS",
    "HEADERS_FILE",
    "SEPARATOR",
    "SUCCESS_FILE",
    "CensusTable",
    "CensusWriter",
    "OutputFile",
    "census_schema",
    "error_schema",
    "outputs_manifest",
    "part_file_name",
    "part_files",
    "read_census_table",
]

FORMATS = ("txt", "parquet")
"""``txt``: the Census text folders; ``parquet``: a Parquet copy of each table (Census
columns). The companion error tables are always written."""
SEPARATOR = "|"
HEADERS_FILE = "headers.csv"
SUCCESS_FILE = "_SUCCESS"
COUNT = "COUNT"


@dataclass(frozen=True)
class CensusTable:
    """One published table: its ``name`` (the key of its frames, its Parquet copy
    ``<name>.parquet`` and its rows in ``release.json``), its ``folder`` of part files
    (default: the name), its Census ``columns`` in Census order (the last is ``COUNT``), its
    companion ``error_file`` (default ``<name>-error.parquet``; tables sharing one must
    share their key columns) and whether its folder holds ``headers.csv``."""

    name: str
    columns: tuple[str, ...]
    folder: str = ""
    error_file: str = ""
    headers_file: bool = True

    def __post_init__(self) -> None:
        if not self.columns or self.columns[-1] != COUNT:
            raise ValueError(f"table {self.name}: the last Census column must be {COUNT}")
        if not self.folder:
            object.__setattr__(self, "folder", self.name)
        if not self.error_file:
            object.__setattr__(self, "error_file", f"{self.name}-error.parquet")

    @property
    def header(self) -> str:
        """The header line (no newline), e.g. ``REGION_ID|…|COUNT``."""
        return SEPARATOR.join(self.columns)

    @property
    def keys(self) -> tuple[str, ...]:
        """The key columns of a row: every Census column but ``COUNT``."""
        return self.columns[:-1]

    @property
    def copy_file(self) -> str:
        return f"{self.name}.parquet"

    @property
    def error_group(self) -> str:
        """The name the companion file is listed under in ``release.json``: the file's
        stem without ``-error`` (``t1``, ``t3``)."""
        return self.error_file.removesuffix(".parquet").removesuffix("-error")


def part_file_name(scope: str) -> str:
    """The part file of one run (Spark's ``part-00000-…-c000.csv`` shape, with the run's
    name in place of Spark's random job id)."""
    return f"part-00000-{scope.lower()}-c000.csv"


def census_schema(table: CensusTable) -> dict[str, Any]:
    """Polars schema of a Census table: strings and an Int64 ``COUNT``."""
    return {c: (pl.Int64 if c == COUNT else pl.String) for c in table.columns}


def error_schema(table: CensusTable, full: Mapping[str, Any]) -> dict[str, Any]:
    """The companion table's schema: the key columns, then every column of ``full`` (the
    product's wide schema) that is not a Census column."""
    keys = {c: full[c] for c in table.keys}
    return {**keys, **{c: t for c, t in full.items() if c not in table.columns}}


@dataclass(frozen=True)
class OutputFile:
    """One file of the release's tables: its path relative to the release folder, the table
    it belongs to (for a companion file shared by several tables: their
    :attr:`CensusTable.error_group`), its kind and its data rows."""

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
    """Writes a product's tables in the Census layout and their companion error tables.

    ``schemas`` maps each table's name to the wide frames the product produces:
    :meth:`write` splits each frame into its Census columns (the text part file of the
    current run, and the Parquet copy with the ``parquet`` format) and the rest (the
    companion table, keyed by the Census key columns). The caller passes rows as they are
    to be published; nothing is dropped or changed here.
    """

    def __init__(
        self,
        directory: Path,
        tables: Sequence[CensusTable],
        schemas: Mapping[str, Mapping[str, Any]],
        *,
        formats: tuple[str, ...] = ("txt",),
        metadata: dict[str, str] | None = None,
    ) -> None:
        unknown = set(formats) - set(FORMATS)
        if unknown or not formats:
            raise ValueError(f"formats must be a non-empty subset of {FORMATS}, got {formats}")
        self.tables = {t.name: t for t in tables}
        if set(schemas) != set(self.tables):
            raise ValueError(f"schemas for {sorted(schemas)}, tables {sorted(self.tables)}")
        for t in tables:
            missing = [c for c in t.columns if c not in schemas[t.name]]
            if missing:
                raise ValueError(f"{t.name} schema lacks the Census columns {missing}")
        self.directory = Path(directory)
        self.formats = tuple(formats)
        self.schemas = {n: dict(s) for n, s in schemas.items()}
        meta = dict(metadata or {})
        self._text = "txt" in formats
        self._scope: str | None = None
        self._scopes: list[str] = []
        self._parts: dict[str, IO[bytes]] = {}
        self._part_rows: dict[tuple[str, str], int] = {}
        self._errors: dict[str, _ParquetAppender] = {}
        for t in tables:
            if t.error_file not in self._errors:
                path = self.directory / t.error_file
                schema = error_schema(t, self.schemas[t.name])
                self._errors[t.error_file] = _ParquetAppender(path, schema, meta)
        self._copies = (
            {
                t.name: _ParquetAppender(self.directory / t.copy_file, census_schema(t), meta)
                for t in tables
            }
            if "parquet" in formats
            else {}
        )
        self.rows = dict.fromkeys(self.tables, 0)
        self._closed = False
        if self._text:
            for t in tables:
                (self.directory / t.folder).mkdir(parents=True, exist_ok=False)

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
        for t in self.tables.values():
            fh = (self.directory / t.folder / part_file_name(scope)).open("wb")
            fh.write((t.header + "\n").encode())
            self._parts[t.name] = fh
            self._part_rows[(t.name, scope)] = 0

    def write(self, frames: Mapping[str, pl.DataFrame]) -> None:
        """Append one chunk's published rows: a wide frame per table (tables absent from
        ``frames`` get no rows)."""
        if self._scope is None:
            raise ValueError("start_run(scope) before writing rows")
        unknown = set(frames) - set(self.tables)
        if unknown:
            raise ValueError(f"frames for unknown tables {sorted(unknown)}")
        for name, frame in frames.items():
            if frame.height == 0:
                continue
            t = self.tables[name]
            schema = self.schemas[name]
            missing = [c for c in schema if c not in frame.columns]
            if missing:
                raise ValueError(f"{name} frame lacks columns {missing}")
            frame = frame.select(list(schema)).cast(pl.Schema(schema))
            census = frame.select(t.columns)
            if self._text:
                census.write_csv(
                    self._parts[name], separator=SEPARATOR, include_header=False, null_value=""
                )
                self._part_rows[(name, self._scope)] += census.height
            if name in self._copies:
                self._copies[name].write(census)
            self._errors[t.error_file].write(frame)
            self.rows[name] += frame.height

    # -- finishing ------------------------------------------------------------------------
    def _close_parts(self) -> None:
        for fh in self._parts.values():
            fh.close()
        self._parts = {}

    def close(self) -> None:
        """Close every file; write ``_SUCCESS`` (and ``headers.csv`` where declared) in
        the text folders."""
        if self._closed:
            return
        self._closed = True
        self._close_parts()
        for appender in (*self._errors.values(), *self._copies.values()):
            appender.close()
        if self._text:
            for t in self.tables.values():
                if t.headers_file:
                    (self.directory / t.folder / HEADERS_FILE).write_text(t.header)
                (self.directory / t.folder / SUCCESS_FILE).write_bytes(b"")

    @property
    def files(self) -> list[OutputFile]:
        """Every file written (after :meth:`close`), in a stable order."""
        out: list[OutputFile] = []
        listed: set[str] = set()
        for t in self.tables.values():
            if self._text:
                for scope in self._scopes:
                    rows = self._part_rows[(t.name, scope)]
                    path = f"{t.folder}/{part_file_name(scope)}"
                    out.append(OutputFile(path, t.name, "census_text", rows))
                if t.headers_file:
                    out.append(OutputFile(f"{t.folder}/{HEADERS_FILE}", t.name, "header", 0))
                out.append(OutputFile(f"{t.folder}/{SUCCESS_FILE}", t.name, "marker", 0))
            if t.name in self._copies:
                copy = self._copies[t.name]
                out.append(OutputFile(t.copy_file, t.name, "census_parquet", copy.rows))
            if t.error_file not in listed and self._shares_last(t):
                listed.add(t.error_file)
                rows = self._errors[t.error_file].rows
                out.append(OutputFile(t.error_file, t.error_group, "error", rows))
        return out

    def _shares_last(self, table: CensusTable) -> bool:
        """Whether ``table`` is the last declared table of its companion file (the file
        is listed after the last of the tables it holds)."""
        sharing = [t for t in self.tables.values() if t.error_file == table.error_file]
        return sharing[-1].name == table.name

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
    and the published rows of each companion group (``t1_rows``, … — one row of a
    companion table per published row)."""
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
    groups = list(dict.fromkeys(f.table for f in files if f.kind == "error"))
    rows = {
        f"{g}_rows": sum(f.rows for f in files if f.table == g and f.kind == "error")
        for g in groups
    }
    return {"layout": "census", "files": listed, **rows}


def part_files(directory: Path, folder: str) -> list[Path]:
    """The data files of a Census text folder ``directory/folder/`` in name order: every
    file but ``headers.csv`` and hidden or ``_``-prefixed ones (what a Spark reader of the
    folder reads as data)."""
    path = Path(directory) / folder
    return sorted(
        p
        for p in path.iterdir()
        if p.is_file() and p.name != HEADERS_FILE and not p.name.startswith(("_", "."))
    )


def read_census_table(directory: Path, table: CensusTable) -> pl.DataFrame | None:
    """A Census table of a release, typed (strings and Int64 ``COUNT``): the text folder
    (every part file, each with its header) or else the Parquet copy; ``None`` if the
    release has neither. Raises ``ValueError`` for a file whose header is not the table's."""
    d = Path(directory)
    schema = census_schema(table)
    if (d / table.folder).is_dir():
        frames = []
        for part in part_files(d, table.folder):
            with part.open("rb") as fh:
                head = fh.readline().decode("utf-8", errors="replace").rstrip("\r\n")
            if head != table.header:
                raise ValueError(f"{part}: header {head!r} is not {table.header!r}")
            frames.append(
                pl.read_csv(part, separator=SEPARATOR, schema=schema, null_values=None)
                if part.stat().st_size > len(head) + 1
                else pl.DataFrame(schema=schema)
            )
        return pl.concat(frames) if frames else pl.DataFrame(schema=schema)
    if (d / table.copy_file).exists():
        df = pl.read_parquet(d / table.copy_file)
        return df.select(list(schema)).cast(pl.Schema(schema))
    return None
