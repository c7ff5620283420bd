"""``privtab validate``: check SafeTab-P inputs; exit code 1 on bad input.

Bad input is raised as :class:`privtab.data.InputValidationError` and printed by the root
group (:mod:`privtab.cli._errors`) exactly as ``privtab safetab run`` prints it: one located
line per problem on stderr (with ``--json``: the problems as one JSON object on stdout).
"""

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
    allow_empty: bool = typer.Option(
        False,
        "--allow-empty",
        help="Accept a person file with a header and no rows (refused by default).",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress on stderr."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Validate config, reference files, GRF-C and person records (nothing is written).

    Every problem names file, line (text files: the line number, the header being line 1;
    Parquet: the row number), column and value. Exit code 0: valid; 1: invalid input.
    Example: privtab validate --data synth-1m --json
    """
    from privtab.cli._progress import ProgressLine
    from privtab.data.inputs import load_inputs

    bar = ProgressLine("validate", unit="persons", quiet=quiet)
    try:
        inputs = load_inputs(
            None if config is None else Path(config),
            Path(data),
            batch_rows=batch_rows,
            progress=lambda n, s: bar(n, None, s),
            allow_empty=allow_empty,
        )
    finally:
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
    """Re-raise ``err`` for the root group to print (kept for callers that still catch
    :class:`~privtab.data.InputValidationError` themselves; they need not)."""
    assert isinstance(err, BaseException)
    raise err
