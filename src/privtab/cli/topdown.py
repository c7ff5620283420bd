"""``privtab topdown``: the 2020 redistricting data (P.L. 94-171) by TopDown.

* ``plan`` — no data: σ and ρ of every measured query at every level, and the guarantee
  (ρ per person or housing unit, ε(δ) by every analysis, Semi-DP, per attribute and per
  geography) of a packaged production run (``--run us|pr|units|units-pr``) or of a
  strategy file (``--strategy FILE``);
* ``run`` — a release from a data folder (``privtab synth`` layout): the microdata,
  P1–P5/H1, ``release.json``, ``report.html`` (:mod:`privtab.topdown.run`);
* ``postprocess`` — a new release from a release's noisy measurements alone (``--nmf``);
* ``validate-output`` — the rules of a written release folder
  (:mod:`privtab.topdown.validate`);
* ``accuracy`` — a release's errors against its synthetic truth
  (:mod:`privtab.cli.topdown_accuracy`);
* ``gls`` — unbiased estimates and exact standard deviations of every P1–P5 cell from a
  release's noisy measurements (:mod:`privtab.topdown.gls_release`), a derived folder;
* ``replicates`` — replicate (approximate Monte Carlo) RMSE and intervals of every P1–P5
  cell, TopDown re-run on the published output (:mod:`privtab.topdown.replicates`).

The computations are :mod:`privtab.topdown`'s; these commands parse, call and print.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from privtab.cli._release import SparkConfOption, SparkMasterOption, spark_settings
from privtab.cli._render import (
    JsonOption,
    OverwriteOption,
    QuietOption,
    add_group,
    emit,
    usage_errors,
)

StrategyFile = Annotated[
    Path | None,
    typer.Option("--strategy", help="A strategy JSON file (docs/topdown.md) instead of --run."),
]


def register(app: typer.Typer) -> None:
    help = "TopDown: the 2020 redistricting data (P.L. 94-171) with exact noise and accounting."
    add_group(
        app,
        "topdown",
        help,
        {
            "plan": plan,
            "run": run,
            "postprocess": postprocess,
            "validate-output": validate_output,
            "gls": gls,
            "replicates": replicates,
            "accuracy": _accuracy(),
        },
    )


def _accuracy() -> Any:
    from privtab.cli.topdown_accuracy import accuracy

    return accuracy


def plan(
    run: str = typer.Option(
        "us", "--run", help="A packaged 2020 production run: us, pr (persons), units, units-pr."
    ),
    strategy: StrategyFile = None,
    pld: bool = typer.Option(
        True, "--pld/--no-pld", help="Also bound ε by the privacy-loss distribution (~1 s)."
    ),
    as_json: JsonOption = False,
) -> None:
    """σ and ρ per query and level, and the guarantee — no data needed.

    Example: privtab topdown plan --run us --json
    """
    from privtab.topdown.planning import plan as make_plan
    from privtab.topdown.strategy import PRODUCTION_RUNS, load_strategy

    with usage_errors():
        if strategy is not None:
            chosen: Any = load_strategy(strategy)
        elif run in PRODUCTION_RUNS:
            chosen = run
        else:
            raise ValueError(f"--run must be one of {', '.join(PRODUCTION_RUNS)}, got {run!r}")
    p = make_plan(chosen, pld=pld)
    doc = p.to_dict()
    emit(doc, as_json, _tables(doc), lines=_lines(doc))


def _tables(doc: dict[str, Any]) -> list[Any]:
    from privtab.report.text import fmt, table

    rows = [
        [
            q["level"],
            q["query"],
            fmt(q["cells"]),
            q["share_query"],
            f"{q['sigma']:.4g}",
            f"{q['rho']['value']:.6g}",
        ]
        for q in doc["queries"]
    ]
    s = doc["strategy"]
    noise = table(
        f"{s['name']}: noise per query and level (global_scale {s['global_scale']})",
        ["level", "query", "cells", "query share", "σ", "ρ"],
        rows,
        notes=[
            "ρ = 1/σ² per query at one geounit (bounded neighbours, Δ₂² = 2); exact "
            "fractions with --json"
        ],
        left=2,
    )
    g = doc["guarantee"]
    per = [
        [a, f"{v['rho']['value']:.6f}", f"{v['epsilon']:.2f}"]
        for a, v in g["per_attribute"].items()
    ]
    per += [
        [k, f"{v['rho']['value']:.6f}", f"{v['epsilon']:.2f}"]
        for k, v in g["per_geography"].items()
    ]
    semantics = table(
        f"per attribute and per geography (ε at δ = {g['delta']}, optimal conversion)",
        ["concern", "ρ", "ε"],
        per,
    )
    return [noise, semantics]


def _lines(doc: dict[str, Any]) -> list[str]:
    g = doc["guarantee"]
    eps = ", ".join(f"{m} {v:.4f}" for m, v in g["epsilon"].items())
    semi = g["semi_dp"]
    return [
        f"ρ per {g['record']}: {g['rho']['exact']} ≈ {g['rho']['value']} (zCDP, {g['neighbours']})",
        f"ε at δ = {g['delta']}: {eps}",
        f"Semi-DP ({semi['invariant']} invariant, a = {semi['semi_adjacent']}): ρ "
        f"{semi['rho']['exact']} ≈ {semi['rho']['value']}, "
        f"ε optimal {semi['epsilon']['optimal']:.4f}",
    ]


# ----------------------------------------------------------------------------- run


def _runs(value: str) -> tuple[str, ...]:
    choices = {"us": ("us",), "pr": ("pr",), "both": ("us", "pr")}
    if value not in choices:
        raise ValueError(f"--run must be us, pr or both, got {value!r}")
    return choices[value]


class _CliProgress:
    """Progress on stderr: a rich bar in a terminal; in a log, the steps and every few
    seconds the count of parents solved (hidden by ``--quiet``)."""

    EVERY = 10.0

    def __init__(self, quiet: bool) -> None:
        import sys

        from privtab.progress import RichProgress

        self.quiet = quiet
        self.bar = RichProgress("TopDown") if not quiet and sys.stderr.isatty() else None
        self._last = 0.0

    def __enter__(self) -> _CliProgress:
        if self.bar is not None:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def __call__(self, message: str) -> None:
        import time

        from privtab.cli._render import info

        if self.bar is not None:
            self.bar(message)
            return
        if self.quiet:
            return
        now = time.monotonic()
        if message.startswith("[") and now - self._last < self.EVERY:
            return
        self._last = now
        info(message)


TEXT_OPTION: bool = typer.Option(
    True,
    "--text/--no-text",
    help="Also write the Census text files; --no-text: Parquet only (3% of the bytes).",
)

POSTPROCESS_OPTION: str = typer.Option(
    "production",
    "--postprocess",
    help="production (TopDown, default) or gls-round (tree GLS first, then rounding).",
)


def run(
    data: str = typer.Option(
        ..., "--data", "-d", help="Folder with GRF-C, cef-units, cef-persons."
    ),
    out: str = typer.Option(..., "--out", "-o", help="Release folder to create."),
    which: str = typer.Option("both", "--run", help="us (50 states and DC), pr, or both."),
    engine: str = typer.Option("polars", "--engine", help="polars (default) or spark."),
    spark_master: SparkMasterOption = None,
    spark_conf: SparkConfOption = None,
    seed: int | None = typer.Option(
        None, "--seed", help="TESTS ONLY: seeded noise; the release is marked not private."
    ),
    no_noise: bool = typer.Option(
        False, "--insecure-no-noise", help="TESTS ONLY: exact counts, marked not private."
    ),
    nmf: bool = typer.Option(
        False, "--nmf", help="Also write the noisy measurements (nmf/, Parquet)."
    ),
    text: bool = TEXT_OPTION,
    overwrite: OverwriteOption = False,
    report: bool = typer.Option(True, "--report/--no-report", help="Write report.html."),
    tabulation_block_groups: bool = typer.Option(
        False,
        "--tabulation-block-groups",
        help="Spine with the tabulation block groups instead of production's optimized ones.",
    ),
    ledger: str | None = typer.Option(
        None, "--ledger", help="The release ledger (CONFIDENTIAL; default as safetab run)."
    ),
    lifetime_rho: str | None = typer.Option(
        None, "--lifetime-rho", help="Lifetime zCDP budget of the data set (exact decimal)."
    ),
    allow_more_releases: bool = typer.Option(
        False, "--allow-more-releases", help="Release even past the lifetime budget."
    ),
    dataset_id: str | None = typer.Option(
        None,
        "--dataset-id",
        help="The data set's name in the ledger (default: SHA-256 of cef-persons).",
    ),
    run_record: str | None = typer.Option(
        None, "--run-record", help="Where the CONFIDENTIAL run record goes (default: beside --out)."
    ),
    workers: int = typer.Option(
        1, "--workers", min=1, help="Processes solving the per-parent problems (same output)."
    ),
    postprocessor: str = POSTPROCESS_OPTION,
    quiet: QuietOption = False,
    as_json: JsonOption = False,
) -> None:
    """Run TopDown on a data folder: MDF, P1-P5 and H1, release.json, report.html.

    Example: privtab topdown run --data synth-de --out release-de --run us
    """
    import warnings

    from privtab.accounting.exact import ExactGuarantee
    from privtab.cli._render import warn
    from privtab.errors import EXIT_INTERRUPTED, UsageError
    from privtab.mechanisms import InsecureReleaseWarning
    from privtab.random import SeededSource
    from privtab.topdown.run import TopDownOptions, run_release

    with usage_errors():
        runs = _runs(which)
    if seed is not None and no_noise:
        raise UsageError("give --seed or --insecure-no-noise, not both")
    try:
        lifetime = None if lifetime_rho is None else ExactGuarantee.zcdp(lifetime_rho)
    except ValueError as exc:
        raise UsageError(f"--lifetime-rho: {exc}") from None
    opts = TopDownOptions(
        runs=runs,
        source=None if seed is None else SeededSource(seed),
        allow_insecure=seed is not None or no_noise,
        noise=not no_noise,
        nmf=nmf,
        text=text,
        engine=engine,
        overwrite=overwrite,
        report=report,
        optimized_block_groups=not tabulation_block_groups,
        ledger=ledger,
        dataset_id=dataset_id,
        lifetime=lifetime,
        allow_more_releases=allow_more_releases,
        run_record=run_record,
        workers=workers,
        postprocess=postprocessor,
        spark_master=spark_master,
        spark_conf=spark_settings(spark_conf) or None,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureReleaseWarning)  # said below
        try:
            with _CliProgress(quiet or as_json) as progress:
                res = run_release(Path(data), Path(out), opts, progress=progress)
        except KeyboardInterrupt as exc:
            typer.echo(f"privtab: error: {exc or 'interrupted'}: no release was written", err=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
    doc = res.document
    summary = _summary(res)
    emit(summary, as_json, [], lines=_run_lines(summary))
    if not res.private:
        warn(f"{res.out} is NOT private ({doc['noise']}): never publish it")
    for w in res.warnings:
        warn(w)
    if res.interrupted_after_publication:
        warn(f"a signal arrived after the release was published: {res.out} is complete")


def _summary(res: Any) -> dict[str, Any]:
    """What ``run`` and ``postprocess`` print (``--json``: this object)."""
    doc = res.document
    out = {
        "out": str(res.out),
        "private": res.private,
        "noise": doc["noise"],
        "guarantee": doc["guarantee"],
        "runs": sorted(doc["runs"]),
        "skipped_runs": doc.get("skipped_runs", {}),
        "outputs": {k: v.get("rows") for k, v in doc["outputs"]["files"].items()},
        "run_record": None if res.record_path is None else str(res.record_path),
        "warnings": res.warnings,
    }
    if "derived_from" in doc:
        out["derived_from"] = doc["derived_from"]
    return out


def _run_lines(s: dict[str, Any]) -> list[str]:
    lines = [f"TopDown release written to {s['out']} (runs: {', '.join(s['runs'])})"]
    for key, who in (("persons", "person"), ("housing_units", "housing unit")):
        g = s["guarantee"].get(key)
        if g:
            eps = g["epsilon"].get("optimal")
            lines.append(
                f"ρ per {who}: {g['rho']['exact']} ≈ {g['rho']['value']} zCDP "
                f"(ε {eps:.4f} at δ = {g['delta']})"
            )
    mdf = s["outputs"].get("mdf/persons.parquet")
    units = s["outputs"].get("mdf/units.parquet")
    lines.append(f"MDF: {mdf:,} person rows, {units:,} unit rows; tables P1-P5, H1 in pl94/")
    for scope, why in s["skipped_runs"].items():
        lines.append(f"not run: {scope} ({why})")
    if not s["private"]:
        lines.append("NOT PRIVATE: a test release (seeded or without noise)")
    if s["run_record"]:
        lines.append(f"confidential run record: {s['run_record']}")
    return lines


def postprocess(
    nmf: str = typer.Option(..., "--nmf", help="The nmf/ folder of a release run with --nmf."),
    out: str = typer.Option(..., "--out", "-o", help="Release folder to create."),
    text: bool = TEXT_OPTION,
    overwrite: OverwriteOption = False,
    report: bool = typer.Option(True, "--report/--no-report", help="Write report.html."),
    run_record: str | None = typer.Option(
        None, "--run-record", help="Where the run record goes (default: beside --out)."
    ),
    postprocessor: str = POSTPROCESS_OPTION,
    quiet: QuietOption = False,
    as_json: JsonOption = False,
) -> None:
    """Post-process a release's noisy measurements again into a new release (no data).

    Example: privtab topdown postprocess --nmf release-de/nmf --out again-de
    """
    from privtab.cli._render import warn
    from privtab.topdown.run import TopDownOptions, postprocess_release

    opts = TopDownOptions(
        overwrite=overwrite, report=report, run_record=run_record, postprocess=postprocessor,
        text=text,
    )  # fmt: skip
    with _CliProgress(quiet or as_json) as progress:
        res = postprocess_release(Path(nmf), Path(out), opts, progress=progress)
    summary = _summary(res)
    emit(summary, as_json, [], lines=_run_lines(summary))
    for w in res.warnings:
        warn(w)


# ----------------------------------------------------------------------------- validate


def validate_output(
    release: Path = typer.Argument(..., help="The release folder."),  # noqa: B008
    grfc: str | None = typer.Option(
        None, "--grfc", help="The GRF-C (file or data folder): also check places and AIANNH."
    ),
    as_json: JsonOption = False,
) -> None:
    """Check a written TopDown release folder against its rules (exit 1 if one fails).

    Example: privtab topdown validate-output release-de --grfc synth-de
    """
    from privtab.topdown.validate import validate_release

    summary = validate_release(release, grfc=grfc)
    rows = sum(summary.files.values())
    lines = [f"valid: {release} ({len(summary.files)} files, {rows:,} rows)"]
    lines.append("checked: " + ", ".join(summary.checks))
    lines += [f"  not checked: {k} ({v})" for k, v in summary.skipped.items()]
    emit(summary.to_json(), as_json, [], lines=lines)


# ----------------------------------------------------------------------------- error


def gls(
    release: Path = typer.Option(..., "--release", help="A release made with --nmf."),  # noqa: B008
    out: Path = typer.Option(..., "--out", "-o", help="The derived folder to create."),  # noqa: B008
    to: str = typer.Option(
        "BLOCK_GROUP",
        "--to",
        help="Deepest tabulation level: STATE, COUNTY, TRACT, BLOCK_GROUP (with places and "
        "AIANNH areas) or BLOCK.",
    ),
    overwrite: OverwriteOption = False,
    quiet: QuietOption = False,
    as_json: JsonOption = False,
) -> None:
    """Unbiased estimates and exact standard deviations of every P1-P5 cell (tree GLS).

    Example: privtab topdown gls --release release-de --out gls-de
    """
    from privtab.cli._render import info
    from privtab.topdown.gls_release import release_gls

    say = None if quiet or as_json else info
    summary = release_gls(release, out, to=to.upper(), overwrite=overwrite, say=say)
    lines = [f"tree GLS of {release} written to {out} (runs: {', '.join(summary['runs'])})"]
    lines += [f"  {name}: {rows:,} rows" for name, rows in summary["files"].items()]
    for what, areas in summary["not_computed"].items():
        lines.append(f"not computed: {what} {', '.join(areas)} (they cross states)")
    if not summary["private"]:
        lines.append("NOT PRIVATE: derived from a test release")
    emit(summary, as_json, [], lines=lines)


def replicates(
    release: Path = typer.Option(..., "--release", help="A release made with --nmf."),  # noqa: B008
    n: int = typer.Option(..., "--n", help="Number of replicates (at least 2).", min=2),
    out: Path = typer.Option(..., "--out", "-o", help="The derived folder to create."),  # noqa: B008
    workers: int = typer.Option(1, "--workers", help="Replicates run at once (processes).", min=1),
    seed: int | None = typer.Option(
        None, "--seed", help="Seeded replicates (tests only: the folder is NOT private)."
    ),
    level: float = typer.Option(0.9, "--level", help="Interval level (0 < level < 1)."),
    overwrite: OverwriteOption = False,
    quiet: QuietOption = False,
    as_json: JsonOption = False,
) -> None:
    """Replicate RMSE and intervals of every P1-P5 cell (TopDown re-run on its output).

    Example: privtab topdown replicates --release release-de --n 25 --out reps-de
    """
    from privtab.cli._render import info
    from privtab.topdown.replicates import replicates as run_replicates

    say = None if quiet or as_json else info
    summary = run_replicates(
        release, out, n=n, workers=workers, seed=seed, level=level, overwrite=overwrite, say=say
    )
    lines = [f"{n} replicates of {release} written to {out}"]
    lines += [
        f"  {r['GEOLEVEL']}: {r['CELLS']:,} cells, RMSE {r['RMSE']:.2f}"
        for r in summary["rmse_by_geolevel"]
    ]
    if not summary["private"]:
        lines.append("NOT PRIVATE: seeded replicates or a test release")
    emit(summary, as_json, [], lines=lines)
