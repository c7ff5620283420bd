"""Small vectorised root finders and minimisers used by the conversions.

These are numerical helpers, not privacy code: every conversion that uses them is valid
for *any* order ``α`` it evaluates, so the optimiser's accuracy affects tightness only,
never validity.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

__all__ = ["increasing_root", "minimise_over_orders"]


def increasing_root(
    fn: Callable[[FloatArray], tuple[FloatArray, FloatArray]],
    lo: FloatArray,
    hi: FloatArray,
    *,
    x0: FloatArray | None = None,
    rtol: float = 1e-15,
    max_iter: int = 200,
) -> FloatArray:
    """Roots of increasing functions on brackets ``[lo, hi]`` (vectorised).

    ``fn(x)`` returns ``(f(x), f'(x))``; ``f(lo) < 0 < f(hi)`` is assumed. A safeguarded
    Newton iteration from ``x0`` (default: the midpoint): each step is Newton's if it stays
    inside the current bracket and bisection otherwise, so it converges for every
    increasing ``f``.
    """
    lo = np.array(lo, dtype=np.float64, copy=True)
    hi = np.array(hi, dtype=np.float64, copy=True)
    x = 0.5 * (lo + hi) if x0 is None else np.array(x0, dtype=np.float64, copy=True)
    for _ in range(max_iter):
        f, df = fn(x)
        neg = f < 0
        lo = np.where(neg, x, lo)
        hi = np.where(neg, hi, x)
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = x - f / df
        tiny = np.abs(newton - x) <= rtol * np.abs(x)
        inside = (newton >= lo) & (newton <= hi) & np.isfinite(newton)
        converged = (f == 0) | (tiny & np.isfinite(newton)) | (hi - lo <= rtol * np.abs(hi))
        x_new = np.where(inside, newton, 0.5 * (lo + hi))
        x = np.where(f == 0, x, np.where(converged, np.clip(newton, lo, hi), x_new))
        if np.all(converged):
            break
    return x


def minimise_over_orders(
    objective: Callable[[FloatArray], FloatArray],
    *,
    x_min: float = 1e-7,
    x_max: float = 1e7,
    points: int = 600,
) -> tuple[float, float]:
    """Minimise ``objective(α)`` over ``α = 1 + x``, ``x ∈ [x_min, x_max]``.

    A log-spaced scan locates the best bracket, then Brent's method refines inside it
    to near machine precision. Returns ``(value, α*)``.
    """
    xs = np.geomspace(x_min, x_max, points)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        vals = np.asarray(objective(1.0 + xs), dtype=np.float64)
    vals = np.where(np.isnan(vals), np.inf, vals)
    i = int(np.argmin(vals))
    if not np.isfinite(vals[i]):
        return float("inf"), float("nan")
    lo = np.log(xs[max(i - 1, 0)])
    hi = np.log(xs[min(i + 1, points - 1)])

    def scalar(t: float) -> float:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            v = float(np.asarray(objective(np.array([1.0 + np.exp(t)])))[0])
        return v if np.isfinite(v) else float("inf")

    from scipy.optimize import minimize_scalar  # lazy: scipy.optimize is slow to import

    res = minimize_scalar(scalar, bounds=(lo, hi), method="bounded", options={"xatol": 1e-13})
    best_t, best_v = float(res.x), float(res.fun)
    if best_v > vals[i]:
        return float(vals[i]), float(1.0 + xs[i])
    return best_v, float(1.0 + np.exp(best_t))
