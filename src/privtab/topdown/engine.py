"""TopDown's driver: the root, then every parent's children, level by level, streamed by chunk.

Production's top-down post-processing (``programs/engine/topdown_engine.py``: the root
geounit, then each level's parents with their children jointly, the children's noisy
measurements taken for that parent) on a :class:`~privtab.topdown.problems.ProblemBuilder`:

1. **the root** — its measurements and constraints (e.g. the national total) solved alone;
2. **the levels above the chunk level** (the US run: the State parts under the nation) —
   every parent's children;
3. **every chunk** (a unit of the hierarchy's chunk level: a State part of the US spine, a
   County of Puerto Rico's) — its subtree level by level down to the blocks, and then its
   blocks' integer histograms are handed to the caller (:meth:`TopDownEngine.chunks`)
   before the next chunk starts. Chunks are independent once the levels above them are
   solved, so memory is bounded by one chunk's subtree (held sparse: the nonzero cells of
   the solved histograms) whatever the size of the nation.

For each parent the children's noise is drawn just before the children are solved
(:meth:`ProblemBuilder.children_problem`), limited to the cells an output can depend on
(those positive in the solved parent, :func:`privtab.topdown.measure.needed_cells`) unless
every cell is to be published (``draw_all``: a noisy measurement file). The solve is one
call, :func:`solve_parent` (or the ``solve`` given): where per-parent batching slots in.

**One BLAS thread.** The per-parent matrices are small (at most a few thousand rows): a
multi-threaded BLAS only adds synchronisation, and on a loaded two-core machine it made the
same solves 5–25 times slower (measured: a root problem 15 s with OpenBLAS's two threads,
2.7 s with one). The engine's solving methods run under :func:`one_blas_thread`
(``threadpoolctl``: set at run time, for NumPy/SciPy's BLAS as loaded, restored after).

Every level's work is counted in :class:`LevelRecord` (parents, paths, the generic path's
reasons, fallbacks, noise draws, seconds): for the confidential run record and benchmarks,
never for a release folder (timings depend on the data).

Privacy: the driver only routes measurements (drawn with the exact mechanism and budget of
:mod:`privtab.topdown.measure`) to the solver; everything else is post-processing of the
noisy measurements and of the invariants.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privtab.errors import InputError
from privtab.topdown.inputs import SparseHistograms
from privtab.topdown.measure import needed_cells
from privtab.topdown.problems import ProblemBuilder
from privtab.topdown.solve import (
    ChildrenProblem,
    ChildrenSolution,
    SolveDiagnostics,
    TopDownInfeasibleError,
    TopDownSolverError,
    solve_children,
)
from privtab.topdown.workers import SLICE, SlicePool, Solved, solve_slice

__all__ = [
    "ChunkResult",
    "InfeasibleDataError",
    "LevelRecord",
    "SolvedLevel",
    "TopDownEngine",
    "solve_parent",
]

IntArray = NDArray[np.int64]
#: ``progress(done, total, text)``: ``done`` of the ``total`` parents solved, the latest.
Progress = Callable[[int, int, str], None]
SolveFn = Callable[[ChildrenProblem], ChildrenSolution]

#: Seconds between two progress messages within a level.
PROGRESS_EVERY = 0.25


class InfeasibleDataError(InputError):
    """A parent's children have no solution under the constraints the data imply: the
    input's invariants contradict each other (named: the geounit and the violated
    constraints). Nothing is published."""


def _infeasible(exc: TopDownInfeasibleError) -> InfeasibleDataError:
    return InfeasibleDataError(
        f"the TopDown problem of {exc.geounit} is infeasible: " + "; ".join(exc.violations),
        column="geounit",
        value=exc.geounit,
        hint="the invariants and constraints of the input contradict each other",
    )


def built_problems(built: Sequence[tuple[Any, ...]]) -> list[ChildrenProblem]:
    """The problems of a built slice (``(parent, problem, draws, seconds)`` tuples)."""
    return [b[1] for b in built]


def one_blas_thread() -> contextlib.AbstractContextManager[object]:
    """A context in which the BLAS libraries NumPy and SciPy loaded use one thread."""
    from threadpoolctl import threadpool_limits

    limits: contextlib.AbstractContextManager[object] = threadpool_limits(limits=1, user_api="blas")
    return limits


def solve_parent(problem: ChildrenProblem) -> ChildrenSolution:
    """Solve one parent's children (:func:`privtab.topdown.solve.solve_children`, the
    structured solver): the single call the driver makes per parent."""
    return solve_children(problem)


@dataclass
class LevelRecord:
    """What solving the children of one level took (children's level ``level``)."""

    level: str
    parents: int = 0
    children: int = 0
    paths: Counter[str] = field(default_factory=Counter)
    generic: Counter[str] = field(default_factory=Counter)
    structured_fallbacks: int = 0
    rounder_mip_fallbacks: int = 0
    draws: int = 0
    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, sol: ChildrenSolution, draws: int, build: float, solve: float) -> None:
        self.add_diagnostics(sol.diagnostics, draws, build, solve)

    def add_diagnostics(self, d: SolveDiagnostics, draws: int, build: float, solve: float) -> None:
        """One problem: its diagnostics, noise draws and seconds (building, solving)."""
        self.parents += 1
        self.children += d.children
        self.paths[d.path] += 1
        if d.generic:
            self.generic[d.generic] += 1
        self.structured_fallbacks += d.structured_fallbacks
        self.rounder_mip_fallbacks += d.rounder_mip_fallbacks
        self.draws += draws
        self.seconds["measure"] = self.seconds.get("measure", 0.0) + build
        self.seconds["solve"] = self.seconds.get("solve", 0.0) + solve

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (for the confidential run record)."""
        return {
            "level": self.level,
            "parents": self.parents,
            "children": self.children,
            "paths": dict(self.paths),
            "generic_path": dict(self.generic),
            "structured_fallbacks": self.structured_fallbacks,
            "rounder_mip_fallbacks": self.rounder_mip_fallbacks,
            "noise_draws": self.draws,
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
        }


@dataclass(frozen=True, eq=False)
class SolvedLevel:
    """The solved integer histograms of the units ``start .. start + n`` of one level,
    sparse (``hists`` numbers them from 0)."""

    level: str
    start: int
    hists: SparseHistograms

    @property
    def stop(self) -> int:
        return self.start + self.hists.n_units

    def part(self, units: range) -> SolvedLevel:
        """The units ``units`` (a sub-range) alone."""
        lo, hi = (
            self.hists.offsets[units.start - self.start],
            self.hists.offsets[units.stop - self.start],
        )
        h = self.hists
        sub = SparseHistograms(
            h.cells, len(units), h.unit[lo:hi] - (units.start - self.start), h.cell[lo:hi],
            h.count[lo:hi],
        )  # fmt: skip
        return SolvedLevel(self.level, units.start, sub)

    def row(self, unit: int) -> IntArray:
        """The dense histogram of ``unit`` (a global index of the level)."""
        i = unit - self.start
        out: IntArray = self.hists.dense(range(i, i + 1))[0]
        return out

    @classmethod
    def from_blocks(
        cls, level: str, start: int, n: int, cells: int, blocks: Sequence[tuple[int, IntArray]]
    ) -> SolvedLevel:
        """From dense ``(first unit, (k, cells) counts)`` blocks covering ``start .. start
        + n`` (in order)."""
        units, cols, counts = [], [], []
        for first, dense in blocks:
            r, c = np.nonzero(dense)
            units.append(r + (first - start))
            cols.append(c)
            counts.append(dense[r, c])
        cat = (lambda xs: np.concatenate(xs).astype(np.int64)) if blocks else None
        empty = np.zeros(0, dtype=np.int64)
        hists = SparseHistograms(
            cells,
            n,
            cat(units) if cat else empty,
            cat(cols) if cat else empty,
            cat(counts) if cat else empty,
        )
        return cls(level, start, hists)


@dataclass(frozen=True, eq=False)
class ChunkResult:
    """One chunk's blocks: ``unit`` of the chunk level, the leaves ``blocks`` (a range of
    the leaf level) and their solved histograms (``hists`` numbers them from
    ``blocks.start``)."""

    unit: int
    label: str
    blocks: range
    hists: SparseHistograms


class TopDownEngine:
    """Runs TopDown's post-processing over a :class:`ProblemBuilder` (module docstring).

    ``solve``: the per-parent solve (default :func:`solve_parent`); ``draw_all``: draw the
    noise of every measured cell (for a noisy measurement file); ``progress``: called
    with ``(done, total, "<level> → <children's level>: <parent>")`` (``total`` the
    parents to solve in all; at most every :data:`PROGRESS_EVERY` seconds).
    """

    def __init__(
        self,
        builder: ProblemBuilder,
        *,
        solve: SolveFn = solve_parent,
        draw_all: bool = False,
        progress: Progress | None = None,
        pool: SlicePool | None = None,
    ) -> None:
        self.builder = builder
        self.solve = solve
        self.pool = pool
        self.draw_all = draw_all
        self.say: Progress = progress or (lambda _d, _n, _m: None)
        h = builder.spine.hierarchy
        self.hierarchy = h
        self.cells = builder.strategy.schema.cells
        self.chunk_level = h.level(h.chunk_level)
        self.records = [LevelRecord(lv) for lv in h.levels]
        self.total_parents = sum(h.size(k) for k in range(len(h.levels) - 1)) + 1
        self.done = 0
        self._said = 0.0
        self._draws = builder.draws
        self._upper: list[SolvedLevel] | None = None

    # ---------------------------------------------------------------- one parent
    def _count(self, text: str, *, force: bool = False) -> None:
        self.done += 1
        now = time.monotonic()
        if force or now - self._said >= PROGRESS_EVERY or self.done == self.total_parents:
            self._said = now
            self.say(self.done, self.total_parents, text)

    def _solve(self, problem: ChildrenProblem, level: int, build: float) -> ChildrenSolution:
        t0 = time.perf_counter()
        before = self._draws
        try:
            sol = self.solve(problem)
        except TopDownInfeasibleError as exc:
            raise _infeasible(exc) from None
        self._draws = self.builder.draws
        self.records[level].add(sol, self._draws - before, build, time.perf_counter() - t0)
        return sol

    def solve_root(self) -> SolvedLevel:
        """The root alone (its own measurements and constraints)."""
        t0 = time.perf_counter()
        problem = self.builder.root_problem()
        with one_blas_thread():
            sol = self._solve(problem, 0, time.perf_counter() - t0)
        self._count(f"{self.hierarchy.levels[0]}: the root", force=True)
        return SolvedLevel.from_blocks(
            self.hierarchy.levels[0], 0, 1, self.cells, [(0, sol.counts)]
        )

    def solve_children(self, level: int, parents: range, solved: SolvedLevel) -> SolvedLevel:
        """The children of ``parents`` (a range of level ``level``, whose solved histograms
        ``solved`` holds): every parent's children with their noise drawn just before —
        with the default solve, in slices of :data:`~privtab.topdown.workers.SLICE`
        parents solved together (:mod:`privtab.topdown.workers`), the next slices built
        while the pool's workers solve."""
        h = self.hierarchy
        child_name = h.levels[level + 1]
        off = h.offsets(level)
        first, stop = int(off[parents.start]), int(off[parents.stop])
        blocks: list[tuple[int, IntArray]] = []
        with one_blas_thread():
            if self.solve is solve_parent:
                self._solve_slices(level, parents, solved, blocks)
            else:
                for parent in parents:
                    blocks.append(self._solve_parent(level, parent, solved))
        return SolvedLevel.from_blocks(child_name, first, stop - first, self.cells, blocks)

    def _build(
        self, level: int, parent: int, solved: SolvedLevel
    ) -> tuple[ChildrenProblem, int, float]:
        """One parent's children problem (its noise drawn now), the draws and seconds."""
        name, child_name = self.hierarchy.levels[level], self.hierarchy.levels[level + 1]
        hist = solved.row(parent)
        t0 = time.perf_counter()
        before = self.builder.draws
        needed = None if self.draw_all else needed_cells(self.builder.strategy, child_name, hist)
        problem = self.builder.children_problem(name, parent, hist, needed)
        return problem, self.builder.draws - before, time.perf_counter() - t0

    def _solve_parent(self, level: int, parent: int, solved: SolvedLevel) -> tuple[int, IntArray]:
        """One parent's children by :attr:`solve`: ``(first child, (k, cells) counts)``."""
        problem, _, build = self._build(level, parent, solved)
        sol = self._solve(problem, level + 1, build)
        return self._accept(level, parent, problem, sol.counts)

    def _accept(
        self, level: int, parent: int, problem: ChildrenProblem, counts: IntArray
    ) -> tuple[int, IntArray]:
        h = self.hierarchy
        if problem.parent is not None and not np.array_equal(counts.sum(axis=0), problem.parent):
            raise TopDownSolverError(f"{problem.geounit}: the children do not sum to it")
        self._count(f"{h.levels[level]} → {h.levels[level + 1]}: {problem.geounit}")
        return int(h.offsets(level)[parent]), counts

    def _solve_slices(
        self, level: int, parents: range, solved: SolvedLevel, out: list[tuple[int, IntArray]]
    ) -> None:
        """The default solve, slice by slice (:mod:`privtab.topdown.workers`): problems
        built here in order, solved here or in the pool; at most two slices per worker in
        flight (bounded memory)."""
        pool = self.pool if self.pool is not None and self.pool.parallel else None
        pending: deque[tuple[list[Any], float, Future[list[Solved]] | None]] = deque()
        record = self.records[level + 1]

        def collect() -> None:
            built, t0, fut = pending.popleft()
            try:
                sols = fut.result() if fut is not None else solve_slice([b[1] for b in built])
            except TopDownInfeasibleError as exc:
                raise _infeasible(exc) from None
            share = (time.perf_counter() - t0) / len(built)
            for (parent, problem, draws, build), (counts, diag) in zip(built, sols, strict=True):
                record.add_diagnostics(diag, draws, build, share)
                out.append(self._accept(level, parent, problem, counts))

        for lo in range(parents.start, parents.stop, SLICE):
            built = []
            for parent in range(lo, min(lo + SLICE, parents.stop)):
                problem, draws, build = self._build(level, parent, solved)
                built.append((parent, problem, draws, build))
            t0 = time.perf_counter()
            pending.append(
                (built, t0, None if pool is None else pool.submit(built_problems(built)))
            )
            while pending and (pool is None or len(pending) > 2 * pool.workers):
                collect()
        while pending:
            collect()
        self._draws = self.builder.draws

    # ---------------------------------------------------------------- the run
    def upper_levels(self) -> list[SolvedLevel]:
        """The root and every level down to the chunk level, solved (once)."""
        if self._upper is None:
            levels = [self.solve_root()]
            for k in range(self.chunk_level):
                levels.append(self.solve_children(k, range(self.hierarchy.size(k)), levels[-1]))
            self._upper = levels
        return self._upper

    def chunks(self, order: Sequence[int] | None = None) -> Iterator[ChunkResult]:
        """Each chunk's blocks, solved, in ``order`` (default: the hierarchy's)."""
        h = self.hierarchy
        kc = self.chunk_level
        top = self.upper_levels()[kc]
        leaf = len(h.levels) - 1
        for unit in order if order is not None else range(h.size(kc)):
            solved = top
            parents = range(unit, unit + 1)
            for k in range(kc, leaf):
                solved = self.solve_children(k, parents, solved)
                parents = range(solved.start, solved.stop)
            if kc == leaf:
                solved = top.part(parents)
            label = h.ids(kc)[unit] if kc else h.levels[0]
            yield ChunkResult(unit, label, parents, solved.hists)

    def level_records(self) -> list[dict[str, Any]]:
        """Per children's level, what it took (:class:`LevelRecord`)."""
        return [r.to_dict() for r in self.records]
