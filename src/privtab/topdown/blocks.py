"""Kronecker-structured symmetric matrices as small blocks: the algebra of the tree GLS.

The information matrix of a geounit's measurements is ``Σ_q F_qᵀF_q/v_q`` where every query
``F_q = F_{q,1} ⊗ … ⊗ F_{q,k}`` is a Kronecker product of one small factor per attribute of
the histogram (:mod:`privtab.topdown.histogram`). Every matrix the two-pass GLS forms from
these — sums, products, inverses, pseudo-inverses of informations and covariances, and the
projectors of equality constraints — lies in the tensor product of one small algebra per
attribute, and that algebra is block diagonal in a fixed orthonormal basis. This module
finds the basis and does the matrix arithmetic on the blocks, so a 2,016-cell histogram's
covariance is held as four 16×16 blocks (or sixteen 1×1 ones) instead of a 2016×2016 matrix.

**The per-attribute algebra.** Call levels ``i`` and ``j`` of an attribute *interchangeable*
when every per-attribute matrix the problem uses (each factor's Gram ``FᵀF`` and each
constraint factor's projector) is unchanged by swapping ``i`` and ``j`` (rows and columns).
Swaps generate a group, so interchangeability is an equivalence; its classes ``C₁…C_m``
give the group ``S_{C₁} × … × S_{C_m}``, and every matrix commuting with that group (its
commutant, which contains all the problem's matrices and is closed under products and
inverses) has the form ``M[C_i, C_j] = α_ij J + δ_ij β_i I``. In the orthonormal basis of
``u_i = 1_{C_i}/√|C_i|`` (the *class means*, ``U``) followed by, for each class with two or
more levels, an orthonormal basis of the within-class contrasts (``W_i``, dimension
``|C_i| − 1``), such a matrix is an ``m×m`` matrix on ``U`` and the scalar ``β_i`` on each
``W_i`` (it is the group's isotypic decomposition). For ``cenrace`` with the queries of the
2020 strategy (identity or summed out) ``m = 1``: every matrix is ``αJ + βI``, two numbers.
An attribute whose levels are all told apart (``hhgq`` once a level-specific constraint
is present) gives ``m = n`` and one full ``n×n`` block.

**The product.** Choosing for each attribute either ``U`` or one ``W_i`` gives a
*component*; on it every matrix of the tensor algebra acts as a ``d×d`` matrix (``d`` the
product of the ``m`` of the attributes at ``U``) times the identity of multiplicity ``r``
(the product of the chosen ``W`` dimensions). So a matrix is a tuple of ``d×d`` blocks, a
vector a tuple of ``d×r`` blocks, and the algebra's operations are blockwise; a general
(non-Kronecker) query is the one-attribute case (one block, the dense matrix).

All arrays carry leading batch axes (one entry per geounit) so a level of the tree is one
batched ``numpy`` call. The checks are in ``tests/topdown/test_blocks.py``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import product

import numpy as np
import numpy.typing as npt

__all__ = ["Basis", "Blocks", "VBlocks", "interchangeable_classes"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

#: Relative tolerance of the structure checks (a matrix must lie in the algebra).
_STRUCTURE_TOL = 1e-9


def interchangeable_classes(n: int, matrices: Iterable[F64]) -> list[list[int]]:
    """The classes of levels ``0..n-1`` that every matrix leaves unchanged when swapped
    (see the module docstring), each sorted, ordered by their first level."""
    mats = [np.asarray(m, dtype=np.float64) for m in matrices]
    for m in mats:
        if m.shape != (n, n):
            raise ValueError(f"a per-attribute matrix has shape {m.shape}, expected {(n, n)}")

    def swappable(i: int, j: int) -> bool:
        for m in mats:
            tol = _STRUCTURE_TOL * max(1.0, float(np.abs(m).max(initial=0.0)))
            keep = np.ones(n, dtype=bool)
            keep[[i, j]] = False
            if abs(m[i, i] - m[j, j]) > tol or abs(m[i, j] - m[j, i]) > tol:
                return False
            if np.abs(m[i, keep] - m[j, keep]).max(initial=0.0) > tol:
                return False
            if np.abs(m[keep, i] - m[keep, j]).max(initial=0.0) > tol:
                return False
        return True

    classes: list[list[int]] = []
    for i in range(n):
        for c in classes:
            if swappable(c[0], i):
                c.append(i)
                break
        else:
            classes.append([i])
    return classes


@dataclass(frozen=True)
class _Attribute:
    """One attribute's orthonormal basis: ``q[:, :m]`` the class means, then each
    ``W`` range ``q[:, lo:hi]``."""

    q: F64
    m: int
    w_ranges: tuple[tuple[int, int], ...]

    @classmethod
    def from_classes(cls, n: int, classes: Sequence[Sequence[int]]) -> _Attribute:
        q = np.zeros((n, n))
        for c, levels in enumerate(classes):
            q[list(levels), c] = 1.0 / math.sqrt(len(levels))
        col = len(classes)
        ranges = []
        for levels in classes:
            s = len(levels)
            if s < 2:
                continue
            # an orthonormal basis of the sum-zero vectors on the class (Helmert contrasts)
            h = np.zeros((s, s - 1))
            for k in range(1, s):
                h[:k, k - 1] = 1.0
                h[k, k - 1] = -float(k)
                h[:, k - 1] /= math.sqrt(k * (k + 1))
            q[list(levels), col : col + s - 1] = h
            ranges.append((col, col + s - 1))
            col += s - 1
        return cls(q, len(classes), tuple(ranges))

    @cached_property
    def identity(self) -> bool:
        return bool(np.array_equal(self.q, np.eye(self.q.shape[0])))

    def parts(self) -> list[tuple[int, int] | None]:
        """``None`` for ``U``, then each ``W`` range."""
        return [None, *self.w_ranges]

    def decompose(self, mat: F64) -> tuple[F64, F64]:
        """``(U block, β per W)`` of a matrix in the attribute's algebra (checked)."""
        t = self.q.T @ np.asarray(mat, dtype=np.float64) @ self.q
        scale = max(1.0, float(np.abs(t).max(initial=0.0)))
        expected = np.zeros_like(t)
        m = self.m
        expected[:m, :m] = t[:m, :m]
        betas = np.array([float(np.mean(np.diag(t)[lo:hi])) for lo, hi in self.w_ranges])
        for (lo, hi), b in zip(self.w_ranges, betas, strict=True):
            expected[lo:hi, lo:hi] = b * np.eye(hi - lo)
        if np.abs(t - expected).max(initial=0.0) > _STRUCTURE_TOL * scale:
            raise ValueError("matrix is not in the attribute's algebra (not class-invariant)")
        return t[:m, :m].copy(), betas


@dataclass(frozen=True)
class Component:
    """One block: ``d`` (the block size), ``r`` (its multiplicity) and ``index`` (``d×r``
    positions in the flattened transformed vector)."""

    parts: tuple[int, ...]  # per attribute: 0 for U, i ≥ 1 for the i-th W range
    d: int
    r: int
    index: I64


class Basis:
    """The orthonormal basis ``Q = Q₁ ⊗ … ⊗ Q_k`` of a histogram of shape ``shape`` in which
    every matrix built from the given per-attribute matrices is block diagonal.

    ``attribute_matrices[a]`` lists the per-attribute matrices of attribute ``a`` (the
    factors' Grams and the constraint projectors); the classes are computed from them.
    """

    def __init__(self, shape: Sequence[int], attribute_matrices: Sequence[Iterable[F64]]) -> None:
        self.shape = tuple(int(n) for n in shape)
        if len(attribute_matrices) != len(self.shape):
            raise ValueError("one list of matrices per attribute is needed")
        self.classes = [
            interchangeable_classes(n, mats)
            for n, mats in zip(self.shape, attribute_matrices, strict=True)
        ]
        self.attributes = [
            _Attribute.from_classes(n, c) for n, c in zip(self.shape, self.classes, strict=True)
        ]
        self.size = int(np.prod(self.shape))
        self.components = self._components()

    def _components(self) -> tuple[Component, ...]:
        comps = []
        for choice in product(*(range(len(a.parts())) for a in self.attributes)):
            ranges = []
            for a, c in zip(self.attributes, choice, strict=True):
                part = a.parts()[c]
                ranges.append(range(a.m) if part is None else range(part[0], part[1]))
            grid = np.meshgrid(*[np.asarray(r) for r in ranges], indexing="ij")
            flat = np.ravel_multi_index(tuple(grid), self.shape)
            u_axes = [i for i, c in enumerate(choice) if c == 0]
            w_axes = [i for i, c in enumerate(choice) if c != 0]
            flat = np.transpose(flat, u_axes + w_axes)
            d = int(np.prod([len(ranges[i]) for i in u_axes], dtype=np.int64))
            r = int(np.prod([len(ranges[i]) for i in w_axes], dtype=np.int64))
            if d * r == 0:
                continue
            comps.append(Component(tuple(choice), d, r, flat.reshape(d, r).astype(np.int64)))
        return tuple(comps)

    @cached_property
    def block_sizes(self) -> tuple[int, ...]:
        return tuple(c.d for c in self.components)

    # -- matrices ---------------------------------------------------------------------------
    def kron(self, factors: Sequence[F64]) -> Blocks:
        """The blocks of ``M₁ ⊗ … ⊗ M_k`` (each ``M_a`` in attribute ``a``'s algebra)."""
        parts = [a.decompose(m) for a, m in zip(self.attributes, factors, strict=True)]
        out = []
        for comp in self.components:
            block: F64 = np.ones((1, 1))
            for (u, betas), c in zip(parts, comp.parts, strict=True):
                block = np.asarray(np.kron(block, u) if c == 0 else block * betas[c - 1])
            out.append(block)
        return Blocks(tuple(out))

    def from_dense(self, mat: F64) -> Blocks:
        """The blocks of a dense ``(size, size)`` matrix of the algebra (checked: its part
        outside the blocks must vanish). For tests and small problems."""
        t = self.transform(np.asarray(mat, dtype=np.float64))  # Qᵀ M (rows)
        t = self.transform(t.T.copy()).T  # … Q
        out = []
        rebuilt = np.zeros_like(t)
        for comp in self.components:
            idx = comp.index
            block = t[np.ix_(idx[:, 0], idx[:, 0])]
            out.append(block.copy())
            for k in range(comp.r):
                rebuilt[np.ix_(idx[:, k], idx[:, k])] = block
        scale = max(1.0, float(np.abs(t).max(initial=0.0)))
        if np.abs(t - rebuilt).max(initial=0.0) > _STRUCTURE_TOL * scale:
            raise ValueError("matrix is not in the basis's algebra")
        return Blocks(tuple(out))

    def to_dense(self, blocks: Blocks) -> F64:
        """The dense ``(size, size)`` matrix of unbatched blocks (tests, small problems)."""
        t = np.zeros((self.size, self.size))
        for comp, block in zip(self.components, blocks.arrays, strict=True):
            for k in range(comp.r):
                t[np.ix_(comp.index[:, k], comp.index[:, k])] = block
        q = self.dense_q()
        return np.asarray(q @ t @ q.T, dtype=np.float64)

    def dense_q(self) -> F64:
        q: F64 = np.ones((1, 1))
        for a in self.attributes:
            q = np.asarray(np.kron(q, a.q), dtype=np.float64)
        return q

    # -- vectors ----------------------------------------------------------------------------
    def transform(self, x: F64) -> F64:
        """``Qᵀx`` along the last axis (``(..., size)``)."""
        return self._apply(x, transpose=True)

    def untransform(self, z: F64) -> F64:
        """``Qz`` along the last axis."""
        return self._apply(z, transpose=False)

    def _apply(self, x: F64, *, transpose: bool) -> F64:
        lead = x.shape[:-1]
        t = x.reshape((*lead, *self.shape))
        k = len(lead)
        for axis, a in enumerate(self.attributes):
            if a.identity:
                continue
            q = a.q if transpose else a.q.T
            t = np.moveaxis(np.moveaxis(t, k + axis, -1) @ q, -1, k + axis)
        return np.ascontiguousarray(t).reshape((*lead, self.size))

    def to_blocks(self, x: F64) -> VBlocks:
        """Vectors ``x`` of shape ``(N, R, size)`` as blocks ``(N, d, R·r)`` (R-major)."""
        z = self.transform(x)
        n, reps = z.shape[0], z.shape[1]
        out = []
        for comp in self.components:
            zk = z[:, :, comp.index]  # (N, R, d, r)
            out.append(np.ascontiguousarray(zk.transpose(0, 2, 1, 3)).reshape(n, comp.d, -1))
        return VBlocks(tuple(out), reps)

    def from_blocks(self, v: VBlocks) -> F64:
        """The inverse of :meth:`to_blocks`: ``(N, R, size)``."""
        n = v.arrays[0].shape[0] if v.arrays else 0
        z = np.zeros((n, v.reps, self.size))
        for comp, arr in zip(self.components, v.arrays, strict=True):
            zk = arr.reshape(n, comp.d, v.reps, comp.r).transpose(0, 2, 1, 3)
            z[:, :, comp.index] = zk
        return self.untransform(z)

    def row_grams(self, rows: F64) -> F64:
        """For each row ``c`` of ``rows`` (``(k, size)``), the blocks of ``ccᵀ`` projected on
        the algebra, flattened: ``(k, Σd²)``. Then ``cᵀVc = grams @ V.flat()`` for any
        ``V`` of the algebra."""
        t = self.transform(np.asarray(rows, dtype=np.float64))
        out = []
        for comp in self.components:
            tk = t[:, comp.index]  # (k, d, r)
            out.append(np.einsum("kir,kjr->kij", tk, tk).reshape(t.shape[0], -1))
        return np.concatenate(out, axis=1) if out else np.zeros((t.shape[0], 0))


@dataclass(frozen=True)
class Blocks:
    """A (batched) matrix of the algebra: one ``(..., d, d)`` array per component."""

    arrays: tuple[F64, ...]

    def __add__(self, other: Blocks) -> Blocks:
        return Blocks(tuple(a + b for a, b in zip(self.arrays, other.arrays, strict=True)))

    def __sub__(self, other: Blocks) -> Blocks:
        return Blocks(tuple(a - b for a, b in zip(self.arrays, other.arrays, strict=True)))

    def __matmul__(self, other: Blocks) -> Blocks:
        return Blocks(tuple(a @ b for a, b in zip(self.arrays, other.arrays, strict=True)))

    def apply(self, v: VBlocks) -> VBlocks:
        """The matrix times vectors."""
        return VBlocks(
            tuple(a @ np.ascontiguousarray(b) for a, b in zip(self.arrays, v.arrays, strict=True)),
            v.reps,
        )

    def scaled(self, w: F64) -> Blocks:
        """Each batch entry times ``w`` (shape = the batch shape)."""
        return Blocks(tuple(a * w[..., None, None] for a in self.arrays))

    def t(self) -> Blocks:
        return Blocks(tuple(np.swapaxes(a, -1, -2) for a in self.arrays))

    def sym(self) -> Blocks:
        return Blocks(tuple(0.5 * (a + np.swapaxes(a, -1, -2)) for a in self.arrays))

    def take(self, idx: I64) -> Blocks:
        return Blocks(tuple(a[idx] for a in self.arrays))

    def put(self, idx: I64, values: Blocks) -> None:
        for a, b in zip(self.arrays, values.arrays, strict=True):
            a[idx] = b

    def copy(self) -> Blocks:
        return Blocks(tuple(a.copy() for a in self.arrays))

    def flat(self) -> F64:
        """``(..., Σd²)``: the blocks flattened (see :meth:`Basis.row_grams`)."""
        lead = self.arrays[0].shape[:-2]
        return np.concatenate([a.reshape((*lead, -1)) for a in self.arrays], axis=-1)

    def broadcast(self, n: int) -> Blocks:
        """Unbatched blocks repeated for ``n`` batch entries."""
        return Blocks(tuple(np.broadcast_to(a, (n, *a.shape)).copy() for a in self.arrays))

    @staticmethod
    def zeros(n: int, sizes: Sequence[int]) -> Blocks:
        return Blocks(tuple(np.zeros((n, d, d)) for d in sizes))

    @staticmethod
    def identity(n: int, sizes: Sequence[int]) -> Blocks:
        return Blocks(tuple(np.broadcast_to(np.eye(d), (n, d, d)).copy() for d in sizes))

    def segment_sum(self, starts: I64, owners: I64, n: int) -> Blocks:
        """Sums of contiguous runs of batch entries: the run starting at ``starts[i]`` (up to
        the next start) goes to entry ``owners[i]`` of ``n`` (others are zero)."""
        return Blocks(tuple(_segment_sum(a, starts, owners, n) for a in self.arrays))

    def solve(self, rhs: Blocks, vec: VBlocks) -> tuple[Blocks, VBlocks]:
        """``(M⁻¹ rhs, M⁻¹ vec)`` for invertible (batched) ``M = self``."""
        mats, vecs = [], []
        for a, b, v in zip(self.arrays, rhs.arrays, vec.arrays, strict=True):
            d = a.shape[-1]
            sol = np.linalg.solve(a, np.concatenate([b, v], axis=-1))
            mats.append(np.ascontiguousarray(sol[..., :d]))
            vecs.append(np.ascontiguousarray(sol[..., d:]))
        return Blocks(tuple(mats)), VBlocks(tuple(vecs), vec.reps)

    def eigh_inverse(self, *, pseudo: bool, rtol: float) -> tuple[Blocks, npt.NDArray[np.bool_]]:
        """The (pseudo-)inverse of symmetric PSD matrices by eigendecomposition, and per
        batch entry whether it is nonsingular (all eigenvalues above ``rtol`` times the
        entry's largest over all blocks). ``pseudo=False`` inverts the nonsingular entries
        and leaves zeros for the others."""
        eigs = [np.linalg.eigh(a) for a in self.arrays]
        lead = self.arrays[0].shape[:-2]
        top = np.zeros(lead)
        for w, _ in eigs:
            top = np.maximum(top, np.abs(w).max(axis=-1, initial=0.0))
        cut = rtol * top
        regular = np.ones(lead, dtype=bool)
        out = []
        for w, v in eigs:
            keep = w > cut[..., None]
            regular &= keep.all(axis=-1)
            inv_w = np.where(keep, 1.0 / np.where(keep, w, 1.0), 0.0)
            out.append((v * inv_w[..., None, :]) @ np.swapaxes(v, -1, -2))
        if not pseudo:
            out = [np.where(regular[..., None, None], a, 0.0) for a in out]
        return Blocks(tuple(out)), regular


@dataclass(frozen=True)
class VBlocks:
    """(Batched) vectors of the algebra: one ``(N, d, R·r)`` array per component (``R``
    replicate vectors per batch entry)."""

    arrays: tuple[F64, ...]
    reps: int

    def __add__(self, other: VBlocks) -> VBlocks:
        return VBlocks(
            tuple(a + b for a, b in zip(self.arrays, other.arrays, strict=True)), self.reps
        )

    def __sub__(self, other: VBlocks) -> VBlocks:
        return VBlocks(
            tuple(a - b for a, b in zip(self.arrays, other.arrays, strict=True)), self.reps
        )

    def take(self, idx: I64) -> VBlocks:
        return VBlocks(tuple(a[idx] for a in self.arrays), self.reps)

    def put(self, idx: I64, values: VBlocks) -> None:
        for a, b in zip(self.arrays, values.arrays, strict=True):
            a[idx] = b

    def segment_sum(self, starts: I64, owners: I64, n: int) -> VBlocks:
        """See :meth:`Blocks.segment_sum`."""
        return VBlocks(tuple(_segment_sum(a, starts, owners, n) for a in self.arrays), self.reps)


def _segment_sum(a: F64, starts: I64, owners: I64, n: int) -> F64:
    out = np.zeros((n, *a.shape[1:]))
    if starts.size:
        out[owners] = np.add.reduceat(a, starts, axis=0)
    return out
