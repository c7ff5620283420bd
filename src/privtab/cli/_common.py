"""Helpers shared by the CLI commands: JSON output and error reporting."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer

from privtab._json import jsonable


def print_json(obj: dict[str, Any]) -> None:
    """Print exactly one JSON object on stdout (NaN → null, ±inf → strings)."""
    sys.stdout.write(json.dumps(jsonable(obj), indent=2, sort_keys=False) + "\n")
    sys.stdout.flush()


def fail(message: str, code: int = 2) -> NoReturn:
    """Print an error on stderr and exit with ``code``."""
    typer.echo(f"privtab: error: {message}", err=True)
    raise typer.Exit(code)


def warn(message: str) -> None:
    """Print a warning on stderr."""
    typer.echo(f"privtab: warning: {message}", err=True)
