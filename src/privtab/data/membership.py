"""Which characteristic iterations a record belongs to — per record and vectorised.

Semantics (SafeTab paper §1; DESIGN.md §3): a person with race codes R (1..K distinct codes)
and ethnicity code e is in

- a race *alone* iteration I when every code of R is in I's group;
- a race *alone-or-in-combination* iteration I when some code of R is in I's group;
- an ethnicity iteration I when e is in I's group.

Only the iterations of one population-group level are considered at a time (one LEVEL,
tabulated at one geography granularity, see :meth:`ReferenceData.select`).

Work grows with the number of distinct code combinations, not with persons × iterations:
an engine aggregates persons to (geography, race-code combination, ethnicity, sex, age)
cells first, then calls :func:`expand_iterations` on the distinct combinations and joins
the result back. A combination is carried in two ``UInt64`` columns (:data:`RACE_KEYS`):
the up to eight codes sorted in decreasing order, 16 bits each, four per column (absent
codes are 0, so they sort last). :func:`iterations_of` is the straightforward per-record
definition, used as the reference in tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt
import polars as pl

from privtab.data.iterations import Iteration, IterationKind, ReferenceData
from privtab.data.levels import Granularity

RACE_KEYS = ("RACE_KEY1", "RACE_KEY2")
"""The two UInt64 columns holding a person's sorted race-code combination."""
ETH = "QSPAN"
ITERATION = "ITERATION_CODE"
MAX_CODES = 8
_W1, _W2, _W3 = 1 << 16, 1 << 32, 1 << 48


def iterations_of(
    reference: ReferenceData,
    race_codes: Iterable[int],
    eth_code: int,
    iteration_level: int,
    granularity: Granularity,
) -> frozenset[str]:
    """The iterations (codes) of one level a single record belongs to — the plain definition."""
    codes = set(race_codes)
    if not codes:
        raise ValueError("a record has at least one race code")
    out: set[str] = set()
    for it in reference.select(iteration_level, granularity):
        if it.kind is IterationKind.ETHNICITY:
            member = eth_code in it.codes
        elif it.alone:
            member = codes <= it.codes
        else:
            member = not codes.isdisjoint(it.codes)
        if member:
            out.add(it.code)
    return frozenset(out)


def pack_race_codes(codes: npt.ArrayLike) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """Pack an (n, ≤8) array of race codes (0 = absent) into the two :data:`RACE_KEYS` arrays.

    Codes are sorted in decreasing order within each row first, so the key identifies the
    *set* of codes: the order of QRACE1..QRACE8 in the file does not matter.
    """
    a = np.asarray(codes)
    if a.ndim != 2 or a.shape[1] > MAX_CODES:
        raise ValueError(f"expected an (n, <= {MAX_CODES}) array of codes, got {a.shape}")
    if a.size and (a.min() < 0 or a.max() > 0xFFFF):
        raise ValueError("race codes must lie in 0..65535")
    full = np.zeros((a.shape[0], MAX_CODES), dtype=np.uint16)
    full[:, : a.shape[1]] = a
    # ascending, zeros first; the columns are read backwards below. Rows with one code
    # (most persons) only need that code moved to the last column.
    multi = np.count_nonzero(full, axis=1) > 1
    rows = np.flatnonzero(multi)
    full[rows] = np.sort(full[rows], axis=1)
    single = np.flatnonzero(~multi)
    last = full[single].max(axis=1)
    full[single] = 0
    full[single, MAX_CODES - 1] = last
    keys = []
    for part in (range(7, 3, -1), range(3, -1, -1)):
        k = np.zeros(a.shape[0], dtype=np.uint64)
        for shift, col in zip((48, 32, 16, 0), part, strict=True):
            k |= full[:, col].astype(np.uint64) << np.uint64(shift)
        keys.append(k)
    return keys[0], keys[1]


def unpack_race_codes(k1: npt.ArrayLike, k2: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    """Inverse of :func:`pack_race_codes`: an (n, 8) array, codes decreasing, 0 = absent."""
    keys = np.stack([np.asarray(k1, np.uint64), np.asarray(k2, np.uint64)], axis=1)
    shifts = np.array([48, 32, 16, 0], dtype=np.uint64)
    parts = (keys[:, :, None] >> shifts) & np.uint64(0xFFFF)
    return parts.reshape(len(keys), MAX_CODES).astype(np.uint16)


def _pack_struct(s: pl.Series) -> pl.Series:
    parts = s.struct.unnest()
    arr = np.column_stack([parts[c].fill_null(0).to_numpy() for c in parts.columns])
    k1, k2 = pack_race_codes(arr)
    return pl.DataFrame({RACE_KEYS[0]: k1, RACE_KEYS[1]: k2}).to_struct("RACE_KEYS")


def race_keys_expr(code_columns: Sequence[str]) -> pl.Expr:
    """A struct expression ``RACE_KEYS`` {RACE_KEY1, RACE_KEY2} from integer code columns.

    Null or 0 = absent code. The codes of each row are sorted (numpy, vectorised) and packed;
    works in eager, lazy and streaming queries. See :func:`with_race_keys`.
    """
    if not 1 <= len(code_columns) <= MAX_CODES:
        raise ValueError(f"between 1 and {MAX_CODES} code columns are needed")
    cols = [
        pl.col(c).cast(pl.UInt16).fill_null(0).alias(f"_c{i}") for i, c in enumerate(code_columns)
    ]
    return (
        pl.struct(cols)
        .map_batches(
            _pack_struct,
            return_dtype=pl.Struct({RACE_KEYS[0]: pl.UInt64, RACE_KEYS[1]: pl.UInt64}),
            is_elementwise=True,
        )
        .alias("RACE_KEYS")
    )


def with_race_keys(
    frame: pl.DataFrame | pl.LazyFrame, code_columns: Sequence[str], *, drop: bool = True
) -> pl.LazyFrame:
    """Add :data:`RACE_KEYS` columns built from ``code_columns`` (dropped if ``drop``)."""
    lf = frame.lazy().with_columns(race_keys_expr(code_columns)).unnest("RACE_KEYS")
    return lf.drop(code_columns) if drop else lf


def _unpacked_long(combos: pl.LazyFrame) -> pl.LazyFrame:
    """(_C, RACE_ETH_CODE) for every present code of every combination."""
    frames = []
    for i in range(MAX_CODES):
        key = pl.col(RACE_KEYS[i // 4])
        weight = 1 << (48 - 16 * (i % 4))
        code = ((key // weight) % 65536).cast(pl.UInt16).alias("RACE_ETH_CODE")
        frames.append(combos.select("_C", code))
    return pl.concat(frames).filter(pl.col("RACE_ETH_CODE") != 0)


def _code_map(reference: ReferenceData, its: Iterable[Iteration]) -> pl.LazyFrame:
    return reference.membership(its).lazy()


def expand_iterations(
    combos: pl.LazyFrame | pl.DataFrame,
    reference: ReferenceData,
    iteration_level: int,
    granularity: Granularity,
) -> pl.DataFrame:
    """Map distinct code combinations to the iterations of one level they belong to.

    ``combos`` needs the columns :data:`RACE_KEYS` (packed race codes) and ``QSPAN`` (the
    ethnicity code, integer). The result has those columns plus ``ITERATION_CODE`` (the
    reference's iteration ``Enum``), one row per (combination, iteration it is in);
    combinations in no iteration of the level produce no rows. Duplicate input rows are
    collapsed first.
    """
    its = reference.select(iteration_level, granularity)
    alone = [i for i in its if i.kind is IterationKind.RACE and i.alone]
    combo = [i for i in its if i.kind is IterationKind.RACE and not i.alone]
    eth = [i for i in its if i.kind is IterationKind.ETHNICITY]
    # collected once: the row index must be the same in every branch below
    base = (
        combos.lazy()
        .select(*RACE_KEYS, pl.col(ETH).cast(pl.UInt16))
        .unique()
        .collect()
        .with_row_index("_C")
        .lazy()
    )
    long = _unpacked_long(base)
    n_codes = long.group_by("_C").agg(pl.len().alias("_N"))
    in_alone = (
        long.join(_code_map(reference, alone), on="RACE_ETH_CODE")
        .group_by("_C", ITERATION)
        .agg(pl.len().alias("_K"))
        .join(n_codes, on="_C")
        .filter(pl.col("_K") == pl.col("_N"))
        .select("_C", ITERATION)
    )
    in_combo = (
        long.join(_code_map(reference, combo), on="RACE_ETH_CODE").select("_C", ITERATION).unique()
    )
    in_eth = base.join(_code_map(reference, eth), left_on=ETH, right_on="RACE_ETH_CODE").select(
        "_C", ITERATION
    )
    pairs = pl.concat([in_alone, in_combo, in_eth])
    return pairs.join(base, on="_C").select(*RACE_KEYS, ETH, ITERATION).collect()


def iteration_table(
    reference: ReferenceData, iteration_level: int, granularity: Granularity
) -> pl.DataFrame:
    """The public iteration domain of a level with its attributes (one row per iteration)."""
    its = reference.select(iteration_level, granularity)
    return pl.DataFrame(
        {
            ITERATION: [i.code for i in its],
            "ITERATION_NAME": [i.name for i in its],
            "KIND": [i.kind.value for i in its],
            "LEVEL": [i.level for i in its],
            "ALONE": [i.alone for i in its],
            "DETAILED_ONLY": [bool(i.detailed_only) for i in its],
            "COARSE_ONLY": [bool(i.coarse_only) for i in its],
            "N_CODES": [len(i.codes) for i in its],
        },
        schema={
            ITERATION: reference.iteration_dtype,
            "ITERATION_NAME": pl.String,
            "KIND": pl.String,
            "LEVEL": pl.UInt8,
            "ALONE": pl.Boolean,
            "DETAILED_ONLY": pl.Boolean,
            "COARSE_ONLY": pl.Boolean,
            "N_CODES": pl.UInt32,
        },
    )


__all__ = [
    "ETH",
    "ITERATION",
    "RACE_KEYS",
    "expand_iterations",
    "iteration_table",
    "iterations_of",
    "pack_race_codes",
    "race_keys_expr",
    "unpack_race_codes",
    "with_race_keys",
]
