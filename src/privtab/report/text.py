"""Tables of already formatted cells: one presentation for the terminal and for Markdown.

A command's result is a JSON-ready dict; a :class:`Table` is its human presentation,
printed by the command line (:mod:`privtab.cli._render`: rich, folded to the terminal
width, never truncated) and written as Markdown (``docs/benchmarks.md``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Table", "fields_table", "fmt", "table"]


@dataclass(frozen=True)
class Table:
    """A titled table of already formatted cells; ``notes`` are lines printed under it.
    ``left`` is how many leading columns hold text (left-aligned); the rest are numbers."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = field(default=())
    left: int = 1

    def markdown(self) -> str:
        """The table in GitHub Markdown, its title in bold above it, notes below."""
        out = [f"**{self.title}**", ""] if self.title else []
        out.append("| " + " | ".join(self.columns) + " |")
        out.append("|" + "|".join("---" for _ in self.columns) + "|")
        out += ["| " + " | ".join(r) + " |" for r in self.rows]
        if self.notes:
            out += ["", *self.notes]
        return "\n".join(out)


def table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    notes: Sequence[str] = (),
    left: int = 1,
) -> Table:
    """Build a :class:`Table` from any sequences."""
    return Table(title, tuple(columns), tuple(tuple(r) for r in rows), tuple(notes), left)


def fmt(value: Any) -> str:
    """A value in words and digits, never a Python repr: ``None`` → "—", booleans → yes/no,
    floats to 6 significant digits, lists joined by commas, mappings as ``key value; …``."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return "—" if math.isnan(value) else f"{value:.6g}"
    if isinstance(value, Mapping):
        return "; ".join(f"{k} {fmt(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(fmt(v) for v in value)
    if hasattr(value, "tolist"):
        return fmt(value.tolist())
    return str(value)


def fields_table(title: str, payload: Mapping[str, Any], notes: Sequence[str] = ()) -> Table:
    """A two-column table of a result's fields (names with underscores read as words)."""
    rows = [(str(k).replace("_", " "), fmt(v)) for k, v in payload.items()]
    return table(title, ("", "value"), rows, notes, left=2)
