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
import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privtab.errors import InputError
from privtab.release.record import RunRecord
from privtab.topdown.assemble import Assembler, check_state
from privtab.topdown.document import KIND, SCHEMA_VERSION, headline_guarantee, write_document
from privtab.topdown.engine import ChunkResult
from privtab.topdown.folder import TopDownData
from privtab.topdown.runs import SCOPES, HistogramRun, RunPair, prepare_run, true_state_totals

if TYPE_CHECKING:
    from privtab.topdown.nmf import NMFWriter
    from privtab.topdown.run import _Context

__all__ = ["INVARIANTS", "POSTPROCESSING", "stream_release"]

#: What a release holds exactly (the invariants of the 2020 design).
INVARIANTS = (
    "persons run: each state's total population (a US state's AIAN and non-AIAN parts "
    "together; Puerto Rico's total)",
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
    "solvers": "structured (one Hessian shared by the children: ADMM, then an exact "
    "active-set solve with verified KKT conditions); Clarabel where siblings' variances "
    "differ (the spine's bypass) and for the units histogram",
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


def _nmf_writers(ctx: _Context, tmp: Path, pair: RunPair) -> dict[str, NMFWriter]:
    from privtab.topdown.nmf import NMFWriter

    return {
        hist: NMFWriter(tmp / "nmf" / f"{pair.scope}-{hist}", run.strategy, run.spine,
                        private=ctx.private)
        for hist, run in (("persons", pair.persons), ("units", pair.units))
    }  # fmt: skip


def stream_release(
    ctx: _Context, data: TopDownData, tmp: Path, fingerprints: dict[str, Any]
) -> tuple[dict[str, Any], RunRecord]:
    """The release's runs, outputs, document and checks (module docstring)."""
    from privtab.topdown.run import _Tally

    opts = ctx.opts
    t0 = time.monotonic()
    tally = _Tally(ctx.say, ctx.check)
    pairs: dict[str, RunPair] = {}
    skipped: dict[str, str] = {}
    writers: dict[str, NMFWriter] = {}
    for run in opts.runs:
        if not data.states(run):
            skipped[SCOPES[run]] = "the GRF-C holds no block of this scope"
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
            draw_all=opts.nmf,
        )
        if opts.nmf:
            new = _nmf_writers(ctx, tmp, pair)
            pair.persons.engine.builder.sink = new["persons"].add
            pair.units.engine.builder.sink = new["units"].add
            writers.update({f"{pair.scope}-{k}": w for k, w in new.items()})
        for hist, r in (("persons", pair.persons), ("units", pair.units)):
            r.engine.say = tally.engine(f"{pair.scope} {hist}", r.engine.total_parents)
        pairs[run] = pair
    if not pairs:
        raise InputError(
            f"the GRF-C holds no block of the requested runs ({', '.join(opts.runs)})",
            file=str(data.files["grfc"]),
        )
    ctx.seconds["prepare"] = time.monotonic() - t0
    asm = Assembler(tmp, ctx.private, data.grfc, data.units)
    persons_total = 0
    try:
        for run, pair in pairs.items():
            persons_total += _stream_scope(ctx, data, asm, run, pair)
        files = asm.finish()
        for w in writers.values():
            w.close()
    except BaseException:
        asm.abort()
        for w in writers.values():
            with contextlib.suppress(Exception):
                w.abort()
        raise
    ctx.seconds["runs_and_outputs"] = time.monotonic() - t0
    doc = _document(ctx, data, pairs, skipped, tmp, asm, files, writers, fingerprints)
    _finish_folder(ctx, tmp, doc)
    record = RunRecord(
        release=str(ctx.out),
        started_utc=ctx.started_utc,
        private=ctx.private,
        inputs=fingerprints,
        persons=persons_total,
        seconds=ctx.seconds,
        levels=[
            {"scope": pair.scope, "histogram": hist, **lv}
            for pair in pairs.values()
            for hist, r in (("persons", pair.persons), ("units", pair.units))
            for lv in r.engine.level_records()
        ],
    )
    return doc, record


def _stream_scope(ctx: _Context, data: TopDownData, asm: Assembler, run: str, pair: RunPair) -> int:
    """One scope, state by state; returns its (true) persons, for the run record."""
    states = data.states(run)
    totals = true_state_totals(pair.persons)
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
    ctx: _Context,
    data: TopDownData,
    pairs: dict[str, RunPair],
    skipped: dict[str, str],
    tmp: Path,
    asm: Assembler,
    files: list[Path],
    writers: dict[str, NMFWriter],
    fingerprints: dict[str, Any],
) -> dict[str, Any]:
    from privtab import __version__

    runs = {
        pair.scope: {"persons": pair.persons.public(), "units": pair.units.public()}
        for pair in pairs.values()
    }
    rows = {"mdf/persons.txt": asm.mdf.persons, "mdf/persons.parquet": asm.mdf.persons,
            "mdf/units.txt": asm.mdf.units, "mdf/units.parquet": asm.mdf.units}  # fmt: skip
    for table, n in asm.tables.rows.items():
        rows[f"pl94/{table}.txt"] = rows[f"pl94/{table}.parquet"] = n
    for name, w in writers.items():
        rows[f"nmf/{name}/dpqueries.parquet"] = w.rows
    grfc = str(data.files["grfc"])
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "privtab_version": __version__,
        "started_utc": ctx.started_utc,
        "private": ctx.private,
        "noise": ctx.source.description if ctx.opts.noise else "none (noise off: exact counts)",
        "guarantee": headline_guarantee(runs),
        "runs": runs,
        "skipped_runs": skipped,
        "invariants": list(INVARIANTS),
        "postprocessing": POSTPROCESSING,
        "public_inputs": {"GRF-C": {"sha256": fingerprints[grfc]["sha256"]}},
        "outputs": _manifest(tmp, rows),
    }


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
