"""TopDown's inputs as histograms: persons and units per block, then per geounit.

The files are those of the synthetic-population folder (CONTRACTS.md C1): ``cef-persons``
(``MAFID|EPNUM|TABBLKST|TABBLKCOU|TABTRACTCE|TABBLK|RELSHIP|QGQTYP|QSEX|QAGE|CENHISP|
CENRACE``) and ``cef-units`` (``MAFID|TABBLKST|TABBLKCOU|TABTRACTCE|TABBLK|RTYPE|QGQTYP|
HH_STATUS|FINAL_POP``), pipe-delimited with ``Null`` for a missing value, or Parquet. The
functions here take polars frames or lazy scans with those columns — the validating readers
of :mod:`privtab.data.cef` plug in front — and aggregate with polars' streaming engine, so
the 3.31 × 10⁸ persons of the nation are never held as rows:

* :func:`block_histograms` — persons: ``BLOCK`` (15 characters: state, county, tract,
  block), ``CELL`` (:func:`privtab.topdown.histogram.cell_index` of hhgq = 0 for household
  persons else ``min(QGQTYP // 100, 7)``, votingage = ``QAGE ≥ 18``, hispanic = ``CENHISP −
  1``, cenrace = ``CENRACE − 1``), ``COUNT`` — the nonzero cells only;
* :func:`block_units` — one row per block with units: ``HU`` (housing units, occupied or
  vacant), ``GQ1`` … ``GQ7`` (group-quarters facilities by major type), ``OCCUPIED``,
  ``VACANT``;
* :func:`units_histograms` — the units run's histogram per block (cell 0 vacant, 1 occupied);
* :class:`SparseHistograms` — those cells as arrays indexed by the spine's leaves, with
  :meth:`SparseHistograms.aggregate` to the geounits of every level and
  :meth:`SparseHistograms.dense` for the children of one parent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import polars as pl
from numpy.typing import NDArray

from privtab.errors import InputError
from privtab.topdown.histogram import SHAPE
from privtab.topdown.spine import Spine

#: entries summed at once by :meth:`SparseHistograms.aggregate` (≈ 100 MB of work arrays)
AGGREGATE_CHUNK = 1 << 22

__all__ = [
    "PERSON_COLUMNS",
    "UNIT_COLUMNS",
    "SparseHistograms",
    "block_histograms",
    "block_units",
    "person_cells",
    "scan_table",
    "state_runs",
    "units_histograms",
]

#: The ``cef-persons`` columns TopDown reads.
PERSON_COLUMNS = ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK", "QGQTYP", "QAGE", "CENHISP",
                  "CENRACE")  # fmt: skip
#: The ``cef-units`` columns TopDown reads.
UNIT_COLUMNS = ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK", "RTYPE", "QGQTYP", "HH_STATUS")

Frame = pl.DataFrame | pl.LazyFrame


def scan_table(path: str | Path, columns: Sequence[str]) -> pl.LazyFrame:
    """A lazy scan of a C1 file (pipe-delimited text with a header, ``Null`` for missing,
    every column as text; or Parquet) keeping ``columns``."""
    p = Path(path)
    if p.suffix.lower() in (".parquet", ".pq"):
        lf = pl.scan_parquet(p)
    else:
        lf = pl.scan_csv(p, separator="|", infer_schema=False, null_values=["Null"])
    return lf.select(*(pl.col(c).cast(pl.Utf8) for c in columns))


def _lazy(frame: Frame) -> pl.LazyFrame:
    return frame.lazy() if isinstance(frame, pl.DataFrame) else frame


def _block() -> pl.Expr:
    return pl.concat_str("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK").alias("BLOCK")


def _major_type() -> pl.Expr:
    """hhgq of a GQ type code: min(first digit, 7); 0 for a missing code (households)."""
    code = pl.col("QGQTYP").cast(pl.Int32, strict=False)
    return pl.when(code.is_null()).then(0).otherwise(pl.min_horizontal(code // 100, 7))


def person_cells(persons: Frame) -> pl.LazyFrame:
    """``BLOCK`` and ``CELL`` of every person (module docstring; CONTRACTS.md C1); ``CELL``
    is null where a code is outside its range (QGQTYP 101–999 or missing, QAGE 0–115,
    CENHISP 1–2, CENRACE 01–63)."""
    n_va, n_hisp, n_race = SHAPE[1], SHAPE[2], SHAPE[3]
    hhgq = _major_type()
    va = (pl.col("QAGE").cast(pl.Int32, strict=False) >= 18).cast(pl.Int32)
    hisp = pl.col("CENHISP").cast(pl.Int32, strict=False) - 1
    race = pl.col("CENRACE").cast(pl.Int32, strict=False) - 1
    code = pl.col("QGQTYP").cast(pl.Int32, strict=False)
    ok = (
        (pl.col("QGQTYP").is_null() | code.is_between(101, 999))
        & pl.col("QAGE").cast(pl.Int32, strict=False).is_between(0, 115)
        & hisp.is_between(0, n_hisp - 1)
        & race.is_between(0, n_race - 1)
    ).fill_null(False)
    cell = ((hhgq * n_va + va) * n_hisp + hisp) * n_race + race
    valid = pl.when(ok).then(cell).otherwise(None)
    return _lazy(persons).select(_block(), valid.cast(pl.Int32).alias("CELL"))


def _collect(lf: pl.LazyFrame) -> pl.DataFrame:
    return lf.collect(engine="streaming")


_CELLS = int(np.prod(SHAPE))
_BASE = _CELLS + 1  # a packed key's cell digit: 0 … _CELLS − 1, or _CELLS for a null cell
_MAX_BLOCK_KEY = (2**64 - 1 - _CELLS) // _BASE


def _count_cells(cells: pl.LazyFrame) -> pl.DataFrame:
    """``BLOCK``, ``CELL``, ``COUNT`` of the persons ``cells`` (:func:`person_cells`), sorted.

    The block ids are digit strings whose width is the hierarchy's, so the streaming group-by
    keys on one UInt64 a person instead of a string: the number of ``"1" + BLOCK`` (injective
    for any width, the leading 1 keeping the zeros) times ``_BASE`` plus the cell, which fits
    for ids of up to 15 digits; the strings are rebuilt once per group. California's 4 × 10⁷
    persons: 1.70 → 1.14 GiB, 9.3 → 7.1 CPU s (docs/topdown.md §14). An id that is not such
    a digit string (longer, not digits, null) makes a null key, and then the aggregation is
    redone on the strings, so the result never depends on the ids' form."""
    count = pl.len().cast(pl.Int64).alias("COUNT")
    block = pl.concat_str(pl.lit("1"), "BLOCK").cast(pl.UInt64, strict=False)
    cell = pl.col("CELL").fill_null(_CELLS).cast(pl.UInt64)
    key = pl.when(block <= _MAX_BLOCK_KEY).then(block * _BASE + cell).alias("KEY")
    by_key = _collect(cells.select(key).group_by("KEY").agg(count))
    if by_key.get_column("KEY").null_count():
        return _collect(cells.group_by("BLOCK", "CELL").agg(count)).sort("BLOCK", "CELL")
    blocks = by_key.select((pl.col("KEY") // _BASE).cast(pl.Utf8).str.len_bytes().n_unique())
    one_width = blocks.item() <= 1  # then the numbers sort as the strings
    if one_width:
        by_key = by_key.sort("KEY")
    code = pl.col("KEY") % _BASE
    out = by_key.select(
        (pl.col("KEY") // _BASE).cast(pl.Utf8).str.slice(1).alias("BLOCK"),
        pl.when(code < _CELLS).then(code).cast(pl.Int32).alias("CELL"),
        "COUNT",
    )
    return out if one_width else out.sort("BLOCK", "CELL")


def state_runs(path: str | Path, batch: int = 1 << 20) -> list[tuple[str | None, int, int]]:
    """The runs of one ``TABBLKST`` of a Parquet file in file order: ``(state, first row,
    end row)``, the column read ``batch`` rows at a time (≈ 0.2 CPU s, 0.1 GiB for 4 × 10⁷
    persons)."""
    column = scan_table(path, ["TABBLKST"])
    rows = column.select(pl.len()).collect().item()
    runs: list[tuple[str | None, int, int]] = []
    for first in range(0, rows, batch):
        rle = column.slice(first, batch).collect().to_series().rle()
        for n, state in zip(rle.struct.field("len"), rle.struct.field("value"), strict=True):
            if runs and runs[-1][0] == state:
                runs[-1] = (state, runs[-1][1], runs[-1][2] + n)
            else:
                start = runs[-1][2] if runs else 0
                runs.append((state, start, start + n))
    return runs


def _by_state(persons: Frame, runs: Sequence[tuple[str | None, int, int]]) -> pl.DataFrame | None:
    """:func:`_count_cells` of each state's rows alone, concatenated in the states' order —
    ``None`` (aggregate in one pass) unless there are several states, each in one run, all
    of one width and none null, so that no block can be in two runs and the parts follow
    one another in the order of the strings; or if a block id came out null."""
    states = [state for state, _, _ in runs]
    if len(runs) < 2 or None in states or len(set(states)) < len(states):
        return None
    if len({len(state) for state in states if state is not None}) != 1:
        return None
    lf = _lazy(persons)
    ordered = sorted(runs, key=lambda run: str(run[0]))  # by state: the strings' order
    parts = [_count_cells(person_cells(lf.slice(a, b - a))) for _, a, b in ordered]
    out = pl.concat(parts, rechunk=False)
    return None if out.get_column("BLOCK").null_count() else out


def block_histograms(
    persons: Frame, runs: Sequence[tuple[str | None, int, int]] = ()
) -> pl.DataFrame:
    """The persons histogram of every block with persons: ``BLOCK``, ``CELL``, ``COUNT``
    (nonzero cells only, sorted), aggregated by polars' streaming engine on a numeric block
    key (:func:`_count_cells`). With ``runs`` (:func:`state_runs` of the file ``persons``
    scans) each state's rows are aggregated alone, so that the peak is the largest state's
    group-by beside the result, not the nation's; the frame is the same. A code outside the
    C1 ranges is refused (the validating reader reports its row)."""
    by_state = _by_state(persons, runs)
    out = by_state if by_state is not None else _count_cells(person_cells(persons))
    bad = out.filter(pl.col("CELL").is_null() | ~pl.col("CELL").is_between(0, _CELLS - 1))
    if bad.height:
        raise InputError(
            "a person's QGQTYP, QAGE, CENHISP or CENRACE is outside its codes "
            "(validate the file with privtab's cef reader for the row)",
            column="QGQTYP|QAGE|CENHISP|CENRACE",
            value=str(bad.get_column("BLOCK")[0]),
            hint="the value shown is the block of the first such person",
        )
    return out


def block_units(units: Frame) -> pl.DataFrame:
    """Unit counts per block with units: ``BLOCK``, ``HU``, ``GQ1`` … ``GQ7``,
    ``OCCUPIED``, ``VACANT`` (Int64, sorted by block)."""
    rtype = pl.col("RTYPE").cast(pl.Int32)
    status = pl.col("HH_STATUS").cast(pl.Int32)
    gq = _major_type()
    aggs = [(rtype == 2).sum().cast(pl.Int64).alias("HU")]
    aggs += [((rtype == 4) & (gq == t)).sum().cast(pl.Int64).alias(f"GQ{t}") for t in range(1, 8)]
    aggs += [
        ((rtype == 2) & (status == 1)).sum().cast(pl.Int64).alias("OCCUPIED"),
        ((rtype == 2) & (status == 2)).sum().cast(pl.Int64).alias("VACANT"),
    ]
    lf = _lazy(units).with_columns(_block())
    return _collect(lf.group_by("BLOCK").agg(aggs)).sort("BLOCK")


def units_histograms(units: pl.DataFrame) -> pl.DataFrame:
    """The units run's histogram per block from :func:`block_units`: ``BLOCK``, ``CELL``
    (0 vacant, 1 occupied), ``COUNT`` (nonzero only)."""
    long = pl.concat(
        [
            units.select(
                "BLOCK", pl.lit(0, pl.Int32).alias("CELL"), pl.col("VACANT").alias("COUNT")
            ),
            units.select(
                "BLOCK", pl.lit(1, pl.Int32).alias("CELL"), pl.col("OCCUPIED").alias("COUNT")
            ),
        ]
    )
    return long.filter(pl.col("COUNT") > 0).sort("BLOCK", "CELL")


@dataclass(frozen=True, eq=False)
class SparseHistograms:
    """Histograms of ``n_units`` geounits with ``cells`` cells, as their nonzero entries:
    ``unit`` (sorted), ``cell``, ``count`` arrays (int64 counts, exact)."""

    cells: int
    n_units: int
    unit: NDArray[np.int64]
    cell: NDArray[np.int64]
    count: NDArray[np.int64]

    @classmethod
    def from_blocks(
        cls, frame: pl.DataFrame, spine: Spine, cells: int, *, source: str = "persons"
    ) -> SparseHistograms:
        """The leaf histograms of ``spine`` from a ``BLOCK, CELL, COUNT`` frame (of the
        run's records only: a Puerto Rico run reads TABBLKST 72, the US run the others). A
        block with records but not on the spine (not in GRF-C, or — presets — without
        units) is refused naming the block."""
        leaf = spine.blocks.select("BLOCK").with_row_index("_LEAF")
        j = frame.join(leaf, on="BLOCK", how="left")
        lost = j.filter(pl.col("_LEAF").is_null())
        if lost.height:
            raise InputError(
                f"{lost.get_column('BLOCK').n_unique()} block(s) have {source} but are not "
                "on the spine (not in GRF-C, or without any housing unit or facility)",
                file=source,
                column="TABBLKST|TABBLKCOU|TABTRACTCE|TABBLK",
                value=str(lost.get_column("BLOCK")[0]),
            )
        # the block ids are not needed past the join: sorted without them (at the 2020 size
        # ≈ 5 × 10⁷ rows, the string column is most of the frame's bytes)
        j = j.select("_LEAF", "CELL", "COUNT").sort("_LEAF", "CELL")
        return cls(
            cells,
            spine.hierarchy.size(spine.hierarchy.leaf_level),
            j.get_column("_LEAF").to_numpy().astype(np.int64),
            j.get_column("CELL").to_numpy().astype(np.int64),
            j.get_column("COUNT").to_numpy().astype(np.int64),
        )

    @cached_property
    def offsets(self) -> NDArray[np.int64]:
        """Entries of unit ``i`` are ``offsets[i] : offsets[i + 1]``."""
        return np.searchsorted(self.unit, np.arange(self.n_units + 1)).astype(np.int64)

    def dense(self, units: range | NDArray[np.int64]) -> NDArray[np.int64]:
        """The histograms of ``units`` as a dense ``(len(units), cells)`` int64 array."""
        idx = np.asarray(units, dtype=np.int64)
        out = np.zeros((idx.size, self.cells), dtype=np.int64)
        if isinstance(units, range) and units.step == 1:
            lo, hi = self.offsets[units.start], self.offsets[units.stop]
            out[self.unit[lo:hi] - units.start, self.cell[lo:hi]] = self.count[lo:hi]
            return out
        for row, u in enumerate(idx):
            lo, hi = self.offsets[u], self.offsets[u + 1]
            out[row, self.cell[lo:hi]] = self.count[lo:hi]
        return out

    def totals(self) -> NDArray[np.int64]:
        """Every unit's total (exact int64)."""
        cs = np.concatenate(([0], np.cumsum(self.count, dtype=np.int64)))
        return (cs[self.offsets[1:]] - cs[self.offsets[:-1]]).astype(np.int64)

    def aggregate(
        self, parent: NDArray[np.int64], n_parents: int, *, chunk: int = AGGREGATE_CHUNK
    ) -> SparseHistograms:
        """The histograms of the parents: unit ``i``'s entries added into ``parent[i]``
        (exact int64 sums).

        ``parent`` is non-decreasing, as a hierarchy's is (a parent's children are a
        contiguous range), so a parent's entries are a contiguous range too: the parents
        are summed in runs of about ``chunk`` entries, and the memory beyond the result is
        one run's — not copies of the whole level (the nation's blocks: 5.7 × 10⁷ entries,
        whose one-pass group-by held ≈ 3 GiB more than its input)."""
        parent = np.asarray(parent, dtype=np.int64)
        if parent.shape != (self.n_units,):
            raise ValueError(f"{parent.size} parents for {self.n_units} units")
        ordered = not parent.size or (
            parent[0] >= 0 and parent[-1] < n_parents and not np.any(np.diff(parent) < 0)
        )
        if not ordered:
            raise ValueError(f"parents must be non-decreasing indices below {n_parents}")
        if chunk < 1:
            raise ValueError(f"chunk must be positive, not {chunk}")
        first_unit = np.searchsorted(parent, np.arange(n_parents + 1))
        first_entry = self.offsets[first_unit]  # entries of parent p: [first_entry[p], [p+1])
        cuts = np.unique(
            np.searchsorted(first_entry, np.arange(0, first_entry[-1], chunk), side="right") - 1
        )
        bounds = np.append(cuts, n_parents)
        parts: list[tuple[NDArray[np.int64], NDArray[np.int64]]] = []
        for p0, p1 in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            lo, hi = int(first_entry[p0]), int(first_entry[p1])
            if lo == hi:
                continue
            key = parent[self.unit[lo:hi]] * self.cells + self.cell[lo:hi]
            order = np.argsort(key, kind="stable")
            key = key[order]
            starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
            parts.append((key[starts], np.add.reduceat(self.count[lo:hi][order], starts)))
        keys = np.concatenate([k for k, _ in parts]) if parts else np.zeros(0, np.int64)
        sums = np.concatenate([c for _, c in parts]) if parts else np.zeros(0, np.int64)
        return SparseHistograms(
            self.cells,
            n_parents,
            keys // self.cells,
            keys % self.cells,
            sums.astype(np.int64, copy=False),
        )

    def levels(self, spine: Spine) -> list[SparseHistograms]:
        """These leaf histograms aggregated to every level of ``spine``, root first."""
        h = spine.hierarchy
        out = [self]
        for k in range(len(h.levels) - 1, 0, -1):
            out.append(out[-1].aggregate(h.parent(k), h.size(k - 1)))
        return out[::-1]
