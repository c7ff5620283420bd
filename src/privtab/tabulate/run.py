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

The work runs in a worker thread while the main thread waits, so SIGINT, SIGTERM and
SIGHUP are honoured within a fraction of a second at any point before publication (no
release is written, exit 130 on the CLI); a signal during or after the rename is deferred:
the release is on disk and the run reports it (``RunResult.interrupted_after_publication``).

Privacy: the US and PR runs tabulate disjoint persons (a record's block is in one or the
other), so the release satisfies the larger of the two runs' guarantees (parallel
composition); each run satisfies the sequential composition of its levels' charges, each
``s_i · max(c₁ + c₂, c_total) = b_i`` (SafeTab seed Theorems 1, 3; Lemmas 9, 10).
"""

from __future__ import annotations

import datetime as dt
import errno
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from privtab.atomic import InterruptGuard, atomic_directory, check_output
from privtab.data import SafeTabInputs, Scope, load_inputs
from privtab.data.inputs import resolve_config_path
from privtab.errors import RunFailedError, UsageError
from privtab.mechanisms.base import release_source
from privtab.release.document import ReleaseDocument
from privtab.release.marking import write_not_private
from privtab.release.record import RunRecord, check_record_path, default_record_path
from privtab.tabulate.charges import BudgetOverrunError
from privtab.tabulate.context import Progress, RunCancelledError, RunContext, RunOptions, phase
from privtab.tabulate.describe import release_document, run_record
from privtab.tabulate.engines import Engine, make_engine
from privtab.tabulate.ledgering import (
    commit_quietly,
    fingerprints,
    identify_release,
    reserve_release,
    withdraw,
)
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
from privtab.tabulate.worker import background, in_worker

__all__ = ["RunCancelledError", "RunOptions", "RunResult", "run_release"]


@dataclass
class RunResult:
    """What a run published (``document``) and what only the operator may see (``record``)."""

    out: Path
    document: ReleaseDocument
    record: RunRecord
    record_path: Path | None
    levels: list[LevelSummary] = field(default_factory=list)
    interrupted_after_publication: bool = False
    """A signal arrived while or after the release was renamed into place: the release is
    complete on disk; only clean-up after it was cut short."""
    warnings: list[str] = field(default_factory=list)

    @property
    def private(self) -> bool:
        return self.document.private

    @property
    def release(self) -> dict[str, Any]:
        """``release.json`` as a JSON object."""
        return self.document.to_json()

    @property
    def seconds(self) -> dict[str, float]:
        return self.record.seconds


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
    opts = options or RunOptions()
    if not opts.noise and not opts.allow_insecure:
        raise UsageError("noise=False releases exact counts: allowed only with allow_insecure")
    source = release_source(opts.source, opts.allow_insecure, "SafeTab-P")
    config_path = resolve_config_path(config)
    protect = [Path(data_dir), config_path.parent if config is not None else config_path]
    check_output(out, overwrite=opts.overwrite, kind="release", protect=protect,
                 parents=opts.parents)  # fmt: skip
    record_path = Path(opts.run_record) if opts.run_record else default_record_path(out)
    check_record_path(record_path, out, parents=opts.parents)
    engine = make_engine(opts.engine) if isinstance(opts.engine, str) else opts.engine
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    ctx = RunContext(
        config=config_path,
        data_dir=Path(data_dir),
        out=Path(out),
        opts=opts,
        source=source,
        engine=engine,
        say=progress or logging.getLogger("privtab.tabulate").info,
        cancel=threading.Event(),
        started_utc=now.isoformat(),
        started_at=now.timestamp(),
    )
    started = time.monotonic()
    with InterruptGuard() as guard:
        try:
            built = _publish(ctx, guard, protect)
        finally:
            warnings = [*ctx.warnings, *_close_quietly(engine)]
        phase("published")
        built.record.ledger = commit_quietly(ctx.reservation, ctx.out, warnings, opts.returned)
        built.record.seconds["total"] = time.monotonic() - started
        written = _write_record(built.record, record_path, warnings)
    return RunResult(
        out=ctx.out,
        document=built.document,
        record=built.record,
        record_path=written,
        levels=built.levels,
        interrupted_after_publication=guard.deferred is not None,
        warnings=warnings,
    )


def _publish(ctx: RunContext, guard: InterruptGuard, protect: list[Path]) -> _Built:
    """Build the release in a staging folder (in the worker) and rename it into place;
    on any failure or interrupt before the rename, withdraw the ledger reservation."""
    try:
        with atomic_directory(
            ctx.out,
            kind="release",
            overwrite=ctx.opts.overwrite,
            protect=protect,
            guard=guard,
            parents=ctx.opts.parents,
            folder_id=ctx.folder_id,
            stamp=ctx.started_at,
        ) as tmp:
            try:
                return in_worker(lambda: _build(ctx, tmp), ctx.cancel)
            except OSError as exc:
                raise _write_error(exc, tmp, ctx.out) or exc from None
            except BaseException as exc:
                raise _engine_failure(exc, ctx.engine) or exc from None
    except BaseException:
        withdraw(ctx, guard)  # refused, failed or interrupted: nothing published
        raise


def _write_error(exc: OSError, staging: Path, out: Path) -> UsageError | None:
    """A failure to write the release (disk full, read-only, no permission) as a user
    error; ``None`` for other OS errors (reading an input, …), which keep their own."""
    text = str(exc)
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT) or any(
        k in text for k in ("No space left on device", "Disk quota exceeded")
    )  # polars' write errors carry no errno, only the OS message
    inside = exc.filename is not None and str(exc.filename).startswith(str(staging))
    if not (full or (inside and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM))):
        return None
    what = "the disk is full" if full else exc.strerror
    return UsageError(
        f"{what} while writing the release to {out}: no release was written",
        hint="free some space or choose another --out" if full else "choose a writable --out",
    )


def _engine_failure(exc: BaseException, engine: Engine) -> RunFailedError | None:
    """A failure of the engine's cluster (a Spark worker died, a job was lost) as one clear
    message (exit code 4); ``None`` for anything else."""
    module = type(exc).__module__ or ""
    if not module.startswith(("py4j", "pyspark")):
        return None
    text = str(exc).strip().splitlines()
    first = next((line for line in text if "Exception" in line or "Error" in line), "")
    return RunFailedError(
        f"the {engine.name} engine's job failed: {first[:300] or type(exc).__name__}; "
        "no release was written",
        hint="a worker process died or ran out of memory: check the cluster's logs and "
        "run again (with more memory per executor if needed)",
    )


def _close_quietly(engine: Engine) -> list[str]:
    """Close the engine; never raise (publication may already have happened)."""
    try:
        engine.close()
    except Exception as exc:  # clean-up failures must not hide the outcome
        return [f"closing the {engine.name} engine failed: {exc}"]
    return []


def _write_record(record: RunRecord, path: Path, warnings: list[str]) -> Path | None:
    try:
        return record.write(path)
    except OSError as exc:
        warnings.append(f"the confidential run record could not be written to {path}: {exc}")
        return None


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
    ctx.inputs_record = fingerprints(inputs)
    reserve_release(ctx, inputs, plans.drawn)
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
    # the written tables are checked (polars, off the GIL) while release.json and the
    # report are written; a failed check is raised first and publishes nothing
    validated = background(partial(validate_staged, ctx, inputs, tmp))
    try:
        document = release_document(ctx, inputs, runs, tables)
        document.write(tmp)
        if not document.private:
            write_not_private(tmp, document.noise)
        if ctx.opts.report:
            from privtab.tabulate.report import write_report

            figures = ahead()
            ctx.progress("writing report.html")
            release = document.to_json()
            # the report finds custom reference files next to the config: its path is given
            # in memory only (release.json names the file, never the folder)
            config = {**release["config"], "source": str(ctx.config)}
            write_report(tmp / "report.html", {**release, "config": config}, levels, curves(),
                         figures)  # fmt: skip
    finally:
        validated()
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
