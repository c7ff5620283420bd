"""A whole TopDown release: inputs → noisy measurements → top-down post-processing → files.

:func:`run_release` is what ``privtab topdown run``, :func:`privtab.topdown.release` and
``privtab demo`` call. It

1. **refuses early**: an output location that would overwrite or lose something
   (:mod:`privtab.atomic`), an unknown engine, noise off or a seeded source without
   ``allow_insecure``; ``engine="spark"`` starts its Spark session in the background
   (:mod:`privtab.topdown.spark`: the per-parent slices solved in Spark tasks);
2. finds the input files, and — private runs — reserves the release in the operator's
   release ledger before reading them (:mod:`privtab.topdown.ledger`);
3. validates every input file and cross-file rule, and aggregates the records by block
   (:mod:`privtab.topdown.folder`); refuses data whose own block constraints are
   infeasible, naming the block;
4. for each requested scope (``us``: the 50 states and DC, ``pr``: Puerto Rico; a scope
   whose GRF-C has no block is skipped) prepares the persons run and the units run
   (:mod:`privtab.topdown.runs`), then streams **state by state**: each engine solves the
   chunks of the state (noise drawn per parent just before its children are solved,
   :mod:`privtab.topdown.engine`), the state's blocks are checked against the
   invariants and constraints and appended to the MDF and the tables
   (:mod:`privtab.topdown.assemble`);
5. writes ``release.json`` (:mod:`privtab.topdown.document`), ``report.html``
   (:mod:`privtab.topdown.report`), the noisy measurement files (``--nmf``: ``nmf/``),
   ``NOT_PRIVATE`` for test runs, and validates the written folder
   (:mod:`privtab.topdown.validate`: tables equal the MDF's tabulation, children sum to
   parents, …) — all in a staging folder renamed onto the target only when everything
   succeeded;
6. after publication marks the ledger entry published and writes the confidential run
   record *outside* the folder (input fingerprints, exact totals, per-level timings and
   problem counts).

The work runs in a worker thread (signals honoured at once before publication; a signal
during or after the rename is deferred). The engines solve with one BLAS thread
(:func:`privtab._blas.one_blas_thread`).

Privacy: each run is ρ-zCDP per record of its histogram (exact, from the mechanisms that
drew the noise: :mod:`privtab.topdown.guarantee`); the US and Puerto Rico runs hold
disjoint records (parallel composition); everything after the measurements is
post-processing of them and of the invariants.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privtab.accounting.exact import ExactGuarantee
from privtab.accounting.odometer import Reservation
from privtab.errors import UsageError
from privtab.random import RandomSource
from privtab.release.record import RunRecord, check_record_path, default_record_path
from privtab.topdown.engine import SolveFn, solve_parent
from privtab.topdown.runs import RUNS
from privtab.topdown.strategy import Strategy

if TYPE_CHECKING:
    from privtab.topdown.spark import SparkSolvePool

__all__ = [
    "FOLDER_KIND",
    "TopDownOptions",
    "TopDownResult",
    "postprocess_release",
    "run_release",
]

#: The kind of folder a TopDown release is (:mod:`privtab.atomic`).
FOLDER_KIND = "topdown-release"
ENGINES = ("polars", "spark")


@dataclass
class TopDownOptions:
    """How to run a release (see :func:`run_release`).

    ``runs``: ``us``, ``pr`` or both; ``source``: the random source (``None``: the
    secure default; a seeded one needs ``allow_insecure``: the release is marked not
    private); ``noise=False``: the true answers (tests only, needs ``allow_insecure``);
    ``nmf``: also write the noisy measurements (``nmf/``); ``text``: also the Census
    pipe-delimited text files (false: Parquet only, :mod:`privtab.topdown.formats`);
    ``strategies``: per run
    (``us``/``pr``) a ``{"persons": …, "units": …}`` replacing the packaged 2020
    strategies; ``optimized_block_groups``: production's (default) or the tabulation
    block groups; ``report``: write ``report.html``; the ledger options as SafeTab-P's;
    ``solve``: the per-parent solve (default :func:`~privtab.topdown.engine.solve_parent`);
    ``workers``: processes solving the per-parent problems (:mod:`privtab.topdown.workers`;
    the output is the same for any number).
    ``engine``: ``polars`` (embedded, default) or ``spark`` (the slices solved in Spark
    tasks, :mod:`privtab.topdown.spark`; the same output), with ``spark_master`` and
    ``spark_conf`` (``spark.*`` settings) as SafeTab-P's Spark engine — or a
    :class:`~privtab.topdown.spark.SparkSolvePool` (e.g. on a session of the caller's).
    ``postprocess``: ``"production"`` (default) or ``"gls-round"``
    (:mod:`privtab.topdown.gls_round`: every measurement is drawn first, in production's
    order, then post-processed).
    """

    runs: Sequence[str] = ("us", "pr")
    source: RandomSource | None = None
    allow_insecure: bool = False
    noise: bool = True
    nmf: bool = False
    text: bool = True
    engine: str | SparkSolvePool = "polars"
    overwrite: bool = False
    report: bool = True
    strategies: Mapping[str, Mapping[str, Strategy]] | None = None
    optimized_block_groups: bool = True
    use_ledger: bool = True
    ledger: str | Path | None = None
    dataset_id: str | None = None
    lifetime: ExactGuarantee | None = None
    allow_more_releases: bool = False
    run_record: str | Path | None = None
    solve: SolveFn = solve_parent
    validate_inputs: bool = True
    workers: int = 1
    postprocess: str = "production"
    spark_master: str | None = None
    spark_conf: Mapping[str, str] | None = None


@dataclass
class TopDownResult:
    """What a run published (``document``: its ``release.json``) and what only the
    operator may see (``record``)."""

    out: Path
    document: dict[str, Any]
    record: RunRecord
    record_path: Path | None
    warnings: list[str] = field(default_factory=list)
    interrupted_after_publication: bool = False

    @property
    def private(self) -> bool:
        return bool(self.document["private"])


@dataclass
class _Context:
    data_dir: Path
    out: Path
    opts: TopDownOptions
    source: RandomSource
    say: Callable[[str], None]
    cancel: threading.Event
    started_utc: str
    reservation: Reservation | None = None
    warnings: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    private_override: bool | None = None  # a re-run: as private as its measurements
    pool: SparkSolvePool | None = None  # the Spark engine's (engine="spark"), else None

    @property
    def private(self) -> bool:
        if self.private_override is not None:
            return self.private_override
        return self.opts.noise and bool(getattr(self.source, "is_private", False))

    def check(self) -> None:
        if self.cancel.is_set():
            raise KeyboardInterrupt("interrupted")


def _context(
    data_dir: Path,
    out: str | Path,
    opts: TopDownOptions,
    source: RandomSource,
    progress: Callable[[str], None] | None,
) -> _Context:
    """A run's context, once its output location was checked (refusals before any work)."""
    from privtab.atomic import check_output

    check_output(out, overwrite=opts.overwrite, kind=FOLDER_KIND, protect=[data_dir])
    check_record_path(_record_path(out, opts))
    pool = None if isinstance(opts.engine, str) else opts.engine
    if opts.engine == "spark":
        from privtab.topdown.spark import spark_pool

        pool = spark_pool(opts.spark_master, opts.spark_conf)
    return _Context(
        pool=pool,
        data_dir=data_dir,
        out=Path(out),
        opts=opts,
        source=source,
        say=progress or logging.getLogger("privtab.topdown").info,
        cancel=threading.Event(),
        started_utc=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    )


def _record_path(out: str | Path, opts: TopDownOptions) -> Path:
    return Path(opts.run_record) if opts.run_record else default_record_path(out)


def _publish(
    ctx: _Context, build: Callable[[Path], tuple[dict[str, Any], RunRecord]]
) -> TopDownResult:
    """``build`` in a worker thread inside the staging folder, renamed onto the target when
    it succeeds; the ledger entry (if any) withdrawn on failure, committed after; the
    confidential run record written beside the folder; the Spark session (if any) stopped
    after."""
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        if ctx.pool is not None:
            stack.callback(ctx.pool.close)  # the Spark session, whatever happens
        return _published(ctx, build, started)


def _published(
    ctx: _Context, build: Callable[[Path], tuple[dict[str, Any], RunRecord]], started: float
) -> TopDownResult:
    from privtab.atomic import InterruptGuard, atomic_directory
    from privtab.publish.worker import in_worker
    from privtab.topdown import ledger

    opts = ctx.opts
    with InterruptGuard() as guard:
        with atomic_directory(
            ctx.out, kind=FOLDER_KIND, overwrite=opts.overwrite, protect=[ctx.data_dir],
            guard=guard,
        ) as tmp:  # fmt: skip
            try:
                document, record = in_worker(lambda: build(tmp), ctx.cancel)
            except BaseException:
                ledger.cancel(ctx.reservation)
                raise
        record.ledger = ledger.commit(ctx.reservation, ctx.out, ctx.warnings)
        record.seconds["total"] = time.monotonic() - started
        written = record.write_or_warn(_record_path(ctx.out, opts), ctx.warnings)
    return TopDownResult(
        ctx.out,
        document,
        record,
        written,
        ctx.warnings,
        interrupted_after_publication=guard.deferred is not None,
    )


def run_release(
    data_dir: str | Path,
    out: str | Path,
    options: TopDownOptions | None = None,
    progress: Callable[[str], None] | None = None,
) -> TopDownResult:
    """Run TopDown on the folder ``data_dir`` and publish the release in folder ``out``
    (module docstring). Raises a :class:`privtab.errors.UserError` for anything the user
    can fix (nothing is written), :class:`KeyboardInterrupt` when interrupted before
    publication (nothing is written)."""
    from privtab.mechanisms.base import release_source

    opts = options or TopDownOptions()
    _check_options(opts)
    source = release_source(opts.source, opts.allow_insecure, "TopDown")
    if not opts.noise:
        import warnings

        from privtab.mechanisms import InsecureReleaseWarning

        warnings.warn(
            "TopDown release without noise (exact counts): marked private: false, do not publish",
            InsecureReleaseWarning,
            stacklevel=2,
        )
    ctx = _context(Path(data_dir), out, opts, source, progress)
    return _publish(ctx, lambda tmp: _build(ctx, tmp))


def postprocess_release(
    nmf: str | Path,
    out: str | Path,
    options: TopDownOptions | None = None,
    progress: Callable[[str], None] | None = None,
) -> TopDownResult:
    """Post-process a release's noisy measurements again, from its ``nmf/`` folder alone
    (the measurements, the strategies and the public structure each run carries:
    :mod:`privtab.topdown.nmf_structure`), into a new release folder ``out`` — no data, no
    noise drawn, no ledger entry (post-processing costs no privacy). The new folder is
    private exactly when the measurements are; its ``release.json`` says what it was
    derived from. ``options``: ``solve``, ``report``, ``overwrite``, ``run_record``."""
    from privtab.random.sources import default_source

    opts = options or TopDownOptions()
    _check_options(opts)
    folder = Path(nmf)
    if not folder.is_dir():
        raise UsageError(f"--nmf {folder}: not a folder", hint="give a release's nmf/ folder")
    # the source draws nothing: the measurements are read
    ctx = _context(folder, out, opts, default_source(), progress)

    def build(tmp: Path) -> tuple[dict[str, Any], RunRecord]:
        from privtab.topdown.streaming import from_nmf, stream_release

        sources = from_nmf(ctx, folder)
        ctx.private_override = all(
            bool(r.measurements_private)
            for p in sources.pairs.values()
            for r in (p.persons, p.units)
        )
        return stream_release(ctx, sources, tmp, {})

    return _publish(ctx, build)


def _check_options(opts: TopDownOptions) -> None:
    from privtab.topdown.gls_round import POSTPROCESSORS

    if opts.postprocess not in POSTPROCESSORS:
        raise UsageError(
            f"--postprocess {opts.postprocess!r}: must be one of {', '.join(POSTPROCESSORS)}"
        )
    engine = opts.engine if isinstance(opts.engine, str) else opts.engine.name
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}: choose {' or '.join(ENGINES)}")
    if opts.workers < 1:
        raise UsageError(f"workers must be at least 1, got {opts.workers}")
    if opts.engine != "spark" and (opts.spark_master or opts.spark_conf):
        raise UsageError("--spark-master / --spark-conf need --engine spark")
    if engine == "spark" and opts.workers != 1:
        raise UsageError(
            "--workers is the polars engine's: with --engine spark the cluster's cores solve",
            hint="size the cluster instead (docs/topdown.md, Spark)",
        )
    if engine == "spark" and opts.postprocess != "production":
        raise UsageError(f"--postprocess {opts.postprocess} runs on the polars engine only")
    runs = list(opts.runs)
    if not runs or any(r not in RUNS for r in runs) or len(set(runs)) != len(runs):
        raise UsageError(f"runs must be distinct names among {sorted(RUNS)}, got {runs}")
    if not opts.noise and not opts.allow_insecure:
        raise UsageError("noise=False releases exact counts: allowed only with allow_insecure")


# ----------------------------------------------------------------------------- the worker


def _reserve(ctx: _Context, files: dict[str, Path], fingerprints: dict[str, Any]) -> None:
    """Private runs: the ledger reservation, before the records are read."""
    if not (ctx.private and ctx.opts.use_ledger):
        return
    from privtab.topdown import ledger
    from privtab.topdown.strategy import production_strategy

    rho = ExactGuarantee.zcdp(0)
    names = []
    for k, hist in enumerate(("persons", "units")):
        strategies = [
            _strategy(ctx.opts, run, hist) or production_strategy(RUNS[run][k])
            for run in ctx.opts.runs
        ]
        top = max(strategies, key=lambda s: s.rho)  # disjoint runs: the larger one
        rho = rho + ExactGuarantee.zcdp(top.rho)
        names.append(top.name)
    dataset = ctx.opts.dataset_id or "sha256:" + fingerprints[str(files["persons"])]["sha256"]
    ctx.say("checking the release ledger")
    ctx.reservation = ledger.reserve(
        ledger=ctx.opts.ledger,
        dataset=dataset,
        rho=rho,
        release=Path(os.path.abspath(ctx.out)),
        plan=" + ".join(names),
        lifetime=ctx.opts.lifetime,
        allow_more=ctx.opts.allow_more_releases,
    )


def _strategy(opts: TopDownOptions, run: str, hist: str) -> Strategy | None:
    return (opts.strategies or {}).get(run, {}).get(hist)


class _Tally:
    """One progress count over every engine of the release."""

    def __init__(self, say: Callable[[str], None], check: Callable[[], None]) -> None:
        self.say, self.check = say, check
        self.done: dict[str, int] = {}
        self.total: dict[str, int] = {}

    def engine(self, name: str, total: int) -> Callable[[int, int, str], None]:
        self.done[name], self.total[name] = 0, total

        def report(done: int, _total: int, text: str) -> None:
            self.check()
            self.done[name] = done
            self.say(f"[{sum(self.done.values())}/{sum(self.total.values())}] {name} {text}")

        return report


def _build(ctx: _Context, tmp: Path) -> tuple[dict[str, Any], RunRecord]:
    """Everything up to publication, inside the staging folder ``tmp``."""
    from privtab.topdown import folder as inputs
    from privtab.topdown import ledger

    t0 = time.monotonic()
    ctx.say("finding the input files")
    folder = ctx.data_dir
    if not folder.is_dir():
        from privtab.errors import InputError

        raise InputError(f"the data folder {folder} does not exist", file=str(folder))
    files = {
        "grfc": inputs.find_input(folder, inputs.GRFC_STEM),
        "units": inputs.find_input(folder, inputs.UNITS_STEM),
        "persons": inputs.find_input(folder, inputs.PERSONS_STEM),
    }
    fingerprints = ledger.fingerprints(files)
    _reserve(ctx, files, fingerprints)
    ctx.check()
    data = inputs.load_data(folder, validated=ctx.opts.validate_inputs, say=ctx.say)
    ctx.seconds["inputs"] = time.monotonic() - t0
    ctx.check()
    from privtab.topdown.streaming import from_data, measured_first, stream_release

    t1 = time.monotonic()
    grfc_sha256 = fingerprints[str(files["grfc"])]["sha256"]
    with contextlib.ExitStack() as stack:
        nmf_dir = None
        if ctx.opts.postprocess == "gls-round" and not ctx.opts.nmf:
            # the measurements are needed first but not asked for: kept outside the release
            nmf_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="privtab-")))
        sources = from_data(ctx, data, tmp, grfc_sha256, nmf_dir)
        del data  # the persons' block histograms now live in the runs (the nation: ≈ 2 GB)
        ctx.seconds["prepare"] = time.monotonic() - t1
        if ctx.opts.postprocess == "gls-round":
            sources = measured_first(ctx, sources, tmp)
        return stream_release(ctx, sources, tmp, fingerprints)
