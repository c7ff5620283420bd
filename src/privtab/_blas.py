"""One BLAS thread for the solvers, in every library that can run one.

The per-parent problems of TopDown are small dense systems (at most a few thousand rows):
a multi-threaded BLAS only adds synchronisation, and when several solving processes share
two cores its spinning threads make the same solves many times slower. ``threadpoolctl``
limits the BLAS libraries *already loaded* in a process; NumPy and SciPy each ship their
own OpenBLAS (``libscipy_openblas64_`` for NumPy, ``libscipy_openblas`` for SciPy), and
SciPy's is loaded only when ``scipy.linalg`` is first imported — typically by the first
solve, after a limit set at a worker's start, which then never applied to it. Measured on
the Tract problems of Georgia at 10⁷ persons (its largest county, 154 tracts): 1.0 CPU s
with one thread, 8.6–15.5 CPU s with SciPy's BLAS left at two threads on a loaded machine.

:func:`load_blas` imports what loads every BLAS the solvers use, so that a limit set after
it covers them all: :func:`one_blas_thread` (a context, restored after) and
:func:`limit_blas_threads` (for the rest of a worker process's life). Thread counts only:
no effect on any result (the same operations in the same order on one thread).
"""

from __future__ import annotations

import contextlib

__all__ = ["blas_threads", "limit_blas_threads", "load_blas", "one_blas_thread"]


def load_blas() -> None:
    """Import NumPy and SciPy's linear algebra, loading both OpenBLAS libraries."""
    import numpy.linalg  # noqa: F401
    import scipy.linalg
    import scipy.sparse.linalg  # noqa: F401


def one_blas_thread() -> contextlib.AbstractContextManager[object]:
    """A context in which every BLAS library NumPy and SciPy use runs one thread (the
    libraries loaded first, so that none escapes the limit); restored on exit."""
    from threadpoolctl import threadpool_limits

    load_blas()
    limits: contextlib.AbstractContextManager[object] = threadpool_limits(limits=1, user_api="blas")
    return limits


def limit_blas_threads() -> None:
    """One BLAS thread for the rest of this process (a solving worker's initializer)."""
    from threadpoolctl import threadpool_limits

    load_blas()
    threadpool_limits(limits=1, user_api="blas")


def blas_threads() -> dict[str, int]:
    """The thread count of every BLAS library loaded in this process, by file name (for
    tests and diagnostics)."""
    from threadpoolctl import threadpool_info

    return {
        str(i["filepath"]).rsplit("/", 1)[-1]: int(i["num_threads"])
        for i in threadpool_info()
        if i["user_api"] == "blas"
    }
