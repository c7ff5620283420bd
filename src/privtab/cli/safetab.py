"""``privtab safetab plan|run``: SafeTab-P release plans and releases."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from privtab._options import choice, numbers, open_unit, path_option
from privtab.cli._release import ParentsOption
from privtab.cli._render import (
    ConfigOption,
    DeltaOption,
    JsonOption,
    OverwriteOption,
    QuietOption,
    emit,
    group,
    usage_errors,
    warn,
)

safetab_app = group("SafeTab-P: release plans (budgets, noise, MOE, guarantees) and releases.")


PldGrid = Annotated[
    float,
    typer.Option("--pld-grid", min=1e-5, max=0.1, help="Loss grid of the PLD analysis (finer: "
                 "tighter, slower)."),
]  # fmt: skip


def register(app: typer.Typer) -> None:
    from privtab.cli import accuracy

    accuracy.register(safetab_app)
    app.add_typer(safetab_app, name="safetab")


@safetab_app.command("plan")
def plan_cmd(
    config: ConfigOption = None,
    scope: str = typer.Option("US", "--scope", help="US or PR run of the config."),
    moe: str | None = typer.Option(
        None,
        "--moe",
        help="The paper's simplified model: comma-separated 95% MOE targets, one level each.",
    ),
    stability: int = typer.Option(9, "--stability", min=1, help="Stability (with --moe)."),
    gamma: float = typer.Option(0.1, "--gamma", help="Stage-1 fraction (with --moe)."),
    calibration: str = typer.Option(
        "exact", "--calibration", help="exact (default) or paper closed forms (with --moe)."
    ),
    delta: DeltaOption = 1e-10,
    pld_grid: PldGrid = 1e-3,
    as_json: JsonOption = False,
) -> None:
    """Each level's budget, noise scale and exact MOE, and the end-to-end guarantee.

    Examples: privtab safetab plan (the 2020 production US plan);
    privtab safetab plan --moe 6,6,11,11,50,50,50 --stability 9 --gamma 0.1 --calibration paper
    """
    from privtab.tabulate.paper import paper_model
    from privtab.tabulate.summary import plan_summary, plan_tables

    open_unit("--delta", delta)
    choice("--calibration", calibration, ("exact", "paper"))
    open_unit("--gamma", gamma)
    if moe is not None:
        moes = numbers(moe, "--moe")
        with usage_errors():
            res = paper_model(moes, stability, gamma, delta, calibration, pld_grid)
    else:
        res = plan_summary(config, scope, delta, pld_grid)
    emit(res, as_json, plan_tables(res, paper=moe is not None))


_NOT_RUN_OPTIONS = frozenset(
    {"data", "out", "config", "quiet", "as_json", "products", "config_h", "out_h"}
)


@safetab_app.command("run")
def run_cmd(
    ctx: typer.Context,
    data: str = typer.Option(..., "--data", "-d", help="Directory with person-records and GRF-C."),
    out: str = typer.Option(..., "--out", "-o", help="Release directory to create."),
    config: ConfigOption = None,
    overwrite: OverwriteOption = False,
    delta: float = typer.Option(1e-10, "--delta", help="δ of the reported (ε, δ) guarantees."),
    pld_grid: PldGrid = 1e-3,
    nonnegative: bool | None = typer.Option(
        None,
        "--nonnegative/--allow-negative",
        help="Clamp published counts at 0 (post-processing). Default: the config's "
        "allow_negative_counts.",
    ),
    report: bool = typer.Option(True, "--report/--no-report", help="Write report.html."),
    formats: str = typer.Option(
        "txt",
        "--format",
        help="T1/T2 formats: txt (the Census folders t1/, t2/), parquet or txt,parquet.",
    ),
    engine: str = typer.Option("polars", "--engine", help="polars (default) or spark."),
    spark_master: str | None = typer.Option(
        None, "--spark-master", help="With --engine spark: the Spark master (default local[2])."
    ),
    spark_conf: list[str] = typer.Option(  # noqa: B008
        [],
        "--spark-conf",
        metavar="KEY=VALUE",
        help="With --engine spark: a Spark setting (repeatable).",
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
        help="The data set's name in the ledger (default: a digest of its parsed records, "
        "the same for a re-encoded or re-sorted copy).",
    ),
    run_record: str | None = typer.Option(
        None,
        "--run-record",
        help="Where the CONFIDENTIAL run record goes (default: beside --out, "
        "<out>.CONFIDENTIAL-run-record.json; never inside --out).",
    ),
    parents: ParentsOption = False,
    products: str = typer.Option(
        "p",
        "--products",
        help="p (SafeTab-P) or p,h: then SafeTab-H too, on the same population (DATA's "
        "household-records) with the T1 just published, in --out-h.",
    ),
    config_h: str | None = typer.Option(
        None, "--config-h", help="With --products p,h: SafeTab-H's config (default NMFv5)."
    ),
    out_h: str | None = typer.Option(
        None, "--out-h", help="With --products p,h: SafeTab-H's release (default OUT-h)."
    ),
    quiet: QuietOption = False,
    as_json: JsonOption = False,
) -> None:
    """Run SafeTab-P on person records and write T1/T2, release.json and report.html
    (with --products p,h, then SafeTab-H on the households: one release folder each).

    Examples: privtab safetab run --data synth-1m --out release-1m;
    privtab safetab run --products p,h --data synth-1m --out rel-1m (and rel-1m-h)
    """
    from privtab.tabulate.context import RunOptions
    from privtab.tabulate.summary import release_summary, release_tables

    open_unit("--delta", delta)
    for option, value in (("--data", data), ("--out", out), ("--config", config),
                          ("--ledger", ledger), ("--run-record", run_record)):  # fmt: skip
        path_option(option, value)
    # every other flag is named as RunOptions.from_flags' argument of the same name
    flags = {k: v for k, v in ctx.params.items() if k not in _NOT_RUN_OPTIONS}
    wanted = [x.strip().lower() for x in products.split(",") if x.strip()]
    if wanted not in (["p"], ["p", "h"]):
        from privtab.cli._render import fail

        fail(f"--products must be p or p,h, got {products!r}")
    opts = RunOptions.from_flags(**flags)
    res = run_release_cli(config, Path(data), Path(out), opts)
    summary = release_summary(res)
    head, tables = release_tables(summary)
    if wanted == ["p"]:
        emit(summary, as_json, tables, head=head)
        report_after_publication(res)
        return
    from privtab.cli.safetab_h import both_products

    both_products(res, summary, (head, tables), Path(data), config_h, out_h, opts, as_json)


def run_release_cli(config: str | Path | None, data: Path, out: Path, opts: Any) -> Any:
    """:func:`privtab.tabulate.run_release` with its progress on stderr (the log); see
    :func:`guarded`."""
    from privtab.tabulate.run import run_release

    return guarded(lambda: run_release(config, data, out, opts))


def guarded(run: Callable[[], Any]) -> Any:
    """Run a release (``run``): a user error is reported by the root group (one located
    message, its exit code); an interrupt before publication → "no release was
    written", exit 130. Nothing after publication fails."""
    import warnings

    from privtab.errors import EXIT_INTERRUPTED
    from privtab.mechanisms import InsecureReleaseWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureReleaseWarning)  # warned by the caller
        try:
            return run()
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
