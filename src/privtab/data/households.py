"""Household records (SafeTab-H): streaming reader, vectorised validation, typed form.

Format (Census, unchanged; ``docs/data.md``, CONTRACTS C1): ``household-records.txt``,
pipe-delimited with a header,
``TABBLKST|TABBLKCOU|TABTRACTCE|TABBLK|HHRACE|QRACE1..QRACE8|QSPAN|HOUSEHOLD_TYPE|TEN`` —
one row per occupied housing unit; the race and Hispanic-origin codes are the
householder's; ``Null`` marks an absent race code — or ``household-records.parquet`` with
the same columns (values as strings or integers; a null race code = ``Null``).

The rules are those of the 2020 production code (``household-records.json`` and
``safetab_utils/input_validation.py`` of ``DAS_2020_DDHCB_Production_Code``), declared
once (:func:`household_spec`) and compiled by the same machinery as the person file's
(:mod:`privtab.data.spec`): block ids of 2/3/6/4 digits in the GRF-C (``malformed_id``,
``block_not_in_grfc``), ``invalid_hhrace`` (HHRACE not ``01``–``63``), the race codes
(``missing_race_code``: QRACE1 is Null; ``invalid_race_code``; ``unknown_race_code``: not in
the code list; ``race_code_after_null``; ``duplicate_race_code``; ``too_many_race_codes``:
more than ``max_race_codes``), ``invalid_ethnicity_code`` / ``unknown_ethnicity_code``
(QSPAN), ``invalid_household_type`` (not 1–5) and ``invalid_tenure`` (TEN not 1–4); for
the file ``wrong_header`` (exact columns, in order), ``wrong_field_count``,
``missing_value``, ``invalid_utf8``, ``empty_file``, ``unreadable``. Every problem names
file, line (the header is line 1; Parquet: the row position), column and value; the first
rows of each kind are kept and every offending row is counted. Two rules are stricter than
production's, as for the person file: a repeated race code (production ignores it) and
more codes than ``max_race_codes`` (production's flat map raises mid-run) are refused.

Reading is :class:`privtab.data.persons.PersonReader`'s: batches of 2¹⁸ rows,
dictionary-encoded, every naming check evaluated once per distinct value of a column, the
race-code row rules on integers, the block looked up once per run of equal blocks; only
flagged rows go through the naming checks. Valid rows are handed on as
:class:`TypedHouseholds` (numpy arrays): block key, geo unit, race codes, ethnicity, the
household's *slot* ``4 · (HOUSEHOLD_TYPE − 1) + (TEN − 1)`` (0–19) — the one attribute the
SafeTab-H tables read — HHRACE and the row's number in the file.

This is the one reader of the file: SafeTab-H aggregates its batches; the cross-file
checks of a synthetic population (:mod:`privtab.data.cef`, ``privtab validate``) take
:func:`households_frame`, the same validated rows as a frame.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import polars as pl
from numpy.typing import NDArray

from privtab.data._scan import CodedBatch, find_input, has_rows, open_table
from privtab.data._tables import ROW
from privtab.data.errors import Problem, ProblemLog
from privtab.data.geography import BLOCK, UNIT, Geography
from privtab.data.iterations import CODES_FILE, ReferenceData
from privtab.data.levels import PR_STATE_FIPS, US_STATE_FIPS
from privtab.data.membership import RACE_KEYS, pack_race_codes
from privtab.data.persons import (
    _BAD,
    _FILLED,
    DEFAULT_BATCH_ROWS,
    PersonReader,
    _CodedPath,
    _or_flags,
)
from privtab.data.spec import (
    BLOCK_COLUMNS,
    MAX_CENRACE,
    RACE_COLUMNS,
    FieldRule,
    KnownCode,
    OneOf,
    TableSpec,
    _code,
    _id_rule,
    _race_rules,
)

__all__ = [
    "HOUSEHOLD_COLUMNS",
    "HOUSEHOLD_STEM",
    "HOUSEHOLD_TYPES",
    "SLOTS",
    "TENURES",
    "HouseholdReader",
    "TypedHouseholds",
    "find_household_file",
    "find_input_file",
    "household_spec",
    "households_frame",
    "read_households",
    "slot_of",
]

HOUSEHOLD_STEM = "household-records"
HOUSEHOLD_COLUMNS = (
    *BLOCK_COLUMNS,
    "HHRACE",
    *RACE_COLUMNS,
    "QSPAN",
    "HOUSEHOLD_TYPE",
    "TEN",
)
"""The Census columns of ``household-records``, in order."""
HOUSEHOLD_TYPES = {
    1: "married couple family",
    2: "other family: male householder, no spouse present",
    3: "other family: female householder, no spouse present",
    4: "nonfamily: householder living alone",
    5: "nonfamily: householder not living alone",
}
TENURES = {
    1: "owned with a mortgage or a loan",
    2: "owned free and clear",
    3: "rented",
    4: "occupied without payment of rent",
}
SLOTS = len(HOUSEHOLD_TYPES) * len(TENURES)
"""Distinct (HOUSEHOLD_TYPE, TEN) pairs: a household's slot is ``0 … SLOTS − 1``."""


def slot_of(household_type: Any, tenure: Any) -> Any:
    """The slot ``4 · (HOUSEHOLD_TYPE − 1) + (TEN − 1)`` of integer (arrays of) codes."""
    return (household_type - 1) * len(TENURES) + (tenure - 1)


def household_spec(max_race_codes: int = len(RACE_COLUMNS)) -> TableSpec:
    """The rules of ``household-records`` (Census schema ``household-records.json`` and the
    production input validation; module docstring)."""
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
        FieldRule(
            "HHRACE",
            "invalid_hhrace",
            f"HHRACE (the householder's CENRACE) must be two digits 01..{MAX_CENRACE}",
            OneOf("HHRACE", tuple(f"{i:02d}" for i in range(1, MAX_CENRACE + 1))),
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
        FieldRule(
            "HOUSEHOLD_TYPE",
            "invalid_household_type",
            "HOUSEHOLD_TYPE must be 1 (married couple), 2 or 3 (other family: male / female "
            "householder), 4 (living alone) or 5 (nonfamily, not alone)",
            OneOf("HOUSEHOLD_TYPE", tuple(str(k) for k in HOUSEHOLD_TYPES)),
        ),
        FieldRule(
            "TEN",
            "invalid_tenure",
            "TEN must be 1 (mortgage or loan), 2 (free and clear), 3 (rented) or 4 "
            "(occupied without rent)",
            OneOf("TEN", tuple(str(k) for k in TENURES)),
        ),
    )
    return TableSpec(
        HOUSEHOLD_STEM,
        HOUSEHOLD_COLUMNS,
        fields,
        _race_rules(max_race_codes),
        null_marker_columns=RACE_COLUMNS,
    )


@dataclass(frozen=True)
class TypedHouseholds:
    """Typed household rows (numpy arrays, one entry per row): the block key, the geo unit
    (with a geography), ``race`` (the codes of QRACE1..QRACE8 in file order, 0 = ``Null``,
    shape (rows, 8)), the ethnicity code ``span``, the ``slot`` (:func:`slot_of` of
    HOUSEHOLD_TYPE and TEN), ``hhrace`` (HHRACE, 1–63) and ``row`` (the row's number in
    the file: text, its line, the header being line 1; Parquet, its position)."""

    block: NDArray[np.uint64]
    unit: NDArray[np.uint32] | None
    race: NDArray[np.uint16]
    span: NDArray[np.uint16]
    slot: NDArray[np.uint8]
    hhrace: NDArray[np.uint8]
    row: NDArray[np.uint64]

    def __len__(self) -> int:
        return int(self.block.size)

    def take(self, rows: NDArray[np.bool_]) -> TypedHouseholds:
        """The rows where ``rows`` holds."""
        if rows.all():
            return self
        unit = None if self.unit is None else self.unit[rows]
        return TypedHouseholds(
            self.block[rows],
            unit,
            self.race[rows],
            self.span[rows],
            self.slot[rows],
            self.hhrace[rows],
            self.row[rows],
        )

    def slots(self) -> NDArray[np.uint64]:
        """The row of each household within its unit's cells (the aggregation's key)."""
        return self.slot.astype(np.uint64)

    def canonical(self) -> pl.DataFrame:
        """``BLOCK``, ``UNIT`` (with a geography), ``RACE_KEY1``/``RACE_KEY2``, ``QSPAN``,
        ``HOUSEHOLD_TYPE``, ``TEN`` (small integers)."""
        k1, k2 = pack_race_codes(self.race)
        unit = [] if self.unit is None else [pl.Series(UNIT, self.unit, pl.UInt32)]
        slot = self.slot.astype(np.int64)
        return pl.DataFrame(
            [
                pl.Series(BLOCK, self.block, pl.UInt64),
                *unit,
                pl.Series(RACE_KEYS[0], k1, pl.UInt64),
                pl.Series(RACE_KEYS[1], k2, pl.UInt64),
                pl.Series("QSPAN", self.span, pl.UInt16),
                pl.Series("HOUSEHOLD_TYPE", slot // len(TENURES) + 1, pl.UInt8),
                pl.Series("TEN", slot % len(TENURES) + 1, pl.UInt8),
            ]
        )


class _HouseholdPath(_CodedPath):
    """The person file's flagging path (:class:`privtab.data.persons._CodedPath`) with the
    household rules, typing each row's block, unit, codes and slot."""

    def __init__(
        self,
        reference: ReferenceData | None,
        geography: Geography | None,
        max_race_codes: int,
        run_states: Sequence[str] | None = None,
    ) -> None:
        super().__init__(reference, geography, max_race_codes, household_spec(max_race_codes))
        self.run_states = None if run_states is None else frozenset(run_states)
        self.skipped = 0
        """Rows left out because their TABBLKST is not a state of the run."""

    def _in_run(self, batch: CodedBatch) -> NDArray[np.bool_] | None:
        """Whether each row's TABBLKST is a state of the run (production's readers keep
        only those rows, before any validation); ``None``: no filter."""
        if self.run_states is None:
            return None
        col = batch.columns["TABBLKST"]
        inside = col.values.is_in(list(self.run_states)).fill_null(False).to_numpy()
        return np.asarray(inside[col.codes], dtype=np.bool_)

    @staticmethod
    def _of_a_state(batch: CodedBatch) -> NDArray[np.bool_]:
        """Whether each row's TABBLKST is the code of a state, DC or Puerto Rico."""
        col = batch.columns["TABBLKST"]
        codes = [*US_STATE_FIPS, PR_STATE_FIPS]
        known = col.values.is_in(codes).fill_null(False).to_numpy()
        return np.asarray(known[col.codes], dtype=np.bool_)

    def check(  # type: ignore[override]  # the same protocol, household rows
        self, batch: CodedBatch
    ) -> tuple[NDArray[np.bool_], NDArray[np.bool_], TypedHouseholds]:
        """``(kept, bad, typed)`` of every row (see the base class)."""
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
                block_values[c] = per_value
            else:
                typed[c] = per_value[col.codes]
        bad = (flags & _BAD).astype(bool)
        bad |= batch.fields != len(self.spec.columns)
        columns = [typed[c] for c in RACE_COLUMNS]
        if self.row_rules:
            bad |= self._row_bad(columns)
        block, unit = self._blocks(batch, block_values, bad)
        kept = (flags & _FILLED).astype(bool)
        inside = self._in_run(batch)
        if inside is not None:
            # only a well-formed row of another state is left out; a malformed one (wrong
            # field count, a TABBLKST that is no state's code) is validated and reported
            outside = ~inside & self._of_a_state(batch) & (batch.fields == len(self.spec.columns))
            self.skipped += int(np.count_nonzero(kept & outside))
            kept &= ~outside
        # bad rows may hold 0 here: their slot is meaningless, never used
        slot = slot_of(typed["HOUSEHOLD_TYPE"].astype(np.int16), typed["TEN"].astype(np.int16))
        slot = np.clip(slot, 0, SLOTS - 1).astype(np.uint8)
        race = np.column_stack(columns)
        hh = batch.columns["HHRACE"]  # bad rows may hold 0 here, never used
        per_value = hh.values.cast(pl.UInt8, strict=False).fill_null(0).to_numpy()
        hhrace = per_value.astype(np.uint8, copy=False)[hh.codes]
        typed_rows = TypedHouseholds(block, unit, race, typed["QSPAN"], slot, hhrace, batch.rows)
        return kept, bad, typed_rows


@dataclass
class HouseholdReader(PersonReader):
    """Streams a household file in batches, validating every row as it goes (the person
    reader's machinery with :func:`household_spec`): :meth:`households` yields
    :class:`TypedHouseholds` of the valid rows (restricted to ``states`` if given); problems
    go to ``log``; call :meth:`raise_if_invalid` after the last batch, before anything is
    written. ``part`` reads one part of the file (a Spark task's; rows numbered within it).

    ``run_states``: the states of the run (``state_filter_us`` and/or 72). As production's
    readers (``CSVHReader.get_unit_df``, the CEF reader) do, rows of any other TABBLKST are
    left out *before* validation — not read, not checked, not counted in ``rows_read``;
    :attr:`skipped` counts them (confidential: the run record and the operator's warning,
    never the release). A row that is not well formed — a wrong number of fields, or a
    TABBLKST that is the code of no state, DC or Puerto Rico — is not "of another state":
    it is validated and reported like any other. ``None``: every row.
    """

    run_states: Sequence[str] | None = None
    skipped: int = 0

    def spec(self) -> TableSpec:
        return household_spec(self.max_race_codes)

    def coded_path(self) -> _CodedPath:
        self._path = _HouseholdPath(
            self.reference, self.geography, self.max_race_codes, self.run_states
        )
        return self._path

    def households(self) -> Iterator[TypedHouseholds]:
        """The valid rows of every batch (what :meth:`typed_batches` yields for this
        reader: its coded path types household rows)."""
        for batch in self.typed_batches():
            self.skipped = self._path.skipped
            yield cast(TypedHouseholds, batch)
        if hasattr(self, "_path"):
            self.skipped = self._path.skipped


def read_households(
    path: Any,
    reference: ReferenceData | None,
    geography: Geography | None,
    max_race_codes: int = 8,
    *,
    run_states: Sequence[str] | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> pl.DataFrame:
    """Read a whole (small) household file, validated, as :meth:`TypedHouseholds.
    canonical` rows (only the rows of ``run_states``, if given: see
    :class:`HouseholdReader`); raise :class:`privtab.data.InputValidationError` on any
    problem."""
    reader = HouseholdReader(
        path, reference, geography, max_race_codes, batch_rows=batch_rows, run_states=run_states
    )
    parts = [t.canonical() for t in reader.households()]
    reader.raise_if_invalid()
    if not parts:
        return TypedHouseholds(
            np.zeros(0, np.uint64),
            None if geography is None else np.zeros(0, np.uint32),
            np.zeros((0, len(RACE_COLUMNS)), np.uint16),
            np.zeros(0, np.uint16),
            np.zeros(0, np.uint8),
            np.zeros(0, np.uint8),
            np.zeros(0, np.uint64),
        ).canonical()
    return pl.concat(parts)


def households_frame(
    path: str | Path,
    log: ProblemLog,
    *,
    reference: ReferenceData | None = None,
    geography: Geography | None = None,
    max_race_codes: int = len(RACE_COLUMNS),
) -> pl.DataFrame | None:
    """The household records as a frame for the cross-file checks of a population
    (:func:`privtab.data.cef.check_population`): ``ROW`` (the row's number in the file),
    the block key ``BLOCK``, ``HHRACE`` and ``HOUSEHOLD_TYPE``, one row per household in
    file order. Every row is validated by :class:`HouseholdReader` (with ``reference``:
    the code lists; with ``geography``: the blocks in GRF-C); problems go to ``log`` and
    the frame is then ``None``."""
    before = sum(log.counts.values())
    reader = HouseholdReader(Path(path), reference, geography, max_race_codes, log=log)
    parts = [
        pl.DataFrame(
            [
                pl.Series(ROW, t.row, pl.UInt64),
                pl.Series(BLOCK, t.block, pl.UInt64),
                pl.Series("HHRACE", t.hhrace, pl.UInt8),
                pl.Series("HOUSEHOLD_TYPE", t.slot // len(TENURES) + 1, pl.UInt8),
            ]
        )
        for t in reader.households()
    ]
    if sum(log.counts.values()) > before:
        return None
    schema = {ROW: pl.UInt64, BLOCK: pl.UInt64, "HHRACE": pl.UInt8, "HOUSEHOLD_TYPE": pl.UInt8}
    return pl.concat(parts) if parts else pl.DataFrame(schema=schema)


def find_input_file(directory: Path, stem: str, log: ProblemLog) -> Path | None:
    """``directory/<stem>.txt`` or ``.parquet`` — exactly one must exist (else a problem
    in ``log``: ``missing_file`` or ``ambiguous_input``)."""
    return find_input(directory, stem, log)


def find_household_file(
    directory: Path, log: ProblemLog, *, allow_empty: bool = False
) -> Path | None:
    """The household file of a data folder, its header checked (exact columns, in order)
    and — unless ``allow_empty`` — at least one row (``no_households``: production refuses
    an empty unit file)."""
    path = find_input(directory, HOUSEHOLD_STEM, log)
    if path is None:
        return None
    header = open_table(path, HOUSEHOLD_COLUMNS, log, optional_null=RACE_COLUMNS)
    if header is None:
        return None
    if not allow_empty and not has_rows(path):
        log.add(
            Problem(
                str(path),
                "no_households",
                "the household file has a header but no rows: nothing to tabulate",
            )
        )
    return path
