"""The ``privtab`` command line (typer). Thin: parse, call the library, print.

Every command that computes something takes ``--json`` and then prints exactly one JSON
object on stdout; progress and warnings go to stderr. Library modules are imported inside
the commands so that ``privtab --help`` stays fast.
"""

from __future__ import annotations

import typer

from privtab import __version__
from privtab.cli import (
    account,
    analyze,
    bench,
    demo,
    invariants,
    ledger,
    safetab,
    semantics,
    synth,
    validate,
)

app = typer.Typer(
    name="privtab",
    help="Differentially private population tables with end-to-end privacy accounting.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"privtab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """privtab: differentially private statistics for national statistical offices."""


account.register(app)
analyze.register(app)
bench.register(app)
demo.register(app)
invariants.register(app)
ledger.register(app)
safetab.register(app)
semantics.register(app)
synth.register(app)
validate.register(app)


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["app", "main"]
