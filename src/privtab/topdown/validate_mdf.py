"""The Microdata Detail Files of a TopDown release validated (:mod:`privtab.topdown.validate`):
codes, sort order, ``EPNUM``, the per-block constraints, and the MDF's tabulation written to
a scratch folder state by state.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from privtab.data.errors import Problem
from privtab.topdown.histogram import CELLS, SHAPE
from privtab.topdown.mdf import MPD_COLUMNS, MUD_COLUMNS, SCHEMA_BUILD_ID
from privtab.topdown.pl94 import (
    IN_STATE,
    geo_matrix,
    geoid_exprs,
)

__all__: list[str] = []  # the validation's parts: privtab.topdown.validate is the API

from privtab.topdown.validate_read import (
    LINE,
    _Check,
    _CopyAsText,
    _not_after,
    _ParquetCopy,
    _TextStream,
)

_DIGITS = {"TABBLKST": 2, "TABBLKCOU": 3, "TABTRACTCE": 6, "TABBLKGRPCE": 1, "TABBLK": 4}
_CODES: dict[str, dict[str, tuple[str, ...]]] = {
    "persons": {
        "SCHEMA_TYPE_CODE": ("MPD",),
        "SCHEMA_BUILD_ID": (SCHEMA_BUILD_ID,),
        "RTYPE": ("3", "5"),
        "GQTYPE_PL": tuple(str(t) for t in range(8)),
        "VOTING_AGE": ("1", "2"),
        "CENHISP": ("1", "2"),
        "CENRACE": tuple(f"{r:02d}" for r in range(1, 64)),
    },
    "units": {
        "SCHEMA_TYPE_CODE": ("MUD",),
        "SCHEMA_BUILD_ID": (SCHEMA_BUILD_ID,),
        "RTYPE": ("2", "4"),
        "HH_STATUS": ("0", "1", "2"),
    },
}
_MDF = {"persons": MPD_COLUMNS, "units": MUD_COLUMNS}


def _patterns(check: _Check, path: Path, df: pl.DataFrame, kind: str) -> bool:
    bad = False
    for c, width in _DIGITS.items():
        bad |= check.rows(
            path,
            "pattern",
            f"{c} must be {width} digits",
            df.filter(~pl.col(c).str.contains(f"^[0-9]{{{width}}}$")),
            c,
        )
    for c, codes in _CODES[kind].items():
        bad |= check.rows(
            path,
            "pattern",
            f"{c} must be one of {', '.join(codes)}",
            df.filter(~pl.col(c).is_in(list(codes))),
            c,
        )
    if kind == "persons":
        bad |= check.rows(
            path,
            "pattern",
            "EPNUM must be a non-negative integer",
            df.filter(~pl.col("EPNUM").str.contains(r"^[0-9]+$")),
            "EPNUM",
        )
        rt = df.filter(
            (pl.col("RTYPE") == "3") != (pl.col("GQTYPE_PL") == "0")
        )  # RTYPE 3 household exactly for GQTYPE_PL 0
        bad |= check.rows(
            path, "pattern", "RTYPE 3 (household) exactly when GQTYPE_PL is 0", rt, "RTYPE"
        )
    else:
        rt = df.filter((pl.col("RTYPE") == "4") != (pl.col("HH_STATUS") == "0"))
        bad |= check.rows(
            path, "pattern", "RTYPE 4 (GQ facility) exactly when HH_STATUS is 0", rt, "RTYPE"
        )
    return bad


def _block() -> pl.Expr:
    return pl.concat_str("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK").alias("_BLOCK")


def _int(column: str) -> pl.Expr:
    return pl.col(column).cast(pl.Int64, strict=False)


def _person_cell() -> pl.Expr:
    n_va, n_h, n_r = SHAPE[1], SHAPE[2], SHAPE[3]
    i = _int
    return (
        ((i("GQTYPE_PL") * n_va + i("VOTING_AGE") - 1) * n_h + i("CENHISP") - 1) * n_r
        + i("CENRACE")
        - 1
    ).alias("_CELL")


#: units: the kind of a unit row (0 vacant, 1 occupied housing unit, 2 GQ facility)
_UNIT_KIND = (
    pl.when(pl.col("RTYPE") == "4").then(2).when(pl.col("HH_STATUS") == "1").then(1).otherwise(0)
).alias("_CELL")


@dataclass
class _MdfFile:
    """One MDF file streamed (:meth:`states`): checked batch by batch (pattern, sort order,
    EPNUM, the Parquet copy) and aggregated per state into ``(_BLOCK, TABBLKGRPCE, _CELL,
    n)`` (persons: the histogram cell; units: :data:`_UNIT_KIND`); ``usable`` is false
    once a row breaks a pattern or the order (its aggregates are then not compared)."""

    check: _Check
    root: Path
    kind: str
    private: bool
    usable: bool = True
    rows: int = 0
    #: read the fast way (:class:`_CopyAsText`), for a file with nothing wrong
    fast: bool = False
    #: the release has text files (else Parquet only: :mod:`privtab.topdown.formats`)
    has_text: bool = True
    sha256: str | None = None
    #: every row was read
    complete: bool = False

    @property
    def path(self) -> Path:
        """The file read: the text file, or the Parquet file of a Parquet-only release."""
        return self.root / "mdf" / f"{self.kind}.{'txt' if self.has_text else 'parquet'}"

    def states(self) -> Iterator[tuple[str, pl.DataFrame]]:
        path = self.path
        cols = _MDF[self.kind]
        ints = ("EPNUM",) if self.kind == "persons" else ()
        text: _TextStream | _CopyAsText
        copy: _ParquetCopy | None = None
        if self.fast or not self.has_text:
            text = _CopyAsText(self.check, path, cols, self.private, ints, text=self.has_text)
        else:
            text = _TextStream(self.check, path, cols)
            copy = _ParquetCopy(self.check, path.with_suffix(".parquet"), cols, self.private, ints)
        pending: dict[str, list[pl.DataFrame]] = {}
        last: pl.DataFrame | None = None
        for df in text:
            if copy is not None:
                copy.compare(df)
            if _patterns(self.check, path, df, self.kind):
                self.usable = False
            if not self.usable:
                continue
            key = self._key(df)
            if self.kind == "persons":
                epnum = pl.col("EPNUM").cast(pl.Int64, strict=False)
                seq = key.filter(epnum != pl.col(LINE) - text.first_line)
                self.check.rows(
                    path, "sort_order", "EPNUM must number the rows 0, 1, 2, … in file order",
                    seq, "EPNUM",
                )  # fmt: skip
            order = [c for c in key.columns if c not in (LINE, "EPNUM")]
            both = key.select(order) if last is None else pl.concat([last, key.select(order)])
            bad = _not_after(both, strict=False)
            if bad.size:
                at = int(bad[0]) - (0 if last is None else 1)
                self.check.rows(
                    path, "sort_order", "rows must be sorted by geography, then codes",
                    key.slice(at, 1).select(LINE), None,
                )  # fmt: skip
                self.usable = False
                continue
            last = key.select(order).tail(1)
            agg = (
                df.select(_block(), "TABBLKGRPCE", key.get_column("_CELL"))
                .group_by("_BLOCK", "TABBLKGRPCE", "_CELL")
                .agg(pl.len().cast(pl.Int64).alias("n"))
            )
            for (st,), part in self._by_state(agg):
                pending.setdefault(str(st), []).append(part)
            current = df.get_column("TABBLKST")[-1]
            for st in sorted(s for s in pending if s != current):
                yield st, pl.concat(pending.pop(st))
        if copy is not None:
            copy.finish(text.rows)
        self.rows = text.rows
        if not text.ok:
            self.usable = False
        if isinstance(text, _CopyAsText):
            self.sha256, self.complete = text.sha256, text.complete
        else:
            self.complete = text.ok
        for st in sorted(pending):
            yield st, pl.concat(pending.pop(st))

    @staticmethod
    def _by_state(agg: pl.DataFrame) -> Iterator[tuple[tuple[str], pl.DataFrame]]:
        with_st = agg.with_columns(pl.col("_BLOCK").str.slice(0, 2).alias("_ST"))
        for (st,), part in with_st.partition_by("_ST", as_dict=True, include_key=False).items():
            yield (str(st),), part

    def _key(self, df: pl.DataFrame) -> pl.DataFrame:
        if self.kind == "persons":
            return df.select(_block(), _person_cell(), LINE, "EPNUM")
        return df.select(
            _block(), "RTYPE", pl.col("HH_STATUS").replace({"0": "3"}), LINE,
            _UNIT_KIND,
        )  # fmt: skip


@dataclass
class _Blocks:
    """One state's blocks (sorted ``ids``, their ``geo`` rows) with the MDF's persons
    histograms ``hist`` (sparse ``(blocks, 2016)``), [vacant, occupied] housing units
    ``hu`` and GQ facilities ``gq``."""

    ids: np.ndarray
    geo: pl.DataFrame
    hist: sp.csr_matrix
    hu: np.ndarray
    gq: np.ndarray


def _state_blocks(
    persons: list[pl.DataFrame], units: list[pl.DataFrame], grfc: pl.DataFrame | None
) -> tuple[_Blocks, list[str]]:
    """A state's per-block histograms from its MDF aggregates (and, with the GRF-C, every
    GRF-C block of the state, also empty ones); also the MDF blocks not in the GRF-C."""
    empty = pl.DataFrame(
        schema={"_BLOCK": pl.String, "TABBLKGRPCE": pl.String, "_CELL": pl.Int64, "n": pl.Int64}
    )
    p = pl.concat([empty, *persons], how="vertical_relaxed")
    u = pl.concat([empty, *units], how="vertical_relaxed")
    seen = (
        pl.concat([p.select("_BLOCK", "TABBLKGRPCE"), u.select("_BLOCK", "TABBLKGRPCE")])
        .unique("_BLOCK", keep="first")
        .sort("_BLOCK")
    )
    stray: list[str] = []
    if grfc is not None:
        geo = grfc.rename({"BLOCK": "_BLOCK"})
        known = geo.get_column("_BLOCK")
        stray = seen.filter(~pl.col("_BLOCK").is_in(known.implode())).get_column("_BLOCK").to_list()
    else:
        b = pl.col("_BLOCK").str
        geo = seen.select(
            "_BLOCK", b.slice(0, 2).alias("TABBLKST"), b.slice(2, 3).alias("TABBLKCOU"),
            b.slice(5, 6).alias("TABTRACTCE"), "TABBLKGRPCE", b.slice(11, 4).alias("TABBLK"),
        )  # fmt: skip
    ids = geo.get_column("_BLOCK").to_numpy().astype(str)
    n = ids.size
    if stray:
        return _Blocks(ids, geo, sp.csr_matrix(np.zeros((n, CELLS), np.int64)),
                       np.zeros((n, 2), np.int64), np.zeros(n, np.int64)), stray  # fmt: skip
    p = p.group_by("_BLOCK", "_CELL").agg(pl.col("n").sum())
    rows = np.searchsorted(ids, p.get_column("_BLOCK").to_numpy().astype(str))
    hist = sp.csr_matrix(
        (p.get_column("n").to_numpy(), (rows, p.get_column("_CELL").to_numpy())),
        shape=(n, CELLS), dtype=np.int64,
    )  # fmt: skip
    kinds = np.zeros((n, 3), dtype=np.int64)
    u_rows = np.searchsorted(ids, u.get_column("_BLOCK").to_numpy().astype(str))
    np.add.at(kinds, (u_rows, u.get_column("_CELL").to_numpy()), u.get_column("n").to_numpy())
    return _Blocks(ids, geo, hist, kinds[:, :2].copy(), kinds[:, 2].copy()), stray


_GEOS = pa.schema([("GEOID", pa.string()), ("V", pa.int64()), ("O", pa.int64())])
_PAIRS = pa.schema([("I", pa.int64()), ("CELL", pa.int64()), ("N", pa.int64())])


@dataclass
class _Expected:
    """The MDF's tabulation, written per geolevel to ``scratch`` as it is made (state by
    state; the nation and the AIANNH areas, which cross states, summed and written last):
    ``<geolevel>-geos.parquet`` every geography (GEOID ascending) with its [vacant,
    occupied] housing units, ``<geolevel>-cells.parquet`` the non-zero cells of its persons
    histogram. Each table is then compared with it as both are read in order
    (:class:`_ExpectedReader`)."""

    scratch: Path
    levels: tuple[str, ...]
    complete: bool
    _writers: dict[str, tuple[pq.ParquetWriter, pq.ParquetWriter]] = field(default_factory=dict)
    _count: dict[str, int] = field(default_factory=dict)
    _across: dict[str, list[tuple[np.ndarray, sp.csr_matrix, np.ndarray]]] = field(
        default_factory=dict
    )

    def __post_init__(self) -> None:
        self.scratch.mkdir(parents=True, exist_ok=True)

    def _write(self, level: str, gids: np.ndarray, hist: sp.csr_matrix, hu: np.ndarray) -> None:
        if level not in self._writers:
            self._writers[level] = (
                pq.ParquetWriter(self.scratch / f"{level}-geos.parquet", _GEOS),
                pq.ParquetWriter(self.scratch / f"{level}-cells.parquet", _PAIRS),
            )
        geos, cells = self._writers[level]
        geos.write_table(pa.table({"GEOID": pa.array(gids), "V": hu[:, 0], "O": hu[:, 1]},
                                  schema=_GEOS))  # fmt: skip
        coo = sp.coo_matrix(hist)
        keep = coo.data != 0
        first = self._count.get(level, 0)
        self._count[level] = first + gids.size
        cells.write_table(pa.table(
            {"I": coo.row[keep].astype(np.int64) + first, "CELL": coo.col[keep].astype(np.int64),
             "N": coo.data[keep].astype(np.int64)}, schema=_PAIRS,
        ))  # fmt: skip

    def add(self, b: _Blocks) -> None:
        """One state's blocks: its in-state geographies written, added to the others."""
        exprs = geoid_exprs()
        keys = b.geo.select(**{g: exprs[g] for g in self.levels})
        for level in self.levels:
            gids, g = geo_matrix(keys.get_column(level).to_list())
            if not gids.size:
                continue
            hist = sp.csr_matrix(g @ b.hist, dtype=np.int64)
            hist.sort_indices()
            hu = np.asarray(g @ b.hu, dtype=np.int64)
            if level in IN_STATE:
                self._write(level, gids, hist, hu)
            else:
                self._across.setdefault(level, []).append((gids, hist, hu))

    def close(self) -> None:
        """The nation and the AIANNH areas summed and written; every file closed."""
        for level, parts in self._across.items():
            ids, inv = np.unique(np.concatenate([p[0] for p in parts]), return_inverse=True)
            s = sp.csr_matrix(
                (np.ones(inv.size, dtype=np.int64), (inv, np.arange(inv.size))),
                shape=(ids.size, inv.size),
            )
            hist = sp.csr_matrix(s @ sp.vstack([p[1] for p in parts]), dtype=np.int64)
            hist.sort_indices()
            self._write(level, ids, hist, s @ np.concatenate([p[2] for p in parts]))
        self._across.clear()
        for geos, cells in self._writers.values():
            geos.close()
            cells.close()

    def reader(self, level: str) -> _ExpectedReader:
        return _ExpectedReader(self.scratch, level, level in self._writers)


class _ExpectedReader:
    """One geolevel's expected geographies read in GEOID order, as far as asked (the
    cells file refers to a geography by its position ``I`` in the geographies file)."""

    def __init__(self, scratch: Path, level: str, exists: bool) -> None:
        path = (lambda part: scratch / f"{level}-{part}.parquet") if exists else (lambda _: None)
        self._geos = _Sorted(path("geos"), _GEOS, "GEOID")
        self._cells = _Sorted(path("cells"), _PAIRS, "I")
        self._seen = 0

    def upto(self, geoid: str | None) -> tuple[np.ndarray, np.ndarray, pl.DataFrame]:
        """The geographies not yet read with GEOID ≤ ``geoid`` (``None``: all): their
        GEOIDs, [vacant, occupied] housing units and non-zero persons cells (``I``: the
        row among these geographies)."""
        geos = self._geos.upto(geoid)
        first, self._seen = self._seen, self._seen + geos.height
        cells = self._cells.upto(None if geoid is None else self._seen - 1)
        return (
            geos.get_column("GEOID").to_numpy().astype(str),
            geos.select("V", "O").to_numpy().astype(np.int64),
            cells.with_columns(pl.col("I") - first),
        )


class _Sorted:
    """A Parquet file sorted by ``key``, read in batches as far as asked."""

    def __init__(self, path: Path | None, schema: pa.Schema, key: str) -> None:
        self._batches: Iterator[pa.RecordBatch] = (
            iter(pq.ParquetFile(path).iter_batches(batch_size=1 << 16)) if path else iter(())
        )
        self._buf: pl.DataFrame | None = None
        self._done = path is None
        self._schema = schema
        self._key = key

    def upto(self, value: str | int | None) -> pl.DataFrame:
        """The rows not yet read with ``key`` ≤ ``value`` (``None``: all)."""
        parts = [] if self._buf is None else [self._buf]
        while not self._done and (
            value is None
            or not parts
            or parts[-1].height == 0
            or parts[-1].get_column(self._key)[-1] <= value
        ):
            batch = next(self._batches, None)
            if batch is None:
                self._done = True
                break
            parts.append(pl.DataFrame(pl.from_arrow(batch)))
        if not parts:
            return pl.DataFrame(pl.from_arrow(self._schema.empty_table()))
        whole = pl.concat(parts) if len(parts) > 1 else parts[0]
        at = (
            whole.height
            if value is None
            else int(whole.get_column(self._key).search_sorted(value, side="right"))
        )
        self._buf = whole.slice(at)
        return whole.slice(0, at)


def _tagged(
    kind: str, states: Iterator[tuple[str, pl.DataFrame]]
) -> Iterator[tuple[str, str, int, pl.DataFrame | None]]:
    for i, (st, df) in enumerate(states):
        yield st, kind, i, df


def _scan_mdf(
    check: _Check,
    root: Path,
    private: bool,
    grfc: pl.DataFrame | None,
    expected: _Expected,
    hashes: dict[str, str] | None = None,
    has_text: bool = True,
) -> tuple[dict[str, int], bool, bool]:
    """The MDF streamed state by state (:class:`_MdfFile`): each state's blocks checked
    against the constraints and added to the expected tabulation (``hashes`` given: the
    fast way, the text files' SHA-256 put there). Returns the files' rows, whether the
    tabulation may be compared (both files usable, every MDF block a GRF-C block) and
    whether every row of both files was read."""
    fast = hashes is not None
    files = {k: _MdfFile(check, root, k, private, fast=fast, has_text=has_text) for k in _MDF}
    states = [] if grfc is None else sorted(grfc.get_column("TABBLKST").unique().to_list())
    streams = [_tagged(k, f.states()) for k, f in files.items()]
    grfc_states = ((st, "grfc", i, None) for i, st in enumerate(states))
    comparable = True
    previous = ""
    path = files["persons"].path
    for state, group in itertools.groupby(
        heapq.merge(*streams, grfc_states, key=lambda x: (x[0], x[1], x[2])), key=lambda x: x[0]
    ):
        parts = list(group)
        if state <= previous and previous:
            comparable = False  # an MDF out of order (reported): not compared
        previous = max(previous, state)
        if not comparable:
            continue
        g = None if grfc is None else grfc.filter(pl.col("TABBLKST") == state).sort("BLOCK")
        blocks, stray = _state_blocks(
            [df for _, k, _, df in parts if k == "persons" and df is not None],
            [df for _, k, _, df in parts if k == "units" and df is not None],
            g if g is not None and g.height else None,
        )
        if g is not None and not g.height:
            stray = blocks.ids.tolist()
        if stray:
            check.add(
                path, "tabulation", "an MDF block is not a GRF-C block", None, "TABBLK",
                sorted(stray)[0],
            )  # fmt: skip
            comparable = False
            continue
        _constraints(check, path, blocks.ids, blocks.hist, blocks.hu, blocks.gq)
        expected.add(blocks)
    expected.close()
    rows = {}
    for k, f in files.items():
        rows[f"mdf/{k}.txt"] = rows[f"mdf/{k}.parquet"] = f.rows
        comparable &= f.usable
        if hashes is not None and f.sha256 is not None:
            hashes[f"mdf/{k}.txt"] = f.sha256
    return rows, comparable, all(f.complete for f in files.values())


def _constraints(
    check: _Check,
    path: Path,
    ids: np.ndarray,
    hist: sp.csr_matrix,
    hu: np.ndarray,
    gq: np.ndarray,
) -> None:
    per_type = SHAPE[1] * SHAPE[2] * SHAPE[3]
    coo = hist.tocoo()
    by_type = np.zeros((hist.shape[0], SHAPE[0]), dtype=np.int64)
    np.add.at(by_type, (coo.row, coo.col // per_type), coo.data)
    in_gq = by_type[:, 1:].sum(axis=1)
    rules = (
        ("persons in group quarters must be ≥ the block's GQ facilities", in_gq < gq),
        ("no persons in group quarters in a block without a GQ facility", (gq == 0) & (in_gq > 0)),
        (
            "no household persons in a block without housing units",
            (hu.sum(axis=1) == 0) & (by_type[:, 0] > 0),
        ),
    )
    for rule, bad in rules:
        where = np.flatnonzero(bad)
        if where.size:
            check.log.add_many(
                int(where.size),
                (
                    Problem(
                        str(path),
                        "constraint",
                        rule,
                        None,
                        "TABBLKST|TABBLKCOU|TABTRACTCE|TABBLK",
                        ids[int(b)],
                    )
                    for b in where[: check.log.examples]
                ),
            )
    minors = np.zeros(CELLS, dtype=bool)
    minors.reshape(SHAPE)[3, 0] = True
    hit = np.flatnonzero(minors[coo.col] & (coo.data > 0))
    if hit.size:
        b = ids[int(coo.row[hit[0]])]
        check.add(
            path,
            "constraint",
            "no persons under 18 in nursing facilities (GQTYPE_PL 3, VOTING_AGE 1)",
            None,
            "TABBLKST|TABBLKCOU|TABTRACTCE|TABBLK",
            b,
        )
