"""Race/ethnicity codes and characteristic iterations: the four SafeTab-P reference files.

Files (pipe-delimited, header, read unchanged):

- ``race-and-ethnicity-codes.txt`` — ``RACE_ETH_CODE|RACE_ETH_NAME`` (1,755 codes in 2020);
- ``race-characteristic-iterations.txt`` —
  ``ITERATION_CODE|ITERATION_NAME|LEVEL|ALONE|DETAILED_ONLY|COARSE_ONLY`` (3,017);
- ``ethnicity-characteristic-iterations.txt`` — the same without ``ALONE`` (38);
- ``race-and-ethnicity-code-to-iteration.txt`` — ``ITERATION_CODE|RACE_ETH_CODE``: the codes
  that make up each iteration's group (14,088 rows).

A characteristic iteration is a race (or ethnicity) group plus, for race, *alone* or *alone
or in combination* (SafeTab paper §1, seed ``safetab-detailed-dhc-race-ethnicity.txt``): a
person is in an alone iteration when ALL of their race codes are in its group, and in an
alone-or-in-combination one when ANY is; a person is in an ethnicity iteration when their
single ethnicity code (QSPAN) is in its group. LEVEL 0/1/2 is the place in the hierarchy;
SafeTab-P tabulates levels 1 and 2 only (level 0 is ignored, as in production).

Validation (each problem names file, row, column, value, and states the rule it breaks as
``…; rule: …``): header; every file has at least one row; no control characters (a NUL, a
tab, …) in any field; code patterns (``[1-9]\\d{3}`` for race/ethnicity codes, ``\\d{4}``
for iteration codes); duplicates (naming the line of the first occurrence); LEVEL in
0..2; flags ``True``/``False``/``Null`` with LEVEL 0 ⇔ both flags ``Null`` and never both
``True``; race and ethnicity iteration codes disjoint; every mapped iteration and code
defined; every tabulated iteration (LEVEL 1 or 2) has at least one code; and the hierarchy
rule SafeTab's stability relies on — **no code maps to two iterations of one level** (same
kind, LEVEL, ALONE, tabulated at the same granularity).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from pathlib import Path

import polars as pl

from privtab.data._tables import (
    FOUR_DIGIT_CODE,
    ITERATION_CODE_PATTERN,
    NULL,
    ROW,
    pattern_ok,
    read_small_table,
    report_rows,
)
from privtab.data.errors import Problem, ProblemLog, checked
from privtab.data.levels import ITERATION_LEVELS, Granularity

CODES_FILE = "race-and-ethnicity-codes.txt"
RACE_ITERATIONS_FILE = "race-characteristic-iterations.txt"
ETHNICITY_ITERATIONS_FILE = "ethnicity-characteristic-iterations.txt"
CODE_TO_ITERATION_FILE = "race-and-ethnicity-code-to-iteration.txt"
REFERENCE_FILES = (
    CODES_FILE,
    RACE_ITERATIONS_FILE,
    ETHNICITY_ITERATIONS_FILE,
    CODE_TO_ITERATION_FILE,
)

CODE_COLUMNS = ("RACE_ETH_CODE", "RACE_ETH_NAME")
RACE_ITERATION_COLUMNS = (
    "ITERATION_CODE",
    "ITERATION_NAME",
    "LEVEL",
    "ALONE",
    "DETAILED_ONLY",
    "COARSE_ONLY",
)
ETHNICITY_ITERATION_COLUMNS = tuple(c for c in RACE_ITERATION_COLUMNS if c != "ALONE")
MAPPING_COLUMNS = ("ITERATION_CODE", "RACE_ETH_CODE")
MAX_LEVEL = 2


class IterationKind(StrEnum):
    RACE = "race"
    ETHNICITY = "ethnicity"


@dataclass(frozen=True)
class Iteration:
    """One characteristic iteration (a row of an iteration file plus its group's codes).

    ``alone`` is ``None`` for ethnicity iterations; ``detailed_only``/``coarse_only`` are
    ``None`` for level-0 iterations (``Null`` in the file).
    """

    code: str
    name: str
    kind: IterationKind
    level: int
    alone: bool | None
    detailed_only: bool | None
    coarse_only: bool | None
    codes: frozenset[int] = field(repr=False)

    def tabulated_at(self, granularity: Granularity) -> bool:
        """Whether SafeTab-P tabulates this iteration at geographies of ``granularity``.

        Level-0 iterations never; DETAILED_ONLY ones only at detailed geographies (USA,
        STATE, PR-STATE); COARSE_ONLY ones only at coarse geographies.
        """
        if self.level == 0:
            return False
        if granularity is Granularity.DETAILED:
            return not self.coarse_only
        return not self.detailed_only


@dataclass(frozen=True)
class ReferenceData:
    """The validated race/ethnicity codes and characteristic iterations.

    ``codes`` maps each race/ethnicity code to its name; ``iterations`` maps each iteration
    code to its :class:`Iteration`, race iterations first, each file in its own order.
    """

    codes: Mapping[int, str]
    iterations: Mapping[str, Iteration]
    source: str

    def race_iterations(self) -> tuple[Iteration, ...]:
        return tuple(i for i in self.iterations.values() if i.kind is IterationKind.RACE)

    def ethnicity_iterations(self) -> tuple[Iteration, ...]:
        return tuple(i for i in self.iterations.values() if i.kind is IterationKind.ETHNICITY)

    def select(self, level: int, granularity: Granularity) -> tuple[Iteration, ...]:
        """The iterations of a population-group level: this LEVEL, tabulated at ``granularity``.

        This is the public iteration domain of every (geography, iteration level) pair whose
        geography has that granularity (file order: race, then ethnicity).
        """
        return tuple(
            i for i in self.iterations.values() if i.level == level and i.tabulated_at(granularity)
        )

    @cached_property
    def iteration_dtype(self) -> pl.Enum:
        """A polars ``Enum`` over every iteration code (file order): the public code domain."""
        return pl.Enum(list(self.iterations))

    @cached_property
    def code_set(self) -> frozenset[int]:
        return frozenset(self.codes)

    @cached_property
    def code_to_iterations(self) -> Mapping[int, tuple[str, ...]]:
        """Every code → the iterations (of every level, file order) whose group holds it."""
        out: dict[int, list[str]] = {c: [] for c in self.codes}
        for it in self.iterations.values():
            for c in it.codes:
                out.setdefault(c, []).append(it.code)
        return {c: tuple(v) for c, v in out.items()}

    def membership(self, iterations: Iterable[Iteration] | None = None) -> pl.DataFrame:
        """Long table ``ITERATION_CODE`` (Enum) × ``RACE_ETH_CODE`` (UInt16) of the groups."""
        its = list(self.iterations.values()) if iterations is None else list(iterations)
        it_codes: list[str] = []
        codes: list[int] = []
        for it in its:
            for c in sorted(it.codes):
                it_codes.append(it.code)
                codes.append(c)
        return pl.DataFrame(
            {"ITERATION_CODE": it_codes, "RACE_ETH_CODE": codes},
            schema={"ITERATION_CODE": self.iteration_dtype, "RACE_ETH_CODE": pl.UInt16},
        )


def read_reference(directory: str | Path) -> ReferenceData:
    """Read and validate the four reference files in ``directory``; raise on any problem."""
    return checked(lambda log: load_reference(directory, log))


def load_reference(directory: str | Path, log: ProblemLog) -> ReferenceData | None:
    """Read and validate the reference files, adding problems to ``log``.

    Returns ``None`` if any file has a problem.
    """
    d = Path(directory)
    before = sum(log.counts.values())
    codes_df = read_small_table(d / CODES_FILE, CODE_COLUMNS, log)
    race_df = read_small_table(d / RACE_ITERATIONS_FILE, RACE_ITERATION_COLUMNS, log)
    eth_df = read_small_table(d / ETHNICITY_ITERATIONS_FILE, ETHNICITY_ITERATION_COLUMNS, log)
    map_df = read_small_table(d / CODE_TO_ITERATION_FILE, MAPPING_COLUMNS, log)
    for name, df in (
        (CODES_FILE, codes_df),
        (RACE_ITERATIONS_FILE, race_df),
        (ETHNICITY_ITERATIONS_FILE, eth_df),
        (CODE_TO_ITERATION_FILE, map_df),
    ):
        if df is not None:
            _check_rows_and_text(str(d / name), df, log)
    if codes_df is not None:
        _check_codes(str(d / CODES_FILE), codes_df, log)
    if race_df is not None:
        _check_iteration_rows(str(d / RACE_ITERATIONS_FILE), race_df, log, race=True)
    if eth_df is not None:
        _check_iteration_rows(str(d / ETHNICITY_ITERATIONS_FILE), eth_df, log, race=False)
    if race_df is not None and eth_df is not None:
        overlap = eth_df.filter(pl.col("ITERATION_CODE").is_in(race_df["ITERATION_CODE"].implode()))
        report_rows(
            log,
            str(d / ETHNICITY_ITERATIONS_FILE),
            "duplicate_iteration",
            "iteration code is also a race iteration code; rule: the codes of "
            f"{RACE_ITERATIONS_FILE} and {ETHNICITY_ITERATIONS_FILE} are disjoint",
            overlap,
            "ITERATION_CODE",
        )
    if map_df is not None:
        _check_mapping(str(d / CODE_TO_ITERATION_FILE), map_df, codes_df, race_df, eth_df, log)
    if sum(log.counts.values()) > before:
        return None
    assert codes_df is not None
    assert race_df is not None
    assert eth_df is not None
    assert map_df is not None
    ref = _build(codes_df, race_df, eth_df, map_df, str(d))
    _check_empty_iterations(d, ref, race_df, eth_df, log)
    _check_hierarchy(str(d / CODE_TO_ITERATION_FILE), ref, map_df, log)
    if sum(log.counts.values()) > before:
        return None
    return ref


_CODE_FORMATS = {
    "ITERATION_CODE": (
        "invalid_iteration_code",
        "not an iteration code; rule: an iteration code is four ASCII digits",
        ITERATION_CODE_PATTERN,
    ),
    "RACE_ETH_CODE": (
        "invalid_code",
        "not a race/ethnicity code; rule: a race/ethnicity code is four ASCII digits, not "
        "starting with 0",
        FOUR_DIGIT_CODE,
    ),
}
"""Per code column: the problem kind and message of a value that does not match its pattern."""


def _check_format(file: str, df: pl.DataFrame, log: ProblemLog, column: str) -> None:
    kind, message, pattern = _CODE_FORMATS[column]
    report_rows(log, file, kind, message, df.filter(~pattern_ok(column, pattern)), column)


_CONTROL = "[\\x00-\\x1f\\x7f]"
"""Control characters (NUL, tab, bell, …, DEL): never part of a code or a name."""


def _check_rows_and_text(file: str, df: pl.DataFrame, log: ProblemLog) -> None:
    """A reference file has at least one row, and no field holds a control character."""
    if df.height == 0:
        log.add(
            Problem(
                file,
                "no_rows",
                "the file has a header but no rows; rule: every reference file lists at least "
                "one code, iteration or mapping",
            )
        )
    for column in df.columns:
        if column == ROW:
            continue
        report_rows(
            log,
            file,
            "control_character",
            "the value holds a control character (shown escaped); rule: codes and names "
            "are printable text (no NUL, tab or other control character)",
            df.filter(pl.col(column).str.contains(_CONTROL)).with_columns(
                pl.col(column)
                .map_elements(lambda v: v.encode("unicode_escape").decode(), pl.String)
                .alias("_SHOWN")
            ),
            column,
            value_column="_SHOWN",
        )


def _duplicates(df: pl.DataFrame, key: pl.Expr) -> pl.DataFrame:
    """The rows of ``df`` whose ``key`` was seen on an earlier row, with ``_FIRST``: the
    line of its first occurrence."""
    return df.with_columns(pl.col(ROW).first().over(key).alias("_FIRST")).filter(
        key.is_duplicated() & ~key.is_first_distinct()
    )


def _check_codes(file: str, df: pl.DataFrame, log: ProblemLog) -> None:
    _check_format(file, df, log, "RACE_ETH_CODE")
    report_rows(
        log,
        file,
        "duplicate_code",
        "code defined again (first on line {}); rule: each code is defined once",
        _duplicates(df, pl.col("RACE_ETH_CODE")),
        "RACE_ETH_CODE",
        message_column="_FIRST",
    )


_BOOL = ("True", "False")
_BOOL_OR_NULL = ("True", "False", NULL)


def _check_iteration_rows(file: str, df: pl.DataFrame, log: ProblemLog, *, race: bool) -> None:
    _check_format(file, df, log, "ITERATION_CODE")
    report_rows(
        log,
        file,
        "duplicate_iteration",
        "iteration code defined again (first on line {}); rule: each iteration code is "
        "defined once",
        _duplicates(df, pl.col("ITERATION_CODE")),
        "ITERATION_CODE",
        message_column="_FIRST",
    )
    report_rows(
        log,
        file,
        "invalid_level",
        "not a LEVEL; rule: LEVEL is 0, 1 or 2 (SafeTab-P tabulates levels "
        f"{ITERATION_LEVELS[0]} and {ITERATION_LEVELS[1]}; 0 is the top of the hierarchy)",
        df.filter(~pl.col("LEVEL").is_in([str(i) for i in range(MAX_LEVEL + 1)])),
        "LEVEL",
    )
    flags = (["ALONE"] if race else []) + ["DETAILED_ONLY", "COARSE_ONLY"]
    for col in flags:
        allowed = _BOOL if col == "ALONE" else _BOOL_OR_NULL
        report_rows(
            log,
            file,
            "invalid_flag",
            f"not a flag; rule: {col} is one of {', '.join(allowed)} (exactly so written)",
            df.filter(~pl.col(col).is_in(allowed)),
            col,
        )
    valid = df.filter(
        pl.col("DETAILED_ONLY").is_in(_BOOL_OR_NULL)
        & pl.col("COARSE_ONLY").is_in(_BOOL_OR_NULL)
        & pl.col("LEVEL").is_in(["0", "1", "2"])
    )
    _report_level0(file, valid, log)
    report_rows(
        log,
        file,
        "inconsistent_flags",
        "DETAILED_ONLY and COARSE_ONLY are both True, so the iteration would be tabulated "
        "nowhere; rule: at most one of them is True (DETAILED_ONLY: tabulated at USA, "
        "STATE and PR-STATE only; COARSE_ONLY: at the other geographies only; both False: "
        "everywhere)",
        valid.filter((pl.col("DETAILED_ONLY") == "True") & (pl.col("COARSE_ONLY") == "True")),
        "COARSE_ONLY",
    )


def _report_level0(file: str, valid: pl.DataFrame, log: ProblemLog) -> None:
    level0 = pl.col("LEVEL") == "0"
    for col in ("DETAILED_ONLY", "COARSE_ONLY"):
        report_rows(
            log,
            file,
            "inconsistent_flags",
            f"{col} does not match LEVEL; rule: {col} is Null exactly when LEVEL is 0 (level-0 "
            "iterations are not tabulated, the others are True or False)",
            valid.filter(level0 != (pl.col(col) == NULL)),
            col,
        )


def _check_mapping(
    file: str,
    df: pl.DataFrame,
    codes_df: pl.DataFrame | None,
    race_df: pl.DataFrame | None,
    eth_df: pl.DataFrame | None,
    log: ProblemLog,
) -> None:
    _check_format(file, df, log, "ITERATION_CODE")
    _check_format(file, df, log, "RACE_ETH_CODE")
    pair = pl.struct("ITERATION_CODE", "RACE_ETH_CODE")
    report_rows(
        log,
        file,
        "duplicate_mapping",
        "{}; rule: each (ITERATION_CODE, RACE_ETH_CODE) pair is listed once",
        _duplicates(df, pair).with_columns(
            pl.format(
                "the pair ITERATION_CODE {}, RACE_ETH_CODE {} is listed again (first on line {})",
                "ITERATION_CODE",
                "RACE_ETH_CODE",
                "_FIRST",
            ).alias("_WHAT")
        ),
        "RACE_ETH_CODE",
        message_column="_WHAT",
    )
    if race_df is not None and eth_df is not None:
        known = pl.concat([race_df["ITERATION_CODE"], eth_df["ITERATION_CODE"]])
        report_rows(
            log,
            file,
            "unknown_iteration",
            "iteration code is not defined; rule: every mapped iteration is a row of "
            f"{RACE_ITERATIONS_FILE} or {ETHNICITY_ITERATIONS_FILE}",
            df.filter(~pl.col("ITERATION_CODE").is_in(known.implode())),
            "ITERATION_CODE",
        )
    if codes_df is not None:
        report_rows(
            log,
            file,
            "unknown_code",
            f"race/ethnicity code is not defined; rule: every mapped code is a row of {CODES_FILE}",
            df.filter(
                pattern_ok("RACE_ETH_CODE", FOUR_DIGIT_CODE)
                & ~pl.col("RACE_ETH_CODE").is_in(codes_df["RACE_ETH_CODE"].implode())
            ),
            "RACE_ETH_CODE",
        )


def _flag(v: str) -> bool | None:
    return None if v == NULL else v == "True"


def _build(
    codes_df: pl.DataFrame,
    race_df: pl.DataFrame,
    eth_df: pl.DataFrame,
    map_df: pl.DataFrame,
    source: str,
) -> ReferenceData:
    groups: dict[str, set[int]] = defaultdict(set)
    for it, c in zip(
        map_df["ITERATION_CODE"].to_list(), map_df["RACE_ETH_CODE"].to_list(), strict=True
    ):
        groups[it].add(int(c))
    iterations: dict[str, Iteration] = {}
    for kind, df in ((IterationKind.RACE, race_df), (IterationKind.ETHNICITY, eth_df)):
        for row in df.iter_rows(named=True):
            code = row["ITERATION_CODE"]
            iterations[code] = Iteration(
                code=code,
                name=row["ITERATION_NAME"],
                kind=kind,
                level=int(row["LEVEL"]),
                alone=(row["ALONE"] == "True") if kind is IterationKind.RACE else None,
                detailed_only=_flag(row["DETAILED_ONLY"]),
                coarse_only=_flag(row["COARSE_ONLY"]),
                codes=frozenset(groups.get(code, ())),
            )
    codes = {
        int(c): n
        for c, n in zip(
            codes_df["RACE_ETH_CODE"].to_list(), codes_df["RACE_ETH_NAME"].to_list(), strict=True
        )
    }
    return ReferenceData(codes=codes, iterations=iterations, source=source)


def _check_empty_iterations(
    d: Path, ref: ReferenceData, race_df: pl.DataFrame, eth_df: pl.DataFrame, log: ProblemLog
) -> None:
    """Every tabulated iteration (LEVEL 1 or 2) has at least one code: a group no code
    maps to could never count anyone (and a level of only such groups has stability 0)."""
    empty = [code for code, it in ref.iterations.items() if it.level > 0 and not it.codes]
    for name, df in ((RACE_ITERATIONS_FILE, race_df), (ETHNICITY_ITERATIONS_FILE, eth_df)):
        report_rows(
            log,
            str(d / name),
            "empty_iteration",
            f"no code maps to this iteration in {CODE_TO_ITERATION_FILE}; rule: every "
            "iteration of LEVEL 1 or 2 is tabulated, so its group holds at least one code",
            df.filter(pl.col("ITERATION_CODE").is_in(empty)),
            "ITERATION_CODE",
        )


def hierarchy_category(it: Iteration) -> tuple[IterationKind, int, bool | None]:
    """(kind, LEVEL, ALONE): a code may belong to at most one iteration per category+granularity."""
    return (it.kind, it.level, it.alone)


def _check_hierarchy(file: str, ref: ReferenceData, map_df: pl.DataFrame, log: ProblemLog) -> None:
    """A code must map to at most one iteration per (kind, level, alone, granularity).

    This is what makes the per-level stability h_r·max(2, r) + h_e hold with h_r, h_e ≤ 1
    per level (each hierarchy level contributes one group per code).
    """
    seen: dict[tuple[object, ...], tuple[str, int]] = {}
    reported: set[tuple[str, str, int]] = set()
    rows = zip(
        map_df[ROW].to_list(),
        map_df["ITERATION_CODE"].to_list(),
        map_df["RACE_ETH_CODE"].to_list(),
        strict=True,
    )
    for row, it_code, code_s in rows:
        it = ref.iterations[it_code]
        if it.level == 0:
            continue
        code = int(code_s)
        for gran in Granularity:
            if not it.tabulated_at(gran):
                continue
            key = (*hierarchy_category(it), gran, code)
            if key not in seen:
                seen[key] = (it_code, row)
                continue
            other, other_row = seen[key]
            pair = (min(other, it_code), max(other, it_code), code)
            if pair in reported:
                continue
            reported.add(pair)
            alone = "" if it.alone is None else f", ALONE={it.alone}"
            log.add(
                Problem(
                    file,
                    "code_in_two_iterations",
                    f"code {code} maps to iterations {other} (line {other_row}) and {it_code}, "
                    f"both {it.kind.value} LEVEL={it.level}{alone} tabulated at {gran.value} "
                    "geographies; rule: a code maps to at most one iteration of a level (the "
                    "stability of the level relies on it)",
                    row=row,
                    column="RACE_ETH_CODE",
                    value=code_s,
                )
            )


__all__ = [
    "CODES_FILE",
    "CODE_TO_ITERATION_FILE",
    "ETHNICITY_ITERATIONS_FILE",
    "RACE_ITERATIONS_FILE",
    "REFERENCE_FILES",
    "Iteration",
    "IterationKind",
    "ReferenceData",
    "load_reference",
    "read_reference",
]
