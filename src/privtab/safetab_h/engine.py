"""SafeTab-H's embedded engine: SafeTab-P's aggregation and sparse algebra, on households.

The engine is SafeTab-P's (:mod:`privtab.tabulate`) wherever the two share a step:

1. **one streaming pass** over the household file (:class:`privtab.data.households.
   HouseholdReader`: every row validated, a reader thread one batch ahead) into cells —
   households per (geo unit, slot, race-code combination), the slot being ``4 ·
   (HOUSEHOLD_TYPE − 1) + (TEN − 1)`` — with SafeTab-P's integer combination ids, packed
   keys and per-state exact merges (:func:`privtab.tabulate.aggregate.aggregate_records`),
   read as a sparse cell matrix ``X`` (:class:`~privtab.tabulate.counts.CellMatrix`);
2. per level, ``F = (S X) B``: ``M = S X`` per geography shared by both iteration levels
   and derived down the nest TRACT → COUNTY → STATE → USA
   (:class:`~privtab.tabulate.counts.RegionProducts`, slots kept apart), times the
   combination × iteration incidence ``B`` (:func:`privtab.data.membership.
   iteration_matrix`), chunk by chunk of whole states
   (:meth:`~privtab.tabulate.counts.StateRows.chunks`); the exact counts of the chunk's
   **T1 groups** (households per group and slot) are gathered from ``F``'s entries;
3. the chunk's noise, clamping and marginals: :func:`privtab.safetab_h.algorithm.
   tabulate_chunk`, as on every engine.

In the same pass every valid household is fed to the records digest
(:func:`household_words`, :attr:`HEngine.records`: the data set's identity in the release
ledger, the same on every engine and for any encoding, row order or format of the file).

Memory is SafeTab-P's (the cells, one geography's products, one chunk), plus one chunk's
groups × 20 slots. Exact counts never leave the engine: what it yields are noisy rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

import numpy as np
import polars as pl
from numpy.typing import NDArray
from scipy import sparse

from privtab.accounting.digest import RecordDigest
from privtab.data.geography import UNIT
from privtab.data.households import SLOTS, TypedHouseholds
from privtab.data.membership import iteration_matrix
from privtab.safetab_h.algorithm import CellNoise, ChunkOutput, tabulate_chunk
from privtab.safetab_h.domain import LevelGroups
from privtab.safetab_h.inputs import HInputs
from privtab.safetab_h.queries import QueryPlan
from privtab.tabulate.aggregate import aggregate_records, prefetch
from privtab.tabulate.algorithm import SEX_AGES
from privtab.tabulate.chunk import Drawing
from privtab.tabulate.counts import (
    CellMatrix,
    RegionProducts,
    StateRows,
    f_entries,
    region_rows,
    state_units,
)
from privtab.tabulate.domain import NESTED_IN_STATE, Domain
from privtab.tabulate.engines.polars import (
    DEFAULT_CHUNK_CELLS,
    DEFAULT_CHUNK_GROUPS,
    default_threads,
)

__all__ = [
    "HOUSEHOLDS_SCHEMA",
    "HEngine",
    "PolarsHEngine",
    "digested",
    "exact_chunks",
    "group_slots",
    "household_words",
    "level_domain",
    "make_engine",
    "state_slices",
]

Say = Callable[[str], None]
IDENTITY_SLOTS: NDArray[np.int64] = np.arange(SEX_AGES, dtype=np.int64)
"""Households' slots are kept apart in the region products (no binning)."""


HOUSEHOLDS_SCHEMA = "safetab-h households v1: BLOCK<<8|slot; QRACE1-4; QRACE5-8; QSPAN"
"""What a household's words in the records digest are (:func:`household_words`)."""


def household_words(households: TypedHouseholds) -> list[NDArray[np.uint64]]:
    """The parsed fields of each household row that SafeTab-H reads, as four 64-bit words
    for the release ledger's records digest (:class:`privtab.accounting.digest.
    RecordDigest`): the block key (15 digits < 2⁵⁰) with the slot ``4 · (HOUSEHOLD_TYPE −
    1) + (TEN − 1)``; the householder's QRACE1..8 codes (16 bits each, little-endian: the
    same words on every machine); QSPAN. Parsed values, so a copy of the file in another
    encoding, line ending, row order or format has the same words. (HHRACE is validated
    but not read by the tables, so it is not a word.)"""
    u64 = np.uint64
    first = households.block.astype(u64) << u64(8)
    first |= households.slot.astype(u64)
    race = np.ascontiguousarray(households.race, dtype="<u2").view("<u8")
    return [first, race[:, 0], race[:, 1], households.span.astype(u64)]


def digested(batches: Iterable[TypedHouseholds], digest: RecordDigest) -> Iterator[TypedHouseholds]:
    """``batches`` as they are, each fed to ``digest`` first (:func:`household_words`)."""
    for batch in batches:
        digest.add(household_words(batch))
        yield batch


class HEngine(Protocol):
    """What a SafeTab-H run needs from an engine."""

    name: str
    records: RecordDigest | None
    """After :meth:`prepare`: the order-independent digest of the household records it
    read (:data:`HOUSEHOLDS_SCHEMA`) — the data set's identity in the release ledger;
    confidential, never published. ``None`` before."""
    skipped: int
    """After :meth:`prepare`: household rows left out unread because their state is not
    one of the runs' (confidential: the operator's warning and the run record only)."""

    def prepare(self, inputs: HInputs, say: Say) -> dict[str, int]:
        """Validate and aggregate the household file (and digest its records into
        :attr:`records`); return the households per run (``US``, ``PR``: confidential).
        Raises :class:`privtab.data.InputValidationError` before anything is written."""
        ...

    def tabulate(
        self, groups: LevelGroups, queries: list[QueryPlan], drawing: Drawing, nonnegative: bool
    ) -> Iterator[ChunkOutput]:
        """A level's published rows, chunk by chunk, in group order; the noise from
        ``drawing`` (its source, or noise off for tests)."""
        ...

    def close(self) -> None: ...


def level_domain(inputs: HInputs, groups: LevelGroups) -> Domain:
    """Every region of the level's GRF-C domain × every iteration it tabulates (the
    product ``F``'s rows; the T1 groups are picked from it)."""
    its = inputs.reference.select(groups.iteration_level, groups.geo.granularity)
    codes = tuple(i.code for i in its)
    return Domain(
        groups.geo, inputs.geography.domain(groups.geo), codes, np.zeros(len(codes), bool)
    )


def group_slots(exact_group: NDArray[np.int64], slot: NDArray[np.int64], n: NDArray[np.int64],
                wanted: NDArray[np.int64], size: int) -> NDArray[np.int64]:  # fmt: skip
    """Households per (wanted group, slot): the entries (group, slot, n) of ``F`` gathered
    for the groups ``wanted`` (indices into a domain of ``size`` groups; ``-1``: a group
    outside it, all zeros)."""
    pos = np.full(size, -1, dtype=np.int64)
    inside = wanted >= 0
    pos[wanted[inside]] = np.flatnonzero(inside)
    p = pos[exact_group] if exact_group.size else exact_group
    keep = p >= 0
    flat = p[keep] * SLOTS + slot[keep]
    out = np.bincount(flat, weights=n[keep], minlength=wanted.size * SLOTS)
    return out.astype(np.int64).reshape(wanted.size, SLOTS)


ByRegion = Callable[[Domain, tuple[int, int]], sparse.csr_array]
"""``M = S X`` of a chunk's regions (its domain, its rows of the cell matrix)."""


def exact_chunks(
    groups: LevelGroups,
    dom: Domain,
    chunks: list[tuple[Domain, tuple[int, int]]],
    by_region: ByRegion,
    iterations: sparse.csr_array,
    threads: int = 1,
) -> Iterator[tuple[LevelGroups, NDArray[np.int64]]]:
    """The exact households per (group, slot) of ``groups`` (a level's T1 groups, or those
    of some whole states), chunk by chunk of ``dom`` (whole states for a level nested in
    states: :meth:`privtab.tabulate.counts.StateRows.chunks`), in group order: ``F = (S X)
    B`` of the chunk (``by_region``, times ``iterations``), its groups' entries gathered
    (:func:`group_slots`); groups of states the chunks do not hold (no GRF-C region at
    this level) get zeros. Every engine runs this, on its own cells."""
    n_it = len(dom.codes)
    done = 0
    for part, span in chunks:
        if dom.geo in NESTED_IN_STATE:
            a, b = state_slices(groups, sorted({r[:2] for r in part.regions}))
        else:
            a, b = 0, groups.size
        if a > done:  # groups of states without a GRF-C region: no household
            yield groups.take(done, a), np.zeros((a - done, SLOTS), np.int64)
        if b <= a:
            continue
        chunk = groups.take(a, b)
        local = chunk.region - part.first_region
        inside = (chunk.region >= 0) & (local >= 0) & (local < len(part.regions))
        wanted = np.where(inside, local * n_it + chunk.iteration, -1)
        group, slot, n = f_entries(by_region(part, span), iterations, n_it, threads)
        yield chunk, group_slots(group, slot, n, wanted, part.size)
        done = b
    if done < groups.size:
        yield groups.take(done, groups.size), np.zeros((groups.size - done, SLOTS), np.int64)


def state_slices(groups: LevelGroups, states: list[str]) -> tuple[int, int]:
    """The groups ``[a, b)`` whose REGION_ID starts with one of ``states`` (consecutive
    states of the sorted domain; the groups are sorted by REGION_ID)."""
    prefixes = np.asarray([r[:2] for r in groups.region_id], dtype="U2")
    a = int(np.searchsorted(prefixes, min(states), side="left"))
    b = int(np.searchsorted(prefixes, max(states), side="right"))
    return a, b


class PolarsHEngine:
    """The embedded engine (module docstring)."""

    name = "polars"

    def __init__(
        self,
        max_chunk_groups: int = DEFAULT_CHUNK_GROUPS,
        max_chunk_cells: int = DEFAULT_CHUNK_CELLS,
        threads: int | None = None,
    ) -> None:
        self.max_chunk_groups = max_chunk_groups
        self.max_chunk_cells = max_chunk_cells
        self.threads = threads if threads is not None else default_threads()
        self.inputs: HInputs | None = None
        self.products: RegionProducts | None = None
        self._states: StateRows | None = None
        self.combos = pl.DataFrame()
        self._iterations: dict[tuple[object, ...], sparse.csr_array] = {}
        self.skipped = 0
        self.records: RecordDigest | None = None

    def prepare(self, inputs: HInputs, say: Say) -> dict[str, int]:
        say(f"validating and aggregating {inputs.households_path}")
        reader = inputs.household_reader(batch_rows=1 << 20)  # as SafeTab-P's aggregation
        starts = inputs.geography.units.group_by("TABBLKST").agg(pl.col(UNIT).min())[UNIT]
        started = time.monotonic()
        last = [0.0]

        def progress() -> None:
            seconds = time.monotonic() - started
            if seconds - last[0] >= 10:
                last[0] = seconds
                rate = reader.rows_read / max(seconds, 1e-9) / 1e6
                say(f"  {reader.rows_read:,} households read ({rate:.2f} M/s)")

        digest = RecordDigest(HOUSEHOLDS_SCHEMA)
        packed = aggregate_records(
            prefetch(digested(reader.households(), digest)),
            inputs.reference.codes,
            starts.to_list(),
            after_batch=progress,
        )
        reader.raise_if_invalid()
        self.skipped = reader.skipped
        self.records = digest
        matrix = CellMatrix.from_packed(packed.keys, packed.n, packed.combos.height)
        self.products = RegionProducts(matrix, inputs.geography, self.threads, IDENTITY_SLOTS)
        self._states = StateRows(matrix, state_units(inputs.geography))
        self.combos = packed.combos
        self.inputs = inputs
        say(f"{packed.records:,} households in {packed.keys.size:,} cells")
        return households_per_run(inputs, matrix)

    def _iteration_matrix(self, groups: LevelGroups, dom: Domain) -> sparse.csr_array:
        assert self.inputs is not None
        assert self.products is not None
        memo = (groups.iteration_level, groups.geo.granularity)
        if memo not in self._iterations:
            while len(self._iterations) >= 2:
                del self._iterations[next(iter(self._iterations))]
            b = iteration_matrix(
                self.combos, self.inputs.reference, groups.iteration_level, groups.geo.granularity
            )
            self._iterations[memo] = b.astype(self.products.cm.counts)
        return self._iterations[memo]

    def exact(self, groups: LevelGroups) -> Iterator[tuple[LevelGroups, NDArray[np.int64]]]:
        """The exact households per (group, slot) of the level's groups, chunk by chunk
        (:func:`exact_chunks`), in group order."""
        assert self.products is not None
        assert self.inputs is not None
        assert self._states
        if groups.size == 0:
            return
        dom = level_domain(self.inputs, groups)
        iterations = self._iteration_matrix(groups, dom)
        self.products.retain(dom.geo)
        whole = self.products.get(dom.geo)
        chunks = self._states.chunks(dom, self.max_chunk_groups, self.max_chunk_cells)

        def by_region(part: Domain, _: tuple[int, int]) -> sparse.csr_array:
            return region_rows(whole, part)

        yield from exact_chunks(groups, dom, chunks, by_region, iterations, self.threads)

    def tabulate(
        self, groups: LevelGroups, queries: list[QueryPlan], drawing: Drawing, nonnegative: bool
    ) -> Iterator[ChunkOutput]:
        draw = CellNoise(drawing.source, enabled=drawing.noise)
        for chunk, exact in self.exact(groups):
            yield tabulate_chunk(queries, chunk, exact, draw, nonnegative=nonnegative)

    def close(self) -> None:
        if self.products is not None:
            self.products.clear()
        self.products = None
        self._states = None
        self._iterations.clear()


def households_per_run(inputs: HInputs, matrix: CellMatrix) -> dict[str, int]:
    """Households of each run's states (confidential; production refuses a run with none)."""
    units = inputs.geography.units.select(UNIT, "TABBLKST")
    top = int(units[UNIT].to_numpy().max()) if units.height else 0
    totals = np.asarray(matrix.matrix.sum(axis=1)).ravel()
    per_unit = np.bincount(matrix.unit, weights=totals, minlength=max(top, 0) + 1)
    out = {}
    for scope in inputs.config.scopes:
        mine = units.filter(pl.col("TABBLKST").is_in(list(inputs.config.run_states(scope))))
        out[scope.value] = int(per_unit[mine[UNIT].to_numpy()].sum())
    return out


def make_engine(name: str) -> HEngine:
    """``polars`` (default) or ``spark`` (needs ``privtab[spark]``)."""
    from privtab.errors import UsageError

    if name == "polars":
        return PolarsHEngine()
    if name == "spark":
        from privtab.safetab_h.spark import SparkHEngine

        return SparkHEngine()
    raise UsageError(f"unknown engine {name!r}: choose polars or spark")
