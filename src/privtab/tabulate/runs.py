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
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import Any

from privtab.accounting.exact import ExactGuarantee
from privtab.data import SafeTabInputs, Scope
from privtab.errors import UsageError
from privtab.publish.run import read_unchanged
from privtab.publish.worker import InOrder
from privtab.release.document import RunEntry
from privtab.release.marking import parquet_metadata
from privtab.tabulate.charges import RunLedger
from privtab.tabulate.chunk import Drawing
from privtab.tabulate.context import RunContext, RunOptions
from privtab.tabulate.describe import empty_entry, level_entry
from privtab.tabulate.domain import level_domain
from privtab.tabulate.output import CensusWriter
from privtab.tabulate.plan import LevelPlan, ReleasePlan
from privtab.tabulate.privacy import analyse
from privtab.tabulate.publish import publish_chunk
from privtab.tabulate.results import ChunkResult, LevelSummary, summarize
from privtab.tabulate.suppression import SuppressionRule, suppression_rule

__all__ = [
    "ReleaseTables",
    "RunPlans",
    "aggregate",
    "analyse_plan",
    "check_free_space",
    "effective_plans",
    "tabulate_runs",
]

T1_BYTES_PER_ROW = 12
"""A lower bound on the bytes of one T1 row in the smallest output format (``1|USA|1000|0``
and its newline; for the free-space check before the expensive part)."""


@dataclass(frozen=True)
class RunPlans:
    """The plans of a release's runs: ``full``, each run's whole plan (every level is
    listed in ``release.json``), and ``drawn``, each run restricted to the levels whose
    public domain is not empty — the levels that draw noise and are charged (a run with no
    such level is absent: skipped, listed, charged nothing)."""

    full: dict[Scope, ReleasePlan]
    drawn: dict[Scope, ReleasePlan]


def effective_plans(inputs: SafeTabInputs) -> RunPlans:
    """The :class:`RunPlans` of ``inputs``: the domains are public (reference files and
    GRF-C), so which levels draw noise is known before any person is read."""
    plans: dict[Scope, ReleasePlan] = {}
    full: dict[Scope, ReleasePlan] = {}
    for scope in inputs.config.scopes:
        full[scope] = ReleasePlan.from_config(inputs.config, inputs.reference, scope)
        keep = [lv for lv in full[scope].levels if domain_size(lv, inputs) > 0]
        if keep:
            plans[scope] = replace(full[scope], levels=tuple(keep))
    assert plans, "load_inputs refuses a config without any public group"
    return RunPlans(full=full, drawn=plans)


def domain_size(lv: LevelPlan, inputs: SafeTabInputs) -> int:
    return level_domain(lv, inputs.geography, inputs.reference).size


def check_free_space(
    tmp: Path, plans: dict[Scope, ReleasePlan], inputs: SafeTabInputs, ctx: RunContext
) -> None:
    """Refuse before the expensive part when the disk cannot hold even the T1 rows that are
    certainly published: every group of a level zero suppression does not touch (all of
    them when the config has no ``zero_suppression_chance``; otherwise USA, STATE and
    PR-STATE — how many sub-state rows survive depends on the noise)."""
    chance = inputs.config.zero_suppression_chance or Fraction(0)
    rows = sum(
        domain_size(lv, inputs)
        for p in plans.values()
        for lv in p.levels
        if not suppression_rule(lv, chance, noise_on=ctx.opts.noise).active
    )
    need = rows * T1_BYTES_PER_ROW
    free = shutil.disk_usage(tmp).free
    ctx.progress(
        f"the release will need at least {need / 1e6:,.1f} MB ({rows:,} T1 rows certainly "
        f"published); {free / 1e6:,.0f} MB free"
    )
    if free < need:
        raise UsageError(
            f"not enough free space for the release in {ctx.out.parent}: at least "
            f"{need / 1e6:,.1f} MB needed, {free / 1e6:,.1f} MB free",
            hint="free some space or choose another --out",
        )


def aggregate(ctx: RunContext, inputs: SafeTabInputs) -> int:
    """Validate and aggregate the person file; refuse a file that changes while read
    (:func:`privtab.publish.run.read_unchanged`; an empty file was refused by
    :func:`privtab.data.load_inputs` unless allowed)."""
    t0 = time.monotonic()
    persons = read_unchanged(
        inputs.persons_path, "person", lambda: ctx.engine.prepare(inputs, ctx.progress)
    )
    ctx.seconds["aggregate"] = time.monotonic() - t0
    return persons


def analyse_plan(plan: ReleasePlan, opts: RunOptions) -> dict[str, Any]:
    return analyse(plan, opts.delta, pld_grid=opts.pld_grid)


class ReleaseTables:
    """The T1 and T2 of a release in the Census layout (:class:`~privtab.tabulate.output.
    CensusWriter`), each chunk published as production publishes it
    (:func:`~privtab.tabulate.publish.publish_chunk`: zero suppression, clamping, sex
    marginals) and its published rows and suppressions tallied per level.

    Chunks are published and written in a background thread (:class:`~privtab.publish.
    worker.InOrder`: in order, one at a time) while the engine draws the next one; the
    tallies are complete after :meth:`flush`, and a failed write is raised by the next
    :meth:`write`, :meth:`flush` or the exit of the ``with`` block."""

    def __init__(self, ctx: RunContext, tmp: Path) -> None:
        self.writer = CensusWriter(
            tmp, formats=ctx.opts.formats, metadata=parquet_metadata(ctx.private)
        )
        self.directory = tmp
        self.nonnegative = ctx.nonnegative
        self.noise = ctx.opts.noise
        self.chance = Fraction(0)
        self.suppressed = 0
        self.levels: dict[tuple[str, str], dict[str, Any]] = {}
        self._level: dict[str, Any] = {}
        self._rule: SuppressionRule | None = None
        self._jobs = InOrder()

    def start_run(self, scope: Scope) -> None:
        self._jobs.submit(partial(self.writer.start_run, scope.value))

    def start_level(self, scope: Scope, lp: LevelPlan) -> None:
        """The next chunks belong to level ``lp`` of run ``scope``."""
        self._rule = suppression_rule(lp, self.chance, noise_on=self.noise)
        self._level = {"suppression": self._rule.to_json(), "t1_rows": 0, "t2_rows": 0}
        self._level["suppression"]["suppressed_rows"] = 0
        self.levels[(scope.value, lp.key)] = self._level

    def write(self, part: ChunkResult) -> None:
        """Publish and write ``part`` (in the background: see the class docstring)."""
        assert self._rule is not None, "start_level before write"
        self._jobs.submit(partial(self._publish, part, self._rule, self._level))

    def _publish(self, part: ChunkResult, rule: SuppressionRule, level: dict[str, Any]) -> None:
        out = publish_chunk(part, rule, nonnegative=self.nonnegative)
        self.writer.write({"t1": out.t1, "t2": out.t2})
        self.suppressed += out.suppressed
        level["suppression"]["suppressed_rows"] += out.suppressed
        level["t1_rows"] += out.t1.height
        level["t2_rows"] += out.t2.height

    def flush(self) -> None:
        """Wait until every chunk is written (raising a write's error)."""
        self._jobs.wait()

    def __enter__(self) -> ReleaseTables:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        try:
            if exc_type is None:
                self.flush()
            else:
                self._jobs.wait_quietly()
        finally:
            self.writer.close()


def tabulate_runs(
    ctx: RunContext,
    inputs: SafeTabInputs,
    plans: RunPlans,
    tables: ReleaseTables,
    analyses: dict[Scope, Callable[[], dict[str, Any]]],
) -> tuple[dict[Scope, RunEntry], list[LevelSummary]]:
    tables.chance = inputs.config.zero_suppression_chance or Fraction(0)
    n_levels = sum(len(p.levels) for p in plans.drawn.values())
    done = [0]
    runs: dict[Scope, RunEntry] = {}
    results: list[LevelSummary] = []
    for scope, whole in plans.full.items():
        plan = plans.drawn.get(scope)
        if plan is not None:
            tables.start_run(scope)
        kept = {lv.key for lv in plan.levels} if plan else set()
        for lv in whole.levels:
            if lv.key not in kept:
                ctx.progress(f"{scope.value} {lv.key}: empty domain (no public groups): skipped")
        ledger = RunLedger(plan or whole)
        drawn: dict[str, tuple[LevelSummary, ExactGuarantee]] = {}
        for lv in whole.levels:
            if lv.key not in kept:
                continue
            tables.start_level(scope, lv)
            res = tabulate_level(ctx, lv, tables, f"{scope.value} {lv.key}", done, n_levels)
            drawn[lv.key] = (res, ledger.charge(lv, res.stages_used))
            results.append(res)
        tables.flush()  # the published rows of every level are tallied
        entries = [
            level_entry(*drawn[lv.key], inputs, scope, tables.levels[(scope.value, lv.key)])
            if lv.key in drawn
            else empty_entry(lv)
            for lv in whole.levels
        ]
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
    drawing = Drawing(ctx.source, noise=ctx.opts.noise, evaluate=ctx.opts.evaluate)
    for part in ctx.engine.tabulate(lp, drawing):
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


def validate_staged(ctx: RunContext, inputs: SafeTabInputs, tmp: Path) -> None:
    """Check the staged T1/T2 against the Census output rules before anything is published
    (:func:`privtab.tabulate.output_validation.validate_output`: schemas, state filter,
    non-negativity when clamped, duplicates, T1 = Σ cells, marginals, companion tables,
    the public domain); run by :func:`privtab.publish.run.check_staged`, which turns a
    failure into a :class:`~privtab.errors.RunFailedError` (no release)."""
    from privtab.tabulate.output_validation import OutputRules, validate_output

    rules = replace(
        OutputRules.from_config(inputs.config), allow_negative_counts=not ctx.nonnegative
    )
    validate_output(tmp, rules=rules, geography=inputs.geography, reference=inputs.reference)
