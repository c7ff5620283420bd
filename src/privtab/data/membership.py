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
cells first, then multiplies them by :func:`iteration_matrix` of the distinct combinations
(:func:`expand_iterations` is the same incidence as a long table). A combination is
carried in two ``UInt64`` columns (:data:`RACE_KEYS`): the up to eight codes sorted in
decreasing order, 16 bits each, four per column (absent codes are 0, so they sort last).
:func:`iterations_of` is the straightforward per-record definition, used as the reference
in tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt
import polars as pl
from scipy import sparse

from privtab.data.iterations import IterationKind, ReferenceData
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


def _incidence(
    rows: npt.NDArray[np.int64], cols: npt.NDArray[np.int64], shape: tuple[int, int]
) -> sparse.csr_array:
    """An ``int64`` CSR matrix with a 1 at every (row, col) pair (repeated pairs add up)."""
    data = np.ones(rows.size, dtype=np.int64)
    return sparse.csr_array(sparse.coo_array((data, (rows, cols)), shape=shape))


def iteration_matrix(
    combos: pl.DataFrame,
    reference: ReferenceData,
    iteration_level: int,
    granularity: Granularity,
) -> sparse.csr_array:
    """The combination × iteration incidence of one level, by sparse algebra.

    Row ``c`` is the ``c``-th row of ``combos`` (columns :data:`RACE_KEYS` and ``QSPAN``);
    column ``j`` is the ``j``-th iteration of ``reference.select(iteration_level,
    granularity)``; the entry is 1 when the combination is in the iteration (module
    docstring), else absent. With ``X`` the combination × race-code incidence and ``G`` the
    code × iteration incidence of the race groups, ``(X G)[c, j]`` counts the codes of
    ``c`` in ``j``'s group: a race *alone* iteration holds ``c`` when that is all of
    ``c``'s codes, an *alone-or-in-combination* one when it is at least one. An ethnicity
    iteration holds ``c`` when its group holds ``c``'s ethnicity code (row ``e`` of the
    code × iteration incidence of the ethnicity groups). Work grows with the distinct
    combinations and their codes, never with persons. Codes outside the reference belong
    to no group (a combination holding one is in no race alone iteration).
    """
    its = reference.select(iteration_level, granularity)
    shape = (len(its), combos.height)
    codes = np.asarray(sorted(reference.code_set | {c for i in its for c in i.codes}), np.int64)
    lookup = np.full(1 << 16, codes.size, dtype=np.int64)  # unknown codes: one extra row
    lookup[codes] = np.arange(codes.size)

    def groups(kind: IterationKind) -> sparse.csr_array:
        pairs = [(c, j) for j, i in enumerate(its) if i.kind is kind for c in i.codes]
        rows = np.array([c for c, _ in pairs], dtype=np.int64)
        cols = np.array([j for _, j in pairs], dtype=np.int64)
        return _incidence(lookup[rows], cols, (codes.size + 1, shape[0]))

    unpacked = unpack_race_codes(combos[RACE_KEYS[0]].to_numpy(), combos[RACE_KEYS[1]].to_numpy())
    present = unpacked != 0
    n_codes = present.sum(axis=1)
    # combination × code incidence, straight in CSR form (the rows are the combinations)
    indptr = np.r_[0, np.cumsum(n_codes)]
    x = sparse.csr_array(
        (np.ones(int(indptr[-1]), dtype=np.int64), lookup[unpacked[present]], indptr),
        shape=(shape[1], codes.size + 1),
    )
    hits = x @ groups(IterationKind.RACE)  # codes of c in j's group
    alone = np.array([i.kind is IterationKind.RACE and i.alone for i in its], dtype=np.bool_)
    row = np.repeat(np.arange(shape[1], dtype=np.int64), np.diff(hits.indptr))
    hits.data = (~alone[hits.indices] | (hits.data == n_codes[row])).astype(np.int64)
    hits.eliminate_zeros()
    eth = groups(IterationKind.ETHNICITY)[lookup[combos[ETH].to_numpy()]]
    out = sparse.csr_array(hits + eth)
    out.sort_indices()
    return out


def expand_iterations(
    combos: pl.LazyFrame | pl.DataFrame,
    reference: ReferenceData,
    iteration_level: int,
    granularity: Granularity,
) -> pl.DataFrame:
    """Map distinct code combinations to the iterations of one level they belong to.

    ``combos`` needs the columns :data:`RACE_KEYS` (packed race codes) and ``QSPAN`` (the
    ethnicity code, integer). The result has those columns plus ``ITERATION_CODE`` (the
    reference's iteration ``Enum``), one row per (combination, iteration it is in) — the
    non-zero entries of :func:`iteration_matrix`; combinations in no iteration of the level
    produce no rows. Duplicate input rows are collapsed first.
    """
    base = combos.lazy().select(*RACE_KEYS, pl.col(ETH).cast(pl.UInt16)).unique().collect()
    pairs = sparse.coo_array(iteration_matrix(base, reference, iteration_level, granularity))
    codes = pl.Series([i.code for i in reference.select(iteration_level, granularity)])
    return base[pairs.row].with_columns(
        codes.gather(pairs.col).cast(reference.iteration_dtype).alias(ITERATION)
    )


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
    "iteration_matrix",
    "iteration_table",
    "iterations_of",
    "pack_race_codes",
    "race_keys_expr",
    "unpack_race_codes",
    "with_race_keys",
]
