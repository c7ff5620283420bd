"""``privtab validate-output``: check a written SafeTab-P release; exit code 1 if it fails.

The release's T1/T2 files are checked against the Census output schemas and the rules of
:mod:`privtab.tabulate.output_validation` (layout, header, patterns, state filter,
non-negativity, duplicates, whole cell tables, T1 = Σ cells, sex marginals, companion error
tables, Parquet copies, and — with ``--data`` — the public domain). A failure is printed by
the root group like bad input: one located line per problem (file, line, column, value,
rule); with ``--json`` the problems as one JSON object on stdout.
"""

from __future__ import annotations

from pathlib import Path

import typer

from privtab.cli._render import JsonOption, emit


def register(app: typer.Typer) -> None:
    app.command("validate-output")(validate_output)


def validate_output(
    release: Path = typer.Argument(  # noqa: B008
        ..., help="The release folder (with t1/ and t2/)."
    ),
    config: str | None = typer.Option(
        None,
        "--config",
        "-c",
        help="config.json (reference files next to it) or its directory; default: the "
        "config recorded in the release's release.json.",
    ),
    data: str | None = typer.Option(
        None,
        "--data",
        "-d",
        help="Directory with the GRF-C: also check that every row is in the public domain.",
    ),
    as_json: JsonOption = False,
) -> None:
    """Check the T1/T2 files of a release against the Census output rules.

    Exit code 0: valid; 1: a rule is broken (each problem names file, line and rule).
    Example: privtab validate-output release-1m --data synth-1m
    """
    from privtab.tabulate.output_validation import validate_paths

    summary = validate_paths(release, config=config, data=data)
    rows = sum(summary.files.values())
    checked = ", ".join(summary.checks)
    valid = f"valid: {release} ({len(summary.files)} files, {rows:,} rows); checked {checked}"
    skipped = [f"  not checked: {rule} ({why})" for rule, why in summary.skipped.items()]
    emit(summary.to_json(), as_json, [], lines=[valid, *skipped])
