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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from numpy.typing import NDArray
from scipy import sparse

from privtab.data import Geography, GeoLevel
from privtab.data.geography import UNIT
from privtab.tabulate.aggregate import COMBO, ROW_SHIFT, Cells
from privtab.tabulate.algorithm import SEX_AGES, ExactCounts, sex_age
from privtab.tabulate.domain import NESTED_IN_STATE, Domain, state_chunks

__all__ = [
    "CellMatrix",
    "StateRows",
    "counts_from_regions",
    "exact_counts",
    "region_counts",
    "region_incidence",
    "state_units",
    "unit_regions",
]


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

    @classmethod
    def from_packed(
        cls, keys: NDArray[np.uint64], n: NDArray[np.uint32], columns: int
    ) -> CellMatrix:
        """From sorted distinct packed cell keys and their persons
        (:func:`privtab.tabulate.aggregate.merge_packed`)."""
        key = (keys >> np.uint64(ROW_SHIFT)).astype(np.int64)
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else key
        rows = key[starts]
        combo = (keys & np.uint64((1 << ROW_SHIFT) - 1)).astype(np.int64)
        matrix = _csr(n, combo, np.r_[starts, key.size], (rows.size, columns))
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


@dataclass(frozen=True)
class StateRows:
    """A cell matrix (the nation's, or the states of one Spark partition) and the geo units
    of each of its states (``state_units``: state → first and last UNIT; a state's units
    are one contiguous range, units being numbered state by state)."""

    matrix: CellMatrix
    state_units: Mapping[str, tuple[int, int]]

    def rows_of(self, states: Sequence[str]) -> tuple[int, int]:
        """The rows of the matrix whose units lie between the first unit of the first of
        ``states`` and the last unit of the last (the states are consecutive)."""
        spans = [self.state_units[s] for s in states if s in self.state_units]
        if not spans:
            return (0, 0)
        return self.matrix.rows_of_units(min(a for a, _ in spans), max(b for _, b in spans))

    def chunks(
        self, dom: Domain, max_groups: int, max_cells: int
    ) -> list[tuple[Domain, tuple[int, int]]]:
        """The chunks of ``dom`` and their rows: runs of whole states of at most
        ``max_groups`` groups and ``max_cells`` cells (unless one state has more,
        :func:`privtab.tabulate.domain.state_chunks`) for a level nested in states; the
        whole domain and every row otherwise."""
        if dom.geo not in NESTED_IN_STATE:
            return [(dom, (0, self.matrix.unit.size))]
        per_state = {s: self.matrix.cells_in(self.rows_of([s])) for s in self.state_units}
        cuts = state_chunks(dom, max_groups, per_state, max_cells)
        return [(dom.slice(lo, hi), self.rows_of(states)) for lo, hi, states in cuts]


def unit_regions(geography: Geography, geo: GeoLevel) -> NDArray[np.int64]:
    """Region index (in the level's sorted domain) of every UNIT, −1 outside the level."""
    units = geography.units.select(UNIT, pl.col(geo.value).to_physical().alias("_R"))
    top = units[UNIT].max()
    out = np.full(int(top) + 1 if isinstance(top, int) else 1, -1, dtype=np.int64)
    reg = units["_R"].fill_null(-1).to_numpy()
    out[units[UNIT].to_numpy()] = reg
    return out


def state_units(geography: Geography) -> dict[str, tuple[int, int]]:
    """The first and last UNIT of every state of the GRF-C (public)."""
    spans = geography.units.group_by("TABBLKST").agg(
        pl.col(UNIT).min().alias("first"), pl.col(UNIT).max().alias("last")
    )
    return {
        str(st): (int(a), int(b))
        for st, a, b in zip(spans["TABBLKST"], spans["first"], spans["last"], strict=True)
    }


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
    if by_region is None:
        by_region = region_counts(cm, rows, unit_region, dom)
    return counts_from_regions(by_region, iterations, dom)


def counts_from_regions(
    by_region: sparse.csr_array, iterations: sparse.csr_array, dom: Domain
) -> ExactCounts:
    """Exact persons per (group, sex, age) of ``dom`` from ``M = S X`` (:func:`region_counts`
    of every row whose unit is in a region of ``dom``, or the sum of such products over
    disjoint sets of rows): ``F = M B``."""
    n_it = len(dom.codes)
    f = sparse.coo_array(by_region @ iterations)
    row = f.row.astype(np.int64)
    group = (row // SEX_AGES) * n_it + f.col
    return ExactCounts.from_entries(group, row % SEX_AGES, f.data.astype(np.int64), dom.size)
