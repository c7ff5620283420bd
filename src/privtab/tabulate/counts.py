"""Exact counts of a level's groups by sparse algebra: products of incidence matrices.

The aggregated cells (persons per geo unit × code combination × sex × age,
:mod:`privtab.tabulate.aggregate`) become a level's exact counts through three incidence
matrices (SafeTab seed §2; DESIGN.md §3):

* the **cell matrix** ``X`` (:class:`CellMatrix`, built once per run): rows are the
  non-empty (geo unit, sex, age) pairs, columns the code combinations, entries persons —
  the cell table read as a CSR matrix (the aggregation emits the cells in its row order:
  nothing is sorted);
* the **region incidence** ``S`` (:func:`region_incidence`, one per geography and chunk):
  (region, sex, age) × rows of ``X``, a 1 where the row's unit lies in the region — so
  ``M = S X`` holds persons per (region, sex, age) × combination;
* the **iteration incidence** ``B`` (:func:`privtab.data.iteration_matrix`, built once per
  iteration level and granularity from the reference files): combination × iteration.

``F = (S X) B`` holds persons per ((region, sex, age), iteration): its non-zero entries are
the exact (group, sex, age) counts of the level (:func:`exact_counts`). Two sparse
products, whose work grows with the cells times the iterations per combination; no
(cell, iteration) pair is materialised, nothing is hashed or sorted. The last incidence,
sex × age → the age bins of a statistic level, is applied by
:meth:`privtab.tabulate.algorithm.ExactCounts.cells`. Exact counts have no privacy cost by
themselves: only noisy outputs derived from them are published.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from numpy.typing import NDArray
from scipy import sparse

from privtab.data import Geography, GeoLevel
from privtab.data.geography import UNIT
from privtab.tabulate.aggregate import COMBO, Cells
from privtab.tabulate.algorithm import SEX_AGES, ExactCounts, sex_age
from privtab.tabulate.domain import Domain

__all__ = ["CellMatrix", "exact_counts", "region_counts", "region_incidence", "unit_regions"]


def _csr(
    data: NDArray[np.generic],
    indices: NDArray[np.integer],
    indptr: NDArray[np.integer],
    shape: tuple[int, int],
) -> sparse.csr_array:
    """A CSR matrix over these arrays, without copying them when their index type fits."""
    wide = max(int(indptr[-1]) if indptr.size else 0, *shape) >= np.iinfo(np.int32).max
    idx = np.int64 if wide else np.int32
    return sparse.csr_array(
        (data, indices.astype(idx, copy=False), indptr.astype(idx, copy=False)),
        shape=shape,
        copy=False,
    )


@dataclass(frozen=True)
class CellMatrix:
    """The cell table as a sparse matrix: (geo unit, sex, age) rows × code combinations.

    ``matrix[k, c]`` is the number of persons of combination ``c`` with the unit and sex ×
    age of row ``k``; rows are sorted by unit (then sex × age), one per non-empty pair.
    Computed from confidential data; never published.
    """

    matrix: sparse.csr_array
    unit: NDArray[np.int64]
    """Geo unit of every row (non-decreasing)."""
    sex_age: NDArray[np.int64]
    """Sex × age index of every row (:func:`privtab.tabulate.algorithm.sex_age`)."""

    @classmethod
    def from_cells(cls, cells: Cells) -> CellMatrix:
        """From a cell table (sorted first unless already by unit, sex, age)."""
        frame = cells.cells
        key = (frame[UNIT].cast(pl.Int64) * SEX_AGES).to_numpy() + sex_age(
            frame["QSEX"].to_numpy(), frame["QAGE"].to_numpy()
        )
        if key.size and bool(np.any(key[1:] < key[:-1])):
            frame = frame.sort(UNIT, "QSEX", "QAGE", COMBO)
            return cls.from_cells(Cells(frame, cells.combos, cells.persons))
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else key
        rows = key[starts]
        indptr = np.r_[starts, key.size]
        data = frame["N"].to_numpy()
        matrix = _csr(data, frame[COMBO].to_numpy(), indptr, (rows.size, cells.combos.height))
        return cls(matrix, rows // SEX_AGES, rows % SEX_AGES)

    @property
    def cells(self) -> int:
        return int(self.matrix.nnz)

    def rows_of_units(self, first: int, last: int) -> tuple[int, int]:
        """The rows ``[a, b)`` of the units ``first ≤ unit ≤ last``."""
        a, b = np.searchsorted(self.unit, [first, last + 1])
        return int(a), int(b)

    def cells_in(self, rows: tuple[int, int]) -> int:
        """The cells (non-zero entries) of the rows ``[a, b)``."""
        return int(self.matrix.indptr[rows[1]] - self.matrix.indptr[rows[0]])

    def rows(self, rows: tuple[int, int]) -> sparse.csr_array:
        """The rows ``[a, b)`` as a matrix sharing this one's arrays (no copy)."""
        a, b = rows
        m = self.matrix
        p0, p1 = int(m.indptr[a]), int(m.indptr[b])
        return _csr(m.data[p0:p1], m.indices[p0:p1], m.indptr[a : b + 1] - p0, (b - a, m.shape[1]))


def unit_regions(geography: Geography, geo: GeoLevel) -> NDArray[np.int64]:
    """Region index (in the level's sorted domain) of every UNIT, −1 outside the level."""
    units = geography.units.select(UNIT, pl.col(geo.value).to_physical().alias("_R"))
    top = units[UNIT].max()
    out = np.full(int(top) + 1 if isinstance(top, int) else 1, -1, dtype=np.int64)
    reg = units["_R"].fill_null(-1).to_numpy()
    out[units[UNIT].to_numpy()] = reg
    return out


def region_incidence(
    cm: CellMatrix, rows: tuple[int, int], unit_region: NDArray[np.int64], dom: Domain
) -> sparse.csr_array:
    """``S``: (region of ``dom``, sex, age) × the rows ``[a, b)`` of ``cm``; a 1 where the
    row's unit lies in the region (``unit_region``: :func:`unit_regions` of the level;
    regions outside the slice ``dom`` have no row)."""
    a, b = rows
    units = cm.unit[a:b]
    region = np.full(units.size, -1, dtype=np.int64)
    known = units < unit_region.size
    region[known] = unit_region[units[known]] - dom.first_region
    inside = (region >= 0) & (region < len(dom.regions))
    label = region[inside] * SEX_AGES + cm.sex_age[a:b][inside]
    # one entry per column (row of X) inside the slice: a CSC matrix straight from the labels
    indptr = np.r_[0, np.cumsum(inside)]
    shape = (len(dom.regions) * SEX_AGES, b - a)
    csc = sparse.csc_array((np.ones(label.size, dtype=np.int64), label, indptr), shape=shape)
    return sparse.csr_array(csc)


def region_counts(
    cm: CellMatrix, rows: tuple[int, int], unit_region: NDArray[np.int64], dom: Domain
) -> sparse.csr_array:
    """``M = S X``: persons per (region of ``dom``, sex, age) × code combination, from the
    rows ``[a, b)`` of ``cm`` (:func:`region_incidence`). The same for every iteration
    level of a geography: the engine reuses it between consecutive levels."""
    product: sparse.csr_array = region_incidence(cm, rows, unit_region, dom) @ cm.rows(rows)
    return product


def exact_counts(
    cm: CellMatrix,
    rows: tuple[int, int],
    unit_region: NDArray[np.int64],
    iterations: sparse.csr_array,
    dom: Domain,
    by_region: sparse.csr_array | None = None,
) -> ExactCounts:
    """Exact persons per (group, sex, age) of the groups of ``dom`` (``G`` indexes ``dom``
    region-major from 0) from the rows ``[a, b)`` of ``cm`` — every row whose unit is in a
    region of ``dom`` must be among them — and the level's iteration incidence
    ``iterations`` (combinations × ``dom.codes``): ``F = (S X) B`` (module docstring).
    ``by_region``: ``S X`` if already computed (:func:`region_counts` of the same rows,
    regions and geography)."""
    n_it = len(dom.codes)
    if by_region is None:
        by_region = region_counts(cm, rows, unit_region, dom)
    f = sparse.coo_array(by_region @ iterations)
    row = f.row.astype(np.int64)
    group = (row // SEX_AGES) * n_it + f.col
    return ExactCounts.from_entries(group, row % SEX_AGES, f.data.astype(np.int64), dom.size)
