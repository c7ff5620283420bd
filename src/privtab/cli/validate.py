"""``privtab validate``: check SafeTab-P inputs; exit code 1 on bad input."""

from __future__ import annotations

from pathlib import Path

import typer

from privtab.cli._common import print_json


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)


def validate(
    data: str = typer.Option(
        ..., "--data", "-d", help="Directory with person-records and GRF-C (.txt or .parquet)."
    ),
    config: str | None = typer.Option(
        None,
        "--config",
        "-c",
        help="config.json (the four reference files next to it) or its directory; "
        "default: the packaged 2020 production parameters (NMFv7-2020).",
    ),
    batch_rows: int = typer.Option(
        1 << 18, "--batch-rows", min=1, help="Person rows validated per batch (memory)."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress on stderr."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Validate config, reference files, GRF-C and person records (nothing is written).

    Every problem names file, row (1-based data row; line = row + 1), column and value.
    Exit code 0: valid; 1: invalid input. Example: privtab validate --data synth-1m --json
    """
    from privtab.cli._progress import ProgressLine
    from privtab.data.errors import InputValidationError
    from privtab.data.inputs import load_inputs

    bar = ProgressLine("validate", unit="persons", quiet=quiet)
    try:
        inputs = load_inputs(
            None if config is None else Path(config),
            Path(data),
            batch_rows=batch_rows,
            progress=lambda n, s: bar(n, None, s),
        )
    except InputValidationError as err:
        bar.close()
        _report_invalid(err, as_json)
        raise typer.Exit(1) from None
    bar.close()
    summary = inputs.summary()
    if as_json:
        print_json({"valid": True, **summary})
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(
        f"[green]valid[/green]: {summary['person_rows']:,} persons, "
        f"{summary['grfc_blocks']:,} blocks, {summary['codes']:,} codes, "
        f"{summary['race_iterations']:,} race + {summary['ethnicity_iterations']} ethnicity "
        f"iterations; privacy_defn {summary['privacy_defn']}, "
        f"max_race_codes {summary['max_race_codes']}"
    )
    for scope, run in summary["runs"].items():
        t = Table(title=f"{scope} run: total budget {run['total_budget']:g}")
        for col in ("geography", "level", "regions", "iterations", "budget", "stability"):
            t.add_column(col, justify="left" if col == "geography" else "right")
        for lv in run["levels"]:
            t.add_row(
                lv["geography"],
                str(lv["iteration_level"]),
                f"{lv['regions']:,}",
                f"{lv['iterations']:,}",
                f"{lv['budget']:g}",
                str(lv["stability"]),
            )
        console.print(t)


def _report_invalid(err: object, as_json: bool) -> None:
    from privtab.data.errors import InputValidationError

    assert isinstance(err, InputValidationError)
    if as_json:
        print_json(err.to_dict())
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"invalid input: {err.total:,} problem(s)")
    for col in ("file", "row", "column", "value", "problem"):
        t.add_column(col, overflow="fold")
    for p in err.problems:
        t.add_row(
            p.file,
            "" if p.row is None else str(p.row),
            p.column or "",
            "" if p.value is None else p.value,
            f"{p.message} [{p.kind}]",
        )
    Console().print(t)
    shown: dict[tuple[str, str], int] = {}
    for p in err.problems:
        shown[(p.file, p.kind)] = shown.get((p.file, p.kind), 0) + 1
    for (file, kind), n in sorted(err.counts.items()):
        if n > shown.get((file, kind), 0):
            typer.echo(f"{file}: {n:,} rows with [{kind}] in total", err=False)
    typer.echo(f"privtab: invalid input ({err.total:,} problem(s))", err=True)
