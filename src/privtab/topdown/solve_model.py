"""Internal: one per-parent problem prepared for the solvers (masked cells, terms, bands).

:func:`prepare` turns a :class:`~privtab.topdown.solve.ChildrenProblem` into a
:class:`Model`: the cells that carry variables (positive in the parent and not structurally
zero; every non-structural cell at the root), the cells each child may use (a child whose
upper bound for hhgq ``t`` is 0 gets no variables there), the children's bounds, and for
every query an index map — the answer cell of each masked cell. Every query is a partition
of the cells (:mod:`privtab.topdown.histogram`), so ``Q x`` is a ``bincount`` over that map,
``Qᵀ y`` a gather, and the Hessian ``Σ w QᵀQ`` is ``Σ w [index(c) = index(c')]``: nothing
is built cell by cell in Python.

It also holds the checks every problem goes through: the infeasibility tests that name the
violated constraints (:func:`check_feasible`) and the runtime checks of every L2 and
rounded solution (:func:`check_solution`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from privtab.topdown.histogram import CELLS, HHGQ_LEVELS
from privtab.topdown.schema import schema

__all__: list[str] = []

#: hhgq levels (the groups of the persons histogram's GQ bounds).
GROUPS = len(HHGQ_LEVELS)
#: cells per hhgq level (hhgq is the leading attribute: groups are contiguous).
GROUP_CELLS = CELLS // GROUPS


@dataclass(frozen=True)
class Layout:
    """How the solver sees a protected histogram (:mod:`privtab.topdown.schema`): its
    ``cells`` and the contiguous groups of cells the per-child bounds apply to —
    persons: the eight hhgq levels (``group_query`` ``hhgq``); units: one group, the
    whole histogram, without bounds (``total``)."""

    histogram: str
    cells: int
    group_names: tuple[str, ...]
    group_query: str

    @property
    def groups(self) -> int:
        return len(self.group_names)

    @property
    def group_cells(self) -> int:
        return self.cells // self.groups


@cache
def layout(histogram: str = "persons") -> Layout:
    """The :class:`Layout` of ``"persons"`` or ``"units"``."""
    if histogram == "persons":
        return Layout("persons", CELLS, HHGQ_LEVELS, "hhgq")
    sch = schema(histogram)
    return Layout(sch.name, sch.cells, ("all",), "total")


_S = TypeVar("_S", bound=np.generic)
F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
IDX = NDArray[np.intp]
BOOL = NDArray[np.bool_]


class TopDownInfeasibleError(Exception):
    """A per-parent problem has no solution: names the geounit and the violated constraints.

    ``geounit`` is the parent's id, ``violations`` one line per violated constraint. Raised
    before any solver runs when a necessary condition fails, and when a solver proves the
    problem infeasible — never replaced by a relaxed solve.
    """

    def __init__(self, geounit: str, violations: Sequence[str]) -> None:
        self.geounit = geounit
        self.violations = tuple(violations)
        lines = "; ".join(self.violations)
        super().__init__(f"TopDown problem of geounit {geounit!r} is infeasible: {lines}")

    def __reduce__(self) -> tuple[type[TopDownInfeasibleError], tuple[str, tuple[str, ...]]]:
        # raised in a worker process (``--workers``): pickled with its own fields
        return (type(self), (self.geounit, self.violations))


class TopDownSolverError(RuntimeError):
    """A solver returned something the runtime checks refuse (not optimal, a constraint
    violated, a non-integral rounding, two solvers disagreeing): a bug or a numerical
    failure, never a property of the data. Names the geounit."""


@cache
def answer_index(name: str, histogram: str = "persons") -> IDX:
    """The answer cell of every histogram cell under query ``name`` (``(cells,)``): every
    query partitions the cells, so it is the row holding the column's one 1."""
    m = schema(histogram).query(name).matrix().tocsc()
    idx = np.asarray(m.indices, dtype=np.intp)
    if idx.size != m.shape[1] or not np.array_equal(np.diff(m.indptr), np.ones(m.shape[1])):
        raise ValueError(f"query {name!r} is not a partition of the {histogram} cells")
    idx.setflags(write=False)
    return idx


@cache
def query_size(name: str, histogram: str = "persons") -> int:
    """The number of answer cells of query ``name`` (cached)."""
    return int(schema(histogram).query(name).size)


def refines(fine: str, coarse: str, histogram: str = "persons") -> bool:
    """Whether every answer cell of query ``fine`` lies inside one answer cell of ``coarse``."""
    f, c = answer_index(fine, histogram), answer_index(coarse, histogram)
    first = np.full(int(f.max()) + 1, -1, dtype=np.intp)
    first[f] = c
    return bool(np.array_equal(first[f], c))


@dataclass(frozen=True)
class Term:
    """One query's least-squares term ``w ‖Q xᵢ − yᵢ‖²`` on the masked cells."""

    name: str
    index: IDX  # (n,) answer cell of each masked cell
    size: int
    weight: float
    answers: F64  # (k, size)
    scale: F64 | None = None  # (k,) per-child factor of the weight (children's σ² differ)

    def child_weights(self, k: int) -> F64:
        """Each child's weight ``weight · scale[i]`` (``(k,)``)."""
        base = np.full(k, self.weight)
        return base if self.scale is None else base * self.scale

    def apply(self, x: F64) -> F64:
        """``Q xᵢ`` for every child: ``(k, n) → (k, size)`` (:func:`apply`; an injective
        term scatters, ``x + 0.0`` as the sum from 0 that ``bincount`` makes)."""
        k = x.shape[0]
        if self.injective:
            out = np.zeros((k, self.size))
            out[:, self.index] = x + 0.0
            return out
        flat: IDX | None = self.__dict__.get("_flat")
        if flat is None or flat.size != k * self.index.size:
            flat = (np.arange(k)[:, None] * self.size + self.index[None, :]).ravel()
            object.__setattr__(self, "_flat", flat)
        got = np.bincount(flat, weights=x.ravel(), minlength=k * self.size)
        return np.asarray(got.reshape(k, self.size), dtype=np.float64)

    @property
    def injective(self) -> bool:
        """Whether every masked cell is its own answer (``detailed``): the term is then
        ``w ‖x − y‖²`` and makes the pass strictly convex (computed once)."""
        got = self.__dict__.get("_injective")
        if got is None:
            got = bool(np.unique(self.index).size == self.index.size)
            object.__setattr__(self, "_injective", got)
        return bool(got)


@dataclass(frozen=True)
class Band:
    """``lo ≤ Q xᵢ ≤ hi`` for every child and answer (the inter-pass tolerance)."""

    name: str
    index: IDX
    size: int
    lo: F64  # (k, size)
    hi: F64


def compact(labels: IDX) -> tuple[IDX, IDX]:
    """``(present, inverse)`` of non-negative integer ``labels`` — what
    ``np.unique(labels, return_inverse=True)`` gives, by counting instead of sorting."""
    if not labels.size:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    seen = np.bincount(labels) > 0
    present = np.flatnonzero(seen).astype(np.intp)
    rank = np.cumsum(seen) - 1
    return present, rank[labels].astype(np.intp)


def apply(index: IDX, size: int, x: F64) -> F64:
    """``Q x`` for a partition query given by its index map: ``(k, n) → (k, size)``."""
    k = x.shape[0]
    flat = (np.arange(k)[:, None] * size + index[None, :]).ravel()
    out = np.bincount(flat, weights=x.ravel(), minlength=k * size).reshape(k, size)
    return np.asarray(out, dtype=np.float64)


@dataclass(frozen=True)
class Model:
    """A problem's data shared by all its passes. ``cells`` are the masked cells (ascending,
    so hhgq-contiguous), ``allowed[i, j]`` whether child ``i`` has a variable in cell
    ``cells[j]``, ``parent`` the parent's counts there (``None`` at the root), ``lo``/``hi``
    the bounds on each child's persons by hhgq (0 and ``inf`` where none), and
    ``total_group``/``group_total`` the exact totals (child → group, −1 for none);
    ``histogram`` the protected histogram (:func:`layout`)."""

    geounit: str
    children: tuple[str, ...]
    cells: IDX
    hhgq: IDX
    allowed: BOOL
    parent: F64 | None
    lo: F64
    hi: F64
    total_group: IDX
    group_total: F64
    histogram: str = "persons"

    @property
    def layout(self) -> Layout:
        return layout(self.histogram)

    @property
    def k(self) -> int:
        return len(self.children)

    @property
    def n(self) -> int:
        return int(self.cells.size)

    @property
    def scale(self) -> float:
        """The size of the numbers (the parent's largest cell, else the largest exact
        total; at least 1): tolerances of the L2 checks are relative to it."""
        if self.parent is not None:
            return max(1.0, float(self.parent.max(initial=0)))
        return max(1.0, float(self.group_total.max(initial=0)))

    @property
    def group_starts(self) -> IDX:
        """``starts[g]:starts[g+1]`` are the masked cells of hhgq ``g`` (bound group ``g``;
        computed once)."""
        got: IDX | None = self.__dict__.get("_group_starts")
        if got is None:
            lay = self.layout
            bounds = np.arange(lay.groups + 1) * lay.group_cells
            got = np.searchsorted(self.cells, bounds).astype(np.intp)
            object.__setattr__(self, "_group_starts", got)
        return got

    def term(self, name: str, weight: float, answers: F64, scale: F64 | None = None) -> Term:
        """The term of query ``name``: ``weight`` ``1/σ²`` (times ``scale[i]`` for child
        ``i`` when the children's variances differ)."""
        idx = answer_index(name, self.histogram)
        return Term(name, idx[self.cells], query_size(name, self.histogram), weight, answers, scale)

    def group_sums(self, x: F64) -> F64:
        """Persons of each child by hhgq (bound group): ``(k, n) → (k, groups)``."""
        c = np.concatenate([np.zeros((x.shape[0], 1)), np.cumsum(x, axis=1)], axis=1)
        s = self.group_starts
        return np.asarray(c[:, s[1:]] - c[:, s[:-1]], dtype=np.float64)

    def full(self, x: NDArray[_S]) -> NDArray[_S]:
        """The children's full histograms ``(k, cells)`` from masked values ``(k, n)``."""
        out = np.zeros((x.shape[0], self.layout.cells), dtype=x.dtype)
        out[:, self.cells] = x
        return out


def prepare(
    geounit: str,
    children: Sequence[str],
    parent: I64 | None,
    gq_lower: I64,
    gq_upper: I64,
    structural_zeros: BOOL,
    total_group: IDX,
    group_total: I64,
    histogram: str = "persons",
) -> Model:
    """The masked model of a problem (inputs already validated for shape)."""
    k = len(children)
    free = ~structural_zeros
    cells = np.flatnonzero(free if parent is None else (parent > 0) & free).astype(np.intp)
    hhgq = (cells // layout(histogram).group_cells).astype(np.intp)
    hi = np.where(gq_upper < 0, np.inf, gq_upper).astype(np.float64)
    allowed = np.broadcast_to((hi != 0)[:, hhgq], (k, cells.size)).copy()
    return Model(
        geounit=geounit,
        children=tuple(children),
        cells=cells,
        hhgq=hhgq,
        allowed=allowed,
        parent=None if parent is None else parent[cells].astype(np.float64),
        lo=np.maximum(gq_lower, 0).astype(np.float64),
        hi=hi,
        total_group=total_group,
        group_total=group_total.astype(np.float64),
        histogram=histogram,
    )


def check_feasible(
    model: Model, parent: I64 | None, structural_zeros: BOOL, gq_lower: I64, gq_upper: I64
) -> None:
    """Raise :class:`TopDownInfeasibleError` naming every violated necessary condition.

    Without exact totals of groups of several children these conditions are also sufficient
    (per hhgq the children's shares form a transportation problem with bounds); with them a
    solver's infeasibility verdict is reported the same way (:func:`infeasible_by_solver`).
    """
    bad: list[str] = []
    names = model.children
    if parent is not None:
        sz = np.flatnonzero(structural_zeros & (parent != 0))
        if sz.size:
            bad.append(
                f"the parent has persons in {sz.size} structurally zero cell(s) "
                f"(e.g. cell {int(sz[0])}: {int(parent[sz[0]])})"
            )
    for i, g in zip(*np.nonzero((gq_upper >= 0) & (gq_lower > gq_upper)), strict=True):
        bad.append(
            f"child {names[i]!r}: lower bound {int(gq_lower[i, g])} on hhgq {g} exceeds its "
            f"upper bound {int(gq_upper[i, g])}"
        )
    if parent is not None:
        lay = model.layout
        shape = (lay.groups, lay.group_cells)
        p = np.asarray(parent, dtype=np.int64).reshape(shape)
        p = np.where(structural_zeros.reshape(shape), 0, p).sum(axis=1)
        lo = np.maximum(gq_lower, 0).sum(axis=0)
        up = np.where(gq_upper < 0, np.inf, gq_upper.astype(np.float64)).sum(axis=0)
        what = lay.group_query
        for g in range(lay.groups):
            if lo[g] > p[g]:
                bad.append(
                    f"lower bounds of the children on {what} {g} ({lay.group_names[g]}) sum "
                    f"to {int(lo[g])} > the parent's {int(p[g])}"
                )
            if up[g] < p[g]:
                bad.append(
                    f"upper bounds of the children on {what} {g} ({lay.group_names[g]}) sum "
                    f"to {up[g]:.0f} < the parent's {int(p[g])}"
                )
    bad += _total_violations(model, parent)
    if bad:
        raise TopDownInfeasibleError(model.geounit, bad)


def _total_violations(model: Model, parent: I64 | None) -> list[str]:
    bad: list[str] = []
    cap = np.where(np.isinf(model.hi), np.inf, model.hi).sum(axis=1)
    floor = model.lo.sum(axis=1)
    for gi, total in enumerate(model.group_total):
        members = np.flatnonzero(model.total_group == gi)
        who = ", ".join(repr(model.children[i]) for i in members)
        if floor[members].sum() > total:
            bad.append(
                f"exact total {int(total)} of {who} is below the sum of their lower bounds "
                f"({int(floor[members].sum())})"
            )
        if cap[members].sum() < total:
            bad.append(
                f"exact total {int(total)} of {who} exceeds the sum of their upper bounds "
                f"({cap[members].sum():.0f})"
            )
    covered = model.group_total.size and np.all(model.total_group >= 0)
    if parent is not None and covered and int(model.group_total.sum()) != int(parent.sum()):
        bad.append(
            f"the exact totals of the children sum to {int(model.group_total.sum())}, "
            f"the parent has {int(parent.sum())}"
        )
    return bad


def infeasible_by_solver(model: Model, solver: str) -> TopDownInfeasibleError:
    """The error for a problem the necessary conditions did not catch but a solver proved
    infeasible (exact totals of several children jointly with the hhgq bounds)."""
    groups = [
        ", ".join(repr(model.children[i]) for i in np.flatnonzero(model.total_group == g))
        for g in range(model.group_total.size)
    ]
    return TopDownInfeasibleError(
        model.geounit,
        [
            f"{solver} proved that no allocation of the parent's persons by hhgq meets the "
            f"children's hhgq bounds together with the exact totals of "
            + "; ".join(f"[{g}]" for g in groups)
        ],
    )


def check_solution(model: Model, x: F64, *, integral: bool, what: str) -> None:
    """The runtime checks of one solution ``x`` (``(k, n)`` on the masked cells): finite,
    non-negative, zero where a child has no variable, children summing to the parent, the
    hhgq bounds and the exact totals — exactly for integral solutions, within ``1e-6``
    relative to :attr:`Model.scale` for the L2 step. Raises :class:`TopDownSolverError`."""
    tol = 0.0 if integral else 1e-6 * model.scale
    problems: list[str] = []
    if not np.all(np.isfinite(x)):
        problems.append("non-finite values")
    if integral and not np.array_equal(x, np.round(x)):
        problems.append("non-integral values")
    if x.size and float(x.min()) < -tol:
        problems.append(f"negative value {float(x.min())}")
    if np.any(x[~model.allowed] != 0):
        problems.append("persons in an hhgq whose upper bound is 0")
    if model.parent is not None and x.size:
        gap = float(np.max(np.abs(x.sum(axis=0) - model.parent)))
        if gap > tol * max(1, model.k):
            problems.append(f"children differ from the parent by {gap}")
    s = model.group_sums(x)
    if np.any(s < model.lo - tol) or np.any(s > model.hi + tol):
        problems.append("an hhgq bound is violated")
    if model.group_total.size:
        tot = np.bincount(
            model.total_group[model.total_group >= 0],
            weights=x.sum(axis=1)[model.total_group >= 0],
            minlength=model.group_total.size,
        )
        if np.any(np.abs(tot - model.group_total) > tol * max(1, model.k)):
            problems.append("an exact total is violated")
    if problems:
        raise TopDownSolverError(
            f"geounit {model.geounit!r}: the {what} fails its checks: " + "; ".join(problems)
        )
