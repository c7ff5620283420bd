"""``privtab validate``: check SafeTab-P inputs; exit code 1 on bad input.

Bad input is raised as :class:`privtab.data.InputValidationError` and printed by the root
group (:mod:`privtab.cli._errors`) exactly as ``privtab safetab run`` prints it: one located
line per problem on stderr (with ``--json``: the problems as one JSON object on stdout).
"""

from __future__ import annotations

from pathlib import Path

import typer

from privtab.cli._render import JsonOption, Progress, QuietOption, emit


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
    quiet: QuietOption = False,
    as_json: JsonOption = False,
) -> None:
    """Validate config, reference files, GRF-C and person records (nothing is written).

    Every problem names file, line (text files: the line number, the header being line 1;
    Parquet: the row number), column and value. Exit code 0: valid; 1: invalid input.
    Example: privtab validate --data synth-1m --json
    """
    from privtab._options import path_option
    from privtab.data.inputs import load_inputs, summary_tables

    path_option("--data", data)
    path_option("--config", config)

    bar = Progress("validate", unit="persons")
    inputs = load_inputs(
        None if config is None else Path(config),
        Path(data),
        batch_rows=batch_rows,
        progress=lambda n, s: bar(n, None, s),
        allow_empty=allow_empty,
    )
    summary = inputs.summary()
    head, tables = summary_tables(summary)
    emit({"valid": True, **summary}, as_json, tables, head=[head])
