"""Validate a data folder: whatever inputs it holds, or the ones asked for, together.

A folder written by ``privtab synth`` holds three sets of inputs for the same persons:

- ``persons``: ``person-records`` + ``GRF-C`` (+ the parameters: ``config.json`` and the
  reference files) — :func:`privtab.data.load_inputs`;
- ``population``: ``cef-units`` + ``cef-persons`` (+ ``GRF-C``) and every cross-file rule
  of :mod:`privtab.data.cef` (with ``household-records`` and ``person-records`` when
  present);
- ``households``: ``household-records`` (+ ``GRF-C``, the reference files): every row
  validated by its one reader (:func:`privtab.data.households.households_frame`, the
  production rules), then the cross-file checks.

:func:`validate_folder` collects every problem of every set and raises one
:class:`~privtab.data.errors.InputValidationError`; nothing is written.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from privtab.data._scan import find_input
from privtab.data.cef import CEF_PERSONS_STEM, CEF_UNITS_STEM, HOUSEHOLDS_STEM, check_population
from privtab.data.errors import InputValidationError, ProblemLog
from privtab.data.geography import GRFC_STEM, Geography, load_geography
from privtab.data.iterations import ReferenceData, load_reference

INPUT_SETS = ("persons", "population", "households")
_STEMS = {
    "persons": ("person-records",),
    "population": (CEF_UNITS_STEM, CEF_PERSONS_STEM),
    "households": (HOUSEHOLDS_STEM,),
}


def present_inputs(data_dir: str | Path) -> list[str]:
    """The input sets a folder holds (any of their files present)."""
    data = Path(data_dir)
    return [
        name
        for name, stems in _STEMS.items()
        if any((data / f"{s}{e}").exists() for s in stems for e in (".txt", ".parquet"))
    ]


def validate_folder(
    data_dir: str | Path,
    *,
    inputs: Sequence[str] | None = None,
    config: str | Path | None = None,
    batch_rows: int = 1 << 18,
    progress: Callable[[int, float], None] | None = None,
    allow_empty: bool = False,
) -> dict[str, Any]:
    """Validate the ``inputs`` sets of a folder (default: those it holds, or ``persons``);
    return a summary
    (``inputs``; ``persons``: SafeTab-P's summary; ``population``; ``households``) or raise
    one :class:`InputValidationError` with every problem."""
    from privtab.data.inputs import load_inputs, resolve_config_path

    data = Path(data_dir)
    # a folder with none of them is checked as SafeTab-P's (its message names the files)
    wanted = list(inputs) if inputs else (present_inputs(data) or ["persons"])
    unknown = [w for w in wanted if w not in INPUT_SETS]
    if unknown:
        raise ValueError(f"unknown input set(s) {unknown}: use {', '.join(INPUT_SETS)}")
    log = ProblemLog()
    summary: dict[str, Any] = {"data": str(data), "inputs": wanted}
    geo: Geography | None = None
    ref: ReferenceData | None = None
    started = time.monotonic()
    if "persons" in wanted:
        try:
            si = load_inputs(config, data, batch_rows=batch_rows, progress=progress,
                             allow_empty=allow_empty)  # fmt: skip
            geo, ref = si.geography, si.reference
            summary["persons"] = si.summary()
        except InputValidationError as err:
            _absorb(log, err)
    if geo is None and wanted != ["persons"]:
        grfc = find_input(data, GRFC_STEM, log)
        geo = None if grfc is None else load_geography(grfc, log, batch_rows=1 << 20)
    if ref is None and ("population" in wanted or "households" in wanted):
        ref = load_reference(resolve_config_path(config).parent, log)
    hh: pl.DataFrame | None = None
    if "households" in wanted:
        from privtab.data.households import households_frame

        path = find_input(data, HOUSEHOLDS_STEM, log)
        hh = None if path is None else households_frame(path, log, reference=ref, geography=geo)
        if hh is not None:
            summary["households"] = {"records": hh.height}
    if "population" in wanted:

        def tick(n: int) -> None:
            if progress is not None:
                progress(n, time.monotonic() - started)

        pop = check_population(data, log, geography=geo, reference=ref, batch_rows=batch_rows,
                               households=hh, progress=tick)  # fmt: skip
        if pop is not None:
            summary["population"] = pop.to_dict()
    log.raise_if_any()
    return summary


def _absorb(log: ProblemLog, err: InputValidationError) -> None:
    for key, n in err.counts.items():
        examples = [p for p in err.problems if (p.file, p.kind) == key]
        if examples:
            log.add_many(n, examples)


__all__ = ["INPUT_SETS", "present_inputs", "validate_folder"]
