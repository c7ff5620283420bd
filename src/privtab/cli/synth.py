"""``privtab synth``: write a synthetic nation (person records + GRF-C), streaming."""

from __future__ import annotations

from pathlib import Path

import typer

from privtab.cli._common import fail, print_json


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
        1 << 19, "--chunk-rows", min=1, help="Persons generated and written per chunk (memory)."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --out."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress on stderr."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Write N synthetic persons and their GRF-C for a synthetic US (+ Puerto Rico).

    Synthetic data, not a privacy output (a seeded generator is used). Example:
    privtab synth --persons 1000000 --out synth-1m --states AL,AK,PR --seed 7
    """
    from privtab.atomic import InterruptGuard, OutputRefusedError
    from privtab.cli._progress import ProgressLine
    from privtab.data.synth import synthesize

    if fmt not in ("txt", "parquet"):
        fail(f"--format must be txt or parquet, got {fmt!r}")
    bar = ProgressLine("synth", unit="persons", quiet=quiet)
    try:
        with InterruptGuard():
            result = synthesize(
                Path(out),
                persons,
                states=states,
                seed=seed,
                fmt=fmt,  # type: ignore[arg-type]
                chunk_rows=chunk_rows,
                overwrite=overwrite,
                progress=bar,
            )
    except OutputRefusedError as exc:
        fail(str(exc))
    except ValueError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        bar.close()
        fail("interrupted; nothing was written", code=130)
    bar.close()
    payload = result.to_dict()
    if as_json:
        print_json(payload)
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"synthetic nation written to {result.out} (synthetic data, not private)")
    t.add_column("item")
    t.add_column("value", justify="right")
    t.add_row("persons", f"{result.persons:,}")
    t.add_row("seed", str(result.seed))
    t.add_row("states", f"{len(result.states)}")
    for k, v in payload["geography"].items():
        t.add_row(k, f"{v:,}")
    t.add_row("Hispanic", f"{result.hispanic:,}")
    for k, v in sorted(result.multiplicity.items()):
        t.add_row(f"persons with {k} race code(s)", f"{v:,}")
    for name, size in result.files.items():
        t.add_row(name, f"{size / 1e6:,.1f} MB")
    t.add_row("seconds", f"{result.seconds:.2f}")
    if result.seconds > 0:
        t.add_row("persons / s", f"{result.persons / result.seconds:,.0f}")
    Console().print(t)
