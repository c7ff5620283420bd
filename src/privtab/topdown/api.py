"""``privtab.topdown.release``: a TopDown release in one call, read back as typed tables.

The call runs :func:`privtab.topdown.run.run_release` (the same code as ``privtab topdown
run``) on a data folder in the C1 layout (``GRF-C``, ``cef-units``, ``cef-persons``),
publishes the release folder atomically and returns a :class:`TopDownRelease`: the person
and unit microdata and the P1–P5/H1 tables as polars frames, read back from the published
folder, with the exact guarantee of ``release.json``.

Without ``out=``, the folder is temporary and owned by the returned object (deleted by
:meth:`TopDownRelease.close`, at the end of a ``with`` block or when garbage-collected;
keep it with :meth:`TopDownRelease.write`). ``seed=`` (or ``noise=False``) is for tests
and examples: the release is then marked **not private** everywhere. A private release is
recorded in the release ledger, as from the command line.

Privacy: each run is ρ-zCDP per record of its histogram (:attr:`TopDownRelease.rho`:
293764/114921 per person and 11417641/152349649 per housing unit with the packaged 2020
strategies), exact, derived from the mechanisms that drew the noise.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import warnings
import weakref
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import polars as pl

from privtab.errors import UsageError

__all__ = ["TopDownRelease", "release"]


class TopDownRelease:
    """A TopDown release folder read back: microdata, tables, guarantee."""

    def __init__(self, path: Path, document: dict[str, Any], *, owned: Path | None = None) -> None:
        self._path = path
        self.document = document
        """``release.json``."""
        self._tables: dict[str, pl.DataFrame] = {}
        self._cleanup = (
            weakref.finalize(self, shutil.rmtree, owned, True) if owned is not None else None
        )

    @classmethod
    def open(cls, path: str | Path, *, owned: Path | None = None) -> TopDownRelease:
        """Read a release folder (its ``release.json`` checked)."""
        from privtab.topdown.document import read_document

        folder = Path(path)
        return cls(folder, read_document(folder), owned=owned)

    @property
    def path(self) -> Path:
        """The release folder (temporary unless run with ``out=``)."""
        if self._cleanup is not None and not self._cleanup.alive:
            raise UsageError("this release's temporary folder was removed by close()")
        return self._path

    @property
    def private(self) -> bool:
        """``False`` for a seeded or noise-off test release: never publish one."""
        return bool(self.document["private"])

    @property
    def rho(self) -> dict[str, Fraction]:
        """The exact ρ (zCDP) per person and per housing unit."""
        g = self.document["guarantee"]
        return {k: Fraction(g[k]["rho"]["exact"]) for k in ("persons", "housing_units") if k in g}

    @property
    def guarantee(self) -> dict[str, Any]:
        """The guarantee every way (``release.json``'s ``guarantee``)."""
        out: dict[str, Any] = self.document["guarantee"]
        return out

    def _read(self, rel: str) -> pl.DataFrame:
        if rel not in self._tables:
            self._tables[rel] = pl.read_parquet(self.path / rel)
        return self._tables[rel]

    @property
    def persons(self) -> pl.DataFrame:
        """The person Microdata Detail File (MPD; :mod:`privtab.topdown.mdf`)."""
        return self._read("mdf/persons.parquet")

    @property
    def units(self) -> pl.DataFrame:
        """The unit Microdata Detail File (MUD)."""
        return self._read("mdf/units.parquet")

    def table(self, name: str) -> pl.DataFrame:
        """``"P1"`` … ``"P5"``, ``"H1"``: ``GEOID``, ``GEOLEVEL``, ``CELL``, ``COUNT`` (Int64)."""
        from privtab.topdown.pl94 import TABLES

        if name not in TABLES:
            raise ValueError(f"unknown table {name!r}; tables are {', '.join(TABLES)}")
        return self._read(f"pl94/{name}.parquet")

    def write(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Copy the release folder to ``path`` atomically."""
        from privtab.atomic import MARKER, atomic_directory
        from privtab.topdown.run import FOLDER_KIND

        source = self.path
        with atomic_directory(path, kind=FOLDER_KIND, overwrite=overwrite, protect=[source]) as t:
            for entry in source.iterdir():
                if entry.name == MARKER:
                    continue
                copy = shutil.copytree if entry.is_dir() else shutil.copy2
                copy(entry, t / entry.name)
        return Path(path)

    def close(self) -> None:
        """Delete the temporary release folder (a no-op for ``out=``)."""
        if self._cleanup is not None:
            self._cleanup()

    def __enter__(self) -> TopDownRelease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        rho = ", ".join(f"ρ per {k.replace('_', ' ')} {v}" for k, v in self.rho.items())
        status = "" if self.private else "NOT PRIVATE (test noise: never publish) "
        return f"<privtab TopDownRelease {status}{rho}, runs {', '.join(self.document['runs'])}>"


def release(
    data: str | Path,
    *,
    runs: Sequence[str] = ("us", "pr"),
    seed: int | None = None,
    noise: bool = True,
    nmf: bool = False,
    out: str | Path | None = None,
    progress: bool = True,
    **options: Any,
) -> TopDownRelease:
    """Run TopDown on the data folder ``data`` and return the :class:`TopDownRelease`.

    ``runs``: ``"us"`` and/or ``"pr"``; ``seed``: seeded noise for tests — NOT private;
    ``noise=False``: the exact counts (tests only) — NOT private; ``nmf``: also write the
    noisy measurements; ``out``: publish the folder there (default: a temporary folder
    owned by the result); ``progress``: a rich progress display on stderr in terminals and
    notebooks; ``options``: any field of :class:`privtab.topdown.run.TopDownOptions`
    (``strategies``, ``report`` — default off here —, ``ledger``, ``run_record``,
    ``postprocess="gls-round"``: the GLS-first post-processor, :mod:`privtab.topdown.gls_round`,
    …).

    Raises :class:`privtab.data.errors.InputValidationError` naming the file, row, column
    and value of every bad input (nothing is written), and
    :class:`privtab.errors.UserError` for anything else the caller can fix.
    """
    import dataclasses

    from privtab.mechanisms import InsecureReleaseWarning
    from privtab.progress import RichProgress
    from privtab.random import SeededSource
    from privtab.topdown.run import TopDownOptions, run_release

    known = {f.name for f in dataclasses.fields(TopDownOptions)} - {
        "runs", "source", "allow_insecure", "noise", "nmf",
    }  # fmt: skip
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(f"release() got unknown option(s) {', '.join(unknown)}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise UsageError(f"seed must be a non-negative integer, got {seed!r}")
    work = Path(tempfile.mkdtemp(prefix="privtab-topdown-")) if out is None else None
    chosen: dict[str, Any] = {"report": False, **options}
    if work is not None and "run_record" not in options:
        chosen["run_record"] = work / "CONFIDENTIAL-run-record.json"
    opts = TopDownOptions(
        runs=tuple(runs),
        source=None if seed is None else SeededSource(seed),
        allow_insecure=seed is not None or not noise,
        noise=noise,
        nmf=nmf,
        **chosen,
    )
    target = work / "release" if work is not None else Path(out or "")
    try:
        bar = RichProgress("TopDown") if progress else contextlib.nullcontext()
        with bar as say, warnings.catch_warnings():
            warnings.simplefilter("ignore", InsecureReleaseWarning)  # said below
            result = run_release(data, target, opts, progress=say)
    except BaseException:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
        raise
    if not result.private:
        warnings.warn(
            "privtab.topdown.release(): seeded or noise-off run — the release is NOT private "
            "(marked so in release.json and NOT_PRIVATE); never publish it",
            InsecureReleaseWarning,
            stacklevel=2,
        )
    for text in result.warnings:
        warnings.warn(text, UserWarning, stacklevel=2)
    return TopDownRelease.open(target, owned=work)
