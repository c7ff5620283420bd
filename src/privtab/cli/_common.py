"""Helpers shared by the CLI commands: JSON output and error reporting."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer

from privtab._json import jsonable
from privtab.errors import EXIT_INPUT, EXIT_USAGE, InputError, UsageError


def print_json(obj: dict[str, Any]) -> None:
    """Print exactly one JSON object on stdout (NaN → null, ±inf → strings)."""
    sys.stdout.write(json.dumps(jsonable(obj), indent=2, sort_keys=False) + "\n")
    sys.stdout.flush()


def fail(message: str, code: int = EXIT_USAGE, hint: str | None = None) -> NoReturn:
    """End the command with a user error: :class:`~privtab.errors.UsageError` (code 2) or
    :class:`~privtab.errors.InputError` (code 1), printed by the root group as
    ``privtab: error: ...`` (``--json``: an ``{"error": ...}`` object on stdout)."""
    if code == EXIT_USAGE:
        raise UsageError(message, hint=hint)
    if code == EXIT_INPUT:
        raise InputError(message, hint=hint)
    typer.echo(f"privtab: error: {message}", err=True)
    raise typer.Exit(code)


def warn(message: str) -> None:
    """Print a warning on stderr."""
    typer.echo(f"privtab: warning: {message}", err=True)
