"""Lazy scans of the large input files (person records, GRF-C), text or Parquet.

Both formats give the same lazy frame: every expected column as a string exactly as in the
file (Parquet values are cast to strings; a Parquet null in an optional column stands for
``Null``), plus ``ROW`` (text: the 1-based line number in the file, the header being line
1; Parquet: the row's 1-based position) and ``_NF``, the number of ``|``-separated fields
of the line (Parquet: the number of columns). Frames are scanned lazily and can be consumed in
batches (:func:`iter_batches`) so that memory stays bounded for 10⁸ rows.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import polars as pl
from numpy.typing import NDArray

from privtab.data._tables import ROW, SEPARATOR, check_header, check_regular_file, read_header
from privtab.data.errors import Problem, ProblemLog
from privtab.data.spec import FIELDS

if TYPE_CHECKING:
    import pyarrow as pa

Format = Literal["txt", "parquet"]
EXTENSIONS: dict[str, Format] = {
    ".txt": "txt",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "txt",  # the pipe-delimited part files of a Census release folder (a T1)
}
_LINE_SEPARATOR = "\x1f"  # a byte that never occurs in Census text files
_LINE = "_LINE"


def find_input(directory: Path, stem: str, log: ProblemLog) -> Path | None:
    """``DIR/stem.txt`` or ``DIR/stem.parquet`` (exactly one of them must exist, and be a
    regular file: :func:`privtab.data._tables.check_regular_file`)."""
    found = [
        directory / f"{stem}{ext}"
        for ext in (".txt", ".parquet")
        if os.path.lexists(directory / f"{stem}{ext}")
    ]
    if not found:
        log.add(
            Problem(
                str(directory / f"{stem}.txt"),
                "missing_file",
                f"no {stem}.txt or {stem}.parquet in {directory}",
            )
        )
        return None
    if len(found) > 1:
        log.add(
            Problem(
                str(directory),
                "ambiguous_input",
                f"both {stem}.txt and {stem}.parquet exist; keep only one",
            )
        )
        return None
    return found[0] if check_regular_file(found[0], log) else None


def format_of(path: Path) -> Format:
    fmt = EXTENSIONS.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(f"unknown input format {path.suffix!r} (use .txt or .parquet): {path}")
    return fmt


@dataclass(frozen=True)
class OpenTable:
    """A lazily opened table: ``frame`` (``ROW``, :data:`FIELDS`, the expected columns as
    strings) and the file's ``header`` (text: every column of the first line, in order)."""

    path: Path
    frame: pl.LazyFrame
    header: tuple[str, ...]
    expected: tuple[str, ...]
    optional_null: tuple[str, ...]

    def batches(self, rows: int, columns: Sequence[str] | None = None) -> Iterator[pl.DataFrame]:
        """Batches of about ``rows`` rows, bounded in memory (see :func:`table_batches`)."""
        return table_batches(self, rows, columns)

    def coded_batches(self, rows: int) -> Iterator[CodedBatch]:
        """The same batches, dictionary-encoded (see :func:`coded_batches`)."""
        return coded_batches(self, rows)

    def part_batches(self, part: FilePart, rows: int) -> tuple[int, Iterator[CodedBatch]]:
        """The rows of one :class:`FilePart` as dictionary-encoded batches, numbered from 1
        within the part (``ROW``), and the number of rows (text: lines) the part holds."""
        return part_batches(self, part, rows)


@dataclass(frozen=True)
class FilePart:
    """A piece of a table for one reader (a Spark task): Parquet row groups ``[start,
    end)``, or the text lines that start at bytes ``[start, end)`` of the file. Its rows are
    numbered from 1 within the part; the file's numbers follow by adding the rows of the
    parts before it (and the header line of a text file)."""

    start: int
    end: int


def table_parts(path: Path, parts: int) -> list[FilePart]:
    """At most ``parts`` parts of a table of about equal size, in file order: runs of whole
    Parquet row groups (of about equal rows), or text byte ranges after the header line."""
    n = max(1, parts)
    if format_of(path) == "parquet":
        import pyarrow.parquet as pq

        with pq.ParquetFile(path) as pf:
            sizes = [pf.metadata.row_group(i).num_rows for i in range(pf.num_row_groups)]
        ends = np.cumsum(sizes)
        total = int(ends[-1]) if sizes else 0
        cuts = sorted({int(np.searchsorted(ends, total * k / n, side="left")) + 1
                       for k in range(1, n)} | {len(sizes)})  # fmt: skip
        firsts = [0, *cuts[:-1]]
        return [FilePart(a, b) for a, b in zip(firsts, cuts, strict=True) if b > a]
    with path.open("rb") as fh:
        start = len(fh.readline())
    size = path.stat().st_size
    step = max(1, -(-(size - start) // n))
    return [FilePart(a, min(a + step, size)) for a in range(start, size, step)]


def _part_bytes(path: Path, part: FilePart) -> bytes:
    """The text lines that start at bytes ``[start, end)`` (the last one read to its end)."""
    with path.open("rb") as fh:
        fh.seek(max(part.start - 1, 0))
        if part.start > 0 and fh.read(1) != b"\n":
            fh.readline()  # a line that started before the part: the previous part's
        at = fh.tell()
        if at >= part.end:
            return b""
        data = fh.read(part.end - at)
        if not data.endswith(b"\n"):
            data += fh.readline()
        return data


def part_batches(table: OpenTable, part: FilePart, rows: int) -> tuple[int, Iterator[CodedBatch]]:
    """See :meth:`OpenTable.part_batches`."""
    if format_of(table.path) == "parquet":
        import pyarrow.parquet as pq

        with pq.ParquetFile(table.path) as pf:
            groups = range(part.start, min(part.end, pf.num_row_groups))
            held = sum(pf.metadata.row_group(i).num_rows for i in groups)
        return held, _parquet_coded(table, rows, groups)
    data = _part_bytes(table.path, part)
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    if not lines:
        return 0, iter(())
    raw = pl.read_csv(
        io.BytesIO(data),
        separator=_LINE_SEPARATOR,
        has_header=False,
        schema={_LINE: pl.String},
        quote_char=None,
        empty_string_is_null=False,
        row_index_name=ROW,
        row_index_offset=1,
        encoding="utf8-lossy",
    )
    frame = _line_fields(raw.lazy(), table.header, table.expected).collect()
    return lines, _text_coded(table, (frame.slice(i, rows) for i in range(0, frame.height, rows)))


@dataclass(frozen=True)
class Coded:
    """One column of a batch, dictionary-encoded: row ``i`` holds ``values[codes[i]]``.

    ``values`` are the column's distinct strings exactly as :func:`table_batches` would
    show them (nulls included), so a check evaluated once per value and gathered by
    ``codes`` gives, row by row, what it gives on the plain batch.
    """

    codes: NDArray[np.int32]
    values: pl.Series
    nulls: bool = True
    """Whether a row may hold the null value (the last of ``values``); ``False`` when none
    does, so that a check of the other values alone covers every row."""


@dataclass(frozen=True)
class CodedBatch:
    """A batch of a table as ``ROW`` and :data:`FIELDS` arrays plus one :class:`Coded` per
    expected column (in order)."""

    rows: NDArray[np.uint64]
    fields: NDArray[np.uint32]
    columns: dict[str, Coded]

    @property
    def height(self) -> int:
        return int(self.rows.size)

    def frame(self, keep: NDArray[np.bool_]) -> pl.DataFrame:
        """The plain batch (``ROW``, :data:`FIELDS`, the columns as strings) of the rows
        where ``keep`` holds — what :func:`table_batches` yields, restricted to them."""
        picked = {c: col.values.gather(col.codes[keep]).alias(c) for c, col in self.columns.items()}
        return pl.DataFrame(
            [
                pl.Series(ROW, self.rows[keep], pl.UInt64),
                pl.Series(FIELDS, self.fields[keep], pl.UInt32),
                *picked.values(),
            ]
        )


def open_table(
    path: Path,
    expected: Sequence[str],
    log: ProblemLog,
    *,
    extra_ok: bool = False,
    optional_null: Sequence[str] = (),
) -> OpenTable | None:
    """Open a table lazily, or return ``None`` and add the problems to ``log``.

    The header is checked first (text: exact columns in order, or a superset if
    ``extra_ok``; Parquet: the same set of columns in any order). Text lines are read
    whole, decoded leniently (invalid UTF-8 becomes U+FFFD, reported by the row checks) and
    split on ``|``, so that every line keeps its number and its field count; blank lines
    are dropped. Columns listed in ``optional_null`` have real nulls (Parquet) replaced by
    the text marker ``Null``.
    """
    fmt = format_of(path)
    name = str(path)
    if fmt == "txt":
        found = read_header(path, log)
        if found is None:
            return None
        if not check_header(name, found, expected, log, extra_ok=extra_ok):
            return None
        lines = pl.scan_csv(
            path,
            separator=_LINE_SEPARATOR,
            has_header=False,
            skip_rows=1,
            schema={_LINE: pl.String},
            quote_char=None,
            empty_string_is_null=False,
            row_index_name=ROW,
            row_index_offset=2,  # the header is line 1
            encoding="utf8-lossy",
        )
        header = tuple(found)
        lf = _line_fields(lines, header, expected)
    else:
        if not check_regular_file(path, log):
            return None
        try:
            lf = pl.scan_parquet(path, row_index_name=ROW, row_index_offset=1, low_memory=True)
            names = lf.collect_schema().names()
        except Exception as exc:  # polars raises several types for non-Parquet files
            log.add(Problem(name, "unreadable", f"not a readable Parquet file: {exc}"))
            return None
        names = [n for n in names if n != ROW]
        if not check_header(name, names, expected, log, extra_ok=extra_ok, ordered=False):
            return None
        if not _check_parquet_types(name, lf.collect_schema(), expected, log):
            return None
        header = tuple(expected)
        lf = lf.select(
            pl.col(ROW).cast(pl.UInt64),
            pl.lit(len(expected), pl.UInt32).alias(FIELDS),
            *_normalized(expected, optional_null),
        )
    return OpenTable(path, lf, header, tuple(expected), tuple(optional_null))


def _check_parquet_types(
    name: str, schema: pl.Schema, expected: Sequence[str], log: ProblemLog
) -> bool:
    """Every expected column of a Parquet file holds single values that can be read as
    text (strings, integers, decimals, booleans, dictionaries of them); a list, array,
    struct or other nested column is reported by name and type (``wrong_type``)."""
    ok = True
    for c in expected:
        dtype = schema[c]
        if dtype.is_nested() or dtype == pl.Object:
            log.add(
                Problem(
                    name,
                    "wrong_type",
                    f"the column holds {dtype} values; each value must be a single string "
                    "or number (a nested column cannot be read as the Census field)",
                    column=c,
                    value=str(dtype),
                )
            )
            ok = False
    return ok


def _line_fields(
    lines: pl.LazyFrame, header: Sequence[str], expected: Sequence[str]
) -> pl.LazyFrame:
    """Text lines (``ROW``, the whole line) → ``ROW``, :data:`FIELDS` and the expected
    columns (by their position in ``header``); blank lines dropped."""
    index = {c: list(header).index(c) for c in expected}
    parts = pl.col(_LINE).str.split(SEPARATOR)
    return lines.filter(pl.col(_LINE) != "").select(
        pl.col(ROW).cast(pl.UInt64),
        parts.list.len().cast(pl.UInt32).alias(FIELDS),
        *(parts.list.get(index[c], null_on_oob=True).alias(c) for c in expected),
    )


def _normalized(expected: Sequence[str], optional_null: Sequence[str]) -> list[pl.Expr]:
    return [
        pl.col(c).cast(pl.String).fill_null("Null").alias(c)
        if c in optional_null
        else pl.col(c).cast(pl.String).alias(c)
        for c in expected
    ]


def table_batches(
    table: OpenTable, rows: int, columns: Sequence[str] | None = None
) -> Iterator[pl.DataFrame]:
    """Batches of a table opened by :func:`open_table` (``ROW``, :data:`FIELDS` and the
    expected columns, or only ``columns`` of them), bounded in memory.

    Text files stream through polars; Parquet files are read row group by row group (a
    slice of the file that polars' own reader reads alone: the memory of one row group,
    whatever the file's size; polars' streaming Parquet reader prefetches ~1.5 GB at 10⁷
    rows, pyarrow's batches cost 3-4× the CPU).
    """
    path = table.path
    wanted = table.expected if columns is None else tuple(columns)
    if format_of(path) == "txt":
        frame = table.frame if columns is None else table.frame.select(ROW, FIELDS, *wanted)
        yield from iter_batches(frame, rows)
        return
    import pyarrow.parquet as pq

    exprs = _normalized(wanted, table.optional_null)
    n_fields = pl.lit(len(table.expected), pl.UInt32).alias(FIELDS)
    with pq.ParquetFile(path) as pf:
        sizes = [pf.metadata.row_group(i).num_rows for i in range(pf.metadata.num_row_groups)]
    scan = pl.scan_parquet(path, low_memory=True).select(wanted)
    offset = 0
    for size in sizes:
        group = scan.slice(offset, size).collect()
        for start in range(0, size, max(rows, 1)):
            df = group.slice(start, rows)
            first = offset + start + 1  # rows are numbered from 1
            rows_ = pl.int_range(first, first + df.height, dtype=pl.UInt64).alias(ROW)
            yield df.select(rows_, n_fields, *exprs)
        offset += size


def coded_batches(table: OpenTable, rows: int) -> Iterator[CodedBatch]:
    """The batches of :func:`table_batches`, each column dictionary-encoded.

    Parquet columns are read as dictionaries (no per-row string is built: a typical person
    file stores them so); text batches are encoded with pyarrow. Checks then run once per
    distinct value of a column instead of once per row.
    """
    if format_of(table.path) == "txt":
        return _text_coded(table, iter_batches(table.frame, rows))
    return _parquet_coded(table, rows, None)


def _text_coded(table: OpenTable, frames: Iterator[pl.DataFrame]) -> Iterator[CodedBatch]:
    seen: dict[str, tuple[pa.Array, pl.Series]] = {}
    for df in frames:
        cols = {c: _coded(df[c].to_arrow(), c, (), seen) for c in table.expected}
        yield CodedBatch(df[ROW].to_numpy(), df[FIELDS].to_numpy(), cols)


def _parquet_coded(
    table: OpenTable, rows: int, row_groups: Sequence[int] | None
) -> Iterator[CodedBatch]:
    """Parquet batches read as dictionaries (every row group, or ``row_groups``: their rows
    numbered from 1)."""
    import pyarrow.parquet as pq

    seen: dict[str, tuple[pa.Array, pl.Series]] = {}
    offset = 1
    expected = list(table.expected)
    with pq.ParquetFile(table.path, read_dictionary=expected) as pf:
        for rb in pf.iter_batches(batch_size=rows, columns=expected, row_groups=row_groups):
            n = rb.num_rows
            cols = {c: _coded(rb.column(c), c, table.optional_null, seen) for c in expected}
            rows_ = np.arange(offset, offset + n, dtype=np.uint64)
            yield CodedBatch(rows_, np.full(n, len(expected), np.uint32), cols)
            offset += n


def _coded(
    arr: pa.Array | pa.ChunkedArray,
    column: str,
    optional_null: Sequence[str],
    seen: dict[str, tuple[pa.Array, pl.Series]],
) -> Coded:
    """Dictionary-encode one column (nulls → one extra value, normalised as in
    :func:`table_batches`). ``seen``: the last dictionary of each column and its values,
    reused (the same object) while the dictionary does not change."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not pa.types.is_dictionary(arr.type):
        arr = pc.dictionary_encode(arr)
    dictionary = arr.dictionary
    idx = arr.indices
    nulls = idx.null_count > 0
    if nulls:
        idx = pc.fill_null(idx, pa.scalar(len(dictionary), idx.type))
    codes = np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.int32)
    last = seen.get(column)
    if last is not None and last[0].equals(dictionary):
        return Coded(codes, last[1], nulls)
    values = pl.from_arrow(dictionary)
    assert isinstance(values, pl.Series)
    values = values.append(pl.Series([None], dtype=values.dtype))
    normal = pl.DataFrame({column: values}).select(_normalized([column], optional_null))
    seen[column] = (dictionary, normal.to_series())
    return Coded(codes, seen[column][1], nulls)


def has_rows(path: Path) -> bool:
    """Whether a table has at least one data row (text: a non-blank line after the header;
    Parquet: its metadata). Cheap: reads at most until the first such line."""
    if format_of(path) == "parquet":
        import pyarrow.parquet as pq

        with pq.ParquetFile(path) as pf:
            return bool(pf.metadata.num_rows)
    with path.open("rb") as fh:
        fh.readline()
        for line in fh:
            if line.strip(b"\r\n") and line.strip(b"\r\n").strip(b"|"):
                return True
    return False


def is_blank_row(columns: Sequence[str]) -> pl.Expr:
    """True for a blank line (no field holds anything, e.g. ``||``): it carries no data."""
    return pl.all_horizontal([pl.col(c).fill_null("") == "" for c in columns])


def iter_batches(lf: pl.LazyFrame, rows: int) -> Iterator[pl.DataFrame]:
    """Consume a lazy frame in batches of about ``rows`` rows (streaming, bounded memory)."""
    yield from lf.collect_batches(chunk_size=rows, maintain_order=True)


def diagnose_unreadable(path: Path, error: Exception, log: ProblemLog) -> None:
    """Report why polars could not read a text file (slow path, bad files only).

    The line reader fails only on the unit-separator byte 0x1F (its own field separator,
    never in Census files): the lines holding it are named; anything else is reported with
    polars' message.
    """
    name = str(path)
    found = 0
    with path.open("rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            if _LINE_SEPARATOR.encode() in line:
                found += 1
                if found <= log.room(name, "unreadable"):
                    log.add(
                        Problem(
                            name,
                            "unreadable",
                            "the line holds the control character 0x1F (not allowed)",
                            row=lineno,
                        )
                    )
    if not found:
        log.add(Problem(name, "unreadable", f"the file cannot be read: {error}"))


__all__ = [
    "EXTENSIONS",
    "FIELDS",
    "Coded",
    "CodedBatch",
    "FilePart",
    "Format",
    "OpenTable",
    "coded_batches",
    "diagnose_unreadable",
    "find_input",
    "format_of",
    "has_rows",
    "is_blank_row",
    "iter_batches",
    "open_table",
    "part_batches",
    "table_batches",
    "table_parts",
]
