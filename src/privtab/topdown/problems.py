"""The per-parent problems TopDown's solver works on (CONTRACTS.md C3), built here.

Problems are built a **slice** at a time: consecutive parents of one level (the root alone
is a slice too). :class:`ProblemBuilder` (in the driver's process) cuts a
:class:`SliceTask` — everything public the slice needs (the parents' solved histograms,
the children's constraints sliced from :mod:`privtab.topdown.constraints`, ids, the
production pass orders of the children's level: the strategy's ``l2_passes`` /
``rounder_passes``, total first for the State, County, Tract and Block_Group children of
the 2020 runs, one pass at the root and at Block), the children's true sparse histograms
and how to draw their noise (:class:`privtab.topdown.measure.SliceNoise`: no source, only
its derivation) — or the measurements read from a noisy-measurement file.
:func:`build_slice` (a pure function of the task, run wherever the task runs: a worker
process, a Spark task, or here) draws the whole slice's noise in one vectorised batch
(:meth:`privtab.topdown.measure.Measurer.measure`, only the cells positive in each solved
parent unless ``draw_all``) and cuts it into one problem per parent — no per-parent model
building beyond slicing arrays. The problem is the solver's own
:class:`privtab.topdown.solve.ChildrenProblem` (one set of classes):

* ``measurements.variances`` — per query, the exact variance of **each child's** noise (a
  tuple, one per child): after the spine's bypass, siblings can have different budget
  shares (a child that absorbed its single child's share has less noise); ``None`` for a
  child measured with its parent (the only child of its parent: passed down);
* ``constraints.total`` / ``total_group`` — the exact totals: per child (``total``; the
  units run, a root) or per group of children (``total_by_group``: the root's children
  are the AIAN and non-AIAN parts of the states; each state's total is exact);
  ``gq_lower`` / ``gq_upper`` are ``None`` where no hhgq bound is in force (units run);
* ``level`` (the children's level) and ``histogram`` (``persons`` or ``units``).

The measurements are the only thing in a problem drawn from the confidential data with
noise; the constraints come from the invariants (public to the algorithm). A problem holds
nothing else from the data: the parent histogram is the solver's own (post-processed) one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from privtab.topdown.constraints import LevelConstraints
from privtab.topdown.inputs import SparseHistograms
from privtab.topdown.measure import MeasurementBatch, Measurer, SliceNoise, needed_cells
from privtab.topdown.solve import (
    PRODUCTION_TOLERANCE,
    ChildConstraints,
    ChildMeasurements,
    ChildrenProblem,
)
from privtab.topdown.spine import Spine
from privtab.topdown.strategy import Strategy

__all__ = ["BuiltSlice", "MeasurementSource", "ProblemBuilder", "SliceTask", "build_slice"]

IntArray = NDArray[np.int64]


class MeasurementSource(Protocol):
    """Where the noisy measurements of a batch of geounits come from: drawn now
    (:class:`privtab.topdown.measure.Measurer`) or read from a noisy-measurement file."""

    def measure(
        self,
        level: str,
        units: NDArray[np.int64] | range,
        hists: NDArray[np.int64],
        needed: Mapping[str, NDArray[np.bool_]] | None = None,
    ) -> MeasurementBatch: ...


@dataclass(frozen=True, eq=False)
class SliceTask:
    """One slice's unit of work (picklable; see the module docstring).

    ``level`` — the children's level; ``first`` — the index (in ``level``) of the slice's
    first child, the children being ``first .. first + bounds[-1]``; ``geounits`` — each
    parent's label (``"(root)"``); ``bounds`` — ``(parents + 1,)``: parent ``i``'s
    children are ``bounds[i] : bounds[i + 1]`` of the slice; ``child_ids``; ``parents`` —
    the parents' solved histograms, sparse, numbered from 0 (``None``: the root; dense:
    :meth:`parent_hists`); ``constraints`` —
    each parent's children's :class:`ChildConstraints`; ``truth`` — the children's true
    histograms numbered from 0 (CONFIDENTIAL: used only to draw the noise) and ``noise``
    how to draw it, or ``measured`` (a file's measurements, ``truth`` and ``noise``
    ``None``); ``draw_all`` — draw every cell (a noisy-measurement file), else only those
    positive in each parent; ``keep`` — return the measurement batch (for a sink)."""

    level: str
    first: int
    geounits: tuple[str, ...]
    bounds: IntArray
    child_ids: tuple[str, ...]
    parents: SparseHistograms | None
    constraints: tuple[ChildConstraints, ...]
    truth: SparseHistograms | None
    noise: SliceNoise | None
    measured: MeasurementBatch | None
    l2_passes: Sequence[Sequence[str]]
    rounder_passes: Sequence[Sequence[str]]
    tolerance: float
    histogram: str
    draw_all: bool = False
    keep: bool = False

    @property
    def children(self) -> range:
        """The children's indices in their level."""
        return range(self.first, self.first + int(self.bounds[-1]))

    def parent_hists(self) -> IntArray | None:
        """The parents' solved histograms, dense ``(parents, cells)`` (``None``: the root)."""
        p = self.parents
        return None if p is None else p.dense(range(p.n_units))


@dataclass(frozen=True, eq=False)
class BuiltSlice:
    """A slice's problems (parent order), the noise draws of each, the measurement batch
    of all its children and the seconds it took."""

    problems: list[ChildrenProblem]
    draws: list[int]
    batch: MeasurementBatch
    seconds: float


def _draws_per_parent(batch: MeasurementBatch, bounds: IntArray) -> list[int]:
    rows = np.zeros(int(bounds[-1]), dtype=np.int64)
    for m in batch.queries.values():
        measured = np.array([v is not None for v in m.variances], dtype=bool)
        cells = m.drawn.sum(axis=1) if m.drawn is not None else m.values.shape[1]
        rows += np.where(measured, cells, 0)
    cum = np.concatenate(([0], np.cumsum(rows)))
    out: list[int] = np.diff(cum[bounds]).tolist()
    return out


def build_slice(task: SliceTask) -> BuiltSlice:
    """The problems of ``task``'s parents: their children's noise drawn in one batch
    (only the cells positive in each parent unless ``draw_all``), cut per parent."""
    t0 = time.perf_counter()
    units = task.children
    parents = task.parent_hists()
    if task.measured is not None:
        batch, draws = task.measured, [0] * len(task.geounits)
    else:
        if task.noise is None or task.truth is None:
            raise ValueError("a slice task needs its measurements or the truth and the noise")
        strategy = task.noise.strategy
        needed = None
        if not task.draw_all and parents is not None:
            counts = np.diff(task.bounds)
            needed = {
                q: np.repeat(mask, counts, axis=0)
                for q, mask in needed_cells(strategy, task.level, parents).items()
            }
        hists = task.truth.dense(range(len(units)))
        batch = task.noise.measurer().measure(task.level, units, hists, needed)
        del hists
        draws = (
            _draws_per_parent(batch, task.bounds) if task.noise.noise else [0] * len(task.geounits)
        )
    values = {q: m.values.astype(np.float64) for q, m in batch.queries.items()}
    problems = []
    for i, label in enumerate(task.geounits):
        lo, hi = int(task.bounds[i]), int(task.bounds[i + 1])
        meas = ChildMeasurements(
            {q: v[lo:hi] for q, v in values.items()},
            {q: m.variances[lo:hi] for q, m in batch.queries.items()},
        )
        problems.append(
            ChildrenProblem(
                label,
                list(task.child_ids[lo:hi]),
                None if parents is None else parents[i],
                meas,
                task.constraints[i],
                task.l2_passes,
                task.rounder_passes,
                task.tolerance,
                level=task.level,
                histogram=task.histogram,
            )
        )
    return BuiltSlice(problems, draws, batch, time.perf_counter() - t0)


def _sparse(hists: SparseHistograms | IntArray | None) -> SparseHistograms | None:
    """Dense ``(n, cells)`` histograms as sparse ones (what a task carries)."""
    if hists is None or isinstance(hists, SparseHistograms):
        return hists
    dense = np.asarray(hists, dtype=np.int64)
    rows, cols = np.nonzero(dense)
    return SparseHistograms(
        dense.shape[1], dense.shape[0], rows.astype(np.int64), cols.astype(np.int64),
        dense[rows, cols],
    )  # fmt: skip


def units_part(hists: SparseHistograms, start: int, units: range) -> SparseHistograms:
    """The units ``units`` (consecutive) of ``hists`` — whose unit 0 is unit ``start`` of
    its level — numbered from 0."""
    lo = int(hists.offsets[units.start - start])
    hi = int(hists.offsets[units.stop - start])
    return SparseHistograms(
        hists.cells,
        len(units),
        hists.unit[lo:hi] - (units.start - start),
        hists.cell[lo:hi],
        hists.count[lo:hi],
    )


class ProblemBuilder:
    """Builds the :class:`ChildrenProblem` of the root and of any parent.

    ``histograms`` — the true histograms of every level, root first
    (:meth:`privtab.topdown.inputs.SparseHistograms.levels`; used only to draw the noise;
    ``None`` when ``source`` is a noisy measurement file);
    ``constraints`` — :func:`privtab.topdown.constraints.build_constraints`;
    ``source`` — the measurements; ``sink`` — called with every batch drawn (e.g. the
    noisy-measurement file writer).
    """

    def __init__(
        self,
        strategy: Strategy,
        spine: Spine,
        histograms: Sequence[SparseHistograms] | None,
        constraints: Sequence[LevelConstraints],
        source: MeasurementSource,
        *,
        sink: Callable[[MeasurementBatch], None] | None = None,
        tolerance: float = PRODUCTION_TOLERANCE,
    ) -> None:
        h = spine.hierarchy
        if h.levels != strategy.levels:
            raise ValueError(f"spine levels {list(h.levels)} differ from the strategy's")
        if len(constraints) != len(h.levels) or (
            histograms is not None and len(histograms) != len(h.levels)
        ):
            raise ValueError("give the histograms and constraints of every level, root first")
        self.strategy = strategy
        self.spine = spine
        self.histograms = None if histograms is None else list(histograms)
        self.constraints = list(constraints)
        self.source = source
        self.sink = sink
        self.tolerance = tolerance
        #: noise draws made so far (cells drawn; 0 when the source is a file)
        self.draws = 0

    def label(self, level: int, unit: int) -> str:
        """``"<level> <id>"`` (the root: its level name)."""
        name = self.spine.hierarchy.levels[level]
        return name if level == 0 else f"{name} {self.spine.hierarchy.unit_ids[level][unit]}"

    def root_problem(self) -> ChildrenProblem:
        """The root alone: its measurements, its constraints (e.g. the national total)."""
        return self.build(self.root_task())[0]

    def children_problem(
        self,
        level: str,
        parent: int,
        parent_hist: NDArray[np.int64] | None = None,
        *,
        draw_all: bool = True,
    ) -> ChildrenProblem:
        """The children of unit ``parent`` of ``level`` (a slice of one parent);
        ``parent_hist`` is the parent's solved (integer) histogram; ``draw_all=False``
        draws only the cells positive in it (:func:`~privtab.topdown.measure.needed_cells`)."""
        h = self.spine.hierarchy
        k = h.level(level)
        hist = None if parent_hist is None else np.asarray(parent_hist)[None, :]
        return self.build(self.slice_task(k, range(parent, parent + 1), hist, draw_all))[0]

    def build(self, task: SliceTask) -> list[ChildrenProblem]:
        """``task``'s problems built in this process (:func:`build_slice`), recorded."""
        built = build_slice(task)
        self.record(built.batch, sum(built.draws))
        return built.problems

    def record(self, batch: MeasurementBatch | None, draws: int) -> None:
        """A slice's measurements drawn (wherever): counted, and handed to the sink."""
        self.draws += draws
        if self.sink is not None:
            if batch is None:
                raise ValueError("a slice's measurements are needed by the sink")
            self.sink(batch)

    def root_task(self) -> SliceTask:
        """The root alone, as a slice."""
        return self._task(0, (range(0, 1),), ("(root)",), None, draw_all=True)

    def slice_task(
        self,
        level: int,
        parents: range,
        parent_hists: SparseHistograms | IntArray | None,
        draw_all: bool = False,
    ) -> SliceTask:
        """The children of ``parents`` (consecutive units of level index ``level``) as one
        slice; ``parent_hists`` their solved histograms (sparse numbered from 0, or dense
        ``(len(parents), cells)``)."""
        h = self.spine.hierarchy
        if level == len(h.levels) - 1:
            raise ValueError(f"{h.levels[level]} units have no children")
        off = h.offsets(level)
        kids = tuple(
            range(int(off[p]), int(off[p + 1])) for p in range(parents.start, parents.stop)
        )
        labels = tuple(self.label(level, p) for p in parents)
        return self._task(level + 1, kids, labels, parent_hists, draw_all=draw_all)

    def _task(
        self,
        k: int,
        kids: tuple[range, ...],
        labels: tuple[str, ...],
        parent_hists: SparseHistograms | IntArray | None,
        *,
        draw_all: bool,
    ) -> SliceTask:
        h = self.spine.hierarchy
        level = h.levels[k]
        units = range(kids[0].start, kids[-1].stop)
        bounds = np.array([0, *(r.stop - units.start for r in kids)], dtype=np.int64)
        ids = tuple(h.unit_ids[k][units.start : units.stop].to_list()) if k else (level,)
        truth = noise = measured = None
        if isinstance(self.source, Measurer):
            if self.histograms is None:
                raise ValueError("drawing noise needs the true histograms")
            truth = units_part(self.histograms[k], 0, units)
            noise = self.source.slice_noise(level, units)
        else:  # the source holds the measurements (a file)
            measured = self.source.measure(level, units, np.zeros((len(units), 0), np.int64))
        return SliceTask(
            level,
            units.start,
            labels,
            bounds,
            ids,
            _sparse(parent_hists),
            tuple(self.child_constraints(k, r) for r in kids),
            truth,
            noise,
            measured,
            self.strategy.l2_passes[level],
            self.strategy.rounder_passes[level],
            self.tolerance,
            self.strategy.histogram,
            draw_all=draw_all,
            keep=self.sink is not None,
        )

    def child_constraints(self, k: int, units: range) -> ChildConstraints:
        """The constraints of ``units`` (a contiguous range) of level ``k``."""
        sl = slice(units.start, units.stop)
        c = self.constraints[k]
        zeros = (
            c.structural_zeros
            if c.structural_zeros is not None
            else np.zeros(self.strategy.schema.cells, dtype=bool)
        )
        lower = None if c.lower is None else c.lower[sl]
        upper = None if c.upper is None else c.upper[sl]
        if c.group_index is None:
            return ChildConstraints(lower, upper, zeros, None if c.total is None else c.total[sl])
        if c.total is not None or c.group_total is None:
            raise ValueError(f"{c.level}: exact totals both per unit and per group")
        # the groups of these children only, renumbered 0.. (each group's total is exact,
        # so a group must lie within one parent's children)
        present, local = np.unique(c.group_index[sl], return_inverse=True)
        if np.bincount(c.group_index, minlength=int(c.group_index.max()) + 1)[present].sum() != (
            units.stop - units.start
        ):
            raise ValueError(f"{c.level}: a total_by_group group spans several parents")
        return ChildConstraints(lower, upper, zeros, c.group_total[present], local.astype(np.int64))
