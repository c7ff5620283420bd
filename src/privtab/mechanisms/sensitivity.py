"""Sensitivity of linear (counting) queries given as a matrix (course seed §2.2).

Data are a histogram ``x`` (``x_i`` = number of records of type ``i``) and the query is
``A x`` for a matrix ``A`` (rows = answers, columns = record types).

* **add/remove-one neighbours** (unbounded DP): ``x`` and ``x ± e_i`` differ by one record,
  so ``Δ_p = max_i ‖A e_i‖_p`` — the largest column norm (course Def. 5).
* **replace-one neighbours** (bounded DP): one record changes type, ``x − e_i + e_j``, so
  ``Δ_p = max_{i≠j} ‖A(e_i − e_j)‖_p`` — the largest norm of a difference of two columns.

Under replace-one neighbours a changed record can leave one part of a partition and join
another, so parallel composition over disjoint parts costs *two* parts' budgets (2ε for
ε-DP parts), as the course notes: :func:`partition_guarantee`.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privtab.accounting import Guarantee, compose, parallel
from privtab.accounting.composition import compose_by_degree
from privtab.accounting.guarantees import ZCDP, PureDP

__all__ = ["Neighbours", "partition_guarantee", "sensitivity"]

Neighbours = Literal["add_remove", "replace"]
NormSpec = int | float | str

_BLOCK = 256  # columns per block in the pairwise (replace-one) computation


def _norm_order(norm: NormSpec) -> float:
    key = str(norm).lower().replace("l", "")
    if key in ("1", "1.0"):
        return 1.0
    if key in ("2", "2.0"):
        return 2.0
    if key in ("inf", "infinity", "∞"):
        return math.inf
    raise ValueError(f"norm must be 1, 2 or 'inf', got {norm!r}")


def _as_matrix(matrix: ArrayLike) -> NDArray[np.float64]:
    a = np.asarray(matrix, dtype=np.float64)
    if a.ndim == 1:
        a = a[np.newaxis, :]
    if a.ndim != 2 or a.shape[1] == 0:
        raise ValueError(
            f"the query matrix must be 2-dimensional with columns, got shape {a.shape}"
        )
    if not np.isfinite(a).all():
        raise ValueError("the query matrix has a non-finite entry")
    return a


def _column_norms(a: NDArray[np.float64], order: float) -> NDArray[np.float64]:
    return np.asarray(np.linalg.norm(a, ord=order, axis=0), dtype=np.float64)


def _max_pair_difference(a: NDArray[np.float64], order: float) -> float:
    n = a.shape[1]
    if n < 2:
        return 0.0
    if order == math.inf:
        return float((a.max(axis=1) - a.min(axis=1)).max())
    if order == 2.0:
        sq = (a * a).sum(axis=0)
        best = 0.0
        for start in range(0, n, _BLOCK):
            blk = a[:, start : start + _BLOCK]
            d2 = sq[start : start + _BLOCK, None] + sq[None, :] - 2.0 * (blk.T @ a)
            best = max(best, float(d2.max()))
        # recompute the winning pairs exactly to avoid cancellation in the Gram form
        return _refine_l2(a, best)
    best = 0.0
    for start in range(0, n, _BLOCK):
        blk = a[:, start : start + _BLOCK]
        diff = np.abs(blk[:, :, None] - a[:, None, :]).sum(axis=0)
        best = max(best, float(diff.max()))
    return best


def _refine_l2(a: NDArray[np.float64], approx_sq: float) -> float:
    n = a.shape[1]
    best = 0.0
    for start in range(0, n, _BLOCK):
        blk = a[:, start : start + _BLOCK]
        d = blk[:, :, None] - a[:, None, :]
        best = max(best, float(np.sqrt((d * d).sum(axis=0)).max()))
    return best if best > 0 else math.sqrt(max(approx_sq, 0.0))


def sensitivity(
    matrix: ArrayLike, norm: NormSpec = 1, neighbours: Neighbours = "add_remove"
) -> float:
    """The ``norm``-sensitivity (1, 2 or ``"inf"``) of the linear query ``x ↦ A x``.

    ``neighbours="add_remove"``: the largest column norm; ``"replace"``: the largest norm
    of a difference of two columns (see the module docstring). Exact for integer matrices
    (L1/L∞ are sums/maxima of integers; L2 is the square root of an exact integer).

    >>> B = [[1, 0, 0, 1, 0, 0], [0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 0, 0]]
    >>> sensitivity(B), sensitivity(B, neighbours="replace")   # course §2.2: Δ = 3
    (3.0, 3.0)
    """
    order = _norm_order(norm)
    a = _as_matrix(matrix)
    if neighbours == "add_remove":
        return float(_column_norms(a, order).max())
    if neighbours == "replace":
        return _max_pair_difference(a, order)
    raise ValueError(f"neighbours must be 'add_remove' or 'replace', got {neighbours!r}")


def partition_guarantee(
    guarantees: list[Guarantee] | tuple[Guarantee, ...], neighbours: Neighbours = "add_remove"
) -> Guarantee:
    """The guarantee of mechanisms run on the disjoint parts of a partition of the records.

    Add/remove-one: a record is in one part — the worst part's guarantee
    (:func:`privtab.accounting.parallel`). Replace-one: a changed record can affect two
    parts — the composition of the two most expensive parts for pure DP and zCDP (2ε when
    all parts are ε-DP, course §2.2), and the 2-fold composition of the worst part
    otherwise.
    """
    gs = list(guarantees)
    if not gs:
        raise ValueError("partition_guarantee needs at least one guarantee")
    if neighbours == "add_remove":
        return parallel(*gs)
    if neighbours != "replace":
        raise ValueError(f"neighbours must be 'add_remove' or 'replace', got {neighbours!r}")
    if len(gs) == 1:
        return gs[0]
    if all(isinstance(g, PureDP) for g in gs):
        top = sorted((g for g in gs if isinstance(g, PureDP)), key=lambda g: g.epsilon)[-2:]
        return compose(*top)
    if all(isinstance(g, ZCDP) for g in gs):
        top2 = sorted((g for g in gs if isinstance(g, ZCDP)), key=lambda g: g.rho)[-2:]
        return compose(*top2)
    return compose_by_degree(parallel(*gs), 2)
