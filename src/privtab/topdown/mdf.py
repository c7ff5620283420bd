"""The Microdata Detail Files of a TopDown release (the Census's 2020 P.L. 94-171 MDF layout).

``mdf/persons.txt`` — the person file (``MDF_Person``, schema type ``MPD``), one row per
person of the released persons histograms::

    SCHEMA_TYPE_CODE|SCHEMA_BUILD_ID|TABBLKST|TABBLKCOU|TABTRACTCE|TABBLKGRPCE|TABBLK|EPNUM|
    RTYPE|GQTYPE_PL|VOTING_AGE|CENHISP|CENRACE

``mdf/units.txt`` — the unit file (``MDF_Unit``, ``MUD``), one row per housing unit (from
the released units histograms: occupied, vacant) and per group-quarters facility (the
invariant facility counts of the block)::

    SCHEMA_TYPE_CODE|SCHEMA_BUILD_ID|TABBLKST|TABBLKCOU|TABTRACTCE|TABBLKGRPCE|TABBLK|RTYPE|
    HH_STATUS

Codes (the production recoders ``PL94ToMDFPersons2020Recoder`` and the MDF validator
classes of ``uscensusbureau/DAS_2020_Redistricting_Production_Code``): ``SCHEMA_BUILD_ID``
``1.1.0``; persons: ``RTYPE`` ``3`` household / ``5`` group quarters, ``GQTYPE_PL`` the
major GQ type ``0``–``7`` (0: household), ``VOTING_AGE`` ``1`` under 18 / ``2`` 18 and
over, ``CENHISP`` ``1`` not Hispanic / ``2`` Hispanic, ``CENRACE`` ``01``–``63``; units:
``RTYPE`` ``2`` housing unit / ``4`` GQ facility, ``HH_STATUS`` ``1`` occupied, ``2``
vacant, ``0`` GQ. ``TABBLKGRPCE`` is the block's tabulation block group (GRF-C).

Rows are sorted by geography (``TABBLKST``, ``TABBLKCOU``, ``TABTRACTCE``, ``TABBLK``),
persons then by their histogram cell (``GQTYPE_PL``, ``VOTING_AGE``, ``CENHISP``,
``CENRACE``), units by ``RTYPE`` and ``HH_STATUS`` (2/1, 2/2, 4/0). ``EPNUM`` numbers the
persons of the file 0, 1, 2, … in that order (production adds it with Spark's
``zipWithIndex`` after sorting). Each file has a Parquet copy (``persons.parquet``,
``units.parquet``: the same rows, text columns, ``EPNUM`` Int64, privtab's privacy
metadata). The files are written state by state (:class:`MdfWriter`), each state's rows
in runs of whole blocks of about :data:`ROWS` rows, so a large state's rows are never
all held.

Privacy: the person rows are the released noisy post-processed histograms, one row per
count; the unit rows the released units histograms and the group-quarters facility counts,
which are invariants of the 2020 design (published exactly, as in 2020).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import scipy.sparse as sp
from numpy.typing import NDArray

from privtab.release.marking import parquet_metadata
from privtab.topdown.formats import formats
from privtab.topdown.histogram import SHAPE

__all__ = [
    "GEO_COLUMNS",
    "MPD_COLUMNS",
    "MUD_COLUMNS",
    "SCHEMA_BUILD_ID",
    "MdfWriter",
    "person_rows",
    "unit_rows",
]

SCHEMA_BUILD_ID = "1.1.0"
GEO_COLUMNS = ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLKGRPCE", "TABBLK")
MPD_COLUMNS: tuple[str, ...] = (
    "SCHEMA_TYPE_CODE", "SCHEMA_BUILD_ID", *GEO_COLUMNS, "EPNUM", "RTYPE", "GQTYPE_PL",
    "VOTING_AGE", "CENHISP", "CENRACE",
)  # fmt: skip
MUD_COLUMNS: tuple[str, ...] = (
    "SCHEMA_TYPE_CODE", "SCHEMA_BUILD_ID", *GEO_COLUMNS, "RTYPE", "HH_STATUS",
)  # fmt: skip
FILES = {"persons": MPD_COLUMNS, "units": MUD_COLUMNS}
#: MDF rows made and written at once (bounds the memory of a large state's rows; a
#: Parquet row group per run).
ROWS = 1 << 20
SEPARATOR = "|"

IntArray = NDArray[np.int64]


def _geo(blocks: pl.DataFrame, rows: IntArray) -> pl.DataFrame:
    return (
        blocks.select(GEO_COLUMNS)[rows.tolist()]
        if rows.size
        else blocks.select(GEO_COLUMNS).clear()
    )


def person_rows(blocks: pl.DataFrame, hists: sp.csr_matrix, first_epnum: int) -> pl.DataFrame:
    """The MPD rows of ``blocks`` (GRF-C rows, in geographic order) whose persons
    histograms are the rows of ``hists`` (``(blocks, 2016)`` int64): one row per person,
    ``EPNUM`` from ``first_epnum``."""
    h = sp.csr_matrix(hists, dtype=np.int64)
    h.sort_indices()
    h.eliminate_zeros()
    counts = np.asarray(h.data, dtype=np.int64)
    if np.any(counts < 0):
        raise ValueError("a released count is negative")
    block = np.repeat(np.repeat(np.arange(h.shape[0]), np.diff(h.indptr)), counts)
    cell = np.repeat(np.asarray(h.indices, dtype=np.int64), counts)
    per_hhgq = SHAPE[1] * SHAPE[2] * SHAPE[3]
    hhgq = cell // per_hhgq
    va = (cell // (SHAPE[2] * SHAPE[3])) % SHAPE[1]
    hisp = (cell // SHAPE[3]) % SHAPE[2]
    race = cell % SHAPE[3]
    n = cell.size
    codes = pl.DataFrame(
        {
            "EPNUM": np.arange(first_epnum, first_epnum + n, dtype=np.int64),
            "_hhgq": hhgq,
            "_va": va,
            "_hisp": hisp,
            "_race": race,
        }
    )
    frame = pl.concat([_geo(blocks, block), codes], how="horizontal")
    return frame.select(
        pl.lit("MPD").alias("SCHEMA_TYPE_CODE"),
        pl.lit(SCHEMA_BUILD_ID).alias("SCHEMA_BUILD_ID"),
        *GEO_COLUMNS,
        "EPNUM",
        pl.when(pl.col("_hhgq") == 0).then(pl.lit("3")).otherwise(pl.lit("5")).alias("RTYPE"),
        pl.col("_hhgq").cast(pl.String).alias("GQTYPE_PL"),
        (pl.col("_va") + 1).cast(pl.String).alias("VOTING_AGE"),
        (pl.col("_hisp") + 1).cast(pl.String).alias("CENHISP"),
        (pl.col("_race") + 1).cast(pl.String).str.zfill(2).alias("CENRACE"),
    )


def unit_rows(blocks: pl.DataFrame, units: IntArray, facilities: IntArray) -> pl.DataFrame:
    """The MUD rows of ``blocks``: ``units`` ``(blocks, 2)`` the released [vacant,
    occupied] housing units, ``facilities`` ``(blocks,)`` the group-quarters facilities."""
    kinds = (("2", "1", units[:, 1]), ("2", "2", units[:, 0]), ("4", "0", facilities))
    counts = np.stack([np.asarray(c, dtype=np.int64) for _, _, c in kinds], axis=1)
    if np.any(counts < 0):
        raise ValueError("a released unit count is negative")
    flat = counts.reshape(-1)
    block = np.repeat(np.repeat(np.arange(counts.shape[0]), len(kinds)), flat)
    kind = np.repeat(np.tile(np.arange(len(kinds)), counts.shape[0]), flat)
    rtype = np.array([k[0] for k in kinds], dtype=object)[kind]
    status = np.array([k[1] for k in kinds], dtype=object)[kind]
    codes = pl.DataFrame(
        {"RTYPE": rtype, "HH_STATUS": status}, schema={"RTYPE": pl.String, "HH_STATUS": pl.String}
    )
    frame = pl.concat([_geo(blocks, block), codes], how="horizontal")
    return frame.select(
        pl.lit("MUD").alias("SCHEMA_TYPE_CODE"),
        pl.lit(SCHEMA_BUILD_ID).alias("SCHEMA_BUILD_ID"),
        *GEO_COLUMNS,
        "RTYPE",
        "HH_STATUS",
    )


def _slices(rows: IntArray) -> list[tuple[int, int]]:
    """Runs ``[lo, hi)`` of consecutive blocks (``rows``: each block's MDF rows) holding
    about :data:`ROWS` rows each (a block is never split; at least one run)."""
    n = rows.size
    if n == 0:
        return [(0, 0)]
    cum = np.cumsum(rows)
    cuts = np.searchsorted(cum, np.arange(ROWS, int(cum[-1]), ROWS), side="right")
    bounds = np.unique(np.concatenate([[0], cuts, [n]]))
    return [(int(a), int(b)) for a, b in itertools.pairwise(bounds.tolist())]


@dataclass
class MdfWriter:
    """Appends MDF rows to ``folder/mdf/{persons,units}.{txt,parquet}`` state by state
    (:meth:`add`), then :meth:`close`; ``text`` false: the Parquet files only."""

    folder: Path
    private: bool
    text: bool = True
    persons: int = 0
    units: int = 0
    _writers: dict[str, pq.ParquetWriter] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.out = self.folder / "mdf"
        self.out.mkdir(parents=True, exist_ok=True)
        for name, cols in FILES.items():
            if self.text:
                header = SEPARATOR.join(cols) + "\n"
                (self.out / f"{name}.txt").write_text(header, encoding="utf-8")

    def _append(self, name: str, frame: pl.DataFrame) -> None:
        if self.text:
            with (self.out / f"{name}.txt").open("ab") as fh:
                frame.write_csv(fh, separator=SEPARATOR, include_header=False)
        table = frame.to_arrow()
        if name not in self._writers:
            meta = {k.encode(): v.encode() for k, v in parquet_metadata(self.private).items()}
            schema = table.schema.with_metadata(meta)
            self._writers[name] = pq.ParquetWriter(self.out / f"{name}.parquet", schema)
        w = self._writers[name]
        w.write_table(table.cast(w.schema))

    def add(
        self,
        blocks: pl.DataFrame,
        persons: sp.csr_matrix,
        units: IntArray,
        facilities: IntArray,
    ) -> None:
        """Append the rows of ``blocks`` (one state's, in geographic order), made and
        written in runs of whole blocks of about :data:`ROWS` rows (a state's rows are
        never all held)."""
        h = sp.csr_matrix(persons, dtype=np.int64)
        for lo, hi in _slices(np.asarray(h.sum(axis=1), dtype=np.int64).ravel()):
            p = person_rows(blocks.slice(lo, hi - lo), h[lo:hi], self.persons)
            self._append("persons", p)
            self.persons += p.height
        per_block = np.asarray(units, dtype=np.int64).sum(axis=1) + facilities
        for lo, hi in _slices(per_block):
            u = unit_rows(blocks.slice(lo, hi - lo), units[lo:hi], facilities[lo:hi])
            self._append("units", u)
            self.units += u.height

    def close(self) -> list[Path]:
        """Finish the Parquet copies (empty files get their schema); returns the files."""
        for name, cols in FILES.items():
            if name not in self._writers:
                empty = pl.DataFrame(
                    schema={c: (pl.Int64 if c == "EPNUM" else pl.String) for c in cols}
                )
                self._append(name, empty)
        for w in self._writers.values():
            w.close()
        self._writers.clear()
        return [self.out / f"{n}.{ext}" for n in FILES for ext in formats(self.text)]

    def abort(self) -> None:
        for w in self._writers.values():
            w.close()
        self._writers.clear()
