"""The Detailed DHC-B tables: T3 (household type) and T4 (tenure), by statistic level.

A population group's statistic level (chosen from its public T1 count) fixes which cells
get noise; every other published cell is a *marginal*, the sum of the noisy cells below it
in the table's tree (production ``preprocessing.py`` and ``postprocessing.py`` of
``DAS_2020_DDHCB_Production_Code``):

T3 — ``T3_DATA_CELL``: 0 total, 1 family, 2 married couple, 3 other family, 4 male
householder no spouse, 5 female householder no spouse, 6 nonfamily, 7 living alone, 8 not
living alone; tree 0 ⊃ {1, 6}, 1 ⊃ {2, 3}, 3 ⊃ {4, 5}, 6 ⊃ {7, 8}.

=====  ==========  ===================  ====================================  ====
level  table       noisy cells          HOUSEHOLD_TYPE 1 2 3 4 5 → cell        rows
=====  ==========  ===================  ====================================  ====
0      ``T03001``  0                    0 0 0 0 0                             1
1      ``T03002``  1, 6                 1 1 1 6 6                             3
2      ``T03003``  2, 3, 7, 8           2 3 3 7 8                             7
3      ``T03004``  2, 4, 5, 7, 8        2 4 5 7 8                             9
=====  ==========  ===================  ====================================  ====

T4 — ``T4_DATA_CELL``: 0 total, 1 owned with a mortgage or loan, 2 owned free and clear,
3 rented or occupied without rent (TEN 3 and 4 merged); tree 0 ⊃ {1, 2, 3}. Level 0:
``T04001`` (cell 0, 1 row); level 1: ``T04002`` (cells 1, 2, 3 noisy; 4 rows).

A household is in exactly one noisy cell of each of its groups' tables — a histogram:
the privacy of a query is that of one count per group (:mod:`privtab.safetab_h.queries`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import NDArray

from privtab.data.households import HOUSEHOLD_TYPES, SLOTS, TENURES
from privtab.publish.census import CensusTable

__all__ = [
    "DESIGNS",
    "T3",
    "T4",
    "TableDesign",
    "census_tables",
    "read_release_tables",
    "wide_schema",
]


@dataclass(frozen=True)
class TableDesign:
    """One SafeTab-H table family (T3 or T4): its cells, tree and statistic levels."""

    name: str
    """``t3`` or ``t4`` (the config's table names)."""
    cell_column: str
    attribute: str
    """The household column the cells split on (``HOUSEHOLD_TYPE`` or ``TEN``)."""
    values: tuple[int, ...]
    parent: Mapping[int, int]
    """Each cell but 0 → the cell it is part of."""
    cell_of: tuple[tuple[int, ...], ...]
    """Per statistic level: the noisy cell of each attribute value (in ``values`` order)."""
    cell_names: Mapping[int, str]

    @property
    def levels(self) -> int:
        return len(self.cell_of)

    def table(self, level: int) -> str:
        """The Census table of a statistic level: ``T03001`` … ``T04002``."""
        return f"T0{self.name[1]}00{level + 1}"

    def noisy(self, level: int) -> tuple[int, ...]:
        """The cells that get noise at ``level``, increasing."""
        return tuple(sorted(set(self.cell_of[level])))

    def ancestors(self, cell: int) -> tuple[int, ...]:
        """``cell`` and every cell it is part of, up to the total."""
        out = [cell]
        while out[-1] in self.parent:
            out.append(self.parent[out[-1]])
        return tuple(out)

    def published(self, level: int) -> tuple[int, ...]:
        """Every published cell at ``level`` (noisy cells and their marginals), increasing."""
        return tuple(sorted({a for c in self.noisy(level) for a in self.ancestors(c)}))

    def below(self, level: int, cell: int) -> tuple[int, ...]:
        """The noisy cells at ``level`` whose sum is published ``cell``."""
        return tuple(c for c in self.noisy(level) if cell in self.ancestors(c))

    @cached_property
    def slot_cells(self) -> tuple[NDArray[np.int64], ...]:
        """Per level: each household slot (0–19) → index of its noisy cell in
        :meth:`noisy` (a slot is ``4 · (HOUSEHOLD_TYPE − 1) + (TEN − 1)``)."""
        slots = np.arange(SLOTS)
        value = slots // len(TENURES) + 1 if self.attribute == "HOUSEHOLD_TYPE" else slots % 4 + 1
        out = []
        for level in range(self.levels):
            index = {c: i for i, c in enumerate(self.noisy(level))}
            cell = dict(zip(self.values, self.cell_of[level], strict=True))
            out.append(np.array([index[cell[int(v)]] for v in value], dtype=np.int64))
        return tuple(out)

    @cached_property
    def sums(self) -> tuple[NDArray[np.int64], ...]:
        """Per level: the 0/1 matrix published cells × noisy cells (marginals as sums)."""
        out = []
        for level in range(self.levels):
            noisy = self.noisy(level)
            rows = [[int(c in self.below(level, p)) for c in noisy] for p in self.published(level)]
            out.append(np.array(rows, dtype=np.int64))
        return tuple(out)

    def stat_level(
        self, t1_count: NDArray[np.int64], thresholds: tuple[int, ...]
    ) -> NDArray[np.int8]:
        """Each group's statistic level from its T1 count: the number of thresholds at or
        below it (production's ``when(count ≥ θ3, 3).when(≥ θ2, 2)…``, thresholds
        non-decreasing)."""
        level = np.zeros(t1_count.shape, dtype=np.int8)
        for t in thresholds:
            level += (t1_count >= t).astype(np.int8)
        return level


T3 = TableDesign(
    name="t3",
    cell_column="T3_DATA_CELL",
    attribute="HOUSEHOLD_TYPE",
    values=tuple(HOUSEHOLD_TYPES),
    parent={1: 0, 6: 0, 2: 1, 3: 1, 4: 3, 5: 3, 7: 6, 8: 6},
    cell_of=((0, 0, 0, 0, 0), (1, 1, 1, 6, 6), (2, 3, 3, 7, 8), (2, 4, 5, 7, 8)),
    cell_names={
        0: "total households",
        1: "family households",
        2: "married couple family",
        3: "other family",
        4: "other family: male householder, no spouse present",
        5: "other family: female householder, no spouse present",
        6: "nonfamily households",
        7: "householder living alone",
        8: "householder not living alone",
    },
)
T4 = TableDesign(
    name="t4",
    cell_column="T4_DATA_CELL",
    attribute="TEN",
    values=tuple(TENURES),
    parent={1: 0, 2: 0, 3: 0},
    cell_of=((0, 0, 0, 0), (1, 2, 3, 3)),
    cell_names={
        0: "total occupied housing units",
        1: "owned with a mortgage or a loan",
        2: "owned free and clear",
        3: "renter occupied (rented or occupied without rent)",
    },
)
DESIGNS: dict[str, TableDesign] = {"t3": T3, "t4": T4}

GROUP = ("REGION_ID", "REGION_TYPE", "ITERATION_CODE")


def census_tables() -> list[CensusTable]:
    """The six Census tables, as production wrote them: ``t3/T03001/`` … ``t4/T04002/``
    (Spark ``write.csv(sep="|", header=True)``: part files and ``_SUCCESS``, no
    ``headers.csv``); companions ``t3-error.parquet``, ``t4-error.parquet``."""
    out = []
    for d in DESIGNS.values():
        for level in range(d.levels):
            name = d.table(level)
            out.append(
                CensusTable(
                    name,
                    (*GROUP, d.cell_column, "COUNT"),
                    folder=f"{d.name}/{name}",
                    error_file=f"{d.name}-error.parquet",
                    headers_file=False,
                )
            )
    return out


def wide_schema(design: TableDesign) -> dict[str, Any]:
    """Columns of a published row with what privtab knows about its noise (the companion
    columns: all public — the plan — or noisy output)."""
    return {
        "REGION_ID": pl.String,
        "REGION_TYPE": pl.String,
        "ITERATION_CODE": pl.String,
        design.cell_column: pl.Int64,
        "COUNT": pl.Int64,
        "STAT_LEVEL": pl.Int8,
        "NOISY_CELLS": pl.Int64,
        "NOISE": pl.String,
        "NOISE_SCALE": pl.Float64,
        "VARIANCE": pl.Float64,
        "MOE95": pl.Int64,
    }


def read_release_tables(directory: Path) -> dict[str, pl.DataFrame]:
    """Every published table of a SafeTab-H release folder, each row joined with its noise
    (the companion ``t3-error.parquet`` / ``t4-error.parquet``: ``STAT_LEVEL``,
    ``NOISY_CELLS``, ``NOISE``, ``NOISE_SCALE``, ``VARIANCE``, ``MOE95``) — what
    ``privtab analyze ci --release`` reads. Raises ``FileNotFoundError`` / ``ValueError``
    for a folder that is not a SafeTab-H release or whose companions do not match."""
    from privtab.publish.census import read_census_table

    out: dict[str, pl.DataFrame] = {}
    for table in census_tables():
        design = DESIGNS[table.folder.split("/")[0]]
        census = read_census_table(directory, table)
        if census is None:
            raise FileNotFoundError(f"{directory} has no {table.folder}/: not a SafeTab-H release")
        companion = directory / table.error_file
        if not companion.exists():
            raise FileNotFoundError(f"{companion} not found: the noise of {table.name}'s rows")
        schema = wide_schema(design)
        keys = list(table.keys)
        errors = pl.read_parquet(companion).with_columns(pl.col(c).cast(pl.String) for c in keys)
        joined = census.join(errors, on=keys, how="left", maintain_order="left", coalesce=True)
        if joined.height != census.height or joined["NOISE"].null_count():
            raise ValueError(f"{companion} does not match {table.folder}/ row for row")
        out[table.name] = joined.with_columns(pl.col(design.cell_column).cast(pl.Int64)).select(
            list(schema)
        )
    return out
