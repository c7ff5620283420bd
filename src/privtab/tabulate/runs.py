"""Tabulating the runs of a release: every non-empty level, chunk by chunk, into T1/T2.

A level whose public domain is empty draws nothing, is skipped and is not charged
(:func:`effective_plans`); every other level is tabulated by the engine chunk by chunk,
each chunk written before the next is drawn, and its exact guarantee charged to the run's
:class:`~privtab.tabulate.charges.RunLedger` from the stages that drew noise.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from privtab.data import SafeTabInputs, Scope
from privtab.errors import InputError, UsageError
from privtab.random import RandomSource
from privtab.random.uniform import bernoulli
from privtab.release.document import RunEntry
from privtab.release.marking import parquet_metadata
from privtab.tabulate.charges import RunLedger
from privtab.tabulate.context import RunContext, RunOptions
from privtab.tabulate.describe import empty_entry, level_entry
from privtab.tabulate.domain import level_domain
from privtab.tabulate.output import TableWriter
from privtab.tabulate.plan import LevelPlan, ReleasePlan
from privtab.tabulate.privacy import analyse
from privtab.tabulate.results import ChunkResult, LevelSummary, summarize
from privtab.tabulate.tables import T1_SCHEMA, T2_SCHEMA

__all__ = [
    "ReleaseTables",
    "aggregate",
    "analyse_plan",
    "check_free_space",
    "effective_plans",
    "tabulate_runs",
]

T1_BYTES_PER_ROW = 24
"""A lower bound on the bytes of one T1 row in the smallest output format (for the
free-space check before the expensive part)."""


def effective_plans(
    inputs: SafeTabInputs,
) -> tuple[dict[Scope, ReleasePlan], dict[Scope, ReleasePlan]]:
    """Each run's plan restricted to the levels whose public domain is not empty, and each
    run's full plan. A level with no public population group draws no noise and is not
    charged; a run with no such level is skipped entirely (listed, charged nothing)."""
    plans: dict[Scope, ReleasePlan] = {}
    full: dict[Scope, ReleasePlan] = {}
    for scope in inputs.config.scopes:
        full[scope] = ReleasePlan.from_config(inputs.config, inputs.reference, scope)
        keep = [lv for lv in full[scope].levels if domain_size(lv, inputs) > 0]
        if keep:
            plans[scope] = replace(full[scope], levels=tuple(keep))
    assert plans, "load_inputs refuses a config without any public group"
    return plans, full


def domain_size(lv: LevelPlan, inputs: SafeTabInputs) -> int:
    return level_domain(lv, inputs.geography, inputs.reference).size


def check_free_space(
    tmp: Path, plans: dict[Scope, ReleasePlan], inputs: SafeTabInputs, ctx: RunContext
) -> None:
    """Refuse before the expensive part when the disk cannot hold even T1."""
    rows = sum(domain_size(lv, inputs) for p in plans.values() for lv in p.levels)
    need = rows * T1_BYTES_PER_ROW
    free = shutil.disk_usage(tmp).free
    ctx.progress(
        f"the release will need at least {need / 1e6:,.1f} MB ({rows:,} T1 rows); "
        f"{free / 1e6:,.0f} MB free"
    )
    if free < need:
        raise UsageError(
            f"not enough free space for the release in {ctx.out.parent}: at least "
            f"{need / 1e6:,.1f} MB needed, {free / 1e6:,.1f} MB free",
            hint="free some space or choose another --out",
        )


def aggregate(ctx: RunContext, inputs: SafeTabInputs) -> int:
    """Validate and aggregate the person file; refuse a file that changes while read
    (an empty file was refused by :func:`privtab.data.load_inputs` unless allowed)."""
    path = inputs.persons_path
    before = path.stat()
    t0 = time.monotonic()
    persons = ctx.engine.prepare(inputs, ctx.progress)
    ctx.seconds["aggregate"] = time.monotonic() - t0
    after = path.stat()
    if (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns):
        raise InputError(
            "the person file changed while it was read (size or modification time differ)",
            file=str(path),
            hint="run again on a file that is not being written",
        )
    return persons


def analyse_plan(plan: ReleasePlan, opts: RunOptions) -> dict[str, Any]:
    return analyse(plan, opts.delta, pld_grid=opts.pld_grid)


class ReleaseTables:
    """The T1 and T2 writers of a release, with its zero suppression."""

    def __init__(self, ctx: RunContext, tmp: Path) -> None:
        meta = parquet_metadata(ctx.private)
        fmts = ctx.opts.formats
        self.t1 = TableWriter(tmp, "t1", T1_SCHEMA, fmts, metadata=meta)
        self.t2 = TableWriter(tmp, "t2", T2_SCHEMA, fmts, metadata=meta)
        self.chance = Fraction(0)
        self.enabled = ctx.opts.zero_suppression
        self.source = ctx.source
        self.suppressed = 0

    def write(self, part: ChunkResult) -> None:
        t1 = part.t1
        if self.enabled and self.chance > 0:
            t1, dropped = suppress_zeros(t1, self.chance, self.source)
            self.suppressed += dropped
        self.t1.write(t1)
        self.t2.write(part.t2)

    def __enter__(self) -> ReleaseTables:
        return self

    def __exit__(self, *exc: object) -> None:
        self.t1.close()
        self.t2.close()


def tabulate_runs(
    ctx: RunContext,
    inputs: SafeTabInputs,
    plans: dict[Scope, ReleasePlan],
    full: dict[Scope, ReleasePlan],
    tables: ReleaseTables,
    analyses: dict[Scope, Callable[[], dict[str, Any]]],
) -> tuple[dict[Scope, RunEntry], list[LevelSummary]]:
    tables.chance = inputs.config.zero_suppression_chance or Fraction(0)
    n_levels = sum(len(p.levels) for p in plans.values())
    done = [0]
    runs: dict[Scope, RunEntry] = {}
    results: list[LevelSummary] = []
    for scope, whole in full.items():
        plan = plans.get(scope)
        kept = {lv.key for lv in plan.levels} if plan else set()
        for lv in whole.levels:
            if lv.key not in kept:
                ctx.progress(f"{scope.value} {lv.key}: empty domain (no public groups): skipped")
        ledger = RunLedger(plan or whole)
        entries = []
        for lv in whole.levels:
            if lv.key not in kept:
                entries.append(empty_entry(lv))
                continue
            res = tabulate_level(ctx, lv, tables, f"{scope.value} {lv.key}", done, n_levels)
            entries.append(level_entry(res, ledger.charge(lv, res.stages_used), inputs, scope))
            results.append(res)
        runs[scope] = RunEntry(
            scope=scope.value,
            guarantee=ledger.total,
            plan=(plan or whole).to_dict(),
            privacy=analyses[scope]() if scope in analyses else {},
            levels=tuple(entries),
        )
    return runs, results


def tabulate_level(
    ctx: RunContext, lp: LevelPlan, tables: ReleaseTables, name: str, done: list[int], n: int
) -> LevelSummary:
    t0 = time.monotonic()
    tallies = []
    for part in ctx.engine.tabulate(
        lp,
        source=ctx.source,
        noise=ctx.opts.noise,
        evaluate=ctx.opts.evaluate,
        nonnegative=ctx.nonnegative,
    ):
        ctx.check()
        tables.write(part)
        tallies.append(part.tallies)  # the frames are written: only the tallies are kept
    res = summarize(lp, tallies)
    ctx.phase("level")
    done[0] += 1
    ctx.progress(
        f"[{done[0]}/{n}] {name}: {res.tallies.regions:,} regions × "
        f"{res.tallies.iterations:,} iterations, {res.tallies.noise_draws:,} noisy counts, "
        f"{res.chunks} chunk(s) "
        f"({time.monotonic() - t0:.1f} s)"
    )
    return res


def suppress_zeros(
    t1: pl.DataFrame, chance: Fraction, source: RandomSource | None
) -> tuple[pl.DataFrame, int]:
    eligible = (pl.col("COUNT") <= 0) & (pl.col("STAT_LEVEL") <= 0)
    n = int(t1.select(eligible.sum()).item())
    if n == 0 or chance == 0:
        return t1, 0
    drop = np.zeros(t1.height, dtype=np.bool_)
    idx = np.flatnonzero(t1.select(eligible).to_series().to_numpy())
    drop[idx] = bernoulli(chance, idx.size, source=source)
    return t1.filter(pl.Series(~drop)), int(drop.sum())
