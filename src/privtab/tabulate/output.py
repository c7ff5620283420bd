"""Writing a release: T1/T2 in the Census layout (pipe-delimited and Parquet), incrementally.

Files in a release directory (written inside a temporary directory that is renamed onto the
target only when the whole release succeeded — :func:`privtab.atomic_directory`):

- ``t1.txt`` / ``t1.parquet`` — ``REGION_ID|REGION_TYPE|ITERATION_CODE|COUNT`` (the Census
  T1 columns) followed by the error of every row (:data:`privtab.tabulate.tables.T1_SCHEMA`);
- ``t2.txt`` / ``t2.parquet`` — ``REGION_ID|REGION_TYPE|ITERATION_CODE|AGESTART|AGEEND|SEX|
  COUNT`` followed by the error (:data:`privtab.tabulate.tables.T2_SCHEMA`);
- ``release.json`` and ``report.html``.

Levels are appended one at a time (text: one header; Parquet: one row group per level and
batch), so memory holds one level's output at most.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import IO, Any

import polars as pl

__all__ = ["FORMATS", "TableWriter"]

FORMATS = ("txt", "parquet")


class TableWriter:
    """Appends frames of one schema to ``<stem>.txt`` (pipe-delimited) and ``<stem>.parquet``."""

    def __init__(
        self,
        directory: Path,
        stem: str,
        schema: dict[str, Any],
        formats: tuple[str, ...] = FORMATS,
        metadata: dict[str, str] | None = None,
    ) -> None:
        import pyarrow.parquet as pq

        unknown = set(formats) - set(FORMATS)
        if unknown or not formats:
            raise ValueError(f"formats must be a non-empty subset of {FORMATS}, got {formats}")
        self.schema = schema
        self.rows = 0
        self.paths: list[Path] = []
        empty = pl.DataFrame(schema=schema)
        self._txt: IO[bytes] | None = None
        self._pq: Any = None
        if "txt" in formats:
            self.paths.append(directory / f"{stem}.txt")
            self._txt = self.paths[-1].open("wb")
            empty.write_csv(self._txt, separator="|", include_header=True)
        # key-value metadata on every Parquet file (e.g. privtab.private = "false")
        self._arrow_schema = empty.to_arrow().schema.with_metadata(metadata or {})
        if "parquet" in formats:
            self.paths.append(directory / f"{stem}.parquet")
            self._pq = pq.ParquetWriter(self.paths[-1], self._arrow_schema, compression="zstd")

    def write(self, frame: pl.DataFrame) -> None:
        if frame.height == 0:
            return
        frame = frame.select(list(self.schema)).cast(pl.Schema(self.schema))
        if self._txt is not None:
            frame.write_csv(self._txt, separator="|", include_header=False, null_value="")
        if self._pq is not None:
            self._pq.write_table(frame.to_arrow().cast(self._arrow_schema), row_group_size=1 << 20)
        self.rows += frame.height

    def close(self) -> None:
        if self._txt is not None:
            self._txt.close()
        if self._pq is not None:
            self._pq.close()

    def __enter__(self) -> TableWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
