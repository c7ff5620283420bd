"""A whole SafeTab-P release: inputs → validated aggregation → every level → files.

:func:`run_release` is what ``privtab safetab run`` and ``privtab demo`` call. It

1. reads and validates the config, the reference files and the GRF-C (nothing written);
2. validates and aggregates the person file in one streaming pass
   (:func:`privtab.tabulate.aggregate.aggregate_persons`; any bad row → one
   :class:`privtab.data.InputValidationError` naming file, row, column and value, and
   nothing is written);
3. builds the plan of every run (US, PR) from the config (:class:`ReleasePlan`) — budgets,
   stabilities from the reference files (never from data), thresholds;
4. tabulates every level (:func:`privtab.tabulate.engine.tabulate_level`) and appends its
   rows to T1/T2 inside a temporary directory;
5. writes ``release.json`` (plan, stabilities, the guarantee under every analysis, input
   checksums, version, whether the output is private) and ``report.html``, then renames the
   directory onto the target. Any error, Ctrl-C or SIGTERM leaves no partial release.

Privacy: the US and PR runs tabulate disjoint persons (a record's block is in one or the
other), so the release as a whole satisfies the larger of the two runs' guarantees
(parallel composition); each run satisfies ``Σ_i b_i`` (seed Theorems 1, 3), and the tighter
analyses of :func:`privtab.tabulate.analyse` are reported beside it.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from privtab import __version__
from privtab._json import jsonable
from privtab.data import SafeTabInputs, Scope, atomic_directory, load_inputs, sha256_file
from privtab.data.atomic import check_output, interrupts_as_exceptions
from privtab.mechanisms.base import release_source
from privtab.random import RandomSource, bernoulli
from privtab.tabulate.engine import T1_SCHEMA, T2_SCHEMA, LevelResult, merge_results
from privtab.tabulate.engines import Engine, make_engine
from privtab.tabulate.output import TableWriter
from privtab.tabulate.plan import ReleasePlan
from privtab.tabulate.privacy import analyse

__all__ = ["RunOptions", "RunResult", "run_release"]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class RunOptions:
    """How to run a release.

    ``source``: the random source (default: the secure one). A seeded source is refused
    unless ``allow_insecure`` (tests only: the release is then marked ``private: false``).
    ``noise=False`` releases exact counts (tests only; needs ``allow_insecure``).
    ``nonnegative``: clamp published counts at 0 (post-processing; default: the config's
    ``allow_negative_counts`` negated). ``zero_suppression``: drop T1 rows of groups with no
    T2 cells whose published count is ≤ 0, each with the config's
    ``zero_suppression_chance`` (post-processing of noisy output only). ``evaluate``:
    compare with the exact counts — a non-private diagnostic, returned, never written.
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


@dataclass
class RunResult:
    """What a run produced (the same facts as release.json, plus timings and evaluation)."""

    out: Path
    release: dict[str, Any]
    levels: list[LevelResult] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def private(self) -> bool:
        return bool(self.release["private"])


def _plans(inputs: SafeTabInputs) -> dict[Scope, ReleasePlan]:
    return {
        scope: ReleasePlan.from_config(inputs.config, inputs.reference, scope)
        for scope in inputs.config.scopes
    }


def _guarantee_doc(plan: ReleasePlan) -> dict[str, Any]:
    total = float(plan.total_budget)
    if plan.privacy_defn == "zcdp":
        return {"zcdp": {"rho": total}}
    return {"pure": {"epsilon": total}}


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


def _level_doc(res: LevelResult, inputs: SafeTabInputs, scope: Scope) -> dict[str, Any]:
    from privtab.data import GeoLevel

    geo = GeoLevel(res.plan.geo)
    stab = inputs.stabilities(scope)[(geo, res.plan.iteration_level)]
    return {
        **res.summary(),
        "budget": float(res.plan.budget),
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


def run_release(
    config: str | Path | None,
    data_dir: str | Path,
    out: str | Path,
    options: RunOptions | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """Run SafeTab-P and write a release to ``out`` (see the module docstring)."""
    opts = options or RunOptions()
    say = progress or (lambda _msg: None)
    out = Path(out)
    check_output(out, overwrite=opts.overwrite)
    if not opts.noise and not opts.allow_insecure:
        raise ValueError("noise=False releases exact counts: allowed only with allow_insecure")
    source = release_source(opts.source, opts.allow_insecure, "SafeTab-P")
    seconds: dict[str, float] = {}
    started = time.monotonic()

    with interrupts_as_exceptions():
        say("reading config, reference files and GRF-C")
        inputs = load_inputs(config, data_dir, validate_persons=False)
        plans = _plans(inputs)
        seconds["inputs"] = time.monotonic() - started
        t0 = time.monotonic()
        engine = make_engine(opts.engine) if isinstance(opts.engine, str) else opts.engine
        try:
            persons = engine.prepare(inputs, say)
            seconds["aggregate"] = time.monotonic() - t0
            release, levels = _release(inputs, engine, persons, plans, out, source, opts, say)
        finally:
            engine.close()
        seconds["tabulate_and_write"] = time.monotonic() - t0 - seconds["aggregate"]
    seconds["total"] = time.monotonic() - started
    return RunResult(out=out, release=release, levels=levels, seconds=seconds)


def _release(
    inputs: SafeTabInputs,
    engine: Engine,
    persons: int,
    plans: dict[Scope, ReleasePlan],
    out: Path,
    source: RandomSource,
    opts: RunOptions,
    say: Progress,
) -> tuple[dict[str, Any], list[LevelResult]]:
    private = source.is_private and opts.noise
    nonneg = (
        not inputs.config.allow_negative_counts if opts.nonnegative is None else opts.nonnegative
    )
    chance = inputs.config.zero_suppression_chance or Fraction(0)
    with atomic_directory(out, overwrite=opts.overwrite) as tmp:
        levels, runs, suppressed, rows = _tabulate_all(
            inputs, engine, plans, tmp, source, opts, nonneg, chance, say
        )
        worst = max(plans.values(), key=lambda p: p.total_budget)
        release: dict[str, Any] = {
            "privtab_version": __version__,
            "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "algorithm": "SafeTab-P two-stage adaptive algorithm (SafeTab seed Alg. 1-3)",
            "private": private,
            "noise": "off (exact counts: NOT PRIVATE)" if not opts.noise else source.description,
            "guarantee": _guarantee_doc(worst),
            "guarantee_note": (
                "the US and PR runs hold disjoint persons: the release satisfies the larger "
                "of their guarantees (parallel composition)"
            ),
            "plan": worst.to_dict(),
            "runs": runs,
            "persons": persons,
            "engine": engine.name,
            "postprocessing": {
                "nonnegative": nonneg,
                "zero_suppression": opts.zero_suppression,
                "zero_suppression_chance": float(chance),
                "zero_suppressed_rows": suppressed,
                "t1_count_of_groups_with_t2": "sum of the group's noisy T2 cells",
                "note": "post-processing of noisy output only: no privacy cost",
            },
            "config": inputs.config.to_dict(),
            "inputs": inputs.checksums(),
        }
        for stem in ("t1", "t2"):
            for ext in opts.formats:
                f = tmp / f"{stem}.{ext}"
                release.setdefault("outputs", {})[f.name] = {"sha256": sha256_file(f)}
        release["outputs"].update(rows)
        (tmp / "release.json").write_text(json.dumps(jsonable(release), indent=2) + "\n")
        if opts.report:
            from privtab.tabulate.report import write_report

            say("writing report.html")
            write_report(tmp / "report.html", release, levels)
    return release, levels


def _tabulate_all(
    inputs: SafeTabInputs,
    engine: Engine,
    plans: dict[Scope, ReleasePlan],
    tmp: Path,
    source: RandomSource,
    opts: RunOptions,
    nonneg: bool,
    chance: Fraction,
    say: Progress,
) -> tuple[list[LevelResult], dict[str, Any], int, dict[str, int]]:
    levels: list[LevelResult] = []
    runs: dict[str, Any] = {}
    suppressed = 0
    n_levels = sum(len(p.levels) for p in plans.values())
    done = 0
    from concurrent.futures import ThreadPoolExecutor

    # the privacy analyses depend on the public plan only: compute them while tabulating
    with (
        ThreadPoolExecutor(max_workers=1) as pool,
        TableWriter(tmp, "t1", T1_SCHEMA, opts.formats) as w1,
        TableWriter(tmp, "t2", T2_SCHEMA, opts.formats) as w2,
    ):
        analyses = {
            scope: pool.submit(analyse, plan, opts.delta, pld_grid=opts.pld_grid)
            for scope, plan in plans.items()
        }
        for scope, plan in plans.items():
            docs = []
            for lp in plan.levels:
                t0 = time.monotonic()
                chunks = []
                for part in engine.tabulate(
                    lp,
                    source=source,
                    noise=opts.noise,
                    evaluate=opts.evaluate,
                    nonnegative=nonneg,
                ):
                    t1 = part.t1
                    if opts.zero_suppression:
                        t1, dropped = _suppress_zeros(t1, chance, source)
                        suppressed += dropped
                    w1.write(t1)
                    w2.write(part.t2)
                    part.t1, part.t2 = part.t1.clear(), part.t2.clear()  # written: free memory
                    chunks.append(part)
                res = merge_results(chunks)
                done += 1
                say(
                    f"[{done}/{n_levels}] {scope.value} {lp.key}: {res.regions:,} regions × "
                    f"{res.iterations:,} iterations, {res.noise_draws:,} noisy counts, "
                    f"{len(chunks)} chunk(s) ({time.monotonic() - t0:.1f} s)"
                )
                docs.append(_level_doc(res, inputs, scope))
                levels.append(res)
            runs[scope.value] = {
                "plan": plan.to_dict(),
                "guarantee": _guarantee_doc(plan),
                "privacy": analyses[scope],
                "levels": docs,
            }
        for run in runs.values():
            run["privacy"] = run["privacy"].result()
    return levels, runs, suppressed, {"t1_rows": w1.rows, "t2_rows": w2.rows}
