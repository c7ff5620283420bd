"""A simulated SafeTab-like release (T1/T2 in the engine's layout) for the analysis tests.

Each group has a true total; a stage-1 noisy total (variance V₁) picks the statistics level
by thresholds (SafeTab seed Alg. 2): level 0 publishes a stage-2 total, levels 1–3 publish
Sex × Age4/Age9/Age23 cells (8/18/46 cells) whose sum is the T1 count. Some groups are
TotalOnly (no stage 1). Noise is drawn with a SeededSource (not private: tests only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from privtab.mechanisms import LinearNoise, mechanism_from_spec
from privtab.random import SeededSource

THRESHOLDS = (20.0, 60.0, 150.0)
CELLS = {0: 0, 1: 8, 2: 18, 3: 46}


@dataclass
class SimRelease:
    t1: pl.DataFrame
    t2: pl.DataFrame
    true_total: np.ndarray
    true_cells: dict[tuple[str, str, str], np.ndarray]


def simulate(
    groups: int,
    *,
    noise: str = "discrete_gaussian",
    stage1_scale: float = 40.0,
    total_scale: float = 4.0,
    cell_scale: float = 2.0,
    total_only: int = 0,
    seed: int = 1,
    true_totals: np.ndarray | None = None,
) -> SimRelease:
    rng = np.random.default_rng(seed)
    src = SeededSource(seed)
    m1 = mechanism_from_spec(noise, scale=stage1_scale)
    m0 = mechanism_from_spec(noise, scale=total_scale)
    mc = mechanism_from_spec(noise, scale=cell_scale)
    totals = (
        true_totals if true_totals is not None else rng.integers(0, 400, size=groups + total_only)
    )
    s1 = totals[:groups] + m1.sample_noise(groups, source=src)
    e0 = m0.sample_noise(groups + total_only, source=src)
    ec = mc.sample_noise((groups, 46), source=src)
    v0, v1, vc = m0.variance, m1.variance, mc.variance
    moe0, moec = m0.moe(0.95), mc.moe(0.95)
    moe_sum = {k: int(LinearNoise([(1, mc)] * k).moe(0.95)) for k in (8, 18, 46)}
    levels = np.searchsorted(np.array(THRESHOLDS), s1, side="left")
    t1_rows, t2_rows = [], []
    true_cells: dict[tuple[str, str, str], np.ndarray] = {}
    for i in range(groups + total_only):
        key = (f"{i:05d}", "COUNTY", "A01")
        if i >= groups:
            c = int(totals[i] + e0[i])
            t1_rows.append(
                (
                    *key,
                    c,
                    -1,
                    "total_only",
                    noise,
                    total_scale,
                    v0,
                    moe0,
                    None,
                    None,
                    None,
                )
            )
            continue
        lvl = int(levels[i])
        if lvl == 0:
            c = int(totals[i] + e0[i])
            t1_rows.append(
                (
                    *key,
                    c,
                    0,
                    "stage2_total",
                    noise,
                    total_scale,
                    v0,
                    moe0,
                    int(s1[i]),
                    stage1_scale,
                    v1,
                )
            )
            continue
        k = CELLS[lvl]
        cells = rng.multinomial(int(totals[i]), np.full(k, 1.0 / k))
        true_cells[key] = cells
        noisy = cells + ec[i, :k]
        for j in range(k):
            t2_rows.append(
                (
                    *key,
                    str(j // 2),
                    str(j // 2),
                    str(1 + j % 2),
                    int(noisy[j]),
                    noise,
                    cell_scale,
                    vc,
                    moec,
                )
            )
        t1_rows.append(
            (
                *key,
                int(noisy.sum()),
                lvl,
                "sum_of_t2",
                noise,
                cell_scale,
                k * vc,
                moe_sum[k],
                int(s1[i]),
                stage1_scale,
                v1,
            )
        )
    t1 = pl.DataFrame(
        t1_rows,
        schema={
            "REGION_ID": pl.String, "REGION_TYPE": pl.String, "ITERATION_CODE": pl.String,
            "COUNT": pl.Int64, "STAT_LEVEL": pl.Int8, "COUNT_SOURCE": pl.String,
            "NOISE": pl.String, "NOISE_SCALE": pl.Float64, "VARIANCE": pl.Float64,
            "MOE95": pl.Int64, "STAGE1_COUNT": pl.Int64, "STAGE1_NOISE_SCALE": pl.Float64,
            "STAGE1_VARIANCE": pl.Float64,
        },
        orient="row",
    )  # fmt: skip
    t2 = pl.DataFrame(
        t2_rows,
        schema={
            "REGION_ID": pl.String, "REGION_TYPE": pl.String, "ITERATION_CODE": pl.String,
            "AGESTART": pl.String, "AGEEND": pl.String, "SEX": pl.String, "COUNT": pl.Int64,
            "NOISE": pl.String, "NOISE_SCALE": pl.Float64, "VARIANCE": pl.Float64,
            "MOE95": pl.Int64,
        },
        orient="row",
    )  # fmt: skip
    return SimRelease(t1, t2, np.asarray(totals), true_cells)
