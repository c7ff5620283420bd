"""The P1–P5 and H1 tables of a TopDown release validated (:mod:`privtab.topdown.validate`):
codes, order, completeness, the MDF's tabulation, children sums and identities — from the
text, or the fast way from the Parquet copy.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import scipy.sparse as sp

from privtab.topdown.histogram import CELLS
from privtab.topdown.pl94 import (
    COLUMNS,
    GEOLEVELS,
    cell_names,
    table_matrix,
)

__all__: list[str] = []  # the validation's parts: privtab.topdown.validate is the API

from privtab.topdown import validate_read
from privtab.topdown.validate_mdf import _Expected, _ExpectedReader
from privtab.topdown.validate_read import (
    LINE,
    _Check,
    _CopyAsText,
    _not_after,
    _ParquetCopy,
    _TextStream,
)

#: (child geolevel, GEOID prefix length of its parent, parent geolevel)
_NESTING = (
    ("COUNTY", 2, "STATE"),
    ("TRACT", 5, "COUNTY"),
    ("BLOCK_GROUP", 11, "TRACT"),
    ("BLOCK", 11, "TRACT"),
)
_IDENTITIES = (
    ("P1", "P0010001", "P2", ("P0020001",)),
    ("P3", "P0030001", "P4", ("P0040001",)),
    ("P2", "P0020001", "P2", ("P0020002", "P0020003")),
    ("P4", "P0040001", "P4", ("P0040002", "P0040003")),
    ("P5", "P0050001", "P5", ("P0050002", "P0050007")),
    ("H1", "H0010001", "H1", ("H0010002", "H0010003")),
)


@dataclass
class _Level:
    """The complete geographies of one geolevel in a chunk of a table: GEOIDs, the line of
    each one's first cell, its cells ``(n, cells)``."""

    name: str
    geoids: np.ndarray
    lines: np.ndarray
    counts: np.ndarray


@dataclass
class _Table:
    """One table streamed (:meth:`run`): every batch checked (pattern, order, duplicates,
    the Parquet copy), regrouped into whole geographies, each compared with the MDF's
    tabulation (``want``), summed into its parent's children sums, and checked against
    the in-table identities; the parent geolevels (nation, states, counties, tracts) are
    kept for the children sums, and the totals the cross-table identities read."""

    check: _Check
    root: Path
    t: str
    private: bool
    want: _Expected | None
    #: the release has text files (else Parquet only: :mod:`privtab.topdown.formats`)
    has_text: bool = True
    usable: bool = True
    ordered: bool = True
    rows: int = 0
    #: the text file's SHA-256, when :meth:`run_from_copy` read all its bytes
    sha256: str | None = None
    totals: list[pl.DataFrame] = field(default_factory=list)
    _parents: dict[str, list[_Level]] = field(default_factory=dict)
    _sums: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    _readers: dict[str, _ExpectedReader] = field(default_factory=dict)
    _reported: set[str] = field(default_factory=set)
    _level: int = -1
    _cells: dict[int, pl.Series] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        """The file read: the text file, or the Parquet file of a Parquet-only release."""
        return self.root / "pl94" / f"{self.t}.{'txt' if self.has_text else 'parquet'}"

    def run(self) -> bool:
        """The whole table; ``True`` if it could be read and checked (no pattern,
        duplicate or order problem)."""
        names = cell_names(self.t)
        text: _TextStream | _CopyAsText
        copy: _ParquetCopy | None = None
        if self.has_text:
            text = _TextStream(self.check, self.path, COLUMNS)
            copy = _ParquetCopy(
                self.check, self.path.with_suffix(".parquet"), COLUMNS, self.private, ("COUNT",)
            )
        else:
            text = _CopyAsText(self.check, self.path, COLUMNS, self.private, ("COUNT",),
                               text=False)  # fmt: skip
        last: pl.DataFrame | None = None
        carry: pl.DataFrame | None = None
        codes = {g: i for i, g in enumerate(GEOLEVELS)}
        cells = {c: i for i, c in enumerate(names)}
        for df in text:
            if copy is not None:
                copy.compare(df)
            if self._patterns(df, names):
                self.usable = False
            if not self.usable:
                continue
            df = df.select(
                "GEOID",
                pl.col("GEOLEVEL").replace_strict(codes, return_dtype=pl.Int8).alias("_G"),
                pl.col("CELL").replace_strict(cells, return_dtype=pl.Int16).alias("_C"),
                pl.col("COUNT").cast(pl.Int64),
                LINE,
            )
            key = df.select("_G", "GEOID", "_C")
            both = key if last is None else pl.concat([last, key])
            at = _not_after(both, strict=True)
            if at.size:
                self._disorder(both, df, at, at - (both.height - df.height))
            last = key.tail(1)
            if not self.ordered:
                continue
            chunk = df if carry is None else pl.concat([carry, df])
            g, gid = chunk.get_column("_G"), chunk.get_column("GEOID")
            tail = chunk.height - int(((g == g[-1]) & (gid == gid[-1])).sum())
            carry = chunk.slice(tail)
            self._chunk(chunk.slice(0, tail), len(names))
        if copy is not None:
            copy.finish(text.rows)
        self.rows = text.rows
        self.usable &= text.ok
        if not (self.usable and self.ordered):
            return False
        if carry is not None:
            self._chunk(carry, len(names))
        self._finish()
        return True

    def run_from_copy(self) -> bool:
        """The whole table the fast way, for a table with nothing wrong: the Parquet copy
        read in slices of whole geographies, each slice written back as pipe-delimited
        text and compared **byte for byte** with the text file on disk (so the text holds
        exactly the copy's values: what is checked below holds for both files), then
        checked vectorised per slice — no null, GEOLEVEL and CELL among the codes, COUNT
        ≥ 0, every geography its ``width`` cells in order, GEOIDs (digits or ``US``)
        strictly increasing within a geolevel, geolevels in order — and its geographies
        compared, summed and checked as :meth:`run` does. Returns ``True`` when the table
        passed everything (``sha256``: the text file's, its bytes were all read); ``False``
        at the first sign of anything else: the caller then validates the table again with
        :meth:`run` (with its own problem log), which locates every problem. A
        Parquet-only release: the Parquet file read the same way, nothing to compare."""
        names = cell_names(self.t)
        width = len(names)
        step = max(1, validate_read.BLOCK_BYTES // 32 // width) * width
        source = _CopyAsText(
            self.check, self.path, COLUMNS, self.private, ("COUNT",), step, as_text=False,
            text=self.has_text,
        )  # fmt: skip
        codes = {g: i for i, g in enumerate(GEOLEVELS)}
        last: tuple[int, str] | None = None
        at = 0
        for df in source:
            if df.height % width:
                return False
            last = self._copy_slice(df, at + source.first_line, width, codes, names, last)
            if last is None:
                return False
            at += df.height
        if not source.ok or not source.complete or self.check.log:
            return False
        self.rows = at
        self._finish()
        self.sha256 = source.sha256
        return not self.check.log

    def _copy_slice(
        self, df: pl.DataFrame, at: int, width: int, codes: dict[str, int],
        cells: Sequence[str], last: tuple[int, str] | None,
    ) -> tuple[int, str] | None:  # fmt: skip
        """One slice of :meth:`run_from_copy` (whole geographies from line ``at``): checked,
        then compared by geolevel; returns its last (geolevel, GEOID), or ``None`` when
        the slice is not a perfect run of geographies."""
        n = df.height // width
        count = df.get_column("COUNT").to_numpy().reshape(n, width)
        tiled = self._cells.get(df.height)
        if tiled is None:
            tiled = pl.Series(np.tile(np.asarray(cells, dtype=object), n), dtype=pl.String)
            self._cells = {df.height: tiled}
        if not bool((df.get_column("CELL") == tiled).all()) or np.any(count < 0):
            return None
        same = df.select(
            ((pl.col("GEOLEVEL") == pl.col("GEOLEVEL").shift(1))
             & (pl.col("GEOID") == pl.col("GEOID").shift(1))).fill_null(True)
        ).to_series().to_numpy().reshape(n, width)  # fmt: skip
        if not same[:, 1:].all():
            return None
        heads = df.gather_every(width).select(
            pl.col("GEOLEVEL").replace_strict(codes, default=-1, return_dtype=pl.Int8).alias("_G"),
            "GEOID",
        )
        g = heads.get_column("_G").to_numpy().astype(np.int64)
        ids = heads.get_column("GEOID")
        if np.any(g < 0) or not bool(ids.str.contains(r"^([0-9]+|US)$").all()):
            return None
        keys = heads
        if last is not None:
            keys = pl.concat([pl.DataFrame({"_G": [last[0]], "GEOID": [last[1]]},
                                           schema=keys.schema), keys])  # fmt: skip
        if _not_after(keys, strict=True).size:
            return None
        geoids = ids.to_numpy().astype(str)
        lines = at + width * np.arange(n, dtype=np.int64)
        bounds = np.flatnonzero(np.diff(g)) + 1
        for lo, hi in itertools.pairwise([0, *bounds.tolist(), n]):
            level = _Level(GEOLEVELS[int(g[lo])], geoids[lo:hi], lines[lo:hi], count[lo:hi])
            self._advance(int(g[lo]))
            self._tabulation(level)
            self._children(level)
            self._identities(level)
        return int(g[-1]), str(geoids[-1])

    def _patterns(self, df: pl.DataFrame, names: Sequence[str]) -> bool:
        rules = (
            (f"GEOLEVEL must be one of {', '.join(GEOLEVELS)}", "GEOLEVEL",
             ~pl.col("GEOLEVEL").is_in(list(GEOLEVELS))),
            (f"CELL must be a cell of {self.t}", "CELL", ~pl.col("CELL").is_in(list(names))),
            ("COUNT must be a non-negative integer", "COUNT",
             ~pl.col("COUNT").str.contains(r"^[0-9]+$")),
            ("GEOID must be digits (US for the nation)", "GEOID",
             ~pl.col("GEOID").str.contains(r"^([0-9]+|US)$")),
        )  # fmt: skip
        bad = False
        for message, column, broken in rules:
            bad |= self.check.rows(self.path, "pattern", message, df.filter(broken), column)
        return bad

    def _disorder(self, both: pl.DataFrame, df: pl.DataFrame, at: np.ndarray,
                  rows: np.ndarray) -> None:  # fmt: skip
        """Rows (``rows`` of ``df``, ``at`` of ``both``: the batch after the previous
        batch's last key) that do not come after the one before: the same key
        (duplicate) or an earlier one (the first reported: sort_order); the table is
        not compared further."""
        prev, cur = both[(at - 1).tolist()], both[at.tolist()]
        same = np.asarray([prev.row(i) == cur.row(i) for i in range(at.size)], dtype=bool)
        self.check.rows(
            self.path, "duplicate", "a (GEOID, GEOLEVEL, CELL) appears twice",
            df[rows[same].tolist()].select(LINE, "GEOID"), "GEOID",
        )  # fmt: skip
        if (~same).any() and self.ordered:
            self.check.rows(
                self.path, "sort_order", "rows must be sorted by GEOLEVEL, GEOID, cell",
                df[rows[~same][:1].tolist()].select(LINE), None,
            )  # fmt: skip
        self.usable = self.usable and not same.any()
        self.ordered = False

    def _chunk(self, chunk: pl.DataFrame, width: int) -> None:
        """Whole geographies (sorted): completeness, then per geolevel the comparisons."""
        if not chunk.height:
            return
        geos = chunk.group_by("_G", "GEOID", maintain_order=True).agg(
            pl.len().alias("_n"), pl.col(LINE).first()
        )
        self.check.rows(
            self.path, "duplicate", f"a geography must have all {width} cells of {self.t}",
            geos.filter(pl.col("_n") != width), "GEOID",
        )  # fmt: skip
        complete = geos.filter(pl.col("_n") == width)
        rows = chunk.join(complete.select("_G", "GEOID"), on=["_G", "GEOID"], how="semi",
                          maintain_order="left")  # fmt: skip
        for (g,), part in rows.partition_by("_G", as_dict=True, maintain_order=True).items():
            heads = complete.filter(pl.col("_G") == g)
            level = _Level(
                GEOLEVELS[int(g)],
                heads.get_column("GEOID").to_numpy().astype(str),
                heads.get_column(LINE).to_numpy(),
                part.get_column("COUNT").to_numpy().reshape(heads.height, width),
            )
            self._advance(int(g))
            self._tabulation(level)
            self._children(level)
            self._identities(level)

    # ------------------------------------------------------------------ tabulation
    def _reader(self, level: str) -> _ExpectedReader | None:
        if self.want is None or level not in self.want.levels:
            return None
        if level not in self._readers:
            self._readers[level] = self.want.reader(level)
        return self._readers[level]

    def _advance(self, g: int) -> None:
        """The table reached geolevel ``g``: the expected geographies of the geolevels
        before it that the table did not hold are missing."""
        while self._level < g:
            if self._level >= 0:
                self._flush(GEOLEVELS[self._level])
            self._level += 1

    def _flush(self, level: str) -> None:
        reader = self._reader(level)
        if reader is None:
            return
        self._compare(level, np.zeros(0, dtype=str), np.zeros((0, 0), np.int64), reader.upto(None))

    def _expected(self, gids: np.ndarray, hu: np.ndarray, cells: pl.DataFrame) -> np.ndarray:
        m = table_matrix(self.t)
        if self.t == "H1":
            out: np.ndarray = hu @ m.T
            return out
        rows = cells.get_column("I").to_numpy()
        hist = sp.csr_matrix(
            (cells.get_column("N").to_numpy(), (rows, cells.get_column("CELL").to_numpy())),
            shape=(gids.size, CELLS), dtype=np.int64,
        )  # fmt: skip
        return np.asarray(hist @ m.T, dtype=np.int64)

    def _tabulation(self, lv: _Level) -> None:
        reader = self._reader(lv.name)
        if reader is None:
            return
        self._compare(lv.name, lv.geoids, lv.counts, reader.upto(str(lv.geoids[-1])))

    def _compare(
        self, level: str, got_ids: np.ndarray, got: np.ndarray,
        want: tuple[np.ndarray, np.ndarray, pl.DataFrame],
    ) -> None:  # fmt: skip
        """The table's geographies of a chunk against the expected ones up to its last
        GEOID (module docstring); the first problem of a geolevel is reported."""
        assert self.want is not None
        if level in self._reported:
            return
        want_ids = want[0]
        exp = self._expected(*want)
        complete = self.want.complete
        missing = ~np.isin(want_ids, got_ids)
        if complete:
            lost = np.flatnonzero(missing)
        else:
            lost = np.flatnonzero(missing & exp.any(axis=1)) if exp.size else np.zeros(0, int)
        problem: tuple[str, str] | None = None
        if lost.size:
            g = str(want_ids[lost[0]])
            problem = (f"{level} {g} is missing from the table", g)
        common = np.flatnonzero(~missing)
        if problem is None and common.size:
            at = np.searchsorted(got_ids, want_ids[common])
            diff = got[at] != exp[common]
            if diff.any():
                r = int(np.flatnonzero(diff.any(axis=1))[0])
                c = int(np.flatnonzero(diff[r])[0])
                g = str(want_ids[common[r]])
                problem = (
                    f"{level} {g}: cell {c + 1} is {int(got[at[r], c])}, "
                    f"the MDF's tabulation gives {int(exp[common[r], c])}", g,
                )  # fmt: skip
        if problem is None and got_ids.size:
            extra = np.flatnonzero(~np.isin(got_ids, want_ids))
            if not complete:
                extra = extra[got[extra].any(axis=1)] if extra.size else extra
            if extra.size:
                g = str(got_ids[extra[0]])
                problem = (
                    f"{level} {g} is not a geography of the MDF"
                    + ("/GRF-C" if complete else " (or is not all zero)"), g,
                )  # fmt: skip
        if problem is not None:
            self.check.add(self.path, "tabulation", problem[0], None, "GEOID", problem[1])
            self._reported.add(level)

    # --------------------------------------------------------------- children sums
    def _children(self, lv: _Level) -> None:
        if lv.name in _PARENTS:
            self._parents.setdefault(lv.name, []).append(lv)
        for child, width, parent in _SUMS:
            if lv.name != child:
                continue
            ids, counts = lv.geoids, lv.counts
            if child == "STATE":
                keep = ids != "72"
                ids, counts = ids[keep], counts[keep]
                prefix = np.full(ids.size, "US")
            else:
                prefix = np.asarray([g[:width] for g in ids.tolist()], dtype=str)
            if not ids.size:
                continue
            par = self._parent(parent)
            if (child, parent) not in self._sums:
                self._sums[(child, parent)] = np.zeros_like(par.counts)
            if not par.geoids.size:
                continue
            at = np.minimum(np.searchsorted(par.geoids, prefix), par.geoids.size - 1)
            hit = par.geoids[at] == prefix
            np.add.at(self._sums[(child, parent)], at[hit], counts[hit])

    def _parent(self, level: str) -> _Level:
        parts = self._parents.get(level, [])
        if len(parts) != 1:
            width = parts[0].counts.shape[1] if parts else 0
            parts = [
                _Level(
                    level,
                    np.concatenate([p.geoids for p in parts]) if parts else np.zeros(0, str),
                    np.concatenate([p.lines for p in parts]) if parts else np.zeros(0, int),
                    np.concatenate([p.counts for p in parts]) if parts
                    else np.zeros((0, width), np.int64),
                )
            ]  # fmt: skip
            self._parents[level] = parts
        return parts[0]

    def _finish(self) -> None:
        self._advance(len(GEOLEVELS))
        for (child, parent), sums in self._sums.items():
            par = self._parent(parent)
            if not par.geoids.size:
                continue
            r, c = np.nonzero(par.counts != sums)
            if r.size:
                bad = pl.DataFrame({LINE: par.lines[r] + c, "COUNT": par.counts[r, c]})
                self.check.rows(
                    self.path, "children_sum",
                    f"a {parent} must equal the sum of its {child} rows", bad, "COUNT",
                )  # fmt: skip
        self._parents.clear()
        self._sums.clear()

    # ------------------------------------------------------------------ identities
    def _identities(self, lv: _Level) -> None:
        names = cell_names(self.t)
        for ta, ca, tb, cbs in _IDENTITIES:
            if ta == tb == self.t:
                a = names.index(ca)
                b = lv.counts[:, [names.index(c) for c in cbs]].sum(axis=1)
                bad = np.flatnonzero(lv.counts[:, a] != b)
                if bad.size:
                    frame = pl.DataFrame({LINE: lv.lines[bad] + a, "COUNT": lv.counts[bad, a]})
                    self.check.rows(
                        self.path, "identity", f"{ca} must equal {' + '.join(cbs)} ({tb})",
                        frame, "COUNT",
                    )  # fmt: skip
            elif self.t in (ta, tb) and ta != tb:
                cell = ca if self.t == ta else cbs[0]
                a = names.index(cell)
                self.totals.append(pl.DataFrame({
                    "GEOID": lv.geoids, "_G": np.full(lv.geoids.size, GEOLEVELS.index(lv.name),
                                                     dtype=np.int8),
                    "COUNT": lv.counts[:, a], LINE: lv.lines + a,
                }))  # fmt: skip


#: The geolevels whose rows the children sums compare with their children's.
_PARENTS = ("NATION", "STATE", "COUNTY", "TRACT")
_SUMS = (*_NESTING, ("STATE", 0, "NATION"))


def _cross_identities(
    check: _Check, root: Path, totals: dict[str, pl.DataFrame], ext: str = "txt"
) -> None:
    """P1's total = P2's (P3's = P4's), geography by geography (``ext``: the file read)."""
    for ta, ca, tb, cbs in _IDENTITIES:
        if ta == tb or ta not in totals or tb not in totals:
            continue
        b = totals[tb].select("GEOID", "_G", pl.col("COUNT").alias("_B"))
        bad = (
            totals[ta]
            .join(b, on=["GEOID", "_G"], how="left")
            .filter(pl.col("COUNT") != pl.col("_B").fill_null(-1))
            .sort(LINE)
        )
        check.rows(
            root / "pl94" / f"{ta}.{ext}", "identity", f"{ca} must equal {' + '.join(cbs)} ({tb})",
            bad, "COUNT",
        )  # fmt: skip
