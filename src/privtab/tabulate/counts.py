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

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache, cached_property
from itertools import pairwise
from typing import Any, TypeVar

import numpy as np
import polars as pl
from numpy.typing import NDArray
from scipy import sparse

from privtab.data import Geography, GeoLevel
from privtab.data.ages import MAX_AGE, STAT_LEVEL_BINS
from privtab.data.geography import UNIT
from privtab.tabulate.aggregate import COMBO, ROW_SHIFT, Cells
from privtab.tabulate.algorithm import SEX_AGES, ExactCounts, sex_age
from privtab.tabulate.domain import NESTED_IN_STATE, Domain, state_chunks

_T = TypeVar("_T")

__all__ = [
    "CellMatrix",
    "Nesting",
    "RegionProducts",
    "StateRows",
    "coarsening",
    "coarser_counts",
    "exact_counts",
    "f_entries",
    "finest_age_bins",
    "merge_rows",
    "product",
    "region_counts",
    "region_incidence",
    "region_rows",
    "row_blocks",
    "row_slice",
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
        """From a cell table (sorted first unless already by unit, sex, age). The matrix's
        entries and columns are the table's own ``N`` and :data:`COMBO` arrays (no copy
        when the table is one chunk): besides the table, building it takes memory for its
        rows only, so the peak of a national run is not the cells twice over."""
        frame = cells.cells
        found = _row_starts(frame)
        if found is None:
            frame = frame.sort(UNIT, "QSEX", "QAGE", COMBO)
            return cls.from_cells(Cells(frame, cells.combos, cells.persons))
        starts, rows = found
        indptr = np.r_[starts, frame.height]
        shape = (rows.size, cells.combos.height)
        combo = frame[COMBO].to_numpy()
        # combination ids are < 2**24: the same bits read as int32, the index type of scipy
        indices = combo.view(np.int32) if combo.dtype == np.uint32 else combo
        matrix = _csr(frame["N"].to_numpy(), indices, indptr, shape)
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

    @cached_property
    def counts(self) -> np.dtype[Any]:
        """The type of the region products' entries: ``uint32`` (half the memory of
        ``int64``) when no sum of cells can exceed it — the products' entries are sums of
        disjoint cells, at most all the persons — else ``int64``."""
        persons = int(self.matrix.data.sum(dtype=np.uint64))
        return np.dtype(np.uint32 if persons < np.iinfo(np.uint32).max else np.int64)

    def rows_of_units(self, first: int, last: int) -> tuple[int, int]:
        """The rows ``[a, b)`` of the units ``first ≤ unit ≤ last``."""
        a, b = np.searchsorted(self.unit, [first, last + 1])
        return int(a), int(b)

    def cells_in(self, rows: tuple[int, int]) -> int:
        """The cells (non-zero entries) of the rows ``[a, b)``."""
        return int(self.matrix.indptr[rows[1]] - self.matrix.indptr[rows[0]])

    def rows(self, rows: tuple[int, int]) -> sparse.csr_array:
        """The rows ``[a, b)`` as a matrix sharing this one's arrays (no copy)."""
        return row_slice(self.matrix, *rows)


def _row_starts(
    frame: pl.DataFrame, block: int = 1 << 22
) -> tuple[NDArray[np.int64], NDArray[np.int64]] | None:
    """The first cell of every matrix row — a run of cells with the same unit, sex and age —
    and the row's key ``unit · 256 + sex × age``; ``None`` when the cells are not sorted
    by that key. Computed ``block`` cells at a time (the keys of all cells at once would
    take 8 bytes per cell)."""
    starts: list[NDArray[np.int64]] = []
    rows: list[NDArray[np.int64]] = []
    last = -1
    for lo in range(0, frame.height, block):
        part = frame.slice(lo, block)
        key = (part[UNIT].cast(pl.Int64) * SEX_AGES).to_numpy() + sex_age(
            part["QSEX"].to_numpy(), part["QAGE"].to_numpy()
        )
        if key[0] < last or bool(np.any(key[1:] < key[:-1])):
            return None
        new = np.flatnonzero(np.r_[key[0] != last, key[1:] != key[:-1]])
        starts.append(new + lo)
        rows.append(key[new])
        last = int(key[-1])
    if not starts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(starts), np.concatenate(rows)


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


def merge_rows(labels: NDArray[np.int64], n_rows: int, dtype: np.dtype[Any]) -> sparse.csr_array:
    """A 0/1 matrix of ``n_rows`` rows × ``labels.size`` columns with a 1 at
    ``(labels[j], j)`` for every ``labels[j] ≥ 0``: multiplying a matrix by it adds up the
    rows that share a label (and drops the rows labelled −1). ``dtype``: of the entries (the
    other factor's, so that the product does not convert it)."""
    inside = labels >= 0
    indptr = np.r_[0, np.cumsum(inside)]
    data = np.ones(int(indptr[-1]), dtype=dtype)
    csc = sparse.csc_array((data, labels[inside], indptr), shape=(n_rows, labels.size))
    return sparse.csr_array(csc)


@cache
def finest_age_bins() -> NDArray[np.int64]:
    """Sex × age index → sex × the first age of its bin in the common refinement of the
    statistic levels' age bins (:data:`privtab.data.ages.STAT_LEVEL_BINS`: Age4's and
    Age9's cut points are among Age23's). Every table's (sex, age bin) cell is a union of
    these bins, so counting persons per (region, sex, finest bin) instead of per (region,
    sex, age) gives the same cells with fewer entries (fewer ages per combination)."""
    cuts = sorted({c for b in STAT_LEVEL_BINS.values() if b is not None for c in b.cuts})
    ages = np.arange(SEX_AGES // 2)
    starts = np.r_[0, cuts][np.searchsorted(cuts, np.minimum(ages, MAX_AGE), side="right")]
    starts = np.where(ages <= MAX_AGE, starts, ages)  # indices above every age stay apart
    out: NDArray[np.int64] = np.concatenate([starts, starts + SEX_AGES // 2]).astype(np.int64)
    return out


def region_incidence(
    cm: CellMatrix,
    rows: tuple[int, int],
    unit_region: NDArray[np.int64],
    dom: Domain,
    slot_map: NDArray[np.int64] | None = None,
) -> sparse.csr_array:
    """``S``: (region of ``dom``, sex, finest age bin) × the rows ``[a, b)`` of ``cm``; a 1
    where the row's unit lies in the region and its age in the bin (``unit_region``:
    :func:`unit_regions` of the level; regions outside the slice ``dom`` have no row; the
    bins are :func:`finest_age_bins`, rows indexed by the bin's first age). Its entries
    have the type of :attr:`CellMatrix.counts`. ``slot_map``: the row within a region of
    each slot (default :func:`finest_age_bins`; records other than persons pass their own,
    e.g. the identity)."""
    a, b = rows
    units = cm.unit[a:b]
    region = np.full(units.size, -1, dtype=np.int64)
    known = units < unit_region.size
    region[known] = unit_region[units[known]] - dom.first_region
    inside = (region >= 0) & (region < len(dom.regions))
    slots = finest_age_bins() if slot_map is None else slot_map
    label = np.where(inside, region * SEX_AGES + slots[cm.sex_age[a:b]], -1)
    return merge_rows(label, len(dom.regions) * SEX_AGES, cm.counts)


def region_counts(
    cm: CellMatrix,
    rows: tuple[int, int],
    unit_region: NDArray[np.int64],
    dom: Domain,
    workers: int = 1,
    slot_map: NDArray[np.int64] | None = None,
) -> sparse.csr_array:
    """``M = S X``: persons per (region of ``dom``, sex, age) × code combination, from the
    rows ``[a, b)`` of ``cm`` (:func:`region_incidence`, with its ``slot_map``). The same
    for every iteration level of a geography (:class:`RegionProducts` keeps it).
    ``workers``: threads (:func:`product`)."""
    x = cm.rows(rows)
    if x.dtype != cm.counts:
        x = x.astype(cm.counts)
    return product(region_incidence(cm, rows, unit_region, dom, slot_map), x, workers)


def coarsening(geography: Geography, fine: GeoLevel, coarse: GeoLevel) -> NDArray[np.int64] | None:
    """The ``coarse`` region (index in its domain, −1: none) of every ``fine`` region, when
    every ``coarse`` region is a union of whole ``fine`` regions — each unit's ``coarse``
    region is a function of its ``fine`` one, and a unit outside ``fine`` is outside
    ``coarse`` (TRACT → COUNTY → STATE → USA) — else ``None`` (PLACE → STATE: a state's
    units outside every place). From the public geography only."""
    units = geography.units.select(
        pl.col(fine.value).to_physical().fill_null(-1).cast(pl.Int64).alias("f"),
        pl.col(coarse.value).to_physical().fill_null(-1).cast(pl.Int64).alias("c"),
    )
    f, c = units["f"].to_numpy(), units["c"].to_numpy()
    if np.any(c[f < 0] >= 0):
        return None
    out = np.full(len(geography.domain(fine)), -1, dtype=np.int64)
    out[f[f >= 0]] = c[f >= 0]
    return out if np.array_equal(out[f[f >= 0]], c[f >= 0]) else None


def coarser_counts(
    finer: sparse.csr_array, to_coarse: NDArray[np.int64], n_coarse: int, workers: int = 1
) -> sparse.csr_array:
    """``M`` of a coarse level from ``M`` of a finer one whose regions it is a union of
    (:func:`coarsening`): the rows (fine region, sex, age) added up into (coarse region,
    sex, age) — the same matrix as :func:`region_counts` of the coarse level, from a smaller
    factor than the cells."""
    fine_rows = np.arange(to_coarse.size * SEX_AGES, dtype=np.int64)
    coarse = to_coarse[fine_rows // SEX_AGES]
    label = np.where(coarse >= 0, coarse * SEX_AGES + fine_rows % SEX_AGES, -1)
    return product(merge_rows(label, n_coarse * SEX_AGES, finer.dtype), finer, workers)


def region_rows(whole: sparse.csr_array, dom: Domain) -> sparse.csr_array:
    """The rows of a level's whole ``M`` that belong to the regions of ``dom`` (a slice of
    the level's domain: consecutive regions), sharing the product's arrays."""
    a = dom.first_region * SEX_AGES
    return row_slice(whole, a, a + len(dom.regions) * SEX_AGES)


def row_slice(m: sparse.csr_array, a: int, b: int) -> sparse.csr_array:
    """The rows ``[a, b)`` of ``m``, sharing its arrays (no copy)."""
    p0, p1 = int(m.indptr[a]), int(m.indptr[b])
    return _csr(m.data[p0:p1], m.indices[p0:p1], m.indptr[a : b + 1] - p0, (b - a, m.shape[1]))


def row_blocks(a: sparse.csr_array, b: sparse.csr_array, parts: int) -> list[tuple[int, int]]:
    """At most ``parts`` consecutive row ranges of ``a`` whose shares of the work of
    ``a @ b`` (for each entry of ``a``, the entries of its row of ``b``) are about equal."""
    if parts <= 1 or a.shape[0] < 2:
        return [(0, a.shape[0])]
    work = np.r_[0, np.cumsum(np.diff(b.indptr)[a.indices], dtype=np.int64)][a.indptr]
    cuts = np.searchsorted(work, work[-1] * np.arange(1, parts) / parts)
    bounds = np.unique(np.r_[0, cuts, a.shape[0]]).tolist()
    return list(pairwise(bounds))


def in_threads(fn: Callable[[tuple[int, int]], _T], blocks: list[tuple[int, int]]) -> list[_T]:
    """``fn`` of every block, in order; in one thread per block when there are several
    (the sparse products and numpy's array work release the GIL)."""
    if len(blocks) == 1:
        return [fn(blocks[0])]
    with ThreadPoolExecutor(len(blocks), thread_name_prefix="privtab-counts") as pool:
        return list(pool.map(fn, blocks))


def product(a: sparse.csr_array, b: sparse.csr_array, workers: int = 1) -> sparse.csr_array:
    """``a @ b``, the rows of ``a`` in ``workers`` blocks of about equal work computed at
    once (:func:`row_blocks`) and stacked: the same matrix, row by row, as one product."""
    parts = in_threads(lambda r: row_slice(a, *r) @ b, row_blocks(a, b, workers))
    out: sparse.csr_array = parts[0] if len(parts) == 1 else sparse.vstack(parts, format="csr")
    return out


def f_entries(
    by_region: sparse.csr_array, iterations: sparse.csr_array, n_it: int, workers: int = 1
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """The non-zero entries of ``F = (S X) B`` as (group ``region · n_it + iteration``,
    row within the region, count), in ``workers`` threads (blocks of rows of ``S X``)."""

    def entries(block: tuple[int, int]) -> tuple[NDArray[np.int64], ...]:
        f = sparse.coo_array(row_slice(by_region, *block) @ iterations)
        row = f.row.astype(np.int64) + block[0]
        return (row // SEX_AGES) * n_it + f.col, row % SEX_AGES, f.data.astype(np.int64)

    parts = in_threads(entries, row_blocks(by_region, iterations, workers))
    group, sa, n = (x[0] if len(x) == 1 else np.concatenate(x) for x in zip(*parts, strict=True))
    return group, sa, n


def exact_counts(
    by_region: sparse.csr_array, iterations: sparse.csr_array, dom: Domain, workers: int = 1
) -> ExactCounts:
    """Exact persons per (group, sex, age) of the groups of ``dom`` (``G`` indexes ``dom``
    region-major from 0) from ``by_region`` — ``M = S X`` of exactly the regions of
    ``dom`` (:func:`region_counts`, :func:`region_rows`, or the sum of such products over
    disjoint sets of cells) — and the level's iteration
    incidence ``iterations`` (combinations × ``dom.codes``): ``F = (S X) B`` (module
    docstring, :func:`f_entries`), in ``workers`` threads (blocks of rows of ``S X``)."""
    group, sa, n = f_entries(by_region, iterations, len(dom.codes), workers)
    return ExactCounts.from_entries(group, sa, n, dom.size)


_ORDER = {g: i for i, g in enumerate(GeoLevel)}


class Nesting:
    """Which geography levels are unions of which (from the public GRF-C only,
    :func:`coarsening`): TRACT → COUNTY → STATE → USA, PR-TRACT → PR-COUNTY → PR-STATE."""

    def __init__(self, geography: Geography) -> None:
        self.geography = geography
        self.levels = tuple(g for g in GeoLevel if geography.domain(g))
        self._maps: dict[tuple[GeoLevel, GeoLevel], NDArray[np.int64] | None] = {}

    def map(self, fine: GeoLevel, coarse: GeoLevel) -> NDArray[np.int64] | None:
        """:func:`coarsening` of ``fine`` into ``coarse`` (computed once)."""
        if (fine, coarse) not in self._maps:
            self._maps[(fine, coarse)] = coarsening(self.geography, fine, coarse)
        return self._maps[(fine, coarse)]

    def nested(self, fine: GeoLevel, coarse: GeoLevel) -> bool:
        """``coarse``'s regions are unions of ``fine``'s and ``fine`` is the finer level (of
        two levels with the same regions, the later :class:`GeoLevel`)."""
        if fine is coarse or not {fine, coarse} <= set(self.levels):
            return False
        if self.map(fine, coarse) is None:
            return False
        return self.map(coarse, fine) is None or _ORDER[fine] > _ORDER[coarse]

    def regions(self, geo: GeoLevel) -> int:
        return len(self.geography.domain(geo))

    def whole(self, geo: GeoLevel) -> Domain:
        """Every region of ``geo`` (no iterations): the rows of its products."""
        return Domain(geo, self.geography.domain(geo), (), np.zeros(0, dtype=np.bool_))

    def nest(self, geo: GeoLevel) -> tuple[GeoLevel, ...]:
        """The levels whose products can be derived together with ``geo``'s, finest first:
        the finest level ``geo`` is nested in (or ``geo``), then every level nested in that
        one, coarser and coarser (each derivable from an earlier one)."""
        finer = [g for g in self.levels if self.nested(g, geo)]
        root = min(finer, key=lambda g: (-self.regions(g), -_ORDER[g])) if finer else geo
        members = [g for g in self.levels if g is root or self.nested(root, g)]
        return tuple(sorted(members, key=lambda g: (-self.regions(g), -_ORDER[g])))

    def source(self, geo: GeoLevel, before: tuple[GeoLevel, ...]) -> GeoLevel | None:
        """Of the levels ``before``, the coarsest ``geo`` is nested in (``None``: none)."""
        finer = [g for g in before if self.nested(g, geo)]
        return min(finer, key=lambda g: (self.regions(g), _ORDER[g])) if finer else None


class RegionProducts:
    """``M = S X`` of each geography level, computed once per run and shared by its
    iteration levels and chunks (:func:`region_rows`), a coarse level's from a finer one's
    (:func:`coarser_counts`) when its regions are unions of the finer regions.

    The first level of a nest (USA, or COUNTY, …) builds the finest level under it from the
    cells — TRACT from ``X`` — and each coarser one from the next finer one (COUNTY from
    TRACT, STATE from COUNTY, USA from STATE): one pass over the cells for the whole nest,
    and products of fewer and fewer entries after it. :meth:`retain` drops the products a
    level cannot use (neither its own nor finer ones), so a run that goes from coarse to
    fine levels keeps a nest's products only until its levels are done. Every product
    equals :func:`region_counts` of the whole level: the exact counts do not depend on how
    they were obtained. Which levels nest is read from the public geography only
    (:func:`coarsening`).
    """

    def __init__(
        self,
        cm: CellMatrix,
        geography: Geography,
        workers: int = 1,
        slot_map: NDArray[np.int64] | None = None,
    ) -> None:
        self.cm = cm
        self.geography = geography
        self.workers = workers
        self.slot_map = slot_map
        """The row within a region of each slot (:func:`region_incidence`)."""
        self.nesting = Nesting(geography)
        self.built: list[tuple[GeoLevel, GeoLevel | None]] = []
        """Every product built: (level, the level it was derived from; ``None``: the cells)."""
        self._products: dict[GeoLevel, sparse.csr_array] = {}

    def retain(self, geo: GeoLevel) -> None:
        """Drop every product but ``geo``'s and those of the levels nested in it."""
        for g in [g for g in self._products if g is not geo and not self.nesting.nested(g, geo)]:
            del self._products[g]

    def get(self, geo: GeoLevel) -> sparse.csr_array:
        """``M`` of every region of ``geo`` (kept until :meth:`retain` drops it)."""
        if geo in self._products:
            return self._products[geo]
        source = self._source(geo)
        if source is None:
            rows = (0, self.cm.unit.size)
            region = unit_regions(self.geography, geo)
            whole = self.nesting.whole(geo)
            made = region_counts(self.cm, rows, region, whole, self.workers, self.slot_map)
        else:
            to_coarse = self.nesting.map(source, geo)
            assert to_coarse is not None
            n_coarse = len(self.geography.domain(geo))
            made = coarser_counts(self.get(source), to_coarse, n_coarse, self.workers)
        self._products[geo] = made
        self.built.append((geo, source))
        return made

    def _source(self, geo: GeoLevel) -> GeoLevel | None:
        """The product ``geo``'s is derived from: the smallest kept product of a nested
        level, else the next finer level (built first), else none (from the cells)."""
        kept = [g for g in self._products if self.nesting.nested(g, geo)]
        if kept:
            return min(kept, key=lambda g: int(self._products[g].nnz))
        return self.nesting.source(geo, self.nesting.levels)

    def clear(self) -> None:
        self._products.clear()
