"""``privtab demo``: the main job on built-in data (README command one).

Runs :func:`privtab.tabulate.demo.run_demo` and prints levels, budgets, the guarantee by
every analysis, cells released, MOE per level and — marked as a non-private evaluation
that a real release never has — the error against the synthetic truth; then SafeTab-H's
release of the same population's households (its rows and its guarantees per household
and per person).
"""

from __future__ import annotations

import typer

from privtab.cli._render import JsonOption, QuietOption, emit, fail, interruptible, warn

DEFAULT_STATES = "DE,RI,VT,PR"


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)


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
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Synthetic population → the 2020 production SafeTab-P, SafeTab-H and TopDown configs →
    releases (persons: DHC-A; households: DHC-B; the redistricting data), summarised."""
    import warnings

    from privtab.atomic import OutputRefusedError
    from privtab.cli.safetab import report_after_publication
    from privtab.mechanisms import InsecureReleaseWarning
    from privtab.tabulate.demo import run_demo
    from privtab.tabulate.summary import release_tables

    if seed is not None:
        warn("--seed: seeded noise, the demo release is NOT private")
    with interruptible("nothing was written"), warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureReleaseWarning)  # warned above
        try:
            done = run_demo(out, persons, states, seed)
        except ValueError as exc:
            fail(str(exc))
        except OutputRefusedError as exc:
            fail(f"{exc}; choose another --out")
    summary = done.summary()
    head, tables = release_tables(summary)
    h = [] if done.run_h is None else [done.run_h.headline()]
    emit(summary, as_json, tables, head=head, lines=[*h, done.where()])
    report_after_publication(done.run)
    if done.run_h is not None:
        report_after_publication(done.run_h)
