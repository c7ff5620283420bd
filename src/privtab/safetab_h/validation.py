"""Output validation of a SafeTab-H release: every one of its six tables, as written.

Production (``safetab_h_analytics.py``) validated, with ``--validate-private-output`` and
after writing, only the **last** table of each family — its loop variables ``t3_sdf`` and
``t4_sdf`` after the write loops are ``T03004`` and ``T04002`` — against the output schemas
(``t3.json``, ``t4.json``), the state filter and non-negativity. privtab checks every table
before publication (a failure: no release) with the shared rules of
:mod:`privtab.publish.validation` (layout, header, field count, schema pattern, negativity,
state filter, duplicates, companion tables, Parquet copies) and SafeTab-H's own:

=================  =========================================================================
``one_table``      a population group is in one table of a family (T03001–T03004; T04001–2)
``cell_table``     a group's rows are exactly its table's cells (T03001: 0; T03002: 0, 1, 6;
                   T03003: 0, 1, 2, 3, 6, 7, 8; T03004: 0–8; T04001: 0; T04002: 0–3)
``marginal_sum``   every marginal is the sum of the cells below it (0 = 1 + 6, 1 = 2 + 3,
                   3 = 4 + 5, 6 = 7 + 8; T4: 0 = 1 + 2 + 3)
``domain``         (with the T1 and the GRF-C) every group is a T1 group the run tabulates at
                   that level and REGION_TYPE, with a budget for its table
``stat_level``     (with the T1) the group's table is the one its T1 count selects
``missing_group``  (with the T1) every tabulated T1 group of a query is published
=================  =========================================================================

Each failure names the file, line, column, value and rule.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from privtab.data.errors import Problem, ProblemLog
from privtab.data.levels import PR_STATE_FIPS
from privtab.publish.census import CensusTable
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
    column_patterns,
    note_config_checks,
    read_table,
    report_each_file,
)
from privtab.safetab_h.tables import DESIGNS, GROUP, TableDesign, census_tables

if TYPE_CHECKING:
    from privtab.safetab_h.config import HConfig
    from privtab.safetab_h.domain import RunGroups
    from privtab.safetab_h.queries import HPlan

__all__ = ["OutputRulesH", "validate_output", "validate_paths"]

ALWAYS = (
    "layout",
    "header",
    "field_count",
    "pattern",
    "duplicate",
    "companion",
    "parquet_copy",
    "one_table",
    "cell_table",
    "marginal_sum",
)


@dataclass(frozen=True)
class OutputRulesH:
    """What the config says about the output: the runs' states and whether negative
    counts are allowed."""

    states: tuple[str, ...]
    allow_negative_counts: bool
    source: str = ""

    @classmethod
    def from_config(cls, config: HConfig) -> OutputRulesH:
        return cls(config.states(), config.allow_negative_counts, config.source)

    @classmethod
    def from_release_json(cls, doc: Mapping[str, Any]) -> OutputRulesH | None:
        cfg = doc.get("config")
        if not isinstance(cfg, dict):
            return None
        try:
            states = (
                *(cfg["state_filter_us"] if cfg["run_us"] else ()),
                *((PR_STATE_FIPS,) if cfg["run_pr"] else ()),
            )
            return cls(tuple(states), bool(cfg["allow_negative_counts"]), "release.json")
        except (KeyError, TypeError):
            return None


def _schema(design: TableDesign) -> Path:
    from privtab.data.resources import schemas_dir

    return schemas_dir() / f"{design.name}.json"


def _family(design: TableDesign) -> list[CensusTable]:
    return [t for t in census_tables() if t.folder.startswith(design.name + "/")]


def _read_family(
    d: Path, design: TableDesign, rules: OutputRulesH | None, log: ProblemLog, rows: dict[str, int]
) -> pl.DataFrame:
    """Every table of a family, checked by the shared rules; its valid rows with
    ``_LEVEL`` (the table's statistic level) and the cell as Int64 ``_CELL``."""
    frames = []
    for level, table in enumerate(_family(design)):
        df = read_table(d, table, log, rows)
        if df is None:
            continue
        valid = check_values(
            df,
            column_patterns(_schema(design), table.columns),
            log,
            states=rules.states if rules is not None else (),
            allow_negative_counts=rules is None or rules.allow_negative_counts,
        )
        check_duplicates(valid, table.keys, log)
        if (d / table.folder).is_dir() and (d / table.copy_file).is_file():
            check_copy(d, table, valid, log)
        frames.append(
            valid.with_columns(
                pl.lit(level, pl.Int64).alias("_LEVEL"),
                pl.col(design.cell_column).cast(pl.Int64).alias("_CELL"),
            )
        )
    if not frames:
        return pl.DataFrame()
    family = pl.concat(frames)
    keys = [*GROUP, design.cell_column]
    dup = bool(family.select(pl.struct(keys).is_duplicated().any()).item())
    error = d / f"{design.name}-error.parquet"
    n = check_companion(error, keys, family, log, dup, f"{design.name.upper()} table")
    if n is not None:
        rows[error.name] = n
    return family


def _check_tables(family: pl.DataFrame, design: TableDesign, log: ProblemLog) -> None:
    """``one_table``, ``cell_table``, ``marginal_sum`` over a family's valid rows."""
    if family.height == 0:
        return
    # a group's cells as a bit mask (cells are distinct: duplicates are reported apart)
    groups = family.group_by(GROUP).agg(
        pl.col("_LEVEL").n_unique().alias("_NT"),
        pl.col("_LEVEL").first(),
        pl.lit(2, pl.Int64).pow(pl.col("_CELL")).cast(pl.Int64).sum().alias("_MASK"),
        pl.col(FILE).first(),
        pl.col(LINE).min(),
    )
    tables = {lv: design.table(lv) for lv in range(design.levels)}
    report_each_file(
        log,
        groups.filter(pl.col("_NT") > 1),
        "one_table",
        f"the group is in more than one {design.name.upper()} table",
        value="ITERATION_CODE",
    )
    masks = {lv: sum(1 << c for c in design.published(lv)) for lv in tables}
    expected = pl.col("_LEVEL").replace_strict(masks, return_dtype=pl.Int64)
    wrong = groups.filter((pl.col("_NT") == 1) & (pl.col("_MASK") != expected))
    if wrong.height:
        cells = (
            family.join(wrong.select(GROUP), on=GROUP)
            .group_by(GROUP)
            .agg(pl.col("_CELL").sort().cast(pl.String).str.join(",").alias("_CELLS"))
        )
        wrong = wrong.join(cells, on=GROUP).with_columns(
            pl.format(
                "cells {} in {}",
                "_CELLS",
                pl.col("_LEVEL").replace_strict(tables, return_dtype=pl.String),
            ).alias("_V")
        )
    report_each_file(
        log,
        wrong,
        "cell_table",
        "the group's rows are not exactly its table's cells",
        value="_V",
    )
    _check_marginals(family, design, log)


def _check_marginals(family: pl.DataFrame, design: TableDesign, log: ProblemLog) -> None:
    """Each published parent cell = the sum of its published children at the group's level."""
    children = pl.DataFrame(
        [(c, p) for c, p in design.parent.items()],
        schema={"_CELL": pl.Int64, "_PARENT": pl.Int64},
        orient="row",
    )
    sums = (
        family.join(children, on="_CELL")
        .group_by([*GROUP, "_PARENT"])
        .agg(pl.col("COUNT").sum().alias("_S"))
    )
    parents = family.select(
        *GROUP, pl.col("_CELL").alias("_PARENT"), "COUNT", pl.col(FILE).alias("_F"),
        pl.col(LINE).alias("_L"),
    )  # fmt: skip
    both = parents.join(sums, on=[*GROUP, "_PARENT"], how="inner")
    bad = both.filter(pl.col("_S") != pl.col("COUNT"))
    report_each_file(
        log,
        at_row(
            bad,
            "_F",
            "_L",
            pl.format("cell {}: {} ≠ Σ cells below {}", "_PARENT", "COUNT", "_S").alias("_V"),
        ),
        "marginal_sum",
        f"a marginal of {design.name.upper()} is not the sum of the cells below it",
        value="_V",
    )


def _check_domain(
    family: pl.DataFrame, design: TableDesign, groups: Sequence[RunGroups], plans: Sequence[HPlan],
    log: ProblemLog,
) -> None:  # fmt: skip
    """``domain``, ``stat_level`` and ``missing_group`` against the runs' T1 groups."""
    frames = []
    for run, plan in zip(groups, plans, strict=True):
        for (geo, lv), lg in run.levels.items():
            q = plan.query(design.name, geo.value, lv)
            if q is None or lg.size == 0:
                continue
            ids, codes = lg.series()
            frames.append(
                pl.DataFrame(
                    {
                        "REGION_ID": ids,
                        "ITERATION_CODE": codes,
                        "_WANT": design.stat_level(lg.t1_count, q.thresholds).astype("int64"),
                    }
                ).with_columns(pl.lit(geo.value).alias("REGION_TYPE"))
            )
    want = pl.concat(frames, how="diagonal") if frames else pl.DataFrame(
        schema={**dict.fromkeys(GROUP, pl.String), "_WANT": pl.Int64}
    )  # fmt: skip
    firsts = family.filter(pl.struct(GROUP).is_first_distinct())
    joined = firsts.join(want, on=GROUP, how="left")
    report_each_file(
        log,
        joined.filter(pl.col("_WANT").is_null()),
        "domain",
        "not a T1 group tabulated at this REGION_TYPE and iteration level (with a budget)",
        column="ITERATION_CODE",
    )
    tables = {lv: design.table(lv) for lv in range(design.levels)}
    wrong = joined.filter(pl.col("_WANT").is_not_null() & (pl.col("_WANT") != pl.col("_LEVEL")))
    report_each_file(
        log,
        wrong.with_columns(
            pl.format(
                "in {}, T1 count selects {}",
                pl.col("_LEVEL").replace_strict(tables, return_dtype=pl.String),
                pl.col("_WANT").replace_strict(tables, return_dtype=pl.String),
            ).alias("_V")
        ),
        "stat_level",
        "the group's table is not the one its T1 count selects",
        value="_V",
    )
    missing = want.join(firsts.select(GROUP), on=GROUP, how="anti")
    if missing.height:
        first = missing.row(0, named=True)
        log.add_many(
            missing.height,
            [
                Problem(
                    f"{design.name}/",
                    "missing_group",
                    f"a tabulated T1 group has no {design.name.upper()} row",
                    value=f"{first['REGION_TYPE']} {first['REGION_ID']} {first['ITERATION_CODE']}",
                )
            ],
        )


def validate_output(
    directory: str | Path,
    *,
    rules: OutputRulesH | None = None,
    groups: Sequence[RunGroups] | None = None,
    plans: Sequence[HPlan] | None = None,
) -> ValidationSummary:
    """Check the six tables of a SafeTab-H release folder (module docstring). ``rules``:
    default the config recorded in ``release.json``; ``groups`` and ``plans`` (each run's
    T1 groups and plan) enable ``domain``, ``stat_level`` and ``missing_group``. Raises
    :class:`~privtab.publish.validation.OutputValidationError`; returns what was checked."""
    d = Path(directory)
    summary = ValidationSummary(str(d), checks=list(ALWAYS))
    if rules is None and (d / "release.json").is_file():
        try:
            doc = json.loads((d / "release.json").read_text(encoding="utf-8"))
            rules = OutputRulesH.from_release_json(doc)
        except (OSError, ValueError):
            rules = None
    summary.rules_source = rules.source if rules is not None else ""
    log = ProblemLog()
    for design in DESIGNS.values():
        family = _read_family(d, design, rules, log, summary.files)
        _check_tables(family, design, log)
        if groups is not None and plans is not None and family.height:
            _check_domain(family, design, groups, plans, log)
    if groups is not None and plans is not None:
        summary.checks += ["domain", "stat_level", "missing_group"]
    else:
        summary.skipped["domain"] = "needs the T1, the GRF-C and the config (--data, --t1)"
    note_config_checks(summary, None if rules is None else rules.allow_negative_counts)
    if log:
        raise OutputValidationError(log.problems, log.counts)
    return summary


def _recorded_config(doc: Mapping[str, Any]) -> Path | None:
    """The config a release was made with, when it is privtab's packaged NMFv5 (the
    ``source_sha256`` of ``release.json`` says so; release.json names no paths)."""
    from privtab.data.inputs import sha256_file
    from privtab.data.resources import production_config_dir_h

    cfg = doc.get("config")
    sha = cfg.get("source_sha256") if isinstance(cfg, dict) else None
    packaged = production_config_dir_h() / "config.json"
    return packaged if sha and sha == sha256_file(packaged) else None


def validate_paths(
    directory: str | Path,
    *,
    config: str | Path | None = None,
    data: str | Path | None = None,
    t1: str | Path | None = None,
) -> ValidationSummary:
    """:func:`validate_output` from paths (``privtab safetab-h validate-output``): with
    ``data`` (GRF-C, and the T1 unless ``t1`` names it) the domain checks run too."""
    from privtab.errors import UsageError
    from privtab.safetab_h.config import read_config
    from privtab.safetab_h.inputs import load_domain, resolve_config_path

    d = Path(directory)
    if not d.is_dir():
        raise UsageError(f"release folder {d} not found")
    path = resolve_config_path(config) if config is not None else None
    if path is None and (d / "release.json").is_file():
        path = _recorded_config(json.loads((d / "release.json").read_text(encoding="utf-8")))
    if data is None or path is None:
        rules = OutputRulesH.from_config(read_config(path)) if path is not None else None
        return validate_output(d, rules=rules)
    cfg, groups, plans = load_domain(path, Path(data), None if t1 is None else Path(t1))
    return validate_output(d, rules=OutputRulesH.from_config(cfg), groups=groups, plans=plans)
