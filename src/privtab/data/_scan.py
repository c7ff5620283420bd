"""Lazy scans of the large input files (person records, GRF-C), text or Parquet.

Both formats give the same lazy frame: every expected column as a string exactly as in the
file (Parquet values are cast to strings; a Parquet null in an optional column stands for
``Null``), plus ``ROW``, the 1-based data-row number (text: line ``ROW + 1``; Parquet: the
row's position in the file, from 1). Frames are scanned lazily and can be consumed in
batches (:func:`iter_batches`) so that memory stays bounded for 10⁸ rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

import polars as pl

from privtab.data._tables import ROW, SEPARATOR, check_header, read_header
from privtab.data.errors import Problem, ProblemLog

Format = Literal["txt", "parquet"]
EXTENSIONS: dict[str, Format] = {".txt": "txt", ".parquet": "parquet", ".pq": "parquet"}
_LINE_SEPARATOR = "\x1f"  # a byte that never occurs in Census text files


def find_input(directory: Path, stem: str, log: ProblemLog) -> Path | None:
    """``DIR/stem.txt`` or ``DIR/stem.parquet`` (exactly one of them must exist)."""
    found = [
        directory / f"{stem}{ext}"
        for ext in (".txt", ".parquet")
        if (directory / f"{stem}{ext}").exists()
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
    return found[0]


def format_of(path: Path) -> Format:
    fmt = EXTENSIONS.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(f"unknown input format {path.suffix!r} (use .txt or .parquet): {path}")
    return fmt


def open_table(
    path: Path,
    expected: Sequence[str],
    log: ProblemLog,
    *,
    extra_ok: bool = False,
    optional_null: Sequence[str] = (),
) -> pl.LazyFrame | None:
    """A lazy frame of ``ROW`` + the ``expected`` columns (strings), or ``None`` + problems.

    The header is checked first (text: exact columns in order, or a superset if
    ``extra_ok``; Parquet: the same set of columns in any order). Columns listed in
    ``optional_null`` have real nulls (Parquet) replaced by the text marker ``Null``.
    """
    fmt = format_of(path)
    name = str(path)
    if fmt == "txt":
        header = read_header(path, log)
        if header is None:
            return None
        if not check_header(name, header, expected, log, extra_ok=extra_ok):
            return None
        lf = pl.scan_csv(
            path,
            separator=SEPARATOR,
            has_header=True,
            schema=dict.fromkeys(header, pl.String),
            quote_char=None,
            empty_string_is_null=False,
            row_index_name=ROW,
            row_index_offset=1,
            encoding="utf8",
        )
    else:
        try:
            lf = pl.scan_parquet(path, row_index_name=ROW, row_index_offset=1, low_memory=True)
            names = lf.collect_schema().names()
        except Exception as exc:  # polars raises several types for non-Parquet files
            log.add(Problem(name, "unreadable", f"not a readable Parquet file: {exc}"))
            return None
        names = [n for n in names if n != ROW]
        if not check_header(name, names, expected, log, extra_ok=extra_ok, ordered=False):
            return None
    return lf.select(pl.col(ROW).cast(pl.UInt64), *_normalized(expected, optional_null))


def _normalized(expected: Sequence[str], optional_null: Sequence[str]) -> list[pl.Expr]:
    return [
        pl.col(c).cast(pl.String).fill_null("Null").alias(c)
        if c in optional_null
        else pl.col(c).cast(pl.String).alias(c)
        for c in expected
    ]


def table_batches(
    path: Path,
    lf: pl.LazyFrame,
    rows: int,
    expected: Sequence[str],
    optional_null: Sequence[str] = (),
) -> Iterator[pl.DataFrame]:
    """Batches of a table opened by :func:`open_table` (same columns), bounded in memory.

    Text files stream through polars; Parquet files are read row group by row group with
    pyarrow (polars' streaming Parquet reader prefetches ~1.5 GB at 10⁷ rows).
    """
    if format_of(path) == "txt":
        yield from iter_batches(lf, rows)
        return
    import pyarrow.parquet as pq

    exprs = _normalized(expected, optional_null)
    offset = 1
    with pq.ParquetFile(path) as pf:
        for rb in pf.iter_batches(batch_size=rows, columns=list(expected)):
            df = pl.from_arrow(rb)
            assert isinstance(df, pl.DataFrame)
            n = df.height
            yield df.select(pl.int_range(offset, offset + n, dtype=pl.UInt64).alias(ROW), *exprs)
            offset += n


def is_blank_row(columns: Sequence[str]) -> pl.Expr:
    """True for a blank text line (every field empty): such lines carry no data."""
    return pl.all_horizontal([pl.col(c) == "" for c in columns])


def iter_batches(lf: pl.LazyFrame, rows: int) -> Iterator[pl.DataFrame]:
    """Consume a lazy frame in batches of about ``rows`` rows (streaming, bounded memory)."""
    yield from lf.collect_batches(chunk_size=rows, maintain_order=True)


def diagnose_field_counts(path: Path, n_fields: int, log: ProblemLog, rows: int = 1 << 20) -> None:
    """Find the rows of a text file with a wrong number of fields (slow path, bad files only).

    Reads every line as one string and counts separators, vectorised, in batches.
    """
    name = str(path)
    lf = pl.scan_csv(
        path,
        separator=_LINE_SEPARATOR,
        has_header=False,
        skip_rows=1,
        schema={"_LINE": pl.String},
        quote_char=None,
        empty_string_is_null=False,
        row_index_name=ROW,
        row_index_offset=1,
    ).with_columns(
        (pl.col("_LINE").str.count_matches(SEPARATOR, literal=True) + 1).alias("_N"),
    )
    for batch in iter_batches(lf, rows):
        bad = batch.filter((pl.col("_N") != n_fields) & (pl.col("_LINE") != ""))
        if bad.height == 0:
            continue
        take = bad.head(max(1, log.room(name, "wrong_field_count")))
        log.add_many(
            bad.height,
            [
                Problem(
                    name,
                    "wrong_field_count",
                    f"expected {n_fields} fields separated by '|', found {n}",
                    row=int(r),
                    value=line if len(line) <= 200 else line[:200] + "...",
                )
                for r, n, line in take.select(ROW, "_N", "_LINE").iter_rows()
            ],
        )


__all__ = [
    "EXTENSIONS",
    "Format",
    "diagnose_field_counts",
    "find_input",
    "format_of",
    "is_blank_row",
    "iter_batches",
    "open_table",
    "table_batches",
]
