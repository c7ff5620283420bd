"""``privtab safetab accuracy``: the exact accuracy report of a plan (and the simulation).

For a plan (the production config or any other), per level and true group size n: the
probability of each workload and of zero suppression, the exact expected MOEs and the
expected published rows — from the noise laws, no data needed
(:mod:`privtab.tabulate.accuracy`). ``--data DIR [--trials K]`` uses an input's true group
sizes and runs K seeded releases against them (the Bureau's simulation; NOT private).
"""

from __future__ import annotations

from pathlib import Path

import typer

from privtab.cli._render import ConfigOption, JsonOption, OverwriteOption, QuietOption, emit, info


def register(app: typer.Typer) -> None:
    app.command("accuracy")(accuracy_cmd)


def accuracy_cmd(
    config: ConfigOption = None,
    scope: str | None = typer.Option(
        None, "--scope", help="US or PR (default: every run of the config)."
    ),
    level: list[str] = typer.Option(  # noqa: B008
        [],
        "--level",
        metavar="LEVEL",
        help='A level, e.g. "(COUNTY, 2)" (repeatable; default: all).',
    ),
    n: str | None = typer.Option(
        None, "--n", help="Group sizes, comma-separated (default: 0, 1, 2, 5, …, 10⁶)."
    ),
    data: str | None = typer.Option(
        None,
        "--data",
        "-d",
        help="An input (person-records + GRF-C): use its true group sizes. NOT PRIVATE: for "
        "synthetic or public data only.",
    ),
    trials: int = typer.Option(
        0, "--trials", min=0, help="With --data: K seeded releases against the truth."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the simulated releases (--trials)."),
    out: str | None = typer.Option(
        None, "--out", "-o", help="Write the report folder (JSON, CSV per level, HTML)."
    ),
    overwrite: OverwriteOption = False,
    quiet: QuietOption = False,
    as_json: JsonOption = False,
) -> None:
    """Exact accuracy of a plan: P(workload | n), P(suppressed | n), MOEs, published rows.

    Computed from the noise laws (no data, no simulation). With --data, on the true sizes
    of an input's groups; with --trials K also the Bureau-style simulation beside it.
    Example: privtab safetab accuracy --level "(COUNTY, 2)" --n 0,10,100,1000,10000 --json
    """
    from privtab.tabulate.accuracy_report import accuracy_tables, config_accuracy, write_accuracy

    say = lambda msg: info(f"accuracy: {msg}")  # noqa: E731 - hidden by --quiet
    report = config_accuracy(
        config, scope=scope, levels=level, n=n, data=data, trials=trials, seed=seed, say=say
    )
    written = [] if out is None else write_accuracy(report, Path(out), overwrite=overwrite)
    doc = report.to_json()
    if as_json and written:
        doc["written"] = [str(p) for p in written]
    private = "[red]NOT PRIVATE[/red]: computed from the true counts of the input"
    head = [] if doc["private"] else [private]
    emit(doc, as_json, accuracy_tables(doc), [f"wrote {p}" for p in written], head=head)
