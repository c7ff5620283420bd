"""Helpers shared by the CLI commands: JSON output and error reporting."""

from __future__ import annotations

import json
import math
import sys
from typing import Any, NoReturn

import typer


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        if math.isnan(obj):
            return None
        if math.isinf(obj):
            return "inf" if obj > 0 else "-inf"
        return obj
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return _clean(obj.item())
    return obj


def print_json(obj: dict[str, Any]) -> None:
    """Print exactly one JSON object on stdout (NaN → null, ±inf → strings)."""
    sys.stdout.write(json.dumps(_clean(obj), indent=2, sort_keys=False) + "\n")
    sys.stdout.flush()


def fail(message: str, code: int = 2) -> NoReturn:
    """Print an error on stderr and exit with ``code``."""
    typer.echo(f"privtab: error: {message}", err=True)
    raise typer.Exit(code)


def warn(message: str) -> None:
    """Print a warning on stderr."""
    typer.echo(f"privtab: warning: {message}", err=True)
