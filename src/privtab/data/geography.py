"""GRF-C (geography reference) reading and validation, and the public geography domains.

``GRF-C.txt`` (or ``GRF-C.parquet``) maps every block to its place and AIANNH area:
``TABBLKST|TABBLKCOU|TABTRACTCE|TABBLK|PLACEFP|AIANNHCE`` (the real file carries more
columns; they are ignored). Region ids per geography level, as in the 2020 production code:

========  ============================  ===========================================
level     REGION_ID                     from
========  ============================  ===========================================
USA       ``1``                         every US block
STATE     ``SS``                        TABBLKST
COUNTY    ``SSCCC``                     TABBLKST + TABBLKCOU
TRACT     ``SSCCCTTTTTT``               TABBLKST + TABBLKCOU + TABTRACTCE
PLACE     ``SSPPPPP``                   TABBLKST + PLACEFP (``99999`` = no place)
AIANNH    ``AAAA``                      AIANNHCE (``9999`` = none; may cross states)
PR-STATE  ``72``; PR-COUNTY, PR-TRACT, PR-PLACE as above for TABBLKST = 72
========  ============================  ===========================================

The domain of every level — the list of regions that get a noisy count, empty or not — is
taken from GRF-C only, never from the person data (DESIGN.md §3). US domains use the blocks
of the states in ``state_filter_us``; Puerto Rico domains the blocks of state 72.

Blocks are identified by a ``UInt64`` key (:data:`BLOCK`, the 15 digits of the block id)
and grouped into *geo units*: distinct (state, county, tract, place, AIANNH) combinations.
An engine joins persons to :attr:`Geography.blocks` (block → unit), aggregates by unit, and
maps units to region ids of every level with :attr:`Geography.units` — much smaller than
the block table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from privtab.data._scan import OpenTable, diagnose_unreadable, is_blank_row, open_table
from privtab.data._tables import ROW, report_rows
from privtab.data.errors import Problem, ProblemLog, checked
from privtab.data.levels import (
    NO_AIANNH,
    NO_PLACE,
    PR_LEVELS,
    PR_STATE_FIPS,
    US_LEVELS,
    US_STATE_FIPS,
    GeoLevel,
)
from privtab.data.spec import (
    BLOCK_COLUMNS,
    FIELDS,
    GRFC_COLUMNS,
    TableSpec,
    grfc_spec,
    name_problems,
)

GRFC_STEM = "GRF-C"
BLOCK = "BLOCK"
UNIT = "UNIT"
VALID_STATES: tuple[str, ...] = (*US_STATE_FIPS, PR_STATE_FIPS)


def block_key_expr() -> pl.Expr:
    """UInt64 block key from the four (validated) block-id string columns."""
    return pl.concat_str([pl.col(c) for c in BLOCK_COLUMNS]).cast(pl.UInt64).alias(BLOCK)


def block_key_string(key: int) -> str:
    """The 15-character block id of a :data:`BLOCK` key."""
    return f"{key:015d}"


@dataclass(frozen=True)
class Geography:
    """Blocks, geo units and the public region domain of every geography level."""

    blocks: pl.DataFrame
    """``BLOCK`` (UInt64, every GRF-C block of every state) → ``UNIT`` (UInt32)."""
    units: pl.DataFrame
    """``UNIT`` + the raw codes + one column per :class:`GeoLevel` (``Enum`` of that level's
    domain; null where the unit is outside the level's scope or has no place/AIANNH)."""
    domains: Mapping[GeoLevel, tuple[str, ...]]
    state_filter_us: tuple[str, ...]
    source: str

    def domain(self, level: GeoLevel) -> tuple[str, ...]:
        """Sorted public region ids of a level (empty regions included)."""
        return self.domains[level]

    def region_dtype(self, level: GeoLevel) -> pl.Enum:
        return pl.Enum(list(self.domains[level]))

    def sizes(self) -> dict[str, int]:
        return {lv.value: len(d) for lv, d in self.domains.items()}


def read_geography(path: str | Path, state_filter_us: Sequence[str] = US_STATE_FIPS) -> Geography:
    """Read and validate a GRF-C file; raise :class:`InputValidationError` on any problem."""
    return checked(lambda log: load_geography(path, log, state_filter_us))


def load_geography(
    path: str | Path,
    log: ProblemLog,
    state_filter_us: Sequence[str] = US_STATE_FIPS,
    batch_rows: int = 1 << 20,
) -> Geography | None:
    """Read and validate a GRF-C file (text or Parquet), adding problems to ``log``.

    Reads in batches; returns ``None`` if the file has any problem.
    """
    path = Path(path)
    name = str(path)
    before = sum(log.counts.values())
    table = open_table(path, GRFC_COLUMNS, log, extra_ok=True)
    if table is None:
        return None
    parts: list[pl.DataFrame] = []
    spec = grfc_spec(VALID_STATES)
    try:
        for batch in table.batches(batch_rows):
            batch = batch.filter(~is_blank_row(GRFC_COLUMNS))
            parts.append(_check_batch(table, spec, batch, log))
    except pl.exceptions.ComputeError as exc:
        diagnose_unreadable(path, exc, log)
        return None
    blocks = pl.concat(parts) if parts else _empty_table()
    dup = blocks.filter(~pl.col(BLOCK).is_first_distinct())
    report_rows(
        log,
        name,
        "duplicate_block",
        "block listed more than once",
        dup.with_columns(pl.col(BLOCK).map_elements(block_key_string, return_dtype=pl.String)),
        "TABBLK",
        value_column=BLOCK,
    )
    if blocks.height == 0 and sum(log.counts.values()) == before:
        log.add(Problem(name, "empty_file", "GRF-C has no blocks"))
    if sum(log.counts.values()) > before:
        return None
    return build_geography(blocks, tuple(state_filter_us), name)


def _empty_table() -> pl.DataFrame:
    return pl.DataFrame(schema={ROW: pl.UInt64, BLOCK: pl.UInt64, **_CODE_DTYPES})


def _check_batch(
    table: OpenTable, spec: TableSpec, batch: pl.DataFrame, log: ProblemLog
) -> pl.DataFrame:
    """Report the problems of a batch (the rules of :func:`privtab.data.spec.grfc_spec`);
    return its valid rows in compact form."""
    from privtab.data.persons import report_field_counts

    file = str(table.path)
    n = len(table.header)
    report_field_counts(file, batch.filter(pl.col(FIELDS) != n), table.header, log)
    batch = batch.filter(pl.col(FIELDS) == n)
    bad_rows: list[pl.Expr] = []

    def run(
        kind: str, cond: pl.Expr, column: str | pl.Expr, value: pl.Expr, message: str | pl.Expr
    ) -> None:
        assert isinstance(column, str)
        assert isinstance(message, str)
        bad_rows.append(cond)
        bad = batch.filter(cond).with_columns(value.alias("_VALUE"))
        report_rows(log, file, kind, message, bad, column, value_column="_VALUE")

    name_problems(spec, None, run)
    return batch.filter(~pl.any_horizontal(bad_rows)).select(
        ROW,
        block_key_expr(),
        *(pl.col(c).cast(dt).alias(c) for c, dt in _CODE_DTYPES.items()),
    )


_CODE_DTYPES: dict[str, type[pl.DataType]] = {
    "TABBLKST": pl.UInt8,
    "TABBLKCOU": pl.UInt16,
    "TABTRACTCE": pl.UInt32,
    "PLACEFP": pl.UInt32,
    "AIANNHCE": pl.UInt16,
}
"""Compact integer form of the unit codes (their widths are fixed, so no information is lost)."""
_UNIT_CODES = tuple(_CODE_DTYPES)


def build_geography(
    table: pl.DataFrame, state_filter_us: tuple[str, ...], source: str
) -> Geography:
    """Geo units, region columns and domains from a validated block table.

    ``table`` has ``BLOCK`` and the integer unit codes (TABBLKST, TABBLKCOU, TABTRACTCE,
    PLACEFP, AIANNHCE) as produced by :func:`load_geography`.
    """
    units = table.select(_UNIT_CODES).unique().sort(_UNIT_CODES).with_row_index(UNIT)
    blocks = table.join(units, on=list(_UNIT_CODES)).select(BLOCK, UNIT).sort(BLOCK)
    widths = {"TABBLKST": 2, "TABBLKCOU": 3, "TABTRACTCE": 6, "PLACEFP": 5, "AIANNHCE": 4}
    units = units.with_columns(
        pl.col(c).cast(pl.String).str.zfill(w).alias(c) for c, w in widths.items()
    )
    st = pl.col("TABBLKST")
    in_us = st.is_in(list(state_filter_us))
    in_pr = st == PR_STATE_FIPS
    county = pl.concat_str("TABBLKST", "TABBLKCOU")
    tract = pl.concat_str("TABBLKST", "TABBLKCOU", "TABTRACTCE")
    place = pl.concat_str("TABBLKST", "PLACEFP")
    has_place = pl.col("PLACEFP") != NO_PLACE
    has_aiannh = pl.col("AIANNHCE") != NO_AIANNH
    region: dict[GeoLevel, pl.Expr] = {
        GeoLevel.USA: pl.when(in_us).then(pl.lit("1")),
        GeoLevel.STATE: pl.when(in_us).then(st),
        GeoLevel.COUNTY: pl.when(in_us).then(county),
        GeoLevel.TRACT: pl.when(in_us).then(tract),
        GeoLevel.PLACE: pl.when(in_us & has_place).then(place),
        GeoLevel.AIANNH: pl.when(in_us & has_aiannh).then(pl.col("AIANNHCE")),
        GeoLevel.PR_STATE: pl.when(in_pr).then(st),
        GeoLevel.PR_COUNTY: pl.when(in_pr).then(county),
        GeoLevel.PR_TRACT: pl.when(in_pr).then(tract),
        GeoLevel.PR_PLACE: pl.when(in_pr & has_place).then(place),
    }
    units = units.with_columns(expr.alias(lv.value) for lv, expr in region.items())
    domains = {
        lv: tuple(sorted(units[lv.value].drop_nulls().unique().to_list()))
        for lv in (*US_LEVELS, *PR_LEVELS)
    }
    units = units.with_columns(pl.col(lv.value).cast(pl.Enum(list(domains[lv]))) for lv in domains)
    return Geography(
        blocks=blocks,
        units=units,
        domains=domains,
        state_filter_us=state_filter_us,
        source=source,
    )


__all__ = [
    "BLOCK",
    "BLOCK_COLUMNS",
    "GRFC_COLUMNS",
    "GRFC_STEM",
    "UNIT",
    "VALID_STATES",
    "Geography",
    "block_key_expr",
    "block_key_string",
    "build_geography",
    "load_geography",
    "read_geography",
]
