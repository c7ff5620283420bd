"""Test helpers for the Census product: engine output → published rows → a release folder.

Until :mod:`privtab.tabulate.run` writes through :class:`~privtab.tabulate.output.
CensusWriter`, the tests build Census-layout releases here: the engine's level results
(noise seeded or off), production's zero suppression, sex marginals (the sum of each sex's
cells, with the noise law of that sum) and the writer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from privtab.data import SafeTabInputs, load_inputs
from privtab.random import SeededSource
from privtab.release.marking import parquet_metadata
from privtab.tabulate import ReleasePlan
from privtab.tabulate.engines import make_engine
from privtab.tabulate.errors import count_error
from privtab.tabulate.output import CensusWriter, OutputFile
from privtab.tabulate.plan import LevelPlan
from privtab.tabulate.suppression import suppress, suppression_rule

GROUP = ["REGION_ID", "REGION_TYPE", "ITERATION_CODE"]


@dataclass
class LevelTables:
    scope: str
    plan: LevelPlan
    t1: pl.DataFrame
    t2: pl.DataFrame


def engine_levels(
    inputs: SafeTabInputs, *, seed: int | None, levels: list[str] | None = None
) -> Iterator[LevelTables]:
    """Every level's raw (unclamped, unsuppressed) T1/T2 of a seeded (or noise-free) run."""
    engine = make_engine("polars")
    engine.prepare(inputs, lambda _m: None)
    source = SeededSource(seed if seed is not None else 0)
    try:
        for scope in inputs.config.scopes:
            plan = ReleasePlan.from_config(inputs.config, inputs.reference, scope)
            for lv in plan.levels:
                if levels is not None and lv.key not in levels:
                    continue
                parts = list(
                    engine.tabulate(
                        lv, source=source, noise=seed is not None, evaluate=False,
                        nonnegative=False,
                    )
                )  # fmt: skip
                yield LevelTables(
                    scope.value,
                    lv,
                    pl.concat([p.t1 for p in parts]),
                    pl.concat([p.t2 for p in parts]),
                )
    finally:
        engine.close()


def sex_marginals(t2: pl.DataFrame, plan: LevelPlan) -> pl.DataFrame:
    """Production's sex marginals: per group and sex, the sum of the cells, with
    ``AGESTART = AGEEND = "*"`` and the noise of that sum (k/2 cells)."""
    if t2.height == 0:
        return t2
    cells = t2.with_columns(pl.len().over(GROUP).alias("_K"))
    sums = cells.group_by([*GROUP, "SEX"], maintain_order=True).agg(
        pl.col("COUNT").sum(), pl.col("NOISE").first(), pl.col("NOISE_SCALE").first(),
        pl.col("VARIANCE").sum(), (pl.col("_K").first() // 2).alias("_H"),
    )  # fmt: skip
    moe = {h: count_error(plan.stage2.mechanism, h).moe95 for h in sums["_H"].unique().to_list()}
    return sums.select(
        *GROUP,
        pl.lit("*").alias("AGESTART"),
        pl.lit("*").alias("AGEEND"),
        "SEX",
        "COUNT",
        "NOISE",
        "NOISE_SCALE",
        "VARIANCE",
        pl.col("_H").replace_strict(moe, return_dtype=pl.Int64).alias("MOE95"),
    ).select(t2.columns)


def publish(
    level: LevelTables, chance: object, *, noise: bool = True
) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """The published rows of a level: production suppression (threshold 0 when noise is
    off, as production), then the sex marginals."""
    rule = suppression_rule(level.plan, chance, noise_on=noise)  # type: ignore[arg-type]
    res = suppress(level.t1, rule)
    t2 = pl.concat([level.t2, sex_marginals(level.t2, level.plan)])
    return res.t1, t2, res.removed


def write_census_release(
    config: Path,
    data: Path,
    out: Path,
    *,
    seed: int | None,
    chance: object = "config",
    formats: tuple[str, ...] = ("txt",),
) -> tuple[list[OutputFile], int]:
    """A Census-layout release folder of ``data`` (with a minimal ``release.json`` holding
    the config); returns the files and the number of suppressed rows."""
    inputs = load_inputs(config, data)
    c = inputs.config.zero_suppression_chance if chance == "config" else chance
    out.mkdir(parents=True)
    removed = 0
    with CensusWriter(out, formats=formats, metadata=parquet_metadata(False)) as w:
        current = None
        for lv in engine_levels(inputs, seed=seed):
            if lv.scope != current:
                w.start_run(lv.scope)
                current = lv.scope
            t1, t2, r = publish(lv, c, noise=seed is not None)
            removed += r
            w.write(t1, t2)
    (out / "release.json").write_text(json.dumps({"config": inputs.config.to_dict()}))
    return w.files, removed
