"""Internal: the controlled rounder — integer children from the L2 solution (production
``MultipassRounder``), an LP whose vertices are integral, solved by HiGHS.

Each child is ``floor(L2) + b`` with ``b`` a 0/1 vector on the cells where the parent
exceeds the sum of the floors (every masked cell at the root). ``b`` meets, in leftover
form, every constraint of the problem: ``Σ_i b_ic = parent_c − Σ_i floor_ic``, the hhgq
bounds and exact totals minus what the floors already hold. In passes (production:
``total`` first for State, County, Tract and Block_Group children, then
``hhgq``, ``hhgq × hispanic``, ``hhgq × hispanic × cenrace``,
``hhgq × votingage × hispanic × cenrace`` and ``detailed`` together) it minimises
``Σ_q Σ_i ‖Q_q bᵢ − round(Q_q fracᵢ)‖₁`` (``frac = L2 − floor``, rounded half to even as
``numpy.around``) with ``e⁺ − e⁻`` slack columns; after a pass its queries' answers are
fixed at their rounded values (``Q bᵢ = Q bᵢ*``) for the later passes. As in production no
separate cell-wise term is added: the ``detailed`` query (listed twice in production's
rounder ordering, as ``detailed`` and as the four-attribute product) carries it.

**Integrality.** The b-part of the constraint matrix has two families of rows: the cell
rows (one per cell, over all children) — disjoint sets — and, per child, the rows of the
rounder queries, the hhgq bounds and the exact totals — sets that are nested whenever the
rounder's queries refine each other (``total ⊃ hhgq ⊃ hhgq×hispanic ⊃ … ⊃ detailed``; an
exact total of several children contains all their sets). Each family is *laminar*, and
the incidence matrix of the union of two laminar families is a network matrix, hence
totally unimodular (Edmonds 1970; Schrijver, *Combinatorial Optimization*, 2003, on
laminar families and matroid intersection). Appending the ``±I`` slack columns and the
``0 ≤ b ≤ 1`` bound rows keeps it totally unimodular, and every right-hand side is an
integer, so every vertex of the LP is integral (Hoffman–Kruskal) and HiGHS's simplex,
which returns a vertex, returns an integral ``b``. :func:`laminar` checks the nesting of the
queries at run time (``Rounding.laminar``) and **every** LP solution is checked for
integrality; a fractional one (possible only with non-nested rounder queries) is re-solved
as a MIP by HiGHS and counted (``Rounding.mip_fallbacks``) — never silently.
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privtab.topdown.solve_model import (
    F64,
    I64,
    IDX,
    Model,
    TopDownInfeasibleError,
    TopDownSolverError,
    answer_index,
    apply,
    compact,
    layout,
    query_size,
    refines,
)

__all__: list[str] = []

#: L2 values within this distance of an integer are taken as that integer before flooring,
#: and leftover answers are rounded after snapping to this grid: the rounding then does not
#: depend on a solver's last digits.
SNAP = 1e-6

_LOCK = threading.Lock()
_BANNER_DONE = False
_LOCAL = threading.local()


def _highs() -> Any:
    """A silent ``highspy.Highs``: the first construction in a process prints HiGHS's
    banner on file descriptor 1, which would corrupt a ``--json`` output; it is sent to
    ``/dev/null`` once."""
    global _BANNER_DONE
    import highspy

    with _LOCK:
        if not _BANNER_DONE:
            sys.stdout.flush()
            saved = os.dup(1)
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, 1)
                h = highspy.Highs()  # type: ignore[no-untyped-call]
            finally:
                os.dup2(saved, 1)
                os.close(saved)
                os.close(devnull)
            _BANNER_DONE = True
        else:
            h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    return h


@dataclass(frozen=True)
class Rounding:
    """The rounder's result: integer children ``(k, n)`` and what it took."""

    counts: I64
    objectives: tuple[float, ...]
    lps: int
    mip_fallbacks: int
    laminar: bool


def laminar(passes: Sequence[Sequence[str]], histogram: str = "persons") -> bool:
    """Whether the rounder's queries, with ``total`` and ``hhgq`` (the exact totals and the
    hhgq bounds; units: ``total``), form a chain of refinements — the condition for total
    unimodularity."""
    return _laminar(tuple(tuple(p) for p in passes), histogram)


@functools.cache
def _laminar(passes: tuple[tuple[str, ...], ...], histogram: str) -> bool:
    names = {n for p in passes for n in p} | {"total", layout(histogram).group_query}
    chain = sorted(names, key=lambda n: int(answer_index(n, histogram).max()))
    return all(refines(f, c, histogram) for c, f in itertools.pairwise(chain))


def snap(x: F64) -> F64:
    """``x`` with values within :data:`SNAP` of an integer set to it, negatives to 0."""
    r = np.round(x)
    return np.maximum(np.where(np.abs(x - r) <= SNAP, r, x), 0.0)


def round_children(model: Model, l2: F64, passes: Sequence[Sequence[str]]) -> Rounding:
    """Controlled rounding of the L2 solution ``l2`` (``(k, n)``) in ``passes``."""
    x = snap(l2) * model.allowed
    floor = np.floor(x)
    frac = x - floor
    k, n = model.k, model.n
    if model.parent is not None:
        d = model.parent - floor.sum(axis=0)
        if np.any(d < 0) or np.any(d > model.allowed.sum(axis=0)):
            raise TopDownSolverError(
                f"geounit {model.geounit!r}: the L2 solution's floors do not fit the parent"
            )
        var = model.allowed & (d > 0)[None, :]
    else:
        d = None
        var = model.allowed
    # the rounding variables b (row-major over the children × cells they may use)
    child, cell = np.nonzero(var)
    at = _Vars(child.astype(np.intp), cell.astype(np.intp), k, n)
    fixed: list[tuple[IDX, int, I64]] = []
    objectives: list[float] = []
    b = np.zeros((k, n))
    lps = fallbacks = 0
    for p, names in enumerate(passes):
        lp = _Lp(model, at, floor, d)
        queries = [_query(q, model.histogram) for q in names]
        prepared: dict[str, _Penalty] = {}
        for key, inj in queries:
            pen = prepared.get(key)
            if pen is None:  # a query listed twice (``detailed``) is prepared once
                idx, size = answer_index(key, model.histogram)[model.cells], len_of(key, model)
                pen = prepared[key] = lp.prepare(idx, size, frac, injective=inj)
            lp.penalty(pen)
        for idx, size, value in fixed:
            lp.fix(idx, size, value)
        sol, obj, fell_back = lp.solve()
        lps += 1
        fallbacks += int(fell_back)
        b = np.zeros((k, n))
        b[at.child, at.cell] = sol
        objectives.append(obj)
        if p < len(passes) - 1:  # the later passes keep this pass's rounded answers
            fixed += [
                (pen.idx, pen.size, np.round(apply(pen.idx, pen.size, b)).astype(np.int64))
                for pen in (prepared[key] for key, _ in queries)
            ]
    counts = (floor + b).astype(np.int64)
    return Rounding(counts, tuple(objectives), lps, fallbacks, laminar(passes, model.histogram))


def len_of(name: str, model: Model) -> int:
    """The number of answer cells of query ``name`` in ``model``'s histogram."""
    return query_size(name, model.histogram)


@functools.cache
def _query(name: str, histogram: str) -> tuple[str, bool]:
    """``(key, injective)`` of a rounder query: ``key`` the first name seen with the same
    partition of the cells (``detailed`` and ``hhgq * votingage * hispanic * cenrace`` are
    one), ``injective`` whether every cell is its own answer."""
    idx = answer_index(name, histogram)
    key = _PARTITIONS.setdefault((histogram, idx.tobytes()), name)
    return key, bool(np.unique(idx).size == idx.size)


_PARTITIONS: dict[tuple[str, bytes], str] = {}


@dataclass(frozen=True)
class _Penalty:
    """One query's L1 term prepared for a pass's LP (:meth:`_Lp.prepare`): its constant
    parts, the linear costs on ``b``, and the rows ``Q bᵢ − e⁺ + e⁻ = r`` of the others
    (``cols``: their variables, ``inverse``: each one's row, ``rhs``: the rows' targets);
    ``ideal`` the targets of the variables when the query is injective (else ``None``)."""

    idx: IDX
    size: int
    const_absent: float
    const_linear: float
    sign: F64
    cols: IDX
    inverse: IDX
    rhs: F64
    ideal: F64 | None


@dataclass(frozen=True)
class _Vars:
    """The rounding variables: variable ``v`` is child ``child[v]``'s cell ``cell[v]``
    (row-major), of a problem of ``k`` children and ``n`` masked cells."""

    child: IDX
    cell: IDX
    k: int
    n: int

    @property
    def size(self) -> int:
        return int(self.child.size)

    def labels(self, idx: IDX, size: int) -> IDX:
        """Each variable's answer cell ``child · size + idx[cell]`` under a query."""
        return np.asarray(self.child * size + idx[self.cell], dtype=np.intp)


class _Lp:
    """The LP of one rounder pass, built from each variable's row labels."""

    def __init__(self, model: Model, at: _Vars, floor: F64, d: F64 | None) -> None:
        self.model, self.at = model, at
        self.nb = at.size
        self.rows: list[IDX] = []
        self.cols: list[IDX] = []
        self.vals: list[F64] = []
        self.lo: list[F64] = []
        self.hi: list[F64] = []
        self.nrow = 0
        self.nslack = 0
        self.const = 0.0
        self.cost_b = np.zeros(self.nb)
        #: the targets of an injective query of the pass (the candidate of :meth:`ideal_b`)
        self.ideal: F64 | None = None
        k, n = at.k, at.n
        if d is not None:  # every cell labelled; one without a variable must have d = 0
            has = np.zeros(n, dtype=bool)
            has[at.cell] = True
            self._family(at.cell, d, d, np.flatnonzero(~has))
        groups = model.layout.groups
        held = model.group_sums(floor)
        lo = (model.lo - held).ravel()
        hi = (model.hi - held).ravel()
        bounded = ((model.lo > 0) | np.isfinite(model.hi)).ravel()
        g_var = at.child * groups + model.hhgq[at.cell]
        g_on = bounded[g_var]
        # the labelled (child, hhgq) pairs of the whole grid: every child × each hhgq present
        grid = np.zeros(k * groups, dtype=bool)
        grid.reshape(k, groups)[:, np.unique(model.hhgq)] = True
        grid &= bounded
        grid[g_var[g_on]] = False
        hi_rows = np.where(np.isinf(hi), 1e20, hi)
        self._family(g_var[g_on], lo, hi_rows, np.flatnonzero(grid), np.flatnonzero(g_on))
        if model.group_total.size:
            tg = model.total_group
            tot = floor.sum(axis=1)
            held_t = np.bincount(
                tg[tg >= 0], weights=tot[tg >= 0], minlength=model.group_total.size
            )
            rest = model.group_total - held_t
            t_var = tg[at.child]
            on = t_var >= 0
            seen = np.zeros(model.group_total.size, dtype=bool)
            if n:
                seen[tg[tg >= 0]] = True
            seen[t_var[on]] = False
            self._family(t_var[on], rest, rest, np.flatnonzero(seen), cols=np.flatnonzero(on))

    def _family(self, labels: IDX, lo: F64, hi: F64, absent: IDX, cols: IDX | None = None) -> None:
        """Rows ``lo ≤ Σ b ≤ hi``, one per label present among the variables (``labels``:
        of the variables ``cols``, default all, in order); ``absent``: labels of rows
        with no variable, which must hold for ``b = 0``."""
        present, inverse = compact(labels)
        self.rows.append((self.nrow + inverse).astype(np.intp))
        self.cols.append(np.arange(self.nb, dtype=np.intp) if cols is None else cols)
        self.vals.append(np.ones(inverse.size))
        lo_a, hi_a = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
        self.lo.append(lo_a[present])
        self.hi.append(hi_a[present])
        self.nrow += present.size
        if absent.size and (np.any(lo_a[absent] > 0) or np.any(hi_a[absent] < 0)):
            raise TopDownInfeasibleError(
                self.model.geounit,
                [
                    "the rounder's leftover constraints cannot be met (a constraint whose "
                    "cells have no rounding variable needs a non-zero leftover)"
                ],
            )

    def prepare(self, idx: IDX, size: int, frac: F64, *, injective: bool) -> _Penalty:
        """The L1 term ``Σ |Q bᵢ − round(Q fracᵢ)|`` of a query (answer cell ``idx`` of
        each masked cell, ``size`` answers). A row whose target ``r`` is ≤ 0 or ≥ its
        number of variables ``m`` is linear on ``0 ≤ b ≤ 1`` (``Σb − r`` or ``r − Σb``):
        its cost goes on ``b``; the others get rows ``Q bᵢ − e⁺ + e⁻ = r`` with unit
        costs on ``e±`` (fewer rows, same optimum and vertices).

        The answers are numbered among those the masked cells reach (``m`` per child, in
        the order of the answer cells: the rows' order is unchanged); ``Q frac`` is summed
        in the same order as :func:`~privtab.topdown.solve_model.apply` (the same floats),
        and every other answer's target is 0. The targets are integers, so every constant
        below is an exact sum whatever its order."""
        k = self.at.k
        answers, local = compact(idx)
        m = answers.size
        grid = (np.arange(k)[:, None] * m + local[None, :]).ravel()
        sums = np.bincount(grid, weights=frac.ravel(), minlength=k * m)
        t: F64 = np.asarray(np.round(np.round(sums, 6)), dtype=np.float64)
        lab = self.at.child * m + local[self.at.cell]
        tl = t[lab]
        if injective:  # one variable per labelled answer: every term is linear
            low_v, high_v = tl <= 0, tl >= 1
            absent = float(np.abs(t).sum() - np.abs(tl).sum())
            linear = float(-tl[low_v].sum() + tl[high_v].sum())
            sign = np.where(low_v, 1.0, np.where(high_v, -1.0, 0.0))
            ideal = np.clip(tl, 0.0, 1.0)
            no_rows = np.zeros(0, dtype=np.intp)
            return _Penalty(idx, size, absent, linear, sign, no_rows, no_rows, t[no_rows], ideal)
        # the answers with variables (ascending), each variable's, and their counts
        present, inverse = compact(lab)
        nvar = np.bincount(inverse)
        tp = t[present]
        absent = float(np.abs(t).sum() - np.abs(tp).sum())
        low, high = tp <= 0, tp >= nvar
        linear = float(-tp[low].sum() + tp[high].sum())
        sign = np.where(low[inverse], 1.0, np.where(high[inverse], -1.0, 0.0))
        mid = ~(low | high)
        keep = mid[inverse]
        rank = np.cumsum(mid) - 1
        return _Penalty(
            idx, size, absent, linear, sign, np.flatnonzero(keep).astype(np.intp),
            rank[inverse[keep]].astype(np.intp), tp[mid], None,
        )  # fmt: skip

    def penalty(self, pen: _Penalty) -> None:
        """Add a prepared term (:meth:`prepare`) to the LP."""
        self.const += pen.const_absent
        self.const += pen.const_linear
        self.cost_b += pen.sign
        if pen.ideal is not None:
            self.ideal = pen.ideal
        m = pen.rhs.size
        if not m:
            return
        r = self.nrow + np.arange(m, dtype=np.intp)
        self.rows += [(self.nrow + pen.inverse).astype(np.intp), r, r]
        base = self.nb + self.nslack
        self.cols += [
            pen.cols,
            base + np.arange(m, dtype=np.intp),
            base + m + np.arange(m, dtype=np.intp),
        ]
        self.vals += [np.ones(pen.inverse.size), -np.ones(m), np.ones(m)]
        self.lo.append(pen.rhs)
        self.hi.append(pen.rhs)
        self.nrow += m
        self.nslack += 2 * m

    def fix(self, idx: IDX, size: int, value: I64) -> None:
        """Rows ``Q bᵢ = value`` (an earlier pass's rounded answers)."""
        lab = self.at.labels(idx, size)
        v = value.ravel().astype(np.float64)
        grid = np.zeros(v.size, dtype=bool)
        grid.reshape(self.at.k, size)[:, np.unique(idx)] = True
        grid[lab] = False
        self._family(lab, v, v, np.flatnonzero(grid))

    def ideal_b(self) -> F64 | None:
        """The LP's optimum without a solver when every term can be met exactly.

        The candidate is ``b* = round(frac)`` of the pass's injective query (``detailed``):
        if it meets every row (the cells' leftovers, the hhgq bounds, the exact totals, the
        earlier passes' answers) with zero slack and its linear costs plus the constant are
        0, the L1 objective ``F(b*) = 0``. The LP's value at any feasible point is at least
        ``F ≥ 0``, so ``b*`` is optimal; and any optimum has ``F = 0``, so its injective
        term is 0 — it *is* ``b*``: the unique optimum, the vertex HiGHS returns. ``None``
        when the candidate does not certify itself (HiGHS then solves the LP)."""
        if self.ideal is None:
            return None
        b = self.ideal
        if self.const + float(self.cost_b @ b) != 0.0:
            return None
        x = np.concatenate([b, np.zeros(self.nslack)])
        r, c = np.concatenate(self.rows), np.concatenate(self.cols)
        act = np.bincount(r, weights=np.concatenate(self.vals) * x[c], minlength=self.nrow)
        lo, hi = np.concatenate(self.lo), np.concatenate(self.hi)
        if np.all(act >= lo - 1e-9) and np.all(act <= hi + 1e-9):
            return b.copy()
        return None

    def arrays(self) -> LpArrays:
        """The LP in HiGHS's column-wise arrays (row indices ascending within a column)."""
        ncol = self.nb + self.nslack
        r, c = np.concatenate(self.rows), np.concatenate(self.cols)
        v = np.concatenate(self.vals)
        order = np.lexsort((r, c))
        start = np.zeros(ncol + 1, dtype=np.int32)
        np.cumsum(np.bincount(c, minlength=ncol), out=start[1:])
        hi = np.concatenate(self.hi)
        return LpArrays(
            cost=np.concatenate([self.cost_b, np.ones(self.nslack)]),
            col_upper=np.concatenate([np.ones(self.nb), np.full(self.nslack, np.inf)]),
            row_lower=np.concatenate(self.lo),
            row_upper=np.where(hi >= 1e20, np.inf, hi),
            start=start,
            index=r[order].astype(np.int32),
            value=v[order].astype(np.float64),
        )

    def solve(self) -> tuple[F64, float, bool]:
        """``(b, objective, fell_back)``: HiGHS simplex, checked integral; a fractional
        vertex is re-solved as a MIP (``fell_back``)."""
        if self.nb + self.nslack == 0:  # nothing left to round (an integral L2 solution)
            return np.zeros(0), self.const, False
        ideal = self.ideal_b()
        if ideal is not None:
            return ideal, 0.0, False
        lp = self.arrays()
        b, obj = self._run(lp, mip=False)
        if np.all(np.abs(b - np.round(b)) <= 1e-9):
            return np.round(b), obj + self.const, False
        b2, obj2 = self._run(lp, mip=True)
        if not np.all(np.abs(b2 - np.round(b2)) <= 1e-6):
            raise TopDownSolverError(
                f"geounit {self.model.geounit!r}: the rounder's MIP returned fractional values"
            )
        return np.round(b2), obj2 + self.const, True

    def _run(self, lp: LpArrays, *, mip: bool) -> tuple[F64, float]:
        """One HiGHS solve of ``lp`` (``mip``: the cell variables integer)."""
        import highspy

        h = getattr(_LOCAL, "highs", None)
        if h is None:
            h = _LOCAL.highs = _highs()
        h.clearModel()
        h.setOptionValue("solver", "choose" if mip else "simplex")
        # the LPs are small and sparse: presolve costs 3x the dual simplex it saves
        h.setOptionValue("presolve", "on" if mip else "off")
        ncol = lp.cost.size
        integrality = np.zeros(ncol, dtype=np.int32)  # kContinuous
        if mip:
            integrality[: self.nb] = 1  # kInteger
        passed = h.passModel(
            ncol, lp.row_lower.size, lp.value.size, 1, 1, 0.0,  # colwise, minimise, offset
            lp.cost, np.zeros(ncol), lp.col_upper, lp.row_lower, lp.row_upper,
            lp.start, lp.index, lp.value, integrality,
        )  # fmt: skip
        if passed != highspy.HighsStatus.kOk:
            raise TopDownSolverError(f"geounit {self.model.geounit!r}: HiGHS refused the LP")
        h.run()
        status = h.getModelStatus()
        if status == highspy.HighsModelStatus.kInfeasible:
            raise TopDownInfeasibleError(
                self.model.geounit,
                [
                    "HiGHS proved the rounder's leftover constraints infeasible (the L2 "
                    "solution's fractional parts should satisfy them)"
                ],
            )
        if status != highspy.HighsModelStatus.kOptimal:
            raise TopDownSolverError(
                f"geounit {self.model.geounit!r}: HiGHS returned {h.modelStatusToString(status)}"
            )
        x = np.asarray(h.getSolution().col_value, dtype=np.float64)
        return x[: self.nb], float(h.getInfo().objective_function_value)


@dataclass(frozen=True)
class LpArrays:
    """A rounder LP in HiGHS's column-wise arrays (columns ``≥ 0``)."""

    cost: F64
    col_upper: F64
    row_lower: F64
    row_upper: F64
    start: NDArray[np.int32]
    index: NDArray[np.int32]
    value: F64
