"""The P.L. 94-171 tables of a TopDown release: P1–P5 and H1 for every tabulation geography.

Tables are tabulations of the released microdata (the person and unit Microdata Detail
Files, :mod:`privtab.topdown.mdf`), cell by cell, for the **tabulation geographies of the
GRF-C** — not the spine's geounits (a state's AIAN and non-AIAN parts, the optimized block
groups): every block of the GRF-C, also those without units (all zero), rolls up to

============  ==================  ==============================================
GEOLEVEL      GEOID               blocks
============  ==================  ==============================================
NATION        ``US``              every block of the US run (not Puerto Rico)
STATE         ``SS``              TABBLKST
COUNTY        ``SSCCC``           + TABBLKCOU
TRACT         ``SSCCCTTTTTT``     + TABTRACTCE
BLOCK_GROUP   ``SSCCCTTTTTTG``    + TABBLKGRPCE (the tabulation block group)
BLOCK         ``SSCCCTTTTTTBBBB`` + TABBLK
PLACE         ``SSPPPPP``         TABBLKST + PLACEFP (``99999``: in no place)
AIANNH        ``AAAA``            AIANNHCE (``9999``: in none; an area may cross states)
============  ==================  ==============================================

One file per table, ``pl94/<TABLE>.txt`` (pipe-delimited with a header) and
``pl94/<TABLE>.parquet`` (the same rows; ``COUNT`` Int64; privtab's privacy metadata),
tidy: ``GEOID|GEOLEVEL|CELL|COUNT``, one row per geography and cell, every cell written
(zeros too); rows by GEOLEVEL in the order above, then GEOID, then the table's cells in
publication order (``P0010001`` …, :mod:`privtab.topdown.tables`; H1: ``H0010001`` housing
units, ``H0010002`` occupied, ``H0010003`` vacant).

The release streams state by state: :class:`Pl94Writer` appends each state's geographies
to one part file per (table, geolevel) and concatenates them in order at the end; the
nation and the AIANNH areas (which cross states) are summed over the states and written
last. Privacy: every count is a sum of released (post-processed, noisy) microdata rows —
no further privacy cost.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp
from numpy.typing import NDArray

from privtab.release.marking import parquet_metadata
from privtab.topdown.histogram import CELLS
from privtab.topdown.tables import TABLE_NAMES, pl94_person_cells

__all__ = [
    "COLUMNS",
    "GEOLEVELS",
    "H1_CELLS",
    "TABLES",
    "Pl94Writer",
    "cell_names",
    "geo_matrix",
    "geoid_exprs",
    "person_cell_matrix",
    "table_matrix",
    "tabulate",
]

#: The tables, in publication order.
TABLES: tuple[str, ...] = (*TABLE_NAMES, "H1")
#: The tabulation geographies, in file order (module docstring).
GEOLEVELS: tuple[str, ...] = (
    "NATION", "STATE", "COUNTY", "TRACT", "BLOCK_GROUP", "BLOCK", "PLACE", "AIANNH",
)  # fmt: skip
#: Geolevels that lie within one state (the others are summed over the states).
IN_STATE = ("STATE", "COUNTY", "TRACT", "BLOCK_GROUP", "BLOCK", "PLACE")
#: The columns of every table file.
COLUMNS: tuple[str, ...] = ("GEOID", "GEOLEVEL", "CELL", "COUNT")
#: H1 Occupancy status: (name, label, units histogram row over [vacant, occupied]).
H1_CELLS: tuple[tuple[str, str, tuple[int, int]], ...] = (
    ("H0010001", "Total:", (1, 1)),
    ("H0010002", "Occupied", (0, 1)),
    ("H0010003", "Vacant", (1, 0)),
)
PR_STATE = "72"
SEPARATOR = "|"
#: Geographies tabulated at once (bounds the dense cell arrays of a state's blocks).
BATCH = 20_000

IntArray = NDArray[np.int64]


@cache
def person_cell_matrix() -> IntArray:
    """The 298 P1–P5 cells as a ``(298, 2016)`` 0/1 int64 matrix over the histogram."""
    m = pl94_person_cells().rows()
    out = np.rint(m).astype(np.int64)
    if out.shape != (len(pl94_person_cells().names), CELLS) or not np.array_equal(out, m):
        raise AssertionError("the P1–P5 cells are not 0/1 rows of the persons histogram")
    out.setflags(write=False)
    return out


@cache
def cell_names(table: str) -> tuple[str, ...]:
    """The cell names of ``table`` in publication order."""
    if table == "H1":
        return tuple(c[0] for c in H1_CELLS)
    if table not in TABLE_NAMES:
        raise ValueError(f"unknown P.L. 94-171 table {table!r}; tables are {TABLES}")
    prefix = f"P00{table[1]}"
    return tuple(n for n in pl94_person_cells().names if n.startswith(prefix))


def _h1_matrix() -> IntArray:
    return np.array([row for _, _, row in H1_CELLS], dtype=np.int64)


def geoid_exprs() -> dict[str, pl.Expr]:
    """Each geolevel's GEOID of a block (null: the block is in none), from the GRF-C
    columns (text)."""
    st = pl.col("TABBLKST")
    return {
        "NATION": pl.when(st != PR_STATE).then(pl.lit("US")).otherwise(None),
        "STATE": st,
        "COUNTY": pl.concat_str(st, "TABBLKCOU"),
        "TRACT": pl.concat_str(st, "TABBLKCOU", "TABTRACTCE"),
        "BLOCK_GROUP": pl.concat_str(st, "TABBLKCOU", "TABTRACTCE", "TABBLKGRPCE"),
        "BLOCK": pl.concat_str(st, "TABBLKCOU", "TABTRACTCE", "TABBLK"),
        "PLACE": pl.when(pl.col("PLACEFP") != "99999")
        .then(pl.concat_str(st, "PLACEFP"))
        .otherwise(None),
        "AIANNH": pl.when(pl.col("AIANNHCE") != "9999").then(pl.col("AIANNHCE")).otherwise(None),
    }


@dataclass(frozen=True, eq=False)
class Tabulation:
    """One geolevel's geographies (``geoids``, sorted) and their cells: ``persons``
    ``(n, 298)`` (P1–P5 in publication order) and ``units`` ``(n, 3)`` (H1)."""

    geolevel: str
    geoids: NDArray[np.str_]
    persons: IntArray
    units: IntArray

    def __add__(self, other: Tabulation) -> Tabulation:
        """The sum of two tabulations of one geolevel (geographies matched by GEOID)."""
        ids, inv = np.unique(np.concatenate([self.geoids, other.geoids]), return_inverse=True)
        p = np.zeros((ids.size, self.persons.shape[1]), dtype=np.int64)
        u = np.zeros((ids.size, self.units.shape[1]), dtype=np.int64)
        np.add.at(p, inv, np.concatenate([self.persons, other.persons]))
        np.add.at(u, inv, np.concatenate([self.units, other.units]))
        return Tabulation(self.geolevel, ids, p, u)


def geo_matrix(keys: Sequence[str | None]) -> tuple[NDArray[np.str_], sp.csr_matrix]:
    """The geographies of one geolevel (sorted GEOIDs) and the 0/1 ``(geographies,
    blocks)`` int64 matrix that sums blocks into them; ``keys``: each block's GEOID
    (``None``: in no geography of the level)."""
    key = np.array([k if k is not None else "" for k in keys], dtype=object)
    use = np.flatnonzero(key != "")
    ids, inv = np.unique(key[use].astype(str), return_inverse=True)
    g = sp.csr_matrix((np.ones(use.size, dtype=np.int64), (inv, use)), shape=(ids.size, len(keys)))
    return ids, g


def table_matrix(table: str) -> IntArray:
    """The cells of ``table`` as a 0/1 matrix: P1–P5 over the 2,016 persons cells, H1 over
    the [vacant, occupied] units histogram."""
    if table == "H1":
        return _h1_matrix()
    start = _person_offsets()[table]
    return person_cell_matrix()[start : start + len(cell_names(table))]


def tabulate(
    geolevel: str, keys: Sequence[str | None], persons: sp.csr_matrix, units: IntArray
) -> Iterator[Tabulation]:
    """The tables of ``geolevel`` from its blocks: ``keys`` each block's GEOID (``None``:
    in no geography of the level), ``persons`` the blocks' persons histograms (sparse
    ``(blocks, 2016)`` int64), ``units`` their units histograms ``(blocks, 2)`` ([vacant,
    occupied]); in batches of :data:`BATCH` geographies, by GEOID."""
    ids, g = geo_matrix(keys)
    if not ids.size:
        return
    pm, hm = person_cell_matrix(), _h1_matrix()
    for lo in range(0, ids.size, BATCH):
        rows = g[lo : lo + BATCH]
        hist = rows @ persons  # (n, 2016) sparse, exact int64
        p = np.asarray((hist @ sp.csr_matrix(pm.T)).toarray(), dtype=np.int64)
        u = np.asarray(rows @ units, dtype=np.int64) @ hm.T
        yield Tabulation(geolevel, ids[lo : lo + BATCH], p, u)


def table_frame(tab: Tabulation, table: str) -> pl.DataFrame:
    """One table of a tabulation as tidy rows ``GEOID|GEOLEVEL|CELL|COUNT``."""
    names = cell_names(table)
    if table == "H1":
        counts = tab.units
    else:
        start = _person_offsets()[table]
        counts = tab.persons[:, start : start + len(names)]
    n, w = tab.geoids.size, len(names)
    # gathers of small columns (no per-row Python objects): the same rows and values
    return pl.DataFrame(
        {
            "GEOID": pl.Series(tab.geoids, dtype=pl.String).gather(np.repeat(np.arange(n), w)),
            "GEOLEVEL": pl.Series([tab.geolevel], dtype=pl.String).gather(
                np.zeros(n * w, dtype=np.int64)
            ),
            "CELL": pl.Series(names, dtype=pl.String).gather(np.tile(np.arange(w), n)),
            "COUNT": pl.Series(np.ascontiguousarray(counts, dtype=np.int64).reshape(-1)),
        }
    )


@cache
def _person_offsets() -> dict[str, int]:
    out, at = {}, 0
    for t in TABLE_NAMES:
        out[t] = at
        at += len(cell_names(t))
    return out


_ARROW = pa.schema(
    [("GEOID", pa.string()), ("GEOLEVEL", pa.string()), ("CELL", pa.string()),
     ("COUNT", pa.int64())]
)  # fmt: skip


@dataclass
class _Part:
    text: Path | None
    parquet: Path
    writer: pq.ParquetWriter | None = None
    rows: int = 0


@dataclass
class Pl94Writer:
    """Writes ``folder/pl94/<TABLE>.txt`` and ``.parquet`` (module docstring; ``text``
    false: the Parquet files only): call :meth:`add` with each tabulation (in-state
    geolevels state by state, GEOIDs ascending; the nation and AIANNH areas once, summed),
    then :meth:`close`."""

    folder: Path
    private: bool
    text: bool = True
    rows: dict[str, int] = field(default_factory=dict)
    _parts: dict[tuple[str, str], _Part] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.out = self.folder / "pl94"
        self.scratch = self.folder / ".pl94-parts"
        self.out.mkdir(parents=True, exist_ok=True)
        self.scratch.mkdir(parents=True, exist_ok=True)
        meta = {k.encode(): v.encode() for k, v in parquet_metadata(self.private).items()}
        self._schema = _ARROW.with_metadata(meta)

    def _part(self, table: str, geolevel: str) -> _Part:
        key = (table, geolevel)
        if key not in self._parts:
            base = self.scratch / f"{table}-{geolevel}"
            part = _Part(base.with_suffix(".txt") if self.text else None,
                         base.with_suffix(".parquet"))  # fmt: skip
            if part.text is not None:
                part.text.write_bytes(b"")
            part.writer = pq.ParquetWriter(part.parquet, self._schema)
            self._parts[key] = part
        return self._parts[key]

    def add(self, tab: Tabulation) -> None:
        """Append a tabulation's rows to every table."""
        for table in TABLES:
            frame = table_frame(tab, table)
            part = self._part(table, tab.geolevel)
            if part.text is not None:
                with part.text.open("ab") as fh:
                    frame.write_csv(fh, separator=SEPARATOR, include_header=False)
            assert part.writer is not None
            part.writer.write_table(frame.to_arrow().cast(self._schema))
            part.rows += frame.height

    def close(self) -> list[Path]:
        """Concatenate the parts in GEOLEVEL order into the tables; returns the files."""
        written: list[Path] = []
        for part in self._parts.values():
            if part.writer is not None:
                part.writer.close()
                part.writer = None
        for table in TABLES:
            parts = [self._parts[(table, g)] for g in GEOLEVELS if (table, g) in self._parts]
            if self.text:
                written.append(self._concat_text(table, parts))
            parquet = self.out / f"{table}.parquet"
            with pq.ParquetWriter(parquet, self._schema) as w:
                for part in parts:
                    pf = pq.ParquetFile(part.parquet)
                    for i in range(pf.num_row_groups):
                        w.write_table(pf.read_row_group(i))
            self.rows[table] = sum(p.rows for p in parts)
            written.append(parquet)
        shutil.rmtree(self.scratch)
        return written

    def _concat_text(self, table: str, parts: list[_Part]) -> Path:
        text = self.out / f"{table}.txt"
        with text.open("wb") as out:
            out.write((SEPARATOR.join(COLUMNS) + "\n").encode())
            for part in parts:
                assert part.text is not None
                with part.text.open("rb") as fh:
                    shutil.copyfileobj(fh, out, 1 << 20)
        return text

    def abort(self) -> None:
        """Close the part writers (the staging folder is discarded by its owner)."""
        for part in self._parts.values():
            if part.writer is not None:
                part.writer.close()
                part.writer = None
