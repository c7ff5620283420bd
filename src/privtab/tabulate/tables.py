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

from privtab.tabulate.algorithm import CellTable, NoisyGroups
from privtab.tabulate.domain import Domain
from privtab.tabulate.errors import count_error
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


def _errors(plan: LevelPlan, out: NoisyGroups) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
    """Variance, exact MOE95 and count source (index into :data:`SOURCES`) per group."""
    size = out.count.size
    variance = np.zeros(size)
    moe = np.zeros(size, dtype=np.int64)
    source = np.zeros(size, dtype=np.int64)
    e_total, e_stage2 = count_error(plan.total.mechanism), count_error(plan.stage2.mechanism)
    variance[out.total_only], moe[out.total_only] = e_total.variance, e_total.moe95
    lv0 = out.stat == 0
    variance[lv0], moe[lv0], source[lv0] = e_stage2.variance, e_stage2.moe95, 1
    for table in out.cells:
        e_sum = count_error(plan.stage2.mechanism, 2 * table.n_bins)
        g = table.groups
        variance[g], moe[g], source[g] = e_sum.variance, e_sum.moe95, 2
    return variance, moe, source


def t1_frame(plan: LevelPlan, dom: Domain, out: NoisyGroups) -> pl.DataFrame:
    """One T1 row per group of ``dom`` (region-major), with its error."""
    size = dom.size
    n_it = max(len(dom.codes), 1)
    g = np.arange(size, dtype=np.int64)
    variance, moe, source = _errors(plan, out)
    has1 = ~out.total_only
    e_stage1 = count_error(plan.stage1.mechanism)
    return pl.DataFrame(
        {
            "REGION_ID": _gather(dom.regions, g // n_it),
            "REGION_TYPE": _constant(dom.geo.value, size),
            "ITERATION_CODE": _gather(dom.codes, g % n_it),
            "COUNT": out.published_count(),
            "STAT_LEVEL": out.stat,
            "COUNT_SOURCE": _gather(SOURCES, source),
            "NOISE": _constant(plan.stage1.noise, size),
            "NOISE_SCALE": np.where(
                out.total_only, plan.total.noise_scale, plan.stage2.noise_scale
            ),
            "VARIANCE": variance,
            "MOE95": moe,
            "STAGE1_COUNT": pl.Series(out.published_stage1(), dtype=pl.Int64).set(
                pl.Series(~has1), None
            ),
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
