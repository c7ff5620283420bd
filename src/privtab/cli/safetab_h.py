"""``privtab safetab-h plan|run|accuracy|validate-output``: SafeTab-H (Detailed DHC-B)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from privtab._options import numbers, open_unit
from privtab.cli._release import ParentsOption
from privtab.cli._render import (
    DeltaOption,
    JsonOption,
    OverwriteOption,
    QuietOption,
    emit,
    group,
    warn,
)

safetab_h_app = group(
    "SafeTab-H (Detailed DHC-B: T3 household type, T4 tenure): plans, releases, accuracy."
)

ConfigH = typer.Option(
    None,
    "--config",
    "-c",
    help="SafeTab-H config.json or parameters folder (default: the packaged 2020 NMFv5).",
)
T1Option = typer.Option(
    None,
    "--t1",
    help="The T1: pop-group-totals.txt, or privtab's SafeTab-P release folder (or its t1/). "
    "Default: DATA/pop-group-totals.txt.",
)


def register(app: typer.Typer) -> None:
    app.add_typer(safetab_h_app, name="safetab-h")


@safetab_h_app.command("plan")
def plan_cmd(
    config: str | None = ConfigH,
    config_p: str | None = typer.Option(
        None,
        "--config-p",
        help="SafeTab-P config for the person-level guarantee (default: packaged NMFv7).",
    ),
    delta: DeltaOption = 1e-10,
    pld_grid: float = typer.Option(1e-3, "--pld-grid", min=1e-5, max=0.1, help="PLD loss grid."),
    as_json: JsonOption = False,
) -> None:
    """Each query's budget, stability, noise and exact MOE; the guarantee per household
    under every analysis; the guarantee per person of DHC-A and DHC-B together.

    Example: privtab safetab-h plan (the 2020 production NMFv5 plan)
    """
    from privtab.safetab_h.planning import plan_summary, plan_tables

    open_unit("--delta", delta)
    res = plan_summary(config, config_p=config_p, delta=delta, pld_grid=pld_grid)
    head, tables = plan_tables(res)
    emit(res, as_json, tables, head=[head])


@safetab_h_app.command("accuracy")
def accuracy_cmd(
    config: str | None = ConfigH,
    counts: str | None = typer.Option(
        None, "--n", help="Comma-separated T1 counts (default: -10 … 10^6)."
    ),
    data: str | None = typer.Option(
        None, "--data", "-d", help="With a GRF-C and T1: each query's groups per table."
    ),
    t1: str | None = T1Option,
    as_json: JsonOption = False,
) -> None:
    """Per query and T1 count: the table published (deterministic: P = 1) and the exact
    95 % MOE of each of its cells.

    Example: privtab safetab-h accuracy --n 0,500,1000,5000 --json
    """
    from privtab.report.text import table
    from privtab.safetab_h.accuracy import DEFAULT_COUNTS, accuracy
    from privtab.safetab_h.planning import config_and_reference
    from privtab.safetab_h.queries import HPlan

    ns = [int(x) for x in numbers(counts, "--n")] if counts else list(DEFAULT_COUNTS)
    groups = None
    if data is not None:
        from privtab.safetab_h.inputs import load_domain

        _, runs, found = load_domain(config, Path(data), None if t1 is None else Path(t1))
        plans = {g.scope.value: p for g, p in zip(runs, found, strict=True)}
        groups = {g.scope.value: g for g in runs}
    else:
        cfg, ref = config_and_reference(config)
        plans = {s.value: HPlan.from_config(cfg, ref, s) for s in cfg.scopes}
    res = accuracy(plans, ns, groups)
    tables = []
    for scope, run in res["runs"].items():
        rows = [
            (q["query"], str(r["t1_count"]), r["table"], str(r["rows"]), str(r["moe95"]["0"]))
            for q in run["queries"]
            for r in q["rows"]
        ]
        cols = ("query", "T1 count", "table (P = 1)", "rows", "MOE95 total")
        tables.append(table(f"{scope} run", cols, rows))
    emit(res, as_json, tables, head=[res["note"]])


_NOT_RUN_OPTIONS = frozenset({"data", "out", "config", "t1", "quiet", "as_json"})


@safetab_h_app.command("run")
def run_cmd(
    ctx: typer.Context,
    data: str = typer.Option(
        ..., "--data", "-d", help="Directory with household-records, GRF-C (and the T1)."
    ),
    out: str = typer.Option(..., "--out", "-o", help="Release directory to create."),
    config: str | None = ConfigH,
    t1: str | None = T1Option,
    overwrite: OverwriteOption = False,
    delta: float = typer.Option(1e-10, "--delta", help="δ of the reported (ε, δ) guarantees."),
    pld_grid: float = typer.Option(1e-3, "--pld-grid", min=1e-5, max=0.1, help="PLD loss grid."),
    nonnegative: bool | None = typer.Option(
        None,
        "--nonnegative/--allow-negative",
        help="Clamp noisy cells at 0 (default: the config's allow_negative_counts).",
    ),
    report: bool = typer.Option(True, "--report/--no-report", help="Write report.html."),
    formats: str = typer.Option(
        "txt", "--format", help="txt (the Census folders t3/, t4/), parquet or txt,parquet."
    ),
    engine: str = typer.Option("polars", "--engine", help="polars (default) or spark."),
    seed: int | None = typer.Option(
        None, "--seed", help="TESTS ONLY: seeded noise; the release is marked not private."
    ),
    no_noise: bool = typer.Option(
        False, "--insecure-no-noise", help="TESTS ONLY: exact counts, marked not private."
    ),
    allow_empty: bool = typer.Option(
        False, "--allow-empty", help="Release a household file that holds no households."
    ),
    ledger: str | None = typer.Option(
        None, "--ledger", help="The release ledger (CONFIDENTIAL; default: $PRIVTAB_LEDGER)."
    ),
    lifetime_rho: str | None = typer.Option(
        None, "--lifetime-rho", help="Lifetime zCDP budget per person of the data set."
    ),
    lifetime_epsilon: str | None = typer.Option(
        None, "--lifetime-epsilon", help="Lifetime pure-DP budget per person of the data set."
    ),
    allow_more_releases: bool = typer.Option(
        False, "--allow-more-releases", help="Release even past the lifetime budget."
    ),
    dataset_id: str | None = typer.Option(
        None,
        "--dataset-id",
        help="The data set in the ledger (default: that of the SafeTab-P release whose T1 "
        "is read, so DHC-A and DHC-B of one population compose; else a digest of the "
        "parsed households).",
    ),
    run_record: str | None = typer.Option(
        None, "--run-record", help="Where the CONFIDENTIAL run record goes."
    ),
    parents: ParentsOption = False,
    quiet: QuietOption = False,
    as_json: JsonOption = False,
) -> None:
    """Run SafeTab-H on household records and the T1 of SafeTab-P: t3/, t4/, release.json
    and report.html.

    Example: privtab safetab-h run --data synth-1m --t1 release-1m --out release-1m-h
    """
    from privtab.tabulate.context import RunOptions

    open_unit("--delta", delta)
    flags = {k: v for k, v in ctx.params.items() if k not in _NOT_RUN_OPTIONS}
    opts = RunOptions.from_flags(**flags)
    res = run_h_cli(config, Path(data), Path(out), opts, t1=None if t1 is None else Path(t1))
    emit(res.summary(), as_json, head=[res.headline()])
    for w in res.warnings:
        warn(w)


def run_h_cli(
    config: str | Path | None, data: Path, out: Path, opts: Any, *, t1: Path | None
) -> Any:
    """:func:`privtab.safetab_h.run_release` with its progress on stderr; an interrupt
    before publication → "no release was written", exit 130
    (:func:`privtab.cli.safetab.guarded`)."""
    from privtab.cli.safetab import guarded
    from privtab.safetab_h.run import run_release

    return guarded(lambda: run_release(config, data, out, opts, t1=t1))


@safetab_h_app.command("validate-output")
def validate_output_cmd(
    directory: str = typer.Argument(..., help="A SafeTab-H release folder."),
    config: str | None = ConfigH,
    data: str | None = typer.Option(
        None, "--data", "-d", help="With the GRF-C and T1: the domain checks too."
    ),
    t1: str | None = T1Option,
    as_json: JsonOption = False,
) -> None:
    """Check every table of a SafeTab-H release against the Census output rules (exit 1
    with file, line, rule when one fails).

    Example: privtab safetab-h validate-output release-h --data DATA --t1 release-p
    """
    from privtab.safetab_h.validation import validate_paths

    res = validate_paths(directory, config=config, data=data, t1=t1)
    emit(res.to_json(), as_json, head=[f"valid: {', '.join(res.checks)}"])


def both_products(
    res_p: Any,
    summary_p: dict[str, Any],
    shown_p: tuple[list[str], list[Any]],
    data: Path,
    config_h: str | None,
    out_h: str | None,
    opts: Any,
    as_json: bool,
) -> None:
    """``privtab safetab run --products p,h``: after SafeTab-P's release, SafeTab-H on the
    same population with the T1 just published (one release folder each). In the ledger
    SafeTab-H's entry takes the data set of SafeTab-P's (found by the release folder's
    id), so DHC-A and DHC-B compose per person."""
    out = Path(out_h) if out_h else res_p.out.with_name(res_p.out.name + "-h")
    res_h = run_h_cli(config_h, data, out, opts, t1=res_p.out)
    if as_json:
        emit({"p": summary_p, "h": res_h.summary()}, True)
    else:
        head, tables = shown_p
        emit(summary_p, False, tables, head=head)
        emit(res_h.summary(), False, head=[res_h.headline()])
    for w in [*res_p.warnings, *res_h.warnings]:
        warn(w)
