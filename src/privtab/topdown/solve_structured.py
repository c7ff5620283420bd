"""Internal: the structure-exploiting solver of the L2 step, and the dispatch of a pass.

**Structure.** Every child of a parent answers the same queries, so the objective of a pass
is ``Σ_i ½ xᵢᵀ H xᵢ − gᵢᵀ xᵢ`` (times 2, plus a constant) with one ``n × n`` Hessian
``H = Σ_q w_q Q_qᵀ Q_q`` on the ``n`` masked cells for all ``k`` children
(``H[c, c'] = Σ_q w_q [c and c' share an answer of q]``) and ``gᵢ = Σ_q w_q Q_qᵀ y_{q,i}``.
A pass containing ``detailed`` has ``H ⪰ w_detailed I``: strictly convex, a unique
solution. With only the coupling ``Σ_i xᵢ = p`` the solution is closed-form:
``xᵢ = H⁻¹gᵢ + (p − Σ_j H⁻¹g_j)/k``; and the same holds for ``H + ρI``.

**ADMM** (Boyd et al. 2011, §5; over-relaxation α = 1.6; the loop is
:func:`privtab.topdown.solve_structured_batch.solve_batch`, for one problem or many): split
``x = z`` with ``x`` in the coupling set ``{Σ_i xᵢ = p}`` and ``z`` in the children's own
sets (``z ≥ 0``, zero where a child has no variable, its hhgq bounds), and — when the pass
has total bands (the tolerance of a total-first problem's second pass, or exact per-child
totals) — the children's totals ``s = 1ᵀx`` with ``s`` in its band (weight ``σ = ρ``). The
x-update is the closed form above with ``M = H + ρI + σ11ᵀ``: one factorisation (an explicit
``n × n`` inverse) per pass, shared by every child and iteration, so an iteration is one
``(k, n) × (n, n)`` product. The z-update is ``max(v, 0)``, and where a child's hhgq bound
is violated the threshold ``max(v − τ, 0)`` on that hhgq's cells (a sort); the s-update is a
clip. ``ρ = 2√(λ_min λ_max)`` from ``λ_min ≥ w_detailed`` and Gershgorin's ``λ_max ≤ max row
sum``. BLAS threads: these matrices are small — run with one BLAS thread per process
(``OPENBLAS_NUM_THREADS=1``); a multi-threaded BLAS on a busy machine made the same solve 25
times slower in measurement.

**Polish to exact optimality.** Every few iterations the active set read off ``z`` (cells
at zero — within the primal tolerance: at a degenerate optimum, e.g. noise-free data,
entries converging to 0 keep flickering just above it — and bounds met with equality) is
solved exactly: per child the reduced Hessian
``H_FF`` on its free cells (and its active rows, by a small Schur complement), coupled
through one ``n × n`` system for the multipliers ``λ`` of ``Σ_i xᵢ = p``. The KKT
conditions are then verified — primal feasibility (the coupling included), multipliers of
active bounds of the right sign — and violations are fixed by primal-dual active-set steps.
Rows that are dependent on the coupling (every child's total fixed, or every child's
persons of one hhgq) leave the multipliers determined up to a common shift ``(μ + c,
λ − c)``; the shift nearest 0 that gives the active rows their signs is taken, and an
inconsistent set of such rows loses the one with the smallest multiplier; if the coupling
still fails, the children are freed in the cells where it fails. An active row the solve
cannot meet (no free cell under it) frees its cells too: the check looks at every row,
not only at the multipliers. A solution is
returned only once verified (to 1e-9 of the parent's scale in the primal, 1e-9 of the
largest linear term ``|G|`` in the dual), so it is the optimum, not an approximation; a
pass that cannot be certified is solved by Clarabel and counted (``PassResult.fell_back``).

What the top levels' single large problems (a nation's state parts, a state's counties)
needed (docs/topdown.md §14): the total bands narrowed by what the hhgq bounds imply
(:func:`implied_band`: a child whose hhgq rows fix its total must not hold its total row
at a different value); a cell no child holds in a stuck ADMM iterate freed in every child;
``λ`` solved with the directions the active rows leave free pinned (:func:`_gauge_solve`);
an active row that its child cannot meet (no free cell) freed before another child's row
is dropped, and the coupling's gap checked summed over the cells too; children with one
active row (the usual case) reduced all at once (:class:`_OneRow`); an active set whose
polish failed never polished again. At a large state's counties (159 in Georgia, every
total row active at the optimum) the ends of the total rows that contradict the coupling
are corrected all at once, by the totals' own ``k``-variable QP at the active set of cells
(:meth:`StructuredPass._retotal`, :class:`_TotalsLink`), not one row per two steps; and
the dual tolerance is relative to the gradient's scale ``|G|``.

**Classes of children** (siblings whose variances differ: after the spine's bypass a
child that absorbed its single child's share has its own ``1/σ²`` per query). Children
with the same weight factors form a class ``c`` with its own ``H_c`` (usually 2 classes):
the x-update's ``M_c = H_c + ρI + σ11ᵀ`` is inverted once per class, and the coupling's
correction becomes ``xᵢ += (p − Σ_j x_j) S⁻¹ M_{c(i)}⁻¹`` with ``S = Σ_c k_c M_c⁻¹`` (one
class: ``I/k``, the same arithmetic as before). The polish inverts each child's ``H_FF``
from its class's ``H``; the KKT conditions are checked with each child's own weights.

**Exact totals shared by several children** (production's AIAN and non-AIAN parts of a
state: one invariant total for both). In the ADMM the children's totals ``s`` are
projected onto their bands and the group's sum (a weighted projection,
:func:`privtab.topdown.solve_units.project_sum`); in the polish each group adds one row
``Σ_{i ∈ g} 1ᵀxᵢ = T_g`` with multiplier ``η_g``, bordering the coupling's ``n × n``
system (solved by a rank-revealing least squares: it is singular whenever every child's
total is fixed), and an active set whose total rows contradict a group's total loses the
row with the smallest multiplier on the side that has to give.

Passes this solver does not cover — no one-to-one term (``H`` singular: a ``total``-only
first pass is solved in the children's persons by hhgq instead,
:func:`privtab.topdown.solve_qp.solve_reduced_total`), tolerance bands on other queries
than ``total`` — go to Clarabel and say so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from privtab.topdown.solve_model import (
    F64,
    GROUPS,
    IDX,
    Band,
    Model,
    Term,
)

__all__: list[str] = []

_ALPHA = 1.6
_MAX_ITER = 4000
#: Failed polishes after which a pass is handed to the fallback solver: a problem whose
#: active-set steps cycle (tiny, degenerate problems: a person or two under total bands)
#: would otherwise try again at every check up to _MAX_ITER (seconds for nothing).
MAX_POLISH = 25
#: Active-set steps of one polish. 12 left counties with an empty child (no free cell,
#: its total row at a band end) uncertified: freeing its cells takes 15–30 steps to settle.
_POLISH_STEPS = 40
_SIGMA = 1.0  # weight of the totals' split relative to ρ
_CHILD_BATCH_ELEMENTS = 4_000_000  # children's H_FF per batched inversion: ≤ 32 MB
_LOOP_ABOVE = 64  # free cells per child above which the inverses are taken one by one


@dataclass(frozen=True)
class PassResult:
    """One pass: the children's masked values, the answers of the pass's queries (one
    ``(k, size)`` array per term, cached for the later passes' bands), the objective, the
    solver that produced them and whether the structured solver had to hand over."""

    x: F64
    answers: list[F64]
    objective: float
    solver: str
    fell_back: bool = False


@dataclass(frozen=True)
class AdmmSetup:
    """What every ADMM iteration of a pass reuses (:meth:`StructuredPass.admm_setup`):
    per class of children ``c`` (children whose weights are the same, one class unless
    siblings' variances differ) ``Minv[c] = M_c⁻¹``, ``Minv1[c] = M_c⁻¹1``; per child
    ``MinvG[i] = gᵢ M_{c(i)}⁻¹``; with several classes ``P[c] = S⁻¹ M_c⁻¹`` for the
    coupling's correction (``S = Σ_c k_c M_c⁻¹``; one class: ``P = I/k``, not stored)."""

    Minv: F64
    MinvG: F64
    Minv1: F64
    rho: float
    sigma: float
    banded: bool
    P: F64 | None = None


def _objective(terms: Sequence[Term], answers: Sequence[F64]) -> float:
    """``Σ_q Σ_i w_{q,i} ‖Q_q xᵢ − y_{q,i}‖²`` (constants included; each child's own
    weight where siblings' variances differ)."""
    import math

    return float(
        math.fsum(
            float(t.child_weights(a.shape[0]) @ np.sum((a - t.answers) ** 2, axis=1))
            for t, a in zip(terms, answers, strict=True)
        )
    )


def solve_pass(
    model: Model,
    terms: Sequence[Term],
    bands: Sequence[Band],
    solver: str,
    *,
    need_x: bool = True,
) -> PassResult:
    """Solve one L2 pass with ``solver`` (``"structured"``, ``"clarabel"``, ``"osqp"``).
    ``need_x=False`` (a pass followed by others): only the answers of the pass's queries
    are needed, and a ``total``-only pass is solved in the children's persons by hhgq
    (its cells are not unique, its totals are); ``x`` is then zeros."""
    from privtab.topdown.solve_qp import solve_qp, solve_reduced_total

    if solver == "structured":
        if [t.name for t in terms] == ["total"] and not bands and not need_x:
            totals = solve_reduced_total(model, terms[0])
            ans = [totals[:, None]]
            x = np.zeros((model.k, model.n))
            return PassResult(x, ans, _objective(terms, ans), "structured (by hhgq)")
        band = _total_band(model, bands)
        if band is not None and any(t.injective for t in terms):
            sx = StructuredPass(model, terms, *band).solve()
            if sx is not None:
                ans = [t.apply(sx) for t in terms]
                return PassResult(sx, ans, _objective(terms, ans), "structured")
            fell_back = True
        else:
            fell_back = False
        x = solve_qp(model, terms, bands, "clarabel")
        ans = [t.apply(x) for t in terms]
        return PassResult(x, ans, _objective(terms, ans), "clarabel", fell_back)
    x = solve_qp(model, terms, bands, solver)
    ans = [t.apply(x) for t in terms]
    return PassResult(x, ans, _objective(terms, ans), solver)


def _total_band(model: Model, bands: Sequence[Band]) -> tuple[F64, F64] | None:
    """Each child's total bounds ``(lo, hi)`` from the bands on ``total`` and the exact
    per-child totals; ``None`` if the pass has constraints this solver does not cover."""
    k = model.k
    lo, hi = np.full(k, -np.inf), np.full(k, np.inf)
    for b in bands:
        if b.size != 1:
            return None
        lo, hi = np.maximum(lo, b.lo[:, 0]), np.minimum(hi, b.hi[:, 0])
    g = model.total_group
    if model.group_total.size:
        # exact totals shared by several children: StructuredPass.shared (a row per group)
        members = np.bincount(g[g >= 0], minlength=model.group_total.size)
        has = (g >= 0) & (members[np.maximum(g, 0)] == 1)
        lo[has] = np.maximum(lo[has], model.group_total[g[has]])
        hi[has] = np.minimum(hi[has], model.group_total[g[has]])
    return lo, hi


def child_classes(terms: Sequence[Term], k: int) -> tuple[IDX, F64]:
    """``(cls, factors)``: children with the same weight factors across the pass's terms
    form one class (``cls[i]``; ``factors[c, t]`` the factor of term ``t`` in class
    ``c``). One class unless siblings' variances differ (the spine's bypass: usually two)."""
    if all(t.scale is None for t in terms):
        return np.zeros(k, dtype=np.intp), np.ones((1, len(terms)))
    f = np.stack([np.ones(k) if t.scale is None else t.scale for t in terms], axis=1)
    uniq, cls = np.unique(f, axis=0, return_inverse=True)
    return np.asarray(cls, dtype=np.intp).reshape(k), np.asarray(uniq, dtype=np.float64)


def hessians(model: Model, terms: Sequence[Term]) -> tuple[IDX, F64, F64, F64]:
    """``(cls, Hs, G, λ_min bounds)`` of a pass: the children's classes
    (:func:`child_classes`), one Hessian ``Hs[c]`` ``(n, n)`` per class, ``G`` ``(k, n)``
    (each child's own weights) and a lower bound on each class's smallest eigenvalue."""
    n, k = model.n, model.k
    cls, factors = child_classes(terms, k)
    C = factors.shape[0]
    Hs = np.zeros((C, n, n))
    G = np.zeros((k, n))
    lam_min = np.zeros(C)
    for j, t in enumerate(terms):
        w = t.weight * factors[:, j]  # (C,)
        if t.injective:
            Hs[:, np.arange(n), np.arange(n)] += w[:, None]
            lam_min += w
        elif C == 1:
            Hs[0] += w[0] * (t.index[:, None] == t.index[None, :])
        else:
            E = (t.index[:, None] == t.index[None, :]).astype(np.float64)
            Hs += w[:, None, None] * E[None, :, :]
        G += t.child_weights(k)[:, None] * t.answers[:, t.index]
    return cls, Hs, G, lam_min


class StructuredPass:
    """ADMM with a shared factorisation, then a verified active-set solve (module doc)."""

    def __init__(self, model: Model, terms: Sequence[Term], tlo: F64, thi: F64) -> None:
        self.m = model
        self.cls, self.Hs, self.G, lams = hessians(model, terms)
        self.H = self.Hs[0]
        self.classes = int(self.Hs.shape[0])
        lam_min = float(lams.min())
        self.shared, self.shared_total = shared_groups(model)
        if np.any(self.shared >= 0):  # implied: 0 ≤ a child's total ≤ its group's
            on = self.shared >= 0
            cap = self.shared_total[np.maximum(self.shared, 0)]
            tlo, thi = (
                np.where(on, np.maximum(tlo, 0.0), tlo),
                np.where(on, np.minimum(thi, cap), thi),
            )
        self.tlo, self.thi = implied_band(model, tlo, thi)
        self.starts = model.group_starts
        lam_max = float(np.abs(self.Hs).sum(axis=2).max(initial=lam_min))
        # 2√(λ_min λ_max): measured on synthetic block groups, 25% fewer iterations than 1×
        self.rho = 2.0 * float(np.sqrt(lam_min * lam_max))
        self.scale_p = model.scale
        self.tol_p = 1e-9 * self.scale_p
        # the dual tolerance, relative to the gradient's scale |G| (the fit's Hx ≈ G). It was
        # 1e-8 of max(|G|, λ_max·scale): at a state's counties λ_max·scale is 100× |G|, and
        # rows and cells whose multipliers had the wrong sign by up to 0.09 were certified —
        # Georgia's counties at 10⁷ persons 4.6 above the optimum (2.9·10⁻⁵ relative)
        self.tol_d = 1e-9 * max(1.0, float(np.abs(self.G).max(initial=0)))
        self.failed: set[bytes] = set()  # active sets whose polish failed
        self.uncovered: set[bytes] = set()  # active sets offered with a cell no child holds
        self.link: _TotalsLink | None = None  # of the last _kkt, if every total was active

    # ---- ADMM -------------------------------------------------------------------------
    def admm_setup(self) -> AdmmSetup | None:
        """The x-update's data: ``M⁻¹`` for ``M = H + ρI + σ11ᵀ``, ``G M⁻¹``, ``M⁻¹1``
        (``None`` if ``M`` is not numerically positive definite)."""
        banded = bool(np.any(np.isfinite(self.tlo)) or np.any(np.isfinite(self.thi)))
        banded = banded or bool(np.any(self.shared >= 0))
        sigma = _SIGMA * self.rho if banded else 0.0
        n = self.m.n
        inverses = [spd_inverse(H + self.rho * np.eye(n) + sigma) for H in self.Hs]
        if any(inv is None for inv in inverses):
            return None
        Minv = np.stack([inv for inv in inverses if inv is not None])
        if self.classes == 1:
            M0 = Minv[0]
            return AdmmSetup(Minv, self.G @ M0, M0.sum(axis=0)[None, :], self.rho, sigma, banded)
        MinvG = np.zeros_like(self.G)
        for c in range(self.classes):
            who = self.cls == c
            MinvG[who] = self.G[who] @ Minv[c]
        counts = np.bincount(self.cls, minlength=self.classes).astype(np.float64)
        Sinv = spd_inverse(np.einsum("c,cab->ab", counts, Minv))
        if Sinv is None:
            return None
        P = np.matmul(Sinv[None, :, :], Minv)
        return AdmmSetup(Minv, MinvG, Minv.sum(axis=1), self.rho, sigma, banded, P)

    def solve(self) -> F64 | None:
        """The certified optimum, or ``None`` if it could not be certified (the ADMM of
        :mod:`privtab.topdown.solve_structured_batch` on this one problem, up to
        ``_MAX_ITER`` iterations).

        The children's totals are split off too (``s = 1ᵀx`` with ``s`` in the total band,
        weight ``σ``): the x-update's matrix is ``H + ρI + σ11ᵀ``, still one for all
        children, and the band is a clip of ``s``."""
        from privtab.topdown.solve_structured_batch import solve_batch

        return solve_batch([self], max_iter=_MAX_ITER)[0]

    # ---- polish -----------------------------------------------------------------------
    def polish(self, free: np.ndarray, tact: IDX, gact: IDX) -> F64 | None:
        """Solve the KKT system on an active set, correct it by primal-dual active-set
        steps, and return the solution only once the KKT conditions are verified."""
        start = np.packbits(free).tobytes() + tact.tobytes() + gact.tobytes()
        if start in self.failed:  # the steps are deterministic: it would fail again
            return None
        free = free.copy()
        none = np.logical_not(free.any(axis=0))
        if self.m.parent is not None and none.any():
            # a cell no child holds: the ADMM has not spread the parent's count there yet
            # (cells of 1–3 persons under 50+ children). The first time, wait for more
            # iterations (cheap, and usually enough); if the ADMM offers the same set
            # again it is stuck: the cell is freed in every child that may hold it and
            # the active-set steps bound the negative ones
            if start not in self.uncovered:
                self.uncovered.add(start)
                return None
            free |= self.m.allowed & none[None, :]
        got = self._polish(free, tact, gact)
        if got is None:
            self.failed.add(start)
        return got

    def _polish(self, free: np.ndarray, tact: IDX, gact: IDX) -> F64 | None:
        free, tact, gact = free.copy(), tact.copy(), gact.copy()
        seen: set[bytes] = set()
        for _ in range(_POLISH_STEPS):
            key = np.packbits(free).tobytes() + tact.tobytes() + gact.tobytes()
            if key in seen:
                return None
            seen.add(key)
            sol = self._kkt(free, tact, gact)
            if sol is None:
                return None
            x, nu, mu_t, mu_g = sol
            ok, free, tact, gact = self._verify(x, nu, mu_t, mu_g, free, tact, gact)
            if ok:
                return np.where(free, np.maximum(x, 0.0), 0.0)
        return None

    def _rows(self, i: int, free_i: np.ndarray, tact: int, gact_i: IDX) -> tuple[F64, F64]:
        """Active rows of child ``i`` over its free cells: ``(C, b)``."""
        m = self.m
        rows, rhs = [], []
        if tact:
            rows.append(np.ones(int(free_i.sum())))
            rhs.append(self.tlo[i] if tact < 0 else self.thi[i])
        gid = m.hhgq[free_i]
        for g in np.flatnonzero(gact_i):
            rows.append((gid == g).astype(np.float64))
            rhs.append(m.lo[i, g] if gact_i[g] < 0 else m.hi[i, g])
        if not rows:
            return np.zeros((0, int(free_i.sum()))), np.zeros(0)
        return np.vstack(rows), np.asarray(rhs, dtype=np.float64)

    def _kkt(self, free: np.ndarray, tact: IDX, gact: IDX) -> tuple[F64, F64, F64, F64] | None:
        """Solve the KKT system of the active set (module docstring): every child's
        ``(H_FF)⁻¹`` by batched Cholesky, children in chunks of bounded memory, its active
        rows by a small Schur complement, the coupling's ``λ`` by one ``n × n`` system."""
        m, G = self.m, self.G
        k, n = m.k, m.n
        p = m.parent
        self.link = None
        if p is not None and np.any(~free.any(axis=0)):
            return None
        Fp, mask = padded_free(free)
        f = Fp.shape[1]
        Gf = np.where(mask, G[np.arange(k)[:, None], Fp], 0.0)  # (k, f)
        step = max(1, _CHILD_BATCH_ELEMENTS // max(1, f * f))
        # children in chunks of one class (one Hessian) and bounded memory
        chunks: list[tuple[F64, IDX]] = []
        for c in range(self.classes):
            who = np.flatnonzero(self.cls == c).astype(np.intp)
            chunks += [(self.Hs[c], who[a : a + step]) for a in range(0, who.size, step)]
        kept: dict[int, F64] = {}
        parts: dict[int, tuple[F64, F64, F64, F64]] = {}
        S = np.zeros((n, n))
        r = np.zeros(n) if p is None else p.astype(np.float64).copy()
        ns = self.shared_total.size
        Bm = np.zeros((n, ns))  # Σ_{i ∈ group} K_i 1: the shared rows against λ
        Dv = np.zeros(ns)  # Σ_{i ∈ group} 1ᵀ K_i 1
        ev = np.zeros(ns)  # Σ_{i ∈ group} 1ᵀ base_i
        nrows = (tact != 0).astype(np.intp) + (gact != 0).sum(axis=1)
        # children with one active row (most of them: a total row at a band end): their
        # Schur complements are scalars, taken for all of them at once (_OneRow)
        one = _OneRow.of(self, free, tact, gact, Fp, mask, (nrows == 1) & mask.any(axis=1))
        rowful = (nrows > 0) & ~one.on
        for c, (H, sl) in enumerate(chunks):
            Hinv = child_inverses(H, Fp[sl], mask[sl])
            if Hinv is None:
                return None
            K, base = Hinv, np.einsum("kab,kb->ka", Hinv, Gf[sl])
            js = np.flatnonzero(one.on[sl])
            if js.size:
                K = Hinv.copy()
                if js.size == sl.size:  # all of them (the usual case): in place
                    one.reduce(sl, K, base)
                else:
                    Kj, bj = K[js], base[js]  # copies
                    one.reduce(sl[js], Kj, bj)
                    K[js], base[js] = Kj, bj
            for j in np.flatnonzero(rowful[sl]):
                i = int(sl[j])
                nf = int(mask[i].sum())
                C, bvec = self._rows(i, free[i], int(tact[i]), gact[i])
                if not nf:  # its rows cannot be met: _verify frees their cells
                    continue
                if K is Hinv:
                    K = Hinv.copy()
                Hi = Hinv[j, :nf, :nf]
                HC = Hi @ C.T
                Sc_pinv = np.asarray(np.linalg.pinv(C @ HC, rcond=1e-12), dtype=np.float64)
                K[j, :nf, :nf] = Hi - HC @ Sc_pinv @ HC.T
                base[j, :nf] = K[j, :nf, :nf] @ Gf[i, :nf] + HC @ (Sc_pinv @ bvec)
                parts[i] = (HC, Sc_pinv, C, bvec)
            gs = self.shared[sl]
            if ns and np.any(gs >= 0):
                on = gs >= 0
                mo = mask[sl][on]
                K1 = np.einsum("kab,kb->ka", K[on], mo.astype(np.float64)) * mo
                gid = np.broadcast_to(gs[on][:, None], mo.shape)
                Fo = Fp[sl][on]
                Bm += np.bincount((Fo * ns + gid)[mo], weights=K1[mo], minlength=n * ns).reshape(
                    n, ns
                )
                Dv += np.bincount(gs[on], weights=K1.sum(axis=1), minlength=ns)
                ev += np.bincount(gs[on], weights=(base[on] * mo).sum(axis=1), minlength=ns)
            if p is not None:
                ms, Fs = mask[sl], Fp[sl]
                pair = ms[:, :, None] & ms[:, None, :]
                flat = (Fs[:, :, None] * n + Fs[:, None, :])[pair]
                S += np.bincount(flat, weights=K[pair], minlength=n * n).reshape(n, n)
                r -= np.bincount(Fs[ms], weights=base[ms], minlength=n)
            if k * f * f <= _CHILD_BATCH_ELEMENTS:  # every chunk's inverses kept
                kept[c] = Hinv
        lam: F64 = np.zeros(n)
        eta: F64 = np.zeros(self.shared_total.size)
        if self.shared_total.size:
            target = self.shared_total - ev
            lam, eta = _bordered(S if p is not None else None, r, Bm, Dv, target)
        elif p is not None:
            V = self._null_directions(free, tact, gact)
            lam = _gauge_solve(S, r, V)
            if V.shape[1] and V[0, 0] == 1.0 and np.all(V[:, 0] == 1.0):
                # every child's total row active: keep how the multipliers answer the
                # totals' right-hand sides (_TotalsLink), for _verify's retotal step
                self.link = _TotalsLink.of(S, V, Fp, mask, tact, one, parts, n)
        gl = np.where(mask, Gf + lam[Fp] + _at(eta, self.shared)[:, None], 0.0)
        xf = np.zeros((k, f))
        mu_t = np.zeros(k)
        mu_g = np.zeros((k, GROUPS))
        for c, (H, sl) in enumerate(chunks):
            Hinv = kept[c] if c in kept else child_inverses(H, Fp[sl], mask[sl])
            assert Hinv is not None  # it was invertible a moment ago
            xf[sl] = np.einsum("kab,kb->ka", Hinv, gl[sl])
            js = np.flatnonzero(one.on[sl])
            if js.size:
                xf[sl[js]] = one.solve(sl[js], xf[sl[js]], gl[sl[js]], mu_t, mu_g)
            for j in np.flatnonzero(rowful[sl]):
                i = int(sl[j])
                if i not in parts:
                    continue
                HC, Sc_pinv, C, bvec = parts[i]
                nf = int(mask[i].sum())
                mu = Sc_pinv @ (bvec - HC.T @ gl[i, :nf])
                xf[i, :nf] = Hinv[j, :nf, :nf] @ (gl[i, :nf] + C.T @ mu)
                q = 0
                if tact[i]:
                    mu_t[i] = mu[0]
                    q = 1
                for g in np.flatnonzero(gact[i]):
                    mu_g[i, g] = mu[q]
                    q += 1
        x = np.zeros((k, n))
        x[np.nonzero(mask)[0], Fp[mask]] = xf[mask]
        if self.classes == 1:
            xH = x @ self.H
        else:
            xH = np.zeros_like(x)
            for c in range(self.classes):
                who = self.cls == c
                xH[who] = x[who] @ self.Hs[c]
        nu = xH - G - lam[None, :] - mu_t[:, None] - mu_g[:, m.hhgq]
        nu -= _at(eta, self.shared)[:, None]
        return x, nu, mu_t, mu_g

    def _null_directions(self, free: np.ndarray, tact: IDX, gact: IDX) -> F64:
        """The directions ``v`` of ``λ`` that the active rows leave undetermined
        (``S v = 0``): ``1`` when every child with a free cell has its total row active
        (``(μ + c, λ − c)`` are multipliers too), the cells of hhgq ``g`` when every child
        with a free cell there has its row of ``g`` active. ``(n, d)``."""
        m = self.m
        has = free.any(axis=1)
        vecs = []
        if has.any() and np.all(tact[has] != 0):
            vecs.append(np.ones(m.n))
        for g in range(GROUPS):
            on = m.hhgq == g
            who = (free & on[None, :]).any(axis=1)
            if who.any() and np.all(gact[who, g] != 0):
                vecs.append(on.astype(np.float64))
        return np.stack(vecs, axis=1) if vecs else np.zeros((m.n, 0))

    def _consistent(
        self, tact: IDX, gact: IDX, mu_t: F64, mu_g: F64, free: np.ndarray
    ) -> tuple[IDX, IDX]:
        """An active set whose rows fix the total of every child with a free cell (or the
        persons of one hhgq of every child with a free cell there) contradicts the coupling
        unless their right-hand sides add up to the parent's: drop one such row
        (primal-dual active-set step for the coupled rows)."""
        m = self.m
        p = m.parent
        assert p is not None
        has = free.any(axis=1)
        if np.all(tact[has] != 0):
            rhs = np.where(tact < 0, self.tlo, self.thi)[has]
            tact = tact.copy()
            tact[has] = _drop_one(tact[has], mu_t[has], rhs, float(p.sum()))
            return tact, gact
        pg = m.group_sums(p[None, :])[0]
        cap = m.group_sums(free.astype(np.float64)) > 0
        gact = gact.copy()
        for g in range(GROUPS):
            who = cap[:, g]
            if who.any() and np.all(gact[who, g] != 0):
                rhs = np.where(gact[who, g] < 0, m.lo[who, g], m.hi[who, g])
                gact[who, g] = _drop_one(gact[who, g], mu_g[who, g], rhs, float(pg[g]))
        return tact, gact

    def _retotal(self, tact: IDX, mu_t: F64, free: np.ndarray) -> IDX | None:
        """The totals' rows of the next active set when every child's total row is active
        but their ends contradict the coupling (``Σ tᵢ ≠ Σ p``). Dropping one row (the
        smallest multiplier on the side that has to give) let that child absorb the whole
        excess, so the next step put its row back at the other end: one row moved per two
        steps (Georgia's 159 counties at 10⁷ persons: 11 persons of excess, ±0.1 bands,
        ≈ 110 steps; the 40-step limit ended it and the pass went to Clarabel). Instead
        the totals' own problem at this active set of cells is solved — ``min φ(t)`` over
        the bands and ``Σ tᵢ = Σ p``, ``φ`` quadratic with Hessian ``J``
        (:class:`_TotalsLink`), a ``k``-variable QP — and its bounds met with equality
        become the active rows, the others are dropped. ``None`` where it does not apply
        (no link, or nothing would change)."""
        link, p = self.link, self.m.parent
        if link is None or p is None:
            return None
        idx = np.flatnonzero(free.any(axis=1))
        t0 = np.where(tact < 0, self.tlo, self.thi)[idx]
        J = link.jacobian(idx)
        if J is None:
            return None
        lo = np.maximum(self.tlo[idx], 0.0) - t0
        hi = self.thi[idx] - t0
        u = _box_qp(self.m, J, mu_t[idx], lo, hi, float(p.sum() - t0.sum()))
        if u is None:
            return None
        width = np.maximum(1.0, hi - lo)
        tol = 1e-7 * width
        at_lo = (u <= lo + tol) & (self.tlo[idx] > 0)
        at_hi = (u >= hi - tol) & ~at_lo
        out = tact.copy()
        out[idx] = np.where(at_lo, -1, np.where(at_hi, 1, 0))
        return None if np.array_equal(out, tact) else out

    def _shift(
        self,
        tact: IDX,
        gact: IDX,
        mu_t: F64,
        mu_g: F64,
        eq_t: np.ndarray,
        free: np.ndarray,
        nu: F64,
    ) -> tuple[F64, F64, F64]:
        """With every child's total row active (or every child's row of one hhgq) the rows
        and the coupling are dependent: ``(μ + c, λ − c)`` are multipliers too. Pick the
        ``c`` nearest 0 that gives the active rows' multipliers their signs, if any. A
        child with no free cell and no active total row does not block the shift (its
        cells' multipliers ``ν`` move by ``+c`` and must stay ``≥ 0``: a floor on ``c``)."""
        m = self.m
        mu_t = mu_t.copy()
        with_free = free.any(axis=1)
        if with_free.any() and np.all(tact[with_free] != 0):
            rows = m.allowed.any(axis=1) & (tact != 0)
            idle = m.allowed.any(axis=1) & (tact == 0)
            floor = -np.inf
            if idle.any():
                floor = -float(np.where(m.allowed[idle], nu[idle], np.inf).min())
            c = _sign_shift(tact[rows], mu_t[rows], eq_t[rows], floor)
            mu_t[rows] += c
            if idle.any() and c:
                nu = nu.copy()
                nu[idle] += c
        mu_g = mu_g.copy()
        cap = m.group_sums(m.allowed.astype(np.float64)) > 0
        eq_g = m.lo == m.hi
        for g in range(GROUPS):
            who = cap[:, g]
            if who.any() and np.all(gact[who, g] != 0):
                mu_g[who, g] += _sign_shift(gact[who, g], mu_g[who, g], eq_g[who, g])
        return mu_t, mu_g, nu

    def _shared(self, tact: IDX, mu_t: F64, tot: F64, eq_t: np.ndarray) -> tuple[F64, IDX | None]:
        """The exact totals shared by several children: a group whose every child's total
        row is active has its multipliers determined up to a common shift ``(μ + c,
        η − c)`` — the shift nearest 0 that gives the rows their signs is taken; a group
        whose total is not met (its active rows' right-hand sides contradict it) loses
        the row with the smallest multiplier (the next active set, else ``None``)."""
        tp = self.tol_p
        mu_t = mu_t.copy()
        on = self.shared >= 0
        ns = self.shared_total.size
        members = np.bincount(self.shared[on], minlength=ns)
        got = np.bincount(self.shared[on], weights=tot[on], minlength=ns)
        has = self.m.allowed.any(axis=1)
        out = tact.copy()
        changed = False
        for g in range(ns):
            who = np.flatnonzero((self.shared == g) & has)
            if not who.size:
                continue
            total = float(self.shared_total[g])
            if abs(got[g] - total) > tp * max(1, int(members[g])):
                # the active rows fix the group's children's totals (total rows, or hhgq
                # rows covering a child's free cells) to a sum ≠ the group's: the total
                # row on the side that has to give with the smallest multiplier goes
                side = 1 if got[g] > total else -1
                cand = who[tact[who] == side]
                cand = cand if cand.size else who[tact[who] != 0]
                if cand.size:
                    out[cand[np.argmin(np.abs(mu_t[cand]))]] = 0
                    changed = True
            elif np.all(tact[who] != 0):
                mu_t[who] += _sign_shift(tact[who], mu_t[who], eq_t[who])
        return mu_t, (out if changed else None)

    def _verify(
        self, x: F64, nu: F64, mu_t: F64, mu_g: F64, free: np.ndarray, tact: IDX, gact: IDX
    ) -> tuple[bool, np.ndarray, IDX, IDX]:
        """KKT check; on failure the next active set (primal-dual active-set step)."""
        m = self.m
        tp, td = self.tol_p, self.tol_d
        act = m.allowed & ~free
        neg = free & (x < -tp)
        tot = np.where(free, x, 0.0).sum(axis=1)
        s = m.group_sums(np.where(free, x, 0.0))
        eq_t = self.tlo == self.thi
        if m.parent is not None:
            mu_t, mu_g, nu = self._shift(tact, gact, mu_t, mu_g, eq_t, free, nu)
        dual_bad = act & (nu < -td)
        if self.shared_total.size:
            mu_t, tact2 = self._shared(tact, mu_t, tot, eq_t)
            if tact2 is not None:
                return False, free, tact2, gact
            on = self.shared >= 0
            got = np.bincount(self.shared[on], weights=tot[on], minlength=self.shared_total.size)
            if np.any(np.abs(got - self.shared_total) > tp * max(1, m.k)):
                return False, free, tact, gact  # not met: the polish gives up (fallback)
        t_bad_sign = ((tact < 0) & (mu_t < -td) | (tact > 0) & (mu_t > td)) & ~eq_t
        # a row is activated at its lower end only if that end is positive (a lower end ≤ 0
        # is implied by x ≥ 0: its violation is the negativity, handled cell by cell)
        t_low = (tact == 0) & (tot < self.tlo - tp) & (self.tlo > 0)
        t_viol = t_low | (tact == 0) & (tot > self.thi + tp)
        eq_g = m.lo == m.hi
        g_bad_sign = ((gact < 0) & (mu_g < -td) | (gact > 0) & (mu_g > td)) & ~eq_g
        g_low = (gact == 0) & (s < m.lo - tp) & (m.lo > 0)
        g_viol = g_low | (gact == 0) & (s > m.hi + tp)
        # an active row the solve could not meet (no free cell under it: the least-squares
        # multipliers hide it) is not an answer either; its cells are freed
        t_miss = (tact != 0) & (np.abs(tot - np.where(tact < 0, self.tlo, self.thi)) > tp)
        g_miss = (gact != 0) & (np.abs(s - np.where(gact < 0, m.lo, m.hi)) > tp)
        unmet = m.allowed & (t_miss[:, None] | g_miss[:, m.hhgq])
        if m.parent is not None:
            gap = np.abs(np.where(free, x, 0.0).sum(axis=0) - m.parent)
            # summed over the cells too: active rows that contradict the coupling by δ
            # leave a gap of only δ/n in each cell once λ is solved along its free
            # directions (_gauge_solve)
            if float(gap.sum()) > tp * max(1, m.k):
                if np.any(unmet & ~free):
                    # a row without free cells leaves the coupling unmet too: its cells
                    # are freed first (dropping another child's row instead cycled)
                    return False, free | unmet, tact, gact
                tact2 = self._retotal(tact, mu_t, free)
                if tact2 is not None:
                    return False, free, tact2, gact
                tact2, gact2 = self._consistent(tact, gact, mu_t, mu_g, free)
                if np.array_equal(tact2, tact) and np.array_equal(gact2, gact):
                    # no coupled row to drop: the active rows leave some cells too few free
                    # children to meet the coupling; free every child there
                    free = free | (m.allowed & (gap > tp)[None, :])
                return False, free, tact2, gact2
        bad = (neg, dual_bad, t_bad_sign, t_viol, g_bad_sign, g_viol, t_miss, g_miss)
        if not any(b.any() for b in bad):
            return True, free, tact, gact
        # a negative cell under a row about to be activated at its lower end stays free (the
        # row, not the cell, is what was missing)
        keep = t_low[:, None] | g_low[:, m.hhgq]
        free = (free & ~(neg & ~keep)) | dual_bad
        free |= unmet
        tact = np.where(t_bad_sign, 0, tact)
        tact = np.where(t_viol, np.where(t_low, -1, 1), tact).astype(np.intp)
        gact = np.where(g_bad_sign, 0, gact)
        gact = np.where(g_viol, np.where(g_low, -1, 1), gact).astype(np.intp)
        return False, free, tact, gact


def implied_band(model: Model, tlo: F64, thi: F64) -> tuple[F64, F64]:
    """The children's total bands narrowed by what their hhgq bounds imply
    (``Σ_t lo_t ≤ 1ᵀxᵢ ≤ Σ_t hi_t``), for the children that have a band: the same feasible
    set, but a child whose hhgq rows fix its total (a state part without group quarters:
    ``lo₀ = hi₀``) gets a total row that agrees with them. Otherwise the active-set polish
    could hold both the total row at a band end and the hhgq row at a different value —
    two equal rows with different right-hand sides, which no active-set step repairs (the
    10⁵-person nation's State pass cycled on it and went to Clarabel)."""
    banded = np.isfinite(tlo) | np.isfinite(thi)
    if not banded.any():
        return tlo, thi
    floor = model.lo.sum(axis=1)
    cap = model.hi.sum(axis=1)  # inf where some hhgq has no upper bound
    lo = np.where(banded, np.maximum(tlo, floor), tlo)
    hi = np.where(banded, np.minimum(thi, cap), thi)
    return lo, np.maximum(hi, lo)


@dataclass(frozen=True)
class _OneRow:
    """The children of an active set with exactly one active row ``cᵢᵀxᵢ = bᵢ`` (their
    total row, or their row of one hhgq) and a free cell: the row over each child's padded
    free cells ``c`` ``(k, f)``, its right-hand side ``b``, which it is (``g``: −1 total,
    else the hhgq). Their Schur complements ``cᵀH_FF⁻¹c`` are scalars, so
    :meth:`StructuredPass._kkt` takes them for all these children at once (as the
    one-by-one pseudo-inverse did: ``1/s``, or 0 where ``s = 0``)."""

    on: np.ndarray
    c: F64
    b: F64
    g: IDX
    HC: F64  # (k, f): H_FF⁻¹c of each child, filled by reduce()
    inv: F64  # (k,): 1/s, 0 where s = 0

    @classmethod
    def of(
        cls,
        sp: StructuredPass,
        free: np.ndarray,
        tact: IDX,
        gact: IDX,
        Fp: IDX,
        mask: np.ndarray,
        on: np.ndarray,
    ) -> _OneRow:
        m = sp.m
        k = Fp.shape[0]
        g = np.where(tact != 0, -1, np.argmax(gact != 0, axis=1)).astype(np.intp)
        rows = np.arange(k)
        gi = np.maximum(g, 0)
        side = np.where(g < 0, tact, gact[rows, gi])
        b = np.where(
            g < 0,
            np.where(side < 0, sp.tlo, sp.thi),
            np.where(side < 0, m.lo[rows, gi], m.hi[rows, gi]),
        )
        c = mask & ((g < 0)[:, None] | (m.hhgq[Fp] == g[:, None]))
        c &= on[:, None]
        cf = c.astype(np.float64)
        return cls(on, cf, np.where(on, b, 0.0), g, np.zeros_like(cf), np.zeros(k))

    def reduce(self, ii: IDX, K: F64, base: F64) -> None:
        """Children ``ii``'s ``K = H⁻¹ − H⁻¹c cᵀH⁻¹ / s`` and ``base = H⁻¹g + H⁻¹c
        (b − cᵀH⁻¹g) / s`` (``s = cᵀH⁻¹c``), in place: ``K`` holds their ``H⁻¹`` and
        ``base`` their ``H⁻¹g`` on entry."""
        HC = np.einsum("kab,kb->ka", K, self.c[ii])
        sc = (self.c[ii] * HC).sum(axis=1)
        inv = np.where(sc != 0, 1.0 / np.where(sc != 0, sc, 1.0), 0.0)
        self.HC[ii], self.inv[ii] = HC, inv
        w = inv[:, None] * HC
        K -= w[:, :, None] * HC[:, None, :]
        base += w * (self.b[ii] - (self.c[ii] * base).sum(axis=1))[:, None]

    def solve(self, ii: IDX, xf: F64, gl: F64, mu_t: F64, mu_g: F64) -> F64:
        """The free values of children ``ii`` given ``λ`` (in ``gl``; ``xf = H⁻¹gl``
        without the row); their row's multiplier written to ``mu_t`` or ``mu_g``."""
        HC, inv = self.HC[ii], self.inv[ii]
        mu = inv * (self.b[ii] - (HC * gl).sum(axis=1))
        xf = xf + HC * mu[:, None]
        g = self.g[ii]
        mu_t[ii[g < 0]] = mu[g < 0]
        mu_g[ii[g >= 0], g[g >= 0]] = mu[g >= 0]
        return np.asarray(xf, dtype=np.float64)


@dataclass(frozen=True)
class _TotalsLink:
    """How an active set with every child's total row active answers its rows' right-hand
    sides ``t``: the totals' multipliers are affine in ``t``, ``μ(t) = μ(t₀) + J (t − t₀)``
    with ``J = diag(d) + ĤᵀA⁻¹Ĥ`` — ``d_i`` the child's own Schur term of its total row,
    ``ĥ_i`` (a row of ``Ĥ``, ``(k, n)``) how its free cells follow its total (``∂xᵢ/∂tᵢ``
    at fixed ``λ``) and ``A = S + αQQᵀ`` the coupling's system with the directions the rows
    leave free pinned (:func:`_gauge_solve`). ``J`` is the Hessian of the pass's objective
    as a function of the children's totals at this active set of cells: the totals'
    problem (:meth:`StructuredPass._retotal`) is a ``k``-variable QP."""

    hh: F64
    d: F64
    A: F64

    @classmethod
    def of(
        cls,
        S: F64,
        V: F64,
        Fp: IDX,
        mask: np.ndarray,
        tact: IDX,
        one: _OneRow,
        parts: dict[int, tuple[F64, F64, F64, F64]],
        n: int,
    ) -> _TotalsLink:
        k = Fp.shape[0]
        hh = np.zeros((k, n))
        d = np.zeros(k)
        rows = np.flatnonzero(one.on & (one.g < 0))
        if rows.size:
            ri, ci = np.nonzero(mask[rows])
            w = one.HC[rows] * one.inv[rows, None]
            hh[rows[ri], Fp[rows][ri, ci]] = w[ri, ci]
            d[rows] = one.inv[rows]
        for i, (HC, Sc_pinv, _, _) in parts.items():
            if tact[i]:  # the total row is the first of the child's rows
                nf = HC.shape[0]
                hh[i, Fp[i, :nf]] = HC @ Sc_pinv[:, 0]
                d[i] = Sc_pinv[0, 0]
        Q = sla.orth(V)
        alpha = max(1.0, float(np.trace(S)) / max(1, S.shape[0]))
        return cls(hh, d, S + alpha * (Q @ Q.T))

    def jacobian(self, idx: IDX) -> F64 | None:
        """``J`` on the children ``idx`` (``None`` if ``A`` is not positive definite)."""
        h = self.hh[idx]
        try:
            cf = sla.cho_factor(self.A, check_finite=False)
        except np.linalg.LinAlgError:
            return None
        Z = sla.cho_solve(cf, h.T, check_finite=False)
        J = h @ Z
        J[np.arange(idx.size), np.arange(idx.size)] += self.d[idx]
        return np.asarray(0.5 * (J + J.T), dtype=np.float64)


def _box_qp(model: Model, J: F64, q: F64, lo: F64, hi: F64, target: float) -> F64 | None:
    """``argmin ½uᵀJu + qᵀu`` over ``lo ≤ u ≤ hi``, ``Σ u = target`` (small, dense, ``J``
    positive semidefinite) by Clarabel (:func:`~privtab.topdown.solve_qp.run_clarabel`);
    ``None`` if it does not solve (the polish then drops one row as before)."""
    import clarabel
    import scipy.sparse as sp

    from privtab.topdown.solve_model import TopDownInfeasibleError, TopDownSolverError
    from privtab.topdown.solve_qp import run_clarabel

    m = q.size
    fin_hi, fin_lo = np.isfinite(hi), np.isfinite(lo)
    eye = sp.eye(m, format="csc")
    A = sp.vstack([sp.csc_matrix(np.ones((1, m))), eye[fin_hi], -eye[fin_lo]]).tocsc()
    b = np.concatenate([[target], hi[fin_hi], -lo[fin_lo]])
    cones = [clarabel.ZeroConeT(1), clarabel.NonnegativeConeT(int(b.size - 1))]
    P = sp.triu(sp.csc_matrix(J)).tocsc()
    try:
        return run_clarabel(model, P, q, A, b, cones, 1e-10)
    except (TopDownInfeasibleError, TopDownSolverError):
        return None


def shared_groups(model: Model) -> tuple[IDX, F64]:
    """``(shared, totals)``: each child's index among the exact totals shared by several
    children (the AIAN and non-AIAN parts of a state; −1: none) and those totals."""
    g = model.total_group
    k = model.k
    if not model.group_total.size:
        return np.full(k, -1, dtype=np.intp), np.zeros(0)
    members = np.bincount(g[g >= 0], minlength=model.group_total.size)
    multi = np.flatnonzero(members > 1)
    rank = np.full(model.group_total.size, -1, dtype=np.intp)
    rank[multi] = np.arange(multi.size)
    shared = np.where(g >= 0, rank[np.maximum(g, 0)], -1).astype(np.intp)
    return shared, model.group_total[multi].astype(np.float64)


def _at(values: F64, index: IDX) -> F64:
    """``values[index]`` with 0 where ``index`` is −1."""
    if not values.size:
        return np.zeros(index.size)
    return np.where(index >= 0, values[np.maximum(index, 0)], 0.0)


def _gauge_solve(S: F64, r: F64, V: F64) -> F64:
    """``S λ = r`` where ``S`` is singular along the known directions ``V``
    (:meth:`StructuredPass._null_directions`): ``(S + α QQᵀ) λ = r`` with ``Q`` an
    orthonormal basis of ``V`` — positive definite, and its solution solves ``S λ = r``
    with ``Qᵀλ = 0`` when ``r ⊥ V`` (the active rows agree with the coupling). Without
    it the Cholesky of a numerically singular ``S`` succeeded with multipliers of 10⁷
    whose cancellation missed the coupling by 10⁻³ (a county pass at 10⁶ persons cycled
    and went to Clarabel). No known direction: :func:`_ridge_solve`."""
    if not V.shape[1]:
        return _ridge_solve(S, r)
    Q = sla.orth(V)
    alpha = max(1.0, float(np.trace(S)) / max(1, S.shape[0]))
    return _ridge_solve(S + alpha * (Q @ Q.T), r)


def _ridge_solve(S: F64, r: F64) -> F64:
    """``S λ = r`` for a symmetric positive semidefinite ``S``: Cholesky, with a tiny ridge
    where ``S`` is singular (rows dependent on the coupling: ``λ`` is not unique, ``x``
    is; the multiplier shift of ``_verify`` restores the signs), else least squares."""
    n = S.shape[0]
    ridge = 0.0
    for _ in range(3):
        try:
            cf = sla.cho_factor(S + ridge * np.eye(n), check_finite=False)
            return np.asarray(sla.cho_solve(cf, r, check_finite=False), dtype=np.float64)
        except np.linalg.LinAlgError:
            ridge = 1e-12 * max(1.0, float(np.trace(S)) / max(1, n)) * (1e3 if ridge else 1.0)
    sol = sla.lstsq(S, r, lapack_driver="gelsy", check_finite=False)[0]
    return np.asarray(sol, dtype=np.float64)


def _bordered(S: F64 | None, r: F64, Bm: F64, Dv: F64, target: F64) -> tuple[F64, F64]:
    """``(λ, η)`` of the coupling (``S``; ``None`` at the root: no coupling) bordered by
    the shared exact totals: ``[[S, B], [Bᵀ, D]] [λ; η] = [r; target]``."""
    ns = Dv.size
    if S is None:
        eta = np.where(Dv > 0, target / np.where(Dv > 0, Dv, 1.0), 0.0)
        return np.zeros(r.size), eta
    n = S.shape[0]
    A = np.zeros((n + ns, n + ns))
    A[:n, :n] = S
    A[:n, n:] = Bm
    A[n:, :n] = Bm.T
    A[n:, n:] = np.diag(Dv)
    # singular whenever every child's total is fixed (the shared rows, the singles' rows
    # and the coupling are then dependent): a rank-revealing least-squares solve, as a
    # Cholesky of a numerically singular matrix gave multipliers whose cancellation lost
    # 0.05 persons of the totals
    sol = sla.lstsq(A, np.concatenate([r, target]), cond=1e-13, lapack_driver="gelsy",
                    check_finite=False)[0]  # fmt: skip
    sol = np.asarray(sol, dtype=np.float64)
    return sol[:n], sol[n:]


def _sign_shift(act: IDX, mu: F64, eq: np.ndarray, floor: float = -np.inf) -> float:
    """The ``c ≥ floor`` nearest 0 with ``μ + c ≥ 0`` on lower-active rows and ``≤ 0`` on
    upper-active ones (equality rows: any sign); 0 if there is none."""
    lo = -mu[(act < 0) & ~eq]
    hi = -mu[(act > 0) & ~eq]
    c_lo = max(float(lo.max()) if lo.size else -np.inf, floor)
    c_hi = float(hi.min()) if hi.size else np.inf
    return float(np.clip(0.0, c_lo, c_hi)) if c_lo <= c_hi else 0.0


def _drop_one(act: IDX, mu: F64, rhs: F64, total: float) -> IDX:
    """Rows ``act`` (one per child) all active fix ``Σ rhs``, but the coupling fixes the
    sum to ``total``: drop the row, on the side that has to give, with the smallest
    multiplier."""
    side = 1 if rhs.sum() > total else -1
    cand = np.flatnonzero(act == side)
    if not cand.size:
        return act
    out = act.copy()
    out[cand[np.argmin(np.abs(mu[cand]))]] = 0
    return out


def padded_free(free: np.ndarray) -> tuple[IDX, np.ndarray]:
    """Each child's free cells, padded: ``Fp[i, :|Fᵢ|]`` the free cells in order (then 0),
    ``mask`` which entries are real; ``(k, max |Fᵢ|)``."""
    sizes = free.sum(axis=1)
    f = int(sizes.max(initial=0))
    order = np.argsort(~free, axis=1, kind="stable")[:, :f]
    mask = np.arange(f)[None, :] < sizes[:, None]
    return np.where(mask, order, 0).astype(np.intp), mask


def child_inverses(H: F64, Fp: IDX, mask: np.ndarray) -> F64 | None:
    """``(H_FF)⁻¹`` of the children of :func:`padded_free`'s ``(Fp, mask)`` at once
    (``(k, f, f)``, padded with the identity), by batched LAPACK Cholesky (the positive
    definiteness check) and inverse; ``None`` if one is not numerically positive definite."""
    k, f = Fp.shape
    if f > _LOOP_ABOVE:  # large blocks: LAPACK's Cholesky inverse, one child at a time
        out = np.zeros((k, f, f))
        out[:, np.arange(f), np.arange(f)] = 1.0
        for i in range(k):
            nf = int(mask[i].sum())
            if not nf:  # no free cell (an empty child): its block stays the identity
                continue
            inv = spd_inverse(H[np.ix_(Fp[i, :nf], Fp[i, :nf])])
            if inv is None:
                return None
            out[i, :nf, :nf] = inv
        return out
    pair = mask[:, :, None] & mask[:, None, :]
    Hs = np.where(pair, H[Fp[:, :, None], Fp[:, None, :]], 0.0)
    Hs[:, np.arange(f), np.arange(f)] += ~mask
    if not k or not f:
        return Hs
    try:
        np.linalg.cholesky(Hs)
    except np.linalg.LinAlgError:
        return None
    return np.asarray(np.linalg.inv(Hs), dtype=np.float64)


def spd_inverse(a: F64) -> F64 | None:
    """The inverse of a symmetric positive definite matrix by LAPACK's Cholesky
    (``potrf``, ``potri``) — ``None`` if it is not positive definite."""
    from scipy.linalg import lapack

    c, info = lapack.dpotrf(a, lower=True, clean=False, overwrite_a=False)
    if info != 0:
        return None
    inv, info = lapack.dpotri(c, lower=True, overwrite_c=True)
    if info != 0:
        return None
    low = np.tril(inv)
    return np.asarray(low + np.tril(inv, -1).T, dtype=np.float64)


def _threshold(values: F64, b: float) -> float:
    """``τ`` with ``Σ max(values − τ, 0) = b`` (``b > 0``; no values: 0)."""
    if not values.size:
        return 0.0
    u = np.sort(values)[::-1]
    css = np.cumsum(u)
    j = np.arange(1, u.size + 1)
    cond = u - (css - b) / j > 0
    r = int(np.flatnonzero(cond)[-1]) if cond.any() else 0
    return float((css[r] - b) / (r + 1))
