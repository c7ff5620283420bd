"""Vectorised numerical helpers for the semantics module (not privacy code).

Every bound in :mod:`privtab.semantics` that is optimised over a free parameter (a Rényi
order, an ε on a privacy profile) is *valid* at every value of that parameter; the
optimiser only makes it tighter. So these helpers affect tightness, never validity, and
their stated accuracy is what the documentation quotes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

__all__ = ["bisect_feasible", "golden_max", "scan_then_refine_max"]

_GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0


def bisect_feasible(
    feasible: Callable[[FloatArray], BoolArray],
    lo: FloatArray,
    hi: FloatArray,
    iterations: int = 64,
) -> tuple[FloatArray, FloatArray]:
    """Bracket the boundary of a feasible interval ``[b, hi]`` by bisection (vectorised).

    ``feasible(hi)`` must hold and feasibility must be monotone (once feasible, feasible
    for every larger value up to ``hi``). Returns ``(below, above)`` with
    ``below ≤ b ≤ above`` and ``above − below ≤ (hi − lo)·2^−iterations``; ``above`` is
    feasible, ``below`` is ``lo`` or infeasible. Callers pick the side that makes their
    bound conservative.
    """
    lo = np.array(lo, dtype=np.float64, copy=True)
    hi = np.array(hi, dtype=np.float64, copy=True)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        ok = feasible(mid)
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    return lo, hi


def golden_max(
    objective: Callable[[FloatArray], FloatArray],
    lo: FloatArray,
    hi: FloatArray,
    iterations: int = 48,
) -> tuple[FloatArray, FloatArray]:
    """Golden-section search for the maximum of unimodal functions on ``[lo, hi]``.

    Vectorised: ``objective`` maps an array of points (one per problem) to values.
    Returns ``(best value, argmax)``; after ``n`` iterations the bracket has shrunk by
    ``0.618^n`` (48 iterations: ~1e-10 of its width; at a smooth maximum the value
    error is of the order of the square of that).
    """
    a = np.array(lo, dtype=np.float64, copy=True)
    b = np.array(hi, dtype=np.float64, copy=True)
    c = b - _GOLDEN * (b - a)
    d = a + _GOLDEN * (b - a)
    fc, fd = objective(c), objective(d)
    for _ in range(iterations):
        left = fc >= fd
        # keep [a, d] where the left point is better, else [c, b]
        b = np.where(left, d, b)
        a = np.where(left, a, c)
        c_new = np.where(left, b - _GOLDEN * (b - a), d)
        d_new = np.where(left, c, a + _GOLDEN * (b - a))
        f_known = np.where(left, fc, fd)
        f_probe = objective(np.where(left, c_new, d_new))
        fc = np.where(left, f_probe, f_known)
        fd = np.where(left, f_known, f_probe)
        c, d = c_new, d_new
    better = fc >= fd
    return np.where(better, fc, fd), np.where(better, c, d)


def scan_then_refine_max(
    objective: Callable[[FloatArray], FloatArray],
    grid: FloatArray,
    n_problems: int,
) -> tuple[FloatArray, FloatArray]:
    """Maximise ``objective`` over a 1-d parameter for ``n_problems`` problems at once.

    ``objective(t)`` takes ``t`` of shape ``(n_problems, k)`` and returns values of the
    same shape. A scan over ``grid`` (sorted) finds the best grid point of each problem;
    golden-section search refines inside the two neighbouring grid cells. The result is
    never worse than the best grid point. Returns ``(value, argmax)`` per problem.
    """
    g = np.asarray(grid, dtype=np.float64)
    t = np.broadcast_to(g, (n_problems, g.size))
    vals = objective(t)
    vals = np.where(np.isnan(vals), -np.inf, vals)
    i = np.argmax(vals, axis=1)
    rows = np.arange(n_problems)
    best_v, best_t = vals[rows, i], g[i]
    lo = g[np.maximum(i - 1, 0)]
    hi = g[np.minimum(i + 1, g.size - 1)]

    def col(x: FloatArray) -> FloatArray:
        out = objective(x[:, None])[:, 0]
        return np.where(np.isnan(out), -np.inf, out)

    ref_v, ref_t = golden_max(col, lo, hi)
    take = ref_v > best_v
    return np.where(take, ref_v, best_v), np.where(take, ref_t, best_t)
