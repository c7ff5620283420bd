"""Person records: streaming reader, vectorised validation and the canonical typed form.

Format (Census, unchanged): ``person-records.txt``, pipe-delimited with a header,
``QAGE|QSEX|HOUSEHOLDER|TABBLKST|TABBLKCOU|TABTRACTCE|TABBLK|CENRACE|QRACE1..QRACE8|QSPAN``,
``Null`` for an absent race code; or ``person-records.parquet`` with the same columns
(values as strings or integers; a null race code = ``Null``).

Validation is the rules of :func:`privtab.data.spec.person_spec` (declared once, compiled
to polars), evaluated batch by batch (default 2¹⁸ rows), so 10⁸ rows are checked in bounded
memory; the Spark engine runs this reader in its tasks, each on a part of the file
(:func:`person_parts`, :attr:`PersonReader.part`). Each problem names file, line (text:
the 1-based line number, the header being line 1; Parquet: the row position), column and
value; the first rows of each kind are kept and every offending row is counted. Kinds:

``wrong_field_count`` (a short line is reported by its first missing field),
``missing_value`` (a Parquet null), ``invalid_utf8``, ``malformed_id`` (TABBLKST 2 digits,
TABBLKCOU 3, TABTRACTCE 6, TABBLK 4), ``block_not_in_grfc``, ``invalid_age`` (not 1 to 3
digits), ``age_out_of_range`` (outside 0–115), ``invalid_sex`` (QSEX not 1/2),
``invalid_householder`` (not True/False), ``invalid_cenrace`` (not 01–63),
``missing_race_code`` (QRACE1 is Null), ``invalid_race_code`` (not ``Null`` or four
digits), ``unknown_race_code`` (not in the code list), ``race_code_after_null``,
``duplicate_race_code``, ``too_many_race_codes`` (more than ``max_race_codes``),
``invalid_ethnicity_code``, ``unknown_ethnicity_code``; and for the file, ``wrong_header``,
``empty_file``, ``no_persons`` (a header and no rows, see
:func:`privtab.data.load_inputs`'s ``allow_empty``), ``unreadable``.

The canonical form used by engines (:data:`CANONICAL_SCHEMA`): ``BLOCK`` (UInt64 block
key), ``UNIT`` (UInt32 geo unit, when a geography is given), ``QAGE`` (UInt8), ``QSEX``
(UInt8, 1 male, 2 female), ``QSPAN`` (UInt16) and the race-code combination packed in
``RACE_KEY1``/``RACE_KEY2`` (see :mod:`privtab.data.membership`).

Speed: each batch is dictionary-encoded (:class:`privtab.data._scan.CodedBatch`: a Parquet
file is read as its stored dictionaries, no per-row string is built) and checked by
:class:`_CodedPath`: every naming check of a column is evaluated once per *distinct value*
of that column (a few thousand per batch, whatever the rows) and gathered to the rows by
integer index; the race-code row rules run on the integer codes of every row; the block
key is looked up in the sorted GRF-C keys (once per run of equal keys: files are usually
sorted by block). Only the rows it flags go through the naming checks (:class:`_Checker`,
the rules compiled to regexes), which produce the messages. Both flag exactly the same rows
(property test), so the messages, kinds, rows and counts are those of the naming checks.
Valid rows are handed on as typed numpy arrays (:class:`TypedPersons`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import NDArray

from privtab.data._scan import (
    Coded,
    CodedBatch,
    FilePart,
    diagnose_unreadable,
    format_of,
    open_table,
    table_parts,
)
from privtab.data._tables import NULL, ROW
from privtab.data.errors import Problem, ProblemLog, checked
from privtab.data.geography import BLOCK, UNIT, Geography, block_key_expr
from privtab.data.iterations import ReferenceData
from privtab.data.membership import RACE_KEYS, pack_race_codes, race_keys_expr
from privtab.data.spec import (
    BLOCK_COLUMNS,
    FIELDS,
    ID_WIDTHS,
    MAX_CENRACE,
    PERSON_COLUMNS,
    RACE_COLUMNS,
    REPLACEMENT,
    Digits,
    FieldRule,
    RowRule,
    TableSpec,
    code_int,
    field_count_message,
    name_problems,
    person_spec,
    to_polars,
)

PERSON_STEM = "person-records"
CANONICAL_SCHEMA: dict[str, pl.DataType] = {
    BLOCK: pl.UInt64(),
    UNIT: pl.UInt32(),
    "QAGE": pl.UInt8(),
    "QSEX": pl.UInt8(),
    "QSPAN": pl.UInt16(),
    RACE_KEYS[0]: pl.UInt64(),
    RACE_KEYS[1]: pl.UInt64(),
}
DEFAULT_BATCH_ROWS = 1 << 18


def scan_persons(path: str | Path) -> pl.LazyFrame:
    """Lazy raw scan: ``ROW``, ``_NF`` and every person column as the exact string in the file.

    ``ROW`` is the line number (text; the header is line 1) or the row position (Parquet);
    ``_NF`` the number of ``|``-separated fields of the line. Checks the header only
    (raises :class:`InputValidationError` when it is wrong). Values are not validated: use
    :class:`PersonReader` for that.
    """
    table = checked(
        lambda log: open_table(Path(path), PERSON_COLUMNS, log, optional_null=RACE_COLUMNS)
    )
    return table.frame


def canonical_persons(raw: pl.LazyFrame | pl.DataFrame) -> pl.LazyFrame:
    """Raw (validated) person rows → the canonical typed columns of :data:`CANONICAL_SCHEMA`."""
    race = [
        pl.when(pl.col(c) == NULL).then(None).otherwise(pl.col(c)).cast(pl.UInt16).alias(c)
        for c in RACE_COLUMNS
    ]
    return (
        raw.lazy()
        .with_columns(race)
        .select(
            block_key_expr(),
            pl.col("QAGE").cast(pl.UInt8),
            pl.col("QSEX").cast(pl.UInt8),
            pl.col("QSPAN").cast(pl.UInt16),
            race_keys_expr(RACE_COLUMNS),
        )
        .unnest("RACE_KEYS")
    )


@dataclass
class PersonReader:
    """Streams a person file in batches, validating every row as it goes.

    ``batches()`` yields the canonical form of the valid rows of each batch; problems go to
    ``log``. After the last batch call :meth:`raise_if_invalid` (nothing may be written
    before that). ``reference`` (code list) and ``geography`` (GRF-C blocks) enable the
    code and block checks; ``states`` restricts the yielded rows to those states (every row
    is still validated). ``part`` reads one :class:`FilePart` of the file only (a Spark
    task's, :func:`person_parts`): its problems are logged with rows numbered from 1 within
    the part (:meth:`shifted_log` numbers them in the file), and ``part_rows`` is then the
    rows (text: lines) it holds.
    """

    path: Path
    reference: ReferenceData | None
    geography: Geography | None
    max_race_codes: int
    batch_rows: int = DEFAULT_BATCH_ROWS
    states: Sequence[str] | None = None
    log: ProblemLog = field(default_factory=ProblemLog)
    rows_read: int = 0
    rows_valid: int = 0
    part: FilePart | None = None
    part_rows: int = 0

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        if not 1 <= self.max_race_codes <= len(RACE_COLUMNS):
            raise ValueError(f"max_race_codes must be in 1..8, got {self.max_race_codes}")

    def batches(self) -> Iterator[pl.DataFrame]:
        """The valid rows of every batch in canonical form (:data:`CANONICAL_SCHEMA`)."""
        for typed in self.typed_batches():
            yield typed.canonical()

    def typed_batches(self) -> Iterator[TypedPersons]:
        """The valid rows of every batch as typed arrays (nothing yielded for a batch
        without any); every row has been checked and its problems logged."""
        spec = self.spec()
        table = open_table(self.path, spec.columns, self.log, optional_null=RACE_COLUMNS)
        if table is None:
            return
        name = str(self.path)
        coded = self.coded_path()
        checker = _Checker(name, self.reference, self.geography, self.max_race_codes, spec)
        states = None if self.states is None else np.asarray([int(x) for x in self.states])
        if self.part is None:
            coded_batches = table.coded_batches(self.batch_rows)
        else:
            self.part_rows, coded_batches = table.part_batches(self.part, self.batch_rows)
        try:
            for batch in coded_batches:
                kept, bad, typed = coded.check(batch)
                self.rows_read += int(np.count_nonzero(kept))
                flagged = kept & bad
                if flagged.any():
                    # slow path, only on the offending rows: name every problem exactly
                    unexplained = checker.check(batch.frame(flagged), self.log)
                    if unexplained.height:  # pragma: no cover - a bug if reached
                        _report_unexplained(name, unexplained, self.log)
                good = kept & ~bad
                if states is not None:
                    good &= np.isin(typed.block // np.uint64(10**13), states)
                self.rows_valid += int(np.count_nonzero(good))
                if good.any():
                    yield typed.take(good)
        except pl.exceptions.ComputeError as exc:
            if self.part is not None:
                raise  # the file's line numbers are the whole file's: diagnosed by its reader
            diagnose_unreadable(self.path, exc, self.log)

    def raise_if_invalid(self) -> None:
        self.log.raise_if_any()

    def spec(self) -> TableSpec:
        """The rules of the file (a reader of another record file overrides this and
        :meth:`coded_path`: the same streaming validation for any Census record file)."""
        return person_spec(self.max_race_codes)

    def coded_path(self) -> _CodedPath:
        """The flagging and typing of the file's dictionary-encoded batches."""
        return _CodedPath(self.reference, self.geography, self.max_race_codes)


def person_parts(path: str | Path, parts: int) -> list[FilePart]:
    """At most ``parts`` parts of a person file of about equal size, for parallel readers
    (:class:`PersonReader`'s ``part``): runs of whole Parquet row groups, or text byte
    ranges (each part holds the lines that start in it)."""
    return table_parts(Path(path), parts)


def validate_persons(
    path: str | Path,
    reference: ReferenceData | None,
    geography: Geography | None,
    max_race_codes: int,
    log: ProblemLog,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> int:
    """Validate every row of a person file (problems into ``log``); returns rows read."""
    reader = PersonReader(Path(path), reference, geography, max_race_codes, batch_rows, log=log)
    for _ in reader.typed_batches():
        pass
    return reader.rows_read


def read_persons(
    path: str | Path,
    reference: ReferenceData | None,
    geography: Geography | None,
    max_race_codes: int = 8,
) -> pl.DataFrame:
    """Read a whole (small) person file, validated, in canonical form; raise on problems."""
    reader = PersonReader(Path(path), reference, geography, max_race_codes)
    parts = list(reader.batches())
    reader.raise_if_invalid()
    if not parts:
        schema = {k: v for k, v in CANONICAL_SCHEMA.items() if geography or k != UNIT}
        return pl.DataFrame(schema=schema)
    return pl.concat(parts)


def code_strings(reference: ReferenceData | None) -> pl.Series | None:
    """The reference code list as four-digit strings (``None`` without a reference)."""
    if reference is None:
        return None
    return pl.Series([f"{c:04d}" for c in sorted(reference.codes)], dtype=pl.String)


@dataclass(frozen=True)
class TypedPersons:
    """Typed person rows (numpy arrays, one entry per row): the block key, the geo unit
    (with a geography), age, sex (1 male, 2 female), ethnicity code and ``race``, the
    codes of QRACE1..QRACE8 in file order (0 = ``Null``), shape (rows, 8)."""

    block: NDArray[np.uint64]
    unit: NDArray[np.uint32] | None
    age: NDArray[np.uint8]
    sex: NDArray[np.uint8]
    span: NDArray[np.uint16]
    race: NDArray[np.uint16]

    def __len__(self) -> int:
        return int(self.block.size)

    def take(self, rows: NDArray[np.bool_]) -> TypedPersons:
        """The rows where ``rows`` holds."""
        if rows.all():
            return self
        return TypedPersons(
            self.block[rows],
            None if self.unit is None else self.unit[rows],
            self.age[rows],
            self.sex[rows],
            self.span[rows],
            self.race[rows],
        )

    def slots(self) -> NDArray[np.uint64]:
        """Each person's row within its unit's cells: ``(sex − 1) · 128 + age``."""
        return (self.sex.astype(np.uint64) - np.uint64(1)) * np.uint64(128) + self.age

    def canonical(self) -> pl.DataFrame:
        """The canonical form (:data:`CANONICAL_SCHEMA`; ``UNIT`` only with a geography)."""
        k1, k2 = pack_race_codes(self.race)
        unit = [] if self.unit is None else [pl.Series(UNIT, self.unit, pl.UInt32)]
        return pl.DataFrame(
            [
                pl.Series(BLOCK, self.block, pl.UInt64),
                *unit,
                pl.Series("QAGE", self.age, pl.UInt8),
                pl.Series("QSEX", self.sex, pl.UInt8),
                pl.Series("QSPAN", self.span, pl.UInt16),
                pl.Series(RACE_KEYS[0], k1, pl.UInt64),
                pl.Series(RACE_KEYS[1], k2, pl.UInt64),
            ]
        )


_BAD, _FILLED = np.uint8(1), np.uint8(2)
_LOOKUP_ROWS = 1 << 16
"""Batches of at least this many rows look the row rules up by QRACE1 (tables of 2¹⁶)."""
_BLOCK_SCALE = {"TABBLKST": 10**13, "TABBLKCOU": 10**10, "TABTRACTCE": 10**4, "TABBLK": 1}
_TYPES: dict[str, type[np.unsignedinteger[Any]]] = {
    "QAGE": np.uint8,
    "QSEX": np.uint8,
    **dict.fromkeys(BLOCK_COLUMNS, np.uint64),
    **dict.fromkeys((*RACE_COLUMNS, "QSPAN"), np.uint16),
    **dict.fromkeys(("HOUSEHOLD_TYPE", "TEN"), np.uint8),  # household records
}


class _CodedPath:
    """Flags and types a dictionary-encoded batch (:class:`privtab.data._scan.CodedBatch`).

    A :class:`~privtab.data.spec.FieldRule` depends on its own column only, so the naming
    checks of :class:`_Checker` (missing value, invalid UTF-8, every field rule — the exact
    compilation) are evaluated once per *distinct value* of each column and gathered to the
    rows; the :class:`~privtab.data.spec.RowRule` rules (race codes) run on the integer
    codes of every row (the ``fast`` compilation, exact for rows whose codes are valid —
    a row with an invalid code is flagged by that code's field rule anyway); the block key
    is looked up in the sorted GRF-C keys. A row is flagged exactly when :class:`_Checker`
    reports a problem in it (tested property).
    """

    def __init__(
        self,
        reference: ReferenceData | None,
        geography: Geography | None,
        max_race_codes: int,
        spec: TableSpec | None = None,
    ) -> None:
        self.spec = spec if spec is not None else person_spec(max_race_codes)
        self.codes = code_strings(reference)
        rules = self.spec.rules(self.codes is not None)
        self.field_rules = {
            c: [r for r in rules if isinstance(r, FieldRule) and r.column == c]
            for c in self.spec.columns
        }
        self.row_rules = [r for r in rules if isinstance(r, RowRule)]
        ints = {c: c for c in RACE_COLUMNS}
        self._row_rules_expr = (
            pl.any_horizontal(
                [to_polars(r.bad(), self.codes, fast=True, ints=ints) for r in self.row_rules]
            ).fill_null(True)
            if self.row_rules
            else pl.lit(False)
        )
        self._cache: dict[str, tuple[pl.Series, NDArray[np.uint8], NDArray[Any] | None]] = {}
        if geography is None:
            self.block_keys = self.block_units = None
        else:
            blocks = geography.blocks.sort(BLOCK)
            self.block_keys = blocks[BLOCK].to_numpy()
            self.block_units = blocks[UNIT].to_numpy()

    def _per_value(
        self, column: str, values: pl.Series
    ) -> tuple[NDArray[np.uint8], NDArray[Any] | None]:
        """Flags (:data:`_BAD`, :data:`_FILLED`) and typed value of every distinct value
        (computed once while the column's dictionary stays the same, as it usually does
        from one row group of a Parquet file to the next)."""
        cached = self._cache.get(column)
        if cached is not None and (
            cached[0] is values or cached[0].equals(values, null_equal=True)
        ):
            return cached[1], cached[2]
        s = pl.col(column)
        utf8 = s.str.contains(REPLACEMENT, literal=True).fill_null(False)
        usable = s.is_not_null() & ~utf8
        checks = [utf8, *([] if column in self.spec.null_marker_columns else [s.is_null()])]
        checks += [
            usable & to_polars(r.bad(), self.codes).fill_null(False)
            for r in self.field_rules[column]
        ]
        dtype = _TYPES.get(column)
        typed = (
            []
            if dtype is None
            else [
                (code_int(column) if dtype is np.uint16 else s.cast(pl.UInt64, strict=False))
                .fill_null(0)
                .cast(pl.UInt64)
                .alias("_T")
            ]
        )
        out = pl.DataFrame({column: values}).select(
            (
                pl.any_horizontal(checks).cast(pl.UInt8)
                | ((s.fill_null("") != "").cast(pl.UInt8) * int(_FILLED))
            ).alias("_F"),
            *typed,
        )
        flags = out["_F"].to_numpy()
        typed_values = None
        if dtype is not None:
            typed_values = out["_T"].to_numpy().astype(dtype)
            if column in _BLOCK_SCALE:
                typed_values = typed_values * np.uint64(_BLOCK_SCALE[column])
        self._cache[column] = (values, flags, typed_values)
        return flags, typed_values

    def check(self, batch: CodedBatch) -> tuple[NDArray[np.bool_], NDArray[np.bool_], TypedPersons]:
        """``(kept, bad, typed)`` of every row: ``kept`` is False for a blank row (dropped),
        ``bad`` True for a row with any problem; ``typed`` is meaningless where ``bad``."""
        flags = np.zeros(batch.height, np.uint8)
        typed: dict[str, NDArray[Any]] = {}
        block_values: dict[str, NDArray[np.uint64]] = {}
        for c in self.spec.columns:
            col = batch.columns[c]
            per_flag, per_value = self._per_value(c, col.values)
            _or_flags(flags, per_flag, col)
            if per_value is None:
                continue
            if c in BLOCK_COLUMNS:
                block_values[c] = per_value  # gathered once per run of a block (_blocks)
            else:
                typed[c] = per_value[col.codes]
        bad = (flags & _BAD).astype(bool)
        bad |= batch.fields != len(self.spec.columns)
        columns = [typed[c] for c in RACE_COLUMNS]
        race = np.column_stack(columns)
        if self.row_rules:
            bad |= self._row_bad(columns)
        block, unit = self._blocks(batch, block_values, bad)
        kept = (flags & _FILLED).astype(bool)
        persons = TypedPersons(block, unit, typed["QAGE"], typed["QSEX"], typed["QSPAN"], race)
        return kept, bad, persons

    def _rules_bad(self, columns: Sequence[NDArray[np.uint16]]) -> NDArray[np.bool_]:
        """Whether any row rule holds, row by row, for rows of race codes ``columns``."""
        frame = pl.DataFrame(dict(zip(RACE_COLUMNS, columns, strict=True)))
        return frame.select(self._row_rules_expr).to_series().to_numpy()

    def _row_bad(self, columns: list[NDArray[np.uint16]]) -> NDArray[np.bool_]:
        """:meth:`_rules_bad` of every row. The rules are a function of a row's race codes:
        a row whose QRACE2..QRACE8 are all ``Null`` (most rows) is looked up by its QRACE1
        in the rules' values for each distinct QRACE1 (followed by ``Null`` codes); the
        others are evaluated one by one."""
        first = columns[0]
        if first.size < _LOOKUP_ROWS:
            return self._rules_bad(columns)
        rest = np.zeros(first.size, np.uint16)
        for c in columns[1:]:
            rest |= c
        seen = np.zeros(1 << 16, bool)
        seen[first] = True
        firsts = np.flatnonzero(seen).astype(np.uint16)
        zero = np.zeros(firsts.size, np.uint16)
        alone = np.zeros(1 << 16, bool)
        alone[firsts] = self._rules_bad([firsts, *([zero] * (len(columns) - 1))])
        out = alone[first]
        more = np.flatnonzero(rest)
        if more.size:
            out[more] = self._rules_bad([c[more] for c in columns])
        return out

    def _blocks(
        self, batch: CodedBatch, values: dict[str, NDArray[np.uint64]], bad: NDArray[np.bool_]
    ) -> tuple[NDArray[np.uint64], NDArray[np.uint32] | None]:
        """Every row's block key and geo unit (flagging in ``bad`` the rows whose block is
        not in GRF-C), from ``values``, the scaled key part of each value of each block
        column. Person files are usually sorted by block: the key is computed and looked
        up once per run of rows with the same block columns."""
        n = batch.height
        change = np.zeros(n, bool)
        change[:1] = True
        for c in BLOCK_COLUMNS:
            codes = batch.columns[c].codes
            change[1:] |= codes[1:] != codes[:-1]
        heads = np.flatnonzero(change)
        lengths = np.diff(np.r_[heads, n])
        keys = np.zeros(heads.size, np.uint64)
        for c in BLOCK_COLUMNS:
            keys += values[c][batch.columns[c].codes[heads]]
        block = np.repeat(keys, lengths)
        if self.block_keys is None or self.block_units is None:
            return block, None
        if not (self.block_keys.size and n):
            bad[:] = True
            return block, np.zeros(n, np.uint32)
        pos = np.searchsorted(self.block_keys, keys)
        pos = np.minimum(pos, self.block_keys.size - 1)
        bad |= np.repeat(self.block_keys[pos] != keys, lengths)
        return block, np.repeat(self.block_units[pos], lengths)


def _or_flags(flags: NDArray[np.uint8], per_flag: NDArray[np.uint8], col: Coded) -> None:
    """``flags |=`` the flags of each row's value of ``col``: one constant when every value
    a row may hold has the same flags (a typical column of valid values)."""
    held = per_flag if col.nulls else per_flag[:-1]
    if held.size and (held == held[0]).all():
        flags |= held[0]
    elif held.size:
        flags |= per_flag[col.codes]


def _report_unexplained(file: str, rows: pl.DataFrame, log: ProblemLog) -> None:
    log.add_many(
        rows.height,
        [
            Problem(
                file, "invalid_row", "row rejected by the fast check (please report)", row=int(r)
            )
            for r in rows[ROW].head(10).to_list()
        ],
    )


def report_field_counts(
    file: str, rows: pl.DataFrame, header: Sequence[str], log: ProblemLog
) -> None:
    """Name the text lines of ``rows`` (``ROW``, ``_NF``) with the wrong number of fields:
    a short line as its missing fields, a long one by its count."""
    if rows.height == 0:
        return
    take = rows.head(log.examples)  # the log keeps the first rows of every batch's
    n = len(header)
    log.add_many(
        rows.height,
        [
            Problem(
                file,
                "wrong_field_count",
                field_count_message(int(nf), header),
                row=int(r),
                column=header[int(nf)] if int(nf) < n else None,
            )
            for r, nf in take.select(ROW, FIELDS).iter_rows()
        ],
    )


class _Checker:
    """The naming checks of one person file: :func:`privtab.data.spec.person_spec` compiled
    exactly (regexes), plus the GRF-C block lookup; each problem named with its row,
    column, value and message."""

    def __init__(
        self,
        file: str,
        reference: ReferenceData | None,
        geography: Geography | None,
        max_race_codes: int,
        spec: TableSpec | None = None,
    ) -> None:
        self.file = file
        self.spec = spec if spec is not None else person_spec(max_race_codes)
        self.codes = code_strings(reference)
        self.blocks = None if geography is None else geography.blocks.select(BLOCK)

    def check(self, b: pl.DataFrame, log: ProblemLog) -> pl.DataFrame:
        """Report every problem of a batch; return its valid rows (raw strings)."""
        cols = self.spec.columns
        report_field_counts(self.file, b.filter(pl.col(FIELDS) != len(cols)), cols, log)
        n = len(cols)
        b = b.filter(pl.col(FIELDS) == n)
        flags: list[pl.Expr] = []

        def run(
            kind: str,
            cond: pl.Expr,
            column: str | pl.Expr,
            value: pl.Expr,
            message: str | pl.Expr,
        ) -> None:
            """Flag the rows where ``cond`` holds and log them (up to the log's room)."""
            flags.append(cond)
            bad = b.filter(cond)
            if bad.height == 0:
                return
            col = pl.lit(column) if isinstance(column, str) else column
            msg = pl.lit(message) if isinstance(message, str) else message
            # up to ``examples`` each time: the log keeps the first rows of all its checks
            take = bad.head(log.examples).select(
                ROW, col.alias("_C"), value.cast(pl.String).alias("_V"), msg.alias("_M")
            )
            log.add_many(
                bad.height,
                [
                    Problem(self.file, kind, m, row=int(r), column=c, value=v)
                    for r, c, v, m in take.iter_rows()
                ],
            )

        name_problems(self.spec, self.codes, run)
        if self.blocks is not None:
            ids = pl.all_horizontal(
                [to_polars(Digits(c, w, w)) for c, w in ID_WIDTHS.items() if c in BLOCK_COLUMNS]
            ).fill_null(False)
            with_key = b.filter(ids).with_columns(block_key_expr())
            missing = with_key.join(self.blocks, on=BLOCK, how="anti")
            run(
                "block_not_in_grfc",
                pl.col(ROW).is_in(missing[ROW].implode()),
                "TABBLK",
                pl.concat_str(BLOCK_COLUMNS),
                pl.format("block {}|{}|{}|{} is not in GRF-C", *(pl.col(c) for c in BLOCK_COLUMNS)),
            )
        if not flags:
            return b
        return b.filter(~pl.any_horizontal(flags))


__all__ = [
    "CANONICAL_SCHEMA",
    "DEFAULT_BATCH_ROWS",
    "MAX_CENRACE",
    "PERSON_COLUMNS",
    "PERSON_STEM",
    "RACE_COLUMNS",
    "FilePart",
    "PersonReader",
    "TypedPersons",
    "canonical_persons",
    "code_strings",
    "format_of",
    "person_parts",
    "read_persons",
    "report_field_counts",
    "scan_persons",
    "validate_persons",
]
