"""Internal: the generic path of the L2 step — one pass as a sparse QP for OSQP or Clarabel.

The pass minimises ``Σ_q w_q Σ_i ‖Q_q xᵢ − y_{q,i}‖²`` over the children's masked cells
``x ≥ 0`` subject to ``Σ_i xᵢ = parent`` (cell by cell), the hhgq bounds, the exact totals
and the earlier passes' tolerance bands. As in the production code (``L2GeoOpt``) every
query term gets auxiliary variables ``a = Q x − y`` so the Hessian is diagonal and the
constraint matrix keeps the queries' sparsity (each cell is in one answer of each query);
a term whose query is one-to-one on the masked cells (``detailed``) goes on ``x`` directly.
Constraint rows are built from label arrays (child × cell → row), never cell by cell.

:func:`solve_reduced_total` solves the first pass of a total-first problem in the
children's persons by hhgq (8 numbers per child): the pass's objective depends on the
totals only, and any persons-by-hhgq allocation that meets the bounds and sums to the
parent's hhgq totals is realised by some non-negative cell allocation (a transportation
problem with every arc open), so both problems have the same optimal totals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from privtab.topdown.solve_model import (
    F64,
    IDX,
    Band,
    Model,
    Term,
    TopDownSolverError,
    compact,
    infeasible_by_solver,
)

__all__: list[str] = []

_BIG = 1e20
#: SuperLU's column ordering of the symmetric KKT systems of :func:`polish` (minimum
#: degree on Aᵀ + A: COLAMD's default took minutes on a county's 150 children).
_PERMC: Literal["MMD_AT_PLUS_A"] = "MMD_AT_PLUS_A"


@dataclass
class _Rows:
    """COO rows over the variables: ``lo ≤ A z ≤ hi``."""

    row: list[IDX]
    col: list[IDX]
    val: list[F64]
    lo: list[F64]
    hi: list[F64]
    count: int = 0

    def family(
        self, labels: IDX, vid: IDX, lo: F64, hi: F64, extra: tuple[IDX, F64] | None = None
    ) -> IDX:
        """Add one row per label value in use (``labels`` ``(k, n)``, −1 = not in any row;
        ``lo``/``hi`` indexed by label). Returns the labels in use, in row order."""
        use = (labels >= 0) & (vid >= 0)
        lab, cols = labels[use], vid[use]
        present, inverse = compact(lab)
        rows = self.count + inverse
        self.row.append(rows.astype(np.intp))
        self.col.append(cols.astype(np.intp))
        self.val.append(np.ones(rows.size))
        if extra is not None:
            ecol, evals = extra
            self.row.append(self.count + np.arange(present.size, dtype=np.intp))
            self.col.append(ecol[present])
            self.val.append(evals[present])
        self.lo.append(np.asarray(lo, dtype=np.float64)[present])
        self.hi.append(np.asarray(hi, dtype=np.float64)[present])
        self.count += present.size
        return present.astype(np.intp)

    def matrix(self, ncol: int) -> sp.csc_matrix:
        if not self.row:
            return sp.csc_matrix((0, ncol))
        r, c = np.concatenate(self.row), np.concatenate(self.col)
        v = np.concatenate(self.val)
        return sp.csc_matrix(sp.coo_matrix((v, (r, c)), shape=(self.count, ncol)))

    def bounds(self) -> tuple[F64, F64]:
        if not self.lo:
            return np.zeros(0), np.zeros(0)
        return np.concatenate(self.lo), np.concatenate(self.hi)


def build_qp(
    model: Model, terms: Sequence[Term], bands: Sequence[Band]
) -> tuple[sp.csc_matrix, F64, sp.csc_matrix, F64, F64, IDX]:
    """``(P, q, A, lo, hi, vid)``: minimise ``½zᵀPz + qᵀz`` s.t. ``lo ≤ Az ≤ hi``, ``z ≥ 0``
    on the cell variables (its first ``N`` entries, ``vid`` maps child × cell to them)."""
    k, n = model.k, model.n
    vid = np.full((k, n), -1, dtype=np.intp)
    vid[model.allowed] = np.arange(int(model.allowed.sum()))
    nx = int(model.allowed.sum())
    pdiag = [np.zeros(nx)]
    q = [np.zeros(nx)]
    rows = _Rows([], [], [], [], [])
    naux = 0
    child = np.arange(k)[:, None]
    for t in terms:
        cw = t.child_weights(k)  # (k,): the children's σ² may differ (spine bypass)
        if t.injective:
            w = np.broadcast_to(2 * cw[:, None], (k, n))[model.allowed]
            pdiag[0][vid[model.allowed]] += w
            y = t.answers[:, t.index]
            q[0][vid[model.allowed]] += -w * y[model.allowed]
            continue
        labels = np.broadcast_to(child * t.size + t.index[None, :], (k, n))
        y = t.answers.ravel()
        # aux columns are placed after the x's, in the order of the rows in use
        start = rows.count
        present = rows.family(labels, vid, y, y)
        m = present.size
        acol = np.full(k * t.size, -1, dtype=np.intp)
        acol[present] = nx + naux + np.arange(m)
        rows.row.append(start + np.arange(m, dtype=np.intp))
        rows.col.append(acol[present])
        rows.val.append(-np.ones(m))
        pdiag.append(2 * cw[present // t.size])
        q.append(np.zeros(m))
        naux += m
    if model.parent is not None:
        labels = np.broadcast_to(np.arange(n)[None, :], (k, n))
        rows.family(labels, vid, model.parent, model.parent)
    lo, hi = model.lo.ravel(), model.hi.ravel()
    g_lab = child * model.layout.groups + model.hhgq[None, :]
    g_lab = np.where(((lo > 0) | np.isfinite(hi))[g_lab], g_lab, -1)
    rows.family(g_lab, vid, lo, np.where(np.isinf(hi), _BIG, hi))
    if model.group_total.size:
        t_lab = np.broadcast_to(model.total_group[:, None], (k, n))
        rows.family(t_lab, vid, model.group_total, model.group_total)
    for b in bands:
        labels = np.broadcast_to(child * b.size + b.index[None, :], (k, n))
        rows.family(labels, vid, b.lo.ravel(), b.hi.ravel())
    ncol = nx + naux
    P = sp.diags(np.concatenate(pdiag)).tocsc()
    A = rows.matrix(ncol)
    rlo, rhi = rows.bounds()
    return P, np.concatenate(q), A, rlo, rhi, vid


def solve_qp(model: Model, terms: Sequence[Term], bands: Sequence[Band], solver: str) -> F64:
    """One L2 pass by ``solver`` (``"osqp"`` or ``"clarabel"``): the children's masked
    values ``(k, n)`` (zero where a child has no variable). Infeasibility raises
    :class:`~privtab.topdown.solve_model.TopDownInfeasibleError`; anything but an optimal
    status raises :class:`~privtab.topdown.solve_model.TopDownSolverError`."""
    P, q, A, lo, hi, vid = build_qp(model, terms, bands)
    # in units of the problem's scale (every right-hand side and linear term is a count,
    # the objective is divided by unit²): a state's numbers (10⁶) otherwise defeat the
    # solvers' absolute tolerances (Clarabel reported a state's problem dual infeasible)
    unit = model.scale
    q, lo, hi = q / unit, _per_unit(lo, unit), _per_unit(hi, unit)
    nx = int(model.allowed.sum())
    if solver == "clarabel":
        z = _clarabel(model, P, q, A, lo, hi, nx)
    elif solver == "osqp":
        z = _osqp(model, P, q, A, lo, hi, nx)
    else:
        raise ValueError(f"unknown QP solver {solver!r}")
    best = z
    tried: set[bytes] = set()
    for tol in (1e-8, 1e-6, 1e-4, 1e-3):
        polished = polish(P, q, A, lo, hi, nx, best, 1.0, tol / unit, tried)
        if polished is not None:
            best = polished
    z = best * unit
    x = np.zeros((model.k, model.n))
    x[model.allowed] = z[vid[model.allowed]]
    return x


def _per_unit(bound: F64, unit: float) -> F64:
    """``bound / unit``, keeping the ``±_BIG`` markers of a missing bound."""
    return np.where(np.abs(bound) >= _BIG, bound, bound / unit)


def polish(
    P: sp.csc_matrix,
    q: F64,
    A: sp.csc_matrix,
    lo: F64,
    hi: F64,
    nx: int,
    z: F64,
    scale: float,
    tol: float,
    tried: set[bytes] | None = None,
) -> F64 | None:
    """Refine a generic solver's solution on its active set, as OSQP's polishing does:
    fix the cell variables at (near) zero and the (near) tight rows, solve the equality
    QP's sparse KKT system by LU (regularised, with iterative refinement), and keep the
    result only if it is primal feasible (to 1e-8 of the scale) and its objective is no
    worse than the solver's (tried for several thresholds ``tol`` of "at zero" and
    "tight", each from the best so far) — then it is the optimum on that active set, exact to the
    last digits where the solver's own answer is good to 1e-4 or so. (The multipliers
    are not unique when rows are dependent, so they certify nothing here; the structured
    solver's certificate handles that degeneracy.) ``None``: the caller keeps ``z``.

    ``tried``: the active sets already polished by this caller; one seen before is not
    factorised again (the same system gives the same answer: ``None`` — nothing better than
    the caller's best, which already holds that set's solution if it had one). A state's
    counties at 10⁷ persons (46,000 cells, a 191,000-row system) gave the same active set at
    all four thresholds: four 5-second factorisations, now one."""
    import scipy.sparse.linalg as sla

    ncol = P.shape[0]
    if not np.all(P.diagonal() > 0):
        return None  # not strictly convex (no one-to-one term): the solution is not unique
    fixed = np.zeros(ncol, dtype=bool)
    fixed[:nx] = z[:nx] <= tol
    az = A @ z
    eq = lo == hi
    at_lo = ~eq & (np.abs(az - lo) <= tol)
    at_hi = ~eq & ~at_lo & (np.abs(az - hi) <= tol)
    rows = eq | at_lo | at_hi
    if tried is not None:
        key = np.packbits(fixed).tobytes() + np.packbits(rows).tobytes()
        key += np.packbits(at_hi).tobytes()
        if key in tried:
            return None
        tried.add(key)
    b = np.where(at_hi, hi, lo)[rows]
    F = np.flatnonzero(~fixed)
    AR = A[rows][:, F]
    m = AR.shape[0]
    delta = 1e-11
    K = sp.csc_matrix(sp.bmat([[P[F][:, F], AR.T], [AR, None]], format="csc"))
    reg = sp.diags(np.concatenate([np.zeros(F.size), np.full(m, -delta)]), format="csc")
    Kreg = sp.csc_matrix(K + reg)
    rhs = np.concatenate([-q[F], b])
    try:
        lu = sla.splu(Kreg.tocsc(), permc_spec=_PERMC)
    except RuntimeError:
        return None
    sol = lu.solve(rhs)
    for _ in range(5):
        sol = sol + lu.solve(rhs - K @ sol)
    zf, _y = sol[: F.size], sol[F.size :]
    out = np.zeros(ncol)
    out[F] = zf
    tp = 1e-9 * scale * 10
    if np.any(out[:nx] < -tp):
        return None
    az = A @ out
    if np.any(az[~rows] < lo[~rows] - tp) or np.any(az[~rows] > hi[~rows] + tp):
        return None
    if np.any(np.abs(az[rows] - b) > tp):
        return None

    def obj(v: F64) -> float:
        return float(0.5 * v @ (P @ v) + q @ v)

    if obj(out) > obj(z) + 1e-15 * max(1.0, abs(obj(z))):
        return None
    return out


def _clarabel(
    model: Model, P: sp.csc_matrix, q: F64, A: sp.csc_matrix, lo: F64, hi: F64, nx: int
) -> F64:
    import clarabel

    eq = lo == hi
    up = ~eq & (hi < _BIG)
    dn = ~eq & (lo > -_BIG)
    ncol = P.shape[0]
    nonneg = sp.hstack([-sp.eye(nx), sp.csc_matrix((nx, ncol - nx))])
    Ac = sp.vstack([A[eq], A[up], -A[dn], nonneg]).tocsc()
    b = np.concatenate([hi[eq], hi[up], -lo[dn], np.zeros(nx)])
    cones = [clarabel.ZeroConeT(int(eq.sum())), clarabel.NonnegativeConeT(int(b.size - eq.sum()))]
    return run_clarabel(model, sp.triu(P).tocsc(), q, Ac, b, cones, 1e-10)


#: Clarabel's gap and feasibility tolerances, tried in turn: the tight first; the looser
#: ones when it stops short (``InsufficientProgress``, ``MaxIterations``) — the solution is
#: then refined by :func:`polish` or only read to the band tolerance (0.1).
_CLARABEL_TOLERANCES = (1e-10, 1e-8)


def run_clarabel(
    model: Model, P: sp.csc_matrix, q: F64, A: sp.csc_matrix, b: F64, cones: Any, tight: float
) -> F64:
    """Solve ``min ½zᵀPz + qᵀz`` over ``b − Az`` in ``cones`` by Clarabel (``P`` upper
    triangular): ``PrimalInfeasible`` raises the geounit's infeasibility; a run that stops
    short is repeated with looser tolerances; anything else raises
    :class:`~privtab.topdown.solve_model.TopDownSolverError`."""
    import clarabel

    status = "not run"
    for tol in (tight, *(t for t in _CLARABEL_TOLERANCES if t > tight)):
        settings = clarabel.DefaultSettings()
        settings.verbose = False
        settings.tol_gap_abs = tol
        settings.tol_gap_rel = tol
        settings.tol_feas = tol
        settings.max_iter = 500
        sol = clarabel.DefaultSolver(P, q, A, b, cones, settings).solve()
        status = str(sol.status)
        if status == "PrimalInfeasible":  # DualInfeasible (unbounded) proves nothing here
            raise infeasible_by_solver(model, "Clarabel")
        if status in ("Solved", "AlmostSolved"):
            return np.asarray(sol.x, dtype=np.float64)
    raise TopDownSolverError(f"geounit {model.geounit!r}: Clarabel returned {status}")


def _osqp(
    model: Model, P: sp.csc_matrix, q: F64, A: sp.csc_matrix, lo: F64, hi: F64, nx: int
) -> F64:
    import osqp

    ncol = P.shape[0]
    bound = sp.hstack([sp.eye(nx), sp.csc_matrix((nx, ncol - nx))])
    Ao = sp.csc_matrix(sp.vstack([A, bound]))
    lo_o = np.concatenate([lo, np.zeros(nx)])
    hi_o = np.concatenate([np.minimum(hi, np.inf), np.full(nx, np.inf)])
    hi_o[hi_o >= _BIG] = np.inf
    solver = osqp.OSQP()
    solver.setup(
        sp.triu(P).tocsc(),
        q,
        Ao,
        lo_o,
        hi_o,
        verbose=False,
        eps_abs=1e-9,
        eps_rel=1e-9,
        max_iter=400000,
        polishing=True,
        polish_refine_iter=10,
    )
    res = solver.solve(raise_error=False)
    status = str(res.info.status).lower()
    if "infeasible" in status and "inaccurate" not in status:
        raise infeasible_by_solver(model, "OSQP")
    if status != "solved":
        raise TopDownSolverError(f"geounit {model.geounit!r}: OSQP returned {res.info.status}")
    return np.asarray(res.x, dtype=np.float64)


def solve_reduced_total(model: Model, term: Term) -> F64:
    """The optimal total of every child for a pass whose only term is ``total``, from the
    children's persons by hhgq (``(k,)``; see the module docstring). Solved in units of
    the problem's scale (:attr:`Model.scale`) with the objective divided by its weight: a
    national problem's numbers (10⁸) and weights (10⁻²) otherwise leave Clarabel's
    tolerances meaningless (it reported a feasible root problem dual infeasible)."""
    import clarabel

    k = model.k
    unit = model.scale
    allowed_g = model.group_sums(model.allowed.astype(np.float64)) > 0  # (k, 8)
    pg = model.group_sums(model.parent[None, :])[0] if model.parent is not None else None  # (8,)
    groups = model.layout.groups
    ns = int(allowed_g.sum())
    # variables (in units of `unit`): s (ns), then t (k) with t_i = Σ_g s_ig;
    # objective Σ cᵢ (tᵢ − yᵢ)² (the pass's Σ w cᵢ (tᵢ − yᵢ)² divided by w·unit²: the same
    # minimiser; cᵢ the child's factor when the children's variances differ)
    c = term.child_weights(k) / term.weight
    q = np.concatenate([np.zeros(ns), -2.0 * c * term.answers[:, 0] / unit])
    ii, gg = np.nonzero(allowed_g)
    lo_s, hi_s = model.lo[ii, gg] / unit, model.hi[ii, gg] / unit
    fin = np.isfinite(hi_s)
    n_tot = model.group_total.size
    beq = np.concatenate(
        [np.zeros(k)]
        + ([pg / unit] if pg is not None else [])
        + ([model.group_total / unit] if n_tot else [])
    )
    bin_ = np.concatenate([-lo_s, hi_s[fin]])
    cones = [clarabel.ZeroConeT(int(beq.size)), clarabel.NonnegativeConeT(int(bin_.size))]
    P, A = _reduced_matrices(
        k, groups, ii, gg, c, fin, None if pg is None else groups, model.total_group, n_tot
    )
    x = run_clarabel(model, P, q, A, np.concatenate([beq, bin_]), cones, 1e-11)
    return x[ns:] * unit


def _reduced_matrices(
    k: int,
    groups: int,
    ii: IDX,
    gg: IDX,
    c: F64,
    fin: NDArray[np.bool_],
    parent_rows: int | None,
    total_group: IDX,
    n_tot: int,
) -> tuple[sp.csc_matrix, sp.csc_matrix]:
    """``(P, A)`` of :func:`solve_reduced_total` in compressed columns, built directly:
    the variables are the ``ns`` persons ``s`` of child ``ii`` in hhgq ``gg`` and the ``k``
    totals ``t``; ``A``'s rows are ``tᵢ − Σ_g s_ig = 0`` (``k``), ``Σ_i s_ig = p_g``
    (``parent_rows``, if a parent), the exact totals (``n_tot``), ``−s ≤ −lo`` (``ns``) and
    ``s ≤ hi`` where finite — entry for entry what stacking them row block by row block
    gives (row indices ascending within a column; no explicit zeros)."""
    ns = int(ii.size)
    ncol = ns + k
    two_c = 2.0 * c
    on = two_c != 0
    p_ptr = np.zeros(ncol + 1, dtype=np.int32)
    p_ptr[ns + 1 :] = np.cumsum(on)
    P = sp.csc_matrix(
        (two_c[on], np.flatnonzero(on).astype(np.int32) + ns, p_ptr), shape=(ncol, ncol)
    )
    # the entries of each s column, in row order: its total's row, its parent row, its
    # exact total's row, its lower bound's row, its upper bound's row
    row_off = k
    parts_r: list[IDX] = [ii]
    parts_v: list[F64] = [-np.ones(ns)]
    if parent_rows is not None:
        parts_r.append(row_off + gg)
        parts_v.append(np.ones(ns))
        row_off += parent_rows
    if n_tot:
        g = total_group[ii]
        keep = g >= 0
        parts_r.append(np.where(keep, row_off + g, -1))
        parts_v.append(np.ones(ns))
        row_off += n_tot
    parts_r.append(row_off + np.arange(ns))
    parts_v.append(-np.ones(ns))
    row_off += ns
    rank = np.cumsum(fin) - 1
    parts_r.append(np.where(fin, row_off + rank, -1))
    parts_v.append(np.ones(ns))
    nrow = row_off + int(fin.sum())
    R = np.stack(parts_r, axis=1)  # (ns, entries): ascending along each row
    V = np.stack(parts_v, axis=1)
    present = R >= 0
    per_col = np.concatenate([present.sum(axis=1), np.ones(k, dtype=np.intp)])
    ptr = np.zeros(ncol + 1, dtype=np.int32)
    np.cumsum(per_col, out=ptr[1:])
    rows = np.concatenate([R[present], np.arange(k)]).astype(np.int32)
    vals = np.concatenate([V[present], np.ones(k)])
    return P, sp.csc_matrix((vals, rows, ptr), shape=(nrow, ncol))
