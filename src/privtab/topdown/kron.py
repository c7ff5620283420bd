"""Linear queries over a histogram with Kronecker structure: the measured queries and the
published cells of TopDown, in the form the tree GLS (:mod:`privtab.topdown.gls`) uses.

* :class:`KronQuery` — ``F₁ ⊗ … ⊗ F_k`` (one factor per attribute): a measured query, or
  the rows of an equality constraint. :mod:`privtab.topdown.histogram`'s ``Query`` converts
  with :meth:`KronQuery.of`; a general matrix is the one-attribute case.
* :class:`KronCells` — cells that are each a rank-one row ``r₁ ⊗ … ⊗ r_k`` (every P1–P5
  cell is one: :mod:`privtab.topdown.tables`).

Answers and adjoints are computed axis by axis without building the matrix (identity
factors skipped, summed-out attributes summed).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["KronCells", "KronQuery"]

F64 = npt.NDArray[np.float64]


def _factor(f: Any, what: str) -> F64:
    a = np.asarray(f, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0 or not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: a factor must be a finite non-empty 2-D matrix")
    return a


@dataclass(frozen=True)
class KronQuery:
    """A linear query ``F₁ ⊗ … ⊗ F_k`` over a histogram of shape ``(n₁, …, n_k)`` (C order):
    ``factors[a]`` is ``(m_a, n_a)``. :mod:`privtab.topdown.histogram`'s ``Query`` converts
    with :meth:`of`; a general ``(m, n)`` matrix is :meth:`from_matrix` (one attribute, no
    structure to exploit: use it on small histograms)."""

    name: str
    factors: tuple[F64, ...]

    def __post_init__(self) -> None:
        fs = tuple(_factor(f, f"query {self.name!r}") for f in self.factors)
        if not fs:
            raise ValueError(f"query {self.name!r} has no factors")
        object.__setattr__(self, "factors", fs)

    @classmethod
    def of(cls, query: Any) -> KronQuery:
        """A :class:`KronQuery` from any object with ``name`` and ``factors``."""
        if isinstance(query, KronQuery):
            return query
        return cls(str(query.name), tuple(np.asarray(f) for f in query.factors))

    @classmethod
    def from_matrix(cls, name: str, matrix: Any) -> KronQuery:
        m = matrix.toarray() if hasattr(matrix, "toarray") else matrix
        return cls(name, (np.asarray(m, dtype=np.float64),))

    @property
    def domain(self) -> tuple[int, ...]:
        """The histogram's shape ``(n₁, …, n_k)``."""
        return tuple(int(f.shape[1]) for f in self.factors)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(f.shape[0]) for f in self.factors)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def answer(self, x: F64) -> F64:
        """``F x`` for histograms ``(..., n)``: ``(..., size)``."""
        return _kron_apply(self.factors, x, self.domain)

    def adjoint(self, y: F64) -> F64:
        """``Fᵀ y`` for answers ``(..., size)``: ``(..., n)``."""
        return _kron_apply(tuple(f.T for f in self.factors), y, self.shape)

    @cached_property
    def _pinvs(self) -> tuple[F64, ...]:
        return tuple(_pinv_factor(f) for f in self.factors)

    def min_norm(self, c: F64) -> F64:
        """``F⁺ c``: the least-norm histogram with ``F x = c`` (when ``c`` is consistent)."""
        return _kron_apply(self._pinvs, c, self.shape)

    def grams(self) -> list[F64]:
        """``F_aᵀF_a`` per attribute (the information is their Kronecker product)."""
        return [f.T @ f for f in self.factors]

    def projectors(self) -> list[F64]:
        """The orthogonal projector on each factor's row space (``F_a⁺F_a``)."""
        return [p @ f for p, f in zip(self._pinvs, self.factors, strict=True)]

    def matrix(self) -> F64:
        """The dense ``(size, n)`` matrix (small problems and tests)."""
        m: F64 = np.ones((1, 1))
        for f in self.factors:
            m = np.asarray(np.kron(m, f), dtype=np.float64)
        return m


def _pinv_factor(f: F64) -> F64:
    """``F⁺``: ``Fᵀ(FFᵀ)⁺`` directly when the rows are orthogonal (partitions, selections),
    else by SVD."""
    g = f @ f.T
    d = np.diag(g).copy()
    if np.array_equal(g, np.diag(d)):
        inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), 0.0)
        return np.asarray(f.T * inv[None, :], dtype=np.float64)
    return np.asarray(np.linalg.pinv(f), dtype=np.float64)


def _kron_apply(factors: tuple[F64, ...], x: F64, shape: tuple[int, ...]) -> F64:
    lead = x.shape[:-1]
    if x.shape[-1] != int(np.prod(shape)):
        raise ValueError(f"last axis has {x.shape[-1]} entries, expected {int(np.prod(shape))}")
    t = np.asarray(x, dtype=np.float64).reshape((*lead, *shape))
    k = len(lead)
    for axis, f in enumerate(factors):
        ax = k + axis
        if f.shape[0] == f.shape[1] and np.array_equal(f, np.eye(f.shape[0])):
            continue
        if f.shape[0] == 1 and np.all(f == 1.0):  # summed out
            t = t.sum(axis=ax, keepdims=True)
        elif f.shape[1] == 1 and np.all(f == 1.0):  # copied (the adjoint of a sum)
            t = np.broadcast_to(t, (*t.shape[:ax], f.shape[0], *t.shape[ax + 1 :]))
        else:
            t = np.moveaxis(np.tensordot(t, f, axes=([ax], [1])), -1, ax)
    return np.ascontiguousarray(t).reshape((*lead, -1))


@dataclass(frozen=True)
class KronCells:
    """Output cells, each a rank-one Kronecker row ``r₁ ⊗ … ⊗ r_k``: ``factors[a]`` is
    ``(cells, n_a)`` and cell ``i`` is the product of the ``i``-th rows (P1–P5 cells are all
    of this form: :mod:`privtab.topdown.tables`)."""

    names: tuple[str, ...]
    factors: tuple[F64, ...]

    def __post_init__(self) -> None:
        fs = tuple(_factor(f, "cells") for f in self.factors)
        if any(f.shape[0] != len(self.names) for f in fs):
            raise ValueError("every factor needs one row per cell name")
        object.__setattr__(self, "factors", fs)
        object.__setattr__(self, "names", tuple(self.names))

    @classmethod
    def of_query(cls, query: KronQuery) -> KronCells:
        """Every answer cell of a query, named ``name[i]`` in the query's C order."""
        grids = np.meshgrid(*[np.arange(m) for m in query.shape], indexing="ij")
        idx = [g.ravel() for g in grids]
        names = tuple(f"{query.name}[{i}]" for i in range(query.size))
        return cls(names, tuple(f[i] for f, i in zip(query.factors, idx, strict=True)))

    @property
    def domain(self) -> tuple[int, ...]:
        return tuple(int(f.shape[1]) for f in self.factors)

    def rows(self) -> F64:
        """The dense ``(cells, n)`` matrix."""
        r = np.ones((len(self.names), 1))
        for f in self.factors:
            r = (r[:, :, None] * f[:, None, :]).reshape(len(self.names), -1)
        return r

    def answer(self, x: F64) -> F64:
        """The cells of histograms ``(..., n)``: ``(..., cells)``."""
        return np.asarray(x, dtype=np.float64) @ self.rows().T
