"""Output validation: the written T1/T2 checked against the Census output schemas and rules.

The 2020 production code validated its private output (``--validate-private-output``:
``validate_output`` in ``safetab_utils``) for the columns (no unexpected column), each
column's pattern or allowed values (the output schemas ``t1.json``/``t2.json``), the state
filter (every ``REGION_ID`` outside USA and AIANNH starts with a state of the run) and
non-negativity when ``allow_negative_counts`` is false. :func:`validate_output` checks the
same, on the files as written, and more:

==================  ========================================================================
rule (``kind``)     what is checked
==================  ========================================================================
``layout``          ``t1/`` and ``t2/`` (or the Parquet copies) exist; ``headers.csv`` holds
                    exactly the Census header
``header``          every part file starts with exactly the Census header (no extra column)
``field_count``     every line has exactly the Census number of fields
``pattern``         every value matches its column's pattern / allowed values (schemas)
``negative_count``  no ``COUNT < 0`` when the config disallows negative counts
``state_filter``    ``REGION_ID`` starts with a state of the run (except USA, AIANNH)
``duplicate``       no key appears twice (T1: region, type, iteration; T2: + ages, sex)
``cell_table``      a group's T2 cells form one whole Sex × Age4/Age9/Age23 table
``t1_sum``          a group with cells has a T1 row equal to the sum of its cells
``marginal_sum``    each sex marginal (``AGESTART = AGEEND = *``) exists and equals the sum
                    of that sex's cells; no marginal without cells
``domain``          every row is a population group of the public domain (GRF-C regions ×
                    iterations of the reference files at levels with a budget; T2 rows not
                    of TotalOnly iterations) — needs the GRF-C
``companion``       the error tables have exactly one row per published row
``parquet_copy``    ``t1.parquet``/``t2.parquet`` hold the same rows as the text folders
==================  ========================================================================

The rules every Census table obeys (layout … ``duplicate``, ``companion``,
``parquet_copy``) are the shared framework :mod:`privtab.publish.validation`; the T1/T2
rules (``cell_table``, ``t1_sum``, ``marginal_sum``, ``domain``) are SafeTab-P's, here.
Every failure is a :class:`privtab.data.Problem` naming the file, the line (header = line
1; Parquet: the 1-based row), the column and value where they exist, and the rule; all are
raised together as one :class:`OutputValidationError` (a
:class:`privtab.errors.InputError`). A release run calls :func:`validate_output` on its
staging folder before publishing it: a failing check means no release.

Reads every table into memory (strings): fine for state-sized releases; a national release
needs memory for its largest table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from privtab.data.errors import ProblemLog
from privtab.publish.validation import (
    FILE,
    LINE,
    OutputValidationError,
    ValidationSummary,
    at_row,
    check_companion,
    check_copy,
    check_duplicates,
    check_values,
    grfc_path,
    note_config_checks,
    read_table,
    report_each_file,
)
from privtab.publish.validation import column_patterns as patterns_of
from privtab.tabulate.output import CENSUS_COLUMNS, ERROR_FILES, TABLES

if TYPE_CHECKING:
    from privtab.data import Geography, ReferenceData, SafeTabConfig

__all__ = [
    "OutputRules",
    "OutputValidationError",
    "ValidationSummary",
    "column_patterns",
    "validate_output",
    "validate_paths",
]

PR_STATE = "72"
MARGINAL = "*"
ALWAYS_CHECKED = (
    "layout",
    "header",
    "field_count",
    "pattern",
    "duplicate",
    "cell_table",
    "t1_sum",
    "marginal_sum",
    "companion",
    "parquet_copy",
)
"""Rules checked on every release (the others need the config or the GRF-C)."""


@dataclass(frozen=True)
class OutputRules:
    """What the config says about the output: the states of the runs, whether negative
    counts are allowed, and the levels with a budget (``(REGION_TYPE, iteration level)``)."""

    states: tuple[str, ...]
    allow_negative_counts: bool
    levels: frozenset[tuple[str, int]]
    source: str = ""

    @classmethod
    def from_config(cls, config: SafeTabConfig) -> OutputRules:
        states = (
            *(config.state_filter_us if config.run_us else ()),
            *((PR_STATE,) if config.run_pr else ()),
        )
        scopes = {s.value for s in config.scopes}
        levels = frozenset(
            (g.value, int(i))
            for (g, i), b in config.budgets.items()
            if b > 0 and g.scope.value in scopes
        )
        return cls(tuple(states), config.allow_negative_counts, levels, config.source)

    @classmethod
    def from_release_json(cls, doc: Mapping[str, Any]) -> OutputRules | None:
        """The rules of the config recorded in a ``release.json`` (``None`` if absent)."""
        cfg = doc.get("config")
        if not isinstance(cfg, dict):
            return None
        try:
            states = (
                *(cfg["state_filter_us"] if cfg["run_us"] else ()),
                *((PR_STATE,) if cfg["run_pr"] else ()),
            )
            pr = bool(cfg["run_pr"])
            us = bool(cfg["run_us"])
            levels = set()
            for key, b in cfg["budgets"].items():
                geo, lv = key.split(",")
                on = pr if geo.startswith("PR-") else us
                if on and float(b["value"]) > 0:
                    levels.add((geo, int(lv)))
            return cls(
                tuple(states),
                bool(cfg["allow_negative_counts"]),
                frozenset(levels),
                f"release.json ({cfg.get('source', '')})",
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


# ----------------------------------------------------------------------------- schemas
def column_patterns(table: str, schemas: Path | None = None) -> dict[str, str]:
    """Each column's full-match regex from the Census output schema ``<table>.json`` of
    T1 or T2 (:func:`privtab.publish.validation.column_patterns`)."""
    from privtab.data.resources import schemas_dir

    return patterns_of((schemas or schemas_dir()) / f"{table}.json", CENSUS_COLUMNS[table])


def _bin_table() -> pl.DataFrame:
    """Valid (cells per group, AGESTART, AGEEND) of the three Sex × Age tables."""
    from privtab.data.ages import STAT_LEVEL_BINS

    rows = []
    for k in (1, 2, 3):
        bins = STAT_LEVEL_BINS[k]
        assert bins is not None
        for a, b in bins.bounds():
            rows.append((2 * bins.n_bins, str(a), str(b)))
    return pl.DataFrame(
        rows, schema={"_N": pl.Int64, "AGESTART": pl.String, "AGEEND": pl.String}, orient="row"
    )


GROUP = ["REGION_ID", "REGION_TYPE", "ITERATION_CODE"]


def _check_consistency(t1: pl.DataFrame, t2: pl.DataFrame, log: ProblemLog) -> None:
    """Whole cell tables, T1 = Σ cells, marginals = Σ cells of that sex."""
    group = GROUP
    is_marg = (pl.col("AGESTART") == MARGINAL) & (pl.col("AGEEND") == MARGINAL)
    cells = t2.filter(~is_marg)
    margs = t2.filter(is_marg)
    half = t2.filter((pl.col("AGESTART") == MARGINAL) ^ (pl.col("AGEEND") == MARGINAL))
    report_each_file(
        log, half, "cell_table", "AGESTART and AGEEND must both be '*' (a marginal) or neither"
    )
    cells = cells.filter(~((pl.col("AGESTART") == MARGINAL) | (pl.col("AGEEND") == MARGINAL)))
    with_n = cells.with_columns(pl.len().over(group).cast(pl.Int64).alias("_N"))
    bad_size = with_n.filter(~pl.col("_N").is_in([8, 18, 46]))
    report_each_file(
        log,
        bad_size.filter(pl.struct(group).is_first_distinct()),
        "cell_table",
        "the group's T2 cells are not one whole Sex × Age4/Age9/Age23 table (8, 18 or 46 cells)",
        value="_N",
    )
    sized = with_n.filter(pl.col("_N").is_in([8, 18, 46]))
    stray = sized.join(_bin_table(), on=["_N", "AGESTART", "AGEEND"], how="anti")
    report_each_file(
        log,
        stray.with_columns(pl.format("{}-{}", "AGESTART", "AGEEND").alias("_V")),
        "cell_table",
        "age bin not of the group's Sex × Age table (mixed or unknown bins)",
        value="_V",
    )
    _check_t1_sums(t1, cells, log)
    _check_marginals(cells, margs, log)


def _check_t1_sums(t1: pl.DataFrame, cells: pl.DataFrame, log: ProblemLog) -> None:
    """A group with cells has a T1 row equal to the sum of its cells."""
    group = GROUP
    sums = cells.group_by(group).agg(
        pl.col("COUNT").sum().alias("_S"),
        pl.col(FILE).first(),
        pl.col(LINE).min(),
    )
    joined = sums.join(
        t1.select(
            *group,
            pl.col("COUNT").alias("_T1"),
            pl.col(FILE).alias("_F1"),
            pl.col(LINE).alias("_L1"),
        ),
        on=group,
        how="left",
    )
    missing = joined.filter(pl.col("_T1").is_null())
    report_each_file(
        log,
        missing,
        "t1_sum",
        "the group has T2 cells but no T1 row (T1 must be the sum of the cells)",
        value="ITERATION_CODE",
    )
    wrong = joined.filter(pl.col("_T1").is_not_null() & (pl.col("_T1") != pl.col("_S")))
    report_each_file(
        log,
        at_row(wrong, "_F1", "_L1", pl.format("T1 {} ≠ Σ cells {}", "_T1", "_S").alias("_V")),
        "t1_sum",
        "T1 COUNT is not the sum of the group's T2 cells",
        value="_V",
    )


def _check_marginals(cells: pl.DataFrame, margs: pl.DataFrame, log: ProblemLog) -> None:
    """Each sex of a group with cells has one marginal, the sum of that sex's cells."""
    group = GROUP
    by_sex = cells.group_by([*group, "SEX"]).agg(
        pl.col("COUNT").sum().alias("_S"), pl.col(FILE).first(), pl.col(LINE).min()
    )
    m = margs.select(
        *group,
        "SEX",
        pl.col("COUNT").alias("_M"),
        pl.col(FILE).alias("_FM"),
        pl.col(LINE).alias("_LM"),
    )
    both = by_sex.join(m, on=[*group, "SEX"], how="full", coalesce=True)
    report_each_file(
        log,
        both.filter(pl.col("_M").is_null()).with_columns(pl.format("SEX {}", "SEX").alias("_V")),
        "marginal_sum",
        "the group has T2 cells but no sex marginal row (AGESTART = AGEEND = *) for this sex",
        value="_V",
    )
    report_each_file(
        log,
        at_row(both.filter(pl.col("_S").is_null()), "_FM", "_LM"),
        "marginal_sum",
        "a sex marginal row without T2 cells for that sex",
    )
    report_each_file(
        log,
        at_row(
            both.filter(
                pl.col("_S").is_not_null()
                & pl.col("_M").is_not_null()
                & (pl.col("_S") != pl.col("_M"))
            ),
            "_FM",
            "_LM",
            pl.format("marginal {} ≠ Σ cells {}", "_M", "_S").alias("_V"),
        ),
        "marginal_sum",
        "the sex marginal is not the sum of that sex's cells",
        value="_V",
    )


@dataclass(frozen=True)
class _Domain:
    regions: pl.DataFrame
    """(REGION_TYPE, REGION_ID) of the public domain."""
    t1_codes: pl.DataFrame
    """(REGION_TYPE, ITERATION_CODE) tabulated at levels with a budget."""
    t2_codes: pl.DataFrame
    """The same without TotalOnly iterations (no cells)."""


def _public_domain(geography: Geography, reference: ReferenceData, rules: OutputRules) -> _Domain:
    from privtab.data import GeoLevel
    from privtab.data.levels import Granularity

    regions: list[pl.DataFrame] = []
    t1: list[pl.DataFrame] = []
    t2: list[pl.DataFrame] = []
    geos = sorted({g for g, _ in rules.levels})
    for g in geos:
        geo = GeoLevel(g)
        detailed = geo.granularity is Granularity.DETAILED
        regions.append(_keyed(g, "REGION_ID", list(geography.domain(geo))))
        for lv in sorted(lv for gg, lv in rules.levels if gg == g):
            its = reference.select(lv, geo.granularity)
            t1.append(_keyed(g, "ITERATION_CODE", [it.code for it in its]))
            # TotalOnly iterations (detailed-only at a detailed geography) have no cells
            cells = [it.code for it in its if not (detailed and it.detailed_only)]
            t2.append(_keyed(g, "ITERATION_CODE", cells))
    return _Domain(
        pl.concat([_keyed("", "REGION_ID", []), *regions]),
        pl.concat([_keyed("", "ITERATION_CODE", []), *t1]),
        pl.concat([_keyed("", "ITERATION_CODE", []), *t2]),
    )


def _keyed(region_type: str, column: str, values: list[str]) -> pl.DataFrame:
    """``(REGION_TYPE, column)`` rows: ``region_type`` beside each of ``values``."""
    return pl.DataFrame({column: values}, schema={column: pl.String}).select(
        pl.lit(region_type, dtype=pl.String).alias("REGION_TYPE"), column
    )


def _check_domain(df: pl.DataFrame, codes: pl.DataFrame, dom: _Domain, log: ProblemLog) -> None:
    out_region = df.join(dom.regions, on=["REGION_TYPE", "REGION_ID"], how="anti")
    report_each_file(
        log,
        out_region,
        "domain",
        "REGION_ID is not a region of the GRF-C at this REGION_TYPE (or the level has no budget)",
        column="REGION_ID",
    )
    out_code = df.join(codes, on=["REGION_TYPE", "ITERATION_CODE"], how="anti")
    report_each_file(
        log,
        out_code,
        "domain",
        "ITERATION_CODE is not tabulated at this REGION_TYPE (reference files and budgets; "
        "TotalOnly iterations have no T2 rows)",
        column="ITERATION_CODE",
    )


# ----------------------------------------------------------------------------- entry point
def validate_output(
    directory: str | Path,
    *,
    rules: OutputRules | None = None,
    geography: Geography | None = None,
    reference: ReferenceData | None = None,
) -> ValidationSummary:
    """Check the T1/T2 files of the release folder ``directory`` (see the module docstring).

    ``rules`` (the config's state filter, negativity and levels; default: the config
    recorded in the folder's ``release.json``, else those checks are skipped);
    ``geography`` and ``reference`` enable the domain check. Raises
    :class:`OutputValidationError` listing every problem; returns what was checked.
    """
    d = Path(directory)
    summary = ValidationSummary(str(d), checks=list(ALWAYS_CHECKED))
    if rules is None and (d / "release.json").is_file():
        try:
            rules = OutputRules.from_release_json(
                json.loads((d / "release.json").read_text(encoding="utf-8"))
            )
        except (OSError, ValueError):
            rules = None
    summary.rules_source = rules.source if rules is not None else ""
    log = ProblemLog()
    tables: dict[str, pl.DataFrame] = {}
    for table in ("t1", "t2"):
        declared = TABLES[table]
        df = read_table(d, declared, log, summary.files)
        if df is None:
            continue
        valid = check_values(
            df,
            column_patterns(table),
            log,
            states=rules.states if rules is not None else (),
            allow_negative_counts=rules is None or rules.allow_negative_counts,
        )
        keys = declared.keys
        duplicates = check_duplicates(valid, keys, log)
        tables[table] = valid
        n = check_companion(d / ERROR_FILES[table], keys, valid, log, duplicates, table)
        if n is not None:
            summary.files[ERROR_FILES[table]] = n
        if (d / table).is_dir() and (d / declared.copy_file).is_file():
            check_copy(d, declared, valid, log)
    if "t1" in tables and "t2" in tables:
        _check_consistency(tables["t1"], tables["t2"], log)
    if rules is not None and geography is not None and reference is not None:
        dom = _public_domain(geography, reference, rules)
        for table, codes in (("t1", dom.t1_codes), ("t2", dom.t2_codes)):
            if table in tables:
                _check_domain(tables[table], codes, dom, log)
        summary.checks.append("domain")
    else:
        summary.skipped["domain"] = (
            "needs the GRF-C (--data DIR) and the config's levels"
            if rules is not None
            else "needs the config (--config or the release's release.json) and the GRF-C"
        )
    note_config_checks(summary, None if rules is None else rules.allow_negative_counts)
    if log:
        raise OutputValidationError(log.problems, log.counts)
    return summary


def validate_paths(
    directory: str | Path,
    *,
    config: str | Path | None = None,
    data: str | Path | None = None,
) -> ValidationSummary:
    """:func:`validate_output` from paths (``privtab validate-output``): the config file or
    parameters directory (its reference files are read from the same directory; default:
    the config recorded in ``release.json`` and the packaged 2020 parameters), and a data
    directory holding the GRF-C for the domain check."""
    from privtab.data import production_config_dir, read_config, read_geography, read_reference
    from privtab.data.geography import GRFC_STEM
    from privtab.data.inputs import resolve_config_path

    rules: OutputRules | None = None
    params = production_config_dir()
    d = Path(directory)
    if not d.is_dir():
        from privtab.errors import UsageError

        raise UsageError(f"release folder {d} not found")
    if config is not None:
        path = resolve_config_path(config)
        rules = OutputRules.from_config(read_config(path))
        params = path.parent
    elif (d / "release.json").is_file():
        rules = OutputRules.from_release_json(
            json.loads((d / "release.json").read_text(encoding="utf-8"))
        )
    geography = reference = None
    if data is not None and rules is not None:
        grfc = grfc_path(Path(data), GRFC_STEM)
        us = tuple(s for s in rules.states if s != PR_STATE)
        geography = read_geography(grfc, us) if us else read_geography(grfc, ())
        reference = read_reference(params)
    return validate_output(d, rules=rules, geography=geography, reference=reference)
