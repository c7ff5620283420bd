"""The validation rules of the person file and the GRF-C, declared once for every engine.

Each rule is data: the column, the problem ``kind``, the message, and a condition over the
raw strings of a row written in a small expression language (:class:`Cond`). The same
declarations are compiled

to **Polars** expressions, exactly (:func:`to_polars`: regex patterns, the *naming* checks
that produce the messages) or cheaply (``fast=True``: unsigned casts and byte lengths
instead of regexes, for the per-batch flag of every row). The fast flag rejects exactly the
rows the naming checks reject (property tests). Both engines run these same checks (the
Spark engine in its tasks, on parts of the file), so their messages are identical by
construction.

Patterns use ASCII digits only (``[0-9]``, never ``\\d``, which is Unicode-aware in Rust's
regex engine).

Row order of the checks: a text row with the wrong number of fields is reported as such
(and nothing else is checked in it — its fields are misaligned); a missing value (a Parquet
null) and a value that is not valid UTF-8 are reported as such and that field's other rules
are skipped; then every :class:`FieldRule` and :class:`RowRule`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import polars as pl

from privtab.data.ages import MAX_AGE
from privtab.data.iterations import CODES_FILE

NULL = "Null"
"""The marker of an absent race code in the text files."""
REPLACEMENT = "\ufffd"
"""What a byte sequence that is not valid UTF-8 decodes to (both engines read lossily)."""
FIELDS = "_NF"
"""Column of the number of ``|``-separated fields of a text line (Parquet: the header's)."""
MAX_CENRACE = 63


# ---------------------------------------------------------------------------- conditions
class Cond:
    """A boolean condition over the raw string columns of one row (compiled per engine)."""


@dataclass(frozen=True)
class Digits(Cond):
    """``column`` is ``lo``..``hi`` ASCII digits (not starting with 0 if ``nonzero_first``)."""

    column: str
    lo: int
    hi: int
    nonzero_first: bool = False

    def regex(self) -> str:
        first = "[1-9]" if self.nonzero_first else "[0-9]"
        rest = (self.lo - 1, self.hi - 1)
        tail = "" if rest == (0, 0) else f"[0-9]{{{rest[0]},{rest[1]}}}"
        return f"{first}{tail}"


@dataclass(frozen=True)
class OneOf(Cond):
    """``column`` is one of ``values`` (exact strings)."""

    column: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class IntBetween(Cond):
    """The integer value of ``column`` (a digit string) lies in ``lo``..``hi``."""

    column: str
    lo: int
    hi: int


@dataclass(frozen=True)
class Equal(Cond):
    """``column`` equals the string ``value``, or the column ``other``."""

    column: str
    value: str | None = None
    other: str | None = None


@dataclass(frozen=True)
class Not(Cond):
    x: Cond


@dataclass(frozen=True)
class AllOf(Cond):
    xs: tuple[Cond, ...]


@dataclass(frozen=True)
class AnyOf(Cond):
    xs: tuple[Cond, ...]


@dataclass(frozen=True)
class MoreThan(Cond):
    """More than ``k`` of ``xs`` hold."""

    xs: tuple[Cond, ...]
    k: int


@dataclass(frozen=True)
class KnownCode(Cond):
    """``column`` is a code of the reference code list (bound at compile time)."""

    column: str


# ---------------------------------------------------------------------------- rules
@dataclass(frozen=True)
class FieldRule:
    """One column's rule: ``ok`` must hold, unless the value is ``Null`` and ``null_ok``.

    ``after``: the rule applies only where that condition holds (e.g. the range of an age
    is checked only where it is an integer). ``needs_codes``: skipped without a code list.
    """

    column: str
    kind: str
    message: str
    ok: Cond
    null_ok: bool = False
    after: Cond | None = None
    needs_codes: bool = False

    def bad(self) -> Cond:
        cond: Cond = Not(self.ok)
        if self.after is not None:
            cond = AllOf((self.after, cond))
        if self.null_ok:
            cond = AllOf((Not(Equal(self.column, NULL)), cond))
        return cond


@dataclass(frozen=True)
class RowRule:
    """A rule over several columns, reported at the first column whose condition holds.

    ``per_column`` pairs each column with its condition; ``value`` (default: that column's
    value) and ``message`` (``{}`` is replaced by the value) describe the problem.
    """

    kind: str
    message: str
    per_column: tuple[tuple[str, Cond], ...]
    count_of: tuple[Cond, ...] = ()
    """If given, the reported value is how many of these conditions hold."""

    def bad(self) -> Cond:
        return AnyOf(tuple(c for _, c in self.per_column))


@dataclass(frozen=True)
class TableSpec:
    """The rules of one kind of file: its columns, field rules and row rules."""

    name: str
    columns: tuple[str, ...]
    fields: tuple[FieldRule, ...]
    rows: tuple[RowRule, ...] = ()
    null_marker_columns: tuple[str, ...] = ()
    """Columns where a Parquet null stands for ``Null`` (not a missing value)."""

    def rules(self, with_codes: bool) -> tuple[FieldRule | RowRule, ...]:
        return (*(r for r in self.fields if with_codes or not r.needs_codes), *self.rows)


# ---------------------------------------------------------------------------- declarations
BLOCK_COLUMNS = ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK")
ID_WIDTHS = {
    "TABBLKST": 2,
    "TABBLKCOU": 3,
    "TABTRACTCE": 6,
    "TABBLK": 4,
    "PLACEFP": 5,
    "AIANNHCE": 4,
}
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
GRFC_COLUMNS = (*BLOCK_COLUMNS, "PLACEFP", "AIANNHCE")


def _id_rule(column: str) -> FieldRule:
    w = ID_WIDTHS[column]
    return FieldRule(column, "malformed_id", f"{column} must be {w} digits", Digits(column, w, w))


def _code(column: str) -> Digits:
    return Digits(column, 4, 4, nonzero_first=True)


def _race_rules(max_race_codes: int) -> tuple[RowRule, ...]:
    present = {c: Not(Equal(c, NULL)) for c in RACE_COLUMNS}
    absent = {c: Equal(c, NULL) for c in RACE_COLUMNS}
    after_null = tuple(
        (c, AllOf((present[c], AnyOf(tuple(absent[p] for p in RACE_COLUMNS[:i])))))
        for i, c in enumerate(RACE_COLUMNS)
        if i > 0
    )
    repeated = tuple(
        (c, AllOf((_code(c), AnyOf(tuple(Equal(c, other=p) for p in RACE_COLUMNS[:i])))))
        for i, c in enumerate(RACE_COLUMNS)
        if i > 0
    )
    k = max_race_codes
    rules = [
        RowRule(
            "missing_race_code",
            "QRACE1 must hold a race code (every person has at least one)",
            (("QRACE1", absent["QRACE1"]),),
        ),
        RowRule(
            "race_code_after_null", "race code after a Null (codes must come first)", after_null
        ),
        RowRule("duplicate_race_code", "race code repeated in one record", repeated),
    ]
    if k < len(RACE_COLUMNS):
        rules.append(
            RowRule(
                "too_many_race_codes",
                f"{{}} race codes, more than max_race_codes = {k}",
                tuple(
                    (c, AllOf((present[c], MoreThan(tuple(present.values()), k))))
                    for c in RACE_COLUMNS[k:]
                ),
                count_of=tuple(present.values()),
            )
        )
    return tuple(rules)


def person_spec(max_race_codes: int = len(RACE_COLUMNS)) -> TableSpec:
    """The rules of ``person-records`` (Census schema ``person-records.json``)."""
    age_ok = Digits("QAGE", 1, 3)
    race: list[FieldRule] = []
    for c in RACE_COLUMNS:
        race.append(
            FieldRule(
                c,
                "invalid_race_code",
                f"{c} must be Null or a four-digit race code",
                _code(c),
                null_ok=True,
            )
        )
        race.append(
            FieldRule(
                c,
                "unknown_race_code",
                f"race code is not in {CODES_FILE}",
                KnownCode(c),
                null_ok=True,
                after=_code(c),
                needs_codes=True,
            )
        )
    fields = (
        *(_id_rule(c) for c in BLOCK_COLUMNS),
        FieldRule("QAGE", "invalid_age", "QAGE must be an integer (1 to 3 digits)", age_ok),
        FieldRule(
            "QAGE",
            "age_out_of_range",
            f"QAGE must lie in 0..{MAX_AGE}",
            IntBetween("QAGE", 0, MAX_AGE),
            after=age_ok,
        ),
        FieldRule(
            "QSEX", "invalid_sex", "QSEX must be 1 (male) or 2 (female)", OneOf("QSEX", ("1", "2"))
        ),
        FieldRule(
            "HOUSEHOLDER",
            "invalid_householder",
            "HOUSEHOLDER must be True or False",
            OneOf("HOUSEHOLDER", ("True", "False")),
        ),
        FieldRule(
            "CENRACE",
            "invalid_cenrace",
            f"CENRACE must be two digits 01..{MAX_CENRACE}",
            OneOf("CENRACE", tuple(f"{i:02d}" for i in range(1, MAX_CENRACE + 1))),
        ),
        *race,
        FieldRule(
            "QSPAN", "invalid_ethnicity_code", "QSPAN must be a four-digit code", _code("QSPAN")
        ),
        FieldRule(
            "QSPAN",
            "unknown_ethnicity_code",
            f"QSPAN is not a code of {CODES_FILE}",
            KnownCode("QSPAN"),
            after=_code("QSPAN"),
            needs_codes=True,
        ),
    )
    return TableSpec(
        "person-records",
        PERSON_COLUMNS,
        fields,
        _race_rules(max_race_codes),
        null_marker_columns=RACE_COLUMNS,
    )


def grfc_spec(valid_states: Sequence[str]) -> TableSpec:
    """The rules of ``GRF-C`` (its SafeTab columns; any other columns are not read)."""
    st = Digits("TABBLKST", 2, 2)
    return TableSpec(
        "GRF-C",
        GRFC_COLUMNS,
        (
            *(_id_rule(c) for c in GRFC_COLUMNS),
            FieldRule(
                "TABBLKST",
                "unknown_state",
                "not the FIPS code of a state, DC or Puerto Rico (72)",
                OneOf("TABBLKST", tuple(valid_states)),
                after=st,
            ),
        ),
    )


# ---------------------------------------------------------------------------- file rules
def field_count_message(found: int, expected: Sequence[str]) -> str:
    """The message of a text line with the wrong number of fields."""
    n = len(expected)
    if found < n:
        missing = expected[found:]
        names = missing[0] if len(missing) == 1 else f"{missing[0]}..{missing[-1]}"
        return f"missing field(s) {names}: the line has {found} fields separated by '|', not {n}"
    return f"the line has {found} fields separated by '|', not {n}"


MISSING_VALUE = ("missing_value", "the value is missing (null)")
INVALID_UTF8 = (
    "invalid_utf8",
    f"the value holds bytes that are not UTF-8 (each shown as {REPLACEMENT}: binary data or "
    "another encoding such as Latin-1; the file must be UTF-8)",
)


def invalid_utf8_message(spec: TableSpec, column: str) -> str:
    """The ``invalid_utf8`` message of ``column``: what is wrong, then what the column
    must hold (its first rule's message)."""
    rule = next((r.message for r in spec.fields if r.column == column), None)
    return INVALID_UTF8[1] if rule is None else f"{INVALID_UTF8[1]}; {rule}"


# ---------------------------------------------------------------------------- Polars
def code_int(column: str) -> pl.Expr:
    """A code column as an integer: 0 for ``Null``, the code for a four-digit code not
    starting with 0, null otherwise (what ``fast`` compilation compares code columns by)."""
    s = pl.col(column)
    return (
        pl.when(s == NULL)
        .then(pl.lit(0, pl.UInt16))
        .when(to_polars(Digits(column, 4, 4, nonzero_first=True), fast=True))
        .then(s.cast(pl.UInt16, strict=False))
        .alias(column)
    )


def to_polars(
    cond: Cond,
    codes: pl.Series | None = None,
    *,
    fast: bool = False,
    ints: dict[str, str] | None = None,
) -> pl.Expr:
    """A Polars boolean expression of ``cond`` over the raw string columns.

    ``fast`` compiles digit patterns to unsigned casts and byte lengths (the cast accepts
    exactly the ASCII digit strings and a leading ``+``, which is excluded) instead of
    regexes. ``codes``: the code list (four-digit strings) for :class:`KnownCode`.
    ``ints`` (with ``fast``): code columns already available as :func:`code_int` columns
    (column → its name); conditions on them compare integers, which is exact for every
    value the other rules accept (an invalid code flags the row by itself).
    """
    ints = ints or {}

    def go(c: Cond) -> pl.Expr:
        return to_polars(c, codes, fast=fast, ints=ints)

    col = getattr(cond, "column", None)
    if fast and col in ints:
        v = pl.col(ints[col])
        if isinstance(cond, Digits) and cond.nonzero_first and (cond.lo, cond.hi) == (4, 4):
            return v > 0
        if isinstance(cond, KnownCode):
            if codes is None:
                raise ValueError("KnownCode needs the code list")
            return v.is_in(codes.cast(pl.UInt16).implode())
        if isinstance(cond, Equal) and cond.value == NULL:
            return v == 0
        if isinstance(cond, Equal) and cond.other in ints:
            return v == pl.col(ints[cond.other])
    if isinstance(cond, Digits):
        s = pl.col(cond.column)
        if not fast:
            return s.str.contains(f"^(?:{cond.regex()})$")
        ok = (
            s.str.len_bytes().is_between(cond.lo, cond.hi)
            & s.cast(pl.UInt64, strict=False).is_not_null()
            & ~s.str.starts_with("+")
        )
        return ok & ~s.str.starts_with("0") if cond.nonzero_first else ok
    if isinstance(cond, OneOf):
        return pl.col(cond.column).is_in(list(cond.values))
    if isinstance(cond, IntBetween):
        v = pl.col(cond.column).cast(pl.Int64, strict=False)
        return v.is_between(cond.lo, cond.hi)
    if isinstance(cond, KnownCode):
        if codes is None:
            raise ValueError("KnownCode needs the code list")
        return pl.col(cond.column).is_in(codes.implode())
    if isinstance(cond, Equal):
        other = pl.lit(cond.value) if cond.other is None else pl.col(cond.other)
        return pl.col(cond.column) == other
    if isinstance(cond, Not):
        return ~go(cond.x)
    if isinstance(cond, AllOf):
        return pl.all_horizontal([go(x) for x in cond.xs])
    if isinstance(cond, AnyOf):
        return pl.any_horizontal([go(x) for x in cond.xs])
    if isinstance(cond, MoreThan):
        return pl.sum_horizontal([go(x).cast(pl.UInt8) for x in cond.xs]) > cond.k
    raise TypeError(f"unknown condition {cond!r}")


def count_polars(conds: Iterable[Cond]) -> pl.Expr:
    """How many of ``conds`` hold (Polars)."""
    return pl.sum_horizontal([to_polars(c).cast(pl.UInt8) for c in conds])


# ---------------------------------------------------------------------------- naming
Report = Callable[[str, pl.Expr, "str | pl.Expr", pl.Expr, "str | pl.Expr"], None]
"""``report(kind, bad, column, value, message)``: records the rows where ``bad`` holds."""


def name_problems(spec: TableSpec, codes: pl.Series | None, report: Report) -> None:
    """Run every naming check of ``spec`` (exact compilation) through ``report``.

    The caller has removed rows with the wrong number of fields. A field that is null or
    holds invalid UTF-8 is reported as such, and its own rules are skipped.
    """
    usable: dict[str, pl.Expr] = {}
    for c in spec.columns:
        s = pl.col(c)
        if c not in spec.null_marker_columns:
            report(MISSING_VALUE[0], s.is_null(), c, s, MISSING_VALUE[1])
        bad_utf8 = s.str.contains(REPLACEMENT, literal=True).fill_null(False)
        report(INVALID_UTF8[0], bad_utf8, c, s, invalid_utf8_message(spec, c))
        usable[c] = s.is_not_null() & ~bad_utf8
    for rule in spec.rules(codes is not None):
        if isinstance(rule, FieldRule):
            cond = usable[rule.column] & to_polars(rule.bad(), codes).fill_null(False)
            report(rule.kind, cond, rule.column, pl.col(rule.column), rule.message)
            continue
        conds = [(c, to_polars(x, codes).fill_null(False)) for c, x in rule.per_column]
        column = pl.coalesce([pl.when(x).then(pl.lit(c)) for c, x in conds])
        value = (
            count_polars(rule.count_of).cast(pl.String)
            if rule.count_of
            else pl.coalesce([pl.when(x).then(pl.col(c)) for c, x in conds])
        )
        message: str | pl.Expr = (
            pl.format(rule.message, value) if "{}" in rule.message else rule.message
        )
        report(rule.kind, pl.any_horizontal([x for _, x in conds]), column, value, message)


__all__ = [
    "FIELDS",
    "GRFC_COLUMNS",
    "INVALID_UTF8",
    "MISSING_VALUE",
    "NULL",
    "PERSON_COLUMNS",
    "RACE_COLUMNS",
    "REPLACEMENT",
    "Cond",
    "FieldRule",
    "RowRule",
    "TableSpec",
    "field_count_message",
    "grfc_spec",
    "invalid_utf8_message",
    "name_problems",
    "person_spec",
    "to_polars",
]
