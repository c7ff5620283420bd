"""A whole SafeTab-H release: inputs → validated aggregation → every query → files.

:func:`run_release` is what ``privtab safetab-h run`` calls. It is SafeTab-P's run on the
same floors — the product-neutral run skeleton (:mod:`privtab.publish.run`) and ledger
steps (:mod:`privtab.publish.ledgering`); SafeTab-H's own part is what happens inside the
staging folder:

1. **refuses early** (before reading the household file): an output location that would
   overwrite or lose something, is a symbolic link or has no parent folder without
   ``parents`` (:mod:`privtab.atomic`), a run record inside it; then (in the worker) bad
   config / reference files / GRF-C / T1 (:func:`privtab.safetab_h.inputs.load_inputs`);
   then reserves the release in the operator's ledger (private runs), which refuses past
   a lifetime budget and reports every unconfirmed entry;
2. validates and aggregates the household file in one streaming pass (any bad row → one
   :class:`privtab.data.InputValidationError` naming file, line, column and value; a run
   with no household of its states is refused, as production does), digesting the parsed
   households (:class:`privtab.accounting.digest.RecordDigest`, the data set's identity
   in the ledger, :func:`privtab.publish.ledgering.identify_release`);
3. tabulates every level of every run (US, PR) that has T1 groups, its T3 and T4 queries
   with a positive budget, chunk by chunk (:class:`~privtab.safetab_h.engine.HEngine`):
   statistic levels from T1, noisy cells, clamping, marginals; the rows go to the Census
   folders ``t3/T03001/`` … ``t4/T04002/`` inside a staging folder; a run whose T1 groups
   hold no household is refused (production's overlap check);
4. checks every written table (:func:`privtab.safetab_h.validation.validate_output`: a
   failure publishes nothing) while it writes ``release.json`` (the guarantee is the exact
   sum of the charges of the queries that drew noise; the person-level guarantee of DHC-A
   and DHC-B together beside it), ``report.html`` and — for test runs — ``NOT_PRIVATE``;
   the skeleton renames the staging folder onto ``out`` (its marker carries the folder id
   the ledger entry records; every file carries the run's start as its time), marks the
   ledger entry published and writes the confidential run record outside the folder.

Privacy: per household (added or removed), ``Σ_q ρ_q`` of the queries that drew, per run;
the US and PR runs hold disjoint households, so the release satisfies the larger
(parallel composition). Per person: :func:`privtab.safetab_h.privacy.person_guarantee`.
The ledger is charged the person-level part ``2ρ_H`` (a person changes at most one
household record). Its data set, unless ``--dataset-id`` names one, is that of the ledger
entry of the SafeTab-P release whose T1 the run reads (the entry that wrote the folder,
found by the folder's marker id), so that DHC-A and DHC-B of one population compose per
person (``privtab safetab run --products p,h``); without such an entry, the household
records' digest.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privtab.accounting.exact import ExactGuarantee
from privtab.data import Scope
from privtab.data.errors import Problem, ProblemLog
from privtab.mechanisms.counts import mechanism_cost
from privtab.publish.census import CensusWriter, outputs_manifest
from privtab.publish.context import ReleaseContext
from privtab.publish.ledgering import (
    dataset_of_folder,
    fingerprints,
    identify_release,
    reserve_release,
)
from privtab.publish.run import (
    ReleaseResult,
    finish_staged,
    new_release_document,
    public_config,
    public_label,
    publish_release,
    read_unchanged,
    start_release,
)
from privtab.publish.worker import background
from privtab.release.document import KIND_H, LevelEntry, ReleaseDocument, RunEntry
from privtab.release.marking import parquet_metadata
from privtab.release.record import RunRecord
from privtab.safetab_h.config import TABLES
from privtab.safetab_h.engine import HEngine, make_engine
from privtab.safetab_h.inputs import HInputs, load_inputs, resolve_config_path
from privtab.safetab_h.privacy import PERSON_FACTOR, analyse, person_guarantee_json
from privtab.safetab_h.queries import HPlan, QueryPlan
from privtab.safetab_h.tables import DESIGNS, census_tables, wide_schema
from privtab.tabulate.chunk import Drawing
from privtab.tabulate.context import RunOptions

if TYPE_CHECKING:
    from privtab.release.document import ReleaseDocument as _Doc
    from privtab.safetab_h.domain import LevelGroups

__all__ = ["HRunResult", "run_release"]

LOG = logging.getLogger("privtab.safetab_h")


@dataclass
class HRunResult(ReleaseResult):
    """What a SafeTab-H run published (``document``: ``release.json``, per household and
    per person) and what only the operator may see (``record``)."""

    def summary(self) -> dict[str, Any]:
        """The JSON summary of the run (``privtab safetab-h run --json``): where it is, the
        guarantee per household (beside the config's budget and the queries that drew
        nothing: ``budget_drawn``) and per person, the rows per table, ε per analysis and the
        domain. No timing, no count of the confidential file (they are in the run record)."""
        rel = self.release
        rows = {
            f: m["rows"]
            for f, m in rel["outputs"]["files"].items()
            if m["kind"] in ("census_text", "census_parquet")
        }
        return {
            "out": str(self.out),
            "private": rel["private"],
            "run_record": str(self.record_path) if self.record_path else None,
            "guarantee": rel["guarantee"],
            "budget_drawn": rel.get("budget_drawn"),
            "person_level": rel["person_level"],
            "rows": rows,
            "epsilon": {
                s: {k: v["epsilon"] for k, v in run["privacy"].items()}
                for s, run in rel["runs"].items()
                if run["privacy"]
            },
            "domain": rel["domain"],
        }

    def headline(self) -> str:
        """One line: where the release is, its rows and its guarantees (exact)."""
        p = self.release["person_level"]
        g = ExactGuarantee.from_json(p["guarantee"])
        person = (
            f"{g} ({p['formula']})"
            if p["complete"]
            else f"{g} for DHC-B's part (SafeTab-P's is not known: {p['persons_source']})"
        )
        rows = sum(self.summary()["rows"].values())
        return (
            f"SafeTab-H release written to {self.out}: {rows:,} rows; per household "
            f"{self.document.guarantee}; per person {person}"
            + ("" if self.private else " — NOT PRIVATE (test run)")
        )


@dataclass(kw_only=True)
class _Context(ReleaseContext):
    """Everything one SafeTab-H run needs (resolved once, read by the worker): the
    product-neutral run state and SafeTab-H's inputs."""

    config: Path
    data_dir: Path
    t1: Path | None
    opts: RunOptions
    engine: HEngine
    persons: ExactGuarantee | None
    persons_source: str
    t1_release: Path | None = None
    """The privtab SafeTab-P release folder the T1 comes from (``None``: another T1)."""
    nonnegative: bool = False


@dataclass
class _Built:
    """What the worker produced in the staging folder."""

    document: ReleaseDocument
    record: RunRecord


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
    from privtab.errors import UsageError

    opts = options or RunOptions()
    if not isinstance(opts.engine, str):
        raise UsageError("SafeTab-H takes an engine by name: polars or spark")
    config_path = resolve_config_path(config)
    t1_path = None if t1 is None else Path(t1)
    protect = [Path(data_dir), config_path.parent if config is not None else config_path]
    protect += [t1_path] if t1_path is not None else []
    start = start_release(opts, product="SafeTab-H", out=out, protect=protect)
    release = _t1_release(t1_path)
    found, where = (persons, "given") if persons is not None else _t1_guarantee(release)
    engine = make_engine(opts.engine)
    ctx = _Context(
        config=config_path,
        data_dir=Path(data_dir),
        t1=t1_path,
        out=Path(out),
        opts=opts,
        source=start.source,
        engine=engine,
        say=progress or LOG.info,
        started_utc=start.started_utc,
        started_at=start.started_at,
        persons=found,
        persons_source=where,
        t1_release=None if release is None else release[0],
    )
    done = publish_release(ctx, start, engine, lambda tmp: _build(ctx, tmp))
    return HRunResult(
        out=ctx.out,
        document=done.built.document,
        record=done.built.record,
        record_path=done.record_path,
        interrupted_after_publication=done.interrupted_after_publication,
        warnings=done.warnings,
    )


def _t1_release(t1: Path | None) -> tuple[Path, _Doc] | None:
    """The privtab SafeTab-P release folder the T1 ``t1`` belongs to (the folder or its
    ``t1/``) and its ``release.json``, or ``None``."""
    if t1 is None:
        return None
    from privtab.release.document import KIND, ReleaseDocumentError, read_release_document

    for folder in (t1, t1.parent):
        if (folder / "release.json").is_file():
            try:
                doc = read_release_document(folder)
            except ReleaseDocumentError:
                continue
            if doc.kind == KIND:
                return folder, doc
    return None


def _t1_guarantee(release: tuple[Path, _Doc] | None) -> tuple[ExactGuarantee | None, str]:
    """SafeTab-P's per-person guarantee when the T1 is a privtab SafeTab-P release, else
    ``None``."""
    if release is None:
        return None, "unknown: the T1 is not a privtab SafeTab-P release"
    doc = release[1]
    note = "" if doc.private else " (NOT PRIVATE: a test release)"
    return doc.guarantee, f"the SafeTab-P release that published the T1{note}"


# ----------------------------------------------------------------------------- the worker
def _build(ctx: _Context, tmp: Path) -> _Built:
    """Everything up to publication, inside the staging folder ``tmp``."""
    ctx.progress("reading config, reference files, GRF-C and T1")
    t0 = time.monotonic()
    inputs = load_inputs(ctx.config, ctx.data_dir, ctx.t1, allow_empty=ctx.opts.allow_empty)
    _warn_dropped(ctx, inputs)
    opt = ctx.opts.nonnegative
    ctx.nonnegative = not inputs.config.allow_negative_counts if opt is None else opt
    plans = {s: HPlan.from_config(inputs.config, inputs.reference, s) for s in inputs.config.scopes}
    drawn = {s: _drawn(inputs, s, p) for s, p in plans.items()}
    _warn_undrawn(plans, drawn)
    ctx.inputs_record = fingerprints(inputs.input_files())
    _reserve(ctx, inputs, drawn)
    ctx.seconds["inputs"] = time.monotonic() - t0
    ctx.phase("inputs")
    analyses = {s: background(partial(_analyse, p, ctx.opts)) for s, p in drawn.items()}
    t0 = time.monotonic()
    households = read_unchanged(
        inputs.households_path, "household", lambda: ctx.engine.prepare(inputs, ctx.progress)
    )
    ctx.seconds["aggregate"] = time.monotonic() - t0
    _warn_left_out(inputs, ctx.engine.skipped)
    _check_households(inputs, households)
    records = ctx.engine.records
    identify_release(ctx, None if records is None else records.key)
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
    ctx.phase("write")

    def report(document: ReleaseDocument) -> None:
        from privtab.safetab_h.report import write_report

        write_report(tmp / "report.html", document.to_json())

    outputs = outputs_manifest(tmp, writer.files)
    document = finish_staged(
        ctx,
        tmp,
        validate=partial(_validate_staged, ctx, inputs, tmp, list(plans.values())),
        document=partial(_document, ctx, inputs, runs, plans, analyses, outputs),
        report=report,
    )
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
        left_out={inputs.households_path.name: ctx.engine.skipped},
    )
    return _Built(document, record)


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


def _warn_left_out(inputs: HInputs, skipped: int) -> None:
    """Say how many household rows were left out because their state is not one of the
    runs' (production's readers drop them silently). For the operator (stderr) and the
    confidential run record only: the count is computed from the confidential input and
    never reaches the release."""
    if skipped:
        states = ", ".join(inputs.config.states())
        LOG.warning(
            f"{skipped:,} household row(s) of {inputs.households_path.name} lie in states "
            f"outside the runs ({states}) and were left out unread, as production's readers "
            "do (check state_filter_us if they were meant to be released)"
        )


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


def _undrawn(plan: HPlan, drawn: HPlan) -> list[str]:
    """The queries of the config (positive budget) that draw nothing: no T1 population
    group at their (region type, iteration level) — e.g. AIANNH when no block of the run's
    states lies in an American Indian / Alaska Native / Native Hawaiian area. Public: the
    groups are T1's and the regions GRF-C's, never the household file's."""
    kept = {q.key for q in drawn.queries}
    return [q.key for q in plan.queries if q.key not in kept]


def _warn_undrawn(plans: dict[Scope, HPlan], drawn: dict[Scope, HPlan]) -> None:
    """Say which queries draw nothing and that the guarantee is then below the config's
    budget (it is derived from the mechanisms that draw)."""
    for scope, plan in plans.items():
        missing = _undrawn(plan, drawn[scope])
        if missing:
            LOG.warning(
                "%s run: %d quer%s of the config ha%s no T1 population group (%s): nothing is "
                "drawn or published for %s, so the run's guarantee per household is %s, below "
                "the config's budget %s",
                scope.value,
                len(missing),
                "y" if len(missing) == 1 else "ies",
                "s" if len(missing) == 1 else "ve",
                ", ".join(missing),
                "it" if len(missing) == 1 else "them",
                _planned({scope: drawn[scope]}),
                plan.exact_guarantee(),
            )


def _budget_drawn(
    plans: dict[Scope, HPlan], runs: dict[Scope, _RunOut], inputs: HInputs
) -> dict[str, Any]:
    """``release.json``'s ``budget_drawn``: per run, the config's budget, the guarantee
    charged (the mechanisms that drew) and the queries that drew nothing, with why."""
    out: dict[str, Any] = {}
    for scope, plan in plans.items():
        drawn = _drawn(inputs, scope, plan)
        out[scope.value] = {
            "configured": plan.exact_guarantee().to_json(),
            "charged": runs[scope].guarantee.to_json(),
            "not_drawn": _undrawn(plan, drawn),
        }
    out["note"] = (
        "the guarantee is derived from the mechanisms that drew noise: a query of the config "
        "with no T1 population group at its region type and iteration level (its region "
        "type has no region of the run's states in GRF-C, or T1 has no group there) draws "
        "and publishes nothing and spends none of its budget. Which queries draw is decided "
        "by public inputs only (T1, GRF-C, the reference files), never by the households."
    )
    return out


def _planned(drawn: dict[Scope, HPlan]) -> ExactGuarantee:
    definition = "zcdp" if next(iter(drawn.values())).privacy_defn == "zcdp" else "pure"
    return ExactGuarantee.parallel(
        p.exact_guarantee() if p.queries else ExactGuarantee.zero(definition)  # type: ignore[arg-type]
        for p in drawn.values()
    )


def _reserve(ctx: _Context, inputs: HInputs, drawn: dict[Scope, HPlan]) -> None:
    """Reserve the release in the ledger, before the household file is read (private runs
    only): the person-level part ``2 ρ_H``, against the data set of the SafeTab-P release
    whose T1 this run reads when the ledger has it (module docstring)."""
    if not (ctx.private and ctx.opts.use_ledger):
        return
    dataset = None
    if ctx.opts.dataset_id is None and ctx.t1_release is not None:
        dataset = dataset_of_folder(ctx.opts.ledger, ctx.t1_release)
        if dataset is not None:
            ctx.progress(
                f"the data set: that of the SafeTab-P release {ctx.t1_release} in the ledger"
            )
    label = "SafeTab-H per person (2 x rho per household): " + " + ".join(
        p.source for p in drawn.values()
    )
    planned = _planned(drawn).times(PERSON_FACTOR)
    reserve_release(ctx, inputs.households_path, planned, label, dataset=dataset)


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
    """Every written table against the Census output rules (run by
    :func:`privtab.publish.run.check_staged`: a failure publishes nothing)."""
    from privtab.safetab_h.validation import OutputRulesH, validate_output

    rules = OutputRulesH(inputs.config.states(), not ctx.nonnegative, inputs.config.source)
    groups = [inputs.groups[s] for s in inputs.config.scopes]
    validate_output(tmp, rules=rules, groups=groups, plans=plans)


def _public_plan(plan: HPlan, source: str) -> dict[str, Any]:
    """``plan.to_dict()`` with the config's path in its label replaced by the file's name."""
    d = plan.to_dict()
    return {**d, "source": public_label(str(d.get("source", "")), source)}


def _document(
    ctx: _Context,
    inputs: HInputs,
    runs: dict[Scope, _RunOut],
    plans: dict[Scope, HPlan],
    analyses: dict[Scope, Callable[[], dict[str, Any]]],
    outputs: dict[str, Any],
) -> ReleaseDocument:
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
            "beside them. budget_drawn: the config's budget beside what was charged, and the "
            "queries that drew nothing (no T1 group). person_level: the guarantee per person "
            "of DHC-A and DHC-B together."
        ),
        "person_level": person_guarantee_json(
            guarantee, ctx.persons, ctx.persons_source, ctx.opts.delta
        ),
        "budget_drawn": _budget_drawn(plans, runs, inputs),
        "plan": _public_plan(plans[worst], inputs.config.source),
        "engine": ctx.engine.name,
        "config": public_config(inputs.config.to_dict()),
        "domain": {s.value: inputs.groups[s].to_dict() for s in inputs.config.scopes},
    }
    return new_release_document(
        ctx,
        guarantee=guarantee,
        runs=entries,
        public=inputs.public_files(),
        outputs=outputs,
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
