"""SafeTab-P's tables in the Census layout: T1 and T2 (the writer is :mod:`privtab.publish.census`).

As the 2020 production code wrote them (``safetab_p_analytics.py``):

- ``t1/`` — ``part-00000-us-c000.csv`` (then ``part-00000-pr-c000.csv``), a header line,
  exactly ``REGION_ID|REGION_TYPE|ITERATION_CODE|COUNT``; ``headers.csv`` (the header, no
  newline) and an empty ``_SUCCESS``;
- ``t2/`` — the same with ``REGION_ID|REGION_TYPE|ITERATION_CODE|AGESTART|AGEEND|SEX|COUNT``
  (sex marginals are rows with ``AGESTART = AGEEND = *``);
- ``t1-error.parquet`` / ``t2-error.parquet`` — the companion tables: every column of
  :data:`privtab.tabulate.tables.T1_SCHEMA` / ``T2_SCHEMA`` but ``COUNT``, keyed by the
  Census key columns (``NOISE``, ``NOISE_SCALE``, ``VARIANCE``, ``MOE95``; in T1
  ``STAT_LEVEL``, ``COUNT_SOURCE``, ``STAGE1_COUNT`` and its law), read back by
  :func:`privtab.analysis.safetab.load_release`;
- ``t1.parquet`` / ``t2.parquet`` — Parquet copies (Census columns), with the ``parquet``
  format.

Use::

    with CensusWriter(tmp, formats=("txt",), metadata=parquet_metadata(private)) as w:
        w.start_run("US")
        for part in chunks:            # frames with T1_SCHEMA / T2_SCHEMA columns
            w.write({"t1": part.t1, "t2": part.t2})  # suppressed, clamped, with marginals
    outputs = outputs_manifest(tmp, w.files)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from privtab.publish import census
from privtab.publish.census import (
    FORMATS,
    HEADERS_FILE,
    SEPARATOR,
    SUCCESS_FILE,
    CensusTable,
    OutputFile,
    outputs_manifest,
    part_file_name,
)

__all__ = [
    "CENSUS_COLUMNS",
    "ERROR_FILES",
    "FORMATS",
    "HEADERS_FILE",
    "SEPARATOR",
    "SUCCESS_FILE",
    "TABLES",
    "CensusWriter",
    "OutputFile",
    "census_header",
    "census_schema",
    "error_schema",
    "outputs_manifest",
    "part_file_name",
    "part_files",
    "read_census_table",
]

CENSUS_COLUMNS: dict[str, tuple[str, ...]] = {
    "t1": ("REGION_ID", "REGION_TYPE", "ITERATION_CODE", "COUNT"),
    "t2": ("REGION_ID", "REGION_TYPE", "ITERATION_CODE", "AGESTART", "AGEEND", "SEX", "COUNT"),
}
"""The published columns of each table, in Census order (production ``T1_COLUMNS``,
``T2_COLUMNS``)."""
TABLES: dict[str, CensusTable] = {t: CensusTable(t, c) for t, c in CENSUS_COLUMNS.items()}
"""T1 and T2 as Census tables (folders ``t1/``, ``t2/`` with ``headers.csv``)."""
ERROR_FILES = {t: table.error_file for t, table in TABLES.items()}
"""The companion table of each table."""


def census_header(table: str) -> str:
    """The header line of T1 or T2 (no newline), e.g. ``REGION_ID|…|COUNT``."""
    return TABLES[table].header


def census_schema(table: str) -> dict[str, Any]:
    """Polars schema of T1 or T2: strings and an Int64 ``COUNT``."""
    return census.census_schema(TABLES[table])


def error_schema(table: str, full: dict[str, Any]) -> dict[str, Any]:
    """The companion table's schema of T1 or T2 from the engine's wide schema ``full``."""
    return census.error_schema(TABLES[table], full)


def part_files(directory: Path, table: str) -> list[Path]:
    """The data files of ``directory/t1/`` or ``t2/`` in name order."""
    return census.part_files(directory, TABLES[table].folder)


def read_census_table(directory: Path, table: str) -> pl.DataFrame | None:
    """T1 or T2 of a release, typed (:func:`privtab.publish.census.read_census_table`)."""
    return census.read_census_table(directory, TABLES[table])


class CensusWriter(census.CensusWriter):
    """Writes T1 and T2 (:class:`privtab.publish.census.CensusWriter` with SafeTab-P's
    tables; ``schemas`` default :data:`~privtab.tabulate.tables.T1_SCHEMA` / ``T2_SCHEMA``)."""

    def __init__(
        self,
        directory: Path,
        *,
        formats: tuple[str, ...] = ("txt",),
        metadata: dict[str, str] | None = None,
        schemas: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        if schemas is None:
            from privtab.tabulate.tables import T1_SCHEMA, T2_SCHEMA

            schemas = {"t1": T1_SCHEMA, "t2": T2_SCHEMA}
        tables = [TABLES[t] for t in schemas]
        super().__init__(directory, tables, schemas, formats=formats, metadata=metadata)
