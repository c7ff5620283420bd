"""Output validation of a TopDown release folder: the files as written, checked by rule.

A release run validates its staging folder before renaming it into place (a failure
publishes nothing); ``privtab topdown validate-output R`` validates a written folder. The
checks use only the folder (and, with ``grfc``, the public GRF-C), never the confidential
data (the run checks the invariants against those before writing:
:func:`privtab.topdown.assemble.check_state`). Rules (``kind``):

====================  =====================================================================
``layout``            ``release.json``, ``mdf/{persons,units}.{txt,parquet}``,
                      ``pl94/<TABLE>.{txt,parquet}`` for P1–P5 and H1 exist
``document``          ``release.json`` is a TopDown release's and states no number below
                      its exact value (:func:`privtab.topdown.document.read_document`)
``manifest``          every file listed under ``outputs`` has its SHA-256 and row count, and
                      no data file is unlisted
``private_marker``    ``NOT_PRIVATE`` exists exactly when ``private`` is false, and every
                      Parquet file's privacy metadata agrees
``header``            each text file's first line is exactly its columns
``pattern``           every value is one of its column's codes (MDF: the Census codes;
                      tables: a GEOLEVEL, the table's cells, a non-negative integer COUNT)
``sort_order``        MDF rows by geography then codes; ``EPNUM`` 0, 1, 2, … in file order;
                      table rows by GEOLEVEL, GEOID, cell
``duplicate``         no (GEOID, GEOLEVEL, CELL) twice; every geography has every cell
``parquet_copy``      each Parquet copy holds the same rows as its text file
``tabulation``        every table cell equals the tabulation of the MDF (persons: P1–P5;
                      units: H1); a geography without MDF rows has only zeros; places and
                      AIANNH areas (they need the GRF-C) with ``grfc``
``children_sum``      within each table: STATE = Σ its COUNTY, COUNTY = Σ TRACT, TRACT = Σ
                      BLOCK_GROUP = Σ BLOCK, NATION = Σ STATE (but 72)
``identity``          P1 and P2 totals equal (P3, P4 too); P2 total = Hispanic + not
                      Hispanic; P5 total = institutional + noninstitutional; H1 total =
                      occupied + vacant
``constraint``        per block (MDF): persons in group quarters ≥ GQ facilities, none
                      without a facility, household persons only with housing units, no
                      persons under 18 in nursing facilities (GQTYPE_PL 3)
====================  =====================================================================

Every failure is a :class:`~privtab.data.errors.Problem` naming the file, the line
(header = line 1; Parquet: the 1-based row), the column and value where they exist, and
the rule; all are raised together as one :class:`OutputValidationError`.

Streaming (memory bounded by one state, not by the nation): every text file is read in
row batches of :data:`BLOCK_BYTES` (pyarrow's streaming CSV reader, every column a string)
and its Parquet copy alongside it, batch against batch. The MDF files are read together
in geographic order: each batch is checked (codes, sort order against the previous row,
``EPNUM``) and aggregated by block (an MDF with a bad code or out of order is reported
and its tabulation not compared); when a state is complete its blocks become sparse
per-block histograms, are checked against the constraints, and their tabulation — every
in-state geography's persons histogram (its non-zero cells) and housing units — is written
to a scratch folder (the nation and the AIANNH areas, which cross states, are summed and
written last). Each table is then read in row batches regrouped into whole geographies:
the rows must be strictly increasing in (GEOLEVEL, GEOID, CELL) (checked against the row
before, so a repeated key is a ``duplicate`` and an earlier one ``sort_order`` — a table
out of order is reported and not compared further, its rows cannot be matched in a
stream), each geography must have all its cells, and the geographies are compared with
the scratch tabulation read in the same GEOID order (``tabulation``: the first problem of
each geolevel), summed into their parents (kept: the nation, states, counties and tracts
of one table — the tract level bounds it, ≈ 85,000 × 73 cells at the 2020 size) and
checked against the in-table identities; the totals the P1 = P2 and P3 = P4 identities
read are kept (one number per geography) until the second table is read. Everything
vectorised (numpy, polars, scipy.sparse) per batch or per state.
"""

from __future__ import annotations

import hashlib
import heapq
import io
import itertools
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import scipy.sparse as sp

from privtab.data.errors import Problem, ProblemLog
from privtab.publish.validation import OutputValidationError
from privtab.release.marking import NOT_PRIVATE_FILE, PRIVATE_KEY
from privtab.topdown.histogram import CELLS, SHAPE
from privtab.topdown.mdf import MPD_COLUMNS, MUD_COLUMNS, SCHEMA_BUILD_ID
from privtab.topdown.pl94 import (
    COLUMNS,
    GEOLEVELS,
    IN_STATE,
    TABLES,
    cell_names,
    geo_matrix,
    geoid_exprs,
    table_matrix,
)

__all__ = ["OutputValidationError", "ValidationSummary", "validate_release"]

LINE = "_LINE"
SEP = "|"
#: Text read per batch (bytes): the memory of a file being validated.
BLOCK_BYTES = 16 << 20
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
class ValidationSummary:
    """What :func:`validate_release` checked (when it did not raise)."""

    folder: str
    files: dict[str, int] = field(default_factory=dict)
    checks: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "valid": True,
            "folder": self.folder,
            "files": self.files,
            "checks": self.checks,
            "not_checked": self.skipped,
        }


class _Check:
    """The problem log of one validation, with helpers to report located rows."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.log = ProblemLog()

    def name(self, path: Path) -> str:
        return str(path)

    def raise_if_any(self) -> None:
        if self.log:
            raise OutputValidationError(self.log.problems, self.log.counts)

    def add(
        self,
        path: Path,
        kind: str,
        message: str,
        row: int | None = None,
        column: str | None = None,
        value: str | None = None,
    ) -> None:
        self.log.add(Problem(self.name(path), kind, message, row, column, value))

    def rows(
        self, path: Path, kind: str, message: str, bad: pl.DataFrame, column: str | None
    ) -> bool:
        """Report the rows of ``bad`` (with :data:`LINE`); ``True`` if there were any."""
        if not bad.height:
            return False
        first = bad.head(self.log.examples)
        self.log.add_many(
            bad.height,
            (
                Problem(
                    self.name(path),
                    kind,
                    message,
                    int(r[LINE]),
                    column,
                    None if column is None or r.get(column) is None else str(r[column]),
                )
                for r in first.iter_rows(named=True)
            ),
        )
        return True


class _TextStream:
    """A pipe-delimited file read in row batches (every column a string, with its line
    numbers in :data:`LINE`; header = line 1): at most one batch (≈ :data:`BLOCK_BYTES` of
    text) is held. ``ok`` is false once the header or a line's field count is wrong (a
    problem is logged); ``rows`` counts the data rows read."""

    def __init__(self, check: _Check, path: Path, columns: Sequence[str]) -> None:
        self.check, self.path, self.columns = check, path, tuple(columns)
        self.ok = True
        self.rows = 0

    def _header(self) -> bool:
        try:
            with self.path.open("rb") as fh:
                header = fh.readline().decode("utf-8", "replace").rstrip("\r\n")
        except OSError as exc:
            self.check.add(self.path, "layout", f"cannot read: {exc.strerror}")
            return False
        if header != SEP.join(self.columns):
            self.check.add(
                self.path, "header", f"the header must be {SEP.join(self.columns)}", 1, None,
                header,
            )  # fmt: skip
            return False
        return True

    def _failed(self, exc: Exception) -> None:
        self.ok = False
        self.check.add(
            self.path,
            "field_count",
            f"not a {len(self.columns)}-column pipe-delimited file: {exc}",
            self.rows + 2,
        )

    def __iter__(self) -> Iterator[pl.DataFrame]:
        if not self._header():
            self.ok = False
            return
        strings = {c: pa.string() for c in self.columns}
        try:
            reader = pacsv.open_csv(
                self.path,
                read_options=pacsv.ReadOptions(
                    skip_rows=1, column_names=list(self.columns), block_size=BLOCK_BYTES
                ),
                parse_options=pacsv.ParseOptions(delimiter=SEP, quote_char=False),
                convert_options=pacsv.ConvertOptions(
                    column_types=strings, strings_can_be_null=False
                ),
            )
        except (pa.ArrowInvalid, OSError) as exc:
            self._failed(exc)
            return
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            except (pa.ArrowInvalid, OSError) as exc:
                self._failed(exc)
                return
            df = pl.DataFrame(pl.from_arrow(batch))
            first = self.rows + 2
            self.rows += df.height
            yield df.with_columns(
                pl.int_range(first, first + df.height, dtype=pl.Int64).alias(LINE)
            )


class _ParquetCopy:
    """A Parquet copy compared with its text file batch by batch (:meth:`compare` with each
    text batch in order, then :meth:`finish`): at most one batch of each is held."""

    def __init__(
        self, check: _Check, path: Path, columns: Sequence[str], private: bool,
        ints: Sequence[str],
    ) -> None:  # fmt: skip
        self.check, self.path, self.columns = check, path, list(columns)
        self.ok = False
        self.first: int | None = None
        self.at = 0
        self._buf: pl.DataFrame | None = None
        try:
            pf = pq.ParquetFile(path)
            schema = pf.schema_arrow
            self.height = pf.metadata.num_rows
        except (OSError, pa.ArrowException, ValueError) as exc:
            check.add(path, "parquet_copy", f"cannot read: {exc}")
            return
        flag = (schema.metadata or {}).get(PRIVATE_KEY.encode(), b"").decode()
        if flag != ("true" if private else "false"):
            check.add(
                path, "private_marker",
                f"privacy metadata {PRIVATE_KEY} must agree with release.json", None,
                PRIVATE_KEY, flag,
            )  # fmt: skip
        if schema.names != self.columns:
            check.add(
                path, "parquet_copy", f"the columns must be {self.columns}", None, None,
                str(schema.names),
            )  # fmt: skip
            return
        for c in ints:
            if schema.field(c).type != pa.int64():
                check.add(
                    path, "parquet_copy", f"column {c} must be Int64", None, c,
                    str(schema.field(c).type),
                )  # fmt: skip
        self._batches = pf.iter_batches(batch_size=1 << 16)
        self.ok = True

    def _take(self, n: int) -> pl.DataFrame | None:
        parts = [] if self._buf is None else [self._buf]
        have = sum(p.height for p in parts)
        while have < n:
            try:
                batch = next(self._batches)
            except StopIteration:
                break
            except (OSError, pa.ArrowException) as exc:
                self.check.add(self.path, "parquet_copy", f"cannot read: {exc}")
                self.ok = False
                return None
            parts.append(pl.DataFrame(pl.from_arrow(batch)))
            have += parts[-1].height
        if have < n:
            return None  # fewer rows than the text file: reported by finish
        whole = pl.concat(parts) if len(parts) > 1 else parts[0]
        self._buf = whole.slice(n)
        return whole.slice(0, n)

    def compare(self, text: pl.DataFrame) -> None:
        """The next ``text.height`` rows of the copy against the text batch ``text``."""
        if not self.ok or (self.first is not None) or not text.height:
            self.at += text.height
            return
        got = self._take(text.height)
        if got is None:
            self.at += text.height
            return
        for c in self.columns:
            differs = np.flatnonzero(
                got.get_column(c).cast(pl.String)
                .ne_missing(text.get_column(c)).fill_null(True).to_numpy()
            )  # fmt: skip
            if differs.size and (self.first is None or self.at + int(differs[0]) < self.first):
                self.first = self.at + int(differs[0])
        self.at += text.height

    def finish(self, text_rows: int) -> None:
        if not self.ok:
            return
        if self.height != text_rows:
            self.check.add(
                self.path, "parquet_copy", f"{self.height} rows, the text file has {text_rows}"
            )
            return
        if self.first is not None:
            self.check.add(self.path, "parquet_copy", "differs from the text file", self.first + 1)


class _CopyAsText:
    """A text file read the fast way, for a file with nothing wrong: its Parquet copy read
    in slices, each slice written back as pipe-delimited text and compared **byte for
    byte** with the text file on disk, and yielded as the text file's rows would be (every
    column a string, :data:`LINE`) — the text holds exactly these values, so every rule
    checked on them holds for the text. ``ok`` turns false (and a problem is logged) at
    the first difference; ``sha256``: the text file's, once all its bytes were read."""

    def __init__(
        self, check: _Check, path: Path, columns: Sequence[str], private: bool,
        ints: Sequence[str],
    ) -> None:  # fmt: skip
        self.check, self.path, self.columns, self.ints = check, path, tuple(columns), ints
        self.ok = True
        self.rows = 0
        self.sha256: str | None = None
        self._copy = _ParquetCopy(check, path.with_suffix(".parquet"), columns, private, ints)

    def _differs(self) -> None:
        self.ok = False
        self.check.add(self.path, "parquet_copy", "differs from its Parquet copy")

    def __iter__(self) -> Iterator[pl.DataFrame]:
        if not self._copy.ok:
            self.ok = False
            return
        header = (SEP.join(self.columns) + "\n").encode()
        digest = hashlib.sha256()
        step = max(1, BLOCK_BYTES // 64)
        frame = pl.scan_parquet(self.path.with_suffix(".parquet"))
        with self.path.open("rb") as fh:
            head = fh.read(len(header))
            digest.update(head)
            if head != header:
                self._differs()
                return
            while self.rows < self._copy.height:
                df = frame.slice(self.rows, step).collect()
                if not df.height or any(df.null_count().row(0)):
                    self._differs()
                    return
                buf = io.BytesIO()
                df.write_csv(buf, separator=SEP, include_header=False)
                want = buf.getvalue()
                got = fh.read(len(want))
                digest.update(got)
                if got != want:
                    self._differs()
                    return
                first = self.rows + 2
                self.rows += df.height
                yield df.with_columns(
                    *(pl.col(c).cast(pl.String) for c in self.ints),
                    pl.int_range(first, first + df.height, dtype=pl.Int64).alias(LINE),
                )
            if fh.read(1):
                self._differs()
                return
        self.sha256 = digest.hexdigest()


def _not_after(key: pl.DataFrame, strict: bool) -> np.ndarray:
    """Indices ``i ≥ 1`` of the rows of ``key`` (its columns in order) that do not come
    after row ``i − 1`` (lexicographically: ``strict`` — not greater; else — less)."""
    later: pl.Expr = pl.lit(not strict)
    for c in reversed(key.columns):
        prev = pl.col(c).shift(1)
        later = (pl.col(c) > prev) | ((pl.col(c) == prev) & later)
    if key.height < 2:
        return np.zeros(0, dtype=np.int64)
    ok = key.select(later.fill_null(True)).to_series().to_numpy()
    return np.flatnonzero(~ok[1:]) + 1


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
    sha256: str | None = None

    def states(self) -> Iterator[tuple[str, pl.DataFrame]]:
        path = self.root / "mdf" / f"{self.kind}.txt"
        cols = _MDF[self.kind]
        ints = ("EPNUM",) if self.kind == "persons" else ()
        text: _TextStream | _CopyAsText
        copy: _ParquetCopy | None = None
        if self.fast:
            text = _CopyAsText(self.check, path, cols, self.private, ints)
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
                seq = key.filter(pl.col("EPNUM").cast(pl.Int64, strict=False) != pl.col(LINE) - 2)
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
            self.sha256 = text.sha256
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
) -> tuple[dict[str, int], bool]:
    """The MDF streamed state by state (:class:`_MdfFile`): each state's blocks checked
    against the constraints and added to the expected tabulation. Returns the files' rows
    and whether the tabulation may be compared (both files usable, every MDF block a
    GRF-C block)."""
    fast = hashes is not None
    files = {k: _MdfFile(check, root, k, private, fast=fast) for k in _MDF}
    states = [] if grfc is None else sorted(grfc.get_column("TABBLKST").unique().to_list())
    streams = [_tagged(k, f.states()) for k, f in files.items()]
    grfc_states = ((st, "grfc", i, None) for i, st in enumerate(states))
    comparable = True
    previous = ""
    path = root / "mdf" / "persons.txt"
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
    return rows, comparable


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
    usable: bool = True
    ordered: bool = True
    rows: int = 0
    totals: list[pl.DataFrame] = field(default_factory=list)
    _parents: dict[str, list[_Level]] = field(default_factory=dict)
    _sums: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    _readers: dict[str, _ExpectedReader] = field(default_factory=dict)
    _reported: set[str] = field(default_factory=set)
    _level: int = -1
    _cells: dict[int, pl.Series] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.root / "pl94" / f"{self.t}.txt"

    def run(self) -> bool:
        """The whole table; ``True`` if it could be read and checked (no pattern,
        duplicate or order problem)."""
        names = cell_names(self.t)
        text = _TextStream(self.check, self.path, COLUMNS)
        copy = _ParquetCopy(
            self.check, self.path.with_suffix(".parquet"), COLUMNS, self.private, ("COUNT",)
        )
        last: pl.DataFrame | None = None
        carry: pl.DataFrame | None = None
        codes = {g: i for i, g in enumerate(GEOLEVELS)}
        cells = {c: i for i, c in enumerate(names)}
        for df in text:
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
        copy.finish(text.rows)
        self.rows = text.rows
        self.usable &= text.ok
        if not (self.usable and self.ordered):
            return False
        if carry is not None:
            self._chunk(carry, len(names))
        self._finish()
        return True

    def run_from_copy(self) -> str | None:
        """The whole table the fast way, for a table with nothing wrong: the Parquet copy
        read in slices of whole geographies, each slice written back as pipe-delimited
        text and compared **byte for byte** with the text file on disk (so the text holds
        exactly the copy's values: what is checked below holds for both files), then
        checked vectorised per slice — no null, GEOLEVEL and CELL among the codes, COUNT
        ≥ 0, every geography its ``width`` cells in order, GEOIDs (digits or ``US``)
        strictly increasing within a geolevel, geolevels in order — and its geographies
        compared, summed and checked as :meth:`run` does. Returns the text file's SHA-256
        (its bytes were all read) when the table passed everything; ``None`` at the first
        sign of anything else: the caller then validates the table again with :meth:`run`
        (with its own problem log), which locates every problem."""
        names = cell_names(self.t)
        width = len(names)
        parquet = self.path.with_suffix(".parquet")
        copy = _ParquetCopy(self.check, parquet, COLUMNS, self.private, ("COUNT",))
        if not copy.ok or self.check.log:
            return None
        header = (SEP.join(COLUMNS) + "\n").encode()
        digest = hashlib.sha256()
        step = max(1, BLOCK_BYTES // 32 // width) * width
        codes = {g: i for i, g in enumerate(GEOLEVELS)}
        frame = pl.scan_parquet(parquet)
        at = 0
        last: tuple[int, str] | None = None
        with self.path.open("rb") as fh:
            head = fh.read(len(header))
            digest.update(head)
            if head != header:
                return None
            while at < copy.height:
                df = frame.slice(at, step).collect()
                if not df.height or df.height % width or any(df.null_count().row(0)):
                    return None
                buf = io.BytesIO()
                df.write_csv(buf, separator=SEP, include_header=False)
                want = buf.getvalue()
                got = fh.read(len(want))
                digest.update(got)
                if got != want:
                    return None
                last = self._copy_slice(df, at, width, codes, names, last)
                if last is None:
                    return None
                at += df.height
            rest = fh.read(1)
        if rest or self.check.log:
            return None
        self.rows = at
        self._finish()
        return None if self.check.log else digest.hexdigest()

    def _copy_slice(
        self, df: pl.DataFrame, at: int, width: int, codes: dict[str, int],
        cells: Sequence[str], last: tuple[int, str] | None,
    ) -> tuple[int, str] | None:  # fmt: skip
        """One slice of :meth:`run_from_copy` (whole geographies, rows ``at`` …): checked,
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
        lines = at + 2 + width * np.arange(n, dtype=np.int64)
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


def _cross_identities(check: _Check, root: Path, totals: dict[str, pl.DataFrame]) -> None:
    """P1's total = P2's (P3's = P4's), geography by geography."""
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
            root / "pl94" / f"{ta}.txt", "identity", f"{ca} must equal {' + '.join(cbs)} ({tb})",
            bad, "COUNT",
        )  # fmt: skip


def _manifest(
    check: _Check, folder: Path, doc: dict[str, Any], rows: dict[str, int],
    hashes: dict[str, str] | None = None,
) -> None:  # fmt: skip
    """``hashes``: the SHA-256 of files whose every byte the validation already read."""
    from privtab.data.inputs import sha256_file

    listed = doc.get("outputs", {}).get("files", {})
    data_files = {
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file()
        and not p.relative_to(folder).as_posix().startswith(".")
        and p.name not in ("release.json", "report.html", NOT_PRIVATE_FILE)
    }
    for rel in sorted(data_files - set(listed)):
        check.add(folder / rel, "manifest", "a file not listed in release.json's outputs")
    for rel, entry in sorted(listed.items()):
        p = folder / rel
        if not p.is_file():
            check.add(p, "manifest", "listed in release.json but missing")
            continue
        if ((hashes or {}).get(rel) or sha256_file(p)) != entry.get("sha256"):
            check.add(
                p,
                "manifest",
                "its SHA-256 differs from release.json's (modified after the release was written)",
                None,
                "sha256",
                entry.get("sha256"),
            )
        if rel in rows and "rows" in entry and entry["rows"] != rows[rel]:
            check.add(p, "manifest", f"{rows[rel]} rows, release.json says {entry['rows']}")


def validate_release(folder: str | Path, *, grfc: str | Path | None = None) -> ValidationSummary:
    """Validate a TopDown release folder (module docstring); ``grfc``: the GRF-C it was made
    from (its SHA-256 is checked against ``release.json``) for the place and AIANNH
    tabulations and the complete block list. Raises :class:`OutputValidationError`."""
    from privtab.topdown.document import DocumentError, read_document

    root = Path(folder)
    check = _Check(root)
    summary = ValidationSummary(str(root))
    required = [root / "mdf" / f"{n}.{e}" for n in _MDF for e in ("txt", "parquet")]
    required += [root / "pl94" / f"{t}.{e}" for t in TABLES for e in ("txt", "parquet")]
    for p in required:
        if not p.is_file():
            check.add(p, "layout", "missing")
    try:
        doc = read_document(root)
    except DocumentError as exc:
        check.add(
            Path(exc.file or root / "release.json"),
            "document",
            exc.message,
            None,
            exc.column,
            exc.value,
        )
        doc = None
    check.raise_if_any()
    assert doc is not None
    private = bool(doc["private"])
    if (root / NOT_PRIVATE_FILE).exists() == private:
        check.add(
            root / NOT_PRIVATE_FILE,
            "private_marker",
            "must exist exactly when release.json says private: false",
        )
    grfc_frame = _grfc(check, doc, grfc)
    if grfc_frame is not None:
        levels = GEOLEVELS
    else:
        levels = tuple(g for g in GEOLEVELS if g not in ("PLACE", "AIANNH"))
    with tempfile.TemporaryDirectory(prefix="privtab-validate-") as scratch:
        # the MDF, state by state: checked, and its tabulation written to the scratch folder
        # the fast way first (the MDF read from its Parquet copies, checked byte for byte
        # against the text); at any problem, again from the text, locating every problem
        hashes: dict[str, str] = {}
        fast = _Check(root)
        expected = _Expected(Path(scratch) / "fast", levels, grfc_frame is not None)
        rows, comparable = _scan_mdf(fast, root, private, grfc_frame, expected, hashes)
        if fast.log or len(hashes) != len(_MDF):
            hashes.clear()
            expected = _Expected(Path(scratch) / "text", levels, grfc_frame is not None)
            rows, comparable = _scan_mdf(check, root, private, grfc_frame, expected)
        del grfc_frame
        want = expected if comparable else None
        # then each table, row batch by row batch, against it
        totals: dict[str, pl.DataFrame] = {}
        checked = 0
        for t in TABLES:
            # the fast way for a table with nothing wrong; else again, locating every problem
            table = _Table(_Check(root), root, t, private, want)
            sha = table.run_from_copy()
            if sha is not None:
                hashes[f"pl94/{t}.txt"] = sha
                checked += 1
            else:
                table = _Table(check, root, t, private, want)
                checked += table.run()
            rows[f"pl94/{t}.txt"] = rows[f"pl94/{t}.parquet"] = table.rows
            if table.usable and table.ordered and table.totals:
                totals[t] = pl.concat(table.totals)
            del table
            for ta, _ca, tb, _cbs in _IDENTITIES:
                if ta != tb and t == tb:
                    _cross_identities(check, root, {k: totals[k] for k in (ta, tb) if k in totals})
                    totals.pop(ta, None)
                    totals.pop(tb, None)
    _manifest(check, root, doc, rows, hashes)
    if want is not None and checked == len(TABLES):
        summary.checks = [
            "layout",
            "document",
            "manifest",
            "private_marker",
            "header",
            "pattern",
            "sort_order",
            "duplicate",
            "parquet_copy",
            "tabulation",
            "children_sum",
            "identity",
            "constraint",
        ]
        if "PLACE" not in levels:
            summary.skipped["tabulation of PLACE and AIANNH"] = "needs the GRF-C (--grfc)"
    check.raise_if_any()
    summary.files = rows
    return summary


def _grfc(check: _Check, doc: dict[str, Any], grfc: str | Path | None) -> pl.DataFrame | None:
    if grfc is None:
        return None
    from privtab.data.inputs import sha256_file
    from privtab.topdown.folder import read_grfc

    path = Path(grfc)
    if path.is_dir():
        from privtab.topdown.folder import GRFC_STEM, find_input

        path = find_input(path, GRFC_STEM)
    stated = doc.get("public_inputs", {}).get("GRF-C", {}).get("sha256")
    if sha256_file(path) != stated:
        check.add(
            path,
            "document",
            "not the GRF-C this release was made from (SHA-256 differs "
            "from release.json's public_inputs)",
            None,
            "sha256",
            stated,
        )
        return None
    return _in_runs(read_grfc(path), doc)


def _in_runs(grfc: pl.DataFrame, doc: dict[str, Any]) -> pl.DataFrame:
    """The GRF-C blocks of the runs the release holds (``US``: the 50 states and DC;
    ``PR``: Puerto Rico, state 72): a US-only release has no Puerto Rico geography."""
    runs = set(doc.get("runs") or {})
    pr = pl.col("TABBLKST") == "72"
    if runs == {"US"}:
        return grfc.filter(~pr)
    if runs == {"PR"}:
        return grfc.filter(pr)
    return grfc
