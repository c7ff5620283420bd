"""Reading the values of command-line style options: one home for the checks every
command shares (comma-separated numbers, probabilities). A bad value raises
:class:`privtab.errors.UsageError` naming the option — exit code 2 on the command line.
"""

from __future__ import annotations

import math

from privtab.errors import UsageError

__all__ = ["choice", "numbers", "open_unit", "output_file_option", "path_option"]


def numbers(
    text: str, option: str, *, lo: float = -math.inf, hi: float = math.inf, open_lo: bool = False
) -> list[float]:
    """Comma-separated numbers (``;`` also separates) within ``[lo, hi]`` (``(lo, hi]``)."""
    out: list[float] = []
    for p in (x.strip() for x in text.replace(";", ",").split(",")):
        if not p:
            continue
        try:
            v = float(p)
        except ValueError:
            raise UsageError(
                f"{option} must be comma-separated numbers: {p!r} is not a number"
            ) from None
        if math.isnan(v) or v < lo or v > hi or (open_lo and v == lo):
            raise UsageError(
                f"{option}: {p!r} must lie in {'(' if open_lo else '['}{lo:g}, {hi:g}]"
            )
        out.append(v)
    if not out:
        raise UsageError(f"{option}: give at least one value")
    return out


def open_unit(option: str, value: float) -> None:
    """Refuse a probability-like option outside (0, 1)."""
    if not 0 < value < 1:
        raise UsageError(f"{option} must lie strictly between 0 and 1, got {value}")


def choice(option: str, value: str, allowed: tuple[str, ...]) -> str:
    """``value`` when it is one of ``allowed`` ("--format must be txt or parquet, got 'x'")."""
    if value not in allowed:
        raise UsageError(f"{option} must be {' or '.join(allowed)}, got {value!r}")
    return value


def path_option(option: str, value: str | None) -> str | None:
    """Refuse a path option that names nothing usable whatever the file system holds: an
    empty string (which would silently mean the current folder) or one with a NUL
    character (no file name can hold it). ``None`` (not given) passes."""
    if value is None:
        return None
    if value.strip() == "":
        raise UsageError(f"{option} is empty: give a path")
    if "\x00" in value:
        raise UsageError(f"{option} holds a NUL character, which no file name can hold")
    return value


def output_file_option(option: str, value: str | None) -> str | None:
    """A path option naming a file to write: :func:`path_option`, and not a folder."""
    import os

    if path_option(option, value) is not None and os.path.isdir(str(value)):
        raise UsageError(f"{option} {value} is a folder: give the path of a file to write")
    return value
