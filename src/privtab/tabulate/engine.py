"""The SafeTab-P algorithm for one population-group level (SafeTab seed Algorithms 1–3).

For a level *i* (geography level × iteration level) with plan ``b_i``, stability ``s_i``,
stage-1 fraction γ and thresholds θ1 < θ2 < θ3, every population group of the level's
**public** domain — every region of the geography reference file × every iteration of the
level (empty groups included, never taken from the data) — is tabulated:

* a TotalOnly group (a DETAILED_ONLY iteration, at USA / STATE / PR-STATE) gets one noisy
  total with parameter ``b_i/s_i`` (Algorithm 2, line 9);
* every other group gets a stage-1 noisy total with ``γ·b_i/s_i`` (line 15); its statistic
  level is ``digitize(total, θ)``: below θ1 → a new total, then Sex × Age4, Sex × Age9,
  Sex × Age23 cells, each with ``(1−γ)·b_i/s_i`` (lines 18–31).

Privacy (seed Theorems 1 and 3): one person is in at most ``s_i`` groups of the level
(:func:`privtab.data.level_stability`); within a group the stage-2 statistics form a
histogram (a person is in one cell), so each group costs ``b_i/s_i`` by sequential
composition, the level ``b_i`` by generalized parallel composition (Lemmas 9, 10) and the
run ``Σ b_i``. Noise comes from the exact samplers of :mod:`privtab.random` (geometric =
discrete Laplace with scale 1/ε; discrete Gaussian with σ² = 1/(2ρ)).

The T1 count of a group with Sex × Age cells is the sum of its noisy cells (post-processing,
as in production); the stage-1 total is published too (it has been paid for), so users can
combine both (:mod:`privtab.analysis`).

Work: true counts come from the aggregated cells (:mod:`privtab.tabulate.aggregate`):
cells → regions (one ``take``) → iterations (join with the expansion of the distinct code
combinations) → dense arrays over the level's domain (``bincount``). Memory is
O(regions × iterations) per level, independent of the number of persons.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import NDArray

from privtab.data import (
    RACE_KEYS,
    STAT_LEVEL_BINS,
    UNIT,
    Geography,
    GeoLevel,
    Granularity,
    ReferenceData,
    expand_iterations,
)
from privtab.random import RandomSource
from privtab.tabulate.aggregate import COMBO, Cells
from privtab.tabulate.errors import CountError, count_error
from privtab.tabulate.plan import LevelPlan, StagePlan

__all__ = [
    "T1_SCHEMA",
    "T2_SCHEMA",
    "Domain",
    "LevelResult",
    "combo_iterations",
    "level_domain",
    "merge_results",
    "tabulate_groups",
    "tabulate_level",
    "true_counts",
    "unit_regions",
]

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

TOTAL_ONLY = -1
"""STAT_LEVEL of TotalOnly groups (no stage 1)."""


@dataclass
class LevelResult:
    """Outputs and statistics of one level (T1/T2 frames; evaluation only on request)."""

    plan: LevelPlan
    regions: int
    iterations: int
    t1: pl.DataFrame
    t2: pl.DataFrame
    stat_levels: dict[int, int]
    noise_draws: int
    memberships: int
    evaluation: dict[str, Any] = field(default_factory=dict)
    t1_rows: int = 0
    t2_rows: int = 0
    stages_used: frozenset[str] = frozenset()
    """The stages whose mechanisms drew noise (``stage1``, ``stage2``, ``total``)."""

    def without_tables(self) -> LevelResult:
        """This chunk's summary with empty T1/T2 (once its tables have been written)."""
        return replace(self, t1=self.t1.clear(), t2=self.t2.clear())

    def summary(self) -> dict[str, Any]:
        return {
            "level": self.plan.key,
            "regions": self.regions,
            "iterations": self.iterations,
            "groups": self.regions * self.iterations,
            "t1_rows": self.t1_rows,
            "t2_rows": self.t2_rows,
            "noise_draws": self.noise_draws,
            "stat_levels": {str(k): v for k, v in sorted(self.stat_levels.items())},
        }


@dataclass(frozen=True)
class Domain:
    """The public domain of a level (or of a slice of its regions): regions × iterations,
    group ``G = region_index · I + iteration_index`` (region-major)."""

    geo: GeoLevel
    regions: tuple[str, ...]
    codes: tuple[str, ...]
    total_only: NDArray[np.bool_]  # per iteration
    first_region: int = 0
    """Index of ``regions[0]`` in the level's full domain (for slices)."""

    @property
    def size(self) -> int:
        return len(self.regions) * len(self.codes)

    def slice(self, lo: int, hi: int) -> Domain:
        """Regions ``lo:hi`` (indices into this domain) with every iteration."""
        return Domain(
            self.geo,
            self.regions[lo:hi],
            self.codes,
            self.total_only,
            self.first_region + lo,
        )


def level_domain(plan: LevelPlan, geography: Geography, reference: ReferenceData) -> Domain:
    """The public domain of ``plan``'s level, from the GRF-C and the reference files."""
    geo = GeoLevel(plan.geo)
    its = reference.select(plan.iteration_level, geo.granularity)
    detailed = geo.granularity is Granularity.DETAILED
    return Domain(
        geo=geo,
        regions=geography.domain(geo),
        codes=tuple(i.code for i in its),
        total_only=np.array([detailed and bool(i.detailed_only) for i in its], dtype=np.bool_),
    )


def unit_regions(geography: Geography, geo: GeoLevel) -> NDArray[np.int64]:
    """Region index (in the level's sorted domain) of every UNIT, −1 outside the level."""
    units = geography.units.select(UNIT, pl.col(geo.value).to_physical().alias("_R"))
    top = units[UNIT].max()
    out = np.full(int(top) + 1 if isinstance(top, int) else 1, -1, dtype=np.int64)
    reg = units["_R"].fill_null(-1).to_numpy()
    out[units[UNIT].to_numpy()] = reg
    return out


def combo_iterations(
    cells: Cells, dom: Domain, reference: ReferenceData, level: int
) -> pl.DataFrame:
    """``COMBO`` → ``_I`` (iteration index in ``dom.codes``) for every combination and
    every iteration of the level it belongs to (:func:`privtab.data.expand_iterations`)."""
    expansion = expand_iterations(cells.combos, reference, level, dom.geo.granularity)
    index = {c: i for i, c in enumerate(dom.codes)}
    return (
        expansion.join(cells.combos, on=[*RACE_KEYS, "QSPAN"], how="inner")
        .select(
            COMBO,
            pl.col("ITERATION_CODE")
            .cast(pl.String)
            .replace_strict(index, default=None, return_dtype=pl.Int64)
            .alias("_I"),
        )
        .drop_nulls()
    )


def true_counts(
    cells: Cells,
    dom: Domain,
    geography: Geography,
    combo_it: pl.DataFrame,
) -> pl.DataFrame:
    """Exact person counts per (``G``, ``QSEX``, ``QAGE``) of the groups of ``dom``
    (``G`` indexes ``dom`` region-major from 0). Groups with no persons have no rows.
    ``combo_it`` is :func:`combo_iterations` of the level."""
    n_it = len(dom.codes)
    empty = pl.DataFrame(schema={"G": pl.Int64, "QSEX": pl.UInt8, "QAGE": pl.UInt8, "N": pl.Int64})
    if cells.cells.height == 0 or n_it == 0 or not dom.regions:
        return empty
    # int32 region per cell, then only the cells inside the slice: a few bytes per cell
    # of transient memory (levels like AIANNH see every cell of the nation)
    unit_region = unit_regions(geography, dom.geo).astype(np.int32)
    units = cells.cells[UNIT].to_numpy()
    if int(units.max()) >= len(unit_region):
        unit_region = np.concatenate(
            [unit_region, np.full(int(units.max()) + 1 - len(unit_region), -1, np.int32)]
        )
    region = unit_region[units]
    region -= np.int32(dom.first_region)
    keep = (region >= 0) & (region < len(dom.regions))
    if not keep.any():
        return empty
    sel: slice | NDArray[np.intp] = slice(None) if keep.all() else np.flatnonzero(keep)
    del keep
    # one UInt64 key per (region, combination, sex, age): single-key group-bys are fast
    key = region[sel].astype(np.uint64) << np.uint64(32)
    del region
    key |= cells.cells[COMBO].to_numpy()[sel].astype(np.uint64) << np.uint64(8)
    key |= (cells.cells["QSEX"].to_numpy()[sel].astype(np.uint64) - np.uint64(1)) << np.uint64(7)
    key |= cells.cells["QAGE"].to_numpy()[sel].astype(np.uint64)
    counts = cells.cells["N"].to_numpy()[sel]
    by_region = (
        pl.DataFrame({"K": key, "N": counts})
        .group_by("K")
        .agg(pl.col("N").sum().cast(pl.Int64))
        .with_columns(
            (pl.col("K") // (1 << 32)).cast(pl.Int64).alias("_R"),
            ((pl.col("K") // 256) % (1 << 24)).cast(pl.UInt32).alias(COMBO),
            (pl.col("K") % 256).cast(pl.UInt16).alias("_SA"),
        )
    )
    fine = (
        by_region.join(combo_it, on=COMBO, how="inner")
        .select(((pl.col("_R") * n_it + pl.col("_I")) * 256 + pl.col("_SA")).alias("K2"), "N")
        .group_by("K2")
        .agg(pl.col("N").sum())
    )
    return fine.select(
        (pl.col("K2") // 256).cast(pl.Int64).alias("G"),
        ((pl.col("K2") // 128) % 2 + 1).cast(pl.UInt8).alias("QSEX"),
        (pl.col("K2") % 128).cast(pl.UInt8).alias("QAGE"),
        "N",
    )


class _Noise:
    """Draws noise for a stage (or returns zeros when noise is off, for tests)."""

    def __init__(self, source: RandomSource | None, enabled: bool) -> None:
        self.source = source
        self.enabled = enabled
        self.draws = 0
        self.used: set[str] = set()

    def __call__(self, stage: StagePlan, size: int) -> NDArray[np.int64]:
        """``size`` draws of ``stage``'s noise; the stage is recorded as used (charged by
        :class:`privtab.tabulate.charges.RunLedger`) whenever it draws anything."""
        self.draws += size
        if size > 0:
            self.used.add(stage.stage)
        if not self.enabled or size == 0:
            return np.zeros(size, dtype=np.int64)
        return np.asarray(stage.mechanism.sample_noise(size, source=self.source), dtype=np.int64)


def _categorical(values: tuple[str, ...], index: NDArray[np.int64]) -> pl.Series:
    """``values[index]`` as a String column (a gather in polars: no Python strings)."""
    return pl.Series(values, dtype=pl.String).gather(index)


def _evaluate(
    name: str, noisy: NDArray[np.int64], true: NDArray[np.int64], err: CountError
) -> dict[str, Any]:
    e = (noisy - true).astype(np.float64)
    n = int(e.size)
    if n == 0:
        return {"count": 0}
    within = float(np.mean(np.abs(e) <= err.moe95))
    return {
        "count": n,
        "mean_error": float(e.mean()),
        "rmse": float(np.sqrt(np.mean(e * e))),
        "expected_rmse": float(np.sqrt(err.variance)),
        "moe95": err.moe95,
        "within_moe95": within,
        "expected_within_moe95": err.coverage,
        "binomial_se": float(np.sqrt(err.coverage * (1 - err.coverage) / n)),
    }


def tabulate_level(
    plan: LevelPlan,
    cells: Cells,
    reference: ReferenceData,
    geography: Geography,
    *,
    source: RandomSource | None,
    noise: bool = True,
    evaluate: bool = False,
    nonnegative: bool = False,
) -> LevelResult:
    """Run Algorithms 1–3 of the SafeTab seed for one whole level (see :func:`tabulate_groups`)."""
    dom = level_domain(plan, geography, reference)
    combo_it = combo_iterations(cells, dom, reference, plan.iteration_level)
    fine = true_counts(cells, dom, geography, combo_it)
    return tabulate_groups(
        plan, dom, fine, source=source, noise=noise, evaluate=evaluate, nonnegative=nonnegative
    )


def tabulate_groups(
    plan: LevelPlan,
    dom: Domain,
    fine: pl.DataFrame,
    *,
    source: RandomSource | None,
    noise: bool = True,
    evaluate: bool = False,
    nonnegative: bool = False,
) -> LevelResult:
    """Run Algorithms 1–3 of the SafeTab seed for the groups of ``dom`` (a level or a slice
    of its regions), whose exact counts per (group, sex, age) are ``fine``
    (:func:`true_counts`); see the module docstring.

    ``source`` must be secure for a publishable release (the caller checks); ``noise=False``
    is for tests only (exact counts, not private). ``evaluate`` compares the released counts
    with the truth — a non-private diagnostic that is never written to a release.
    ``nonnegative`` clamps published counts at 0 (post-processing: no privacy cost, but the
    clamped counts are biased upwards near 0; totals of groups with cells are then the sums
    of the clamped cells). Statistic levels always use the raw stage-1 totals.
    """
    n_reg, n_it = len(dom.regions), len(dom.codes)
    size = dom.size
    g_all = fine["G"].to_numpy()
    n_all = fine["N"].to_numpy()
    truth = np.bincount(g_all, weights=n_all, minlength=size).astype(np.int64)
    draw = _Noise(source, noise)
    noise_name = plan.stage1.noise

    total_only = np.tile(dom.total_only, n_reg)
    stat = np.full(size, TOTAL_ONLY, dtype=np.int8)
    count = np.zeros(size, dtype=np.int64)
    stage1 = np.zeros(size, dtype=np.int64)
    evaluation: dict[str, Any] = {}

    # TotalOnly groups: one total with b_i/s_i
    to_idx = np.flatnonzero(total_only)
    count[to_idx] = truth[to_idx] + draw(plan.total, to_idx.size)
    # stage 1 for the adaptive groups
    ad_idx = np.flatnonzero(~total_only)
    stage1[ad_idx] = truth[ad_idx] + draw(plan.stage1, ad_idx.size)
    stat[ad_idx] = plan.stat_level(stage1[ad_idx])
    # stage 2, statistic level 0: a new total
    lv0 = ad_idx[stat[ad_idx] == 0]
    count[lv0] = truth[lv0] + draw(plan.stage2, lv0.size)

    e_total = count_error(plan.total.mechanism)
    e_stage2 = count_error(plan.stage2.mechanism)
    e_stage1 = count_error(plan.stage1.mechanism)
    variance = np.zeros(size)
    moe = np.zeros(size, dtype=np.int64)
    source_col = np.zeros(size, dtype=np.int8)  # 0 total_only, 1 stage2_total, 2 sum_of_t2
    variance[to_idx], moe[to_idx] = e_total.variance, e_total.moe95
    variance[lv0], moe[lv0] = e_stage2.variance, e_stage2.moe95
    source_col[lv0] = 1
    if evaluate:
        evaluation["total_only"] = _evaluate("total_only", count[to_idx], truth[to_idx], e_total)
        evaluation["stage1"] = _evaluate("stage1", stage1[ad_idx], truth[ad_idx], e_stage1)
        evaluation["stage2_total"] = _evaluate("stage2_total", count[lv0], truth[lv0], e_stage2)

    t2_parts: list[pl.DataFrame] = []
    stat_counts = {TOTAL_ONLY: int(to_idx.size)}
    stat_counts[0] = int(lv0.size)
    cell_true_all: list[NDArray[np.int64]] = []
    cell_noisy_all: list[NDArray[np.int64]] = []
    for k in (1, 2, 3):
        bins = STAT_LEVEL_BINS[k]
        assert bins is not None
        groups = ad_idx[stat[ad_idx] == k]
        stat_counts[k] = int(groups.size)
        if groups.size == 0:
            continue
        n_cells = 2 * bins.n_bins
        pos = np.full(size, -1, dtype=np.int64)
        pos[groups] = np.arange(groups.size)
        p = pos[g_all]
        keep = p >= 0
        sex = fine["QSEX"].to_numpy()[keep].astype(np.int64)
        age_bin = bins.lookup()[fine["QAGE"].to_numpy()[keep]].astype(np.int64)
        flat = p[keep] * n_cells + (sex - 1) * bins.n_bins + age_bin
        cell_true = np.bincount(flat, weights=n_all[keep], minlength=groups.size * n_cells)
        cell_true = cell_true.astype(np.int64)
        cell_noisy = cell_true + draw(plan.stage2, cell_true.size)
        if nonnegative:
            np.maximum(cell_noisy, 0, out=cell_noisy)
        count[groups] = cell_noisy.reshape(groups.size, n_cells).sum(axis=1)
        e_sum = count_error(plan.stage2.mechanism, n_cells)
        variance[groups], moe[groups] = e_sum.variance, e_sum.moe95
        source_col[groups] = 2
        if evaluate:
            evaluation[f"sum_of_t2_level{k}"] = _evaluate(
                "sum", count[groups], truth[groups], e_sum
            )
            cell_true_all.append(cell_true)
            cell_noisy_all.append(cell_noisy)
        bounds = bins.bounds()
        starts = tuple(str(a) for a, _ in bounds)
        ends = tuple(str(b) for _, b in bounds)
        rep_g = np.repeat(groups, n_cells)
        within = np.tile(np.arange(n_cells), groups.size)
        t2_parts.append(
            pl.DataFrame(
                {
                    "REGION_ID": _categorical(dom.regions, rep_g // n_it),
                    "REGION_TYPE": pl.Series([dom.geo.value]).extend_constant(
                        dom.geo.value, rep_g.size - 1
                    ),
                    "ITERATION_CODE": _categorical(dom.codes, rep_g % n_it),
                    "AGESTART": _categorical(starts, within % bins.n_bins),
                    "AGEEND": _categorical(ends, within % bins.n_bins),
                    "SEX": _categorical(("1", "2"), within // bins.n_bins),
                    "COUNT": cell_noisy,
                    "NOISE": pl.Series([noise_name]).extend_constant(noise_name, rep_g.size - 1),
                    "NOISE_SCALE": np.full(rep_g.size, plan.stage2.noise_scale),
                    "VARIANCE": np.full(rep_g.size, e_stage2.variance),
                    "MOE95": np.full(rep_g.size, e_stage2.moe95, dtype=np.int64),
                },
                schema=T2_SCHEMA,
            )
        )
    if evaluate and cell_true_all:
        evaluation["t2_cells"] = _evaluate(
            "t2", np.concatenate(cell_noisy_all), np.concatenate(cell_true_all), e_stage2
        )

    if nonnegative:
        np.maximum(count, 0, out=count)
        np.maximum(stage1, 0, out=stage1)
    g = np.arange(size, dtype=np.int64)
    sources = ("total_only", "stage2_total", "sum_of_t2")
    has1 = ~total_only
    t1 = pl.DataFrame(
        {
            "REGION_ID": _categorical(dom.regions, g // n_it)
            if size
            else pl.Series([], dtype=pl.String),
            "REGION_TYPE": pl.Series([dom.geo.value] * min(size, 1)).extend_constant(
                dom.geo.value, max(size - 1, 0)
            ),
            "ITERATION_CODE": _categorical(dom.codes, g % n_it)
            if size
            else pl.Series([], dtype=pl.String),
            "COUNT": count,
            "STAT_LEVEL": stat,
            "COUNT_SOURCE": _categorical(sources, source_col.astype(np.int64))
            if size
            else pl.Series([], dtype=pl.String),
            "NOISE": pl.Series([noise_name] * min(size, 1)).extend_constant(
                noise_name, max(size - 1, 0)
            ),
            "NOISE_SCALE": np.where(total_only, plan.total.noise_scale, plan.stage2.noise_scale),
            "VARIANCE": variance,
            "MOE95": moe,
            "STAGE1_COUNT": pl.Series(stage1).set(pl.Series(~has1), None)
            if size
            else pl.Series([], dtype=pl.Int64),
            "STAGE1_NOISE_SCALE": np.where(has1, plan.stage1.noise_scale, np.nan),
            "STAGE1_VARIANCE": np.where(has1, e_stage1.variance, np.nan),
        },
        schema=T1_SCHEMA,
        nan_to_null=True,
    )
    t2 = pl.concat(t2_parts) if t2_parts else pl.DataFrame(schema=T2_SCHEMA)
    return LevelResult(
        plan=plan,
        regions=n_reg,
        iterations=n_it,
        t1=t1,
        t2=t2,
        stat_levels=stat_counts,
        noise_draws=draw.draws,
        memberships=int(truth.sum()),
        evaluation=evaluation,
        t1_rows=t1.height,
        t2_rows=t2.height,
        stages_used=frozenset(draw.used),
    )


def _merge_evaluation(parts: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    kinds = {k for p in parts for k in p}
    for kind in sorted(kinds):
        evs = [p[kind] for p in parts if p.get(kind, {}).get("count", 0) > 0]
        n = sum(e["count"] for e in evs)
        if n == 0:
            out[kind] = {"count": 0}
            continue
        cov = sum(e["expected_within_moe95"] * e["count"] for e in evs) / n
        out[kind] = {
            "count": n,
            "mean_error": sum(e["mean_error"] * e["count"] for e in evs) / n,
            "rmse": float(np.sqrt(sum(e["rmse"] ** 2 * e["count"] for e in evs) / n)),
            "expected_rmse": evs[0]["expected_rmse"],
            "moe95": evs[0]["moe95"],
            "within_moe95": sum(e["within_moe95"] * e["count"] for e in evs) / n,
            "expected_within_moe95": cov,
            "binomial_se": float(np.sqrt(cov * (1 - cov) / n)),
        }
    return out


def merge_results(parts: list[LevelResult]) -> LevelResult:
    """One level's summary from its chunks (tables dropped: they have been written)."""
    if not parts:
        raise ValueError("a level has at least one chunk")
    stat: dict[int, int] = {}
    for p in parts:
        for k, v in p.stat_levels.items():
            stat[k] = stat.get(k, 0) + v
    return LevelResult(
        plan=parts[0].plan,
        regions=sum(p.regions for p in parts),
        iterations=parts[0].iterations,
        t1=parts[0].t1.clear(),
        t2=parts[0].t2.clear(),
        stat_levels=stat,
        noise_draws=sum(p.noise_draws for p in parts),
        memberships=sum(p.memberships for p in parts),
        evaluation=_merge_evaluation([p.evaluation for p in parts]),
        t1_rows=sum(p.t1_rows for p in parts),
        t2_rows=sum(p.t2_rows for p in parts),
        stages_used=frozenset().union(*(p.stages_used for p in parts)),
    )
