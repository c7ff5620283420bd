"""A whole SafeTab-P release: inputs → validated aggregation → every level → files.

:func:`run_release` is what ``privtab safetab run`` and ``privtab demo`` call. It

1. **refuses early** (before reading the person file): an output location that would
   overwrite or lose something or cannot be written (:mod:`privtab.data.atomic`), a missing
   engine dependency, bad config/reference/GRF-C, too little free space for the release;
2. validates and aggregates the person file in one streaming pass (any bad row → one
   :class:`privtab.data.InputValidationError` naming file, line, column and value);
3. tabulates every level of every run (US, PR) whose public domain is not empty (a level
   with no public population group is skipped and listed as ``"empty domain"``), charging
   each level's exact guarantee to the run's :class:`~privtab.tabulate.charges.RunLedger`
   as its noise is drawn;
4. writes ``release.json`` (:class:`privtab.release.ReleaseDocument`: the guarantee is the
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

import contextlib
import datetime as dt
import errno
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import polars as pl

from privtab import __version__
from privtab.accounting.exact import ExactGuarantee
from privtab.accounting.odometer import Reservation
from privtab.data import SafeTabInputs, Scope, load_inputs, sha256_file
from privtab.data.atomic import InterruptGuard, atomic_directory, check_output
from privtab.data.inputs import resolve_config_path
from privtab.errors import InputError, UsageError
from privtab.mechanisms.base import release_source
from privtab.random import RandomSource, bernoulli
from privtab.release.document import LevelEntry, ReleaseDocument, RunEntry
from privtab.release.marking import parquet_metadata, write_not_private
from privtab.release.record import RunRecord, check_record_path, default_record_path
from privtab.tabulate.charges import BudgetOverrunError, RunLedger
from privtab.tabulate.engine import T1_SCHEMA, T2_SCHEMA, LevelResult, level_domain, merge_results
from privtab.tabulate.engines import Engine, make_engine
from privtab.tabulate.output import TableWriter
from privtab.tabulate.plan import LevelPlan, ReleasePlan
from privtab.tabulate.privacy import analyse

__all__ = ["RunCancelledError", "RunOptions", "RunResult", "run_release"]

Progress = Callable[[str], None]
T = TypeVar("T")

T1_BYTES_PER_ROW = 24
"""A lower bound on the bytes of one T1 row in the smallest output format (for the
free-space check before the expensive part)."""


class RunCancelledError(Exception):
    """The worker noticed that the run was interrupted (raised at a safe point)."""


@dataclass(frozen=True)
class RunOptions:
    """How to run a release.

    ``source``: the random source (default: the secure one). A seeded source is refused
    unless ``allow_insecure`` (tests only: every output is then marked not private).
    ``noise=False`` releases exact counts (tests only; needs ``allow_insecure``).
    ``nonnegative``: clamp published counts at 0 (post-processing; default: the config's
    ``allow_negative_counts`` negated). ``zero_suppression``: drop T1 rows of groups with no
    T2 cells whose published count is ≤ 0, each with the config's
    ``zero_suppression_chance`` (post-processing of noisy output only). ``evaluate``:
    compare with the exact counts — a non-private diagnostic, kept in the confidential run
    record, never in the release. ``allow_empty``: release a person file with no persons.
    ``run_record``: where the confidential run record goes (default: beside the release,
    :func:`privtab.release.default_record_path`).
    """

    source: RandomSource | None = None
    allow_insecure: bool = False
    noise: bool = True
    delta: float = 1e-10
    nonnegative: bool | None = None
    zero_suppression: bool = False
    evaluate: bool = False
    report: bool = True
    pld_grid: float = 1e-3
    overwrite: bool = False
    formats: tuple[str, ...] = ("txt", "parquet")
    """Output formats of T1/T2 (pipe-delimited text and/or Parquet)."""
    engine: str | Engine = "polars"
    """``polars`` (default), ``spark``, or an :class:`~privtab.tabulate.engines.Engine`."""
    allow_empty: bool = False
    run_record: str | Path | None = None
    ledger: str | Path | None = None
    """The release ledger (odometer) file: default ``$PRIVTAB_LEDGER`` or the user's state
    directory (:func:`privtab.accounting.odometer.default_ledger_path`)."""
    use_ledger: bool = True
    """Record this release in the ledger (private runs only; ``False`` for synthetic demo
    data that is not a confidential data set)."""
    lifetime: ExactGuarantee | None = None
    """A lifetime budget for the data set (besides any the ledger holds)."""
    allow_more_releases: bool = False
    """Run even past the lifetime budget (recorded as such in the ledger)."""
    dataset_id: str | None = None
    """The data set's key in the ledger (default: the SHA-256 of the person file)."""


@dataclass
class RunResult:
    """What a run published (``document``) and what only the operator may see (``record``)."""

    out: Path
    document: ReleaseDocument
    record: RunRecord
    record_path: Path | None
    levels: list[LevelResult] = field(default_factory=list)
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
class _Context:
    """Everything one run needs (resolved once, read by the worker)."""

    config: Path
    data_dir: Path
    out: Path
    opts: RunOptions
    source: RandomSource
    engine: Engine
    say: Progress
    cancel: threading.Event
    started_utc: str
    seconds: dict[str, float] = field(default_factory=dict)
    nonnegative: bool = False
    """Clamp published counts at 0 (the option, else the config's rule; set in _build)."""
    reservation: Reservation | None = None
    """The pending entry of this release in the release ledger (private runs)."""
    inputs_record: dict[str, dict[str, Any]] = field(default_factory=dict)
    """SHA-256 and size of every input (confidential: for the run record only)."""

    @property
    def private(self) -> bool:
        return self.source.is_private and self.opts.noise

    def check(self) -> None:
        """A safe point: stop if the run was interrupted."""
        if self.cancel.is_set():
            raise RunCancelledError("interrupted")

    def progress(self, msg: str) -> None:
        self.check()
        self.say(msg)


@dataclass
class _Built:
    """What the worker produced in the staging folder."""

    document: ReleaseDocument
    levels: list[LevelResult]
    record: RunRecord


def run_release(
    config: str | Path | None,
    data_dir: str | Path,
    out: str | Path,
    options: RunOptions | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """Run SafeTab-P and publish a release in folder ``out`` (see the module docstring).

    Raises a :class:`privtab.errors.UserError` for anything the user can fix (nothing is
    written), :class:`KeyboardInterrupt` (:class:`privtab.data.atomic.Terminated` for
    SIGTERM/SIGHUP) when interrupted before publication (nothing is written).
    """
    opts = options or RunOptions()
    if not opts.noise and not opts.allow_insecure:
        raise UsageError("noise=False releases exact counts: allowed only with allow_insecure")
    source = release_source(opts.source, opts.allow_insecure, "SafeTab-P")
    config_path = resolve_config_path(config)
    protect = [Path(data_dir), config_path.parent if config is not None else config_path]
    check_output(out, overwrite=opts.overwrite, kind="release", protect=protect)
    record_path = Path(opts.run_record) if opts.run_record else default_record_path(out)
    check_record_path(record_path)
    engine = make_engine(opts.engine) if isinstance(opts.engine, str) else opts.engine
    ctx = _Context(
        config=config_path,
        data_dir=Path(data_dir),
        out=Path(out),
        opts=opts,
        source=source,
        engine=engine,
        say=progress or (lambda _msg: None),
        cancel=threading.Event(),
        started_utc=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    )
    started = time.monotonic()
    with InterruptGuard() as guard:
        try:
            with atomic_directory(
                out, kind="release", overwrite=opts.overwrite, protect=protect, guard=guard
            ) as tmp:
                try:
                    built = _in_worker(lambda: _build(ctx, tmp), ctx.cancel)
                except BaseException as exc:
                    _cancel_quietly(ctx.reservation)
                    if isinstance(exc, OSError):
                        raise _write_error(exc, tmp, ctx.out) or exc from None
                    raise
        finally:
            warnings = _close_quietly(engine)
        _phase("published")
        built.record.ledger = _commit_quietly(ctx.reservation, ctx.out, warnings)
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


def _phase(name: str) -> None:
    """A named point of the run (``inputs``, ``level``, ``write``, ``published``): the
    place where tests hold a run to deliver a signal in a known phase. Does nothing."""


def _in_worker(fn: Callable[[], T], cancel: threading.Event) -> T:
    """Run ``fn`` in a worker thread while the main thread waits, so that signals are
    handled promptly (Python runs signal handlers in the main thread only, between
    bytecodes — never during a long polars or numpy call). On an interrupt the worker is
    told to stop at its next safe point and the interrupt is re-raised at once."""
    if threading.current_thread() is not threading.main_thread():
        return fn()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the main thread below
            box["error"] = exc

    worker = threading.Thread(target=target, name="privtab-release", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.05)
    except BaseException:
        cancel.set()
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


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


def _analyse(plan: ReleasePlan, opts: RunOptions) -> dict[str, Any]:
    return analyse(plan, opts.delta, pld_grid=opts.pld_grid)


def _background(fn: Callable[[], T]) -> Callable[[], T]:
    """Start ``fn`` in a daemon thread (an interrupted run must not wait for it at exit);
    the returned function waits for its result (or raises its exception)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # re-raised by the getter
            box["error"] = exc

    thread = threading.Thread(target=target, name="privtab-analysis", daemon=True)
    thread.start()

    def result() -> T:
        thread.join()
        if "error" in box:
            raise box["error"]
        return box["value"]  # type: ignore[no-any-return]

    return result


def _cancel_quietly(reservation: Reservation | None) -> None:
    """Nothing was published: remove the pending ledger entry (if that fails, the entry
    stays pending and counts as spent — never under-counted)."""
    if reservation is not None:
        with contextlib.suppress(Exception):
            reservation.cancel()


def _commit_quietly(
    reservation: Reservation | None, out: Path, warnings: list[str]
) -> dict[str, Any]:
    """The release is published: mark its ledger entry so; never raises (a failure leaves
    the entry pending, which counts as spent, and says how to settle it)."""
    if reservation is None:
        return {}
    entry = reservation.entry
    info = {"ledger": str(reservation.ledger.path), "entry": entry.id, "dataset": entry.dataset}
    try:
        reservation.commit(release=str(Path(os.path.abspath(out))))
    except Exception as exc:
        warnings.append(
            f"the release is published but its ledger entry {entry.id} could not be marked "
            f"so ({exc}); it counts as spent: privtab ledger settle {entry.id} --published"
        )
        info["status"] = "pending"
    return info


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
def _build(ctx: _Context, tmp: Path) -> _Built:
    """Everything up to publication, inside the staging folder ``tmp``."""
    ctx.progress("reading config, reference files and GRF-C")
    t0 = time.monotonic()
    inputs = load_inputs(
        ctx.config, ctx.data_dir, validate_persons=False, allow_empty=ctx.opts.allow_empty
    )
    opt = ctx.opts.nonnegative
    ctx.nonnegative = not inputs.config.allow_negative_counts if opt is None else opt
    plans, full = _effective_plans(inputs)
    _check_free_space(tmp, plans, inputs, ctx)
    ctx.inputs_record = _fingerprints(inputs)
    ctx.reservation = _reserve(ctx, inputs, plans)
    ctx.seconds["inputs"] = time.monotonic() - t0
    _phase("inputs")
    ctx.check()
    persons = _aggregate(ctx, inputs)
    document, levels = _tabulate_and_describe(ctx, inputs, plans, full, tmp)
    if ctx.reservation is not None and not document.guarantee.fits(
        ctx.reservation.entry.guarantee
    ):  # pragma: no cover - the charges never exceed the plan (RunLedger refuses it)
        raise BudgetOverrunError(f"{document.guarantee} exceeds the reserved guarantee")
    return _Built(document, levels, _record(ctx, inputs, persons, levels))


def _effective_plans(
    inputs: SafeTabInputs,
) -> tuple[dict[Scope, ReleasePlan], dict[Scope, ReleasePlan]]:
    """Each run's plan restricted to the levels whose public domain is not empty, and each
    run's full plan. A level with no public population group draws no noise and is not
    charged; a run with no such level is skipped entirely (listed, charged nothing)."""
    plans: dict[Scope, ReleasePlan] = {}
    full: dict[Scope, ReleasePlan] = {}
    for scope in inputs.config.scopes:
        full[scope] = ReleasePlan.from_config(inputs.config, inputs.reference, scope)
        keep = [lv for lv in full[scope].levels if _domain_size(lv, inputs) > 0]
        if keep:
            plans[scope] = replace(full[scope], levels=tuple(keep))
    assert plans, "load_inputs refuses a config without any public group"
    return plans, full


def _fingerprints(inputs: SafeTabInputs) -> dict[str, dict[str, Any]]:
    """SHA-256 and size of every input file (read once, before the data are aggregated;
    confidential: for the run record and the release ledger only)."""
    return {
        str(p): {"sha256": sha256_file(p), "bytes": p.stat().st_size} for p in inputs.input_files()
    }


def _reserve(
    ctx: _Context, inputs: SafeTabInputs, plans: dict[Scope, ReleasePlan]
) -> Reservation | None:
    """Check the data set's lifetime budget in the release ledger and reserve this release,
    before the person file is read (private runs only; a seeded or noise-off run protects
    nobody and is never recorded). Raises
    :class:`~privtab.accounting.odometer.LifetimeBudgetExceededError`."""
    if not (ctx.private and ctx.opts.use_ledger):
        return None
    from privtab.accounting.odometer import ReleaseLedger

    planned = ExactGuarantee.parallel(p.exact_guarantee() for p in plans.values())
    person = ctx.inputs_record[str(inputs.persons_path)]["sha256"]
    dataset = ctx.opts.dataset_id or f"sha256:{person}"  # = fingerprint_files([persons])
    ledger = ReleaseLedger.open(ctx.opts.ledger)
    ctx.progress(f"checking the release ledger {ledger.path}")
    return ledger.reserve(
        dataset,
        planned,
        release=str(Path(os.path.abspath(ctx.out))),
        plan=" + ".join(p.source for p in plans.values()),
        lifetime=ctx.opts.lifetime,
        allow_more=ctx.opts.allow_more_releases,
    )


def _domain_size(lv: LevelPlan, inputs: SafeTabInputs) -> int:
    return level_domain(lv, inputs.geography, inputs.reference).size


def _check_free_space(
    tmp: Path, plans: dict[Scope, ReleasePlan], inputs: SafeTabInputs, ctx: _Context
) -> None:
    """Refuse before the expensive part when the disk cannot hold even T1."""
    rows = sum(_domain_size(lv, inputs) for p in plans.values() for lv in p.levels)
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


def _aggregate(ctx: _Context, inputs: SafeTabInputs) -> int:
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


def _tabulate_and_describe(
    ctx: _Context,
    inputs: SafeTabInputs,
    plans: dict[Scope, ReleasePlan],
    full: dict[Scope, ReleasePlan],
    tmp: Path,
) -> tuple[ReleaseDocument, list[LevelResult]]:
    """Every level into T1/T2, then ``release.json``, the markers and the report."""
    t0 = time.monotonic()
    # the privacy analyses depend on the public plan only: computed while tabulating
    analyses = {s: _background(partial(_analyse, p, ctx.opts)) for s, p in plans.items()}
    with _Tables(ctx, tmp) as tables:
        runs, levels = _tabulate_runs(ctx, inputs, plans, full, tables, analyses)
    ctx.seconds["tabulate_and_write"] = time.monotonic() - t0
    _phase("write")
    ctx.check()
    document = _document(ctx, inputs, plans, runs, tables)
    document.write(tmp)
    if not document.private:
        write_not_private(tmp, document.noise)
    if ctx.opts.report:
        from privtab.tabulate.report import write_report

        ctx.progress("writing report.html")
        write_report(tmp / "report.html", document.to_json(), levels)
    return document, levels


class _Tables:
    """The T1 and T2 writers of a release, with its zero suppression."""

    def __init__(self, ctx: _Context, tmp: Path) -> None:
        meta = parquet_metadata(ctx.private)
        fmts = ctx.opts.formats
        self.t1 = TableWriter(tmp, "t1", T1_SCHEMA, fmts, metadata=meta)
        self.t2 = TableWriter(tmp, "t2", T2_SCHEMA, fmts, metadata=meta)
        self.chance = Fraction(0)
        self.enabled = ctx.opts.zero_suppression
        self.source = ctx.source
        self.suppressed = 0

    def write(self, part: LevelResult) -> None:
        t1 = part.t1
        if self.enabled and self.chance > 0:
            t1, dropped = _suppress_zeros(t1, self.chance, self.source)
            self.suppressed += dropped
        self.t1.write(t1)
        self.t2.write(part.t2)

    def __enter__(self) -> _Tables:
        return self

    def __exit__(self, *exc: object) -> None:
        self.t1.close()
        self.t2.close()


def _tabulate_runs(
    ctx: _Context,
    inputs: SafeTabInputs,
    plans: dict[Scope, ReleasePlan],
    full: dict[Scope, ReleasePlan],
    tables: _Tables,
    analyses: dict[Scope, Callable[[], dict[str, Any]]],
) -> tuple[dict[Scope, RunEntry], list[LevelResult]]:
    tables.chance = inputs.config.zero_suppression_chance or Fraction(0)
    n_levels = sum(len(p.levels) for p in plans.values())
    done = [0]
    runs: dict[Scope, RunEntry] = {}
    results: list[LevelResult] = []
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
                entries.append(_empty_entry(lv))
                continue
            res = _tabulate_level(ctx, lv, tables, f"{scope.value} {lv.key}", done, n_levels)
            entries.append(_level_entry(res, ledger.charge(lv, res.stages_used), inputs, scope))
            results.append(res)
        runs[scope] = RunEntry(
            scope=scope.value,
            guarantee=ledger.total,
            plan=(plan or whole).to_dict(),
            privacy=analyses[scope]() if scope in analyses else {},
            levels=tuple(entries),
        )
    return runs, results


def _tabulate_level(
    ctx: _Context, lp: LevelPlan, tables: _Tables, name: str, done: list[int], n: int
) -> LevelResult:
    t0 = time.monotonic()
    summaries = []
    for part in ctx.engine.tabulate(
        lp,
        source=ctx.source,
        noise=ctx.opts.noise,
        evaluate=ctx.opts.evaluate,
        nonnegative=ctx.nonnegative,
    ):
        ctx.check()
        tables.write(part)
        summaries.append(part.without_tables())
    res = merge_results(summaries)
    _phase("level")
    ctx.check()
    done[0] += 1
    ctx.progress(
        f"[{done[0]}/{n}] {name}: {res.regions:,} regions × {res.iterations:,} iterations, "
        f"{res.noise_draws:,} noisy counts, {len(summaries)} chunk(s) "
        f"({time.monotonic() - t0:.1f} s)"
    )
    return res


def _level_entry(
    res: LevelResult, charged: ExactGuarantee, inputs: SafeTabInputs, scope: Scope
) -> LevelEntry:
    from privtab.data import GeoLevel

    stab = inputs.stabilities(scope)[(GeoLevel(res.plan.geo), res.plan.iteration_level)]
    fields = {
        "status": "tabulated",
        **res.summary(),
        "budget": float(res.plan.budget),
        "budget_exact": str(res.plan.budget),
        "charged": charged.to_json(),
        "stability": res.plan.stability,
        "stability_census_rule": stab.census_rule,
        "stability_exact": stab.exact,
        "thresholds": list(res.plan.thresholds),
        "moe95": {
            "stage1": res.plan.stage1.moe95,
            "stage2_cell": res.plan.stage2.moe95,
            "total_only": res.plan.total.moe95,
        },
    }
    return LevelEntry(res.plan.key, "tabulated", charged, res.plan.thresholds, fields)


def _empty_entry(lv: LevelPlan) -> LevelEntry:
    fields = {
        "level": lv.key,
        "status": "empty domain",
        "budget": float(lv.budget),
        "budget_exact": str(lv.budget),
        "charged": None,
        "note": "no public population group (no region or no iteration): not tabulated, "
        "not charged",
    }
    return LevelEntry(lv.key, "empty domain", None, (), fields)


def _document(
    ctx: _Context,
    inputs: SafeTabInputs,
    plans: dict[Scope, ReleasePlan],
    runs: dict[Scope, RunEntry],
    tables: _Tables,
) -> ReleaseDocument:
    guarantee = ExactGuarantee.parallel(r.guarantee for r in runs.values())
    worst = max(runs, key=lambda s: runs[s].guarantee.as_zcdp().value)
    outputs: dict[str, Any] = {"files": {}}
    for w in (tables.t1, tables.t2):
        for f in w.paths:
            outputs["files"][f.name] = {"sha256": sha256_file(f), "rows": w.rows}
    outputs["t1_rows"], outputs["t2_rows"] = tables.t1.rows, tables.t2.rows
    public = [p for p in inputs.input_files() if p != inputs.persons_path]
    extra = {
        "algorithm": "SafeTab-P two-stage adaptive algorithm (SafeTab seed Alg. 1-3)",
        "guarantee_note": (
            "derived from the mechanisms that drew the noise, composed exactly: each run is "
            "the sequential composition of its levels; the US and PR runs hold disjoint "
            "persons, so the release satisfies the larger of their guarantees (parallel "
            "composition). Floats are rounded up; the exact value is beside them."
        ),
        "plan": plans[worst].to_dict(),
        "engine": ctx.engine.name,
        "config": inputs.config.to_dict(),
        "public_inputs": {p.name: {"sha256": sha256_file(p)} for p in public},
        "outputs": outputs,
    }
    return ReleaseDocument(
        privtab_version=__version__,
        started_utc=ctx.started_utc,
        private=ctx.private,
        noise="off (exact counts: NOT PRIVATE)" if not ctx.opts.noise else ctx.source.description,
        guarantee=guarantee,
        runs={s.value: r for s, r in runs.items()},
        postprocessing=_postprocessing(ctx, inputs, tables),
        extra=extra,
    )


def _postprocessing(ctx: _Context, inputs: SafeTabInputs, tables: _Tables) -> dict[str, Any]:
    chance = inputs.config.zero_suppression_chance or Fraction(0)
    return {
        "nonnegative": ctx.nonnegative,
        "zero_suppression": ctx.opts.zero_suppression,
        "zero_suppression_chance": float(chance),
        "zero_suppressed_rows": tables.suppressed,
        "t1_count_of_groups_with_t2": "sum of the group's noisy T2 cells",
        "note": "post-processing of noisy output only: no privacy cost",
    }


def _record(
    ctx: _Context, inputs: SafeTabInputs, persons: int, levels: list[LevelResult]
) -> RunRecord:
    """The confidential run record (never published)."""
    return RunRecord(
        release=str(Path(os.path.abspath(ctx.out))),
        started_utc=ctx.started_utc,
        private=ctx.private,
        inputs=ctx.inputs_record,
        persons=persons,
        seconds=ctx.seconds,
        levels=[
            {
                "level": lv.plan.key,
                "memberships": lv.memberships,
                **({"evaluation_nonprivate": lv.evaluation} if lv.evaluation else {}),
            }
            for lv in levels
        ],
    )


def _suppress_zeros(
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
