"""Post-processing a noisy table to non-negative integers that keep the published margins.

Seed Remark 33: any function of the private output and the invariant keeps the Semi-DP
guarantee (Prop. 23). :func:`nearest_integer_table` returns the table ``Y`` minimising
``Σ |Y_ij − y_ij|`` over non-negative integer tables with the given row and column sums
(an integer linear program on the transportation polytope, solved exactly by HiGHS; the
constraint matrix is totally unimodular, so the optimum is also the best fractional
table's value when ``y`` is integral). Ties are broken by the solver, deterministically.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["nearest_integer_table"]


def nearest_integer_table(
    noisy: ArrayLike, row_margins: ArrayLike, col_margins: ArrayLike
) -> NDArray[np.int64]:
    """The ℓ₁-nearest non-negative integer table to ``noisy`` with the given margins."""
    from scipy.optimize import Bounds, LinearConstraint, milp  # lazy (import cost)
    from scipy.sparse import csr_matrix, hstack, identity, kron, vstack

    y = np.asarray(noisy, dtype=np.float64)
    rows = np.asarray(row_margins, dtype=np.int64).reshape(-1)
    cols = np.asarray(col_margins, dtype=np.int64).reshape(-1)
    if y.ndim != 2 or y.shape != (rows.size, cols.size):
        raise ValueError(f"table shape {y.shape} does not match margins ({rows.size}, {cols.size})")
    if not np.all(np.isfinite(y)):
        raise ValueError("the noisy table contains a non-finite value")
    if np.any(rows < 0) or np.any(cols < 0) or rows.sum() != cols.sum():
        raise ValueError("margins must be non-negative and have the same total")
    r, c = y.shape
    d = r * c
    # variables: Y (d, integer ≥ 0) then E (d, ≥ 0) with E ≥ |Y − y|
    row_op = kron(identity(r), np.ones((1, c)))
    col_op = kron(np.ones((1, r)), identity(c))
    zeros_r = csr_matrix((r, d))
    zeros_c = csr_matrix((c, d))
    eye = identity(d)
    a_eq = csr_matrix(vstack([hstack([row_op, zeros_r]), hstack([col_op, zeros_c])]))
    a_abs = csr_matrix(vstack([hstack([eye, -eye]), hstack([-eye, -eye])]))
    yv = y.reshape(-1)
    cons = [
        LinearConstraint(a_eq, np.concatenate([rows, cols]), np.concatenate([rows, cols])),
        LinearConstraint(a_abs, -np.inf, np.concatenate([yv, -yv])),
    ]
    cost = np.concatenate([np.zeros(d), np.ones(d)])
    integrality = np.concatenate([np.ones(d), np.zeros(d)])
    res = milp(cost, constraints=cons, integrality=integrality, bounds=Bounds(0, np.inf))
    if res.status != 0 or res.x is None:
        raise RuntimeError(f"post-processing failed: {res.message}")
    out = np.rint(res.x[:d]).astype(np.int64).reshape(r, c)
    if not (np.array_equal(out.sum(axis=1), rows) and np.array_equal(out.sum(axis=0), cols)):
        raise RuntimeError("post-processing produced a table with the wrong margins")
    return out
