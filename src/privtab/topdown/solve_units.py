"""Internal: the exact L2 step of the units histogram (H1: vacant, occupied), for one
problem or for many parents at once.

**The problem.** The units run measures ``detailed`` (the two cells) and holds every
geounit's housing units invariant, so each child ``i`` has the exact total ``Tᵢ``; its
histogram is ``(Tᵢ − oᵢ, oᵢ)`` with ``oᵢ`` the occupied units. The pass's objective
``Σ_i wᵢ ((Tᵢ − oᵢ − y_{i0})² + (oᵢ − y_{i1})²)`` (``wᵢ`` the child's own ``1/σ²``, which
differs between siblings after the spine's bypass; a ``total`` term adds a constant) is
``Σ_i 2wᵢ (oᵢ − cᵢ)²`` plus a constant, ``cᵢ = (Tᵢ − y_{i0} + y_{i1})/2``, over
``0 ≤ oᵢ ≤ Tᵢ`` with ``Σ_i oᵢ = p₁`` (the parent's occupied units; the vacant cell's
coupling then holds because ``Σ Tᵢ = p₀ + p₁``, checked before). Without exact totals (only
``detailed`` measured) each cell is the same kind of problem on its own:
``min Σ_i wᵢ (x_{ic} − y_{ic})²`` over ``x_{ic} ≥ 0`` with ``Σ_i x_{ic} = p_c``.

**The closed form.** Both are ``min Σ_j a_j (z_j − c_j)²`` over ``l_j ≤ z_j ≤ u_j`` with
``Σ_j z_j = S`` — a weighted projection whose KKT conditions give
``z_j(μ) = clip(c_j + μ/a_j, l_j, u_j)`` for one multiplier ``μ``; ``Σ_j z_j(μ)`` is
piecewise linear and non-decreasing in ``μ`` with breakpoints ``a_j(l_j − c_j)`` and
``a_j(u_j − c_j)``, so ``μ`` is found exactly by sorting the breakpoints and interpolating
on the segment that reaches ``S`` (Helgason, Kennington & Lall 1980; Brucker 1984,
"An O(n) algorithm for quadratic knapsack problems"). :func:`project_sum` does this for
many independent problems at once (one sort of all breakpoints by problem and value,
segmented cumulative sums): the children problems of every parent of a slice in a few
numpy calls. At the root (no parent) each ``z_j`` is ``clip(c_j, l_j, u_j)``.

**Checked, not trusted.** The KKT conditions are verified on every problem (the sum within
``1e-9`` of the parent's scale, every ``z_j`` equal to ``clip(c_j + μ/a_j, l_j, u_j)``
within that tolerance); a problem that fails them — none has in testing — returns ``None``
and goes to Clarabel, counted as a fallback. The tests compare with Clarabel and OSQP on
many random problems. Problems this closed form does not cover (tolerance bands, a
``total`` term without exact totals, exact totals shared by several children, some
children with exact totals and others without) go to the generic path and say so.

**Measured** (the captured problems of a seeded 10⁵-person synthetic nation, solved in
slices of 32 by ``solve_children_batch`` before and after, in turn, one BLAS thread, load
25–30 on the shared 2-core machine; CPU seconds): see the figures in docs/topdown.md §8 —
the units run's block and block-group levels about 8× and 6× faster than with Clarabel,
whose setup dominated a two-cell problem. On some problems Clarabel (with its polish)
stopped short of the optimum (a child with one housing unit left at 0.9989 / 0.0011
instead of 1 / 0); OSQP at ε 10⁻⁹ agrees with the closed form.

Privacy: post-processing of the noisy measurements and public invariants (no privacy
cost; the semantics seed §8).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from privtab.topdown.solve_model import F64, IDX, Band, Model, Term

__all__: list[str] = []

#: The solver named in the diagnostics of a units pass solved here.
UNITS_SOLVER = "units closed form"


@dataclass(frozen=True)
class UnitsCase:
    """One units pass in the closed form's terms: the entries ``z`` of its independent
    projections (``seg`` says which, ``-1``: unconstrained, at the root) with weights
    ``a``, targets ``c``, bounds ``[l, u]``, the sums ``S`` per projection, and how the
    children's masked values are rebuilt from ``z``."""

    a: F64
    c: F64
    lo: F64
    hi: F64
    seg: IDX
    sums: F64
    totals: F64 | None  # (k,) exact totals (z = the occupied cell), or None (z = the cells)
    tol: float


def units_case(model: Model, terms: Sequence[Term], bands: Sequence[Band]) -> UnitsCase | None:
    """The closed form's data for one pass of a units problem, or ``None`` if the pass is
    not of a form it covers (module docstring)."""
    if model.histogram != "units" or bands or not model.allowed.all():
        return None
    names = [t.name for t in terms]
    if sorted(names) not in (["detailed"], ["detailed", "total"]):
        return None
    det = next(t for t in terms if t.name == "detailed")
    k, n = model.k, model.n
    w = det.child_weights(k)
    if np.any(w <= 0):
        return None
    g = model.total_group
    singles = model.group_total.size == k and np.array_equal(np.sort(g), np.arange(k))
    tol = 1e-9 * model.scale
    y = det.answers[:, det.index]  # (k, n): each masked cell's answer
    has_p = model.parent is not None
    if singles:
        T = model.group_total[g].astype(np.float64)
        if n < 2:  # one masked cell (or none): each child's histogram is its total there
            return UnitsCase(
                np.ones(0), np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0, np.intp),
                np.zeros(0), T, tol,
            )  # fmt: skip
        c = (T - y[:, 0] + y[:, 1]) / 2.0
        seg = np.zeros(k, np.intp) if has_p else np.full(k, -1, np.intp)
        sums = np.array([model.parent[1]]) if model.parent is not None else np.zeros(0)
        return UnitsCase(2.0 * w, c, np.zeros(k), T, seg, sums, T, tol)
    if model.group_total.size or "total" in names:
        return None
    cells = np.broadcast_to(np.arange(n, dtype=np.intp)[None, :], (k, n)).ravel()
    seg = cells.copy() if has_p else np.full(k * n, -1, np.intp)
    sums = model.parent if model.parent is not None else np.zeros(0)
    a = np.broadcast_to(w[:, None], (k, n)).ravel().copy()
    inf = np.full(k * n, np.inf)
    return UnitsCase(a, y.ravel().copy(), np.zeros(k * n), inf, seg, sums.copy(), None, tol)


def project_sum(
    a: F64, c: F64, lo: F64, hi: F64, seg: IDX, sums: F64
) -> tuple[F64, F64, np.ndarray]:
    """``(z, μ, ok)``: for every projection ``s`` (entries ``seg == s``) the minimiser of
    ``Σ a_j (z_j − c_j)²`` over ``lo ≤ z ≤ hi`` with ``Σ z_j = sums[s]`` (entries with
    ``seg == −1``: no sum, ``z = clip(c, lo, hi)``), its multiplier ``μ[s]`` and whether
    it met the KKT conditions (module docstring). ``a > 0``; ``Σ lo ≤ sums ≤ Σ hi``."""
    nseg = sums.size
    z = np.clip(c, lo, hi)
    mu = np.zeros(nseg)
    tied = seg >= 0
    if not tied.any():
        return z, mu, np.ones(nseg, dtype=bool)
    j = np.flatnonzero(tied)
    aj, cj, lj, uj, sj = a[j], c[j], lo[j], hi[j], seg[j]
    # events: the lower breakpoints (slope +1/a from there) and the finite upper ones (−1/a)
    up = np.isfinite(uj)
    bp = np.concatenate([aj * (lj - cj), (aj * (uj - cj))[up]])
    ds = np.concatenate([1.0 / aj, -1.0 / aj[up]])
    es = np.concatenate([sj, sj[up]])
    order = np.lexsort((bp, es))
    bp, ds, es = bp[order], ds[order], es[order]
    first = np.searchsorted(es, np.arange(nseg))
    slope = _segmented_cumsum(ds, es, first)
    nxt = np.append(bp[1:], bp[-1])
    last = np.append(es[1:] != es[:-1], True)
    inc = np.where(last, 0.0, slope * (nxt - bp))
    base = np.bincount(sj, weights=lj, minlength=nseg)  # Σ lo: the value left of all events
    f = base[es] + _segmented_cumsum(inc, es, first) - inc  # Σ z at each event
    reach = f <= sums[es]
    # the last event of each projection whose value does not exceed the sum
    pos = np.where(reach, np.arange(bp.size), -1)
    r = np.maximum.reduceat(pos, first) if bp.size else np.zeros(0, np.intp)
    r = np.maximum(r, first)
    gap = sums - f[r]
    mu = bp[r] + np.where(slope[r] > 0, gap / np.where(slope[r] > 0, slope[r], 1.0), 0.0)
    zj = np.clip(cj + mu[sj] / aj, lj, uj)
    # one Newton step on the free entries takes the rounding residue of the sum out
    free = (zj > lj) & (zj < uj)
    resid = sums - np.bincount(sj, weights=zj, minlength=nseg)
    inv = np.bincount(sj, weights=np.where(free, 1.0 / aj, 0.0), minlength=nseg)
    step = np.where(inv > 0, resid / np.where(inv > 0, inv, 1.0), 0.0)
    mu = mu + step
    zj = np.where(free, np.clip(zj + step[sj] / aj, lj, uj), zj)
    z[j] = zj
    return z, mu, _kkt_ok(zj, aj, cj, lj, uj, sj, mu, sums)


def _segmented_cumsum(v: F64, seg: IDX, first: IDX) -> F64:
    """Cumulative sums of ``v`` restarting at every projection (``seg`` sorted)."""
    cs = np.cumsum(v)
    start = np.where(first > 0, cs[np.maximum(first - 1, 0)], 0.0)
    return np.asarray(cs - start[seg], dtype=np.float64)


def _kkt_ok(z: F64, a: F64, c: F64, lo: F64, hi: F64, seg: IDX, mu: F64, sums: F64) -> np.ndarray:
    """Per projection: the sum met and every entry ``clip(c + μ/a, lo, hi)`` (relative
    to the projection's scale, ``1e-9``)."""
    nseg = sums.size
    scale = np.maximum(1.0, np.abs(sums))
    tol = 1e-9 * scale
    total = np.bincount(seg, weights=z, minlength=nseg)
    ok = np.abs(total - sums) <= tol * max(1, int(np.bincount(seg).max(initial=1)))
    want = np.clip(c + mu[seg] / a, lo, hi)
    bad = np.abs(z - want) > tol[seg]
    ok &= np.bincount(seg, weights=bad.astype(np.float64), minlength=nseg) == 0
    return np.asarray(ok)


def rebuild(model: Model, case: UnitsCase, z: F64) -> F64:
    """The children's masked values ``(k, n)`` from the projections' ``z``."""
    k, n = model.k, model.n
    if case.totals is None:
        return np.maximum(z.reshape(k, n), 0.0)
    if n == 0:
        return np.zeros((k, 0))
    if n == 1:
        return case.totals[:, None].copy()
    return np.stack([np.maximum(case.totals - z, 0.0), z], axis=1)


def solve_units(
    models: Sequence[Model], terms: Sequence[Sequence[Term]], bands: Sequence[Sequence[Band]]
) -> list[F64 | None]:
    """The certified L2 optimum of each units pass (many parents' problems in one call;
    ``None`` where the closed form does not apply or was not certified: the caller then
    solves that one by the generic path)."""
    out: list[F64 | None] = [None] * len(models)
    cases: list[tuple[int, UnitsCase]] = []
    for i, (m, t, b) in enumerate(zip(models, terms, bands, strict=True)):
        case = units_case(m, t, b)
        if case is not None:
            cases.append((i, case))
    if not cases:
        return out
    offsets = np.cumsum([0] + [cs.sums.size for _, cs in cases])
    seg = np.concatenate(
        [
            np.where(cs.seg >= 0, cs.seg + off, -1)
            for (_, cs), off in zip(cases, offsets, strict=False)
        ]
    ).astype(np.intp)
    a, c, lo, hi = (
        np.concatenate([getattr(cs, f) for _, cs in cases]) for f in ("a", "c", "lo", "hi")
    )
    sums = np.concatenate([cs.sums for _, cs in cases])
    z, _, ok = project_sum(a, c, lo, hi, seg, sums)
    start = 0
    for (i, cs), off in zip(cases, offsets, strict=False):
        size = cs.a.size
        zi = z[start : start + size]
        start += size
        if cs.sums.size and not ok[off : off + cs.sums.size].all():
            continue
        out[i] = rebuild(models[i], cs, zi)
    return out
