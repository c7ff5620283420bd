"""The ``privtab`` command line (typer). Thin: parse, call the library, print.

Every command that computes something takes ``--json`` and then prints exactly one JSON
object on stdout; progress and warnings go to stderr. Library modules are imported inside
the commands so that ``privtab --help`` stays fast. Errors end as documented in
``docs/cli.md`` (:mod:`privtab.cli._errors`): one located message, exit code 1 (bad input),
2 (bad usage), 3 (a bug: the traceback is written to a file), 4 (the run failed in its
environment, e.g. a Spark worker died), 130 (interrupted); the
global ``--debug`` flag prints tracebacks. The library logs through :mod:`logging`
(loggers ``privtab.*``); :mod:`privtab.cli._render` prints the records on stderr and every
result on stdout (``--quiet``: warnings and errors only; ``--verbose``: debug records too).
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
    safetab_h,
    semantics,
    synth,
    topdown,
    validate,
    validate_output,
)
from privtab.cli._errors import DEBUG, ErrorHandlingGroup
from privtab.cli._render import set_verbosity

app = typer.Typer(
    rich_markup_mode=None,
    name="privtab",
    help="Differentially private population tables with end-to-end privacy accounting.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=ErrorHandlingGroup,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"privtab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    debug: bool = typer.Option(
        False, "--debug", help="On an error, also print the Python traceback (for bug reports)."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also debug records on stderr."),
) -> None:
    """privtab: differentially private statistics for national statistical offices.

    Exit codes: 0 success, 1 bad input, 2 bad usage, 3 internal error (a bug), 4 the run
    failed in its environment (a Spark worker died), 130 interrupted. Errors name the file,
    line, column and value (docs/cli.md).
    """
    ctx.meta[DEBUG] = debug
    set_verbosity(quiet, verbose)


account.register(app)
analyze.register(app)
bench.register(app)
demo.register(app)
invariants.register(app)
ledger.register(app)
safetab.register(app)
safetab_h.register(app)
semantics.register(app)
synth.register(app)
topdown.register(app)
validate.register(app)
validate_output.register(app)


def main() -> None:
    """Console-script entry point.

    An interrupted command (exit 130) has already cleaned up and said so: the process ends
    at once, without waiting for worker threads still inside a long computation (a signal
    is honoured within a fraction of a second)."""
    import os
    import sys

    from privtab.errors import EXIT_INTERRUPTED

    try:
        app()
    except SystemExit as done:
        if done.code == EXIT_INTERRUPTED:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(EXIT_INTERRUPTED)
        raise


__all__ = ["app", "main"]
