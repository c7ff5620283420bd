"""TopDown's unit of work: one slice of parents, measured and solved where it runs.

**The slice function** (what any engine runs — this module's :class:`SolvePool`, the
driver's own process, or a Spark ``mapPartitions``)::

    run_slice(task: SliceTask) -> SliceResult

a pure function of its picklable :class:`~privtab.topdown.problems.SliceTask` — the
public constraints of the children (:class:`~privtab.topdown.solve.ChildConstraints`, one
per parent), the parents' solved histograms and ids, the children's **true sparse
histograms** (``task.truth``, confidential; or ``task.measured``, measurements read from a
noisy-measurement file) and the per-slice source key (``task.noise``: the budget shares of
the children and ``seed`` — ``None`` for the secure source of the process running the
task, or the derived test seed ``f"{seed}-{run}-{level}-{first child}"``) — returning the
solved children: :class:`SliceResult` (per parent, the children's integer histograms and
:class:`~privtab.topdown.solve.SolveDiagnostics`; the noise draws per parent; the
measurement batch when ``task.keep``, for a noisy-measurement file; seconds building and
solving). It draws the slice's noise in one vectorised batch and builds its problems
(:func:`~privtab.topdown.problems.build_slice`), then solves them together with the
batched structured solver (:func:`privtab.topdown.solve.solve_children_batch`: the same
certified answers and runtime checks as one problem at a time).

TopDown's driver (:mod:`privtab.topdown.engine`) only cuts the tasks — :data:`SLICE`
consecutive parents of one level, in the hierarchy's order — and collects the results in
that order. A slice's composition is fixed by :data:`SLICE` alone and its seeded source by
the slice, so a seeded release is byte-identical whatever the number of workers
(``tests/topdown/test_release_identity.py``); with the secure source, every task's noise
comes from its own process's CSPRNG (:mod:`privtab.topdown.measure`: the privacy argument).

Workers are started with ``forkserver`` (never ``fork``: the release runs in a worker
thread beside polars's thread pool), each with one BLAS thread
(:func:`privtab._blas.limit_blas_threads`; :mod:`privtab._blas` says why). A worker
receives a slice's true histograms and public constraints and returns only noisy measurements and
post-processed histograms (the true histograms never leave it in any result).
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Protocol, TypeAlias

import numpy as np
from numpy.typing import NDArray

from privtab._blas import limit_blas_threads
from privtab.topdown.measure import MeasurementBatch
from privtab.topdown.problems import SliceTask, build_slice
from privtab.topdown.solve import ChildrenProblem, SolveDiagnostics, solve_children_batch

__all__ = ["SLICE", "SlicePool", "SliceResult", "SolvePool", "Solved", "run_slice", "solve_slice"]

#: Parents per slice: the unit of work handed to a worker (and of the batched solver and
#: of a seeded run's derived sources). Fixed, so the answers never depend on the workers.
SLICE = 32

#: What a slice returns per problem: the children's integer histograms and diagnostics.
Solved: TypeAlias = tuple[NDArray[np.int64], SolveDiagnostics]


@dataclass(frozen=True, eq=False)
class SliceResult:
    """A slice solved (module docstring): ``solved`` and ``draws`` per parent, in order;
    ``batch`` the slice's measurements if the task asked to keep them."""

    solved: list[Solved]
    draws: list[int]
    batch: MeasurementBatch | None
    build_seconds: float
    solve_seconds: float


def solve_slice(problems: Sequence[ChildrenProblem]) -> list[Solved]:
    """Solve built problems together, in order (the batched structured solver)."""
    return [(s.counts, s.diagnostics) for s in solve_children_batch(problems)]


def run_slice(task: SliceTask) -> SliceResult:
    """Measure and solve one slice (module docstring): the unit of work of every engine."""
    built = build_slice(task)
    t0 = time.perf_counter()
    solved = solve_slice(built.problems)
    return SliceResult(
        solved,
        built.draws,
        built.batch if task.keep else None,
        built.seconds,
        time.perf_counter() - t0,
    )


class SlicePool(Protocol):
    """Where the engine's slice tasks run: :class:`SolvePool` (processes of this machine)
    or :class:`privtab.topdown.spark.SparkSolvePool` (Spark tasks); both call
    :func:`run_slice` on each task."""

    @property
    def workers(self) -> int: ...
    @property
    def parallel(self) -> bool: ...
    def submit(self, task: SliceTask) -> Future[SliceResult]: ...
    def flush(self) -> None:
        """Start whatever was submitted: called before the engine waits for a result (a
        pool may gather tasks into jobs; it must not hold one the engine waits for)."""
        ...


class SolvePool:
    """``workers`` processes running slices (``workers=1``: none — slices run in the
    caller's process). A context manager: the processes end with it."""

    def __init__(self, workers: int = 1) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> SolvePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the worker processes (cancelling slices not started)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    @property
    def parallel(self) -> bool:
        return self.workers > 1

    def flush(self) -> None:
        """Nothing to do: a submitted task starts as soon as a worker is free."""

    def submit(self, task: SliceTask) -> Future[SliceResult]:
        """Run ``task`` (:func:`run_slice`) in a worker (the pool started on first use)."""
        if self._pool is None:
            ctx = multiprocessing.get_context("forkserver")
            self._pool = ProcessPoolExecutor(
                self.workers, mp_context=ctx, initializer=limit_blas_threads
            )
        return self._pool.submit(run_slice, task)
