"""A whole SafeTab-H release: inputs → validated aggregation → every query → files.

:func:`run_release` is what ``privtab safetab-h run`` calls. It works as SafeTab-P's run
(:mod:`privtab.tabulate.run`), on the same floors:

1. **refuses early** (before reading the household file): an output location that would
   overwrite or lose something (:mod:`privtab.atomic`), bad config / reference files /
   GRF-C / T1 (:func:`privtab.safetab_h.inputs.load_inputs`); then reserves the release in
   the operator's ledger (private runs), which refuses past a lifetime budget;
2. validates and aggregates the household file in one streaming pass (any bad row → one
   :class:`privtab.data.InputValidationError` naming file, line, column and value; a run
   with no household of its states is refused, as production does);
3. tabulates every level of every run (US, PR) that has T1 groups, its T3 and T4 queries
   with a positive budget, chunk by chunk (:class:`~privtab.safetab_h.engine.HEngine`):
   statistic levels from T1, noisy cells, clamping, marginals; the rows go to the Census
   folders ``t3/T03001/`` … ``t4/T04002/`` inside a staging folder; a run whose T1 groups
   hold no household is refused (production's overlap check);
4. checks every written table (:func:`privtab.safetab_h.validation.validate_output`: a
   failure publishes nothing), writes ``release.json`` (the guarantee is the exact sum of
   the charges of the queries that drew noise; the person-level guarantee of DHC-A and
   DHC-B together beside it), ``report.html`` and — for test runs — ``NOT_PRIVATE``;
   renames the staging folder onto ``out``; marks the ledger entry published; writes the
   confidential run record outside the folder.

Privacy: per household (added or removed), ``Σ_q ρ_q`` of the queries that drew, per run;
the US and PR runs hold disjoint households, so the release satisfies the larger
(parallel composition). Per person: :func:`privtab.safetab_h.privacy.person_guarantee`.
The ledger is charged the person-level part ``2ρ_H`` (a person changes at most one
household record), so that SafeTab-P and SafeTab-H releases of one population compose in
it when they share a ``--dataset-id`` (``privtab safetab run --products p,h`` does).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privtab import __version__
from privtab.accounting.exact import ExactGuarantee
from privtab.atomic import InterruptGuard, atomic_directory, check_output
from privtab.data import Scope
from privtab.data.errors import Problem, ProblemLog
from privtab.errors import RunFailedError, UsageError
from privtab.mechanisms.base import release_source
from privtab.mechanisms.counts import mechanism_cost
from privtab.publish.census import CensusWriter, outputs_manifest
from privtab.publish.ledgering import cancel_quietly, commit_quietly
from privtab.publish.worker import background, in_worker
from privtab.release.document import KIND_H, LevelEntry, ReleaseDocument, RunEntry
from privtab.release.marking import parquet_metadata, write_not_private
from privtab.release.record import RunRecord, check_record_path, default_record_path
from privtab.safetab_h.config import TABLES
from privtab.safetab_h.engine import HEngine, make_engine
from privtab.safetab_h.inputs import HInputs, load_inputs, resolve_config_path
from privtab.safetab_h.privacy import PERSON_FACTOR, analyse, person_guarantee_json
from privtab.safetab_h.queries import HPlan, QueryPlan
from privtab.safetab_h.tables import DESIGNS, census_tables, wide_schema
from privtab.tabulate.chunk import Drawing
from privtab.tabulate.context import RunOptions

if TYPE_CHECKING:
    from privtab.accounting.odometer import Reservation
    from privtab.random import RandomSource
    from privtab.safetab_h.domain import LevelGroups

__all__ = ["HRunResult", "run_release"]

LOG = logging.getLogger("privtab.safetab_h")


@dataclass
class HRunResult:
    """What a run published (``document``) and what only the operator may see (``record``)."""

    out: Path
    document: ReleaseDocument
    record: RunRecord
    record_path: Path | None
    warnings: list[str] = field(default_factory=list)
    interrupted_after_publication: bool = False

    @property
    def private(self) -> bool:
        return self.document.private

    @property
    def release(self) -> dict[str, Any]:
        return self.document.to_json()

    @property
    def seconds(self) -> dict[str, float]:
        return self.record.seconds


@dataclass
class _Context:
    """Everything one run needs (resolved once, read by the worker)."""

    config: Path
    data_dir: Path
    t1: Path | None
    out: Path
    opts: RunOptions
    source: RandomSource
    engine: HEngine
    say: Callable[[str], None]
    cancel: threading.Event
    started_utc: str
    persons: ExactGuarantee | None
    persons_source: str
    seconds: dict[str, float] = field(default_factory=dict)
    nonnegative: bool = False
    reservation: Reservation | None = None
    inputs_record: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def private(self) -> bool:
        return self.source.is_private and self.opts.noise

    def progress(self, msg: str) -> None:
        if self.cancel.is_set():
            from privtab.tabulate.context import RunCancelledError

            raise RunCancelledError("interrupted")
        self.say(msg)


def run_release(
    config: str | Path | None,
    data_dir: str | Path,
    out: str | Path,
    options: RunOptions | None = None,
    *,
    t1: str | Path | None = None,
    persons: ExactGuarantee | None = None,
    progress: Callable[[str], None] | None = None,
) -> HRunResult:
    """Run SafeTab-H and publish a release in folder ``out`` (module docstring).

    ``t1``: the T1 (default ``data_dir/pop-group-totals.txt``; or privtab's SafeTab-P
    release folder, its ``t1/``, a file). ``persons``: SafeTab-P's guarantee per person,
    for the person-level statement (default: read from the T1's release folder when it is
    a privtab release). Raises a :class:`privtab.errors.UserError` for anything the user
    can fix (nothing is written); :class:`KeyboardInterrupt` when interrupted before
    publication (nothing is written)."""
    opts = options or RunOptions()
    if not opts.noise and not opts.allow_insecure:
        raise UsageError("noise=False releases exact counts: allowed only with allow_insecure")
    if not isinstance(opts.engine, str):
        raise UsageError("SafeTab-H takes an engine by name: polars or spark")
    source = release_source(opts.source, opts.allow_insecure, "SafeTab-H")
    config_path = resolve_config_path(config)
    t1_path = None if t1 is None else Path(t1)
    protect = [Path(data_dir), config_path.parent if config is not None else config_path]
    protect += [t1_path] if t1_path is not None else []
    check_output(out, overwrite=opts.overwrite, kind="release", protect=protect)
    record_path = Path(opts.run_record) if opts.run_record else default_record_path(out)
    check_record_path(record_path)
    found, where = (persons, "given") if persons is not None else _t1_guarantee(t1_path)
    ctx = _Context(
        config=config_path,
        data_dir=Path(data_dir),
        t1=t1_path,
        out=Path(out),
        opts=opts,
        source=source,
        engine=make_engine(opts.engine),
        say=progress or LOG.info,
        cancel=threading.Event(),
        started_utc=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        persons=found,
        persons_source=where,
    )
    started = time.monotonic()
    with InterruptGuard() as guard:
        try:
            with atomic_directory(
                out, kind="release", overwrite=opts.overwrite, protect=protect, guard=guard
            ) as tmp:
                try:
                    document, record = in_worker(lambda: _build(ctx, tmp), ctx.cancel)
                except BaseException:
                    cancel_quietly(ctx.reservation)
                    raise
        finally:
            try:
                ctx.engine.close()
            except Exception as exc:  # clean-up must not hide the outcome
                ctx.warnings.append(f"closing the {ctx.engine.name} engine failed: {exc}")
        record.ledger = commit_quietly(ctx.reservation, ctx.out, ctx.warnings)
        record.seconds["total"] = time.monotonic() - started
        written = _write_record(record, record_path, ctx.warnings)
    return HRunResult(
        out=ctx.out,
        document=document,
        record=record,
        record_path=written,
        warnings=ctx.warnings,
        interrupted_after_publication=guard.deferred is not None,
    )


def _t1_guarantee(t1: Path | None) -> tuple[ExactGuarantee | None, str]:
    """SafeTab-P's per-person guarantee when the T1 is a privtab SafeTab-P release (its
    folder or its ``t1/``), else ``None``."""
    if t1 is None:
        return None, "unknown: the T1 is not a privtab SafeTab-P release"
    from privtab.release.document import KIND, ReleaseDocumentError, read_release_document

    for folder in (t1, t1.parent):
        if (folder / "release.json").is_file():
            try:
                doc = read_release_document(folder)
            except ReleaseDocumentError:
                continue
            if doc.kind == KIND:
                note = "" if doc.private else " (NOT PRIVATE: a test release)"
                return doc.guarantee, f"the SafeTab-P release that published the T1{note}"
    return None, "unknown: the T1 is not a privtab SafeTab-P release"


def _write_record(record: RunRecord, path: Path, warnings: list[str]) -> Path | None:
    try:
        return record.write(path)
    except OSError as exc:
        warnings.append(f"the confidential run record could not be written to {path}: {exc}")
        return None


# ----------------------------------------------------------------------------- the worker
def _build(ctx: _Context, tmp: Path) -> tuple[ReleaseDocument, RunRecord]:
    """Everything up to publication, inside the staging folder ``tmp``."""
    ctx.progress("reading config, reference files, GRF-C and T1")
    t0 = time.monotonic()
    inputs = load_inputs(ctx.config, ctx.data_dir, ctx.t1, allow_empty=ctx.opts.allow_empty)
    _warn_dropped(ctx, inputs)
    opt = ctx.opts.nonnegative
    ctx.nonnegative = not inputs.config.allow_negative_counts if opt is None else opt
    plans = {s: HPlan.from_config(inputs.config, inputs.reference, s) for s in inputs.config.scopes}
    drawn = {s: _drawn(inputs, s, p) for s, p in plans.items()}
    ctx.inputs_record = inputs.fingerprints()
    ctx.reservation = _reserve(ctx, inputs, drawn)
    ctx.seconds["inputs"] = time.monotonic() - t0
    analyses = {s: background(partial(_analyse, p, ctx.opts)) for s, p in drawn.items()}
    t0 = time.monotonic()
    households = _aggregate(ctx, inputs)
    ctx.seconds["aggregate"] = time.monotonic() - t0
    _check_households(inputs, households)
    t0 = time.monotonic()
    tables = census_tables()
    schemas = {t.name: wide_schema(DESIGNS[t.folder.split("/")[0]]) for t in tables}
    writer = CensusWriter(
        tmp, tables, schemas, formats=ctx.opts.formats, metadata=parquet_metadata(ctx.private)
    )
    with writer:
        runs = {s: _tabulate_run(ctx, inputs, s, plans[s], writer) for s in inputs.config.scopes}
    ctx.seconds["tabulate_and_write"] = time.monotonic() - t0
    _check_overlap(inputs, runs)
    # the written tables are checked (polars, off the GIL) while release.json and the
    # report are written; a failed check is raised first and publishes nothing
    validated = background(partial(_validate_staged, ctx, inputs, tmp, list(plans.values())))
    try:
        outputs = outputs_manifest(tmp, writer.files)
        document = _document(ctx, inputs, runs, plans, analyses, outputs)
        document.write(tmp)
        if not document.private:
            write_not_private(tmp, document.noise)
        if ctx.opts.report:
            from privtab.safetab_h.report import write_report

            ctx.progress("writing report.html")
            write_report(tmp / "report.html", document.to_json())
    finally:
        validated()
    record = RunRecord(
        release=str(Path(os.path.abspath(ctx.out))),
        started_utc=ctx.started_utc,
        private=ctx.private,
        inputs=ctx.inputs_record,
        persons=None,
        seconds=ctx.seconds,
        levels=[
            {"run": s.value, "households": households.get(s.value, 0), **r.record}
            for s, r in runs.items()
        ],
    )
    return document, record


def _aggregate(ctx: _Context, inputs: HInputs) -> dict[str, int]:
    """Validate and aggregate the household file; refuse a file that changes while read."""
    from privtab.errors import InputError

    path = inputs.households_path
    before = path.stat()
    households = ctx.engine.prepare(inputs, ctx.progress)
    after = path.stat() if path.exists() else None
    if after is None or (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns):
        raise InputError(
            "the household file changed while it was read (size or modification time differ)",
            file=str(path),
            hint="run again on a file that is not being written",
        )
    return households


def _warn_dropped(ctx: _Context, inputs: HInputs) -> None:
    """Say which T1 rows no run tabulates because they lie outside its states (production's
    readers drop them silently)."""
    from privtab.safetab_h.domain import outside_examples

    for scope, groups in inputs.groups.items():
        n = groups.dropped.get("outside_states", 0)
        if n:
            where = "; ".join(
                outside_examples(
                    inputs.t1, scope, inputs.config.run_states(scope), inputs.geography
                )
            )
            msg = (
                f"{n:,} T1 row(s) of {scope.value} region types lie outside the run's states "
                f"and are not tabulated, as production's readers drop them (e.g. {where})"
            )
            LOG.warning(msg)


def _drawn(inputs: HInputs, scope: Scope, plan: HPlan) -> HPlan:
    """The queries of a run that will draw noise: a positive budget and T1 groups at their
    level (known before any household is read: T1 is public)."""
    from privtab.data import GeoLevel

    keep = tuple(
        q
        for q in plan.queries
        if inputs.groups[scope].levels[(GeoLevel(q.geo), q.iteration_level)].size > 0
    )
    return HPlan(plan.privacy_defn, keep, plan.source)


def _planned(drawn: dict[Scope, HPlan]) -> ExactGuarantee:
    definition = "zcdp" if next(iter(drawn.values())).privacy_defn == "zcdp" else "pure"
    return ExactGuarantee.parallel(
        p.exact_guarantee() if p.queries else ExactGuarantee.zero(definition)  # type: ignore[arg-type]
        for p in drawn.values()
    )


def _reserve(ctx: _Context, inputs: HInputs, drawn: dict[Scope, HPlan]) -> Reservation | None:
    """Reserve the release in the ledger, before the household file is read (private runs
    only): the person-level part ``2 ρ_H`` against the data set (module docstring)."""
    if not (ctx.private and ctx.opts.use_ledger):
        return None
    from privtab.accounting.odometer import ReleaseLedger

    planned = _planned(drawn).times(PERSON_FACTOR)
    digest = ctx.inputs_record[str(inputs.households_path)]["sha256"]
    dataset = ctx.opts.dataset_id or f"sha256:{digest}"
    ledger = ReleaseLedger.open(ctx.opts.ledger)
    ctx.progress(f"checking the release ledger {ledger.path}")
    return ledger.reserve(
        dataset,
        planned,
        release=str(Path(os.path.abspath(ctx.out))),
        plan="SafeTab-H per person (2 x rho per household): "
        + " + ".join(p.source for p in drawn.values()),
        lifetime=ctx.opts.lifetime,
        allow_more=ctx.opts.allow_more_releases,
    )


def _analyse(plan: HPlan, opts: RunOptions) -> dict[str, Any]:
    return analyse(plan, opts.delta, pld_grid=opts.pld_grid) if plan.queries else {}


def _check_households(inputs: HInputs, households: dict[str, int]) -> None:
    """Production's "No units data for the run": each run needs households of its states."""
    log = ProblemLog()
    for scope in inputs.config.scopes:
        if households.get(scope.value, 0) == 0:
            states = ", ".join(inputs.config.run_states(scope))
            log.add(
                Problem(
                    str(inputs.households_path),
                    "no_households_in_run",
                    f"no household of the {scope.value} run (states {states}): is it the "
                    "household file of this state filter and run_us/run_pr?",
                )
            )
    log.raise_if_any()


@dataclass
class _RunOut:
    """A run's entries for ``release.json`` and its confidential tallies."""

    guarantee: ExactGuarantee
    entries: list[LevelEntry]
    memberships: int
    record: dict[str, Any]


def _tabulate_run(
    ctx: _Context, inputs: HInputs, scope: Scope, plan: HPlan, writer: CensusWriter
) -> _RunOut:
    writer.start_run(scope.value)
    entries: list[LevelEntry] = []
    charges: list[ExactGuarantee] = []
    memberships = 0
    record: dict[str, Any] = {"queries": {}}
    for geo, lv in inputs.config.levels(scope):
        groups = inputs.groups[scope].levels[(geo, lv)]
        queries = [q for t in TABLES if (q := plan.query(t, geo.value, lv)) is not None]
        if groups.size == 0 or not queries:
            entries += _skipped(inputs, scope, geo.value, lv, groups.size)
            continue
        t0 = time.monotonic()
        drawing = Drawing(ctx.source, noise=ctx.opts.noise)
        tallies = {q.key: _Tally() for q in queries}
        for chunk in ctx.engine.tabulate(groups, queries, drawing, ctx.nonnegative):
            writer.write(chunk.frames())
            memberships += chunk.memberships
            for out in chunk.queries:
                tallies[out.query.key].add(out)
        cells = sum(t.cells for t in tallies.values())
        for q in queries:
            cost = _charge(q, tallies[q.key].cells > 0)
            charges.append(cost)
            entries.append(_entry(q, groups, tallies[q.key], cost))
            record["queries"][q.key] = {"groups": groups.size}
        ctx.progress(
            f"{scope.value} {groups.key}: {groups.size:,} groups, {cells:,} noisy cells "
            f"({time.monotonic() - t0:.1f} s)"
        )
    zero = ExactGuarantee.zero("zcdp" if plan.privacy_defn == "zcdp" else "pure")
    total = sum(charges, zero)
    record["memberships"] = memberships
    return _RunOut(total, entries, memberships, record)


@dataclass
class _Tally:
    levels: dict[int, int] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    cells: int = 0

    def add(self, out: Any) -> None:
        for k, n in out.levels.items():
            self.levels[k] = self.levels.get(k, 0) + n
        for name, frame in out.frames.items():
            self.rows[name] = self.rows.get(name, 0) + frame.height
        self.cells += out.cells


def _charge(q: QueryPlan, drew: bool) -> ExactGuarantee:
    """A query's exact cost: ``s`` draws of its per-cell mechanism (a household is in one
    cell of at most ``s`` groups), zero if it drew nothing."""
    cost = mechanism_cost(q.cell.mechanism)
    return cost.times(q.stability) if drew else ExactGuarantee.zero(cost.definition)


def _entry(q: QueryPlan, groups: LevelGroups, tally: _Tally, charged: ExactGuarantee) -> LevelEntry:
    d = q.design
    fields = {
        "level": q.key,
        "status": "tabulated",
        "table": q.table,
        "region_type": q.geo,
        "iteration_level": q.iteration_level,
        "groups": groups.size,
        "groups_per_stat_level": {d.table(k): n for k, n in sorted(tally.levels.items())},
        "rows_published": tally.rows,
        "noisy_cells": tally.cells,
        "budget": float(q.budget),
        "budget_exact": str(q.budget),
        "charged": charged.to_json(),
        "stability": q.stability,
        "thresholds": list(q.thresholds),
        "cell": q.cell.to_dict(),
        "moe95": q.cell_moes(),
    }
    return LevelEntry(q.key, "tabulated", charged, q.thresholds, fields)


def _skipped(inputs: HInputs, scope: Scope, geo: str, lv: int, groups: int) -> list[LevelEntry]:
    out = []
    for t in TABLES:
        from privtab.data import GeoLevel

        budget = inputs.config.budget(t, GeoLevel(geo), lv)
        why = "no budget (0: no query, as production)" if budget == 0 else "no T1 group"
        fields = {
            "level": f"{t.upper()} ({geo}, {lv})",
            "status": "no budget" if budget == 0 else "no groups",
            "table": t,
            "region_type": geo,
            "iteration_level": lv,
            "groups": groups,
            "budget": float(budget),
            "budget_exact": str(budget),
            "charged": None,
            "note": f"{why}: nothing drawn, nothing charged",
        }
        out.append(LevelEntry(str(fields["level"]), str(fields["status"]), None, (), fields))
    return out


def _check_overlap(inputs: HInputs, runs: dict[Scope, _RunOut]) -> None:
    """Production's overlap check: a run whose T1 groups hold no household at all is a
    mismatch of the T1 and the household file (e.g. a PR T1 with US households)."""
    log = ProblemLog()
    for scope, run in runs.items():
        if run.memberships == 0:
            log.add(
                Problem(
                    inputs.t1.source,
                    "no_overlap",
                    f"no household of the {scope.value} run is in any of its T1 population "
                    "groups: are the T1 and the household file of the same population?",
                )
            )
    log.raise_if_any()


def _validate_staged(ctx: _Context, inputs: HInputs, tmp: Path, plans: list[HPlan]) -> None:
    from privtab.publish.validation import OutputValidationError
    from privtab.safetab_h.validation import OutputRulesH, validate_output

    ctx.progress("validating the written tables (Census output rules)")
    t0 = time.monotonic()
    rules = OutputRulesH(inputs.config.states(), not ctx.nonnegative, inputs.config.source)
    groups = [inputs.groups[s] for s in inputs.config.scopes]
    try:
        validate_output(tmp, rules=rules, groups=groups, plans=plans)
    except OutputValidationError as exc:
        lines = str(exc).replace(str(tmp), str(ctx.out)).splitlines()
        shown = "\n".join(
            lines[:6] + ([f"  ... ({len(lines) - 6} more)"] if len(lines) > 6 else [])
        )
        raise RunFailedError(
            f"the written release failed output validation, so it was not published: {shown}",
            hint="this is a defect of privtab: please report it with the message",
        ) from exc
    ctx.seconds["validate_output"] = time.monotonic() - t0


def _public_config(inputs: HInputs) -> dict[str, Any]:
    """The config for ``release.json``: its values, and as its source the file's **name and
    SHA-256** — never its path, which names folders of the operator's machine (as
    SafeTab-P's ``release.json``)."""
    from privtab.data.inputs import sha256_file

    cfg = inputs.config.to_dict()
    where = Path(str(cfg.get("source", "")))
    cfg["source"] = where.name
    cfg["source_sha256"] = sha256_file(where) if where.is_file() else None
    return cfg


def _public_plan(plan: HPlan, source: str) -> dict[str, Any]:
    """``plan.to_dict()`` with the config's path in its label replaced by the file's name."""
    d = plan.to_dict()
    if source:
        d["source"] = str(d.get("source", "")).replace(source, Path(source).name)
    return d


def _document(
    ctx: _Context,
    inputs: HInputs,
    runs: dict[Scope, _RunOut],
    plans: dict[Scope, HPlan],
    analyses: dict[Scope, Callable[[], dict[str, Any]]],
    outputs: dict[str, Any],
) -> ReleaseDocument:
    from privtab.data.inputs import sha256_file

    guarantee = ExactGuarantee.parallel(r.guarantee for r in runs.values())
    worst = max(runs, key=lambda s: runs[s].guarantee.as_zcdp().value)
    entries = {
        s.value: RunEntry(
            scope=s.value,
            guarantee=r.guarantee,
            plan=_public_plan(plans[s], inputs.config.source),
            privacy=analyses[s](),
            levels=tuple(r.entries),
        )
        for s, r in runs.items()
    }
    extra = {
        "product": "SafeTab-H (Detailed DHC-B): T3 household type, T4 tenure",
        "algorithm": "SafeTab-H (DAS_2020_DDHCB_Production_Code): statistic levels from the "
        "public T1, independent noise per cell, marginals as sums of cells",
        "unit": "household (one household record added or removed)",
        "guarantee_note": (
            "per household, derived from the mechanisms that drew the noise, composed "
            "exactly: each run is the sequential composition of its queries (a household is "
            "in one cell of at most s groups of a query); the US and PR runs hold disjoint "
            "households (parallel composition). Floats are rounded up; the exact value is "
            "beside them. person_level: the guarantee per person of DHC-A and DHC-B together."
        ),
        "person_level": person_guarantee_json(
            guarantee, ctx.persons, ctx.persons_source, ctx.opts.delta
        ),
        "plan": _public_plan(plans[worst], inputs.config.source),
        "engine": ctx.engine.name,
        "config": _public_config(inputs),
        "domain": {s.value: inputs.groups[s].to_dict() for s in inputs.config.scopes},
        "public_inputs": {p.name: {"sha256": sha256_file(p)} for p in inputs.public_files()},
        "outputs": outputs,
    }
    return ReleaseDocument(
        privtab_version=__version__,
        started_utc=ctx.started_utc,
        private=ctx.private,
        noise="off (exact counts: NOT PRIVATE)" if not ctx.opts.noise else ctx.source.description,
        guarantee=guarantee,
        runs=entries,
        postprocessing={
            "nonnegative": ctx.nonnegative,
            "clamping": "each noisy cell clamped at 0 before the marginals (production)"
            if ctx.nonnegative
            else "none (allow_negative_counts)",
            "marginals": "every published cell that is not noisy is the sum of the published "
            "noisy cells below it in its table (T3: 0=1+6, 1=2+3, 3=4+5, 6=7+8; T4: 0=1+2+3)",
            "note": "post-processing of noisy output only: no privacy cost",
        },
        extra=extra,
        kind=KIND_H,
    )
