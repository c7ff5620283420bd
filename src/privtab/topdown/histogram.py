"""TopDown's persons histogram and its queries: the 2,016 cells and the marginal matrices.

The 2020 P.L. 94-171 persons histogram (Census DAS, ``schemaconstants``/``pl94`` schema;
``../shared/census-2020/topdown/README.md``) crosses four attributes in C order:

=============  ====  ==============================================================
attribute      size  levels
=============  ====  ==============================================================
``hhgq``        8    0 household; 1 correctional facilities for adults; 2 juvenile
                     facilities; 3 nursing/skilled-nursing; 4 other institutional;
                     5 college/university housing; 6 military quarters; 7 other
                     noninstitutional
``votingage``   2    0 under 18; 1 18 and over
``hispanic``    2    0 not Hispanic; 1 Hispanic
``cenrace``     63   CENRACE 01..63 minus one, in the Census order
=============  ====  ==============================================================

so a geounit's histogram is a vector of 8·2·2·63 = 2,016 non-negative integers, cell
``((hhgq·2 + votingage)·2 + hispanic)·63 + cenrace``.

Every query TopDown measures or rounds is a **Kronecker query**: a matrix
``F_hhgq ⊗ F_votingage ⊗ F_hispanic ⊗ F_cenrace`` with one factor per attribute — the
identity (the attribute is kept), a row of ones (summed out) or a 0/1 recode matrix
(``hhinstlevels``: household / institutional 1–4 / noninstitutional 5–7). Each row of a
factor has exactly one 1 per column (every level of the attribute falls in exactly one
output level), so every query is a partition of the cells into its answer cells: replacing
one person's record changes at most two answers, by −1 and +1 (Δ₂² = 2, the bounded
neighbours of TopDown; README "Privacy").

Queries answer batches of histograms without building matrices (:meth:`Query.answer`:
reshape and sum over axes); :meth:`Query.matrix` gives the sparse matrix for solvers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

__all__ = [
    "ATTRIBUTES",
    "CELLS",
    "HHGQ_LEVELS",
    "MEASURED_QUERIES",
    "ROUNDER_QUERIES",
    "SHAPE",
    "Query",
    "cell_index",
    "query",
]

#: The attributes of the persons histogram, in C order, with their sizes.
ATTRIBUTES: tuple[tuple[str, int], ...] = (
    ("hhgq", 8),
    ("votingage", 2),
    ("hispanic", 2),
    ("cenrace", 63),
)
SHAPE: tuple[int, ...] = tuple(n for _, n in ATTRIBUTES)
CELLS: int = int(np.prod(SHAPE))  # 2,016

#: The names of the eight hhgq levels (household, then the 7 major GQ types).
HHGQ_LEVELS: tuple[str, ...] = (
    "household",
    "correctional facilities for adults",
    "juvenile facilities",
    "nursing facilities/skilled-nursing facilities",
    "other institutional facilities",
    "college/university student housing",
    "military quarters",
    "other noninstitutional facilities",
)

_NAMES = tuple(name for name, _ in ATTRIBUTES)

#: hhinstlevels: 0 household, 1 institutional (hhgq 1–4), 2 noninstitutional (hhgq 5–7).
_HHINST = np.zeros((3, 8), dtype=np.int8)
_HHINST[0, 0] = 1
_HHINST[1, 1:5] = 1
_HHINST[2, 5:8] = 1


@dataclass(frozen=True)
class Query:
    """A Kronecker query over the persons histogram.

    ``factors[a]`` is the 0/1 matrix applied to attribute ``a`` (shape ``(m_a, n_a)``; each
    column holds exactly one 1). The query's matrix is their Kronecker product in C order;
    its answer on a histogram has ``prod(m_a)`` cells. ``name`` is the production name
    (``"hispanic * cenrace"``, ``"detailed"``, …).
    """

    name: str
    factors: tuple[npt.NDArray[np.int8], ...]

    def __post_init__(self) -> None:
        if len(self.factors) != len(SHAPE):
            raise ValueError(f"query {self.name!r}: {len(self.factors)} factors, need {len(SHAPE)}")
        for (attr, n), f in zip(ATTRIBUTES, self.factors, strict=True):
            if f.ndim != 2 or f.shape[1] != n or not np.array_equal(f.sum(axis=0), np.ones(n)):
                raise ValueError(f"query {self.name!r}: factor of {attr} is not a partition")

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of one answer (one entry per attribute)."""
        return tuple(int(f.shape[0]) for f in self.factors)

    @property
    def size(self) -> int:
        """The number of answer cells."""
        return int(np.prod(self.shape))

    def answer(self, hist: npt.NDArray[np.generic]) -> npt.NDArray[np.generic]:
        """The query's answers for histograms ``hist`` of shape ``(..., CELLS)``: shape
        ``(..., size)``, same dtype kind (integers stay exact)."""
        lead = hist.shape[:-1]
        x = hist.reshape((*lead, *SHAPE))
        k = len(lead)
        for axis, f in enumerate(self.factors):
            if f.shape[0] == f.shape[1] and np.array_equal(f, np.eye(f.shape[0], dtype=f.dtype)):
                continue
            if f.shape[0] == 1:
                x = x.sum(axis=k + axis, keepdims=True)
                continue
            x = np.moveaxis(
                np.tensordot(x, f.astype(x.dtype), axes=([k + axis], [1])), -1, k + axis
            )
        return x.reshape((*lead, self.size))

    @cached_property
    def _matrix(self) -> sp.csr_matrix:
        m = sp.csr_matrix(np.ones((1, 1), dtype=np.int8))
        for f in self.factors:
            m = sp.kron(m, sp.csr_matrix(f), format="csr")
        return sp.csr_matrix(m, dtype=np.float64)

    def matrix(self) -> sp.csr_matrix:
        """The query as a sparse ``(size, CELLS)`` 0/1 matrix (float64, cached)."""
        return self._matrix


def _factor(attr: str, kept: Sequence[str]) -> npt.NDArray[np.int8]:
    n = dict(ATTRIBUTES)[attr]
    if attr == "hhgq" and "hhinstlevels" in kept:
        return _HHINST.copy()
    if attr in kept:
        return np.eye(n, dtype=np.int8)
    return np.ones((1, n), dtype=np.int8)


def query(name: str) -> Query:
    """The query named ``name``: ``"total"``, ``"detailed"``, an attribute name,
    ``"hhinstlevels"``, or attribute names joined by ``" * "`` (``"votingage * hispanic"``;
    order does not matter, the answer is always in the histogram's C order)."""
    if name == "total":
        kept: list[str] = []
    elif name == "detailed":
        kept = list(_NAMES)
    else:
        kept = [part.strip() for part in name.split("*")]
        unknown = [k for k in kept if k not in _NAMES and k != "hhinstlevels"]
        if unknown or len(set(kept)) != len(kept) or ("hhgq" in kept and "hhinstlevels" in kept):
            raise ValueError(f"unknown TopDown query {name!r}")
    return Query(name, tuple(_factor(attr, kept) for attr in _NAMES))


#: The queries the 2020 production strategy measures, in the certificates' order.
MEASURED_QUERIES: tuple[str, ...] = (
    "total",
    "cenrace",
    "hispanic",
    "votingage",
    "hhinstlevels",
    "hhgq",
    "hispanic * cenrace",
    "votingage * cenrace",
    "votingage * hispanic",
    "votingage * hispanic * cenrace",
    "detailed",
)

#: The controlled rounder's nested passes (production ``MultipassRounder``), coarse to fine.
ROUNDER_QUERIES: tuple[str, ...] = (
    "total",
    "hhgq",
    "hhgq * hispanic",
    "hhgq * hispanic * cenrace",
    "detailed",
)


def cell_index(hhgq: int, votingage: int, hispanic: int, cenrace: int) -> int:
    """The histogram cell of one person (``cenrace`` 0..62, i.e. CENRACE − 1)."""
    return int(np.ravel_multi_index((hhgq, votingage, hispanic, cenrace), SHAPE))
