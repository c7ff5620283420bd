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

import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from privtab.data import SafeTabInputs
from privtab.data.geography import UNIT
from privtab.data.membership import RACE_KEYS

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
        """The combination id of every row of ``batch`` (new combinations get new ids)."""
        keys = [*RACE_KEYS, "QSPAN"]
        seen = batch.select(keys).unique().join(self.table, on=keys, how="left")
        fresh = seen.filter(pl.col(COMBO).is_null()).drop(COMBO)
        if fresh.height:
            start = self.table.height
            if start + fresh.height > MAX_COMBOS:
                raise ValueError(f"more than {MAX_COMBOS:,} distinct code combinations")
            fresh = fresh.with_row_index(COMBO, offset=start).with_columns(
                pl.col(COMBO).cast(pl.UInt32)
            )
            fresh = fresh.select(self.table.columns)
            self.table = pl.concat([self.table, fresh])
            seen = pl.concat([seen.filter(pl.col(COMBO).is_not_null()), fresh.select(seen.columns)])
        # the batch joins only its own (few) combinations, not the whole dictionary
        return batch.select(keys).join(seen, on=keys, how="left", maintain_order="left")[COMBO]


_SHIFT_AGE = 1 << _COMBO_BITS
_SHIFT_SEX = 1 << (_COMBO_BITS + _AGE_BITS)
_SHIFT_UNIT = 1 << (_COMBO_BITS + _AGE_BITS + _SEX_BITS)


def _packed_key(combo: pl.Series) -> pl.Expr:
    """UNIT (32 bits) | sex − 1 (1) | age (7) | combination (24) in one UInt64: sorted keys
    are cells sorted by unit, sex, age, then combination — the rows of the cell matrix
    (:class:`privtab.tabulate.counts.CellMatrix`) in order."""
    u64 = pl.UInt64
    return (
        pl.col(UNIT).cast(u64) * _SHIFT_UNIT
        + (pl.col("QSEX").cast(u64) - 1) * _SHIFT_SEX
        + pl.col("QAGE").cast(u64) * _SHIFT_AGE
        + pl.lit(combo).cast(u64)
    ).alias("K")


def _merge(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Exact sum of partial (K, N) tables."""
    if len(frames) == 1:
        return frames[0]
    return pl.concat(frames).group_by("K").agg(pl.col("N").sum().cast(pl.UInt32))


class _Partitions:
    """Partial cell tables kept per state (a contiguous range of UNIT ids, hence of packed
    keys), so every exact merge is bounded by one state's cells, not the nation's.

    Partial tables are merged, state by state, once all pending rows outnumber the merged
    ones (and at least ``min_pending``): memory stays about twice the cell table, and the
    merging work is amortised linear in the rows read.
    """

    def __init__(self, unit_starts: list[int], min_pending: int = 1 << 23) -> None:
        starts = sorted(set(unit_starts) | {0})
        self.bounds = np.asarray([u * _SHIFT_UNIT for u in starts], dtype=np.uint64)
        self.acc: list[pl.DataFrame | None] = [None] * len(starts)
        self.parts: list[list[pl.DataFrame]] = [[] for _ in starts]
        self.rows = 0
        self.pending = 0
        self.min_pending = min_pending

    def add(self, part: pl.DataFrame) -> None:
        """Add one batch's (K, N) table (any order; split by state here)."""
        part = part.sort("K")
        keys = part["K"].to_numpy()
        cut = [*np.searchsorted(keys, self.bounds, side="left").tolist(), part.height]
        for p in range(len(self.bounds)):
            lo, hi = cut[p], cut[p + 1]
            if hi > lo:
                self.parts[p].append(part.slice(lo, hi - lo))
        self.pending += part.height
        if self.pending > max(self.rows, self.min_pending):
            self.compact()

    def _merged(self, p: int) -> pl.DataFrame | None:
        acc = self.acc[p]
        frames = ([acc] if acc is not None else []) + self.parts[p]
        self.parts[p] = []
        return _merge(frames) if frames else None

    def compact(self) -> None:
        self.rows = 0
        for p in range(len(self.acc)):
            merged = self._merged(p)
            self.acc[p] = merged
            self.rows += merged.height if merged is not None else 0
        self.pending = 0

    def cells(self) -> pl.DataFrame:
        """Every cell, unpacked and sorted by packed key (= by UNIT first); consumes self."""
        out: list[pl.DataFrame] = []
        for p in range(len(self.acc)):
            merged = self._merged(p)
            self.acc[p] = None
            if merged is not None:
                out.append(_unpack(merged.sort("K")))
            del merged
        if not out:
            return _unpack(pl.DataFrame(schema={"K": pl.UInt64, "N": pl.UInt32}))
        return pl.concat(out, rechunk=True)


def _prefetch(batches: Iterator[pl.DataFrame], depth: int = 2) -> Iterator[pl.DataFrame]:
    """Run ``batches`` (reading + validation) in a thread, ``depth`` batches ahead.

    Reading/validating (pyarrow, polars) and aggregating (polars) both release the GIL, so
    on two cores they overlap. Exceptions of the reader are re-raised here; if the consumer
    stops early (error, Ctrl-C), the thread stops at its next batch.
    """
    q: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for b in batches:
                if not put(("batch", b)):
                    return
            put(("done", None))
        except BaseException as exc:
            put(("error", exc))

    thread = threading.Thread(target=produce, name="privtab-reader", daemon=True)
    thread.start()
    try:
        while True:
            kind, item = q.get()
            if kind == "batch":
                yield item
            elif kind == "error":
                raise item
            else:
                return
    finally:
        stop.set()
        thread.join(timeout=5)


def _unpack(acc: pl.DataFrame) -> pl.DataFrame:
    k = pl.col("K")
    return acc.select(
        (k // _SHIFT_UNIT).cast(pl.UInt32).alias(UNIT),
        (k % MAX_COMBOS).cast(pl.UInt32).alias(COMBO),
        ((k // _SHIFT_SEX) % 2 + 1).cast(pl.UInt8).alias("QSEX"),
        ((k // _SHIFT_AGE) % (1 << _AGE_BITS)).cast(pl.UInt8).alias("QAGE"),
        "N",
    )


def aggregate_persons(
    inputs: SafeTabInputs,
    *,
    batch_rows: int = 1 << 20,
    progress: Callable[[int, float], None] | None = None,
    prefetch: bool = True,
    merge_rows: int = 1 << 23,
) -> Cells:
    """Validate and aggregate the person file of ``inputs`` in one streaming pass.

    The file is read in batches of ``batch_rows`` (text: polars' streaming reader; Parquet:
    row group by row group), each batch is validated (:class:`privtab.data.PersonReader`)
    and reduced to its cells, and the partial cell tables are kept per state and merged
    exactly (summed) state by state once they hold more rows than the merged tables — so
    memory is about twice the cell table plus a few batches, whatever the number of persons,
    and no merge is larger than one state's cells. A cell is one UInt64 key (unit,
    combination id, sex, age) and a UInt32 count: 12 bytes, so 10⁸ cells take 1.2 GB.
    With ``prefetch`` the reading and validation run in a second thread, a batch ahead of
    the aggregation (both release the GIL: on two cores they overlap).
    ``merge_rows`` is the least number of pending partial rows that triggers a merge.
    ``progress(rows_read, seconds)`` is called after every batch. Raises
    :class:`privtab.data.InputValidationError` naming every bad row (file, row number,
    column, value); nothing has been written at that point.
    """
    reader = inputs.person_reader(batch_rows=batch_rows)
    combos = _ComboIds()
    units = inputs.geography.units
    starts = units.group_by("TABBLKST").agg(pl.col(UNIT).min())[UNIT].to_list()
    store = _Partitions(starts, min_pending=merge_rows)
    started = time.monotonic()
    batches = _prefetch(reader.batches()) if prefetch else reader.batches()
    for batch in batches:
        key = _packed_key(combos.ids(batch))
        store.add(batch.select(key).group_by("K").agg(pl.len().cast(pl.UInt32).alias("N")))
        if progress is not None:
            progress(reader.rows_read, time.monotonic() - started)
    reader.raise_if_invalid()
    # sorted by the packed key = by unit first: engines slice the cells of a state cheaply
    cells = store.cells()
    return Cells(cells, combos.table, int(cells["N"].sum() or 0))
