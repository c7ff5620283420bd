"""The inputs of a one-call release: paths or DataFrames → a Census input folder.

SafeTab-P reads a data folder holding ``person-records`` and ``GRF-C`` (``.txt`` pipe-delimited
or ``.parquet``; :func:`privtab.data.load_inputs`). :func:`input_folder` makes one from what
the caller has:

* a **path** to a file is linked into the folder under its Census name (no copy);
* a **path** to a folder holding both files is used as it is (``geography=None``);
* a **DataFrame** (polars, or pandas through :func:`polars.from_pandas`) is written as
  Parquet with the columns of the Census layout (:data:`privtab.data.PERSON_COLUMNS`,
  :data:`privtab.data.GRFC_COLUMNS`); values are read as text, exactly as from the Census
  files, so codes keep their leading zeros only if the frame holds them as strings.

Every problem in a DataFrame is reported against the frame, not the temporary file:
``persons DataFrame, row 5, column QAGE, value '1x0'`` (rows count from 1: row 1 is
``df[0]``) — :func:`renamed_errors`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privtab.errors import UsageError, UserError

if TYPE_CHECKING:
    import polars as pl

__all__ = ["FRAME", "InputSource", "frame_of", "input_folder", "renamed_errors"]

InputSource = Any
"""A path (``str``/``os.PathLike``) or a polars/pandas DataFrame."""

FRAME = " DataFrame"
"""Suffix of the name under which problems of an in-memory frame are reported."""

_STEMS = {"persons": "person-records", "geography": "GRF-C"}


def frame_of(value: Any, what: str) -> pl.DataFrame | None:
    """``value`` as a polars DataFrame, ``None`` if it is a path; ``TypeError`` otherwise."""
    import polars as pl

    if isinstance(value, str | os.PathLike):
        return None
    if isinstance(value, pl.LazyFrame):
        return value.collect()
    if isinstance(value, pl.DataFrame):
        return value
    if type(value).__module__.split(".")[0] == "pandas" and hasattr(value, "columns"):
        frame: pl.DataFrame = pl.from_pandas(value)
        return frame
    raise TypeError(
        f"{what} must be a path or a polars/pandas DataFrame, got {type(value).__name__}"
    )


def _columns(what: str) -> tuple[str, ...]:
    from privtab.data import GRFC_COLUMNS, PERSON_COLUMNS

    return tuple(PERSON_COLUMNS) if what == "persons" else tuple(GRFC_COLUMNS)


def _write_frame(df: pl.DataFrame, what: str, folder: Path) -> Path:
    """The frame as ``folder/<Census name>.parquet`` (only the Census columns when it has
    them all; otherwise as it is, so that validation names what is missing)."""
    wanted = _columns(what)
    if all(c in df.columns for c in wanted):
        df = df.select(wanted)
    path = folder / f"{_STEMS[what]}.parquet"
    df.write_parquet(path, compression="lz4", statistics=False)
    return path


def _link_file(source: Path, what: str, folder: Path) -> Path:
    if not source.is_file():
        raise UsageError(
            f"{what}: {source} is not a file",
            hint=f"pass the {_STEMS[what]} file (.txt or .parquet) or a DataFrame",
        )
    suffix = source.suffix.lower()
    if suffix not in (".txt", ".parquet", ".pq"):
        raise UsageError(
            f"{what}: {source} is neither a .txt (pipe-delimited) nor a .parquet file",
            file=str(source),
        )
    link = folder / f"{_STEMS[what]}{'.txt' if suffix == '.txt' else '.parquet'}"
    try:
        link.symlink_to(source.resolve())
    except OSError:  # no symlinks here (some file systems): read it through a copy
        import shutil

        shutil.copyfile(source, link)
    return link


def input_folder(
    persons: InputSource, geography: InputSource | None, scratch: Path
) -> tuple[Path, dict[str, str]]:
    """The data folder to run on, and the names under which its files' problems are
    reported (temporary file → the caller's name for it). ``scratch`` is an empty folder
    the caller owns and deletes."""
    if geography is None:
        if frame_of(persons, "persons") is None and Path(persons).is_dir():
            return Path(persons), {}
        raise UsageError(
            "geography is missing: pass the GRF-C (a path or a DataFrame), or pass a data "
            "folder holding both person-records and GRF-C as persons"
        )
    names: dict[str, str] = {}
    for what, value in (("persons", persons), ("geography", geography)):
        df = frame_of(value, what)
        if df is None:
            src = Path(value)
            path = _link_file(src, what, scratch)
            names[str(path)] = str(src)
        else:
            path = _write_frame(df, what, scratch)
            names[str(path)] = what + FRAME
    return scratch, names


def _rename(text: str | None, names: dict[str, str]) -> str | None:
    if text is None:
        return None
    for placeholder, name in names.items():
        text = text.replace(placeholder, name)
    return text


@contextlib.contextmanager
def renamed_errors(names: dict[str, str]) -> Iterator[None]:
    """Re-raise a :class:`privtab.errors.UserError` about a temporary input file as one
    about the caller's file or DataFrame (the same problems, located in the caller's
    terms)."""
    from privtab.data.errors import InputValidationError

    try:
        yield
    except InputValidationError as exc:
        if not names:
            raise
        problems = [
            replace(
                p,
                file=_rename(p.file, names) or p.file,
                message=_rename(p.message, names) or p.message,
            )
            for p in exc.problems
        ]
        counts = {(_rename(f, names) or f, k): n for (f, k), n in exc.counts.items()}
        raise InputValidationError(problems, counts) from None
    except UserError as exc:
        if not names or not any(t in str(exc) or t == exc.file for t in names):
            raise
        exc.message = _rename(exc.message, names) or exc.message
        exc.args = (exc.message, *exc.args[1:])
        exc.file = _rename(exc.file, names)
        raise
