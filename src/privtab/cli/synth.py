"""``privtab synth``: write a synthetic nation (person records + GRF-C), streaming."""

from __future__ import annotations

from pathlib import Path

import typer

from privtab._options import choice
from privtab.cli._render import (
    JsonOption,
    OverwriteOption,
    Progress,
    QuietOption,
    emit,
    interruptible,
    usage_errors,
)


def register(app: typer.Typer) -> None:
    app.command("synth")(synth)


def synth(
    persons: int = typer.Option(..., "--persons", "-n", min=0, help="Number of persons."),
    out: str = typer.Option(..., "--out", "-o", help="Output directory (written atomically)."),
    states: str | None = typer.Option(
        None,
        "--states",
        help="Comma-separated FIPS codes or USPS abbreviations, or US / PR / ALL "
        "(default: the 50 states, DC and PR).",
    ),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of the synthetic population."),
    fmt: str = typer.Option("txt", "--format", help="txt (Census pipe-delimited) or parquet."),
    chunk_rows: int = typer.Option(
        1 << 18, "--chunk-rows", min=1, help="Persons generated and written per chunk (memory)."
    ),
    overwrite: OverwriteOption = False,
    quiet: QuietOption = False,
    as_json: JsonOption = False,
) -> None:
    """Write N synthetic persons and their GRF-C for a synthetic US (+ Puerto Rico).

    Synthetic data, not a privacy output (a seeded generator is used). Example:
    privtab synth --persons 1000000 --out synth-1m --states AL,AK,PR --seed 7
    """
    from privtab.data.synth import synthesize

    choice("--format", fmt, ("txt", "parquet"))
    with interruptible("nothing was written"), usage_errors():
        result = synthesize(
            Path(out), persons, states=states, seed=seed, fmt=fmt,  # type: ignore[arg-type]
            chunk_rows=chunk_rows, overwrite=overwrite,
            progress=Progress("synth", unit="persons"),
        )  # fmt: skip
    emit(result.to_dict(), as_json, [result.table()])
