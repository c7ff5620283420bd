"""The body of a TopDown release run: the runs prepared, streamed state by state, described.

:func:`stream_release` (called by :func:`privtab.topdown.run.run_release` inside its
staging folder and worker thread) prepares every requested scope's persons and units runs
(:func:`privtab.topdown.runs.prepare_run`), then for every state of the scope (GRF-C
order) takes the chunks of that state from both engines, checks them against the
invariants and constraints and appends them to the outputs
(:class:`privtab.topdown.assemble.Assembler`); then it finishes the files, writes the
noisy measurement files (``nmf/<scope>-<histogram>/``, with ``--nmf``), ``release.json``,
``report.html``, the ``NOT_PRIVATE`` marker of a test run, and validates the written
folder (:func:`privtab.topdown.validate.validate_release`) — a failing check publishes
nothing. It returns the document and the confidential run record.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from privtab.errors import InputError
from privtab.release.record import RunRecord
from privtab.topdown.assemble import Assembler, check_state
from privtab.topdown.document import KIND, SCHEMA_VERSION, headline_guarantee, write_document
from privtab.topdown.engine import ChunkResult
from privtab.topdown.folder import PR_STATE, TopDownData
from privtab.topdown.formats import formats
from privtab.topdown.runs import (
    SCOPES,
    HistogramRun,
    RunPair,
    invariant_state_totals,
    prepare_run,
)
from privtab.topdown.solve import ChildrenProblem, ChildrenSolution

if TYPE_CHECKING:
    from privtab.topdown.gls_round import GLSRoundSolve
    from privtab.topdown.nmf import NMFWriter
    from privtab.topdown.run import _Context
    from privtab.topdown.spark import SparkSolvePool

__all__ = [
    "INVARIANTS",
    "POSTPROCESSING",
    "PUBLIC_UNIT_COLUMNS",
    "Sources",
    "engine_document",
    "from_data",
    "from_nmf",
    "measured_first",
    "stream_release",
]

#: The unit counts of a block that are invariants of the 2020 design (public): housing units
#: and group-quarters facilities by major type — never occupied / vacant.
PUBLIC_UNIT_COLUMNS = ("HU", *(f"GQ{t}" for t in range(1, 8)))

#: What a release holds exactly (the invariants of the 2020 design).
INVARIANTS = (
    "persons run: each state's total population (a US state's AIAN and non-AIAN parts "
    "together; Puerto Rico's total)",
    "persons run, as production: the State-level bounds on the persons by group-quarters "
    "type are made with each AIAN / non-AIAN part's own total (production's hhgq_total_lb "
    "and hhgq_total_ub with tot), so those part totals enter the post-processing",
    "persons run: per block, the housing units and the group-quarters facilities by type "
    "(bounds on the persons by group-quarters type; published as the MDF unit records)",
    "units run: per block, the housing units (occupied + vacant)",
)

POSTPROCESSING: dict[str, Any] = {
    "algorithm": "production TopDown: the root, then every parent's children jointly, "
    "level by level; every parent's children measured just before they are solved",
    "l2": "weighted non-negative least squares (weight 1/σ², the exact discrete-Gaussian "
    "variance parameter of each child's query), production pass orders, inter-pass "
    "tolerance 0.1 on every earlier answer",
    "solvers": "structured (one Hessian per class of children with equal weights: ADMM, "
    "then an exact active-set solve with verified KKT conditions); the units histogram by "
    "an exact closed form (a weighted projection, KKT verified); Clarabel for a pass the "
    "structured solver cannot certify",
    "rounder": "multipass controlled rounding (production passes: total, then hhgq ⊃ "
    "hhgq×hispanic ⊃ hhgq×hispanic×cenrace ⊃ detailed), HiGHS LP with a totally "
    "unimodular constraint matrix, integrality checked on every problem",
    "checks": "every problem: children sum to the parent, non-negative integers, hhgq "
    "bounds, exact totals; every state before publication: invariants exact, constraints "
    "met; the written folder: tables = tabulation of the MDF, children sum to parents",
}


def _grouped(run: HistogramRun, states: list[str]) -> Iterator[tuple[str, list[ChunkResult]]]:
    """``(state, its chunks)`` for every state of ``states`` (no chunk: no block with a
    unit), the engine solving each state's chunks on demand."""
    chunk_state = run.chunk_states()
    order = sorted(range(len(chunk_state)), key=lambda u: (chunk_state[u], u))
    solved = itertools.groupby(run.engine.chunks(order), key=lambda c: chunk_state[c.unit])
    pending = next(solved, None)
    for state in states:
        if pending is not None and pending[0] == state:
            yield state, list(pending[1])
            pending = next(solved, None)
        else:
            yield state, []
    if pending is not None:
        raise AssertionError(f"chunks of state {pending[0]} are not in the GRF-C states")


@dataclass(eq=False)
class Sources:
    """What a release is made from: the scopes' runs (``pairs``), the scopes skipped, the
    blocks of the GRF-C (``grfc``: every block, tabulation columns) with their invariant
    unit counts (``unit_counts``: ``BLOCK``, ``HU``, ``GQ1`` … ``GQ7``), the public
    inputs named in ``release.json`` and, for a re-run, what it was derived from."""

    pairs: dict[str, RunPair]
    skipped: dict[str, str]
    grfc: pl.DataFrame
    unit_counts: pl.DataFrame
    public_inputs: dict[str, Any]
    derived_from: dict[str, Any] | None = None
    writers: dict[str, NMFWriter] = field(default_factory=dict)
    #: ``--postprocess gls-round``: each run's per-parent solve (their GLS seconds)
    gls_solves: list[GLSRoundSolve] = field(default_factory=list)
    #: where the noisy measurements are written (``writers``), and whether they are done
    nmf_dir: Path | None = None
    nmf_closed: bool = False


def _nmf_writers(ctx: _Context, base: Path, pair: RunPair) -> dict[str, NMFWriter]:
    from privtab.topdown.nmf import NMFWriter

    return {
        hist: NMFWriter(base / f"{pair.scope}-{hist}", run.strategy, run.spine,
                        private=ctx.private)
        for hist, run in (("persons", pair.persons), ("units", pair.units))
    }  # fmt: skip


def from_data(
    ctx: _Context, data: TopDownData, tmp: Path, grfc_sha256: str, nmf_dir: Path | None = None
) -> Sources:
    """The requested scopes' runs on validated inputs (noise drawn as the engines solve;
    with ``--nmf`` or ``gls-round``, every measurement written as it is drawn, to
    ``nmf_dir``: default ``tmp/nmf``)."""
    opts = ctx.opts
    write = opts.nmf or opts.postprocess == "gls-round"
    src = Sources({}, {}, data.grfc, data.units, {"GRF-C": {"sha256": grfc_sha256}})
    src.nmf_dir = nmf_dir or tmp / "nmf"
    for run in opts.runs:
        if not data.states(run):
            src.skipped[SCOPES[run]] = "the GRF-C holds no block of this scope"
            continue
        ctx.say(f"preparing the {SCOPES[run]} runs (spine, constraints, guarantee)")
        pair = prepare_run(
            data,
            run,
            source=ctx.source,
            noise=opts.noise,
            strategies=(opts.strategies or {}).get(run),
            optimized_block_groups=opts.optimized_block_groups,
            solve=opts.solve,
            draw_all=write,
        )
        if write:
            new = _nmf_writers(ctx, src.nmf_dir, pair)
            pair.persons.engine.builder.sink = new["persons"].add
            pair.units.engine.builder.sink = new["units"].add
            src.writers.update({f"{pair.scope}-{k}": w for k, w in new.items()})
        src.pairs[run] = pair
    if not src.pairs:
        raise InputError(
            f"the GRF-C holds no block of the requested runs ({', '.join(opts.runs)})",
            file=str(data.files["grfc"]),
        )
    return src


def from_nmf(ctx: _Context, folder: Path) -> Sources:
    """The scopes of a release's noisy measurement folder (``nmf/``: ``<SCOPE>-persons``
    and ``<SCOPE>-units``), to post-process them again — no data."""
    from privtab.topdown.nmf_structure import BLOCKS
    from privtab.topdown.runs import pair_from_nmf

    pairs: dict[str, RunPair] = {}
    blocks = []
    for run, scope in SCOPES.items():
        p, u = folder / f"{scope}-persons", folder / f"{scope}-units"
        if not (p.is_dir() or u.is_dir()):
            continue
        ctx.say(f"reading the {scope} noisy measurements")
        pairs[run] = pair_from_nmf(p, u, solve=ctx.opts.solve)
        blocks.append(pl.read_parquet(p / BLOCKS))
    if not pairs:
        raise InputError(
            "no noisy measurement folder (US-persons, US-units, PR-persons, PR-units)",
            file=str(folder),
            hint="give the nmf/ folder of a release made with --nmf",
        )
    facts = pl.concat(blocks).sort("BLOCK")
    counts = facts.select("BLOCK", "HU", *(f"GQ{t}" for t in range(1, 8)))
    grfc = facts.drop("HU", *(f"GQ{t}" for t in range(1, 8)))
    from privtab.data.inputs import sha256_file

    derived = {
        "command": "privtab topdown postprocess",
        "measurements": {
            f"{d.name}/dpqueries.parquet": sha256_file(d / "dpqueries.parquet")
            for d in sorted(folder.iterdir())
            if (d / "dpqueries.parquet").is_file()
        },
    }
    src = Sources(pairs, {}, grfc, counts, {}, derived)
    if ctx.opts.postprocess == "gls-round":
        _use_gls_round(ctx, src, folder)
    return src


def measured_first(ctx: _Context, src: Sources, tmp: Path) -> Sources:
    """``gls-round`` on data: every noisy measurement drawn first (to ``src.nmf_dir``), in
    production's order — the engines walk the spine exactly as a production run with
    ``--nmf`` does, solving nothing (:func:`_measure_only`), so a seed gives the same
    measurements — then the runs read back from those files, post-processed by
    ``gls-round``."""
    from privtab.topdown.run import _Tally
    from privtab.topdown.runs import pair_from_nmf

    t0 = time.monotonic()
    ctx.say("drawing every noisy measurement (gls-round needs them all first)")
    tally = _Tally(ctx.say, ctx.check)
    for run, pair in src.pairs.items():
        for hist, r in (("persons", pair.persons), ("units", pair.units)):
            r.engine.solve = _measure_only
            r.engine.say = tally.engine(f"{pair.scope} {hist} measured", r.engine.total_parents)
        states = _scope_states(src, run)
        for _ in zip(_grouped(pair.persons, states), _grouped(pair.units, states), strict=True):
            ctx.check()
    _close_nmf(src, tmp)
    base = src.nmf_dir or tmp / "nmf"
    pairs = {
        run: pair_from_nmf(base / f"{p.scope}-persons", base / f"{p.scope}-units")
        for run, p in src.pairs.items()
    }
    out = Sources(pairs, src.skipped, src.grfc, src.unit_counts, src.public_inputs,
                  writers=src.writers if ctx.opts.nmf else {}, nmf_dir=base,
                  nmf_closed=True)  # fmt: skip
    for run, pair in out.pairs.items():  # the measurements' privacy is this run's
        was = src.pairs[run]
        for new, old in ((pair.persons, was.persons), (pair.units, was.units)):
            new.plan, new.shares = old.plan, old.shares
    ctx.seconds["measure_all"] = time.monotonic() - t0
    _use_gls_round(ctx, out, base)
    out.derived_from = None
    return out


def _measure_only(problem: ChildrenProblem) -> ChildrenSolution:
    """The measurement pass of :func:`measured_first`: no solve — all-zero children, so
    every parent is all-zero and its children's measurements are drawn in full
    (``draw_all``). Never published."""
    from privtab.topdown.solve import SolveDiagnostics
    from privtab.topdown.solve_model import layout

    k = len(problem.children)
    zeros = np.zeros((k, layout(problem.histogram).cells), dtype=np.int64)
    diag = SolveDiagnostics(problem.geounit, k, "measured only")
    return ChildrenSolution(zeros.astype(np.float64), zeros, diag)


def _scope_states(src: Sources, run: str) -> list[str]:
    return sorted(
        set(src.grfc.filter((pl.col("TABBLKST") == PR_STATE) == (run == "pr"))
            .get_column("TABBLKST").to_list())
    )  # fmt: skip


def _use_gls_round(ctx: _Context, src: Sources, folder: Path) -> None:
    """Every run of ``src`` post-processed by ``gls-round`` (:mod:`privtab.topdown.gls_round`)."""
    from privtab.topdown.gls_release import read_gls_run
    from privtab.topdown.gls_round import GLSRoundSolve

    for pair in src.pairs.values():
        for hist, r in (("persons", pair.persons), ("units", pair.units)):
            solve = GLSRoundSolve(read_gls_run(folder / f"{pair.scope}-{hist}"), ctx.say)
            r.engine.solve = solve
            src.gls_solves.append(solve)
    src.derived_from = {**(src.derived_from or {}), "postprocess": "gls-round"}


def stream_release(
    ctx: _Context, src: Sources, tmp: Path, inputs: dict[str, Any]
) -> tuple[dict[str, Any], RunRecord]:
    """The release's outputs state by state, its document and checks (module docstring);
    ``inputs``: the confidential fingerprints for the run record."""
    from privtab.topdown.run import _Tally
    from privtab.topdown.workers import SolvePool

    t0 = time.monotonic()
    tally = _Tally(ctx.say, ctx.check)
    pool: SolvePool | SparkSolvePool = SolvePool(ctx.opts.workers) if ctx.pool is None else ctx.pool
    for pair in src.pairs.values():
        for hist, r in (("persons", pair.persons), ("units", pair.units)):
            r.engine.say = tally.engine(f"{pair.scope} {hist}", r.engine.total_parents)
            r.engine.pool = pool
    asm = Assembler(tmp, ctx.private, src.grfc, src.unit_counts, ctx.opts.text)
    persons_total = 0
    try:
        with pool:
            for run, pair in src.pairs.items():
                persons_total += _stream_scope(ctx, src, asm, run, pair)
        files = asm.finish()
        _close_nmf(src, tmp)
    except BaseException:
        asm.abort()
        for w in src.writers.values():
            with contextlib.suppress(Exception):
                w.abort()
        raise
    ctx.seconds["runs_and_outputs"] = time.monotonic() - t0
    if ctx.pool is not None:
        ctx.say(ctx.pool.summary())
    if src.gls_solves:
        ctx.seconds["gls"] = sum(g.seconds for g in src.gls_solves)
    doc = _document(ctx, src, tmp, asm, files)
    levels = [
        {"scope": pair.scope, "histogram": hist, **lv}
        for pair in src.pairs.values()
        for hist, r in (("persons", pair.persons), ("units", pair.units))
        for lv in r.engine.level_records()
    ]
    # the runs (spines, true histograms, constraints, engines: ≈ 10 GB at the 2020 size)
    # are let go before the written folder is validated, which needs only the folder
    del asm
    src.pairs.clear()
    gc.collect()
    _finish_folder(ctx, tmp, doc)
    record = RunRecord(
        release=str(ctx.out),
        started_utc=ctx.started_utc,
        private=ctx.private,
        inputs=inputs,
        persons=persons_total,
        seconds=ctx.seconds,
        levels=levels,
    )
    return doc, record


def _close_nmf(src: Sources, tmp: Path) -> None:
    """Finish the noisy measurement files, each with its run's public structure."""
    from privtab.topdown.nmf_structure import write_structure

    if src.nmf_closed:
        return
    src.nmf_closed = True
    base = src.nmf_dir or tmp / "nmf"

    # only the invariant unit counts: the occupied / vacant split of a block is the units
    # run's protected histogram, never a public fact
    public = src.unit_counts.select("BLOCK", *PUBLIC_UNIT_COLUMNS)
    facts = src.grfc.join(public, on="BLOCK", how="left").with_columns(
        pl.col(*PUBLIC_UNIT_COLUMNS).fill_null(0)
    )
    for pair in src.pairs.values():
        st = facts.filter((pl.col("TABBLKST") == PR_STATE) == (pair.scope == "PR"))
        for hist, r in (("persons", pair.persons), ("units", pair.units)):
            name = f"{pair.scope}-{hist}"
            if name in src.writers:
                src.writers[name].close()
                write_structure(base / name, r.spine, r.constraints, st,
                                r.strategy.schema.cells)  # fmt: skip


def _stream_scope(ctx: _Context, src: Sources, asm: Assembler, run: str, pair: RunPair) -> int:
    """One scope, state by state; returns its persons (the invariant total)."""
    states = _scope_states(src, run)
    totals = invariant_state_totals(pair.persons)
    persons = _grouped(pair.persons, states)
    units = _grouped(pair.units, states)
    p_ids, u_ids = pair.persons.leaf_blocks(), pair.units.leaf_blocks()
    for (state, pc), (state_u, uc) in zip(persons, units, strict=True):
        assert state == state_u
        ctx.check()
        sb = asm.state_blocks(state, (p_ids, pc), (u_ids, uc))
        check_state(sb, totals.get(state, 0), sb.unit_counts[:, 0])
        asm.add(sb)
    return int(sum(totals.values()))


def _manifest(tmp: Path, rows: dict[str, int]) -> dict[str, Any]:
    from privtab.data.inputs import sha256_file

    out: dict[str, Any] = {}
    for p in sorted(tmp.rglob("*")):
        if p.is_file() and p.name not in ("release.json", "report.html", "NOT_PRIVATE"):
            rel = p.relative_to(tmp).as_posix()
            if rel.startswith("."):
                continue
            out[rel] = {"sha256": sha256_file(p), **({"rows": rows[rel]} if rel in rows else {})}
    return {"files": out}


def _document(
    ctx: _Context, src: Sources, tmp: Path, asm: Assembler, files: list[Path]
) -> dict[str, Any]:
    from privtab import __version__

    runs = {
        pair.scope: {"persons": pair.persons.public(), "units": pair.units.public()}
        for pair in src.pairs.values()
    }
    rows: dict[str, int] = {}
    for ext in formats(ctx.opts.text):
        rows[f"mdf/persons.{ext}"] = asm.mdf.persons
        rows[f"mdf/units.{ext}"] = asm.mdf.units
        for table, n in asm.tables.rows.items():
            rows[f"pl94/{table}.{ext}"] = n
    for name, w in src.writers.items():
        rows[f"nmf/{name}/dpqueries.parquet"] = w.rows
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "privtab_version": __version__,
        "started_utc": ctx.started_utc,
        "private": ctx.private,
        "noise": _noise(ctx, src),
        "guarantee": headline_guarantee(runs),
        "runs": runs,
        "skipped_runs": src.skipped,
        "invariants": list(INVARIANTS),
        "postprocessing": _postprocessing(ctx),
        "engine": engine_document(ctx.opts.engine, ctx.opts.workers),
        "public_inputs": src.public_inputs,
        "formats": list(formats(ctx.opts.text)),
        "outputs": _manifest(tmp, rows),
    }
    if src.derived_from is not None:
        doc["derived_from"] = src.derived_from
    return doc


def engine_document(engine: str | SparkSolvePool, workers: int) -> dict[str, Any]:
    """What ran the post-processing, for ``release.json``: ``{"name": "polars",
    "workers": W}`` (the embedded engine and its solving processes) or ``{"name":
    "spark"}`` — settings of the run, public (nothing computed from the data, no timing;
    the output is the same whatever they are)."""
    name = engine if isinstance(engine, str) else engine.name
    return {"name": name, "workers": workers} if name == "polars" else {"name": name}


def _postprocessing(ctx: _Context) -> dict[str, Any]:
    if ctx.opts.postprocess == "gls-round":
        from privtab.topdown.gls_round import GLS_ROUND

        return dict(GLS_ROUND)
    return POSTPROCESSING


def _noise(ctx: _Context, src: Sources) -> str:
    if src.derived_from is not None:
        private = "private" if ctx.private else "NOT private"
        return f"none drawn: post-processed from noisy measurements ({private})"
    if not ctx.opts.noise:
        return "none (noise off: exact counts)"
    return ctx.source.description


def _finish_folder(ctx: _Context, tmp: Path, doc: dict[str, Any]) -> None:
    """``release.json``, the report, the marker; then the written folder is validated."""
    from privtab.release.marking import write_not_private
    from privtab.topdown.validate import validate_release

    write_document(tmp, doc)
    if not ctx.private:
        write_not_private(tmp, doc["noise"])
    if ctx.opts.report:
        from privtab.topdown.report import write_report

        ctx.say("writing report.html")
        write_report(tmp / "report.html", doc)
    ctx.say("validating the written release")
    t0 = time.monotonic()
    validate_release(tmp)
    ctx.seconds["validate_output"] = time.monotonic() - t0
