"""``privtab validate``: check the inputs of a data folder; exit code 1 on bad input.

Validates whatever inputs the folder holds — SafeTab-P's person records (with the
parameters), TopDown's CEF units and persons (with every cross-file rule), SafeTab-H's
household records — or the ones of one product (``--product``). Bad input is raised as
:class:`privtab.data.InputValidationError` and printed by the root group
(:mod:`privtab.cli._errors`) exactly as ``privtab safetab run`` prints it: one located line
per problem on stderr (with ``--json``: the problems as one JSON object on stdout).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from privtab._options import choice
from privtab.cli._render import JsonOption, Progress, QuietOption, emit

PRODUCTS = {
    "safetab-p": ("persons",),
    "safetab-h": ("households",),
    "topdown": ("population",),
    "all": ("persons", "population", "households"),
}


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)


def validate(
    data: str = typer.Option(
        ...,
        "--data",
        "-d",
        help="Directory with the inputs (.txt or .parquet): person-records and GRF-C, "
        "cef-units and cef-persons, household-records.",
    ),
    product: str | None = typer.Option(
        None,
        "--product",
        help="Validate one product's inputs: safetab-p (person-records, GRF-C, parameters), "
        "safetab-h (household-records, GRF-C), topdown (cef-units, cef-persons, GRF-C) or "
        "all; default: every input the folder holds, and the rules between them.",
    ),
    config: str | None = typer.Option(
        None,
        "--config",
        "-c",
        help="config.json (the four reference files next to it) or its directory; "
        "default: the packaged 2020 production parameters (NMFv7-2020).",
    ),
    batch_rows: int = typer.Option(
        1 << 18, "--batch-rows", min=1, help="Rows validated per batch (memory)."
    ),
    allow_empty: bool = typer.Option(
        False,
        "--allow-empty",
        help="Accept a person file with a header and no rows (refused by default).",
    ),
    quiet: QuietOption = False,
    as_json: JsonOption = False,
) -> None:
    """Validate the inputs of a data folder and the rules between them (nothing is written).

    Every problem names file, line (text files: the line number, the header being line 1;
    Parquet: the row number), column and value. Exit code 0: valid; 1: invalid input.
    Example: privtab validate --data synth-1m --json
    """
    from privtab._options import path_option
    from privtab.data.folder import validate_folder

    path_option("--data", data)
    path_option("--config", config)

    sets = None if product is None else PRODUCTS[choice("--product", product, tuple(PRODUCTS))]
    bar = Progress("validate", unit="rows")
    summary = validate_folder(
        Path(data),
        inputs=sets,
        config=None if config is None else Path(config),
        batch_rows=batch_rows,
        progress=lambda n, s: bar(n, None, s),
        allow_empty=allow_empty,
    )
    head, tables = _tables(summary)
    persons = summary.pop("persons", {})
    emit({"valid": True, **persons, **summary}, as_json, tables, head=head)


def _tables(summary: dict[str, Any]) -> tuple[list[str], list[Any]]:
    from privtab.data.inputs import summary_tables

    head: list[str] = []
    tables: list[Any] = []
    if "persons" in summary:
        line, tables = summary_tables(summary["persons"])
        head.append(line)
    pop = summary.get("population")
    if pop is not None:
        head.append(
            f"valid: {pop['persons']:,} CEF persons in {pop['units']:,} units "
            f"({pop['occupied']:,} occupied, {pop['vacant']:,} vacant, "
            f"{pop['gq_facilities']:,} GQ facilities); cross-file rules hold"
        )
    hh = summary.get("households")
    if hh is not None:
        head.append(f"valid: {hh['records']:,} household records")
    return head, tables
