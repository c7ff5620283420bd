"""Per-parent problems solved in slices, in this process or in worker processes.

TopDown's driver (:mod:`privtab.topdown.engine`) draws a level's noise and builds its
per-parent problems in the main process, parent after parent in the hierarchy's order —
the order in which a seeded source's stream is consumed never depends on the parallelism.
It hands the problems over in **slices** of :data:`SLICE` consecutive parents; each slice
is solved by :func:`solve_slice` — the batched structured solver
(:func:`privtab.topdown.solve.solve_children_batch`: the same certified answers and runtime
checks as one problem at a time) — either here (``workers=1``) or in one of ``workers``
worker processes (:class:`SolvePool`), while the main process builds the next slices. A
slice's composition is fixed by :data:`SLICE` alone and :func:`solve_slice` is a pure
function of its problems, so a seeded release is byte-identical whatever the number of
workers (``tests/topdown/test_release_identity.py``).

Workers are started with ``forkserver`` (never ``fork``: the release runs in a worker
thread beside polars's thread pool), each with one BLAS thread
(:func:`privtab.topdown.engine.one_blas_thread`'s reason). A worker receives only the
problem objects — noisy measurements and public constraints — and returns the children's
integer histograms and diagnostics: post-processing, no privacy cost.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Protocol, TypeAlias

import numpy as np
from numpy.typing import NDArray

from privtab.topdown.solve import ChildrenProblem, SolveDiagnostics, solve_children_batch

__all__ = ["SLICE", "SlicePool", "SolvePool", "Solved", "solve_slice"]

#: Parents per slice: the unit of work handed to a worker (and of the batched solver).
#: Fixed, so the answers never depend on the worker count.
SLICE = 32

#: What a slice returns per problem: the children's integer histograms and diagnostics.
Solved: TypeAlias = tuple[NDArray[np.int64], SolveDiagnostics]


def solve_slice(problems: Sequence[ChildrenProblem]) -> list[Solved]:
    """Solve a slice of problems (module docstring), in order."""
    return [(s.counts, s.diagnostics) for s in solve_children_batch(problems)]


class SlicePool(Protocol):
    """Where the engine's slices are solved: :class:`SolvePool` (processes of this machine)
    or :class:`privtab.topdown.spark.SparkSolvePool` (Spark tasks)."""

    @property
    def workers(self) -> int: ...
    @property
    def parallel(self) -> bool: ...
    def submit(self, problems: Sequence[ChildrenProblem]) -> Future[list[Solved]]: ...


def _start_worker() -> None:
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


class SolvePool:
    """``workers`` processes solving slices (``workers=1``: none — slices are solved in
    the caller's process). A context manager: the processes end with it."""

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

    def submit(self, problems: Sequence[ChildrenProblem]) -> Future[list[Solved]]:
        """Solve ``problems`` in a worker (started on first use)."""
        if self._pool is None:
            ctx = multiprocessing.get_context("forkserver")
            self._pool = ProcessPoolExecutor(
                self.workers, mp_context=ctx, initializer=_start_worker
            )
        return self._pool.submit(solve_slice, list(problems))
