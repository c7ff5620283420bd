"""Test helpers for the Census product.

:func:`write_census_release` runs the real release (:func:`privtab.tabulate.run_release`,
seeded or noise off: NOT private); :func:`engine_levels` gives the engine's *raw* output
of the same seeded draws (unclamped, unsuppressed, no marginals), which the tests publish
independently and compare with what the run wrote.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from privtab.data import SafeTabInputs
from privtab.random import SeededSource
from privtab.tabulate import ReleasePlan
from privtab.tabulate.chunk import Drawing
from privtab.tabulate.engines import make_engine
from privtab.tabulate.plan import LevelPlan
from privtab.tabulate.run import RunOptions, run_release

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
                parts = list(engine.tabulate(lv, Drawing(source, noise=seed is not None)))
                yield LevelTables(
                    scope.value,
                    lv,
                    pl.concat([p.t1 for p in parts]),
                    pl.concat([p.t2 for p in parts]),
                )
    finally:
        engine.close()


def write_census_release(
    config: Path,
    data: Path,
    out: Path,
    *,
    seed: int | None,
    chance: object = "config",
    formats: tuple[str, ...] = ("txt",),
    nonnegative: bool | None = None,
) -> tuple[list[str], int]:
    """A seeded (or noise-free) release of ``data`` by :func:`run_release`; ``chance``
    overrides the config's ``zero_suppression_chance`` (``None``: key removed). Returns
    the release's files and the number of suppressed T1 rows (from ``release.json``)."""
    if chance != "config":
        raw = json.loads(config.read_text())
        raw.pop("zero_suppression_chance", None)
        if chance is not None:
            raw["zero_suppression_chance"] = chance
        config.write_text(json.dumps(raw))
    opts = RunOptions(
        source=SeededSource(seed if seed is not None else 0),
        allow_insecure=True,
        noise=seed is not None,
        report=False,
        formats=formats,
        nonnegative=nonnegative,
        use_ledger=False,
        run_record=out.parent / f"{out.name}-record.json",
    )
    res = run_release(config, data, out, opts)
    post = res.release["postprocessing"]["zero_suppression"]
    return sorted(res.release["outputs"]["files"]), int(post["suppressed_rows"])
