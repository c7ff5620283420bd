"""Output validation of Census tables, whatever the product: the rules every table obeys.

A product validates its written tables (:class:`privtab.publish.census.CensusTable`) with
these generic checks and adds its own (SafeTab-P: whole Sex × Age tables, T1 = Σ cells,
marginals, the public domain; SafeTab-H: whole T3/T4 tables, marginals = Σ cells, the T1
domain). The generic rules (``kind``):

==================  ========================================================================
``layout``          the table's folder (or its Parquet copy) exists; ``headers.csv``, where
                    the table has one, holds exactly the Census header
``header``          every part file starts with exactly the Census header (no extra column)
``field_count``     every line has exactly the Census number of fields
``pattern``         every value matches its column's pattern / allowed values (the Census
                    output schema ``<table>.json``: full match, ASCII digits)
``negative_count``  no ``COUNT < 0`` when the config disallows negative counts
``state_filter``    ``REGION_ID`` starts with a state of the run (except USA, AIANNH)
``duplicate``       no key (every Census column but ``COUNT``) appears twice
``companion``       the error tables have exactly one row per published row
``parquet_copy``    the Parquet copies hold the same rows as the text folders
==================  ========================================================================

Every failure is a :class:`privtab.data.Problem` naming the file, the line (header = line
1; Parquet: the 1-based row), the column and value where they exist, and the rule; a
product raises them together as one :class:`OutputValidationError`. Tables are read into
memory as strings (with their file and line: columns :data:`FILE`, :data:`LINE`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from privtab.data.errors import InputValidationError, Problem, ProblemLog
from privtab.publish.census import HEADERS_FILE, SEPARATOR, CensusTable, part_files

__all__ = [
    "ALWAYS_IN_FILTER",
    "FILE",
    "LINE",
    "OutputValidationError",
    "ValidationSummary",
    "at_row",
    "check_companion",
    "check_copy",
    "check_duplicates",
    "check_values",
    "column_patterns",
    "grfc_path",
    "note_config_checks",
    "read_parquet_table",
    "read_table",
    "read_text_table",
    "report",
    "report_each_file",
]

FILE, LINE = "_FILE", "_LINE"
ALWAYS_IN_FILTER = frozenset({"USA", "AIANNH"})
"""REGION_TYPEs whose ids do not start with a state code (production's exception)."""


class OutputValidationError(InputValidationError):
    """The written release breaks an output rule: every problem, located (file, line,
    column, value, rule)."""

    def _render(self) -> str:
        return super()._render().replace("invalid input:", "invalid release output:", 1)


@dataclass
class ValidationSummary:
    """What a product's ``validate_output`` checked (when it did not raise)."""

    directory: str
    files: dict[str, int] = field(default_factory=dict)
    """Every table file read and its data rows."""
    checks: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    """Rules not checked, and why."""
    rules_source: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "valid": True,
            "directory": self.directory,
            "files": self.files,
            "checks": self.checks,
            "skipped": self.skipped,
            "rules_source": self.rules_source,
        }


# ----------------------------------------------------------------------------- schemas
def note_config_checks(summary: ValidationSummary, allow_negative_counts: bool | None) -> None:
    """Record the checks that need the config (``allow_negative_counts`` is None without
    one): ``state_filter`` always with it, ``negative_count`` unless the config allows
    negative counts; otherwise both are skipped, saying why."""
    if allow_negative_counts is None:
        why = "no config given and no config recorded in release.json"
        summary.skipped["negative_count"] = why
        summary.skipped["state_filter"] = why
        return
    summary.checks.append("state_filter")
    if not allow_negative_counts:
        summary.checks.append("negative_count")
    else:
        summary.skipped["negative_count"] = "the config allows negative counts"


def column_patterns(path: Path, columns: Sequence[str]) -> dict[str, str]:
    """Each column's full-match regex from a Census output schema file (``CategoricalStr``
    and ``CategoricalInt`` values become an alternation; ``\\d`` becomes ``[0-9]``: ASCII
    digits only). ``columns``: the table's Census columns, all of which must be described."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    out: dict[str, str] = {}
    for attr in raw["init_params"]["attributes"]:
        params = attr["init_params"]
        col = params["column"]
        if "values" in params:
            body = "|".join(re.escape(str(v)) for v in params["values"])
        else:
            body = params["pattern"].replace("\\d", "[0-9]")
        out[col] = f"^(?:{body})$"
    missing = [c for c in columns if c not in out]
    if missing:  # pragma: no cover - the packaged schemas describe every column
        raise ValueError(f"{path} does not describe the columns {missing}")
    return out


# ----------------------------------------------------------------------------- reading
def _check_headers_file(directory: Path, table: CensusTable, log: ProblemLog) -> None:
    headers = directory / table.folder / HEADERS_FILE
    if not headers.is_file():
        log.add(Problem(str(headers), "layout", f"{table.folder}/{HEADERS_FILE} is missing"))
    elif headers.read_text(encoding="utf-8", errors="replace") != table.header:
        got = headers.read_text(encoding="utf-8", errors="replace")
        log.add(
            Problem(
                str(headers),
                "layout",
                f"must hold exactly {table.header!r}",
                row=1,
                value=got[:200],
            )
        )


def read_text_table(
    directory: Path, table: CensusTable, log: ProblemLog, rows: dict[str, int]
) -> pl.DataFrame | None:
    """All part files of the table's folder as strings with their :data:`FILE` and
    :data:`LINE`, or ``None``; each part file's data lines go to ``rows``."""
    folder = directory / table.folder
    cols = list(table.columns)
    header = table.header
    if table.headers_file:
        _check_headers_file(directory, table, log)
    parts = part_files(directory, table.folder)
    if not parts:
        log.add(Problem(str(folder), "layout", f"{table.folder}/ holds no part file"))
        return None
    frames = []
    for part in parts:
        lines = pl.read_csv(
            part,
            has_header=False,
            separator="\x1f",
            quote_char=None,
            schema={"_L": pl.String},
            encoding="utf8-lossy",
        ).with_row_index(LINE, offset=1)
        if lines.height == 0 or lines["_L"][0] != header:
            log.add(
                Problem(
                    str(part),
                    "header",
                    f"the first line must be exactly the Census header {header!r}",
                    row=1,
                    value=None if lines.height == 0 else str(lines["_L"][0])[:200],
                )
            )
            continue
        body = lines.slice(1).with_columns(pl.col("_L").fill_null(""))
        rows[str(part.relative_to(directory))] = body.height
        fields = pl.col("_L").str.split(SEPARATOR)
        body = body.with_columns(fields.list.len().alias("_NF"), fields.alias("_F"))
        bad = body.filter(pl.col("_NF") != len(cols))
        report(
            log,
            bad,
            str(part),
            "field_count",
            f"a line must have exactly {len(cols)} fields ({header})",
            value="_L",
        )
        good = body.filter(pl.col("_NF") == len(cols)).select(
            pl.lit(str(part)).alias(FILE),
            pl.col(LINE).cast(pl.Int64),
            *[pl.col("_F").list.get(i).alias(c) for i, c in enumerate(cols)],
        )
        frames.append(good)
    if not frames:
        return None
    return pl.concat(frames)


def read_parquet_table(path: Path, table: CensusTable, log: ProblemLog) -> pl.DataFrame | None:
    """A Parquet copy of ``table`` as strings with its :data:`FILE` and :data:`LINE`, or
    ``None`` (a ``header`` problem) when its columns are not exactly the Census ones."""
    cols = list(table.columns)
    df = pl.read_parquet(path)
    if df.columns != cols:
        log.add(
            Problem(
                str(path),
                "header",
                f"the columns must be exactly {cols}",
                value=",".join(df.columns)[:200],
            )
        )
        return None
    return df.select(
        pl.lit(str(path)).alias(FILE),
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias(LINE),
        *[pl.col(c).cast(pl.String) for c in cols],
    )


def read_table(
    directory: Path, table: CensusTable, log: ProblemLog, rows: dict[str, int]
) -> pl.DataFrame | None:
    """The table as written: its text folder, else its Parquet copy (``layout`` problem
    when it has neither)."""
    if (directory / table.folder).is_dir():
        return read_text_table(directory, table, log, rows)
    if (directory / table.copy_file).is_file():
        df = read_parquet_table(directory / table.copy_file, table, log)
        if df is not None:
            rows[table.copy_file] = df.height
        return df
    log.add(
        Problem(
            str(directory / table.folder),
            "layout",
            f"the release has no {table.folder}/ folder (nor {table.copy_file})",
        )
    )
    return None


# ----------------------------------------------------------------------------- reporting
def report(
    log: ProblemLog,
    rows: pl.DataFrame,
    file: str | None,
    kind: str,
    message: str,
    *,
    column: str | None = None,
    value: str | None = None,
) -> None:
    """Record every row of ``rows`` (columns :data:`FILE` / :data:`LINE`) as one problem
    kind (``file``: the file of every row, else each row's own)."""
    if rows.height == 0:
        return
    take = rows.head(max(log.room(file or str(rows[FILE][0]), kind), 1))
    examples = []
    for r in take.iter_rows(named=True):
        f = file or r[FILE]
        v = r.get(value) if value else (r.get(column) if column else None)
        examples.append(
            Problem(
                f,
                kind,
                message,
                row=r.get(LINE),
                column=column,
                value=None if v is None else str(v)[:200],
            )
        )
    log.add_many(rows.height, examples)


def report_each_file(
    log: ProblemLog,
    rows: pl.DataFrame,
    kind: str,
    message: str,
    *,
    column: str | None = None,
    value: str | None = None,
) -> None:
    """:func:`report`, file by file."""
    for (f,), part in rows.group_by(FILE, maintain_order=True):
        report(log, part, str(f), kind, message, column=column, value=value)


def at_row(rows: pl.DataFrame, file: str, line: str, *extra: pl.Expr) -> pl.DataFrame:
    """``rows`` placed at the file and line held in its columns ``file`` and ``line`` (a
    joined table's row, e.g. the total row of a group), for :func:`report_each_file`."""
    return rows.select(pl.col(file).alias(FILE), pl.col(line).alias(LINE), *extra)


# ----------------------------------------------------------------------------- checks
def check_values(
    df: pl.DataFrame,
    patterns: dict[str, str],
    log: ProblemLog,
    *,
    states: Sequence[str] = (),
    allow_negative_counts: bool = True,
) -> pl.DataFrame:
    """Patterns, negativity (when ``allow_negative_counts`` is false) and the state filter
    (when ``states`` are given); returns the rows whose values are all valid, with
    ``COUNT`` as Int64."""
    ok = pl.lit(True)
    for col, regex in patterns.items():
        good = pl.col(col).str.contains(regex)
        report_each_file(
            log,
            df.filter(~good),
            "pattern",
            f"{col} does not match the Census output schema ({regex})",
            column=col,
        )
        ok = ok & good
    valid = df.filter(ok).with_columns(pl.col("COUNT").cast(pl.Int64, strict=False))
    overflow = valid.filter(pl.col("COUNT").is_null())
    report_each_file(log, overflow, "pattern", "COUNT is not a 64-bit integer", column="COUNT")
    valid = valid.filter(pl.col("COUNT").is_not_null())
    if not allow_negative_counts:
        report_each_file(
            log,
            valid.filter(pl.col("COUNT") < 0),
            "negative_count",
            "negative count, but the config has allow_negative_counts = false",
            column="COUNT",
        )
    if states:
        starts = pl.col("REGION_ID").str.slice(0, 2).is_in(list(states))
        outside = valid.filter(~pl.col("REGION_TYPE").is_in(list(ALWAYS_IN_FILTER)) & ~starts)
        report_each_file(
            log,
            outside,
            "state_filter",
            f"REGION_ID is not in a state of the run ({', '.join(states)})",
            column="REGION_ID",
        )
    return valid


def check_duplicates(df: pl.DataFrame, keys: Sequence[str], log: ProblemLog) -> bool:
    """Report every key seen twice; return whether there was one."""
    keys = list(keys)
    dup = df.filter(pl.struct(keys).is_duplicated()).sort(FILE, LINE)
    if dup.height == 0:
        return False
    later = dup.filter(~pl.struct(keys).is_first_distinct())
    firsts = dup.filter(pl.struct(keys).is_first_distinct()).select(
        *keys, pl.format("{} line {}", pl.col(FILE), pl.col(LINE)).alias("_FIRST")
    )
    later = later.join(firsts, on=keys, how="left")
    report_each_file(
        log,
        later.with_columns(pl.concat_str([pl.lit("also at "), pl.col("_FIRST")]).alias("_V")),
        "duplicate",
        f"the same {', '.join(keys)} appears more than once",
        value="_V",
    )
    return True


def check_companion(
    path: Path, keys: Sequence[str], df: pl.DataFrame, log: ProblemLog, duplicates: bool, what: str
) -> int | None:
    """One error row per published row: ``df`` holds the valid rows of every table whose
    companion is ``path`` (``what`` names them; ``duplicates``: whether ``df`` repeats a
    key). The writer writes both from the same frames, so a companion whose keys equal
    ``df``'s row by row has no extra, no missing and — without duplicates — no duplicate
    row: decided by one comparison; otherwise the joins find and locate every problem.
    Returns the companion's rows (``None`` if it is missing)."""
    keys = list(keys)
    if not path.exists():
        log.add(Problem(str(path), "companion", f"the error table of {what} is missing"))
        return None
    comp = pl.read_parquet(path)
    missing = [c for c in keys if c not in comp.columns]
    if missing:
        log.add(Problem(str(path), "companion", f"lacks the key columns {missing}"))
        return comp.height
    comp = comp.select([pl.col(c).cast(pl.String) for c in keys])
    if not duplicates and comp.height == df.height and comp.equals(df.select(keys)):
        return comp.height
    if not duplicates and comp.height == df.height and _same_rows(comp, df.select(keys)):
        return comp.height  # the same rows in another order (tables sharing a companion)
    comp = comp.with_row_index(LINE, 1)
    comp = comp.with_columns(pl.lit(str(path)).alias(FILE), pl.col(LINE).cast(pl.Int64))
    extra = comp.join(df.select(keys), on=keys, how="anti")
    report(log, extra, str(path), "companion", f"an error row with no published {what} row")
    lacking = df.join(comp.select(keys), on=keys, how="anti")
    report_each_file(log, lacking, "companion", f"a published row with no row in {path.name}")
    dup = comp.filter(pl.struct(keys).is_duplicated() & ~pl.struct(keys).is_first_distinct())
    report(log, dup, str(path), "companion", "more than one error row for the same key")
    return comp.height


def _same_rows(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    """Whether two frames of distinct rows hold the same rows in any order: their sorted
    64-bit row hashes are equal (a difference is then located by the joins)."""
    import numpy as np

    ha = np.sort(a.hash_rows(seed=7).to_numpy())
    hb = np.sort(b.hash_rows(seed=7).to_numpy())
    return bool(np.array_equal(ha, hb))


def check_copy(directory: Path, table: CensusTable, text: pl.DataFrame, log: ProblemLog) -> None:
    """The Parquet copy of ``table`` holds the same rows as its text folder (``text``)."""
    path = directory / table.copy_file
    cols = list(table.columns)
    copy = read_parquet_table(path, table, ProblemLog())
    if copy is None:
        log.add(Problem(str(path), "parquet_copy", f"the columns must be exactly {cols}"))
        return
    a = text.select(cols).with_columns(pl.col("COUNT").cast(pl.String)).sort(cols)
    b = copy.select(cols).sort(cols)
    if not a.equals(b):
        log.add(
            Problem(
                str(path),
                "parquet_copy",
                f"holds other rows than {table.folder}/ ({b.height} vs {a.height} rows)",
            )
        )


def grfc_path(data: Path, stem: str) -> Path:
    """``data/<stem>.txt`` or ``data/<stem>.parquet`` (exactly one), else an input error."""
    found = [
        data / f"{stem}{ext}" for ext in (".txt", ".parquet") if (data / f"{stem}{ext}").exists()
    ]
    if len(found) != 1:
        log = ProblemLog()
        what = "both" if found else "neither"
        log.add(
            Problem(
                str(data),
                "missing_file" if not found else "ambiguous_input",
                f"{what} of {stem}.txt and {stem}.parquet in {data}: need exactly one",
            )
        )
        log.raise_if_any()
    return found[0]
