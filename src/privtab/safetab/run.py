"""``privtab.safetab.release``: SafeTab-P on DataFrames (or files) in one call.

The call validates the inputs, runs every level of every run with the packaged 2020
production parameters unless told otherwise (:func:`privtab.tabulate.run_release`: the
same code as ``privtab safetab run``), publishes the release folder atomically and reads it
back as a :class:`~privtab.safetab.result.Release`.

Privacy: noise comes from the secure source (AES-256-CTR keyed from ``os.urandom``); the
release satisfies the exact guarantee its ``release.json`` states (:attr:`Release.guarantee`,
derived from the noise drawn; SafeTab seed Theorems 1 and 3). ``seed=`` switches to a seeded
source for tests and examples: the release is then marked **not private** everywhere.
A private release is recorded in the release ledger, exactly as from the command line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

from privtab.errors import UsageError
from privtab.progress import RichProgress
from privtab.safetab.inputs import InputSource, input_folder, renamed_errors
from privtab.safetab.result import Release

__all__ = ["DEFAULT_FORMATS", "DEFAULT_REPORT", "release"]

DEFAULT_FORMATS = ("parquet",)
"""Formats of T1/T2 in the release folder of a Python call (the command line writes the
Census folders ``t1/``, ``t2/``; pass ``formats=("txt", "parquet")`` for both)."""
DEFAULT_REPORT = False
"""A Python call writes no ``report.html`` unless ``report=True`` (drawing it takes
seconds; the command line writes it)."""

_CHOSEN_HERE = {"source", "allow_insecure", "engine", "returned"}


def _options(engine: str, seed: int | None, owned: Path | None, options: dict[str, Any]) -> Any:
    """The :class:`privtab.tabulate.RunOptions` of a call (unknown names refused)."""
    from privtab.random import SeededSource
    from privtab.tabulate import RunOptions

    known = {f.name for f in dataclasses.fields(RunOptions)} - _CHOSEN_HERE
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(
            f"release() got unknown option(s) {', '.join(unknown)}; "
            f"options are: {', '.join(sorted(known))}"
        )
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise UsageError(f"seed must be a non-negative integer, got {seed!r}")
    chosen: dict[str, Any] = {
        "formats": DEFAULT_FORMATS,
        "report": DEFAULT_REPORT,
        **options,
        "engine": engine,
    }
    if seed is not None:
        chosen.update(source=SeededSource(seed), allow_insecure=True)
    if owned is not None:
        # the release is returned to the caller, not published at a path: so the ledger
        # records it
        chosen["returned"] = True
        if "run_record" not in options:
            # the confidential run record goes with the temporary folder (run_record=PATH
            # keeps it)
            chosen["run_record"] = owned / "CONFIDENTIAL-run-record.json"
    return RunOptions(**chosen)


def release(
    persons: InputSource,
    geography: InputSource | None = None,
    *,
    config: str | Path | None = None,
    engine: str = "polars",
    seed: int | None = None,
    out: str | Path | None = None,
    progress: bool = True,
    **options: Any,
) -> Release:
    """Run SafeTab-P and return the :class:`~privtab.safetab.result.Release`.

    ``persons`` / ``geography``: the person records and the GRF-C — each a path (``.txt``
    pipe-delimited or ``.parquet``) or a polars/pandas DataFrame with the Census columns
    (:data:`privtab.data.PERSON_COLUMNS`, :data:`privtab.data.GRFC_COLUMNS`); or a data
    folder holding both files as ``persons`` with ``geography=None``.
    ``config``: a ``config.json`` or its folder (default: the 2020 production parameters).
    ``engine``: ``"polars"`` or ``"spark"``. ``seed``: seeded noise for tests — the release
    is NOT private. ``out``: publish the release folder there (default: a temporary folder
    owned by the returned object, see :mod:`privtab.safetab.result`). ``progress``: a rich
    progress display on stderr in terminals and notebooks. ``options``: any field of
    :class:`privtab.tabulate.RunOptions` (``delta``, ``nonnegative``,
    ``report`` — default off —, ``formats`` — default Parquet only —, ``run_record``,
    ``ledger``, …).

    Raises :class:`privtab.data.InputValidationError` naming the file or DataFrame, row,
    column and value of every bad input (nothing is written), and
    :class:`privtab.errors.UserError` for anything else the caller can fix.
    """
    from privtab.mechanisms import InsecureReleaseWarning
    from privtab.tabulate import run_release

    work = Path(tempfile.mkdtemp(prefix="privtab-release-"))
    owned = work if out is None else None
    try:
        opts = _options(engine, seed, owned, options)
        scratch = work / "inputs"
        scratch.mkdir()
        data, names = input_folder(persons, geography, scratch)
        target = work / "release" if out is None else Path(out)
        bar = RichProgress("SafeTab-P") if progress else contextlib.nullcontext()
        with renamed_errors(names), bar as say, warnings.catch_warnings():
            warnings.simplefilter("ignore", InsecureReleaseWarning)  # said below, at the caller
            result = run_release(config, data, target, opts, progress=say)
        shutil.rmtree(scratch, ignore_errors=True)
        if not result.private:
            warnings.warn(
                f"privtab.safetab.release(seed={seed}): seeded noise — the release is NOT "
                "private (marked so in release.json and NOT_PRIVATE); never publish it",
                InsecureReleaseWarning,
                stacklevel=2,
            )
        for text in result.warnings:
            warnings.warn(text, UserWarning, stacklevel=2)
        return Release.open(target, config=config, owned=owned)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    finally:
        if owned is None:
            shutil.rmtree(work, ignore_errors=True)
