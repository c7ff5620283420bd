"""TopDown's inputs: the Census Edited File (CEF) units and persons, read and validated.

Formats (CONTRACTS.md C1, docs/data.md; pipe-delimited with a header, ``Null`` for a
missing value, or Parquet with the same columns):

- ``cef-units``: ``MAFID|TABBLKST|TABBLKCOU|TABTRACTCE|TABBLK|RTYPE|QGQTYP|HH_STATUS|FINAL_POP``
  — one row per housing unit (RTYPE 2; HH_STATUS 1 occupied, 2 vacant) or group-quarters
  facility (RTYPE 4; HH_STATUS 0; QGQTYP its detailed GQ type);
- ``cef-persons``: ``MAFID|EPNUM|TABBLKST|TABBLKCOU|TABTRACTCE|TABBLK|RELSHIP|QGQTYP|QSEX|
  QAGE|CENHISP|CENRACE`` — one row per person, in the order of ``person-records``.

Every row is checked (the rules are declared with :mod:`privtab.data.spec`'s conditions and
compiled twice, as for the person file: a fast flag of every row, the exact naming checks
on the flagged rows); every problem names file, row (text: the line number, the header
being line 1; Parquet: the row position), column and value, the first rows of each kind
are kept and all are counted (:class:`~privtab.data.errors.ProblemLog`). Files are read in
batches: the units are held as compact arrays (≈ 23 bytes a unit), the persons streamed.

Kinds, one file: ``invalid_mafid`` (not 9 digits), ``malformed_id``, ``unknown_state``,
``block_not_in_grfc``, ``invalid_rtype`` (2/4), ``invalid_gq_type`` (not a QGQTYP of
:data:`GQ_CODES` or ``Null``), ``invalid_hh_status`` (0/1/2), ``invalid_final_pop``,
``rtype_gq_mismatch`` (a facility without QGQTYP, a housing unit with one),
``rtype_status_mismatch`` (a facility not HH_STATUS 0, a housing unit with 0),
``vacant_unit_with_persons`` (HH_STATUS 2, FINAL_POP > 0), ``empty_unit`` (an occupied unit
or a facility with FINAL_POP 0), ``duplicate_mafid``; ``invalid_epnum``, ``invalid_relship``
(20–38), ``invalid_sex``, ``invalid_age``, ``age_out_of_range``, ``invalid_cenhisp`` (1/2),
``invalid_cenrace`` (01–63), ``relship_gq_mismatch`` (RELSHIP 37/38 ⇔ a QGQTYP, 37 for
institutional types 1xx–4xx, 38 for the others), ``minor_in_nursing`` (QAGE < 18 in QGQTYP
301), ``duplicate_person`` (a (MAFID, EPNUM) pair repeated within a batch of rows); and
the file-level ``wrong_header``, ``wrong_field_count``, ``missing_value``,
``invalid_utf8``, ``missing_file``, ``empty_file``, ``unreadable``.

Kinds across files (:func:`check_population`): ``unknown_mafid`` (a person's MAFID is not
a unit), ``block_mismatch`` (a person's block is not its unit's), ``gq_person_without_facility``
(a GQ person whose unit is not a facility of its QGQTYP — so every GQ person's block has a
facility of its type), ``household_person_in_facility``, ``person_in_vacant_unit``,
``epnum_out_of_range`` (EPNUM > the unit's FINAL_POP), ``final_pop_mismatch`` (FINAL_POP ≠
the unit's persons; a facility must hold ≥ 1 person: ``empty_facility``),
``householder_count`` (an occupied unit without exactly one RELSHIP 20), and with
household records (taken as a frame: :func:`privtab.data.households.households_frame`,
the validating reader of the file, SafeTab-H's): ``households_per_block``
(household records ≠ occupied units, block by block: a record for a vacant unit shows
here), ``household_mismatch`` (the i-th record against the i-th occupied unit: block,
HHRACE = the householder's CENRACE, HOUSEHOLD_TYPE 4 ⇔ one person); with person records:
``person_records_mismatch`` (row i of ``person-records`` is not row i of ``cef-persons``:
block, QAGE, QSEX, CENRACE, HOUSEHOLDER ⇔ RELSHIP 20, Hispanic QSPAN ⇔ CENHISP 2) and
``row_count_mismatch``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import NDArray

from privtab.data._scan import OpenTable, diagnose_unreadable, find_input, open_table
from privtab.data._tables import ROW
from privtab.data.errors import Problem, ProblemLog
from privtab.data.geography import BLOCK, Geography, block_key_expr, block_key_string
from privtab.data.households import HOUSEHOLD_COLUMNS, HOUSEHOLD_STEM, households_frame
from privtab.data.iterations import ReferenceData
from privtab.data.spec import (
    BLOCK_COLUMNS,
    FIELDS,
    MAX_CENRACE,
    NULL,
    RACE_COLUMNS,
    AllOf,
    AnyOf,
    Digits,
    Equal,
    FieldRule,
    IntBetween,
    Not,
    OneOf,
    RowRule,
    TableSpec,
    _id_rule,
    name_problems,
    to_polars,
)

CEF_UNITS_STEM = "cef-units"
CEF_PERSONS_STEM = "cef-persons"
HOUSEHOLDS_STEM = HOUSEHOLD_STEM
"""The household file's stem (:data:`privtab.data.households.HOUSEHOLD_STEM`)."""
UNIT_COLUMNS = ("MAFID", *BLOCK_COLUMNS, "RTYPE", "QGQTYP", "HH_STATUS", "FINAL_POP")
CEF_PERSON_COLUMNS = (
    "MAFID",
    "EPNUM",
    *BLOCK_COLUMNS,
    "RELSHIP",
    "QGQTYP",
    "QSEX",
    "QAGE",
    "CENHISP",
    "CENRACE",
)
GQ_CODES: tuple[int, ...] = (
    *range(101, 107),
    *range(201, 204),
    301,
    *range(401, 406),
    501,
    601,
    602,
    701,
    702,
    704,
    706,
    801,
    802,
    900,
    901,
    903,
    904,
)
"""The detailed GQ types (QGQTYP) of the 2020 production code list."""
DEFAULT_BATCH_ROWS = 1 << 18
NURSING = "301"


# ---------------------------------------------------------------------------- rules
def _geo_rules(valid_states: Sequence[str]) -> tuple[FieldRule, ...]:
    return (
        *(_id_rule(c) for c in BLOCK_COLUMNS),
        FieldRule(
            "TABBLKST",
            "unknown_state",
            "not the FIPS code of a state, DC or Puerto Rico (72)",
            OneOf("TABBLKST", tuple(valid_states)),
            after=Digits("TABBLKST", 2, 2),
        ),
    )


_GQ_STRINGS = tuple(str(c) for c in GQ_CODES)
_MAFID = FieldRule("MAFID", "invalid_mafid", "MAFID must be 9 digits", Digits("MAFID", 9, 9))
_GQTYPE = FieldRule(
    "QGQTYP",
    "invalid_gq_type",
    "QGQTYP must be Null or a detailed GQ type (101-106, 201-203, 301, 401-405, 501, "
    "601-602, 701, 702, 704, 706, 801-802, 900, 901, 903, 904)",
    OneOf("QGQTYP", _GQ_STRINGS),
    null_ok=True,
)


def units_spec(valid_states: Sequence[str]) -> TableSpec:
    """The rules of ``cef-units`` (one row)."""
    facility, hu = Equal("RTYPE", "4"), Equal("RTYPE", "2")
    no_type = Equal("QGQTYP", NULL)
    zero = IntBetween("FINAL_POP", 0, 0)
    return TableSpec(
        CEF_UNITS_STEM,
        UNIT_COLUMNS,
        (
            _MAFID,
            *_geo_rules(valid_states),
            FieldRule(
                "RTYPE",
                "invalid_rtype",
                "RTYPE must be 2 (housing unit) or 4 (group quarters)",
                OneOf("RTYPE", ("2", "4")),
            ),
            _GQTYPE,
            FieldRule(
                "HH_STATUS",
                "invalid_hh_status",
                "HH_STATUS must be 0 (GQ), 1 (occupied) or 2 (vacant)",
                OneOf("HH_STATUS", ("0", "1", "2")),
            ),
            FieldRule(
                "FINAL_POP",
                "invalid_final_pop",
                "FINAL_POP must be a number of persons (1 to 6 digits)",
                Digits("FINAL_POP", 1, 6),
            ),
        ),
        (
            RowRule(
                "rtype_gq_mismatch",
                "a GQ facility (RTYPE 4) needs a QGQTYP, a housing unit (RTYPE 2) has none",
                (("QGQTYP", AnyOf((AllOf((facility, no_type)), AllOf((hu, Not(no_type)))))),),
            ),
            RowRule(
                "rtype_status_mismatch",
                "a GQ facility (RTYPE 4) has HH_STATUS 0, a housing unit (RTYPE 2) 1 or 2",
                (
                    (
                        "HH_STATUS",
                        AnyOf(
                            (
                                AllOf((facility, OneOf("HH_STATUS", ("1", "2")))),
                                AllOf((hu, Equal("HH_STATUS", "0"))),
                            )
                        ),
                    ),
                ),
            ),
            RowRule(
                "vacant_unit_with_persons",
                "a vacant unit (HH_STATUS 2) has FINAL_POP 0",
                (
                    (
                        "FINAL_POP",
                        AllOf((Equal("HH_STATUS", "2"), Digits("FINAL_POP", 1, 6), Not(zero))),
                    ),
                ),
            ),
            RowRule(
                "empty_unit",
                "an occupied unit or a GQ facility holds at least one person (FINAL_POP ≥ 1)",
                (("FINAL_POP", AllOf((OneOf("HH_STATUS", ("0", "1")), zero))),),
            ),
        ),
        null_marker_columns=("QGQTYP",),
    )


def persons_spec(valid_states: Sequence[str]) -> TableSpec:
    """The rules of ``cef-persons`` (one row)."""
    gq_rel = OneOf("RELSHIP", ("37", "38"))
    no_type = Equal("QGQTYP", NULL)
    institutional = OneOf("QGQTYP", tuple(c for c in _GQ_STRINGS if c[0] in "1234"))
    noninstitutional = OneOf("QGQTYP", tuple(c for c in _GQ_STRINGS if c[0] not in "1234"))
    age_ok = Digits("QAGE", 1, 3)
    return TableSpec(
        CEF_PERSONS_STEM,
        CEF_PERSON_COLUMNS,
        (
            _MAFID,
            FieldRule(
                "EPNUM",
                "invalid_epnum",
                "EPNUM must be a person number 1..999999",
                Digits("EPNUM", 1, 6, nonzero_first=True),
            ),
            *_geo_rules(valid_states),
            FieldRule(
                "RELSHIP",
                "invalid_relship",
                "RELSHIP must be a relationship code 20..38",
                OneOf("RELSHIP", tuple(str(c) for c in range(20, 39))),
            ),
            _GQTYPE,
            FieldRule(
                "QSEX",
                "invalid_sex",
                "QSEX must be 1 (male) or 2 (female)",
                OneOf("QSEX", ("1", "2")),
            ),
            FieldRule("QAGE", "invalid_age", "QAGE must be an integer (1 to 3 digits)", age_ok),
            FieldRule(
                "QAGE",
                "age_out_of_range",
                "QAGE must lie in 0..115",
                IntBetween("QAGE", 0, 115),
                after=age_ok,
            ),
            FieldRule(
                "CENHISP",
                "invalid_cenhisp",
                "CENHISP must be 1 (not Hispanic) or 2 (Hispanic)",
                OneOf("CENHISP", ("1", "2")),
            ),
            FieldRule(
                "CENRACE",
                "invalid_cenrace",
                f"CENRACE must be two digits 01..{MAX_CENRACE}",
                OneOf("CENRACE", tuple(f"{i:02d}" for i in range(1, MAX_CENRACE + 1))),
            ),
        ),
        (
            RowRule(
                "relship_gq_mismatch",
                "RELSHIP 37 (institutional) / 38 (noninstitutional) go with a GQ type of that "
                "kind, household relationships (20-36) with QGQTYP Null",
                (
                    (
                        "RELSHIP",
                        AnyOf(
                            (
                                AllOf((gq_rel, no_type)),
                                AllOf((Not(gq_rel), Not(no_type))),
                                AllOf((Equal("RELSHIP", "37"), noninstitutional)),
                                AllOf((Equal("RELSHIP", "38"), institutional)),
                            )
                        ),
                    ),
                ),
            ),
            RowRule(
                "minor_in_nursing",
                "a person under 18 in a nursing facility (QGQTYP 301)",
                (
                    (
                        "QAGE",
                        AllOf((Equal("QGQTYP", NURSING), age_ok, Not(IntBetween("QAGE", 18, 115)))),
                    ),
                ),
            ),
        ),
        null_marker_columns=("QGQTYP",),
    )


# ---------------------------------------------------------------------------- batches
class _BatchChecker:
    """Checks batches of one table: a fast flag of every row, the naming checks (exact)
    on the flagged rows; returns the valid rows."""

    def __init__(self, file: str, spec: TableSpec, header: Sequence[str]) -> None:
        self.file = file
        self.spec = spec
        self.header = tuple(header)
        flags: list[pl.Expr] = []
        for c in spec.columns:
            s = pl.col(c)
            flags.append(s.str.contains("\ufffd", literal=True).fill_null(False))
            if c not in spec.null_marker_columns:
                flags.append(s.is_null())
        flags += [to_polars(r.bad(), fast=True).fill_null(False) for r in spec.rules(False)]
        self.flag = pl.any_horizontal(flags)

    def check(self, batch: pl.DataFrame, log: ProblemLog) -> pl.DataFrame:
        from privtab.data.persons import report_field_counts

        n = len(self.header)
        report_field_counts(self.file, batch.filter(pl.col(FIELDS) != n), self.header, log)
        b = batch.filter(pl.col(FIELDS) == n)
        flagged = b.select(self.flag).to_series()
        if not flagged.any():
            return b
        bad = b.filter(flagged)
        named: list[pl.Expr] = []

        def run(
            kind: str, cond: pl.Expr, column: str | pl.Expr, value: pl.Expr, msg: str | pl.Expr
        ) -> None:
            named.append(cond)
            hit = bad.filter(cond)
            if hit.height == 0:
                return
            col = pl.lit(column) if isinstance(column, str) else column
            text = pl.lit(msg) if isinstance(msg, str) else msg
            take = hit.head(log.examples).select(
                ROW, col.alias("_C"), value.cast(pl.String).alias("_V"), text.alias("_M")
            )
            log.add_many(
                hit.height,
                [
                    Problem(self.file, kind, m, row=int(r), column=c, value=v)
                    for r, c, v, m in take.iter_rows()
                ],
            )

        name_problems(self.spec, None, run)
        unexplained = bad.filter(~pl.any_horizontal(named)) if named else bad
        if unexplained.height:  # pragma: no cover - the two compilations agree (tested)
            log.add_many(
                unexplained.height,
                [
                    Problem(self.file, "invalid_row", "row rejected by the fast check", row=int(r))
                    for r in unexplained[ROW].head(log.examples).to_list()
                ],
            )
        return b.filter(~flagged)


def _batches(table: OpenTable, rows: int, log: ProblemLog) -> Iterator[pl.DataFrame]:
    """The table's batches; an unreadable text file is diagnosed into ``log``."""
    try:
        yield from table.batches(rows)
    except pl.exceptions.ComputeError as exc:
        diagnose_unreadable(table.path, exc, log)


def _qgq(column: str = "QGQTYP") -> pl.Expr:
    s = pl.col(column)
    out = pl.when(s == NULL).then(0).otherwise(s.cast(pl.UInt16, strict=False))
    return out.cast(pl.UInt16).alias(column)


def blocks_in_grfc(
    log: ProblemLog, file: str, valid: pl.DataFrame, keys: NDArray[np.uint64] | None
) -> NDArray[np.bool_]:
    """Whether the block (``BLOCK``, null: not a block id) of each row (``ROW``) is a
    GRF-C block of ``keys`` (sorted; ``None``: not checked); the others are reported as
    ``block_not_in_grfc``."""
    block = valid[BLOCK].fill_null(0).to_numpy()
    if keys is None:
        return np.ones(block.size, dtype=bool)
    pos = np.minimum(np.searchsorted(keys, block), max(keys.size - 1, 0))
    ok = (keys[pos] == block) if keys.size else np.zeros(block.size, dtype=bool)
    if not ok.all():
        bad = np.flatnonzero(~ok)
        rows = valid[ROW].to_numpy()
        log.add_many(
            bad.size,
            [
                Problem(
                    file,
                    "block_not_in_grfc",
                    "the block is not in GRF-C",
                    row=int(rows[i]),
                    column="TABBLK",
                    value=block_key_string(int(block[i])),
                )
                for i in bad[: log.examples]
            ],
        )
    return ok


# ---------------------------------------------------------------------------- units
@dataclass
class Units:
    """The valid units of a ``cef-units`` file, in file order (compact numpy arrays)."""

    path: Path
    mafid: NDArray[np.uint32]
    block: NDArray[np.uint64]
    qgqtyp: NDArray[np.uint16]
    status: NDArray[np.uint8]
    pop: NDArray[np.uint32]
    rows: NDArray[np.uint32]
    order: NDArray[np.int64] | None = field(init=False)
    """Positions sorted by MAFID; ``None`` when the file is sorted by MAFID already (as
    ``privtab synth`` writes it: no copy)."""
    _sorted: NDArray[np.uint32] = field(init=False)

    def __post_init__(self) -> None:
        m = self.mafid
        if m.size < 2 or bool((m[1:] > m[:-1]).all()):
            self.order, self._sorted = None, m
        else:
            self.order = np.argsort(m, kind="stable")
            self._sorted = m[self.order]

    def __len__(self) -> int:
        return int(self.mafid.size)

    def repeated(self) -> NDArray[np.int64]:
        """Positions (file order) of the units whose MAFID an earlier unit has."""
        s = self._sorted
        dup = np.flatnonzero(s[1:] == s[:-1]) + 1
        return np.sort(dup if self.order is None else self.order[dup])

    def lookup(self, mafid: NDArray[np.uint32]) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
        """Position (file order) of each MAFID's unit, and whether it exists."""
        s = self._sorted
        if s.size == 0:
            return np.zeros(mafid.size, dtype=np.int64), np.zeros(mafid.size, dtype=bool)
        pos = np.minimum(np.searchsorted(s, mafid), s.size - 1)
        found = s[pos] == mafid
        return (pos if self.order is None else self.order[pos]), found


_UNIT_TYPES = {
    ROW: np.uint32,
    "MAFID": np.uint32,
    BLOCK: np.uint64,
    "QGQTYP": np.uint16,
    "HH_STATUS": np.uint8,
    "FINAL_POP": np.uint32,
}


def load_units(
    path: str | Path,
    log: ProblemLog,
    geography: Geography | None = None,
    valid_states: Sequence[str] | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Units | None:
    """Read and validate a ``cef-units`` file; ``None`` if it has any problem. The valid
    rows of every batch are kept as numpy columns (≈ 23 bytes a unit)."""
    path = Path(path)
    name = str(path)
    before = sum(log.counts.values())
    table = open_table(path, UNIT_COLUMNS, log, optional_null=("QGQTYP",))
    if table is None:
        return None
    states = _states(valid_states)
    checker = _BatchChecker(name, units_spec(states), table.header)
    keys = block_keys(geography)
    parts: dict[str, list[NDArray[Any]]] = {c: [] for c in _UNIT_TYPES}
    for batch in _batches(table, batch_rows, log):
        valid = checker.check(batch, log).select(
            ROW,
            pl.col("MAFID").cast(pl.UInt32),
            block_key_expr(),
            _qgq(),
            pl.col("HH_STATUS").cast(pl.UInt8),
            pl.col("FINAL_POP").cast(pl.UInt32),
        )
        blocks_in_grfc(log, name, valid, keys)
        for c, dtype in _UNIT_TYPES.items():
            parts[c].append(valid[c].to_numpy().astype(dtype, copy=False))
    if sum(log.counts.values()) > before:
        return None

    def column(c: str) -> NDArray[Any]:
        got = parts.pop(c)
        return np.concatenate(got) if got else np.zeros(0, dtype=_UNIT_TYPES[c])

    m, b, q, st, fp, r = (column(c) for c in ("MAFID", BLOCK, "QGQTYP", "HH_STATUS",
                                              "FINAL_POP", ROW))  # fmt: skip
    units = Units(path, m, b, q, st, fp, r)
    where = units.repeated()
    if where.size:
        log.add_many(
            where.size,
            [
                Problem(
                    name,
                    "duplicate_mafid",
                    "MAFID of another unit (MAFIDs are unique)",
                    row=int(units.rows[i]),
                    column="MAFID",
                    value=f"{int(units.mafid[i]):09d}",
                )
                for i in where[: log.examples]
            ],
        )
        return None
    return units


def _states(valid_states: Sequence[str] | None) -> tuple[str, ...]:
    from privtab.data.geography import VALID_STATES

    return tuple(valid_states) if valid_states is not None else VALID_STATES


def block_keys(geography: Geography | None) -> NDArray[np.uint64] | None:
    """The sorted GRF-C block keys (``None`` without a geography)."""
    if geography is None:
        return None
    keys: NDArray[np.uint64] = geography.blocks[BLOCK].to_numpy()
    return keys


# ---------------------------------------------------------------------------- persons
@dataclass
class PopulationCheck:
    """Streams ``cef-persons`` against the units: validates every row and the cross-file
    rules of persons and units (see the module docstring). Per unit it keeps the persons
    counted, the householders and the householder's CENRACE (≈ 6 bytes a unit)."""

    units: Units
    log: ProblemLog
    geography: Geography | None = None
    valid_states: Sequence[str] | None = None
    batch_rows: int = DEFAULT_BATCH_ROWS
    cross: bool = True
    """False: the person rows alone (the units file could not be read)."""
    persons: int = 0
    count: NDArray[np.uint32] = field(init=False)
    heads: NDArray[np.uint8] = field(init=False)
    head_race: NDArray[np.uint8] = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.units)
        self.count = np.zeros(n, dtype=np.uint32)
        self.heads = np.zeros(n, dtype=np.uint8)
        self.head_race = np.zeros(n, dtype=np.uint8)

    def batches(self, path: str | Path) -> Iterator[pl.DataFrame]:
        """The valid rows of every batch of the person file (ROW, MAFID, EPNUM, BLOCK,
        RELSHIP, QGQTYP, QSEX, QAGE, CENHISP, CENRACE; typed), after its checks."""
        path = Path(path)
        name = str(path)
        table = open_table(path, CEF_PERSON_COLUMNS, self.log, optional_null=("QGQTYP",))
        if table is None:
            return
        checker = _BatchChecker(name, persons_spec(_states(self.valid_states)), table.header)
        keys = block_keys(self.geography)
        for batch in _batches(table, self.batch_rows, self.log):
            self.persons += batch.height
            valid = checker.check(batch, self.log).select(
                ROW,
                pl.col("MAFID").cast(pl.UInt32),
                pl.col("EPNUM").cast(pl.UInt32),
                block_key_expr(),
                pl.col("RELSHIP").cast(pl.UInt8),
                _qgq(),
                pl.col("QSEX").cast(pl.UInt8),
                pl.col("QAGE").cast(pl.UInt8),
                pl.col("CENHISP").cast(pl.UInt8),
                pl.col("CENRACE").cast(pl.UInt8),
            )
            dup = valid.select(~pl.struct("MAFID", "EPNUM").is_first_distinct()).to_series()
            if dup.any():
                self._report(name, valid.filter(dup), "duplicate_person", "EPNUM",
                             "the same (MAFID, EPNUM) twice", pl.col("EPNUM"))  # fmt: skip
            ok = blocks_in_grfc(self.log, name, valid, keys)
            if self.cross:
                self._cross(name, valid.filter(pl.Series(ok)))
            yield valid

    def _report(
        self, file: str, rows: pl.DataFrame, kind: str, column: str, message: str, value: pl.Expr
    ) -> None:
        take = rows.head(self.log.examples).select(ROW, value.cast(pl.String).alias("_V"))
        self.log.add_many(
            rows.height,
            [
                Problem(file, kind, message, row=int(r), column=column, value=v)
                for r, v in take.iter_rows()
            ],
        )

    def _cross(self, file: str, v: pl.DataFrame) -> None:
        u = self.units
        pos, found = u.lookup(v["MAFID"].to_numpy())
        checks: list[tuple[str, str, str, NDArray[np.bool_], pl.Expr]] = []
        checks.append(("unknown_mafid", "MAFID", "no unit of cef-units has this MAFID",
                       ~found, pl.col("MAFID")))  # fmt: skip
        pos = np.where(found, pos, 0)
        block = v[BLOCK].to_numpy()
        qgq = v["QGQTYP"].to_numpy()
        status = u.status[pos]
        unit_gq = u.qgqtyp[pos]
        checks += [
            ("block_mismatch", "TABBLK", "the person's block is not the block of its unit",
             found & (u.block[pos] != block), pl.col(BLOCK).cast(pl.String).str.zfill(15)),
            ("gq_person_without_facility", "QGQTYP",
             "a GQ person's unit must be a GQ facility of the same type in the same block",
             found & (qgq > 0) & (unit_gq != qgq), pl.col("QGQTYP")),
            ("household_person_in_facility", "MAFID",
             "a household person (QGQTYP Null) whose unit is a GQ facility",
             found & (qgq == 0) & (status == 0), pl.col("MAFID")),
            ("person_in_vacant_unit", "MAFID", "a person in a vacant unit (HH_STATUS 2)",
             found & (status == 2), pl.col("MAFID")),
            ("epnum_out_of_range", "EPNUM", "EPNUM is larger than the unit's FINAL_POP",
             found & (v["EPNUM"].to_numpy() > u.pop[pos]), pl.col("EPNUM")),
        ]  # fmt: skip
        for kind, column, message, bad, value in checks:
            if bad.any():
                self._report(file, v.filter(pl.Series(bad)), kind, column, message, value)
        at = pos[found]
        np.add.at(self.count, at, 1)
        head = found & (v["RELSHIP"].to_numpy() == 20)
        touched = pos[head]
        np.add.at(self.heads, touched, 1)
        self.heads[touched] = np.minimum(self.heads[touched], 2)  # 2: "more than one"
        self.head_race[touched] = v["CENRACE"].to_numpy()[head]

    def finish(self) -> None:
        """The per-unit rules, once every person has been read."""
        u = self.units
        name = str(u.path)
        fac = u.status == 0
        empty = fac & (self.count == 0)
        self._units(name, empty, "empty_facility", "FINAL_POP",
                    "a GQ facility without any person in cef-persons", u.pop)  # fmt: skip
        wrong = ~empty & (self.count != u.pop)
        self._units(name, wrong, "final_pop_mismatch", "FINAL_POP",
                    "FINAL_POP differs from the unit's persons in cef-persons", u.pop)  # fmt: skip
        heads = (u.status == 1) & (self.heads != 1)
        self._units(name, heads, "householder_count", "MAFID",
                    "an occupied unit needs exactly one householder (RELSHIP 20) in "
                    "cef-persons", u.mafid)  # fmt: skip
        stray = (u.status != 1) & (self.heads > 0)
        self._units(name, stray, "householder_count", "MAFID",
                    "a householder (RELSHIP 20) outside an occupied unit", u.mafid)  # fmt: skip

    def _units(
        self,
        file: str,
        bad: NDArray[np.bool_],
        kind: str,
        column: str,
        message: str,
        values: NDArray[Any],
    ) -> None:
        where = np.flatnonzero(bad)
        if where.size == 0:
            return
        fmt: Callable[[int], str] = (lambda x: f"{x:09d}") if column == "MAFID" else str
        self.log.add_many(
            where.size,
            [
                Problem(
                    file,
                    kind,
                    message,
                    row=int(self.units.rows[i]),
                    column=column,
                    value=fmt(int(values[i])),
                )
                for i in where[: self.log.examples]
            ],
        )


# ---------------------------------------------------------------------------- households
_STATE_KEY = 10**13
"""A block key divided by this is its state (the first 2 of its 15 digits)."""
_CHUNK = 1 << 22


def _state_of(keys: NDArray[np.uint64]) -> NDArray[np.uint8]:
    """The state of each block key (0 for a null block), in chunks: 1 byte a key."""
    out = np.empty(keys.size, dtype=np.uint8)
    for i in range(0, keys.size, _CHUNK):
        out[i : i + _CHUNK] = keys[i : i + _CHUNK] // _STATE_KEY
    return out


def check_households(
    frame: pl.DataFrame, file: str, check: PopulationCheck, log: ProblemLog
) -> None:
    """Household records against the occupied units: as many per block, and record i is
    occupied unit i (block, HHRACE = the householder's CENRACE, HOUSEHOLD_TYPE 4 ⇔ one
    person). Blocks are counted state by state (in block order, as one national pass
    would) and records paired in chunks: beyond the frame and the units, the memory is
    bounded by the largest state."""
    u = check.units
    blocks = frame[BLOCK].fill_null(0).to_numpy()
    rows = frame[ROW].to_numpy()
    h_state = _state_of(blocks)
    u_state = _state_of(u.block)
    u_state[u.status != 1] = 255  # not an occupied unit (no state code is 255)
    present = np.bincount(h_state, minlength=256) + np.bincount(u_state, minlength=256)
    n_bad = 0
    probs: list[Problem] = []
    for state in np.flatnonzero(present[:255]):
        mine = blocks[h_state == state]
        mine_rows = rows[h_state == state]
        keys, first = np.unique(mine, return_index=True)
        n_rec = np.bincount(np.searchsorted(keys, mine), minlength=keys.size)
        ukeys, n_occ = np.unique(u.block[u_state == state], return_counts=True)
        allk = np.union1d(keys, ukeys)
        a = np.zeros(allk.size, dtype=np.int64)
        b = np.zeros(allk.size, dtype=np.int64)
        a[np.searchsorted(allk, keys)] = n_rec
        b[np.searchsorted(allk, ukeys)] = n_occ
        bad = np.flatnonzero(a != b)
        n_bad += bad.size
        for i in bad[: max(log.examples - len(probs), 0)]:
            k = allk[i]
            j = np.searchsorted(keys, k)
            row = int(mine_rows[first[j]]) if j < keys.size and keys[j] == k else None
            probs.append(
                Problem(file, "households_per_block",
                        f"{a[i]} household record(s) in this block, {b[i]} occupied unit(s) "
                        "in cef-units", row=row, column="TABBLK", value=block_key_string(int(k)))
            )  # fmt: skip
    if n_bad:
        log.add_many(n_bad, probs)
        return
    del h_state, u_state
    hhrace = frame["HHRACE"].to_numpy()
    htype = frame["HOUSEHOLD_TYPE"].to_numpy()
    n_wrong = 0
    found: list[tuple[int, int]] = []  # (record, unit) of the first mismatches
    done = 0  # records paired so far
    for start in range(0, len(u), _CHUNK):
        unit = start + np.flatnonzero(u.status[start : start + _CHUNK] == 1)
        unit = unit[: max(frame.height - done, 0)]
        if unit.size == 0:
            continue
        at = slice(done, done + unit.size)
        wrong = (blocks[at] != u.block[unit]) | (hhrace[at] != check.head_race[unit])
        wrong |= (htype[at] == 4) != (u.pop[unit] == 1)
        where = np.flatnonzero(wrong)
        n_wrong += where.size
        found += [(done + int(i), int(unit[i])) for i in where[: log.examples - len(found)]]
        done += unit.size
    if n_wrong:
        log.add_many(
            n_wrong,
            [
                Problem(
                    file,
                    "household_mismatch",
                    f"record {i + 1} is not the occupied unit MAFID "
                    f"{int(u.mafid[j]):09d} (block, HHRACE = its householder's "
                    "CENRACE, HOUSEHOLD_TYPE 4 for one person)",
                    row=int(rows[i]),
                    column="HHRACE",
                    value=str(int(hhrace[i])),
                )
                for i, j in found
            ],
        )


# ---------------------------------------------------------------------------- person records
def check_person_records(
    person_path: Path,
    check: PopulationCheck,
    cef_path: Path,
    reference: ReferenceData | None,
    log: ProblemLog,
) -> None:
    """``person-records`` row i against ``cef-persons`` row i (see the module docstring)."""
    from privtab.data.persons import PERSON_COLUMNS

    hisp_codes = _hispanic_codes(reference)
    pt = open_table(person_path, PERSON_COLUMNS, log, optional_null=RACE_COLUMNS)
    ct = open_table(cef_path, CEF_PERSON_COLUMNS, log, optional_null=("QGQTYP",))
    if pt is None or ct is None:
        return
    key = pl.concat_str(BLOCK_COLUMNS)
    left: tuple[str | pl.Expr, ...] = (
        ROW,
        key.alias("B"),
        pl.col("QAGE").cast(pl.Int32, strict=False).alias("A"),
        pl.col("QSEX").alias("S"),
        pl.col("CENRACE").alias("R"),
        (pl.col("HOUSEHOLDER") == "True").alias("H"),
        (pl.col("QSPAN").is_in(hisp_codes) if hisp_codes else pl.lit(None)).alias("X"),
    )
    right: tuple[pl.Expr, ...] = (
        key.alias("B"),
        pl.col("QAGE").cast(pl.Int32, strict=False).alias("A"),
        pl.col("QSEX").alias("S"),
        pl.col("CENRACE").alias("R"),
        (pl.col("RELSHIP") == "20").alias("H"),
        (pl.col("CENHISP") == "2").alias("X"),
    )
    name = str(person_path)
    n_left = n_right = 0
    try:
        # batch by batch (Parquet: row group by row group), never the whole files
        read = (*BLOCK_COLUMNS, "QAGE", "QSEX", "CENRACE")
        lcols = (*read, "HOUSEHOLDER", *(["QSPAN"] if hisp_codes else []))
        lb = (b.select(left) for b in pt.batches(check.batch_rows, lcols))
        rb = (b.select(right) for b in ct.batches(check.batch_rows, (*read, "RELSHIP", "CENHISP")))
        pending_l: pl.DataFrame | None = None
        pending_r: pl.DataFrame | None = None
        while True:
            if pending_l is None or pending_l.height == 0:
                pending_l = next(lb, None)
            if pending_r is None or pending_r.height == 0:
                pending_r = next(rb, None)
            if pending_l is None or pending_r is None:
                break
            k = min(pending_l.height, pending_r.height)
            a, b = pending_l.head(k), pending_r.head(k)
            pending_l, pending_r = pending_l.slice(k), pending_r.slice(k)
            n_left += k
            n_right += k
            cols = ["B", "A", "S", "R", "H"] + (["X"] if hisp_codes else [])
            diff = pl.any_horizontal([a[c].ne_missing(b[c]) for c in cols])
            bad = a.select(ROW, diff.alias("D")).filter(pl.col("D"))
            if bad.height:
                log.add_many(
                    bad.height,
                    [
                        Problem(
                            name,
                            "person_records_mismatch",
                            "not the same person as the same row of cef-persons (block, "
                            "QAGE, QSEX, CENRACE, HOUSEHOLDER ⇔ RELSHIP 20, Hispanic "
                            "QSPAN ⇔ CENHISP 2)",
                            row=int(r),
                            column="QAGE",
                        )
                        for r in bad[ROW].head(log.examples).to_list()
                    ],
                )
        n_left += sum(df.height for df in ([pending_l] if pending_l is not None else []))
        n_left += sum(df.height for df in lb)
        n_right += sum(df.height for df in ([pending_r] if pending_r is not None else []))
        n_right += sum(df.height for df in rb)
    except pl.exceptions.ComputeError:
        return  # the file's own reader reports it
    if n_left != n_right:
        log.add(
            Problem(name, "row_count_mismatch",
                    f"{n_left} person records but {n_right} rows in {cef_path.name}: "
                    "the two files hold the same persons, row by row")
        )  # fmt: skip


def _hispanic_codes(reference: ReferenceData | None) -> list[str]:
    """QSPAN codes of Hispanic persons: the codes of the level-1 and level-2 ethnicity
    iterations (empty without a reference)."""
    if reference is None:
        return []
    codes: set[int] = set()
    for it in reference.ethnicity_iterations():
        if it.level in (1, 2):
            codes |= set(it.codes)
    return [f"{c:04d}" for c in sorted(codes)]


# ---------------------------------------------------------------------------- folder
@dataclass(frozen=True)
class PopulationSummary:
    """What :func:`check_population` read."""

    units: int
    occupied: int
    vacant: int
    facilities: int
    persons: int
    households: int | None
    person_records: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "units": self.units,
            "occupied": self.occupied,
            "vacant": self.vacant,
            "gq_facilities": self.facilities,
            "persons": self.persons,
            "household_records": self.households,
            "person_records_checked": self.person_records,
        }


def check_population(
    data_dir: str | Path,
    log: ProblemLog,
    *,
    geography: Geography | None = None,
    reference: ReferenceData | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    households: pl.DataFrame | None = None,
    progress: Callable[[int], None] | None = None,
) -> PopulationSummary | None:
    """Validate ``cef-units`` and ``cef-persons`` of a folder and every cross-file rule
    (with ``household-records`` and ``person-records`` when the folder holds them);
    problems into ``log``. ``households``: the household records as a frame (default: read
    with :func:`privtab.data.households.households_frame`, every row validated)."""
    data = Path(data_dir)
    units_path = find_input(data, CEF_UNITS_STEM, log)
    persons_path = find_input(data, CEF_PERSONS_STEM, log)
    if units_path is None or persons_path is None:
        return None
    before = sum(log.counts.values())
    units = load_units(units_path, log, geography, batch_rows=batch_rows)
    check = PopulationCheck(
        units if units is not None else _no_units(units_path),
        log,
        geography,
        batch_rows=batch_rows,
        cross=units is not None,
    )
    for _ in check.batches(persons_path):
        if progress is not None:
            progress(check.persons)
    if units is None or sum(log.counts.values()) > before:
        return None  # rows with bad values would show as cross-file problems too
    check.finish()
    n_households: int | None = None
    hh_path = _optional(data, HOUSEHOLDS_STEM)
    if households is None and hh_path is not None:
        households = households_frame(hh_path, log, reference=reference, geography=geography)
    if households is not None:
        n_households = households.height
        check_households(households, str(hh_path or "household-records"), check, log)
    person_path = _optional(data, "person-records")
    if person_path is not None:
        check_person_records(person_path, check, persons_path, reference, log)
    return PopulationSummary(
        units=len(units),
        occupied=int((units.status == 1).sum()),
        vacant=int((units.status == 2).sum()),
        facilities=int((units.status == 0).sum()),
        persons=check.persons,
        households=n_households,
        person_records=person_path is not None,
    )


def _no_units(path: Path) -> Units:
    e32, e16, e8 = np.zeros(0, np.uint32), np.zeros(0, np.uint16), np.zeros(0, np.uint8)
    return Units(path, e32, np.zeros(0, np.uint64), e16, e8, e32, e32)


def _optional(data: Path, stem: str) -> Path | None:
    found = [
        data / f"{stem}{ext}" for ext in (".txt", ".parquet") if (data / f"{stem}{ext}").exists()
    ]
    return found[0] if len(found) == 1 else None


def has_population(data_dir: str | Path) -> bool:
    """Whether a folder holds TopDown's inputs (``cef-units`` or ``cef-persons``)."""
    data = Path(data_dir)
    return any((data / f"{s}{e}").exists() for s in (CEF_UNITS_STEM, CEF_PERSONS_STEM)
               for e in (".txt", ".parquet"))  # fmt: skip


__all__ = [
    "CEF_PERSONS_STEM",
    "CEF_PERSON_COLUMNS",
    "CEF_UNITS_STEM",
    "GQ_CODES",
    "HOUSEHOLDS_STEM",
    "HOUSEHOLD_COLUMNS",
    "UNIT_COLUMNS",
    "PopulationCheck",
    "PopulationSummary",
    "Units",
    "block_keys",
    "blocks_in_grfc",
    "check_households",
    "check_person_records",
    "check_population",
    "has_population",
    "load_units",
    "persons_spec",
    "units_spec",
]
