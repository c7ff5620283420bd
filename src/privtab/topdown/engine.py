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

**Slices.** Each level's parents are cut into slices of
:data:`~privtab.topdown.workers.SLICE` consecutive parents
(:meth:`ProblemBuilder.slice_task`: the public constraints, the parents' solved
histograms, the children's true sparse histograms and the slice's source key — no noise,
no problem built). With the default solve (:func:`solve_parent`) each slice is one call
of :func:`privtab.topdown.workers.run_slice` in the :class:`~privtab.topdown.workers.
SolvePool`'s worker processes: the slice's children's noise is drawn there in one
vectorised batch — only the cells an output can depend on (those positive in the solved
parent, :func:`privtab.topdown.measure.needed_cells`) unless every cell is to be published
(``draw_all``: a noisy measurement file) — its problems are built and solved together.
This process only schedules: it cuts tasks lazily (at most two slices per worker running,
six per worker held), takes each level's results in the hierarchy's order, checks that every
parent's children sum to it, feeds a noisy-measurement file's sink and hands the blocks
on. A level with fewer slices than workers (a small state's counties, the last slice of a
level) would leave a worker idle, so :meth:`TopDownEngine.chunks` runs **two chunks at
once**: the next chunk's slices fill the workers while the current chunk finishes, and
the chunks are still handed over in order (with a sink: one at a time, so the file's rows
keep the hierarchy's order). A seeded run derives each slice's source from the slice
(:mod:`privtab.topdown.measure`), so it is identical for any number of workers. Any other
``solve`` (a benchmark's, ``gls-round``'s) gets the same slices' problems built in this
process, one call per parent — the same draws as the default path.

**One BLAS thread.** The per-parent matrices are small (at most a few thousand rows): a
multi-threaded BLAS only adds synchronisation, and on a loaded two-core machine it made the
same solves 5–25 times slower (measured: a root problem 15 s with OpenBLAS's two threads,
2.7 s with one). The engine's solving methods run under
:func:`privtab._blas.one_blas_thread` and its worker processes start with
:func:`privtab._blas.limit_blas_threads` (``threadpoolctl``, after loading both NumPy's
and SciPy's BLAS: a limit set before SciPy's is loaded never reaches it).

Every level's work is counted in :class:`LevelRecord` (parents, paths, the generic path's
reasons, fallbacks, noise draws, seconds): for the confidential run record and benchmarks,
never for a release folder (timings depend on the data).

Privacy: the driver only routes measurements (drawn with the exact mechanism and budget of
:mod:`privtab.topdown.measure`) to the solver; everything else is post-processing of the
noisy measurements and of the invariants.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privtab._blas import one_blas_thread
from privtab.errors import InputError
from privtab.topdown.inputs import SparseHistograms
from privtab.topdown.problems import ProblemBuilder, SliceTask, build_slice, units_part
from privtab.topdown.solve import (
    ChildrenProblem,
    ChildrenSolution,
    SolveDiagnostics,
    TopDownInfeasibleError,
    TopDownSolverError,
    solve_children,
)
from privtab.topdown.workers import SLICE, SlicePool, SliceResult, Solved, run_slice

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
        return SolvedLevel(self.level, units.start, units_part(self.hists, self.start, units))

    def rows(self, units: range) -> IntArray:
        """The dense histograms of ``units`` (a sub-range of global indices of the level)."""
        return self.hists.dense(range(units.start - self.start, units.stop - self.start))

    def row(self, unit: int) -> IntArray:
        """The dense histogram of ``unit`` (a global index of the level)."""
        out: IntArray = self.rows(range(unit, unit + 1))[0]
        return out

    @classmethod
    def from_parts(
        cls, level: str, start: int, n: int, cells: int, parts: Sequence[SparseRows]
    ) -> SolvedLevel:
        """From the :func:`sparse_rows` of consecutive parents' children covering
        ``start .. start + n`` (in order)."""
        empty = np.zeros(0, dtype=np.int64)

        def cat(i: int) -> IntArray:
            return np.concatenate([p[i] for p in parts]).astype(np.int64) if parts else empty

        return cls(level, start, SparseHistograms(cells, n, cat(0), cat(1), cat(2)))


SparseRows = tuple[IntArray, IntArray, IntArray]
"""``(unit, cell, count)`` of the nonzero cells of some units' histograms."""


def sparse_rows(offset: int, dense: IntArray) -> SparseRows:
    """The nonzero cells of ``(k, cells)`` dense histograms whose first unit is
    ``offset``: a level's solved children are kept sparse as each slice arrives, never dense
    (a state's blocks dense are 16 KiB each: ≈ 4 GiB for Georgia, docs/topdown.md §14)."""
    r, c = np.nonzero(dense)
    return r + offset, c, dense[r, c]


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
        self._upper: list[SolvedLevel] | None = None

    # ---------------------------------------------------------------- one parent
    def _count(self, text: str, *, force: bool = False) -> None:
        self.done += 1
        now = time.monotonic()
        if force or now - self._said >= PROGRESS_EVERY or self.done == self.total_parents:
            self._said = now
            self.say(self.done, self.total_parents, text)

    def solve_root(self) -> SolvedLevel:
        """The root alone (its own measurements and constraints: a slice of its own)."""
        step = _Step(self, 0, iter([self.builder.root_task()]), 1, 0, 1)
        self._drive([step], cap=1, pool=None)
        self._count(f"{self.hierarchy.levels[0]}: the root", force=True)
        return step.solved()

    def solve_children(self, level: int, parents: range, solved: SolvedLevel) -> SolvedLevel:
        """The children of ``parents`` (a range of level ``level``, whose solved histograms
        ``solved`` holds), in slices of :data:`~privtab.topdown.workers.SLICE` parents
        (:mod:`privtab.topdown.workers`): each slice's noise drawn and its problems built
        and solved in the pool's workers (with the default solve), this process only
        cutting the tasks and collecting the results in order."""
        step = self._step(level, parents, solved)
        self._drive([step], cap=self._cap(), pool=self._pool())
        return step.solved()

    def _pool(self) -> SlicePool | None:
        """The pool slices run in (``None``: this process — one worker, or another solve)."""
        if self.pool is None or not self.pool.parallel or self.solve is not solve_parent:
            return None
        return self.pool

    def _cap(self) -> int:
        """Slices in flight at most: two per worker (bounded memory)."""
        pool = self._pool()
        return 1 if pool is None else 2 * pool.workers

    def _step(self, level: int, parents: range, solved: SolvedLevel) -> _Step:
        """The slices of the children of ``parents`` (level ``level``), cut lazily."""
        off = self.hierarchy.offsets(level)
        cuts = [range(lo, min(lo + SLICE, parents.stop)) for lo in parents[::SLICE]]
        tasks = (
            self.builder.slice_task(level, cut, solved.part(cut).hists, self.draw_all)
            for cut in cuts
        )
        first = int(off[parents.start])
        return _Step(self, level + 1, tasks, len(cuts), first, int(off[parents.stop]) - first)

    def _drive(self, steps: Sequence[_Step], *, cap: int, pool: SlicePool | None) -> None:
        """Run ``steps`` to the end: slices submitted oldest step first, at most ``cap`` in
        flight, each step's results taken in order as they arrive."""
        while not all(st.finished for st in steps):
            self._submit(steps, cap, pool)
            self._wait(steps, pool)

    def _submit(self, steps: Sequence[_Step], cap: int, pool: SlicePool | None) -> None:
        """Start slices, oldest step first, while fewer than ``cap`` run and fewer than
        ``3 cap`` (finished ones waiting for an earlier slice) are held."""
        running = sum(len(st.pending()) for st in steps)
        held = sum(st.inflight for st in steps)
        for st in steps:
            while running < cap and held < 3 * cap and st.submit(pool):
                running += 1  # (a slice run here counts until the next wait takes it)
                held += 1

    @staticmethod
    def _wait(steps: Sequence[_Step], pool: SlicePool | None) -> None:
        """Until some slice in flight has finished (the pool told to start everything
        submitted first: a Spark pool gathers slices into jobs); then every step takes
        what it can."""
        futures = [f for st in steps for f in st.pending()]
        if futures:
            if pool is not None:
                pool.flush()
            wait(futures, return_when=FIRST_COMPLETED)
        for st in steps:
            st.take()

    def _run_here(self, task: SliceTask) -> SliceResult:
        """``task`` in this process (one BLAS thread): by :func:`run_slice`, or built
        and solved by the given :attr:`solve` one parent at a time."""
        with one_blas_thread():
            if self.solve is solve_parent:
                return run_slice(task)
            built = build_slice(task)
            t0 = time.perf_counter()
            solved: list[Solved] = []
            for problem in built.problems:
                sol = self.solve(problem)
                solved.append((sol.counts, sol.diagnostics))
        batch = built.batch if task.keep else None
        return SliceResult(solved, built.draws, batch, built.seconds, time.perf_counter() - t0)

    def _accept(self, k: int, task: SliceTask, res: SliceResult) -> list[tuple[int, IntArray]]:
        """A slice's results, in order: recorded (draws, sink, diagnostics, progress) and
        checked (every parent's children sum to it); ``(first child, counts)`` per parent."""
        self.builder.record(res.batch, sum(res.draws))
        h = self.hierarchy
        n = len(task.geounits)
        build, solve = res.build_seconds / n, res.solve_seconds / n
        out = []
        parents = task.parent_hists()
        for i, ((counts, diag), draws) in enumerate(zip(res.solved, res.draws, strict=True)):
            self.records[k].add_diagnostics(diag, draws, build, solve)
            if parents is not None and not np.array_equal(counts.sum(axis=0), parents[i]):
                raise TopDownSolverError(f"{task.geounits[i]}: the children do not sum to it")
            if k:  # (the root is counted by solve_root)
                self._count(f"{h.levels[k - 1]} → {h.levels[k]}: {task.geounits[i]}")
            out.append((task.first + int(task.bounds[i]), counts))
        return out

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
        """Each chunk's blocks, solved, in ``order`` (default: the hierarchy's).

        With a pool of several workers (and the default solve, no measurement sink) the
        next chunk starts while this one finishes — its slices fill the workers whenever
        this chunk's level has fewer slices than workers (a small state's county level, a
        level waiting for its last slice) — and the chunks are still handed over in
        ``order``, each exactly as it would be alone (a slice's result depends on its task
        only). With a sink (``--nmf``) one chunk at a time: the file's rows stay in the
        hierarchy's order."""
        h = self.hierarchy
        kc = self.chunk_level
        top = self.upper_levels()[kc]
        leaf = len(h.levels) - 1
        units = iter(order if order is not None else range(h.size(kc)))
        pool = self._pool()
        depth = 2 if pool is not None and self.builder.sink is None else 1
        active: deque[_Chunk] = deque()
        while True:
            while len(active) < depth and (unit := next(units, None)) is not None:
                active.append(_Chunk(self, unit, top, leaf))
            if not active:
                return
            steps = [c.step for c in active if c.step is not None]
            self._submit(steps, self._cap(), pool)
            self._wait(steps, pool)
            for c in active:
                c.advance()
            while active and active[0].step is None:
                c = active.popleft()
                label = h.ids(kc)[c.unit] if kc else h.levels[0]
                yield ChunkResult(c.unit, label, c.parents, c.solved.hists)

    def level_records(self) -> list[dict[str, Any]]:
        """Per children's level, what it took (:class:`LevelRecord`)."""
        return [r.to_dict() for r in self.records]


class _Step:
    """One level of slices in progress: ``n`` tasks (cut lazily) whose children are
    units ``first .. first + count`` of level ``k``; results taken in order."""

    def __init__(
        self,
        engine: TopDownEngine,
        k: int,
        tasks: Iterator[SliceTask],
        n: int,
        first: int,
        count: int,
    ) -> None:
        self.engine, self.k, self.tasks, self.n = engine, k, tasks, n
        self.first, self.count = first, count
        self.submitted = 0
        self.queue: deque[tuple[SliceTask, Future[SliceResult]]] = deque()
        self.taken = 0
        self.parts: list[SparseRows] = []  # the children solved so far, sparse

    @property
    def finished(self) -> bool:
        return self.taken == self.n

    @property
    def inflight(self) -> int:
        return len(self.queue)

    def submit(self, pool: SlicePool | None) -> bool:
        """Start the next slice (in ``pool``, or run it here now); ``False`` if none is left."""
        if self.submitted == self.n:
            return False
        task = next(self.tasks)
        self.submitted += 1
        if pool is not None:
            fut = pool.submit(task)
        else:
            fut = Future()
            try:
                fut.set_result(self.engine._run_here(task))
            except TopDownInfeasibleError as exc:
                fut.set_exception(exc)
        self.queue.append((task, fut))
        return True

    def pending(self) -> list[Future[SliceResult]]:
        return [f for _, f in self.queue if not f.done()]

    def take(self) -> None:
        """Accept the finished slices at the head of the queue (in order)."""
        while self.queue and self.queue[0][1].done():
            task, fut = self.queue.popleft()
            try:
                res = fut.result()
            except TopDownInfeasibleError as exc:
                raise _infeasible(exc) from None
            for first, counts in self.engine._accept(self.k, task, res):
                self.parts.append(sparse_rows(first - self.first, counts))
            self.taken += 1

    def solved(self) -> SolvedLevel:
        e = self.engine
        level = e.hierarchy.levels[self.k]
        return SolvedLevel.from_parts(level, self.first, self.count, e.cells, self.parts)


class _Chunk:
    """One chunk's subtree in progress, level by level (:meth:`TopDownEngine.chunks`)."""

    def __init__(self, engine: TopDownEngine, unit: int, top: SolvedLevel, leaf: int) -> None:
        self.engine, self.unit, self.leaf = engine, unit, leaf
        self.k = engine.chunk_level
        self.parents = range(unit, unit + 1)
        self.solved = top.part(self.parents) if self.k == leaf else top
        self.step: _Step | None = None
        self._next()

    def _next(self) -> None:
        self.step = (
            None if self.k == self.leaf else self.engine._step(self.k, self.parents, self.solved)
        )

    def advance(self) -> None:
        """After a wait: on to the next level when this one is finished."""
        while self.step is not None and self.step.finished:
            self.solved = self.step.solved()
            self.parents = range(self.solved.start, self.solved.stop)
            self.k += 1
            self._next()
