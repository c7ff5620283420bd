"""Convert person-records / GRF-C files between the Census text format and Parquet.

The conversion is lossless for the SafeTab columns: every value is kept as the exact string
of the file (Parquet columns are strings; an absent race code — ``Null`` in text — is a
Parquet null). Extra GRF-C columns (the real file has dozens) are not carried over. It
streams (polars sink), so 10⁸-row files convert in bounded memory, and it is atomic: the
output appears under its name only once complete.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from privtab.atomic import atomic_file
from privtab.data._scan import format_of, open_table
from privtab.data._tables import NULL, ROW, SEPARATOR
from privtab.data.errors import checked
from privtab.data.geography import GRFC_COLUMNS
from privtab.data.persons import PERSON_COLUMNS, RACE_COLUMNS
from privtab.data.spec import FIELDS


def convert_file(src: str | Path, dst: str | Path, *, overwrite: bool = False) -> Path:
    """Convert a person-records or GRF-C file (kind from its header) to ``dst``'s format.

    Only the header is checked here (``privtab validate`` checks the values).
    """
    src, dst = Path(src), Path(dst)
    out_fmt = format_of(dst)
    if dst.exists() and not overwrite:
        raise FileExistsError(f"{dst} exists (pass overwrite=True to replace it)")
    columns = _columns_of(src)
    table = checked(
        lambda log: open_table(
            src, columns, log, extra_ok=columns is GRFC_COLUMNS, optional_null=()
        )
    )
    lf = table.frame.drop(ROW, FIELDS)
    race = [c for c in RACE_COLUMNS if c in columns]
    with atomic_file(dst) as tmp:
        if out_fmt == "parquet":
            lf = lf.with_columns(
                pl.when(pl.col(c) == NULL).then(None).otherwise(pl.col(c)).alias(c) for c in race
            )
            lf.sink_parquet(tmp, compression="zstd")
        else:
            lf = lf.with_columns(pl.col(c).fill_null(NULL) for c in race)
            lf.sink_csv(tmp, separator=SEPARATOR, quote_style="never")
    return dst


def _columns_of(src: Path) -> tuple[str, ...]:
    if format_of(src) == "txt":
        with src.open("rb") as fh:
            names = fh.readline().decode("utf-8", "replace").rstrip("\r\n").split(SEPARATOR)
    else:
        names = pl.scan_parquet(src).collect_schema().names()
    return PERSON_COLUMNS if "QAGE" in names else GRFC_COLUMNS


__all__ = ["convert_file"]
