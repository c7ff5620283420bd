"""T1 and T2 of one chunk as frames: the noisy counts and the error of every row.

Built from :class:`~privtab.tabulate.algorithm.NoisyGroups` — post-processing of noisy
values and the public plan only (the exact counts it carries are not read here).

* T1 (:data:`T1_SCHEMA`): one row per population group — the Census columns
  ``REGION_ID|REGION_TYPE|ITERATION_CODE|COUNT``, then the statistic level, where the count
  comes from, its noise law and exact error, and the stage-1 total with its law;
* T2 (:data:`T2_SCHEMA`): one row per Sex × Age cell of the groups that received cells —
  ``REGION_ID|REGION_TYPE|ITERATION_CODE|AGESTART|AGEEND|SEX|COUNT``, then the error.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from numpy.typing import NDArray

from privtab.mechanisms.counts import count_error
from privtab.tabulate.algorithm import TOTAL_ONLY, CellTable, NoisyGroups
from privtab.tabulate.domain import Domain
from privtab.tabulate.plan import LevelPlan

__all__ = ["T1_SCHEMA", "T2_SCHEMA", "t1_frame", "t2_frame"]

T1_SCHEMA: dict[str, Any] = {
    "REGION_ID": pl.String,
    "REGION_TYPE": pl.String,
    "ITERATION_CODE": pl.String,
    "COUNT": pl.Int64,
    "STAT_LEVEL": pl.Int8,
    "COUNT_SOURCE": pl.String,
    "NOISE": pl.String,
    "NOISE_SCALE": pl.Float64,
    "VARIANCE": pl.Float64,
    "MOE95": pl.Int64,
    "STAGE1_COUNT": pl.Int64,
    "STAGE1_NOISE_SCALE": pl.Float64,
    "STAGE1_VARIANCE": pl.Float64,
}
"""T1: the Census columns REGION_ID|REGION_TYPE|ITERATION_CODE|COUNT, then the error."""
T2_SCHEMA: dict[str, Any] = {
    "REGION_ID": pl.String,
    "REGION_TYPE": pl.String,
    "ITERATION_CODE": pl.String,
    "AGESTART": pl.String,
    "AGEEND": pl.String,
    "SEX": pl.String,
    "COUNT": pl.Int64,
    "NOISE": pl.String,
    "NOISE_SCALE": pl.Float64,
    "VARIANCE": pl.Float64,
    "MOE95": pl.Int64,
}
"""T2: the Census columns REGION_ID|…|AGESTART|AGEEND|SEX|COUNT, then the error."""

SOURCES = ("total_only", "stage2_total", "sum_of_t2")


def _gather(values: tuple[str, ...], index: NDArray[np.int64]) -> pl.Series:
    """``values[index]`` as a String column (a gather in polars: no Python strings)."""
    return pl.Series(values, dtype=pl.String).gather(index)


def _constant(value: str, n: int) -> pl.Series:
    return pl.Series([value] * min(n, 1), dtype=pl.String).extend_constant(value, max(n - 1, 0))


def _errors(
    plan: LevelPlan, stat: NDArray[np.int8]
) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
    """Variance, exact MOE95 and count source (index into :data:`SOURCES`) of groups at
    statistic levels ``stat`` (a lookup by level: −1 TotalOnly total, 0 stage-2 total,
    1..3 the sum of ``2 · bins`` cells)."""
    from privtab.data.ages import STAT_LEVEL_BINS

    variance = np.zeros(5)
    moe = np.zeros(5, dtype=np.int64)
    source = np.array([0, 1, 2, 2, 2], dtype=np.int64)
    present = np.unique(stat).tolist() if stat.size else []
    for level in present:
        if level == TOTAL_ONLY:
            e = count_error(plan.total.mechanism)
        elif level == 0:
            e = count_error(plan.stage2.mechanism)
        else:
            bins = STAT_LEVEL_BINS[level]
            assert bins is not None
            e = count_error(plan.stage2.mechanism, 2 * bins.n_bins)
        variance[level + 1], moe[level + 1] = e.variance, e.moe95
    at = stat.astype(np.int64) + 1
    return variance[at], moe[at], source[at]


def t1_frame(
    plan: LevelPlan, dom: Domain, out: NoisyGroups, rows: NDArray[np.int64] | None = None
) -> pl.DataFrame:
    """One T1 row per group of ``dom`` (region-major) with its error — or only the groups
    ``rows`` (indices into ``dom``, increasing), e.g. those zero suppression keeps."""
    g = np.arange(dom.size, dtype=np.int64) if rows is None else rows
    n = g.size
    n_it = max(len(dom.codes), 1)
    stat = out.stat[g]
    total_only = out.total_only[g]
    variance, moe, source = _errors(plan, stat)
    has1 = ~total_only
    e_stage1 = count_error(plan.stage1.mechanism)
    return pl.DataFrame(
        {
            "REGION_ID": _gather(dom.regions, g // n_it),
            "REGION_TYPE": _constant(dom.geo.value, n),
            "ITERATION_CODE": _gather(dom.codes, g % n_it),
            "COUNT": out.count[g],
            "STAT_LEVEL": stat,
            "COUNT_SOURCE": _gather(SOURCES, source),
            "NOISE": _constant(plan.stage1.noise, n),
            "NOISE_SCALE": np.where(total_only, plan.total.noise_scale, plan.stage2.noise_scale),
            "VARIANCE": variance,
            "MOE95": moe,
            "STAGE1_COUNT": pl.Series(out.stage1[g], dtype=pl.Int64).set(pl.Series(~has1), None),
            "STAGE1_NOISE_SCALE": np.where(has1, plan.stage1.noise_scale, np.nan),
            "STAGE1_VARIANCE": np.where(has1, e_stage1.variance, np.nan),
        },
        schema=T1_SCHEMA,
        nan_to_null=True,
    )


def _cell_frame(plan: LevelPlan, dom: Domain, table: CellTable) -> pl.DataFrame:
    from privtab.data.ages import STAT_LEVEL_BINS

    bins = STAT_LEVEL_BINS[table.level]
    assert bins is not None
    n_it, n_cells = len(dom.codes), 2 * bins.n_bins
    rep_g = np.repeat(table.groups, n_cells)
    within = np.tile(np.arange(n_cells), table.groups.size)
    bounds = bins.bounds()
    e_cell = count_error(plan.stage2.mechanism)
    n = rep_g.size
    return pl.DataFrame(
        {
            "REGION_ID": _gather(dom.regions, rep_g // n_it),
            "REGION_TYPE": _constant(dom.geo.value, n),
            "ITERATION_CODE": _gather(dom.codes, rep_g % n_it),
            "AGESTART": _gather(tuple(str(a) for a, _ in bounds), within % bins.n_bins),
            "AGEEND": _gather(tuple(str(b) for _, b in bounds), within % bins.n_bins),
            "SEX": _gather(("1", "2"), within // bins.n_bins),
            "COUNT": table.noisy,
            "NOISE": _constant(plan.stage2.noise, n),
            "NOISE_SCALE": np.full(n, plan.stage2.noise_scale),
            "VARIANCE": np.full(n, e_cell.variance),
            "MOE95": np.full(n, e_cell.moe95, dtype=np.int64),
        },
        schema=T2_SCHEMA,
    )


def t2_frame(plan: LevelPlan, dom: Domain, out: NoisyGroups) -> pl.DataFrame:
    """One T2 row per Sex × Age cell of the groups that received cells."""
    parts = [_cell_frame(plan, dom, table) for table in out.cells]
    return pl.concat(parts) if parts else pl.DataFrame(schema=T2_SCHEMA)
