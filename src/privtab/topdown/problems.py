"""The per-parent problems TopDown's solver works on (CONTRACTS.md C3), built here.

For the root, and then for every parent level by level, :class:`ProblemBuilder` draws the
children's noisy measurements (:class:`privtab.topdown.measure.Measurer`, just before the
children are solved — or reads them from a noisy-measurement file), slices the children's
constraints (:mod:`privtab.topdown.constraints`) and attaches the production pass orders
of the children's level (the strategy's ``l2_passes`` / ``rounder_passes``: total first
for the State, County, Tract and Block_Group children of the 2020 runs, one pass at the
root and at Block). The problem is the solver's own
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

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from privtab.topdown.constraints import LevelConstraints
from privtab.topdown.inputs import SparseHistograms
from privtab.topdown.measure import MeasurementBatch
from privtab.topdown.solve import (
    PRODUCTION_TOLERANCE,
    ChildConstraints,
    ChildMeasurements,
    ChildrenProblem,
)
from privtab.topdown.spine import Spine
from privtab.topdown.strategy import Strategy

__all__ = ["MeasurementSource", "ProblemBuilder"]


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
        return self._problem(0, range(0, 1), "(root)", None)

    def children_problem(
        self,
        level: str,
        parent: int,
        parent_hist: NDArray[np.int64] | None = None,
        needed: Mapping[str, NDArray[np.bool_]] | None = None,
    ) -> ChildrenProblem:
        """The children of unit ``parent`` of ``level``; ``parent_hist`` is the parent's
        solved (integer) histogram; ``needed`` limits the noise drawn
        (:meth:`privtab.topdown.measure.Measurer.measure`)."""
        h = self.spine.hierarchy
        k = h.level(level)
        if k == len(h.levels) - 1:
            raise ValueError(f"{level} units have no children")
        return self._problem(
            k + 1, h.children(k, parent), self.label(k, parent), parent_hist, needed
        )

    def _problem(
        self,
        k: int,
        units: range,
        parent_label: str,
        parent_hist: NDArray[np.int64] | None,
        needed: Mapping[str, NDArray[np.bool_]] | None = None,
    ) -> ChildrenProblem:
        h = self.spine.hierarchy
        level = h.levels[k]
        if self.histograms is None:  # the source holds the measurements (a file)
            hists = np.zeros((len(units), 0), dtype=np.int64)
        else:
            hists = self.histograms[k].dense(units)
        batch = self.source.measure(level, units, hists, needed)
        self.draws += batch.draws
        del hists
        if self.sink is not None:
            self.sink(batch)
        meas = ChildMeasurements(
            {q: m.values.astype(np.float64) for q, m in batch.queries.items()},
            {q: m.variances for q, m in batch.queries.items()},
        )
        sl = slice(units.start, units.stop)
        ids = h.unit_ids[k][sl].to_list() if k > 0 else [h.levels[0]]
        return ChildrenProblem(
            parent_label,
            ids,
            parent_hist,
            meas,
            self.child_constraints(k, units),
            self.strategy.l2_passes[level],
            self.strategy.rounder_passes[level],
            self.tolerance,
            level=level,
            histogram=self.strategy.histogram,
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
