"""A geographic hierarchy as declared data: levels, id columns, the parent map, the chunk key.

An office declares its geography once — the levels from the root down to the smallest unit
and, for each level, the columns of a block table that it adds to the unit's id — and
builds the hierarchy from a table with one row per smallest unit (a *block*)::

    >>> import polars as pl
    >>> spec = HierarchySpec.declare(
    ...     [("PAIS", ()), ("REGION", ("REGION",)), ("PROVINCIA", ("PROVINCIA",)),
    ...      ("COMUNA", ("COMUNA",))], chunk_level="REGION")
    >>> table = pl.DataFrame({"REGION": ["01", "01", "02"], "PROVINCIA": ["1", "2", "1"],
    ...                       "COMUNA": ["01", "01", "01"]})
    >>> h = spec.build(table)
    >>> h.ids("PROVINCIA")
    ['011', '012', '021']
    >>> h.parent("COMUNA").tolist(), h.size("REGION")
    ([0, 1, 2], 2)

A unit's id is its parent's id followed by the values of its level's columns, so ids nest
(``"011"`` is in ``"01"``); every id column must have one width throughout the table (the
Census geocodes are fixed-width), which makes the concatenation unambiguous. Units are
sorted by id at every level, so the children of a unit are a contiguous range of the next
level (:meth:`Hierarchy.children`) and the blocks under any unit are a contiguous range of
leaves. The root level has no columns: one unit, id ``""``.

Nothing here names a census level: the 2020 US and Puerto Rico spines of TopDown are
presets built on this (:mod:`privtab.topdown.spine`). Problems in the block table (a
missing column, an empty or ragged code, two rows for one block) are reported as one
:class:`~privtab.data.errors.InputValidationError` naming file, row, column and value.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import polars as pl
from numpy.typing import NDArray

from privtab.data.errors import Problem, ProblemLog

__all__ = ["Hierarchy", "HierarchySpec", "LevelSpec"]

IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class LevelSpec:
    """One level of a hierarchy: its name and the id columns it adds to its parent's id."""

    name: str
    columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class HierarchySpec:
    """The declaration of a hierarchy: ``levels`` from the root (no columns) to the leaves,
    and ``chunk_level`` — the level whose units are processed independently once the levels
    above them are done (the unit of streaming; default: the level below the root)."""

    levels: tuple[LevelSpec, ...]
    chunk_level: str = ""

    @classmethod
    def declare(
        cls, levels: Sequence[tuple[str, Sequence[str]]], chunk_level: str = ""
    ) -> HierarchySpec:
        """A spec from ``[(level name, id columns), ...]``, root first."""
        return cls(tuple(LevelSpec(n, tuple(c)) for n, c in levels), chunk_level)

    def __post_init__(self) -> None:
        names = [lv.name for lv in self.levels]
        if len(names) < 2:
            raise ValueError("a hierarchy needs a root level and at least one level below it")
        if any(not n for n in names) or len(set(names)) != len(names):
            raise ValueError(f"level names must be distinct and non-empty, got {names}")
        if self.levels[0].columns:
            raise ValueError(f"the root level {names[0]!r} has one unit: it takes no columns")
        cols = [c for lv in self.levels for c in lv.columns]
        if len(set(cols)) != len(cols):
            raise ValueError(f"an id column may belong to one level only, got {cols}")
        for lv in self.levels[1:]:
            if not lv.columns:
                raise ValueError(f"level {lv.name!r} adds no id column")
        if not self.chunk_level:
            object.__setattr__(self, "chunk_level", names[1])
        elif self.chunk_level not in names:
            raise ValueError(f"chunk level {self.chunk_level!r} is not one of {names}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(lv.name for lv in self.levels)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(c for lv in self.levels for c in lv.columns)

    def build(
        self, blocks: pl.DataFrame, *, source: str = "block table", first_row: int = 2
    ) -> Hierarchy:
        """The hierarchy of ``blocks`` (one row per leaf unit; other columns are ignored).

        ``source`` names the table in error messages and ``first_row`` is the row number of
        its first data row there (2 for a text file with a header line, 1 for Parquet).
        Raises :class:`~privtab.data.errors.InputValidationError` on a missing column, an
        empty or differently wide code, or two rows with the same leaf id.
        """
        log = ProblemLog()
        table = _checked_codes(blocks, self.columns, source, first_row, log)
        log.raise_if_any()
        assert table is not None
        return _build(self, table, source, first_row)


def _checked_codes(
    blocks: pl.DataFrame, columns: Sequence[str], source: str, first_row: int, log: ProblemLog
) -> pl.DataFrame | None:
    missing = [c for c in columns if c not in blocks.columns]
    for c in missing:
        log.add(Problem(source, "missing_column", f"the hierarchy needs column {c!r}", column=c))
    if missing:
        return None
    table = blocks.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"),
        *(pl.col(c).cast(pl.Utf8) for c in columns),
    )
    for c in columns:
        empty = table.filter(pl.col(c).is_null() | (pl.col(c).str.len_bytes() == 0))
        if empty.height:
            log.add_many(
                empty.height,
                (
                    Problem(
                        source, "empty_code", "an id code may not be empty", first_row + r, c, v
                    )
                    for r, v in empty.select("_row", c).head(log.examples).iter_rows()
                ),
            )
            continue
        widths = table.get_column(c).str.len_bytes()
        width = int(widths[0])
        bad = table.filter(widths != width)
        if bad.height:
            msg = f"the codes of {c!r} must all have one width ({width}, as in the first row)"
            log.add_many(
                bad.height,
                (
                    Problem(source, "ragged_code", msg, first_row + r, c, v)
                    for r, v in bad.select("_row", c).head(log.examples).iter_rows()
                ),
            )
    return table


def _build(spec: HierarchySpec, table: pl.DataFrame, source: str, first_row: int) -> Hierarchy:
    acc: list[str] = []
    id_exprs = [pl.lit("").alias("_id0")]
    for k, lv in enumerate(spec.levels[1:], start=1):
        acc.extend(lv.columns)
        id_exprs.append(pl.concat_str([pl.col(c) for c in acc]).alias(f"_id{k}"))
    leaf = f"_id{len(spec.levels) - 1}"
    table = table.with_columns(id_exprs).sort(leaf, "_row")
    dup = table.filter(pl.col(leaf) == pl.col(leaf).shift(1))
    if dup.height:
        log = ProblemLog()
        first = table.filter(pl.col(leaf).is_in(dup.get_column(leaf).implode())).unique(
            leaf, keep="first"
        )
        firsts = dict(first.select(leaf, "_row").iter_rows())
        log.add_many(
            dup.height,
            (
                Problem(
                    source,
                    "duplicate_unit",
                    f"{spec.levels[-1].name} {v!r} already given in row {first_row + firsts[v]}",
                    first_row + r,
                    ",".join(spec.levels[-1].columns),
                    v,
                )
                for r, v in dup.select("_row", leaf).head(log.examples).iter_rows()
            ),
        )
        log.raise_if_any()
    # index of every row's unit at every level: a new unit starts where the id changes
    index_cols = [
        (pl.col(f"_id{k}") != pl.col(f"_id{k}").shift(1)).fill_null(True).cum_sum().sub(1)
        for k in range(len(spec.levels))
    ]
    idx = table.select(*(e.alias(f"_i{k}") for k, e in enumerate(index_cols)))
    ids: list[pl.Series] = []
    parents: list[IntArray] = []
    for k in range(len(spec.levels)):
        starts = table.get_column(f"_id{k}").ne_missing(table.get_column(f"_id{k}").shift(1))
        starts = starts.fill_null(True)
        ids.append(table.get_column(f"_id{k}").filter(starts).alias(spec.levels[k].name))
        if k == 0:
            parents.append(np.full(1, -1, dtype=np.int64))
        else:
            parents.append(idx.get_column(f"_i{k - 1}").filter(starts).to_numpy().astype(np.int64))
    rows = table.get_column("_row").to_numpy().astype(np.int64)
    return Hierarchy(spec, tuple(ids), tuple(parents), rows)


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """A built hierarchy (see the module docstring).

    ``unit_ids[k]`` are the ids of level ``k``'s units in sorted order, ``parents[k]`` the
    index of each unit's parent in level ``k − 1`` (``[-1]`` for the root), and
    ``leaf_rows`` the row of the block table each leaf came from.
    """

    spec: HierarchySpec
    unit_ids: tuple[pl.Series, ...]
    parents: tuple[IntArray, ...]
    leaf_rows: IntArray
    _offsets: dict[int, IntArray] = field(default_factory=dict, repr=False)

    @property
    def levels(self) -> tuple[str, ...]:
        return self.spec.names

    @property
    def chunk_level(self) -> str:
        return self.spec.chunk_level

    def level(self, name: str) -> int:
        """The depth of level ``name`` (root 0); ``KeyError`` naming the levels if unknown."""
        try:
            return self.levels.index(name)
        except ValueError:
            raise KeyError(f"unknown level {name!r}; levels are {list(self.levels)}") from None

    def size(self, level: str | int) -> int:
        """The number of units of a level."""
        return len(self.unit_ids[self._k(level)])

    def ids(self, level: str | int) -> list[str]:
        """The ids of a level's units, in order."""
        return list(self.unit_ids[self._k(level)].to_list())

    def parent(self, level: str | int) -> IntArray:
        """For each unit of ``level``, the index of its parent one level up."""
        return self.parents[self._k(level)]

    def offsets(self, level: str | int) -> IntArray:
        """CSR offsets of the children: unit ``i`` of ``level`` has children
        ``offsets[i] : offsets[i + 1]`` in the next level (``level`` not the leaves)."""
        k = self._k(level)
        if k == len(self.levels) - 1:
            raise ValueError(f"{self.levels[k]} units have no children")
        if k not in self._offsets:
            counts = np.bincount(self.parents[k + 1], minlength=self.size(k))
            out = np.zeros(len(counts) + 1, dtype=np.int64)
            np.cumsum(counts, out=out[1:])
            self._offsets[k] = out
        return self._offsets[k]

    def children(self, level: str | int, unit: int) -> range:
        """The indices (in the next level) of the children of ``unit`` of ``level``."""
        off = self.offsets(level)
        return range(int(off[unit]), int(off[unit + 1]))

    def child_counts(self, level: str | int) -> IntArray:
        """The number of children of every unit of ``level``."""
        return np.diff(self.offsets(level))

    def ancestors(self, level: str | int, of: str | int) -> IntArray:
        """For each unit of level ``of``, the index of its ancestor at ``level`` (at or above)."""
        k, j = self._k(level), self._k(of)
        if k > j:
            raise ValueError(f"{self.levels[k]} is below {self.levels[j]}")
        out = np.arange(self.size(j), dtype=np.int64)
        for m in range(j, k, -1):
            out = self.parents[m][out]
        return out

    def leaf_range(self, level: str | int, unit: int) -> range:
        """The leaves under ``unit`` of ``level`` (a contiguous range)."""
        k = self._k(level)
        lo, hi = unit, unit + 1
        for m in range(k, len(self.levels) - 1):
            off = self.offsets(m)
            lo, hi = int(off[lo]), int(off[hi])
        return range(lo, hi)

    def leaf_starts(self, level: str | int) -> IntArray:
        """For every unit of ``level``, the index of its first leaf."""
        k = self._k(level)
        out = np.arange(self.size(k), dtype=np.int64)
        for m in range(k, len(self.levels) - 1):
            out = self.offsets(m)[out]
        return out

    def aggregate(self, values: NDArray[np.generic], level: str | int) -> NDArray[np.generic]:
        """Sum ``values`` of ``level``'s units (first axis) into their parents' values."""
        k = self._k(level)
        if k == 0:
            raise ValueError("the root has no parent")
        off = self.offsets(k - 1)
        if len(values) != self.size(k):
            raise ValueError(f"{len(values)} values for {self.size(k)} {self.levels[k]} units")
        return np.add.reduceat(values, off[:-1], axis=0)

    def chunks(self) -> Iterator[tuple[int, range]]:
        """``(unit, leaf range)`` for every unit of the chunk level, in order."""
        k = self._k(self.chunk_level)
        for unit in range(self.size(k)):
            yield unit, self.leaf_range(k, unit)

    @cached_property
    def leaf_level(self) -> str:
        return self.levels[-1]

    def _k(self, level: str | int) -> int:
        if isinstance(level, int):
            if not 0 <= level < len(self.levels):
                raise IndexError(f"level {level} out of range 0..{len(self.levels) - 1}")
            return level
        return self.level(level)

    def describe(self) -> dict[str, int]:
        """``{level: number of units}``."""
        return {name: self.size(k) for k, name in enumerate(self.levels)}
