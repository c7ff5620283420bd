"""Exact aggregation of person records into cells — the only pass over the person file.

DESIGN.md §3: aggregate first (persons → distinct (geo unit, race-code combination,
ethnicity, sex, age) cells), expand combinations to iterations afterwards, so the work of
every level grows with distinct combinations, not with persons × iterations.

The person file is read by one streaming polars query (:func:`privtab.data.scan_canonical`)
that also flags invalid rows. If any row is invalid, the naming validation
(:class:`privtab.data.PersonReader`) runs and one :class:`InputValidationError` listing
file / row / column / value is raised — before anything is written. This step computes
exact counts; it has no privacy cost by itself (nothing it returns is published).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from privtab.data import RACE_KEYS, UNIT, ProblemLog, SafeTabInputs, scan_canonical
from privtab.data.persons import validate_persons

__all__ = ["COMBO", "Cells", "aggregate_persons", "cells_from_frame"]

COMBO = "C"
"""Column of the combination id (distinct RACE_KEY1, RACE_KEY2, QSPAN)."""
_CELL_KEYS = (UNIT, *RACE_KEYS, "QSPAN", "QSEX", "QAGE")


@dataclass(frozen=True)
class Cells:
    """Exact person counts per (geo unit, code combination, sex, age) cell.

    ``cells``: ``UNIT`` (UInt32), :data:`COMBO` (UInt32), ``QSEX`` (UInt8), ``QAGE``
    (UInt8), ``N`` (UInt32 persons). ``combos``: :data:`COMBO` → ``RACE_KEY1``,
    ``RACE_KEY2`` (UInt64), ``QSPAN`` (UInt16). ``persons`` is the number of valid rows.
    """

    cells: pl.DataFrame
    combos: pl.DataFrame
    persons: int

    def filter_units(self, units: pl.Series) -> Cells:
        """Only the cells of the given units (e.g. one state's), same combination ids."""
        cells = self.cells.filter(pl.col(UNIT).is_in(units.implode()))
        return Cells(cells, self.combos, int(cells["N"].sum() or 0))


def cells_from_frame(rows: pl.LazyFrame | pl.DataFrame) -> Cells:
    """Aggregate canonical rows (``UNIT``, race keys, ``QSPAN``, ``QSEX``, ``QAGE``)."""
    agg = (
        rows.lazy()
        .group_by(_CELL_KEYS)
        .agg(pl.len().cast(pl.UInt32).alias("N"))
        .collect(engine="streaming")
    )
    return _with_combo_ids(agg)


def _with_combo_ids(agg: pl.DataFrame) -> Cells:
    combos = (
        agg.select(*RACE_KEYS, "QSPAN")
        .unique()
        .sort(*RACE_KEYS, "QSPAN")
        .with_row_index(COMBO)
        .with_columns(pl.col(COMBO).cast(pl.UInt32))
    )
    cells = agg.join(combos, on=[*RACE_KEYS, "QSPAN"], how="inner").select(
        pl.col(UNIT).cast(pl.UInt32),
        COMBO,
        pl.col("QSEX").cast(pl.UInt8),
        pl.col("QAGE").cast(pl.UInt8),
        "N",
    )
    return Cells(cells, combos, int(cells["N"].sum() or 0))


def aggregate_persons(inputs: SafeTabInputs) -> Cells:
    """Validate and aggregate the person file of ``inputs`` in one streaming pass.

    Raises :class:`privtab.data.InputValidationError` naming every bad row (file, row
    number, column, value) if any row is invalid; nothing has been written at that point.
    """
    path = Path(inputs.persons_path)
    lf = scan_canonical(path, inputs.reference, inputs.geography, inputs.config.max_race_codes)
    agg = (
        lf.group_by("_BAD", *_CELL_KEYS)
        .agg(pl.len().cast(pl.UInt32).alias("N"))
        .collect(engine="streaming")
    )
    bad = agg.filter(pl.col("_BAD"))
    if bad.height:
        log = ProblemLog()
        validate_persons(
            path, inputs.reference, inputs.geography, inputs.config.max_race_codes, log
        )
        log.raise_if_any()
        raise RuntimeError(  # pragma: no cover - the fast and naming checks agree (tested)
            f"{int(bad['N'].sum())} rows of {path} were flagged invalid but not explained"
        )
    return _with_combo_ids(agg.drop("_BAD"))
