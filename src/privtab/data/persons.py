"""Person records: streaming reader, vectorised validation and the canonical typed form.

Format (Census, unchanged): ``person-records.txt``, pipe-delimited with a header,
``QAGE|QSEX|HOUSEHOLDER|TABBLKST|TABBLKCOU|TABTRACTCE|TABBLK|CENRACE|QRACE1..QRACE8|QSPAN``,
``Null`` for an absent race code; or ``person-records.parquet`` with the same columns
(values as strings or integers; a null race code = ``Null``).

Validation is a set of polars expressions evaluated batch by batch (default 2²⁰ rows), so
10⁸ rows are checked in bounded memory. Each problem names file, data row (1-based, header
excluded: row r is on line r + 1 of a text file), column and value; the first rows of each
kind are kept and every offending row is counted. Kinds:

``malformed_id`` (TABBLKST 2 digits, TABBLKCOU 3, TABTRACTCE 6, TABBLK 4),
``block_not_in_grfc``, ``invalid_age`` (not an integer), ``age_out_of_range`` (outside
0–115), ``invalid_sex`` (QSEX not 1/2), ``invalid_householder`` (not True/False),
``invalid_cenrace`` (not 01–63), ``missing_race_code`` (QRACE1 is Null),
``invalid_race_code`` (not ``Null`` or four digits), ``unknown_race_code`` (not in the code
list), ``race_code_after_null``, ``duplicate_race_code``, ``too_many_race_codes`` (more
than ``max_race_codes``), ``invalid_ethnicity_code``, ``unknown_ethnicity_code``,
``wrong_field_count``, ``wrong_header``.

The canonical form used by engines (:data:`CANONICAL_SCHEMA`): ``BLOCK`` (UInt64 block
key), ``UNIT`` (UInt32 geo unit, when a geography is given), ``QAGE`` (UInt8), ``QSEX``
(UInt8, 1 male, 2 female), ``QSPAN`` (UInt16) and the race-code combination packed in
``RACE_KEY1``/``RACE_KEY2`` (see :mod:`privtab.data.membership`).

Speed: each batch is typed and checked by cheap integer expressions (:class:`_FastPath`);
only the rows it flags go through the naming checks (:class:`_Checker`), which produce the
messages. Both flag exactly the same rows (property test).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import polars as pl

from privtab.data._scan import diagnose_field_counts, is_blank_row, open_table, table_batches
from privtab.data._tables import FOUR_DIGIT_CODE, NULL, ROW, pattern_ok
from privtab.data.ages import MAX_AGE
from privtab.data.errors import Problem, ProblemLog
from privtab.data.geography import (
    BLOCK,
    BLOCK_COLUMNS,
    ID_PATTERNS,
    UNIT,
    Geography,
    block_key_expr,
)
from privtab.data.iterations import CODES_FILE, ReferenceData
from privtab.data.membership import RACE_KEYS, pack_race_codes, race_keys_expr

PERSON_STEM = "person-records"
RACE_COLUMNS = tuple(f"QRACE{i}" for i in range(1, 9))
PERSON_COLUMNS = (
    "QAGE",
    "QSEX",
    "HOUSEHOLDER",
    *BLOCK_COLUMNS,
    "CENRACE",
    *RACE_COLUMNS,
    "QSPAN",
)
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
MAX_CENRACE = 63


def scan_persons(path: str | Path) -> pl.LazyFrame:
    """Lazy raw scan: ``ROW`` + every person column as the exact string in the file.

    Checks the header only (raises :class:`InputValidationError` when it is wrong). Values
    are not validated: use :class:`PersonReader` for that.
    """
    log = ProblemLog()
    lf = open_table(Path(path), PERSON_COLUMNS, log, optional_null=RACE_COLUMNS)
    log.raise_if_any()
    assert lf is not None
    return lf


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


def scan_canonical(
    path: str | Path,
    reference: ReferenceData | None,
    geography: Geography | None,
    max_race_codes: int = 8,
) -> pl.LazyFrame:
    """One lazy, streamable query: canonical columns of every row plus a ``_BAD`` flag.

    Columns: ``ROW``, ``BLOCK``, ``UNIT`` (with a geography), ``QAGE``, ``QSEX``,
    ``QSPAN``, ``RACE_KEY1``, ``RACE_KEY2``, ``_BAD``. For an engine that aggregates in a
    single streaming pass: aggregate the rows with ``~_BAD`` and count the ``_BAD`` ones;
    if that count is not zero, nothing may be written — run :func:`validate_persons` (or
    :class:`PersonReader`) to name every problem, then raise. ``_BAD`` is exactly the set of
    rows the naming checks reject (tested). Typed values of bad rows are meaningless.
    """
    log = ProblemLog()
    raw = open_table(Path(path), PERSON_COLUMNS, log, optional_null=RACE_COLUMNS)
    log.raise_if_any()
    assert raw is not None
    fast = _FastPath(reference, geography, max_race_codes)
    return (
        fast.lazy(raw.filter(~is_blank_row(PERSON_COLUMNS)))
        .with_columns(race_keys_expr(RACE_COLUMNS))
        .unnest("RACE_KEYS")
        .select(
            ROW,
            BLOCK,
            *([UNIT] if fast.has_units else []),
            pl.col("QAGE").cast(pl.UInt8, strict=False),
            "QSEX",
            "QSPAN",
            *RACE_KEYS,
            "_BAD",
        )
    )


@dataclass
class PersonReader:
    """Streams a person file in batches, validating every row as it goes.

    ``batches()`` yields the canonical form of the valid rows of each batch; problems go to
    ``log``. After the last batch call :meth:`raise_if_invalid` (nothing may be written
    before that). ``reference`` (code list) and ``geography`` (GRF-C blocks) enable the
    code and block checks; ``states`` restricts the yielded rows to those states (every row
    is still validated).
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

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        if not 1 <= self.max_race_codes <= len(RACE_COLUMNS):
            raise ValueError(f"max_race_codes must be in 1..8, got {self.max_race_codes}")

    def batches(self) -> Iterator[pl.DataFrame]:
        lf = open_table(self.path, PERSON_COLUMNS, self.log, optional_null=RACE_COLUMNS)
        if lf is None:
            return
        name = str(self.path)
        fast = _FastPath(self.reference, self.geography, self.max_race_codes)
        checker = _Checker(name, self.reference, self.geography, self.max_race_codes)
        states = None if self.states is None else [int(x) for x in self.states]
        try:
            batches = table_batches(self.path, lf, self.batch_rows, PERSON_COLUMNS, RACE_COLUMNS)
            for batch in batches:
                batch = batch.filter(~is_blank_row(PERSON_COLUMNS))
                self.rows_read += batch.height
                typed = fast.typed(batch)
                bad = typed["_BAD"]
                if bad.any():
                    # slow path, only on the offending rows: name every problem exactly
                    flagged = batch.filter(bad)
                    unexplained = checker.check(flagged, self.log)
                    if unexplained.height:  # pragma: no cover - a bug if reached
                        _report_unexplained(name, unexplained, self.log)
                good = typed.filter(~bad)
                if states is not None:
                    good = good.filter((pl.col(BLOCK) // 10**13).is_in(states))
                self.rows_valid += good.height
                if good.height:
                    yield _canonical(good, fast.has_units)
        except pl.exceptions.ComputeError:
            diagnose_field_counts(self.path, len(PERSON_COLUMNS), self.log)

    def raise_if_invalid(self) -> None:
        self.log.raise_if_any()


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
    for _ in reader.batches():
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


def _digits(column: str, width: int | None, dtype: type[pl.DataType]) -> pl.Expr:
    """Integer value of a string of ASCII digits (of ``width`` bytes); null otherwise.

    The unsigned cast rejects everything but digits and a leading '+', which is excluded.
    """
    s = pl.col(column)
    v = s.cast(dtype, strict=False)
    ok = v.is_not_null() & ~s.str.starts_with("+")
    if width is not None:
        ok = ok & (s.str.len_bytes() == width)
    return pl.when(ok).then(v)


class _FastPath:
    """Types a batch and flags every row with any problem, with cheap integer checks.

    Rows it flags go through :class:`_Checker`, which names each problem; rows it passes
    are exactly those :class:`_Checker` finds no problem in (tested property).
    """

    def __init__(
        self, reference: ReferenceData | None, geography: Geography | None, max_race_codes: int
    ) -> None:
        valid = sorted(reference.codes) if reference is not None else range(1000, 10_000)
        self.codes = pl.Series(list(valid), dtype=pl.UInt16).implode()
        self.blocks = (
            None
            if geography is None
            else geography.blocks.with_columns(pl.lit(True).alias("_IN_GRFC"))
        )
        self.has_units = geography is not None
        self.k = max_race_codes

    def typed(self, b: pl.DataFrame) -> pl.DataFrame:
        """Typed columns of a raw batch plus ``_BAD`` (eager)."""
        return self.lazy(b.lazy()).collect()

    def lazy(self, raw: pl.LazyFrame) -> pl.LazyFrame:
        """Typed columns (null = invalid) plus the boolean ``_BAD``, lazily (streamable)."""
        race = [
            pl.when(pl.col(c) == NULL)
            .then(pl.lit(0, pl.UInt16))
            .when(pl.col(c).str.len_bytes() == 4)
            .then(pl.col(c).cast(pl.UInt16, strict=False))
            .alias(c)
            for c in RACE_COLUMNS
        ]
        age = pl.when(pl.col("QAGE").str.len_bytes() <= 3).then(_digits("QAGE", None, pl.UInt16))
        block = (
            _digits("TABBLKST", 2, pl.UInt64) * 10**13
            + _digits("TABBLKCOU", 3, pl.UInt64) * 10**10
            + _digits("TABTRACTCE", 6, pl.UInt64) * 10**4
            + _digits("TABBLK", 4, pl.UInt64)
        )
        eth = pl.when(pl.col("QSPAN").str.len_bytes() == 4).then(
            pl.col("QSPAN").cast(pl.UInt16, strict=False)
        )
        t = raw.select(
            ROW,
            block.alias(BLOCK),
            age.alias("QAGE"),
            pl.col("QSEX").replace_strict(["1", "2"], [1, 2], default=None, return_dtype=pl.UInt8),
            pl.col("HOUSEHOLDER").is_in(["True", "False"]).alias("_HH"),
            pl.col("CENRACE").is_in([f"{i:02d}" for i in range(1, MAX_CENRACE + 1)]).alias("_CEN"),
            *race,
            eth.alias("QSPAN"),
        )
        if self.blocks is not None:
            t = t.join(self.blocks.lazy(), on=BLOCK, how="left", maintain_order="left")
        r = [pl.col(c) for c in RACE_COLUMNS]
        n_codes = pl.sum_horizontal([(x > 0).cast(pl.UInt8) for x in r])
        checks = [
            pl.col(BLOCK).is_null(),
            pl.col("QAGE").is_null() | (pl.col("QAGE") > MAX_AGE),
            pl.col("QSEX").is_null(),
            ~pl.col("_HH"),
            ~pl.col("_CEN"),
            *(x.is_null() | ((x > 0) & ~x.is_in(self.codes)) for x in r),
            r[0] == 0,
            *((r[i] > 0) & (r[i - 1] == 0) for i in range(1, len(r))),
            *((r[i] == r[j]) & (r[i] > 0) for i in range(len(r)) for j in range(i)),
            n_codes > self.k,
            pl.col("QSPAN").is_null() | ~pl.col("QSPAN").is_in(self.codes),
        ]
        if self.blocks is not None:
            checks.append(pl.col("_IN_GRFC").is_null())
        return t.with_columns(pl.any_horizontal(checks).fill_null(True).alias("_BAD"))


def _canonical(good: pl.DataFrame, with_units: bool) -> pl.DataFrame:
    codes = np.column_stack([good[c].to_numpy() for c in RACE_COLUMNS])
    k1, k2 = pack_race_codes(codes)
    return good.select(
        pl.col(BLOCK),
        *([pl.col(UNIT)] if with_units else []),
        pl.col("QAGE").cast(pl.UInt8),
        pl.col("QSEX"),
        pl.col("QSPAN"),
    ).with_columns(pl.Series(RACE_KEYS[0], k1), pl.Series(RACE_KEYS[1], k2))


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


class _Checker:
    """The vectorised row checks of one person file."""

    def __init__(
        self,
        file: str,
        reference: ReferenceData | None,
        geography: Geography | None,
        max_race_codes: int,
    ) -> None:
        self.file = file
        self.codes = (
            None
            if reference is None
            else pl.Series([f"{c:04d}" for c in sorted(reference.codes)], dtype=pl.String)
        )
        self.blocks = None if geography is None else geography.blocks.select(BLOCK)
        self.k = max_race_codes

    def _report(
        self,
        log: ProblemLog,
        kind: str,
        bad: pl.DataFrame,
        column: str | pl.Expr,
        value: pl.Expr,
        message: str | pl.Expr,
    ) -> None:
        if bad.height == 0:
            return
        col = pl.lit(column) if isinstance(column, str) else column
        msg = pl.lit(message) if isinstance(message, str) else message
        take = bad.head(max(1, log.room(self.file, kind))).select(
            ROW, col.alias("_C"), value.cast(pl.String).alias("_V"), msg.alias("_M")
        )
        log.add_many(
            bad.height,
            [
                Problem(self.file, kind, m, row=int(r), column=c, value=v)
                for r, c, v, m in take.iter_rows()
            ],
        )

    def check(self, b: pl.DataFrame, log: ProblemLog) -> pl.DataFrame:
        """Report every problem of a batch; return its valid rows (raw strings)."""
        flags: list[pl.Expr] = []

        def run(
            kind: str,
            cond: pl.Expr,
            column: str | pl.Expr,
            value: pl.Expr,
            message: str | pl.Expr,
        ) -> None:
            cond = cond.fill_null(True)
            flags.append(cond)
            self._report(log, kind, b.filter(cond), column, value, message)

        # geography ids
        id_ok = pl.lit(True)
        for col in BLOCK_COLUMNS:
            regex, desc = ID_PATTERNS[col]
            ok = pattern_ok(col, regex)
            id_ok = id_ok & ok
            run("malformed_id", ~ok, col, pl.col(col), f"{col} must be {desc}")
        if self.blocks is not None:
            with_key = b.filter(id_ok).with_columns(block_key_expr())
            missing = with_key.join(self.blocks, on=BLOCK, how="anti")
            self._report(
                log,
                "block_not_in_grfc",
                missing,
                "TABBLK",
                pl.concat_str(BLOCK_COLUMNS),
                pl.format("block {}|{}|{}|{} is not in GRF-C", *(pl.col(c) for c in BLOCK_COLUMNS)),
            )
            if missing.height:
                flags.append(pl.col(ROW).is_in(missing[ROW].implode()))
        # age, sex, householder, CENRACE
        age = pl.col("QAGE")
        is_int = pattern_ok("QAGE", r"-?\d{1,12}")
        run("invalid_age", ~is_int, "QAGE", age, "QAGE must be an integer")
        as_int = pl.when(is_int).then(age.cast(pl.Int64, strict=False))
        run(
            "age_out_of_range",
            is_int & ((as_int < 0) | (as_int > MAX_AGE)),
            "QAGE",
            age,
            f"QAGE must lie in 0..{MAX_AGE}",
        )
        run(
            "invalid_sex",
            ~pl.col("QSEX").is_in(["1", "2"]),
            "QSEX",
            pl.col("QSEX"),
            "QSEX must be 1 (male) or 2 (female)",
        )
        run(
            "invalid_householder",
            ~pl.col("HOUSEHOLDER").is_in(["True", "False"]),
            "HOUSEHOLDER",
            pl.col("HOUSEHOLDER"),
            "HOUSEHOLDER must be True or False",
        )
        cen_ok = pattern_ok("CENRACE", r"\d{2}")
        cen = pl.when(cen_ok).then(pl.col("CENRACE").cast(pl.Int32, strict=False))
        run(
            "invalid_cenrace",
            ~cen_ok | (cen < 1) | (cen > MAX_CENRACE),
            "CENRACE",
            pl.col("CENRACE"),
            f"CENRACE must be two digits 01..{MAX_CENRACE}",
        )
        self._race(b, log, run)
        # ethnicity
        eth_ok = pattern_ok("QSPAN", FOUR_DIGIT_CODE)
        run(
            "invalid_ethnicity_code",
            ~eth_ok,
            "QSPAN",
            pl.col("QSPAN"),
            "QSPAN must be a four-digit code",
        )
        if self.codes is not None:
            run(
                "unknown_ethnicity_code",
                eth_ok & ~pl.col("QSPAN").is_in(self.codes.implode()),
                "QSPAN",
                pl.col("QSPAN"),
                f"QSPAN is not a code of {CODES_FILE}",
            )
        if not flags:
            return b
        any_bad = pl.any_horizontal(flags)
        return b.filter(~any_bad)

    def _race(self, b: pl.DataFrame, log: ProblemLog, run: _Run) -> None:
        is_null = {c: pl.col(c) == NULL for c in RACE_COLUMNS}
        fmt_ok = {c: pattern_ok(c, FOUR_DIGIT_CODE) for c in RACE_COLUMNS}
        run(
            "missing_race_code",
            is_null["QRACE1"],
            "QRACE1",
            pl.col("QRACE1"),
            "QRACE1 must hold a race code (every person has at least one)",
        )
        for c in RACE_COLUMNS:
            run(
                "invalid_race_code",
                ~(is_null[c] | fmt_ok[c]),
                c,
                pl.col(c),
                f"{c} must be Null or a four-digit race code",
            )
            if self.codes is not None:
                run(
                    "unknown_race_code",
                    fmt_ok[c] & ~pl.col(c).is_in(self.codes.implode()),
                    c,
                    pl.col(c),
                    f"race code is not in {CODES_FILE}",
                )
        # a code after a Null: first such column per row
        after = [
            (c, ~is_null[c] & pl.any_horizontal([is_null[p] for p in RACE_COLUMNS[:i]]))
            for i, c in enumerate(RACE_COLUMNS)
            if i > 0
        ]
        self._first_column(
            run, "race_code_after_null", after, "race code after a Null (codes must come first)"
        )
        # duplicates: the first column repeating an earlier code
        dup = [
            (c, fmt_ok[c] & pl.any_horizontal([pl.col(c) == pl.col(p) for p in RACE_COLUMNS[:i]]))
            for i, c in enumerate(RACE_COLUMNS)
            if i > 0
        ]
        self._first_column(run, "duplicate_race_code", dup, "race code repeated in one record")
        if self.k < len(RACE_COLUMNS):
            n = pl.sum_horizontal([(~is_null[c]).cast(pl.UInt8) for c in RACE_COLUMNS])
            first_extra = pl.coalesce(
                [pl.when(~is_null[c]).then(pl.lit(c)) for c in RACE_COLUMNS[self.k :]]
            )
            run(
                "too_many_race_codes",
                n > self.k,
                first_extra,
                n,
                pl.format(f"{{}} race codes, more than max_race_codes = {self.k}", n),
            )

    @staticmethod
    def _first_column(run: _Run, kind: str, conds: list[tuple[str, pl.Expr]], message: str) -> None:
        any_cond = pl.any_horizontal([c for _, c in conds])
        column = pl.coalesce([pl.when(c).then(pl.lit(name)) for name, c in conds])
        value = pl.coalesce([pl.when(c).then(pl.col(name)) for name, c in conds])
        run(kind, any_cond, column, value, message)


class _Run(Protocol):
    def __call__(
        self,
        kind: str,
        cond: pl.Expr,
        column: str | pl.Expr,
        value: pl.Expr,
        message: str | pl.Expr,
    ) -> None: ...


__all__ = [
    "CANONICAL_SCHEMA",
    "DEFAULT_BATCH_ROWS",
    "PERSON_COLUMNS",
    "PERSON_STEM",
    "RACE_COLUMNS",
    "PersonReader",
    "canonical_persons",
    "read_persons",
    "scan_canonical",
    "scan_persons",
    "validate_persons",
]
