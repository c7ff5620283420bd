"""Sensitivity spaces of a contingency table whose one-way margins are invariant.

Seed §5.1, Prop. 32, Examples 7–8. For an r × c table ``x`` (vectorised row-major) with
its row and column sums published, the Semi-DP sensitivity space is

    S = {q(x) − q(x') : x, x' ∈ D_t, d(x, x') ≤ a},   a = 3 (Example 5, Thm 16 with k = 2),

the differences of tables with equal margins that are at most ``a`` record replacements
apart: integer r × c matrices with zero row and column sums whose positive part has total
mass ≤ a. Prop. 32 lists the matrices ``D_{(i,i'),(j,j')}`` (+1 at (i,j) and (i',j'), −1 at
(i,j') and (i',j)), mass 2. **For r, c ≥ 3 that list is incomplete**: a *3-cycle* such as
``e₁₁ + e₂₂ + e₃₃ − e₁₂ − e₂₃ − e₃₁`` also preserves the margins and is 3 replacements
(e.g. the tables ``diag(1,1,1)`` and a cyclic permutation matrix, both with all margins
1); its ℓ₁/ℓ₂ norms are 6/√6 against 4/2 for ``D``. Every element of mass ≤ 3 uses at
most three rows and three columns, so ``S`` is exactly the ``D`` matrices and (when
``min(r, c) ≥ 3``) the 3-cycles — what :func:`table_sensitivity_space` returns by default.
``paper=True`` returns Prop. 32's list (for reproducing the seed; it under-calibrates noise
for r, c ≥ 3). For 2 × c tables both coincide.

The span of ``S`` is the space of matrices with zero margins, of dimension
``(r − 1)(c − 1)``; its orthogonal projection is ``P = (I_r − J_r/r) ⊗ (I_c − J_c/c)``
(Example 8 for 2 × 2) and :func:`orthonormal_basis` gives an orthonormal basis.

The *naive* alternative ignores the invariant: replace-one neighbours change a table by
``e_i − e_j`` (ℓ₁, ℓ₂, ℓ∞ sensitivities 2, √2, 1) and group privacy over ``a`` replacements
inflates them by ``a`` (seed §5.2).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np
from numpy.typing import NDArray

from privtab.invariants.schema import IntArray

FloatArray = NDArray[np.float64]

__all__ = [
    "TableSpace",
    "naive_sensitivities",
    "orthonormal_basis",
    "projection_matrix",
    "table_sensitivity_space",
    "zero_margin_moves",
]


def _check_shape(r: int, c: int) -> tuple[int, int]:
    for name, v in (("r", r), ("c", c)):
        if isinstance(v, bool) or int(v) != v or v < 1:
            raise ValueError(f"{name} (table dimension) must be a positive integer, got {v!r}")
    return int(r), int(c)


@lru_cache(maxsize=64)
def _patterns(kr: int, kc: int, mass: int) -> tuple[tuple[int, ...], ...]:
    """Zero-margin integer kr × kc patterns of positive mass ``mass`` using every row/column."""
    cells = range(kr * kc)
    found: set[tuple[int, ...]] = set()
    for pos in itertools.combinations_with_replacement(cells, mass):
        rows_p = sorted(p // kc for p in pos)
        cols_p = sorted(p % kc for p in pos)
        for neg in itertools.combinations_with_replacement(cells, mass):
            if set(pos) & set(neg):
                continue
            if sorted(q // kc for q in neg) != rows_p or sorted(q % kc for q in neg) != cols_p:
                continue
            v = [0] * (kr * kc)
            for p in pos:
                v[p] += 1
            for q in neg:
                v[q] -= 1
            m = np.array(v).reshape(kr, kc)
            if np.all(np.any(m != 0, axis=1)) and np.all(np.any(m != 0, axis=0)):
                found.add(tuple(v))
    return tuple(sorted(found))


def zero_margin_moves(r: int, c: int, max_mass: int) -> IntArray:
    """All non-zero integer r × c matrices (rows of the result, vectorised row-major) with
    zero row and column sums and positive mass (sum of positive entries) ≤ ``max_mass``.

    These are the differences of two tables with equal margins that are at most
    ``max_mass`` record replacements apart. ``max_mass ≤ 4`` (enumeration cost).
    """
    r, c = _check_shape(r, c)
    if int(max_mass) != max_mass or not 0 <= max_mass <= 4:
        raise ValueError(f"max_mass must be an integer in [0, 4], got {max_mass!r}")
    out: list[NDArray[np.int64]] = []
    for mass in range(2, int(max_mass) + 1):
        for kr in range(2, min(r, mass) + 1):
            for kc in range(2, min(c, mass) + 1):
                pats = _patterns(kr, kc, mass)
                if not pats:
                    continue
                parr = np.array(pats, dtype=np.int64).reshape(len(pats), kr, kc)
                for rows in itertools.combinations(range(r), kr):
                    for cols in itertools.combinations(range(c), kc):
                        block = np.zeros((len(pats), r, c), dtype=np.int64)
                        block[:, np.array(rows)[:, None], np.array(cols)[None, :]] = parr
                        out.append(block.reshape(len(pats), r * c))
    if not out:
        return np.zeros((0, r * c), dtype=np.int64)
    return np.unique(np.vstack(out), axis=0)


def table_sensitivity_space(r: int, c: int, a: int = 3, *, paper: bool = False) -> IntArray:
    """The non-zero elements of the Semi-DP sensitivity space (rows, row-major).

    ``a`` is the semi-adjacent parameter (3 for one-way margins, Example 5). ``paper=True``
    gives Prop. 32's ``D`` matrices only (see the module docstring).
    """
    r, c = _check_shape(r, c)
    if int(a) != a or a < 0:
        raise ValueError(f"a must be a non-negative integer, got {a!r}")
    if paper:
        return zero_margin_moves(r, c, min(int(a), 2))
    return zero_margin_moves(r, c, min(int(a), 4))


def projection_matrix(r: int, c: int) -> FloatArray:
    """Orthogonal projection onto the zero-margin matrices: ``(I − J/r) ⊗ (I − J/c)``."""
    r, c = _check_shape(r, c)
    pr = np.eye(r) - np.full((r, r), 1.0 / r)
    pc = np.eye(c) - np.full((c, c), 1.0 / c)
    return np.asarray(np.kron(pr, pc), dtype=np.float64)


def _helmert(n: int) -> FloatArray:
    """An n × (n−1) orthonormal basis of the vectors with zero sum (Helmert contrasts)."""
    h = np.zeros((n, n - 1))
    for j in range(1, n):
        h[:j, j - 1] = 1.0
        h[j, j - 1] = -float(j)
        h[:, j - 1] /= math.sqrt(j * (j + 1))
    return h


def orthonormal_basis(r: int, c: int) -> FloatArray:
    """An orthonormal basis (columns, ``rc × (r−1)(c−1)``) of the zero-margin matrices.

    The Kronecker product of Helmert contrasts; ``B Bᵀ`` is :func:`projection_matrix`.
    For 2 × 2 it is ``(1, −1, −1, 1)/2`` (Example 8).
    """
    r, c = _check_shape(r, c)
    if r < 2 or c < 2:
        return np.zeros((r * c, 0))
    return np.asarray(np.kron(_helmert(r), _helmert(c)), dtype=np.float64)


def naive_sensitivities(a: int = 3) -> dict[str, float]:
    """Replace-one sensitivities of a histogram (ℓ₁ 2, ℓ₂ √2, ℓ∞ 1) inflated by ``a``."""
    return {"l1": 2.0 * a, "l2": math.sqrt(2.0) * a, "linf": 1.0 * a}


@dataclass(frozen=True)
class TableSpace:
    """Sensitivity space, span and norms for an r × c table with invariant margins."""

    r: int
    c: int
    a: int = 3
    paper: bool = False

    def __post_init__(self) -> None:
        _check_shape(self.r, self.c)

    @cached_property
    def elements(self) -> IntArray:
        return table_sensitivity_space(self.r, self.c, self.a, paper=self.paper)

    @cached_property
    def dim(self) -> int:
        """Dimension of the span: ``(r − 1)(c − 1)`` (0 when nothing can change)."""
        return (self.r - 1) * (self.c - 1) if self.elements.shape[0] else 0

    @cached_property
    def basis(self) -> FloatArray:
        return orthonormal_basis(self.r, self.c) if self.dim else np.zeros((self.r * self.c, 0))

    @property
    def projection(self) -> FloatArray:
        return projection_matrix(self.r, self.c) if self.dim else np.zeros((self.r * self.c,) * 2)

    @lru_cache(maxsize=8)  # noqa: B019 (instances are few, immutable and hashable)
    def sensitivity(self, norm: str = "l2") -> float:
        """Largest norm of an element of the space (``"l1"``, ``"l2"`` or ``"linf"``)."""
        s = self.elements.astype(np.float64)
        if s.shape[0] == 0:
            return 0.0
        if norm == "l1":
            return float(np.abs(s).sum(axis=1).max())
        if norm == "l2":
            return float(np.sqrt((s * s).sum(axis=1)).max())
        if norm == "linf":
            return float(np.abs(s).max())
        raise ValueError(f"norm must be 'l1', 'l2' or 'linf', got {norm!r}")
