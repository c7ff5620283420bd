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

Memory: the MDF files are read, checked and turned into per-block histograms (sparse), then
let go; the tables are then validated **one at a time** — read, checked, compared with the
MDF's tabulation (made per table from the per-geolevel sparse histograms) and let go,
keeping only the rows the cross-table identities read; a Parquet copy is compared with its
text file one column at a time; a table whose rows are strictly increasing in (GEOLEVEL,
GEOID, CELL) is checked row against row, without a hash of every row or a sorted copy.
The peak is one table (the largest, P2 or P4: ≈ 80 cells per geography) beside the MDF's
histograms — proportional to the blocks of the release, not streamed state by state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import scipy.sparse as sp

from privtab.data.errors import Problem, ProblemLog
from privtab.publish.validation import OutputValidationError
from privtab.release.marking import NOT_PRIVATE_FILE, PRIVATE_KEY
from privtab.topdown.histogram import CELLS, SHAPE
from privtab.topdown.mdf import MPD_COLUMNS, MUD_COLUMNS, SCHEMA_BUILD_ID
from privtab.topdown.pl94 import (
    COLUMNS,
    GEOLEVELS,
    TABLES,
    cell_names,
    geo_matrix,
    geoid_exprs,
    table_matrix,
)

__all__ = ["OutputValidationError", "ValidationSummary", "validate_release"]

LINE = "_LINE"
SEP = "|"
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


def _read_text(check: _Check, path: Path, columns: Sequence[str]) -> pl.DataFrame | None:
    """A pipe-delimited file as strings with its line numbers (header = line 1)."""
    try:
        with path.open("rb") as fh:
            header = fh.readline().decode("utf-8", "replace").rstrip("\r\n")
    except OSError as exc:
        check.add(path, "layout", f"cannot read: {exc.strerror}")
        return None
    if header != SEP.join(columns):
        check.add(path, "header", f"the header must be {SEP.join(columns)}", 1, None, header)
        return None
    try:
        df = pl.read_csv(
            path,
            separator=SEP,
            infer_schema=False,
            has_header=True,
            quote_char=None,
        )
    except pl.exceptions.PolarsError as exc:
        check.add(path, "field_count", f"not a {len(columns)}-column pipe-delimited file: {exc}")
        return None
    if df.columns != list(columns):
        check.add(path, "header", f"the columns must be {SEP.join(columns)}", 1)
        return None
    return df.with_row_index(LINE, offset=2).with_columns(pl.col(LINE).cast(pl.Int64))


def _check_parquet(
    check: _Check, path: Path, text: pl.DataFrame, private: bool, ints: Sequence[str]
) -> None:
    """The Parquet copy against the text rows, one column at a time (the copy is never held
    whole beside the text rows: bounded by one column)."""
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
        height = pq.ParquetFile(path).metadata.num_rows
    except (OSError, pl.exceptions.PolarsError, ValueError) as exc:
        check.add(path, "parquet_copy", f"cannot read: {exc}")
        return
    flag = (schema.metadata or {}).get(PRIVATE_KEY.encode(), b"").decode()
    if flag != ("true" if private else "false"):
        check.add(
            path,
            "private_marker",
            f"privacy metadata {PRIVATE_KEY} must agree with release.json",
            None,
            PRIVATE_KEY,
            flag,
        )
    cols = [c for c in text.columns if c != LINE]
    if schema.names != cols:
        check.add(
            path, "parquet_copy", f"the columns must be {cols}", None, None, str(schema.names)
        )
        return
    if height != text.height:
        check.add(path, "parquet_copy", f"{height} rows, the text file has {text.height}")
        return
    first: int | None = None
    for c in cols:
        try:
            column = pl.read_parquet(path, columns=[c]).get_column(c)
        except (OSError, pl.exceptions.PolarsError, ValueError) as exc:
            check.add(path, "parquet_copy", f"cannot read: {exc}")
            return
        if c in ints and column.dtype != pl.Int64:
            check.add(path, "parquet_copy", f"column {c} must be Int64", None, c, str(column.dtype))
        differs = np.flatnonzero(
            column.cast(pl.String).ne_missing(text.get_column(c)).fill_null(True).to_numpy()
        )
        if differs.size and (first is None or int(differs[0]) < first):
            first = int(differs[0])
        del column
    if first is not None:
        check.add(path, "parquet_copy", "differs from the text file", first + 1)


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


def _block(df: pl.DataFrame | None = None) -> pl.Expr:
    return pl.concat_str("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK").alias("_BLOCK")


def _int(column: str) -> pl.Expr:
    return pl.col(column).cast(pl.Int64)


def _person_cell() -> pl.Expr:
    n_va, n_h, n_r = SHAPE[1], SHAPE[2], SHAPE[3]
    i = _int
    return (
        ((i("GQTYPE_PL") * n_va + i("VOTING_AGE") - 1) * n_h + i("CENHISP") - 1) * n_r
        + i("CENRACE")
        - 1
    ).alias("_CELL")


def _sort_order(check: _Check, path: Path, df: pl.DataFrame, kind: str) -> None:
    if kind == "persons":
        key = df.select(_block(df), _person_cell(), LINE, "EPNUM")
        seq = key.filter(pl.col("EPNUM").cast(pl.Int64) != pl.col(LINE) - 2)
        check.rows(
            path, "sort_order", "EPNUM must number the rows 0, 1, 2, … in file order", seq, "EPNUM"
        )
        order = ["_BLOCK", "_CELL"]
    else:
        key = df.select(_block(df), "RTYPE", pl.col("HH_STATUS").replace({"0": "3"}), LINE)
        order = ["_BLOCK", "RTYPE", "HH_STATUS"]
    sorted_ok = key.select(order).equals(key.select(order).sort(order, maintain_order=True))
    if not sorted_ok:
        srt = key.with_row_index("_i").sort(order, maintain_order=True).with_row_index("_j")
        first = srt.filter(pl.col("_i") != pl.col("_j")).sort("_i").head(1)
        check.rows(
            path,
            "sort_order",
            "rows must be sorted by geography, then codes",
            first.select(LINE),
            None,
        )


def _mdf_blocks(
    persons: pl.DataFrame, units: pl.DataFrame
) -> tuple[list[str], sp.csr_matrix, np.ndarray, np.ndarray, pl.DataFrame]:
    """Blocks in the MDF (sorted), their persons histograms, [vacant, occupied] housing
    units, GQ facilities, and the geography of each block."""
    p = persons.select(
        _block(persons),
        _person_cell(),
        *("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLKGRPCE", "TABBLK"),
    )
    u = units.select(
        _block(units),
        "RTYPE",
        "HH_STATUS",
        "TABBLKST",
        "TABBLKCOU",
        "TABTRACTCE",
        "TABBLKGRPCE",
        "TABBLK",
    )
    geo = (
        pl.concat([p.drop("_CELL"), u.drop("RTYPE", "HH_STATUS")])
        .unique("_BLOCK", keep="first")
        .sort("_BLOCK")
    )
    ids = geo.get_column("_BLOCK").to_list()
    index = {b: i for i, b in enumerate(ids)}
    pc = p.group_by("_BLOCK", "_CELL").len()
    rows = np.array([index[b] for b in pc.get_column("_BLOCK").to_list()], dtype=np.int64)
    hist = sp.csr_matrix(
        (
            pc.get_column("len").to_numpy().astype(np.int64),
            (rows, pc.get_column("_CELL").to_numpy()),
        ),
        shape=(len(ids), CELLS),
    )
    uc = u.group_by("_BLOCK", "RTYPE", "HH_STATUS").len()
    hu = np.zeros((len(ids), 2), dtype=np.int64)
    gq = np.zeros(len(ids), dtype=np.int64)
    for b, rtype, status, n in uc.iter_rows():
        if rtype == "4":
            gq[index[b]] += n
        elif status in ("1", "2"):
            hu[index[b], 1 if status == "1" else 0] += n
    return ids, hist, hu, gq, geo


def _constraints(
    check: _Check, path: Path, ids: list[str], hist: sp.csr_matrix, hu: np.ndarray, gq: np.ndarray
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


def _read_table(check: _Check, folder: Path, t: str) -> pl.DataFrame | None:
    """One table's rows checked (pattern, duplicate, sort_order), with ``COUNT`` Int64 and
    the GEOLEVEL and cell as their indices ``_G``, ``_C``; ``None`` if it cannot be read or
    breaks a pattern."""
    path = folder / "pl94" / f"{t}.txt"
    df = _read_text(check, path, COLUMNS)
    if df is None:
        return None
    names = cell_names(t)
    rules = (
        (f"GEOLEVEL must be one of {', '.join(GEOLEVELS)}", "GEOLEVEL",
         ~pl.col("GEOLEVEL").is_in(list(GEOLEVELS))),
        (f"CELL must be a cell of {t}", "CELL", ~pl.col("CELL").is_in(list(names))),
        ("COUNT must be a non-negative integer", "COUNT",
         ~pl.col("COUNT").str.contains(r"^[0-9]+$")),
        ("GEOID must be digits (US for the nation)", "GEOID",
         ~pl.col("GEOID").str.contains(r"^([0-9]+|US)$")),
    )  # fmt: skip
    bad = False
    for message, column, broken in rules:
        bad |= check.rows(path, "pattern", message, df.filter(broken), column)
    if bad:
        return None
    df = df.with_columns(
        pl.col("COUNT").cast(pl.Int64),
        pl.col("GEOLEVEL")
        .replace_strict({g: i for i, g in enumerate(GEOLEVELS)}, return_dtype=pl.Int8)
        .alias("_G"),
        pl.col("CELL")
        .replace_strict({c: i for i, c in enumerate(names)}, return_dtype=pl.Int16)
        .alias("_C"),
    )
    if _increasing(df, ("_G", "GEOID", "_C")):
        # sorted with no (GEOID, GEOLEVEL, CELL) twice: neither a hash of every row nor a
        # sorted copy is needed
        ordered = True
    else:
        dup = df.filter(pl.struct("GEOID", "_G", "_C").is_duplicated())
        if check.rows(path, "duplicate", "a (GEOID, GEOLEVEL, CELL) appears twice", dup, "GEOID"):
            return None
        ordered = False
    whole = df.group_by("GEOID", "_G").agg(pl.len().alias("_n"), pl.col(LINE).min())
    check.rows(
        path,
        "duplicate",
        f"a geography must have all {len(names)} cells of {t}",
        whole.filter(pl.col("_n") != len(names)),
        "GEOID",
    )
    del whole
    order = ["_G", "GEOID", "_C"]
    if not ordered:
        srt = df.select(*order, LINE).with_row_index("_i").sort(order).with_row_index("_j")
        first = srt.filter(pl.col("_i") != pl.col("_j")).sort("_i").head(1)
        check.rows(path, "sort_order", "rows must be sorted by GEOLEVEL, GEOID, cell", first, None)
    return df


def _increasing(df: pl.DataFrame, key: Sequence[str]) -> bool:
    """Whether the rows are in strictly increasing (lexicographic) order of ``key``: each
    row compared with the one before it, without sorting a copy."""
    later: pl.Expr = pl.lit(False)
    for c in reversed(key):
        prev = pl.col(c).shift(1)
        later = (pl.col(c) > prev) | ((pl.col(c) == prev) & later)
    return bool(df.select(later.slice(1).all()).item()) if df.height > 1 else True


def _wide(df: pl.DataFrame, geolevel: str) -> tuple[list[str], np.ndarray]:
    sub = df.filter(pl.col("_G") == GEOLEVELS.index(geolevel)).select("GEOID", "_C", "COUNT")
    sub = sub.sort("GEOID", "_C")
    ids = sub.get_column("GEOID").unique(maintain_order=True).to_list()
    vals = sub.get_column("COUNT").to_numpy().astype(np.int64)
    n = len(ids)
    return ids, vals.reshape(n, -1) if n else np.zeros((0, 0), dtype=np.int64)


@dataclass(frozen=True, eq=False)
class _Expected:
    """The MDF's tabulation, per geolevel: the geographies (sorted GEOIDs), their persons
    histograms (sparse ``(n, 2016)``: never wider than the blocks' own) and [vacant,
    occupied] housing units; each table's cells are made from them one table at a time."""

    levels: tuple[str, ...]
    geoids: dict[str, list[str]]
    persons: dict[str, sp.csr_matrix]
    units: dict[str, np.ndarray]
    complete: bool

    def table(self, t: str, geolevel: str) -> np.ndarray:
        """The cells of table ``t`` for the geographies of ``geolevel`` (dense ``(n, cells)``)."""
        m = table_matrix(t)
        if t == "H1":
            out: np.ndarray = self.units[geolevel] @ m.T
            return out
        return np.asarray((self.persons[geolevel] @ sp.csr_matrix(m.T)).toarray(), np.int64)


def _expected(
    check: _Check,
    folder: Path,
    blocks: tuple[list[str], sp.csr_matrix, np.ndarray, np.ndarray, pl.DataFrame],
    grfc: pl.DataFrame | None,
) -> _Expected | None:
    """The tabulation of the MDF for every geolevel the MDF (with ``grfc``, the GRF-C)
    determines; ``None`` if an MDF block is not a GRF-C block."""
    ids, hist, hu, _gq, geo = blocks
    if grfc is not None:
        geo = grfc.select(
            "BLOCK", "TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLKGRPCE", "TABBLK", "PLACEFP",
            "AIANNHCE",
        )  # fmt: skip
        index = {b: i for i, b in enumerate(ids)}
        rows = np.array([index.get(b, -1) for b in geo.get_column("BLOCK").to_list()])
        missing = set(ids) - set(geo.get_column("BLOCK").to_list())
        if missing:
            check.add(
                folder / "mdf" / "persons.txt",
                "tabulation",
                "an MDF block is not a GRF-C block",
                None,
                "TABBLK",
                sorted(missing)[0],
            )
            return None
        sel = sp.csr_matrix(
            (
                np.ones(int((rows >= 0).sum()), dtype=np.int64),
                (np.flatnonzero(rows >= 0), rows[rows >= 0]),
            ),
            shape=(geo.height, len(ids)),
        )
        hist, hu = sel @ hist, sel @ hu
        levels = GEOLEVELS
    else:
        levels = tuple(g for g in GEOLEVELS if g not in ("PLACE", "AIANNH"))
    exprs = geoid_exprs()
    keys = geo.select(**{g: exprs[g] for g in levels})
    out = _Expected(levels, {}, {}, {}, grfc is not None)
    for geolevel in levels:
        gids, g = geo_matrix(keys.get_column(geolevel).to_list())
        out.geoids[geolevel] = gids.tolist()
        out.persons[geolevel] = sp.csr_matrix(g @ hist, dtype=np.int64)
        out.units[geolevel] = np.asarray(g @ hu, dtype=np.int64)
    return out


def _tabulation(check: _Check, folder: Path, t: str, df: pl.DataFrame, want: _Expected) -> None:
    """Table ``t`` against the MDF's tabulation, geolevel by geolevel."""
    path = folder / "pl94" / f"{t}.txt"
    for geolevel in want.levels:
        got_ids, got = _wide(df, geolevel)
        _compare(
            check, path, geolevel, got_ids, got, want.geoids[geolevel],
            want.table(t, geolevel), want.complete,
        )  # fmt: skip


def _compare(
    check: _Check,
    path: Path,
    geolevel: str,
    got_ids: list[str],
    got: np.ndarray,
    want_ids: list[str],
    want: np.ndarray,
    complete: bool,
) -> None:
    """The table's rows of ``geolevel`` against the MDF's tabulation: ``complete`` (with the
    GRF-C) — exactly the same geographies; without — extra geographies must be all zero."""
    gi = {g: i for i, g in enumerate(got_ids)}
    for j, g in enumerate(want_ids):
        i = gi.get(g)
        if i is None:
            if complete or want[j].any():
                check.add(
                    path,
                    "tabulation",
                    f"{geolevel} {g} is missing from the table",
                    None,
                    "GEOID",
                    g,
                )
                return
            continue
        if not np.array_equal(got[i], want[j]):
            c = int(np.flatnonzero(got[i] != want[j])[0])
            check.add(
                path,
                "tabulation",
                f"{geolevel} {g}: cell {c + 1} is {int(got[i][c])}, "
                f"the MDF's tabulation gives {int(want[j][c])}",
                None,
                "GEOID",
                g,
            )
            return
    extra = set(got_ids) - set(want_ids)
    for g in sorted(extra):
        if complete or got[gi[g]].any():
            check.add(
                path,
                "tabulation",
                f"{geolevel} {g} is not a geography of the MDF"
                + ("/GRF-C" if complete else " (or is not all zero)"),
                None,
                "GEOID",
                g,
            )
            return


def _children_sum(check: _Check, folder: Path, t: str, df: pl.DataFrame) -> None:
    path = folder / "pl94" / f"{t}.txt"
    for child, width, parent in (*_NESTING, ("STATE", 0, "NATION")):
        kids = df.filter(pl.col("_G") == GEOLEVELS.index(child))
        if child == "STATE":
            kids = kids.filter(pl.col("GEOID") != "72")
            key = pl.lit("US")
        else:
            key = pl.col("GEOID").str.slice(0, width)
        summed = kids.group_by(key.alias("GEOID"), "_C").agg(pl.col("COUNT").sum().alias("_S"))
        par = df.filter(pl.col("_G") == GEOLEVELS.index(parent))
        if not par.height or not kids.height:
            continue
        j = par.join(summed, on=["GEOID", "_C"], how="left").with_columns(pl.col("_S").fill_null(0))
        bad = j.filter(pl.col("COUNT") != pl.col("_S"))
        check.rows(
            path,
            "children_sum",
            f"a {parent} must equal the sum of its {child} rows",
            bad,
            "COUNT",
        )


def _identity_rows(t: str, df: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``t`` that an identity reads (``CELL`` by name), kept after the table."""
    cells = {c for ta, ca, tb, cbs in _IDENTITIES for c in (ca, *cbs) if t in (ta, tb)}
    return df.filter(pl.col("CELL").is_in(sorted(cells))).select(
        "GEOID", "_G", "CELL", "COUNT", LINE
    )


def _identities(check: _Check, folder: Path, tables: dict[str, pl.DataFrame]) -> None:
    for ta, ca, tb, cbs in _IDENTITIES:
        if ta not in tables or tb not in tables:
            continue
        a = tables[ta].filter(pl.col("CELL") == ca).select("GEOID", "_G", "COUNT", LINE)
        b = (
            tables[tb]
            .filter(pl.col("CELL").is_in(list(cbs)))
            .group_by("GEOID", "_G")
            .agg(pl.col("COUNT").sum().alias("_B"))
        )
        bad = a.join(b, on=["GEOID", "_G"], how="left").filter(
            pl.col("COUNT") != pl.col("_B").fill_null(-1)
        )
        check.rows(
            folder / "pl94" / f"{ta}.txt",
            "identity",
            f"{ca} must equal {' + '.join(cbs)} ({tb})",
            bad,
            "COUNT",
        )


def _manifest(check: _Check, folder: Path, doc: dict[str, Any], rows: dict[str, int]) -> None:
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
        if sha256_file(p) != entry.get("sha256"):
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
    rows: dict[str, int] = {}
    frames: dict[str, pl.DataFrame] = {}
    for kind, cols in _MDF.items():
        path = root / "mdf" / f"{kind}.txt"
        df = _read_text(check, path, cols)
        if df is None:
            continue
        rows[f"mdf/{kind}.txt"] = rows[f"mdf/{kind}.parquet"] = df.height
        ints = ("EPNUM",) if kind == "persons" else ()
        _check_parquet(check, root / "mdf" / f"{kind}.parquet", df, private, ints)
        if _patterns(check, path, df, kind):
            continue
        _sort_order(check, path, df, kind)
        frames[kind] = df
    grfc_frame = _grfc(check, doc, grfc)
    want: _Expected | None = None
    levels: list[str] = []
    if len(frames) == 2:
        # the MDF rows become per-block histograms and are let go before any table is read
        blocks = _mdf_blocks(frames.pop("persons"), frames.pop("units"))
        ids, hist, hu, gq, _geo = blocks
        _constraints(check, root / "mdf" / "persons.txt", ids, hist, hu, gq)
        want = _expected(check, root, blocks, grfc_frame)
        levels = list(want.levels) if want is not None else []
        del blocks, hist, hu, gq, _geo
    # one table at a time: read, checked, compared with the MDF, let go (its identity
    # cells kept for the cross-table identities)
    kept: dict[str, pl.DataFrame] = {}
    for t in TABLES:
        table = _read_table(check, root, t)
        if table is None:
            continue
        rows[f"pl94/{t}.txt"] = rows[f"pl94/{t}.parquet"] = table.height
        _check_parquet(
            check,
            root / "pl94" / f"{t}.parquet",
            table.select(*COLUMNS, LINE).with_columns(pl.col("COUNT").cast(pl.String)),
            private,
            ("COUNT",),
        )
        table = table.drop("GEOLEVEL")
        if want is not None:
            _tabulation(check, root, t, table, want)
        _children_sum(check, root, t, table)
        kept[t] = _identity_rows(t, table)
        del table
    _identities(check, root, kept)
    _manifest(check, root, doc, rows)
    if want is not None and len(kept) == len(TABLES):
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
