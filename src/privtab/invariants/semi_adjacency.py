"""The semi-adjacent parameter of an invariant (seed Definition 13, Theorem 16, Remark 17).

For invariant-conforming datasets ``D_t`` (see :mod:`privtab.invariants.schema`) and the
Hamming distance ``d``, the semi-adjacent parameter is

    a = sup_{x ∈ D_t} sup_{i} sup_{x̃ ∈ X_t} inf_{x' ∈ D_t : x'_i = x̃} d(x, x'),

where ``X_t`` is the set of records that occur in some conforming dataset: the worst case,
over every record ``x_i`` of every conforming dataset and every record ``x̃`` it could be
replaced by, of the fewest record replacements that restore the invariant.

**Exact computation** (:func:`semi_adjacent_exact`). Count invariants depend on a dataset
only through its histogram, and the fewest replacements between datasets with histograms
``h, h'`` is ``‖h − h'‖₁ / 2`` (a replacement moves one unit of mass between cells). With
record ``i`` pinned to ``x̃ = v`` (and holding ``u`` in ``x``), the rest of the data changes
from ``h − e_u`` to ``h' − e_v``, so

    inf_{x'} d(x, x') = 1 + min_{h' ∈ D_t, h'_v ≥ 1} ‖(h − e_u + e_v) − h'‖₁ / 2   (u ≠ v),

which is the length of the shortest path from ``x`` to ``D_t`` in the graph whose edges
are single-record replacements (breadth-first search over that graph gives the same
number; the ℓ₁ form evaluates it against every conforming histogram at once). The
algorithm enumerates ``D_t`` by depth-first search over cells (pruned by the residual
counts), ``X_t`` as the union of supports, and maximises over ``(h, u, v)``, finding the
nearest conforming histogram with a k-d tree in the ℓ₁ metric (exact on integer points).
Cost: ``|X_t|²`` nearest-neighbour batches of at most ``|D_t|`` queries against at most
``|D_t|`` points in ``ℝ^d`` — worst case ``O(|X_t|² · |D_t|² · d)``, in practice close to
``O(|X_t|² · |D_t| log|D_t| · d)`` (about 1 s for 1,200 and 5 s for 3,200 conforming
histograms of an 18-cell table); memory ``O(|D_t| · d)``. The search stops early when it
reaches a known upper bound (Theorem 16's ``k + 1`` for one-way margins).
``max_datasets`` bounds ``|D_t|``.

**Closed forms** used by :func:`semi_adjacent_parameter` when enumeration is too large:

* one-way margin of one feature: ``a = 2`` if two levels have positive counts, else 0
  (Theorem 16 with k = 1; §6.1 state totals);
* one-way margins of two features (an r × c table with margins ``R, C`` and total ``N``):
  ``a = 3`` iff some cell ``(i, j)`` has ``R_i ≥ 1, C_j ≥ 1`` and ``R_i + C_j ≤ N − 1``,
  else 2 when at least two cells are possible, else 0. Proof: the cover argument of
  Theorem 16 needs a second extra replacement exactly when no other record equals ``v`` on
  both features, i.e. a conforming table with ``h_u ≥ 1`` and ``h_v = 0`` (``u`` differing
  from ``v`` in both features); removing one ``u`` record, a table with one forbidden cell
  exists iff ``R_i + C_j ≤ N − 1`` (Gale's supply–demand theorem). Cross-checked against
  exhaustive search in the tests;
* all cells published (Remark 17): ``a = 2`` if two cells are non-empty, else 0;
* one-way margins of ``k ≥ 3`` features: the bounds ``[2, k + 1]`` of Theorem 16 (the
  exact value needs a multi-way transportation feasibility problem).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privtab._json import Record
from privtab.invariants.schema import CountInvariant, IntArray

__all__ = [
    "SemiAdjacency",
    "conforming_datasets",
    "semi_adjacent_exact",
    "semi_adjacent_parameter",
    "theorem16_bound",
]

DEFAULT_MAX_DATASETS = 2000


class TooManyDatasetsError(RuntimeError):
    """Raised when ``D_t`` has more histograms than the enumeration limit."""


@dataclass(frozen=True)
class SemiAdjacency(Record):
    """The semi-adjacent parameter of an invariant and how it was obtained.

    ``value`` is the parameter to use for accounting: the exact value when ``exact``, else
    the upper bound. ``lower``/``upper`` bracket the true value. ``witness`` (exact
    computation only) is a worst case: the dataset, the record replaced (``u``), its
    replacement (``v``) and the nearest conforming dataset reached.
    """

    value: int
    exact: bool
    lower: int
    upper: int
    method: str
    n_datasets: int | None = None
    witness: dict[str, Any] | None = field(default=None)


def theorem16_bound(k: int) -> int:
    """Theorem 16: with the one-way margins of ``k`` features invariant, ``a ≤ k + 1``."""
    if int(k) != k or k < 1:
        raise ValueError(f"k (number of features) must be a positive integer, got {k!r}")
    return int(k) + 1


def conforming_datasets(inv: CountInvariant, max_datasets: int = DEFAULT_MAX_DATASETS) -> IntArray:
    """All histograms in ``D_t`` as a ``(|D_t|, d)`` array (depth-first search over cells).

    Raises :class:`TooManyDatasetsError` beyond ``max_datasets`` rows.
    """
    a = np.vstack([inv.matrix, np.ones((1, inv.schema.n_cells), dtype=np.int64)])
    t = np.concatenate([inv.values, [inv.n]])
    d = a.shape[1]
    # covered_after[i, q]: does some cell with index ≥ i belong to query q?
    covered_after = np.zeros((d + 1, a.shape[0]), dtype=bool)
    for i in range(d - 1, -1, -1):
        covered_after[i] = covered_after[i + 1] | (a[:, i] == 1)
    cols = [np.flatnonzero(a[:, i]) for i in range(d)]
    out: list[list[int]] = []
    current = [0] * d

    def rec(i: int, resid: IntArray) -> None:
        if np.any((resid > 0) & ~covered_after[i]):
            return
        if i == d:
            out.append(current.copy())
            if len(out) > max_datasets:
                raise TooManyDatasetsError(
                    f"more than {max_datasets} invariant-conforming datasets; raise max_datasets "
                    "or use the closed form / bounds"
                )
            return
        top = int(resid[cols[i]].min()) if cols[i].size else 0
        for v in range(top, -1, -1):
            current[i] = v
            if v:
                resid[cols[i]] -= v
            rec(i + 1, resid)
            if v:
                resid[cols[i]] += v
        current[i] = 0

    rec(0, t.copy())
    return np.array(out, dtype=np.int64).reshape(len(out), d)


def semi_adjacent_exact(
    inv: CountInvariant, max_datasets: int = DEFAULT_MAX_DATASETS
) -> SemiAdjacency:
    """Definition 13 evaluated exactly by enumeration (see the module docstring)."""
    from scipy.spatial import cKDTree  # lazy: scipy.spatial costs ~0.7 s to import

    hs = conforming_datasets(inv, max_datasets)
    m = hs.shape[0]
    if m == 0:
        raise ValueError(
            "no dataset conforms to the invariant: the published counts are inconsistent"
        )
    possible = np.flatnonzero(hs.sum(axis=0) > 0)  # X_t
    best = 0
    witness: dict[str, Any] | None = None
    ceiling = theorem16_bound(inv.schema.k) if inv.kind == "one-way margins" else None
    for v in possible:
        if best == ceiling:
            break
        targets = hs[hs[:, v] >= 1]  # h' with the pinned record v available
        tree = cKDTree(targets.astype(np.float64))
        for u in possible:
            if u == v or best == ceiling:
                continue
            rows = np.flatnonzero(hs[:, u] >= 1)
            if rows.size == 0:
                continue
            g = hs[rows].copy()
            g[:, u] -= 1
            g[:, v] += 1
            # nearest conforming histogram in ℓ₁ (exact: integer points, exact float sums)
            dist, idx_raw = tree.query(g.astype(np.float64), k=1, p=1)
            idx = np.asarray(idx_raw, dtype=np.int64).reshape(-1)
            nearest = np.rint(np.asarray(dist).reshape(-1)).astype(np.int64) // 2
            k = int(np.argmax(nearest))
            val = 1 + int(nearest[k])
            if val > best:
                best = val
                witness = {
                    "dataset": hs[rows[k]].tolist(),
                    "replaced": inv.schema.cell_label(int(u)),
                    "replacement": inv.schema.cell_label(int(v)),
                    "nearest_conforming": targets[int(idx[k])].tolist(),
                    "replacements_needed": val,
                }
    return SemiAdjacency(best, True, best, best, "exhaustive search over D_t", m, witness)


def _margins_two(inv: CountInvariant) -> tuple[IntArray, IntArray]:
    r, c = inv.schema.shape
    return inv.values[:r], inv.values[r : r + c]


def _closed_form(inv: CountInvariant) -> SemiAdjacency | None:
    if inv.kind == "full table":
        nonzero = int(np.count_nonzero(inv.values))
        a = 2 if nonzero >= 2 else 0
        return SemiAdjacency(a, True, a, a, "closed form: all cells published (Remark 17)")
    if inv.kind != "one-way margins":
        return None
    k = inv.schema.k
    if k == 1:
        positive = int(np.count_nonzero(inv.values))
        a = 2 if positive >= 2 else 0
        return SemiAdjacency(
            a, True, a, a, "closed form: one-way margin of one feature (Thm 16, k = 1)"
        )
    if k == 2:
        rows, cols = _margins_two(inv)
        n = inv.n
        pr, pc = rows[rows > 0], cols[cols > 0]
        if pr.size * pc.size <= 1:
            return SemiAdjacency(0, True, 0, 0, "closed form: a single possible record")
        three = bool((pr.min() + pc.min()) <= n - 1)
        a = 3 if three else 2
        return SemiAdjacency(
            a, True, a, a, "closed form: one-way margins of an r × c table (Gale feasibility)"
        )
    return None


def semi_adjacent_parameter(
    inv: CountInvariant, *, max_datasets: int = DEFAULT_MAX_DATASETS, method: str = "auto"
) -> SemiAdjacency:
    """The semi-adjacent parameter of ``inv``: exact where computable, else bounds.

    ``method``: ``"auto"`` (closed form where the seed or this module gives one, else
    exhaustive search up to ``max_datasets`` conforming histograms, else the Theorem-16
    bound), ``"exact"`` (exhaustive search only; raises when too large) or ``"bound"``.
    """
    if method not in ("auto", "exact", "bound"):
        raise ValueError(f"method must be 'auto', 'exact' or 'bound', got {method!r}")
    if method == "exact":
        return semi_adjacent_exact(inv, max_datasets)
    if method == "auto":
        closed = _closed_form(inv)
        if closed is not None:
            return closed
        try:
            return semi_adjacent_exact(inv, max_datasets)
        except TooManyDatasetsError:
            pass
    return _bound(inv)


def _bound(inv: CountInvariant) -> SemiAdjacency:
    if inv.kind == "one-way margins":
        up = theorem16_bound(inv.schema.k)
        lo = 2 if inv.n >= 1 and _possible_cells(inv) >= 2 else 0
        return SemiAdjacency(up, False, lo, up, f"Theorem 16 bound k + 1 with k = {inv.schema.k}")
    if inv.kind == "full table":
        closed = _closed_form(inv)
        assert closed is not None
        return closed
    raise ValueError(
        "this invariant has no closed form or bound and too many conforming datasets to search; "
        "raise max_datasets or give the semi-adjacent parameter explicitly"
    )


def _possible_cells(inv: CountInvariant) -> int:
    """Cells possible under one-way margins: every level of every feature positive."""
    k = inv.schema.k
    counts = 1
    start = 0
    for f in range(k):
        nlev = inv.schema.shape[f]
        counts *= int(np.count_nonzero(inv.values[start : start + nlev]))
        start += nlev
    return counts
