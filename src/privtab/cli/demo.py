"""``privtab demo``: the main job on built-in data (README command one).

Builds a synthetic population (a few states and Puerto Rico, every geography level),
runs the 2020 production SafeTab-P configuration (zCDP, discrete Gaussian noise, ρ = 4.944
for the US run) over it with secure noise, and prints levels, budgets, the guarantee by
every analysis, cells released, MOE per level and — marked as a non-private evaluation
that a real release never has — the error against the synthetic truth.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import typer

from privtab.cli._render import fail, print_json, warn

DEFAULT_STATES = "DE,RI,VT,PR"


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)


def _demo_params(directory: Path, states: list[str], run_pr: bool) -> Path:
    """The production parameters with ``state_filter_us`` set to the demo's states."""
    from privtab.data import production_config_dir

    directory.mkdir(parents=True, exist_ok=True)
    src = production_config_dir()
    for f in src.iterdir():
        if f.is_file():
            shutil.copy2(f, directory / f.name)
    cfg = json.loads((src / "config.json").read_text())
    us = [s for s in states if s != "72"]
    cfg["state_filter_us"] = us or cfg["state_filter_us"][:1]
    cfg["run_us"] = bool(us)
    cfg["run_pr"] = run_pr
    (directory / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return directory / "config.json"


def demo(
    persons: int = typer.Option(200_000, "--persons", min=1000, help="Synthetic persons."),
    states: str = typer.Option(
        DEFAULT_STATES, "--states", help="States (USPS or FIPS; PR for Puerto Rico)."
    ),
    out: str = typer.Option(
        "privtab-demo", "--out", "-o", help="Working folder (replaced if privtab's demo wrote it)."
    ),
    seed: int | None = typer.Option(
        None, "--seed", help="Seeded noise for a reproducible demo (then NOT private)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress on stderr."),
) -> None:
    """Synthetic population → the 2020 production SafeTab-P config → a release, summarised."""
    from privtab.atomic import InterruptGuard, OutputRefusedError, atomic_directory
    from privtab.cli.safetab import (
        print_release_summary,
        release_summary,
        report_after_publication,
        run_release_cli,
    )
    from privtab.data.synth import synthesize
    from privtab.data.synth.states import resolve_states
    from privtab.errors import EXIT_INTERRUPTED
    from privtab.random import SeededSource
    from privtab.tabulate.run import RunOptions

    try:
        chosen = [st.fips for st in resolve_states(states)]
    except ValueError as exc:
        fail(str(exc))

    def say(msg: str) -> None:
        if not quiet:
            print(f"demo: {msg}", file=sys.stderr, flush=True)

    if seed is not None:
        warn("--seed: seeded noise, the demo release is NOT private")
    opts = RunOptions(
        source=SeededSource(seed) if seed is not None else None,
        allow_insecure=seed is not None,
        evaluate=True,
        use_ledger=False,  # synthetic data: not a confidential data set to account for
    )
    root = Path(out)
    try:
        # the whole working folder is written atomically; a previous demo folder is replaced
        with (
            InterruptGuard() as guard,
            atomic_directory(root, kind="demo", overwrite=True, guard=guard) as tmp,
        ):
            say(f"synthesising {persons:,} persons in states {', '.join(chosen)}")
            synth = synthesize(tmp / "input", persons, states=chosen, seed=2020)
            params = _demo_params(tmp / "parameters", chosen, "72" in chosen)
            res = run_release_cli(
                params,
                tmp / "input",
                tmp / "release",
                opts,
                quiet=quiet,
                as_json=as_json,
                prefix="demo",
            )
    except OutputRefusedError as exc:
        fail(f"{exc}; choose another --out")
    except KeyboardInterrupt:
        fail("interrupted: nothing was written", code=EXIT_INTERRUPTED)
    res.out = root / "release"
    summary = release_summary(res)
    summary["run_record"] = str(root / "release.CONFIDENTIAL-run-record.json")
    summary["synthetic_persons"] = synth.persons
    summary["states"] = list(chosen)
    summary["outputs"] = {
        "t1": str(root / "release" / "t1.txt"),
        "t2": str(root / "release" / "t2.txt"),
        "release_json": str(root / "release" / "release.json"),
        "report": str(root / "release" / "report.html"),
    }
    if as_json:
        print_json(summary)
    else:
        print_release_summary(summary)
        typer.echo(
            f"\nT1/T2 (pipe-delimited and Parquet), release.json and report.html are in "
            f"{root / 'release'}; the synthetic input is in {root / 'input'}."
        )
    report_after_publication(res)
