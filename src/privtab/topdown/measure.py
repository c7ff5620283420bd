"""TopDown's noisy measurements: exact discrete Gaussian noise on every measured cell.

At a geounit of level ``g`` with budget share ``s`` (the level's share, or more after the
spine's bypass: :func:`privtab.topdown.spine.budget_shares`) every query ``q`` of the
strategy at ``g`` is answered on the geounit's true histogram and every answer cell gets
independent noise ``N_ℤ(σ²)``, ``σ² = global_scale² / (s · share_q)``, from
:func:`privtab.random.discrete_gaussian` — exact, over the secure source unless a seeded
source is given (tests only: :attr:`Measurer.private` is then ``False`` and so must be
every output made from the measurements). Geounits whose share moved to their parent
(share 0) are not measured.

**Privacy** (production ``programs/engine/engine_utils.py``): replacing one record changes
each query's answers at each of the record's geounits by −1 and +1 in at most two cells
(Δ₂² = 2), so each query costs ``ρ = 1/σ²`` zCDP and a record's geounit chain costs
``Σ s·share_q/global_scale² = 1/global_scale²`` (Canonne, Kamath & Steinke 2020, Thm. 4
and composition) whatever the bypass, since every chain's shares sum to 1.

**Batches.** :meth:`Measurer.measure` draws the noise of a batch of geounits of one level
at once, one vectorised call per (query, σ²). TopDown's driver measures a whole **slice**
of parents' children in one batch (:mod:`privtab.topdown.workers`: up to
:data:`~privtab.topdown.workers.SLICE` consecutive parents of one level — their children
are consecutive units), inside the slice's task, in whatever process runs it.

**Where the noise comes from.** A task measures with :meth:`SliceNoise.measurer`: with a
secure source, that process's own :class:`~privtab.random.SecureSource` (AES-256-CTR keyed
from that process's ``os.urandom``; nothing shared between processes or shipped to them,
re-keyed after ``fork``); with a seeded source (tests only), a source derived from the
seed, the run's :attr:`Measurer.key` (scope and histogram), the children's level and the
slice's first child — ``SeededSource(f"{seed}-{key}-{level}-{first}")`` (:meth:`Measurer.
slice_noise`) — so a seeded release is the same whatever the number of processes, and two
slices, two levels or two runs never share a stream.

**The privacy argument for drawing in tasks.** The guarantee above needs, for every
measured cell of every geounit, one draw of exact ``N_ℤ(σ²)`` with that geounit's σ²,
independent of every other draw and of the data. Slices partition each level's parents,
and parents partition their level's children, so every geounit belongs to exactly one
slice and is measured exactly once (never once per process, never skipped: the driver
solves every parent once, and the root is its own slice); its σ² is computed exactly from
its own budget share (:class:`UnitShares`, the same :class:`BudgetShares` numerators) by
:meth:`privtab.topdown.strategy.Strategy.sigma2`; the draws are the exact sampler
:func:`privtab.random.discrete_gaussian` over a secure source — independent across tasks
because each process's AES-CTR key is fresh OS entropy — so the joint law of all the
noise is the same as one stream's in hierarchy order. Which process draws a cell, and in
which order, changes no value's law.

**Drawing only what an output reads.** ``needed`` restricts the draws to the cells an
output depends on (:func:`needed_cells`: only cells positive in the solved parent; the
others are 0 in every child and never read). The skipped cells' noise would be independent
of the drawn cells and is never used, so the joint law of everything the outputs read is
unchanged; only a noisy-measurement file (``--nmf``, ``draw_all``), which publishes every
cell, needs them all — then every cell of every measured geounit is drawn, exactly once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from privtab.random import RandomSource, SeededSource, discrete_gaussian
from privtab.random.sources import resolve_source
from privtab.topdown.spine import BudgetShares
from privtab.topdown.strategy import Strategy

__all__ = [
    "Measurement",
    "MeasurementBatch",
    "Measurer",
    "SliceNoise",
    "UnitShares",
    "needed_cells",
]

IntArray = NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class Measurement:
    """One query's noisy answers at a batch of geounits: ``values`` ``(k, size)`` int64,
    ``variances`` the exact σ² of each geounit's noise (``None``: not measured — its
    share moved to its parent), ``drawn`` which cells hold a draw (``None``: all)."""

    query: str
    values: IntArray
    variances: tuple[Fraction | None, ...]
    drawn: NDArray[np.bool_] | None = None


@dataclass(frozen=True, eq=False)
class MeasurementBatch:
    """The measurements of geounits ``units`` of ``level``, per query (strategy order)."""

    level: str
    units: IntArray
    queries: Mapping[str, Measurement]
    draws: int = 0


@dataclass(frozen=True, eq=False)
class UnitShares:
    """The budget shares of the consecutive units ``start, start + 1, …`` of one level
    (a slice task's children): unit ``start + i`` has ``numerators[i] / denominator``
    (0: measured with its parent) — the same numbers as :class:`BudgetShares`, for a
    task to carry instead of the whole hierarchy's."""

    level: str
    start: int
    numerators: IntArray
    denominator: int


@dataclass(frozen=True, eq=False)
class SliceNoise:
    """How a slice task draws its children's noise (picklable, holds no source):
    ``seed`` — ``None`` for the secure source of the process running the task, else the
    derived seed of a test source (:meth:`Measurer.slice_noise`)."""

    strategy: Strategy
    shares: UnitShares
    seed: str | None
    noise: bool = True

    def measurer(self) -> Measurer:
        """The measurer of the task: this process's secure source, or the seeded one."""
        source = None if self.seed is None else SeededSource(self.seed)
        return Measurer(self.strategy, self.shares, source, noise=self.noise)


@dataclass(eq=False)
class Measurer:
    """Draws the noisy measurements of a strategy (module docstring).

    ``shares`` — the per-geounit shares after the bypass (``None``: every geounit has its
    level's share; a :class:`UnitShares`: only those units); ``source`` — ``None`` for the
    secure default; ``noise=False`` returns the true answers (tests of the pipeline only:
    not private); ``key`` — names the run (scope and histogram, e.g. ``us-persons``) in the
    seeds of slice tasks' test sources (:meth:`slice_noise`), so two runs drawing from one
    seeded source never share a stream.
    """

    strategy: Strategy
    shares: BudgetShares | UnitShares | None = None
    source: RandomSource | None = None
    noise: bool = True
    key: str = ""
    draws: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._source = resolve_source(self.source)
        if isinstance(self.shares, BudgetShares) and self.shares.levels != self.strategy.levels:
            raise ValueError("the budget shares are for other levels than the strategy's")

    def slice_noise(self, level: str, units: range) -> SliceNoise:
        """What a slice task measuring ``units`` (consecutive) of ``level`` draws with: their
        shares, and — for a seeded source — ``SeededSource(f"{seed}-{key}-{level}-{first}")``
        (``first`` = ``units.start``, which no other slice of the run's level starts at);
        for a secure source, the task's own process's secure source (module docstring).
        Any other source is refused: its stream cannot be split among processes."""
        idx = np.arange(units.start, units.stop, dtype=np.int64)
        nums, den = self.unit_shares(level, idx)
        shares = UnitShares(level, units.start, nums, den)
        if isinstance(self._source, SeededSource):
            base = self._source.seed
            text = base.hex() if isinstance(base, bytes) else str(base)
            seed: str | None = f"{text}-{self.key}-{level}-{units.start}"
        elif self._source.is_private or not self.noise:
            seed = None
        else:
            raise ValueError(
                f"{self._source!r} cannot be split among slice tasks: give a secure "
                "source (the default) or, for tests, a privtab.random.SeededSource"
            )
        return SliceNoise(self.strategy, shares, seed, self.noise)

    @property
    def private(self) -> bool:
        """``True`` only for noise from a private (secure) source."""
        return self.noise and bool(getattr(self._source, "is_private", True))

    def unit_shares(self, level: str, units: IntArray) -> tuple[IntArray, int]:
        """The budget share of each of ``units`` as ``(numerators, denominator)``
        (numerator 0: not measured)."""
        if self.shares is None:
            g = self.strategy.geolevel_shares[level]
            return np.full(len(units), g.numerator, dtype=np.int64), g.denominator
        if isinstance(self.shares, UnitShares):
            u = self.shares
            local = np.asarray(units, dtype=np.int64) - u.start
            outside = local.size and (local.min() < 0 or local.max() >= len(u.numerators))
            if level != u.level or outside:
                raise ValueError(f"the shares are of {u.level} units from {u.start} only")
            return u.numerators[local], u.denominator
        k = self.shares.levels.index(level)
        return self.shares.numerators[k][units], self.shares.denominator

    def draw(
        self,
        level: str,
        units: IntArray | range,
        query: str,
        needed: NDArray[np.bool_] | None = None,
    ) -> Measurement:
        """The noise of ``query`` at ``units`` of ``level`` alone (no data): ``values``
        ``(k, size)`` exact discrete Gaussian draws with each unit's σ² (0 and ``None``
        for units not measured, 0 where ``needed`` is False; none at all without noise).
        :meth:`measure` adds it to the true answers."""
        idx = np.asarray(units, dtype=np.int64)
        if query not in self.strategy.query_shares[level]:
            raise KeyError(f"query {query!r} is not measured at {level}")
        size = self.strategy.schema.query(query).size
        values = np.zeros((idx.size, size), dtype=np.int64)
        mask = None
        if needed is not None:
            mask = np.broadcast_to(np.asarray(needed, dtype=bool), values.shape).copy()
        nums, den = self.unit_shares(level, idx)
        distinct, inverse = np.unique(nums, return_inverse=True)
        sigma2s: list[Fraction | None] = [
            None if n == 0 else self.strategy.sigma2(level, query, Fraction(int(n), den))
            for n in distinct
        ]
        variances = tuple(sigma2s[i] for i in inverse.tolist())
        drawn = 0
        for j, sigma2 in enumerate(sigma2s):
            if sigma2 is None or not self.noise:
                continue
            sel = np.flatnonzero(inverse == j)
            if mask is None:
                values[sel] = discrete_gaussian(sigma2, (sel.size, size), source=self._source)
                drawn += sel.size * size
                continue
            # the units of this σ², row-major as before (no copies of the (k, size) block)
            m = mask if sel.size == idx.size else mask & (inverse == j)[:, None]
            n = int(np.count_nonzero(m))
            if n:
                values[m] = discrete_gaussian(sigma2, n, source=self._source)
            drawn += n
        self.draws += drawn
        return Measurement(query, values, variances, mask)

    def measure(
        self,
        level: str,
        units: IntArray | range,
        hists: IntArray,
        needed: Mapping[str, NDArray[np.bool_]] | None = None,
        queries: Sequence[str] | None = None,
    ) -> MeasurementBatch:
        """Noisy answers of every query of ``level`` (or of ``queries`` among them) for
        ``units`` whose true histograms are the rows of ``hists`` (``(k, cells)``
        integers): the true answers plus :meth:`draw`. ``needed`` (query → bool mask of
        shape ``(size,)`` or ``(k, size)``) limits the draws; cells not drawn hold 0 and
        are marked in :attr:`Measurement.drawn`; units not measured hold 0."""
        idx = np.asarray(units, dtype=np.int64)
        if hists.shape != (idx.size, self.strategy.schema.cells):
            raise ValueError(f"hists has shape {hists.shape}, need ({idx.size}, cells)")
        names = self.strategy.queries(level) if queries is None else tuple(queries)
        before = self.draws
        out: dict[str, Measurement] = {}
        for q in names:
            noise = self.draw(level, idx, q, None if needed is None else needed.get(q))
            values = np.asarray(self.strategy.schema.query(q).answer(hists), dtype=np.int64)
            values = values + noise.values
            if noise.drawn is not None:
                values[~noise.drawn] = 0
            unmeasured = [i for i, v in enumerate(noise.variances) if v is None]
            values[unmeasured] = 0  # a geounit measured with its parent: no answer at all
            out[q] = Measurement(q, values, noise.variances, noise.drawn)
        return MeasurementBatch(level, idx, out, self.draws - before)


def needed_cells(
    strategy: Strategy, level: str, parent: NDArray[np.integer]
) -> dict[str, NDArray[np.bool_]]:
    """The answer cells of every query of ``level`` an output can depend on, given the
    children's solved integer ``parent`` histogram (``(cells,)``, or ``(n, cells)`` for
    ``n`` parents at once: then ``(n, size)`` masks): those with some detailed cell positive
    in the parent. Every other answer is 0 in every child (the children sum to the parent
    and are non-negative), so its noise is never read."""
    positive = (np.asarray(parent) > 0).astype(np.int64)
    return {
        q: np.asarray(strategy.schema.query(q).answer(positive)) > 0
        for q in strategy.queries(level)
    }
