"""Exact aggregation of person records into cells — the only pass over the person file.

DESIGN.md §3: aggregate first (persons → distinct (geo unit, race-code combination,
ethnicity, sex, age) cells), expand combinations to iterations afterwards, so the work of
every level grows with distinct combinations, not with persons × iterations.

The person file is read in batches by :class:`privtab.data.PersonReader`, which validates
every row (each check once per distinct value of a column, naming checks only on flagged
rows) and hands on the valid rows as typed arrays. Each batch is reduced to cells with
integer arithmetic only: the combination of a row (the *set* of its race codes and its
ethnicity) becomes an integer token of code ranks and then a combination id
(:class:`_ComboIds`: a dense table for one-code combinations, a sorted array for up to
four codes, a dictionary for the rare rest); the cell is one packed 64-bit key; a sort
counts the keys. Partial tables are kept per state and merged exactly (summed), so memory
is bounded by the cell table, not by the persons, and the work is linear in the persons.
If any row is invalid, one :class:`InputValidationError` listing file / row / column /
value is raised — before anything is written. This step computes exact counts; it has no
privacy cost by itself (nothing it returns is published, and nothing about the data —
no timing, no size — is written anywhere by it).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
import polars as pl
from numpy.typing import NDArray

from privtab.accounting.digest import RecordDigest
from privtab.data import SafeTabInputs
from privtab.data.geography import UNIT
from privtab.data.membership import RACE_KEYS, pack_race_codes
from privtab.data.persons import RACE_COLUMNS, TypedPersons

__all__ = [
    "COMBO",
    "PERSONS_SCHEMA",
    "ROW_SHIFT",
    "Cells",
    "PackedCells",
    "Records",
    "aggregate_persons",
    "aggregate_records",
    "aggregate_typed",
    "cells_from_frame",
    "merge_packed",
    "packed_cells",
    "person_words",
    "prefetch",
]

COMBO = "C"
"""Column of the combination id (distinct RACE_KEY1, RACE_KEY2, QSPAN)."""
_CELL_KEYS = (UNIT, *RACE_KEYS, "QSPAN", "QSEX", "QAGE")
_T = TypeVar("_T")


class Records(Protocol):
    """Validated typed records of any Census record file (persons, households): each
    row's geo unit, race codes (QRACE1..QRACE8, 0 = ``Null``), ethnicity code and *slot* —
    its row within its unit's cells (persons: ``(sex − 1) · 128 + age``; households:
    ``4 · (HOUSEHOLD_TYPE − 1) + (TEN − 1)``), below 256."""

    @property
    def unit(self) -> NDArray[np.uint32] | None: ...

    @property
    def race(self) -> NDArray[np.uint16]: ...

    @property
    def span(self) -> NDArray[np.uint16]: ...

    def slots(self) -> NDArray[np.uint64]: ...


@dataclass(frozen=True)
class Cells:
    """Exact person counts per (geo unit, code combination, sex, age) cell.

    ``cells``: ``UNIT`` (UInt32), :data:`COMBO` (UInt32), ``QSEX`` (UInt8), ``QAGE``
    (UInt8), ``N`` (UInt32 persons). ``combos``: :data:`COMBO` → ``RACE_KEY1``,
    ``RACE_KEY2`` (UInt64), ``QSPAN`` (UInt16). ``persons`` is the number of valid rows.
    """

    cells: pl.DataFrame
    combos: pl.DataFrame
    persons: int

    def filter_units(self, units: pl.Series) -> Cells:
        """Only the cells of the given units (e.g. one state's), same combination ids."""
        cells = self.cells.filter(pl.col(UNIT).is_in(units.implode()))
        return Cells(cells, self.combos, int(cells["N"].sum() or 0))


def cells_from_frame(rows: pl.LazyFrame | pl.DataFrame) -> Cells:
    """Aggregate canonical rows (``UNIT``, race keys, ``QSPAN``, ``QSEX``, ``QAGE``)."""
    agg = (
        rows.lazy()
        .group_by(_CELL_KEYS)
        .agg(pl.len().cast(pl.UInt32).alias("N"))
        .collect(engine="streaming")
    )
    return _with_combo_ids(agg)


def _with_combo_ids(agg: pl.DataFrame) -> Cells:
    combos = (
        agg.select(*RACE_KEYS, "QSPAN")
        .unique()
        .sort(*RACE_KEYS, "QSPAN")
        .with_row_index(COMBO)
        .with_columns(pl.col(COMBO).cast(pl.UInt32))
    )
    cells = agg.join(combos, on=[*RACE_KEYS, "QSPAN"], how="inner").select(
        pl.col(UNIT).cast(pl.UInt32),
        COMBO,
        pl.col("QSEX").cast(pl.UInt8),
        pl.col("QAGE").cast(pl.UInt8),
        "N",
    )
    return Cells(cells, combos, int(cells["N"].sum() or 0))


_AGE_BITS, _SEX_BITS, _COMBO_BITS = 7, 1, 24
MAX_COMBOS = 1 << _COMBO_BITS
"""Distinct (race-code combination, ethnicity) pairs a run can hold (16.7 M)."""


class _ComboIds:
    """A growing dictionary code combination → combination id (UInt32), ids in order of
    first appearance (within a batch, in token order: deterministic).

    A combination is the *set* of race codes and the ethnicity code. Each code is replaced
    by its rank in the sorted code list (``bits`` bits, 0 = absent); a combination of at
    most ``narrow`` codes is then one integer *token* — the ranks in increasing order and
    the ethnicity's rank — so most rows are looked up with integer arithmetic only:

    * one race code (most persons): a dense table indexed by the token;
    * 2..``narrow`` codes: a sorted array of tokens (binary search);
    * more codes (rare): a dictionary keyed by the packed race keys.

    Memory is bounded by the number of distinct combinations (≤ :data:`MAX_COMBOS`), and
    the work per batch is linear in its rows plus its new combinations.
    """

    def __init__(self, codes: list[int]) -> None:
        self.rank = np.zeros(1 << 16, dtype=np.uint64)
        self.code = np.zeros(len(codes) + 1, dtype=np.uint16)
        ordered = sorted(codes)
        self.rank[ordered] = np.arange(1, len(ordered) + 1, dtype=np.uint64)
        self.rank_i64 = self.rank.astype(np.int64)
        self.code[1:] = ordered
        self.bits = max(1, len(ordered).bit_length())
        self.narrow = min(len(RACE_COLUMNS), (63 - self.bits) // self.bits)
        single = 1 << (2 * self.bits)
        self.dense = np.full(single if 2 * self.bits <= 24 else 0, -1, dtype=np.int64)
        self.tokens = np.zeros(0, dtype=np.uint64)  # sorted
        self.token_ids = np.zeros(0, dtype=np.int64)
        self.wide: dict[tuple[int, ...], int] = {}
        self.first_token: list[NDArray[np.uint64]] = []  # per new id block: the tokens
        self.wide_keys: list[tuple[int, ...]] = []  # (id, k1, k2, span)
        self.size = 0

    def _new(self, count: int) -> NDArray[np.int64]:
        if self.size + count > MAX_COMBOS:
            raise ValueError(f"more than {MAX_COMBOS:,} distinct code combinations")
        ids = np.arange(self.size, self.size + count, dtype=np.int64)
        self.size += count
        return ids

    def ids(self, persons: Records) -> NDArray[np.uint64]:
        """The combination id of every row (new combinations get new ids).

        The rows are valid (:class:`privtab.data.PersonReader` yields no other): each holds
        QRACE1 and its codes come first, so a row holds one code exactly when QRACE2 is
        absent — most rows, looked up with a few whole-array operations; the others (one in
        five persons) are counted and sorted on their own."""
        race = persons.race
        shift = self.bits
        # every row's one-code token: the rank of QRACE1, then the ethnicity's
        token = self.rank_i64[race[:, 0]]
        token <<= shift
        token |= self.rank_i64[persons.span]
        multi = np.flatnonzero(race[:, 1] != 0)
        out = self._singles(token, multi)
        if multi.size == 0:
            return out.astype(np.uint64)
        span = token[multi] & ((1 << shift) - 1)
        n_codes = np.count_nonzero(race[multi], axis=1)
        narrow = n_codes <= self.narrow
        rows = multi[narrow]
        t = np.zeros(rows.size, dtype=np.int64)
        for rank in _sorted_columns([self.rank_i64[race[rows, j]] for j in range(self.narrow)]):
            t <<= shift
            t |= rank
        t <<= shift
        t |= span[narrow]
        out[rows] = self._lookup(t.astype(np.uint64))
        if not narrow.all():
            wide = multi[~narrow]
            out[wide] = self._wide(race[wide], persons.span[wide])
        return out.astype(np.uint64)

    def _singles(self, token: NDArray[np.int64], multi: NDArray[np.int64]) -> NDArray[np.int64]:
        """Ids of every row from its one-code ``token`` (those of the rows ``multi``, which
        hold more codes, are placeholders that the caller overwrites)."""
        if self.dense.size == 0:
            out = np.zeros(token.size, dtype=np.int64)
            single = np.ones(token.size, dtype=bool)
            single[multi] = False
            out[single] = self._lookup(token[single].astype(np.uint64))
            return out
        out = self.dense[token]
        missing = out < 0
        missing[multi] = False
        if missing.any():
            new_at = np.unique(token[missing])
            self.dense[new_at] = self._new(new_at.size)
            self.first_token.append(new_at.astype(np.uint64))
            out = self.dense[token]
        return out

    def _lookup(self, token: NDArray[np.uint64]) -> NDArray[np.int64]:
        """Ids of narrow tokens: the dense table below its size, the sorted array above."""
        ids = np.empty(token.size, dtype=np.int64)
        small = token < np.uint64(self.dense.size)
        if small.any():
            at = token[small].astype(np.int64)
            found = self.dense[at]
            missing = found < 0
            if missing.any():
                new_at = np.unique(at[missing])
                self.dense[new_at] = self._new(new_at.size)
                self.first_token.append(new_at.astype(np.uint64))
                found = self.dense[at]
            ids[small] = found
        big = ~small
        if big.any():
            # distinct tokens first: fewer, and in order (a binary search of sorted keys
            # stays in cache)
            distinct, inverse = np.unique(token[big], return_inverse=True)
            pos = np.searchsorted(self.tokens, distinct)
            hit = pos < self.tokens.size
            hit[hit] = self.tokens[pos[hit]] == distinct[hit]
            if not hit.all():
                fresh = distinct[~hit]
                new_ids = self._new(fresh.size)
                self.first_token.append(fresh)
                at = np.searchsorted(self.tokens, fresh)
                self.tokens = np.insert(self.tokens, at, fresh)
                self.token_ids = np.insert(self.token_ids, at, new_ids)
                pos = np.searchsorted(self.tokens, distinct)
            ids[big] = self.token_ids[pos][inverse.reshape(-1)]
        return ids

    def _wide(self, race: NDArray[np.uint16], span: NDArray[np.uint16]) -> NDArray[np.int64]:
        """Ids of combinations with more than ``narrow`` codes (rare), by packed keys."""
        k1, k2 = pack_race_codes(race)
        keys = np.column_stack([k1, k2, span.astype(np.uint64)])
        distinct, inverse = np.unique(keys, axis=0, return_inverse=True)
        rows = [tuple(k) for k in distinct.tolist()]
        fresh = [k for k in rows if k not in self.wide]
        for k, i in zip(fresh, self._new(len(fresh)).tolist(), strict=True):
            self.wide[k] = i
            self.wide_keys.append((i, *k))
        ids = np.asarray([self.wide[k] for k in rows], dtype=np.int64)
        return ids[inverse.reshape(-1)]

    @property
    def table(self) -> pl.DataFrame:
        """``C`` → ``RACE_KEY1``, ``RACE_KEY2``, ``QSPAN``, sorted by ``C``."""
        tokens = np.concatenate(self.first_token) if self.first_token else np.zeros(0, np.uint64)
        mask = np.uint64((1 << self.bits) - 1)
        span = self.code[(tokens & mask).astype(np.int64)]
        codes = np.zeros((tokens.size, len(RACE_COLUMNS)), dtype=np.uint16)
        rest = tokens >> np.uint64(self.bits)
        for j in range(self.narrow):
            codes[:, j] = self.code[(rest & mask).astype(np.int64)]
            rest = rest >> np.uint64(self.bits)
        k1, k2 = pack_race_codes(codes)
        ids = self._ids_of(tokens)
        wide = np.asarray(self.wide_keys, dtype=np.uint64).reshape(-1, 4)
        return (
            pl.DataFrame(
                {
                    COMBO: np.concatenate([ids, wide[:, 0]]),
                    RACE_KEYS[0]: np.concatenate([k1, wide[:, 1]]),
                    RACE_KEYS[1]: np.concatenate([k2, wide[:, 2]]),
                    "QSPAN": np.concatenate([span.astype(np.uint64), wide[:, 3]]),
                }
            )
            .with_columns(
                pl.col(COMBO).cast(pl.UInt32),
                pl.col(RACE_KEYS[0]).cast(pl.UInt64),
                pl.col(RACE_KEYS[1]).cast(pl.UInt64),
                pl.col("QSPAN").cast(pl.UInt16),
            )
            .sort(COMBO)
        )

    def _ids_of(self, tokens: NDArray[np.uint64]) -> NDArray[np.uint64]:
        """The ids of known narrow tokens."""
        out = np.empty(tokens.size, dtype=np.uint64)
        small = tokens < np.uint64(self.dense.size)
        out[small] = self.dense[tokens[small].astype(np.int64)].astype(np.uint64)
        big = ~small
        out[big] = self.token_ids[np.searchsorted(self.tokens, tokens[big])].astype(np.uint64)
        return out


def _sorted_columns(cols: list[NDArray[np.int64]]) -> list[NDArray[np.int64]]:
    """The columns of a small matrix sorted within each row (ascending), as columns: an
    odd-even transposition network of element-wise minima and maxima (``np.sort(axis=1)``
    pays a call per row)."""
    cols = list(cols)
    for r in range(len(cols)):
        for j in range(r % 2, len(cols) - 1, 2):
            lo, hi = cols[j], cols[j + 1]
            cols[j], cols[j + 1] = np.minimum(lo, hi), np.maximum(lo, hi)
    return cols


_SHIFT_AGE = 1 << _COMBO_BITS
_SHIFT_SEX = 1 << (_COMBO_BITS + _AGE_BITS)
_SHIFT_UNIT = 1 << (_COMBO_BITS + _AGE_BITS + _SEX_BITS)


def _packed_key(records: Records, combo: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """UNIT (32 bits) | slot (8: for persons sex − 1 (1) | age (7)) | combination (24) in
    one UInt64: sorted keys are cells sorted by unit, slot (persons: sex, age), then
    combination — the rows of the cell matrix (:class:`privtab.tabulate.counts.
    CellMatrix`) in order."""
    assert records.unit is not None
    u64 = np.uint64
    key = records.unit.astype(u64) * u64(_SHIFT_UNIT)
    key += records.slots() * u64(_SHIFT_AGE)
    key += combo
    return key


PERSONS_SCHEMA = "safetab-p persons v1: BLOCK<<8|QAGE<<1|QSEX-1; QRACE1-4; QRACE5-8; QSPAN"
"""What a person's words in the records digest are (:func:`person_words`)."""


def person_words(persons: TypedPersons) -> list[NDArray[np.uint64]]:
    """The parsed fields of each person row that SafeTab-P reads, as four 64-bit words for
    the release ledger's records digest (:class:`privtab.accounting.digest.RecordDigest`):
    the block key (15 digits < 2⁵⁰) with age and sex; the QRACE1..8 codes (16 bits each,
    little-endian: the same words on every machine); QSPAN. Parsed values, so a copy of
    the file in another encoding, line ending, row order or format has the same words."""
    u64 = np.uint64
    first = persons.block.astype(u64) << u64(8)
    first |= persons.age.astype(u64) << u64(1)
    first |= persons.sex.astype(u64) - u64(1)
    race = np.ascontiguousarray(persons.race, dtype="<u2").view("<u8")
    return [first, race[:, 0], race[:, 1], persons.span.astype(u64)]


def _counted(keys: NDArray[np.uint64]) -> pl.DataFrame:
    """The (K, N) table of a batch's keys — distinct keys, sorted, with their counts."""
    keys = np.sort(keys)
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if keys.size else keys
    counts = np.diff(np.r_[starts, keys.size]).astype(np.uint32)
    frame = pl.DataFrame({"K": keys[starts], "N": counts}, schema={"K": pl.UInt64, "N": pl.UInt32})
    return frame.with_columns(pl.col("K").set_sorted())


def _merge(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Exact sum of partial (K, N) tables, each sorted by ``K``: sorted by ``K``.

    The tables are concatenated and stably sorted — little work when they follow each
    other in key order, as the batches of a file sorted by block do (a sort of runs), —
    then the counts of equal keys, now adjacent, are summed."""
    if len(frames) == 1:
        return frames[0]
    keys = np.concatenate([f["K"].to_numpy() for f in frames])
    counts = np.concatenate([f["N"].to_numpy() for f in frames])
    if keys.size > 1 and not bool((keys[1:] >= keys[:-1]).all()):
        order = np.argsort(keys, kind="stable")
        keys, counts = keys[order], counts[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if keys.size else keys
    summed = np.add.reduceat(counts.astype(np.uint64), starts) if keys.size else counts
    if summed.size and summed.max() > np.iinfo(np.uint32).max:
        raise ValueError("a cell holds more than 2³² − 1 persons")
    frame = pl.DataFrame(
        {"K": keys[starts], "N": summed.astype(np.uint32)},
        schema={"K": pl.UInt64, "N": pl.UInt32},
    )
    return frame.with_columns(pl.col("K").set_sorted())


class _Partitions:
    """Partial cell tables kept per state (a contiguous range of UNIT ids, hence of packed
    keys), so every exact merge is bounded by one state's cells, not the nation's.

    Partial tables are merged, state by state, once all pending rows outnumber the merged
    ones (and at least ``min_pending``): memory stays about twice the cell table, and the
    merging work is amortised linear in the rows read.
    """

    def __init__(self, unit_starts: list[int], min_pending: int = 1 << 23) -> None:
        starts = sorted(set(unit_starts) | {0})
        self.bounds = np.asarray([u * _SHIFT_UNIT for u in starts], dtype=np.uint64)
        self.acc: list[pl.DataFrame | None] = [None] * len(starts)
        self.parts: list[list[pl.DataFrame]] = [[] for _ in starts]
        self.rows = 0
        self.pending = 0
        self.min_pending = min_pending

    def add(self, part: pl.DataFrame) -> None:
        """Add one batch's (K, N) table (any order; split by state here)."""
        part = part.sort("K")  # free when already sorted (flagged so)
        keys = part["K"].to_numpy()
        cut = [*np.searchsorted(keys, self.bounds, side="left").tolist(), part.height]
        for p in range(len(self.bounds)):
            lo, hi = cut[p], cut[p + 1]
            if hi > lo:
                self.parts[p].append(part.slice(lo, hi - lo))
        self.pending += part.height
        if self.pending > max(self.rows, self.min_pending):
            self.compact()

    def _merged(self, p: int) -> pl.DataFrame | None:
        acc = self.acc[p]
        frames = ([acc] if acc is not None else []) + self.parts[p]
        self.parts[p] = []
        return _merge(frames) if frames else None

    def compact(self) -> None:
        self.rows = 0
        for p in range(len(self.acc)):
            merged = self._merged(p)
            self.acc[p] = merged
            self.rows += merged.height if merged is not None else 0
        self.pending = 0

    def packed(self) -> tuple[NDArray[np.uint64], NDArray[np.uint32]]:
        """Every cell's packed key and count, sorted by key (= by UNIT first); consumes
        self (each state's table is merged, then the states are concatenated in order)."""
        keys: list[NDArray[np.uint64]] = []
        counts: list[NDArray[np.uint32]] = []
        for p in range(len(self.acc)):
            merged = self._merged(p)
            self.acc[p] = None
            if merged is not None:
                merged = merged.sort("K")
                keys.append(merged["K"].to_numpy())
                counts.append(merged["N"].to_numpy())
        if not keys:
            return np.zeros(0, np.uint64), np.zeros(0, np.uint32)
        return np.concatenate(keys), np.concatenate(counts)

    def cells(self) -> pl.DataFrame:
        """Every cell, unpacked and sorted by packed key (= by UNIT first); consumes self."""
        out: list[pl.DataFrame] = []
        for p in range(len(self.acc)):
            merged = self._merged(p)
            self.acc[p] = None
            if merged is not None:
                out.append(_unpack(merged.sort("K")))
            del merged
        if not out:
            return _unpack(pl.DataFrame(schema={"K": pl.UInt64, "N": pl.UInt32}))
        return pl.concat(out, rechunk=True)


def packed_cells(cells: Cells, ids: NDArray[np.uint32] | None = None) -> pl.DataFrame:
    """The cells as ``K`` (one UInt64: unit, sex, age, combination id — :func:`_packed_key`'s
    layout, so sorted keys are cells in the rows' order of the cell matrix) and ``N``; with
    ``ids``, combination ``c`` becomes ``ids[c]`` (a reader's own numbering → the run's)."""
    frame = cells.cells
    combo = frame[COMBO].to_numpy().astype(np.uint64)
    if ids is not None:
        combo = ids.astype(np.uint64)[combo]
    u64 = np.uint64
    key = frame[UNIT].to_numpy().astype(u64) * u64(_SHIFT_UNIT)
    key += (frame["QSEX"].to_numpy().astype(u64) - u64(1)) * u64(_SHIFT_SEX)
    key += frame["QAGE"].to_numpy().astype(u64) * u64(_SHIFT_AGE)
    key += combo
    return pl.DataFrame({"K": key, "N": frame["N"]}, schema={"K": pl.UInt64, "N": pl.UInt32})


def merge_packed(
    frames: Sequence[pl.DataFrame],
) -> tuple[NDArray[np.uint64], NDArray[np.uint32]]:
    """The exact sum of partial packed cell tables (:func:`packed_cells`, one numbering of
    the combinations): distinct keys, sorted, and their persons. Partial tables of parts of
    a file sorted by block hardly overlap: a sort and a check for equal neighbours."""
    if not frames:
        return np.zeros(0, np.uint64), np.zeros(0, np.uint32)
    keys = np.concatenate([f["K"].to_numpy() for f in frames])
    n = np.concatenate([f["N"].to_numpy() for f in frames])
    order = np.argsort(keys, kind="stable")
    keys, n = keys[order], n[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if keys.size else order
    if starts.size < keys.size:
        n = np.add.reduceat(n, starts).astype(np.uint32)
        keys = keys[starts]
    return keys, n


ROW_SHIFT = _COMBO_BITS
"""A packed cell key (:func:`packed_cells`) shifted right by this many bits is the cell's
row of the cell matrix, ``UNIT · 256 + sex × age``; its low bits are the combination."""


def prefetch(batches: Iterator[_T], depth: int = 2) -> Iterator[_T]:
    """Run ``batches`` (reading + validation) in a thread, ``depth`` batches ahead.

    Reading/validating (pyarrow, polars) and aggregating (polars) both release the GIL, so
    on two cores they overlap. Exceptions of the reader are re-raised here; if the consumer
    stops early (error, Ctrl-C), the thread stops at its next batch.
    """
    q: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for b in batches:
                if not put(("batch", b)):
                    return
            put(("done", None))
        except BaseException as exc:
            put(("error", exc))

    thread = threading.Thread(target=produce, name="privtab-reader", daemon=True)
    thread.start()
    try:
        while True:
            kind, item = q.get()
            if kind == "batch":
                yield item
            elif kind == "error":
                raise item
            else:
                return
    finally:
        stop.set()
        thread.join(timeout=5)


_prefetch_batches = prefetch  # ``aggregate_persons``' flag of the same name shadows it


def _unpack(acc: pl.DataFrame) -> pl.DataFrame:
    k = pl.col("K")
    return acc.select(
        (k // _SHIFT_UNIT).cast(pl.UInt32).alias(UNIT),
        (k % MAX_COMBOS).cast(pl.UInt32).alias(COMBO),
        ((k // _SHIFT_SEX) % 2 + 1).cast(pl.UInt8).alias("QSEX"),
        ((k // _SHIFT_AGE) % (1 << _AGE_BITS)).cast(pl.UInt8).alias("QAGE"),
        "N",
    )


def aggregate_persons(
    inputs: SafeTabInputs,
    *,
    batch_rows: int = 1 << 20,
    progress: Callable[[int, float], None] | None = None,
    prefetch: bool = True,
    merge_rows: int = 1 << 23,
    digest: RecordDigest | None = None,
) -> Cells:
    """Validate and aggregate the person file of ``inputs`` in one streaming pass.

    The file is read in batches of ``batch_rows`` (text: polars' streaming reader; Parquet:
    row group by row group, as dictionaries), each batch is validated
    (:class:`privtab.data.PersonReader`) and reduced to its cells (combination ids by
    :class:`_ComboIds`, a sort of the packed keys), and the partial cell tables are kept per
    state and merged
    exactly (summed) state by state once they hold more rows than the merged tables — so
    memory is about twice the cell table plus a few batches, whatever the number of persons,
    and no merge is larger than one state's cells. A cell is one UInt64 key (unit,
    combination id, sex, age) and a UInt32 count: 12 bytes, so 10⁸ cells take 1.2 GB.
    With ``prefetch`` the reading and validation run in a second thread, a batch ahead of
    the aggregation (both release the GIL: on two cores they overlap).
    ``merge_rows`` is the least number of pending partial rows that triggers a merge.
    ``progress(rows_read, seconds)`` is called after every batch; ``digest`` is fed every
    valid row (:func:`person_words`: the data set's identity for the release ledger). Raises
    :class:`privtab.data.InputValidationError` naming every bad row (file, row number,
    column, value); nothing has been written at that point.
    """
    reader = inputs.person_reader(batch_rows=batch_rows)
    units = inputs.geography.units
    starts = units.group_by("TABBLKST").agg(pl.col(UNIT).min())[UNIT].to_list()
    started = time.monotonic()
    typed = reader.typed_batches()

    def read() -> None:
        if progress is not None:
            progress(reader.rows_read, time.monotonic() - started)

    batches = _prefetch_batches(typed) if prefetch else typed
    cells = aggregate_typed(batches, inputs.reference.codes, starts, merge_rows, read, digest)
    reader.raise_if_invalid()
    return cells


def _fill(
    batches: Iterable[Records],
    codes: Iterable[int],
    unit_starts: Sequence[int],
    merge_rows: int,
    after_batch: Callable[[], None] | None,
    each: Callable[[Any], None] | None = None,
) -> tuple[_Partitions, _ComboIds]:
    """Every batch counted into per-state partial tables (combination ids by
    :class:`_ComboIds`, packed keys counted by a sort); ``each(batch)`` is called on every
    batch first (the records digest)."""
    combos = _ComboIds(sorted(codes))
    store = _Partitions(list(unit_starts), min_pending=merge_rows)
    for batch in batches:
        if each is not None:
            each(batch)
        store.add(_counted(_packed_key(batch, combos.ids(batch))))
        if after_batch is not None:
            after_batch()
    return store, combos


def aggregate_typed(
    batches: Iterable[Records],
    codes: Iterable[int],
    unit_starts: Sequence[int],
    merge_rows: int = 1 << 23,
    after_batch: Callable[[], None] | None = None,
    digest: RecordDigest | None = None,
) -> Cells:
    """The cells of validated typed rows (:meth:`privtab.data.persons.PersonReader.
    typed_batches`): combination ids over the reference ``codes`` (:class:`_ComboIds`,
    numbered in order of appearance), packed keys counted by a sort, partial tables kept
    per range of units starting at ``unit_starts`` (the states) and merged exactly.
    The cells come out sorted by unit, sex, age and combination id. ``digest``: fed
    every row (:func:`person_words`)."""
    each = None if digest is None else (lambda b: digest.add(person_words(b)))
    store, combos = _fill(batches, codes, unit_starts, merge_rows, after_batch, each)
    # sorted by the packed key = by unit first: engines slice the cells of a state cheaply
    cells = store.cells()
    return Cells(cells, combos.table, int(cells["N"].sum() or 0))


@dataclass(frozen=True)
class PackedCells:
    """Exact records per (geo unit, slot, code combination) cell as sorted packed keys
    (:func:`packed_cells`' layout: ``K >> ROW_SHIFT`` is the cell matrix's row
    ``UNIT · 256 + slot``) and counts; ``combos`` as in :class:`Cells`."""

    keys: NDArray[np.uint64]
    n: NDArray[np.uint32]
    combos: pl.DataFrame
    records: int


def aggregate_records(
    batches: Iterable[Records],
    codes: Iterable[int],
    unit_starts: Sequence[int],
    merge_rows: int = 1 << 23,
    after_batch: Callable[[], None] | None = None,
) -> PackedCells:
    """:func:`aggregate_typed` for any record file, kept packed (no per-column unpacking:
    :meth:`privtab.tabulate.counts.CellMatrix.from_packed` reads the keys directly)."""
    store, combos = _fill(batches, codes, unit_starts, merge_rows, after_batch)
    keys, n = store.packed()
    return PackedCells(keys, n, combos.table, int(n.sum(dtype=np.uint64)))
