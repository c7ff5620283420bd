"""``privtab safetab plan|run``: SafeTab-P release plans and releases."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from privtab.cli._common import fail, print_json, warn

safetab_app = typer.Typer(
    help="SafeTab-P: release plans (budgets, noise, MOE, guarantees) and releases.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(safetab_app, name="safetab")


def _floats(text: str, name: str) -> list[float]:
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        fail(f"{name} must be comma-separated numbers, got {text!r}")
    if not vals:
        fail(f"{name} needs at least one number")
    return vals


def _paper(
    moes: list[float], stability: int, gamma: float, delta: float, calibration: str, grid: float
) -> dict[str, Any]:
    from privtab.tabulate.paper import paper_model

    try:
        return paper_model(moes, stability, gamma, delta, calibration, grid)
    except ValueError as exc:
        fail(str(exc))


def _config_plan(config: str | None, scope: str, delta: float, pld_grid: float) -> dict[str, Any]:
    from privtab.data import Scope, read_config, read_reference
    from privtab.data.inputs import resolve_config_path
    from privtab.tabulate import ReleasePlan, analyse

    path = resolve_config_path(config)
    cfg = read_config(path)  # bad input: InputValidationError, printed by the root group
    ref = read_reference(path.parent)
    try:
        sc = Scope(scope.upper())
    except ValueError:
        fail(f"--scope must be US or PR, got {scope!r}")
    if sc not in cfg.scopes:
        fail(f"the config does not run {sc.value} (run_us/run_pr)")
    plan = ReleasePlan.from_config(cfg, ref, sc)
    analyses = analyse(plan, delta, pld_grid=pld_grid)
    return {
        "source": plan.source,
        "scope": sc.value,
        "privacy_defn": plan.privacy_defn,
        "total_budget": float(plan.total_budget),
        "levels": [lv.to_dict() for lv in plan.levels],
        "epsilon": {k: v["epsilon"] for k, v in analyses.items()},
        "analyses": analyses,
        "delta": delta,
    }


@safetab_app.command("plan")
def plan_cmd(
    config: str | None = typer.Option(
        None, "--config", "-c", help="config.json or its directory (default: 2020 production)."
    ),
    scope: str = typer.Option("US", "--scope", help="US or PR run of the config."),
    moe: str | None = typer.Option(
        None,
        "--moe",
        help="The paper's simplified model: comma-separated 95%% MOE targets, one level each.",
    ),
    stability: int = typer.Option(9, "--stability", min=1, help="Stability (with --moe)."),
    gamma: float = typer.Option(0.1, "--gamma", help="Stage-1 fraction (with --moe)."),
    calibration: str = typer.Option(
        "exact", "--calibration", help="exact (default) or paper closed forms (with --moe)."
    ),
    delta: float = typer.Option(1e-10, "--delta", help="δ of the (ε, δ) conversions."),
    pld_grid: float = typer.Option(
        1e-3,
        "--pld-grid",
        min=1e-5,
        max=0.1,
        help="Loss grid of the PLD analysis (finer: tighter, slower).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Each level's budget, noise scale and exact MOE, and the end-to-end guarantee.

    Examples: privtab safetab plan (the 2020 production US plan);
    privtab safetab plan --moe 6,6,11,11,50,50,50 --stability 9 --gamma 0.1 --calibration paper
    """
    if not 0 < delta < 1:
        fail(f"--delta must lie strictly between 0 and 1, got {delta}")
    if calibration not in ("exact", "paper"):
        fail(f"--calibration must be exact or paper, got {calibration!r}")
    if not 0 < gamma < 1:
        fail(f"--gamma must lie strictly between 0 and 1, got {gamma}")
    if moe is not None:
        res = _paper(_floats(moe, "--moe"), stability, gamma, delta, calibration, pld_grid)
    else:
        res = _config_plan(config, scope, delta, pld_grid)
    if as_json:
        print_json(res)
        return
    _print_plan(res, moe is not None)


def _print_plan(res: dict[str, Any], paper: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if paper:
        t = Table(title=f"SafeTab paper model ({res['calibration']} calibration)")
        for c in (
            "MOE",
            "geo ε step 2",
            "geo ε total",
            "exact MOE",
            "DG ρ step 2",
            "DG ρ total",
            "exact MOE ",
        ):
            t.add_column(c, justify="right")
        for lv in res["levels"]:
            t.add_row(
                f"{lv['moe']:g}",
                f"{lv['geometric_eps_step2']:.4f}",
                f"{lv['geometric_eps_total']:.4f}",
                str(lv["geometric_moe_exact"]),
                f"{lv['dgauss_rho_step2']:.5f}",
                f"{lv['dgauss_rho_total']:.5f}",
                str(lv["dgauss_moe_exact"]),
            )
        console.print(t)
    else:
        t = Table(
            title=f"{res['source']}: total {res['privacy_defn']} budget {res['total_budget']:.4g}"
        )
        for c in (
            "level",
            "budget",
            "stability",
            "thresholds",
            "stage-1 MOE",
            "stage-2 MOE",
            "TotalOnly MOE",
            "σ² / scale (stage 2)",
        ):
            t.add_column(c, justify="right")
        for lv in res["levels"]:
            t.add_row(
                lv["level"],
                f"{lv['budget']:g}",
                str(lv["stability"]),
                ",".join(str(x) for x in lv["thresholds"]),
                str(lv["stage1"]["moe95"]),
                str(lv["stage2"]["moe95"]),
                str(lv["total"]["moe95"]),
                f"{lv['stage2']['noise_scale']:.4g}",
            )
        console.print(t)
    g = Table(title=f"end-to-end ε at δ = {res['delta']:g}")
    g.add_column("analysis")
    g.add_column("ε", justify="right")
    for k, v in res["epsilon"].items():
        g.add_row(k, f"{v:.4f}")
    console.print(g)


@safetab_app.command("run")
def run_cmd(
    data: str = typer.Option(..., "--data", "-d", help="Directory with person-records and GRF-C."),
    out: str = typer.Option(..., "--out", "-o", help="Release directory to create."),
    config: str | None = typer.Option(
        None, "--config", "-c", help="config.json or its directory (default: 2020 production)."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --out."),
    delta: float = typer.Option(1e-10, "--delta", help="δ of the reported (ε, δ) guarantees."),
    pld_grid: float = typer.Option(
        1e-3,
        "--pld-grid",
        min=1e-5,
        max=0.1,
        help="Loss grid of the PLD analysis (finer: tighter, slower).",
    ),
    nonnegative: bool | None = typer.Option(
        None,
        "--nonnegative/--allow-negative",
        help="Clamp published counts at 0 (post-processing). Default: the config's "
        "allow_negative_counts.",
    ),
    zero_suppression: bool = typer.Option(
        False,
        "--zero-suppression",
        help="Drop T1 total-only rows whose noisy count is <= 0 with the config's "
        "zero_suppression_chance (post-processing).",
    ),
    report: bool = typer.Option(True, "--report/--no-report", help="Write report.html."),
    formats: str = typer.Option(
        "txt,parquet", "--format", help="T1/T2 formats: txt, parquet or txt,parquet."
    ),
    engine: str = typer.Option("polars", "--engine", help="polars (default) or spark."),
    spark_master: str | None = typer.Option(
        None, "--spark-master", help="With --engine spark: the Spark master (default local[2])."
    ),
    spark_conf: list[str] = typer.Option(  # noqa: B008
        [], "--spark-conf", help="With --engine spark: a Spark setting KEY=VALUE (repeatable)."
    ),
    evaluate: bool = typer.Option(
        False, "--evaluate", help="Print error against the true counts (NON-PRIVATE diagnostic)."
    ),
    seed: int | None = typer.Option(
        None, "--seed", help="TESTS ONLY: seeded noise; the release is marked not private."
    ),
    no_noise: bool = typer.Option(
        False, "--insecure-no-noise", help="TESTS ONLY: exact counts, marked not private."
    ),
    allow_empty: bool = typer.Option(
        False, "--allow-empty", help="Release a person file that holds no persons."
    ),
    ledger: str | None = typer.Option(
        None,
        "--ledger",
        help="The release ledger (CONFIDENTIAL): every private release of a data set is "
        "recorded and composed (default: $PRIVTAB_LEDGER or ~/.local/state/privtab/).",
    ),
    lifetime_rho: str | None = typer.Option(
        None, "--lifetime-rho", help="Lifetime zCDP budget of the data set (exact decimal)."
    ),
    lifetime_epsilon: str | None = typer.Option(
        None, "--lifetime-epsilon", help="Lifetime pure-DP budget of the data set."
    ),
    allow_more_releases: bool = typer.Option(
        False,
        "--allow-more-releases",
        help="Release even past the lifetime budget (recorded as such in the ledger).",
    ),
    dataset_id: str | None = typer.Option(
        None,
        "--dataset-id",
        help="The data set's name in the ledger (default: SHA-256 of the person file).",
    ),
    run_record: str | None = typer.Option(
        None,
        "--run-record",
        help="Where the CONFIDENTIAL run record goes (default: beside --out, "
        "<out>.CONFIDENTIAL-run-record.json).",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress on stderr."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Run SafeTab-P on person records and write T1/T2, release.json and report.html.

    Example: privtab safetab run --data synth-1m --out release-1m
    """
    from privtab.random import SeededSource
    from privtab.tabulate.run import RunOptions

    if not 0 < delta < 1:
        fail(f"--delta must lie strictly between 0 and 1, got {delta}")
    fmts = tuple(f.strip() for f in formats.split(",") if f.strip())
    if not fmts or set(fmts) - {"txt", "parquet"}:
        fail(f"--format must be txt, parquet or txt,parquet, got {formats!r}")
    if engine not in ("polars", "spark"):
        fail(f"--engine must be polars or spark, got {engine!r}")
    conf: dict[str, str] = {}
    for item in spark_conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--spark-conf needs KEY=VALUE, got {item!r}")
        conf[key.strip()] = value.strip()
    if (spark_master or conf) and engine != "spark":
        fail("--spark-master / --spark-conf need --engine spark")
    chosen: Any = engine
    if engine == "spark" and (spark_master or conf):
        from privtab.tabulate.engines.spark import SparkEngine

        chosen = SparkEngine(master=spark_master, config=conf or None)
    insecure = seed is not None or no_noise
    if insecure:
        warn("TEST MODE: seeded or no noise — the release is NOT private; do not publish it")
    opts = RunOptions(
        source=SeededSource(seed) if seed is not None else None,
        allow_insecure=insecure,
        noise=not no_noise,
        delta=delta,
        pld_grid=pld_grid,
        nonnegative=nonnegative,
        zero_suppression=zero_suppression,
        evaluate=evaluate,
        report=report,
        overwrite=overwrite,
        formats=fmts,
        engine=chosen,
        allow_empty=allow_empty,
        run_record=run_record,
        ledger=ledger,
        lifetime=_lifetime(lifetime_rho, lifetime_epsilon),
        allow_more_releases=allow_more_releases,
        dataset_id=dataset_id,
    )
    res = run_release_cli(config, Path(data), Path(out), opts, quiet=quiet, as_json=as_json)
    summary = release_summary(res)
    if as_json:
        print_json(summary)
    else:
        print_release_summary(summary)
    report_after_publication(res)


def _lifetime(rho: str | None, epsilon: str | None) -> Any:
    """The --lifetime-rho / --lifetime-epsilon budget, read exactly (``"2.5"`` is 5/2)."""
    from privtab.accounting import ExactGuarantee

    if rho is not None and epsilon is not None:
        fail("give --lifetime-rho or --lifetime-epsilon, not both")
    try:
        if rho is not None:
            return ExactGuarantee.zcdp(rho)
        if epsilon is not None:
            return ExactGuarantee.pure(epsilon)
    except ValueError as exc:
        fail(f"lifetime budget: {exc}")
    return None


def run_release_cli(
    config: str | Path | None,
    data: Path,
    out: Path,
    opts: Any,
    *,
    quiet: bool,
    as_json: bool,
    prefix: str = "safetab",
) -> Any:
    """:func:`privtab.tabulate.run_release` with progress on stderr. A user error is
    reported by the root group (one located message, its exit code); an interrupt before
    publication → "no release was written", exit 130. Nothing after publication fails."""
    import warnings

    from privtab.errors import EXIT_INTERRUPTED
    from privtab.mechanisms import InsecureReleaseWarning
    from privtab.tabulate.run import run_release

    def say(msg: str) -> None:
        if not quiet:
            print(f"{prefix}: {msg}", file=sys.stderr, flush=True)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureReleaseWarning)  # warned by the caller
        try:
            return run_release(config, data, out, opts, progress=say)
        except KeyboardInterrupt as exc:  # user errors are reported by the root group
            typer.echo(f"privtab: error: {exc or 'interrupted'}: no release was written", err=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None


def report_after_publication(res: Any) -> None:
    """Warnings about what happened after the release was renamed into place."""
    for w in res.warnings:
        warn(w)
    if res.interrupted_after_publication:
        warn(
            f"a signal arrived after the release was published: the release in {res.out} "
            "is complete; only clean-up after it was cut short"
        )


def release_summary(res: Any) -> dict[str, Any]:
    """The JSON summary of a run: outputs, guarantee, levels (and the evaluation if any)."""
    rel = res.release
    levels = []
    for scope, run in rel["runs"].items():
        for d in run["levels"]:
            levels.append({"scope": scope, **d})
    out: dict[str, Any] = {
        "out": str(res.out),
        "private": rel["private"],
        "run_record": str(res.record_path) if res.record_path else None,
        "t1_rows": rel["outputs"]["t1_rows"],
        "t2_rows": rel["outputs"]["t2_rows"],
        "guarantee": rel["guarantee"],
        "epsilon": {
            scope: {k: v["epsilon"] for k, v in run["privacy"].items()}
            for scope, run in rel["runs"].items()
            if run["privacy"]
        },
        "delta": next(r["privacy"]["pld"]["delta"] for r in rel["runs"].values() if r["privacy"]),
        "levels": levels,
        "seconds": res.seconds,
    }
    if any(lv.evaluation for lv in res.levels):
        out["evaluation_nonprivate"] = {
            f"{scope} {lv.plan.key}": lv.evaluation for scope, lv in _scoped(res)
        }
    return out


def _scoped(res: Any) -> list[tuple[str, Any]]:
    pairs = []
    it = iter(res.levels)
    for scope, run in res.release["runs"].items():
        for d in run["levels"]:
            if d["status"] == "tabulated":
                pairs.append((scope, next(it)))
    return pairs


def print_release_summary(s: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    tag = "[green]private[/green]" if s["private"] else "[red]NOT PRIVATE (test mode)[/red]"
    console.print(
        f"release written to [bold]{s['out']}[/bold] ({tag}): "
        f"{s['t1_rows']:,} T1 rows, {s['t2_rows']:,} T2 rows"
    )
    if s.get("run_record"):
        console.print(f"confidential run record (do not publish): {s['run_record']}")
    t = Table(title="levels")
    for c in (
        "run",
        "level",
        "budget",
        "regions × iterations",
        "noisy counts",
        "MOE stage 2",
        "MOE TotalOnly",
        "stat levels -1/0/1/2/3",
    ):
        t.add_column(c, justify="right")
    for lv in s["levels"]:
        if lv["status"] != "tabulated":
            t.add_row(lv["scope"], lv["level"], f"{lv['budget']:g}", lv["status"])
            continue
        st = lv["stat_levels"]
        t.add_row(
            lv["scope"],
            lv["level"],
            f"{lv['budget']:g}",
            f"{lv['regions']:,} × {lv['iterations']:,}",
            f"{lv['noise_draws']:,}",
            str(lv["moe95"]["stage2_cell"]),
            str(lv["moe95"]["total_only"]),
            "/".join(str(st.get(k, 0)) for k in ("-1", "0", "1", "2", "3")),
        )
    console.print(t)
    g = Table(title=f"guarantee: ε at δ = {s['delta']:g}")
    g.add_column("run")
    g.add_column("analysis")
    g.add_column("ε", justify="right")
    for scope, eps in s["epsilon"].items():
        for k, v in eps.items():
            g.add_row(scope, k, f"{v:.4f}")
    console.print(g)
    if "evaluation_nonprivate" in s:
        e = Table(title="NON-PRIVATE evaluation against the true counts (diagnostic only)")
        for c in (
            "level",
            "stage-1 RMSE (model)",
            "T1 within MOE95 (model)",
            "T2 cells within MOE95 (model)",
        ):
            e.add_column(c, justify="right")
        for name, ev in s["evaluation_nonprivate"].items():
            st1 = ev.get("stage1", {})
            t1 = _pooled(
                ev,
                (
                    "total_only",
                    "stage2_total",
                    "sum_of_t2_level1",
                    "sum_of_t2_level2",
                    "sum_of_t2_level3",
                ),
            )
            t2 = _pooled(ev, ("t2_cells",))
            e.add_row(
                name,
                f"{st1['rmse']:.2f} ({st1['expected_rmse']:.2f})" if st1.get("count") else "—",
                t1,
                t2,
            )
        console.print(e)


def _pooled(ev: dict[str, Any], kinds: tuple[str, ...]) -> str:
    n = sum(ev.get(k, {}).get("count", 0) for k in kinds)
    if n == 0:
        return "—"
    got = sum(ev[k]["within_moe95"] * ev[k]["count"] for k in kinds if ev.get(k, {}).get("count"))
    exp = sum(
        ev[k]["expected_within_moe95"] * ev[k]["count"] for k in kinds if ev.get(k, {}).get("count")
    )
    return f"{got / n:.3f} ({exp / n:.3f}) of {n:,}"
