"""Exact aggregation of person records into cells — the only pass over the person file.

DESIGN.md §3: aggregate first (persons → distinct (geo unit, race-code combination,
ethnicity, sex, age) cells), expand combinations to iterations afterwards, so the work of
every level grows with distinct combinations, not with persons × iterations.

The person file is read in batches by :class:`privtab.data.PersonReader`, which validates
every row (fast vectorised checks, naming checks only on flagged rows); each batch is
reduced to cells and the partial tables are merged exactly. If any row is invalid, one
:class:`InputValidationError` listing file / row / column / value is raised — before
anything is written. This step computes
exact counts; it has no privacy cost by itself (nothing it returns is published).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from privtab.data import RACE_KEYS, UNIT, SafeTabInputs

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


_AGE_BITS, _SEX_BITS, _COMBO_BITS = 7, 1, 24
MAX_COMBOS = 1 << _COMBO_BITS
"""Distinct (race-code combination, ethnicity) pairs a run can hold (16.7 M)."""


class _ComboIds:
    """A growing dictionary (RACE_KEY1, RACE_KEY2, QSPAN) → combination id (UInt32)."""

    def __init__(self) -> None:
        self.table = pl.DataFrame(
            schema={
                COMBO: pl.UInt32,
                RACE_KEYS[0]: pl.UInt64,
                RACE_KEYS[1]: pl.UInt64,
                "QSPAN": pl.UInt16,
            }
        )

    def ids(self, batch: pl.DataFrame) -> pl.Series:
        keys = [*RACE_KEYS, "QSPAN"]
        fresh = batch.select(keys).unique().join(self.table, on=keys, how="anti")
        if fresh.height:
            start = self.table.height
            if start + fresh.height > MAX_COMBOS:
                raise ValueError(f"more than {MAX_COMBOS:,} distinct code combinations")
            fresh = fresh.with_row_index(COMBO, offset=start).with_columns(
                pl.col(COMBO).cast(pl.UInt32)
            )
            self.table = pl.concat([self.table, fresh.select(self.table.columns)])
        return batch.select(keys).join(self.table, on=keys, how="left", maintain_order="left")[
            COMBO
        ]


_SHIFT_SEX = 1 << _AGE_BITS
_SHIFT_COMBO = 1 << (_AGE_BITS + _SEX_BITS)
_SHIFT_UNIT = 1 << (_AGE_BITS + _SEX_BITS + _COMBO_BITS)


def _packed_key(combo: pl.Series) -> pl.Expr:
    """UNIT (32 bits) | combination (24) | sex − 1 (1) | age (7) in one UInt64."""
    u64 = pl.UInt64
    return (
        pl.col(UNIT).cast(u64) * _SHIFT_UNIT
        + pl.lit(combo).cast(u64) * _SHIFT_COMBO
        + (pl.col("QSEX").cast(u64) - 1) * _SHIFT_SEX
        + pl.col("QAGE").cast(u64)
    ).alias("K")


def _compact(acc: pl.DataFrame | None, parts: list[pl.DataFrame]) -> pl.DataFrame:
    frames = ([acc] if acc is not None else []) + parts
    if len(frames) == 1:
        return frames[0]
    return pl.concat(frames).group_by("K").agg(pl.col("N").sum().cast(pl.UInt32))


def _unpack(acc: pl.DataFrame) -> pl.DataFrame:
    k = pl.col("K")
    return acc.select(
        (k // _SHIFT_UNIT).cast(pl.UInt32).alias(UNIT),
        ((k // _SHIFT_COMBO) % MAX_COMBOS).cast(pl.UInt32).alias(COMBO),
        ((k // _SHIFT_SEX) % 2 + 1).cast(pl.UInt8).alias("QSEX"),
        (k % _SHIFT_SEX).cast(pl.UInt8).alias("QAGE"),
        "N",
    )


def aggregate_persons(
    inputs: SafeTabInputs,
    *,
    batch_rows: int = 1 << 20,
    progress: Callable[[int, float], None] | None = None,
) -> Cells:
    """Validate and aggregate the person file of ``inputs`` in one streaming pass.

    The file is read in batches of ``batch_rows`` (text: polars' streaming reader; Parquet:
    row group by row group), each batch is validated (:class:`privtab.data.PersonReader`)
    and reduced to its cells, and the partial cell tables are merged exactly (summed) once
    they hold more rows than the merged table — so memory is the cell table plus about one
    batch, whatever the number of persons. A cell is one UInt64 key (unit, combination id,
    sex, age) and a UInt32 count: 12 bytes, so 10⁸ cells take 1.2 GB.
    ``progress(rows_read, seconds)`` is called after every batch. Raises
    :class:`privtab.data.InputValidationError` naming every bad row (file, row number,
    column, value); nothing has been written at that point.
    """
    reader = inputs.person_reader(batch_rows=batch_rows)
    combos = _ComboIds()
    acc: pl.DataFrame | None = None
    parts: list[pl.DataFrame] = []
    pending = 0
    started = time.monotonic()
    for batch in reader.batches():
        key = _packed_key(combos.ids(batch))
        part = batch.select(key).group_by("K").agg(pl.len().cast(pl.UInt32).alias("N"))
        parts.append(part)
        pending += part.height
        if pending > max(acc.height if acc is not None else 0, 1 << 23):
            acc, parts, pending = _compact(acc, parts), [], 0
        if progress is not None:
            progress(reader.rows_read, time.monotonic() - started)
    reader.raise_if_invalid()
    if parts:
        acc = _compact(acc, parts)
    if acc is None:
        acc = pl.DataFrame(schema={"K": pl.UInt64, "N": pl.UInt32})
    # sorted by the packed key = by unit first: engines slice the cells of a state cheaply
    cells = _unpack(acc.sort("K"))
    del acc
    return Cells(cells, combos.table, int(cells["N"].sum() or 0))
