"""A whole SafeTab-P release: inputs → validated aggregation → every level → files.

:func:`run_release` is what ``privtab safetab run`` and ``privtab demo`` call. It

1. **refuses early** (before reading the person file): an output location that would
   overwrite or lose something or cannot be written (:mod:`privtab.atomic`), a missing
   engine dependency, bad config/reference/GRF-C, too little free space for the release;
2. validates and aggregates the person file in one streaming pass (any bad row → one
   :class:`privtab.data.InputValidationError` naming file, line, column and value);
3. tabulates every level of every run (US, PR) whose public domain is not empty (a level
   with no public population group is skipped and listed as ``"empty domain"``), charging
   each level's exact guarantee to the run's :class:`~privtab.tabulate.charges.RunLedger`
   as its noise is drawn;
4. checks the written T1/T2 against the Census output rules
   (:func:`~privtab.tabulate.runs.validate_staged`; a failure publishes nothing), writes
   ``release.json`` (:class:`privtab.release.ReleaseDocument`: the guarantee is the
   ledgers' exact total), ``report.html`` and — for seeded or noise-off test runs — the
   ``NOT_PRIVATE`` marker, inside a staging folder that is renamed onto the target only
   when everything succeeded;
5. after publication, closes the engine (never raising) and writes the confidential run
   record *outside* the folder (:mod:`privtab.release.record`).

Steps 1, 4 (the staging, the background validation, the rename) and 5 are the
product-neutral run skeleton's (:mod:`privtab.publish.run`), the ledger steps
:mod:`privtab.publish.ledgering`'s. The work runs in a worker thread while the main thread
waits, so SIGINT, SIGTERM and SIGHUP are honoured within a fraction of a second at any
point before publication (no release is written, exit 130 on the CLI); a signal during or
after the rename is deferred: the release is on disk and the run reports it
(``RunResult.interrupted_after_publication``).

Privacy: the US and PR runs tabulate disjoint persons (a record's block is in one or the
other), so the release satisfies the larger of the two runs' guarantees (parallel
composition); each run satisfies the sequential composition of its levels' charges, each
``s_i · max(c₁ + c₂, c_total) = b_i`` (SafeTab seed Theorems 1, 3; Lemmas 9, 10).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from privtab.accounting.exact import ExactGuarantee
from privtab.data import SafeTabInputs, Scope, load_inputs
from privtab.data.inputs import resolve_config_path
from privtab.publish.ledgering import fingerprints, identify_release, reserve_release
from privtab.publish.run import ReleaseResult, finish_staged, publish_release, start_release
from privtab.publish.worker import background
from privtab.release.document import ReleaseDocument
from privtab.release.record import RunRecord
from privtab.tabulate.charges import BudgetOverrunError
from privtab.tabulate.context import Progress, RunCancelledError, RunContext, RunOptions
from privtab.tabulate.describe import release_document, run_record
from privtab.tabulate.engines import make_engine
from privtab.tabulate.report_privacy import (
    NO_CURVES,
    NOTHING_AHEAD,
    DrawnAhead,
    PldCurves,
    prefetch_pld_curves,
)
from privtab.tabulate.results import LevelSummary
from privtab.tabulate.runs import (
    ReleaseTables,
    RunPlans,
    aggregate,
    analyse_plan,
    check_free_space,
    effective_plans,
    tabulate_runs,
    validate_staged,
)

__all__ = ["RunCancelledError", "RunOptions", "RunResult", "run_release"]


@dataclass
class RunResult(ReleaseResult):
    """What a SafeTab-P run published (``document``) and what only the operator may see
    (``record``), with its levels' public tallies."""

    levels: list[LevelSummary] = field(default_factory=list)


@dataclass
class _Built:
    """What the worker produced in the staging folder."""

    document: ReleaseDocument
    levels: list[LevelSummary]
    record: RunRecord


def run_release(
    config: str | Path | None,
    data_dir: str | Path,
    out: str | Path,
    options: RunOptions | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """Run SafeTab-P and publish a release in folder ``out`` (see the module docstring).
    Each step is reported to ``progress`` (default: INFO records of logger
    ``privtab.tabulate``).

    Raises a :class:`privtab.errors.UserError` for anything the user can fix (nothing is
    written), :class:`KeyboardInterrupt` (:class:`privtab.atomic.Terminated` for
    SIGTERM/SIGHUP) when interrupted before publication (nothing is written).
    """
    import logging

    opts = options or RunOptions()
    config_path = resolve_config_path(config)
    protect = [Path(data_dir), config_path.parent if config is not None else config_path]
    start = start_release(opts, product="SafeTab-P", out=out, protect=protect)
    engine = make_engine(opts.engine) if isinstance(opts.engine, str) else opts.engine
    ctx = RunContext(
        config=config_path,
        data_dir=Path(data_dir),
        out=Path(out),
        opts=opts,
        source=start.source,
        engine=engine,
        say=progress or logging.getLogger("privtab.tabulate").info,
        started_utc=start.started_utc,
        started_at=start.started_at,
    )
    done = publish_release(ctx, start, engine, lambda tmp: _build(ctx, tmp))
    return RunResult(
        out=ctx.out,
        document=done.built.document,
        record=done.built.record,
        record_path=done.record_path,
        levels=done.built.levels,
        interrupted_after_publication=done.interrupted_after_publication,
        warnings=done.warnings,
    )


# ----------------------------------------------------------------------------- the worker


def _build(ctx: RunContext, tmp: Path) -> _Built:
    """Everything up to publication, inside the staging folder ``tmp``."""
    ctx.progress("reading config, reference files and GRF-C")
    t0 = time.monotonic()
    inputs = load_inputs(
        ctx.config, ctx.data_dir, validate_persons=False, allow_empty=ctx.opts.allow_empty
    )
    opt = ctx.opts.nonnegative
    ctx.nonnegative = not inputs.config.allow_negative_counts if opt is None else opt
    plans = effective_plans(inputs)
    check_free_space(tmp, plans.drawn, inputs, ctx)
    ctx.inputs_record = fingerprints(inputs.input_files())
    drawn = plans.drawn.values()
    planned = ExactGuarantee.parallel(p.exact_guarantee() for p in drawn)
    reserve_release(ctx, inputs.persons_path, planned, " + ".join(p.source for p in drawn))
    ctx.seconds["inputs"] = time.monotonic() - t0
    ctx.phase("inputs")
    persons = aggregate(ctx, inputs)
    records = getattr(ctx.engine, "records", None)  # an engine of the caller's may have none
    identify_release(ctx, None if records is None else records.key)
    document, levels = _tabulate_and_describe(ctx, inputs, plans, tmp)
    if ctx.reservation is not None and not document.guarantee.fits(
        ctx.reservation.entry.guarantee
    ):  # pragma: no cover - the charges never exceed the plan (RunLedger refuses it)
        raise BudgetOverrunError(f"{document.guarantee} exceeds the reserved guarantee")
    return _Built(document, levels, run_record(ctx, inputs, persons, levels))


def _tabulate_and_describe(
    ctx: RunContext,
    inputs: SafeTabInputs,
    plans: RunPlans,
    tmp: Path,
) -> tuple[ReleaseDocument, list[LevelSummary]]:
    """Every level into T1/T2, then ``release.json``, the markers and the report."""
    t0 = time.monotonic()
    # the privacy analyses depend on the public plan only: computed while tabulating
    analyses = {s: background(partial(analyse_plan, p, ctx.opts)) for s, p in plans.drawn.items()}
    # the report's ε(δ) curves, also from the public plan only; and its figures that show
    # the plan only, drawn while tabulating (the second core is mostly idle then)
    curves = background(
        partial(prefetch_pld_curves, list(plans.drawn.values()), ctx.opts.delta, ctx.opts.pld_grid)
        if ctx.opts.report
        else lambda: NO_CURVES
    )
    ahead = background(
        partial(_report_ahead, inputs, plans, analyses, curves)
        if ctx.opts.report
        else lambda: NOTHING_AHEAD
    )
    with ReleaseTables(ctx, tmp) as tables:
        runs, levels = tabulate_runs(ctx, inputs, plans, tables, analyses)
    ctx.seconds["tabulate_and_write"] = time.monotonic() - t0
    ctx.phase("write")

    def report(document: ReleaseDocument) -> None:
        from privtab.tabulate.report import write_report

        figures = ahead()
        release = document.to_json()
        # the report finds custom reference files next to the config: its path is given
        # in memory only (release.json names the file, never the folder)
        config = {**release["config"], "source": str(ctx.config)}
        write_report(tmp / "report.html", {**release, "config": config}, levels, curves(),
                     figures)  # fmt: skip

    document = finish_staged(
        ctx,
        tmp,
        validate=partial(validate_staged, ctx, inputs, tmp),
        document=partial(release_document, ctx, inputs, runs, tables),
        report=report,
    )
    return document, levels


def _report_ahead(
    inputs: SafeTabInputs,
    plans: RunPlans,
    analyses: dict[Scope, Callable[[], dict[str, Any]]],
    curves: Callable[[], PldCurves],
) -> DrawnAhead:
    """The report's figures that show the public plan only, drawn (:func:`privtab.tabulate.
    report.draw_ahead`: this also loads the plotting library) from the plan's part of
    ``release.json``. A failure here is left to the report, which draws them itself."""
    try:
        from privtab.tabulate.report import draw_ahead

        runs = {
            scope.value: {
                "plan": plan.to_dict(),
                "privacy": analyses[scope](),
                "levels": [
                    {
                        "status": "tabulated",
                        "level": lv.key,
                        "moe95": {
                            "stage1": lv.stage1.moe95,
                            "stage2_cell": lv.stage2.moe95,
                            "total_only": lv.total.moe95,
                        },
                    }
                    for lv in plan.levels
                ],
            }
            for scope, plan in plans.drawn.items()
        }
        return draw_ahead({"config": inputs.config.to_dict(), "runs": runs}, curves())
    except Exception:  # the report draws what is missing, and says why if it cannot
        return NOTHING_AHEAD
