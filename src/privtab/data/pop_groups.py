"""SafeTab-P's published T1 as an input: the population groups SafeTab-H tabulates.

SafeTab-H reads the T1 of the same population (``pop-group-totals.txt``, or the part files
of a SafeTab-P release's ``t1/`` folder, or its ``t1.parquet``): one row per published
population group, ``REGION_ID|REGION_TYPE|ITERATION_CODE|COUNT`` (production schema
``pop-group-totals.json``). The groups it lists are SafeTab-H's domain and each group's
noisy ``COUNT`` chooses its statistic level — T1 is public (noisy output), so nothing here
costs privacy.

Rules (each problem names file, line, column and value; all problems are collected):

- the production schema: ``wrong_header`` (exactly the four columns, in order),
  ``wrong_field_count``, ``invalid_region_id`` (``1`` or 2, 4, 5, 7 or 11 ASCII digits),
  ``invalid_region_type`` (one of the ten REGION_TYPEs), ``invalid_iteration_code``
  (four digits), ``invalid_count`` (an integer of at most 64 bits, ``-`` allowed: noisy
  counts may be negative);
- production's ``duplicate_group``: no (REGION_TYPE, REGION_ID, ITERATION_CODE) twice;
- two rules stricter than production's, whose schema accepts any id length at any type
  and whose join silently drops unknown iterations: ``unknown_iteration`` (the code is an
  iteration of the reference files: a T1 made with other reference files is refused) and
  — on the rows a run uses, see :func:`check_region_id_lengths` — ``region_id_length`` (a
  REGION_ID has its REGION_TYPE's length: ``1`` for USA, 2 for STATE and PR-STATE, 5 for
  counties, 11 for tracts, 7 for places, 4 for AIANNH areas).

Which rows a run uses (its region types and states) is decided by the product
(:mod:`privtab.safetab_h.domain`), as production's readers decide it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from privtab.data._scan import format_of, open_table
from privtab.data._tables import ROW, report_rows
from privtab.data.errors import ProblemLog, checked
from privtab.data.iterations import ReferenceData
from privtab.data.levels import GeoLevel
from privtab.data.spec import FIELDS, field_count_message

__all__ = [
    "POP_GROUP_COLUMNS",
    "POP_GROUP_STEM",
    "PopulationGroups",
    "check_region_id_lengths",
    "load_pop_groups",
    "read_pop_groups",
]

POP_GROUP_STEM = "pop-group-totals"
POP_GROUP_COLUMNS = ("REGION_ID", "REGION_TYPE", "ITERATION_CODE", "COUNT")
FILE = "FILE"
REGION_ID_PATTERN = r"1|[0-9]{2}|[0-9]{5}|[0-9]{11}|[0-9]{7}|[0-9]{4}"
"""Production's REGION_ID pattern, with ASCII digits and matched in full."""
KEY = ("REGION_TYPE", "REGION_ID", "ITERATION_CODE")


@dataclass(frozen=True)
class PopulationGroups:
    """The valid rows of a T1: ``FILE`` (its file), ``ROW`` (its line), ``REGION_ID``,
    ``REGION_TYPE``, ``ITERATION_CODE`` (strings) and ``COUNT`` (Int64), in file order."""

    rows: pl.DataFrame
    files: tuple[Path, ...]

    @property
    def source(self) -> str:
        return ", ".join(str(f) for f in self.files)


def _full(column: str, regex: str) -> pl.Expr:
    return pl.col(column).str.contains(f"^(?:{regex})$").fill_null(False)


def _read(path: Path, log: ProblemLog) -> pl.DataFrame | None:
    """One file's rows as strings with ``FILE`` and ``ROW`` (wrong field counts reported)."""
    table = open_table(path, POP_GROUP_COLUMNS, log)
    if table is None:
        return None
    try:
        df = table.frame.collect()
    except pl.exceptions.ComputeError as exc:
        from privtab.data._scan import diagnose_unreadable

        diagnose_unreadable(path, exc, log)
        return None
    n = len(POP_GROUP_COLUMNS)
    bad = df.filter(pl.col(FIELDS) != n)
    if bad.height:
        from privtab.data.errors import Problem

        log.add_many(
            bad.height,
            [
                Problem(
                    str(path),
                    "wrong_field_count",
                    field_count_message(int(nf), POP_GROUP_COLUMNS),
                    row=int(r),
                    column=POP_GROUP_COLUMNS[int(nf)] if int(nf) < n else None,
                )
                for r, nf in bad.head(log.examples).select(ROW, FIELDS).iter_rows()
            ],
        )
    return df.filter(pl.col(FIELDS) == n).select(
        pl.lit(str(path)).alias(FILE), pl.col(ROW).cast(pl.UInt64), *POP_GROUP_COLUMNS
    )


_LENGTHS = {g.value: g.region_id_length for g in GeoLevel}


def _check_rows(df: pl.DataFrame, reference: ReferenceData | None, log: ProblemLog) -> pl.DataFrame:
    """Report every schema and row problem file by file; return the valid rows typed."""
    checks: list[tuple[str, str, pl.Expr, str]] = [
        ("invalid_region_id", "REGION_ID", ~_full("REGION_ID", REGION_ID_PATTERN),
         "REGION_ID must be 1 or 2, 4, 5, 7 or 11 digits (pop-group-totals.json)"),
        ("invalid_region_type", "REGION_TYPE", ~pl.col("REGION_TYPE").is_in(list(_LENGTHS)),
         f"REGION_TYPE must be one of {', '.join(_LENGTHS)}"),
        ("invalid_iteration_code", "ITERATION_CODE", ~_full("ITERATION_CODE", "[0-9]{4}"),
         "ITERATION_CODE must be four digits"),
        ("invalid_count", "COUNT",
         ~_full("COUNT", "-?[0-9]+") | pl.col("COUNT").cast(pl.Int64, strict=False).is_null(),
         "COUNT must be an integer (a noisy count: negative values are allowed)"),
    ]  # fmt: skip
    bad = pl.lit(False)
    for kind, column, cond, message in checks:
        bad = bad | cond
        _report(log, df.filter(cond), kind, message, column)
    valid = df.filter(~bad)
    if reference is not None:
        unknown = ~pl.col("ITERATION_CODE").is_in(list(reference.iterations))
        _report(
            log,
            valid.filter(unknown),
            "unknown_iteration",
            "ITERATION_CODE is not an iteration of the reference files (a T1 made with other "
            "reference files?)",
            "ITERATION_CODE",
        )
        valid = valid.filter(~unknown)
    return valid.with_columns(pl.col("COUNT").cast(pl.Int64))


def check_region_id_lengths(rows: pl.DataFrame, log: ProblemLog) -> pl.DataFrame:
    """Report the rows (of :attr:`PopulationGroups.rows`) whose REGION_ID does not have
    its REGION_TYPE's length (``region_id_length``); return the others. Applied by the
    product to the rows a run uses (production's readers drop the rows of other states
    first, whatever their ids)."""
    length = pl.col("REGION_TYPE").replace_strict(_LENGTHS, return_dtype=pl.Int64)
    wrong = pl.col("REGION_ID").str.len_bytes().cast(pl.Int64) != length
    _report(
        log,
        rows.filter(wrong).with_columns(
            pl.format("{} ({})", "REGION_ID", "REGION_TYPE").alias("_V")
        ),
        "region_id_length",
        "REGION_ID does not have its REGION_TYPE's length (USA 1, STATE 2, COUNTY 5, TRACT 11, "
        "PLACE 7, AIANNH 4; the same for PR-*)",
        "REGION_ID",
        value="_V",
    )
    return rows.filter(~wrong)


def _report(
    log: ProblemLog,
    rows: pl.DataFrame,
    kind: str,
    message: str,
    column: str,
    *,
    value: str | None = None,
) -> None:
    for (file,), part in rows.group_by(FILE, maintain_order=True):
        report_rows(log, str(file), kind, message, part, column, value_column=value)


def _check_duplicates(df: pl.DataFrame, log: ProblemLog) -> pl.DataFrame:
    """Report every group listed again (production's ``_check_t1_pop_groups_are_unique``);
    return the rows without the repeats."""
    joined = pl.concat_str(list(KEY), separator="|")
    if not df.select(joined.is_duplicated().any()).item():
        return df  # the common case, decided on one string key
    key = pl.struct(list(KEY))
    repeated = df.filter(~key.is_first_distinct())
    if repeated.height:
        firsts = df.filter(key.is_first_distinct() & key.is_duplicated()).select(
            *KEY, pl.format("also at {} line {}", FILE, ROW).alias("_V")
        )
        _report(
            log,
            repeated.join(firsts, on=list(KEY), how="left"),
            "duplicate_group",
            "the same (REGION_TYPE, REGION_ID, ITERATION_CODE) appears more than once in T1",
            "REGION_ID",
            value="_V",
        )
    return df.filter(key.is_first_distinct())


def load_pop_groups(
    paths: Sequence[Path], reference: ReferenceData | None, log: ProblemLog
) -> PopulationGroups | None:
    """Read and validate the T1 files ``paths`` (text or Parquet, each with the Census
    header), adding problems to ``log``; ``None`` if any file has a problem."""
    before = sum(log.counts.values())
    frames = []
    for path in paths:
        format_of(path)  # a ValueError for an unknown extension is the caller's bug
        df = _read(Path(path), log)
        if df is not None:
            frames.append(df)
    schema = {FILE: pl.String, ROW: pl.UInt64, **dict.fromkeys(POP_GROUP_COLUMNS, pl.String)}
    rows = pl.concat(frames) if frames else pl.DataFrame(schema=schema)
    rows = _check_duplicates(_check_rows(rows, reference, log), log)
    if sum(log.counts.values()) > before:
        return None
    return PopulationGroups(rows, tuple(Path(p) for p in paths))


def read_pop_groups(
    paths: Sequence[Path] | Path, reference: ReferenceData | None = None
) -> PopulationGroups:
    """:func:`load_pop_groups`, raising :class:`privtab.data.InputValidationError`."""
    files = [paths] if isinstance(paths, Path) else list(paths)
    return checked(lambda log: load_pop_groups(files, reference, log))
