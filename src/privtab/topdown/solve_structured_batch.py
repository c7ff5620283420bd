"""Internal: the structured solver's ADMM for many problems at once (stacked arrays).

:class:`~privtab.topdown.solve_structured.StructuredPass` iterates one problem: each ADMM
iteration is one ``(k, n) × (n, n)`` product and a dozen elementwise operations on
``(k, n)`` arrays — at a block group's size (33 children, ~200 masked cells) the product
takes ~60 µs and numpy's per-call overhead ~160 µs. :func:`solve_batch` runs the *same*
iterations for a batch of problems on arrays stacked along a leading axis and padded to the
batch's largest ``k`` and ``n`` (padded children and cells have no variables and a zero
inverse block, so they stay exactly 0 and change no real entry): one batched product and
one set of elementwise operations per iteration for the whole batch.

Problems whose children fall in several classes of weights (siblings' variances differ)
are batched only with each other: their stacks hold one ``M_c⁻¹`` per class and the
coupling's correction ``S⁻¹M_c⁻¹`` (:mod:`privtab.topdown.solve_structured`); one-class
problems keep the one-matrix iteration unchanged. Exact totals shared by several children
are a projection of their totals onto the bands and the group's sum.

Each problem keeps its own ``ρ``, ``σ``, bands, bounds and coupling; its convergence test
and its polish are its own (:meth:`StructuredPass.polish`, which certifies the KKT
conditions), done when its active set repeats, exactly as in the one-problem loop; a
problem that is certified leaves the batch. So every solution returned is a verified
optimum of its own problem — the batch changes how fast, not what (the iterates equal the
one-problem ones up to floating-point summation order). Problems not certified within the
iteration limit are returned as ``None`` and the caller solves them alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from privtab.topdown.solve_model import F64, GROUPS, IDX
from privtab.topdown.solve_structured import (
    _ALPHA,
    MAX_POLISH,
    AdmmSetup,
    StructuredPass,
    _threshold,
)

__all__: list[str] = []

#: Upper bound on the stacked inverses (elements) of one batch: 10⁶ float64 = 8 MB (larger
#: stacks measured slower: they leave the cache; a tract-sized problem (n ≈ 700) goes alone).
MAX_BATCH_ELEMENTS = 1_000_000
#: Iterations between two looks at the active sets (the one-problem loop: 10). Measured on
#: synthetic block groups: 37 instead of 47 iterations to certification, 1.75 instead of
#: 1.2 polishes; 17% less time. (Float32 iterates, 19% less again, were tried and dropped:
#: on 1 of 200 block groups their rounding kept tiny entries of ``z`` flickering around 0,
#: the active set never settled and the problem took 20 s instead of 0.1 s.)
CHECK_EVERY = 5
#: Iterations after which a problem leaves the batch uncertified (and is solved alone by
#: the one-problem path, with its own limit and fallback): bounds the cost of a problem
#: whose active set the batch cannot settle. Certified problems take 20–120 iterations.
BATCH_MAX_ITER = 600


class _Stack:
    """The padded, stacked data of the problems of one batch (module docstring)."""

    def __init__(self, passes: Sequence[StructuredPass], setups: Sequence[AdmmSetup]) -> None:
        B = len(passes)
        K = max(sp.m.k for sp in passes)
        N = max(sp.m.n for sp in passes)
        #: classes of children (several when siblings' variances differ; batches() never
        #: mixes one-class problems with others, so their iterations are unchanged)
        C = max(sp.classes for sp in passes)
        self.C = C
        self.k = np.array([sp.m.k for sp in passes], dtype=np.float64)
        self.n = [sp.m.n for sp in passes]
        self.Minv = np.zeros((B, C, N, N))
        self.MinvG = np.zeros((B, K, N))
        self.Minv1 = np.zeros((B, N)) if C == 1 else np.zeros((B, K, N))
        self.P = np.zeros((B, C, N, N)) if C > 1 else np.zeros((B, 0, 0, 0))
        self.cmask = np.zeros((B, C, K, 1))
        self.p = np.zeros((B, N))
        self.has_p = np.zeros(B)
        self.rho = np.zeros(B)
        self.sigma = np.zeros(B)
        self.cm = np.zeros((B, K))
        self.allowed = np.zeros((B, K, N), dtype=bool)
        self.tlo = np.full((B, K), -np.inf)
        self.thi = np.full((B, K), np.inf)
        self.onehot = np.zeros((B, N, GROUPS))
        self.lo = np.zeros((B, K, GROUPS))
        self.hi = np.full((B, K, GROUPS), np.inf)
        self.starts = np.zeros((B, GROUPS + 1), dtype=np.intp)
        ns = max(sp.shared_total.size for sp in passes)
        self.shared = np.full((B, K), -1, dtype=np.intp)  # exact totals of several children
        self.shared_total = np.zeros((B, ns))
        for b, (sp, su) in enumerate(zip(passes, setups, strict=True)):
            m, k, n = sp.m, sp.m.k, sp.m.n
            cl = sp.classes
            self.Minv[b, :cl, :n, :n] = su.Minv
            self.MinvG[b, :k, :n] = su.MinvG
            if C == 1:
                self.Minv1[b, :n] = su.Minv1[0]
            else:
                self.Minv1[b, :k, :n] = su.Minv1[sp.cls]
                P = su.P if su.P is not None else np.eye(n)[None, :, :] / k
                self.P[b, :cl, :n, :n] = P
            self.cmask[b, sp.cls, np.arange(k), 0] = 1.0
            if m.parent is not None:
                self.p[b, :n] = m.parent
                self.has_p[b] = 1.0
            self.rho[b], self.sigma[b] = su.rho, su.sigma
            self.cm[b, :k] = 1.0
            self.allowed[b, :k, :n] = m.allowed
            self.tlo[b, :k], self.thi[b, :k] = sp.tlo, sp.thi
            self.onehot[b, np.arange(n), m.hhgq] = 1.0
            self.lo[b, :k], self.hi[b, :k] = m.lo, m.hi
            self.starts[b] = sp.starts
            self.shared[b, :k] = sp.shared
            self.shared_total[b, : sp.shared_total.size] = sp.shared_total

    def class_rows(self) -> list[IDX]:
        """The first problem's children of each class (the x-update of a problem alone:
        each class's rows times its own ``M_c⁻¹`` instead of every row times every class's
        and a mask — a state's counties have two or three classes, so 2–3× the product)."""
        return [np.flatnonzero(self.cmask[0, c, :, 0]) for c in range(self.C)]

    def take(self, keep: IDX) -> None:
        """Keep only the problems ``keep`` (in this order)."""
        for name, value in vars(self).items():
            if isinstance(value, np.ndarray):
                setattr(self, name, value[keep])
            elif isinstance(value, list):
                setattr(self, name, [value[i] for i in keep])


def _project(st: _Stack, w: F64) -> tuple[F64, IDX]:
    """:meth:`StructuredPass.project` for every problem of the stack."""
    z = np.where(st.allowed, np.maximum(w, 0.0), 0.0)
    gact = np.zeros(st.lo.shape, dtype=np.intp)
    s = np.matmul(z, st.onehot)
    bad = (s < st.lo - 1e-12) | (s > st.hi + 1e-12)
    for b, i, g in zip(*np.nonzero(bad), strict=True):
        sl = slice(int(st.starts[b, g]), int(st.starts[b, g + 1]))
        ok = st.allowed[b, i, sl]
        low = bool(s[b, i, g] < st.lo[b, i, g])
        tau = _threshold(w[b, i, sl][ok], float(st.lo[b, i, g] if low else st.hi[b, i, g]))
        z[b, i, sl] = np.where(ok, np.maximum(w[b, i, sl] - tau, 0.0), 0.0)
        gact[b, i, g] = -1 if low else 1
    return z, gact


def _project_shared(st: _Stack, w: F64, s: F64) -> F64:
    """The s-update of children whose exact total is shared with siblings: the Euclidean
    projection of their group's ``w`` onto its bands and ``Σ s = total``
    (:func:`privtab.topdown.solve_units.project_sum`); other children keep ``s``."""
    from privtab.topdown.solve_model import compact
    from privtab.topdown.solve_units import project_sum

    on = st.shared >= 0
    if not on.any():
        return s
    b = np.nonzero(on)[0]
    present, seg = compact(b * st.shared_total.shape[1] + st.shared[on])
    vals = w[on]
    z, _, _ = project_sum(
        np.ones(vals.size), vals, st.tlo[on], st.thi[on], seg, st.shared_total.ravel()[present]
    )
    out = s.copy()
    out[on] = z
    return out


def solve_batch(
    passes: Sequence[StructuredPass], *, max_iter: int | None = None
) -> list[F64 | None]:
    """The certified optimum of every problem (``None``: not certified within ``max_iter``
    iterations — default :data:`BATCH_MAX_ITER` — or :data:`MAX_POLISH` failed polishes;
    see the module docstring)."""
    limit = BATCH_MAX_ITER if max_iter is None else max_iter
    out: list[F64 | None] = [None] * len(passes)
    setups: dict[int, AdmmSetup] = {}
    for i, sp in enumerate(passes):
        if sp.m.n == 0:
            out[i] = np.zeros((sp.m.k, 0))
        elif (su := sp.admm_setup()) is not None:
            setups[i] = su
    live = sorted(setups)
    if not live:
        return out
    st = _Stack([passes[i] for i in live], [setups[i] for i in live])
    idx = np.array(live, dtype=np.intp)
    B, K, N = st.MinvG.shape
    z = np.zeros((B, K, N))
    u = np.zeros((B, K, N))
    s = np.clip(np.zeros((B, K)), st.tlo, st.thi)
    v = np.zeros((B, K))
    tact = np.zeros((B, K), dtype=np.intp)
    last: list[tuple[bytes, bytes, bytes] | None] = [None] * B
    failed = [0] * B
    one = st.C == 1
    for it in range(1, limit + 1):
        rho3 = st.rho[:, None, None]
        x: F64
        if one:
            x = np.matmul(z - u, st.Minv[:, 0])
        elif idx.size == 1:  # one problem (a top level's): each class's rows by its M_c⁻¹
            d = z - u
            x = np.zeros_like(d)
            for c, rows in enumerate(st.class_rows()):
                x[0, rows] = d[0, rows] @ st.Minv[0, c]
        else:
            d = z - u
            x = sum(
                (st.cmask[:, c] * np.matmul(d, st.Minv[:, c]) for c in range(st.C)),
                np.zeros_like(d),
            )
        x *= rho3
        x += st.MinvG
        if one:
            x += (st.sigma[:, None] * (s - v))[:, :, None] * st.Minv1[:, None, :]
        else:
            x += (st.sigma[:, None] * (s - v))[:, :, None] * st.Minv1
        x *= st.cm[:, :, None]
        if one:
            gap = (st.p - x.sum(axis=1)) * (st.has_p / st.k)[:, None]
            x += st.cm[:, :, None] * gap[:, None, :]
        else:  # x_i += (p − Σ x) S⁻¹ M_{c(i)}⁻¹
            raw = ((st.p - x.sum(axis=1)) * st.has_p[:, None])[:, None, :]
            for c in range(st.C):
                x += st.cmask[:, c] * np.matmul(raw, st.P[:, c])
        xh = _ALPHA * x + (1 - _ALPHA) * z
        z, gact = _project(st, xh + u)
        u += xh - z
        sh = _ALPHA * x.sum(axis=2) + (1 - _ALPHA) * s
        s = np.clip(sh + v, st.tlo, st.thi)
        if st.shared_total.size:
            s = _project_shared(st, sh + v, s)
        v += sh - s
        tact = np.where(s <= st.tlo, -1, np.where(s >= st.thi, 1, 0)).astype(np.intp)
        if it % CHECK_EVERY:
            continue
        done: list[int] = []
        for b in range(idx.size):
            sp = passes[int(idx[b])]
            k, n = sp.m.k, sp.m.n
            free = z[b, :k, :n] > sp.tol_p  # as in StructuredPass.solve
            key = (np.packbits(free).tobytes(), tact[b, :k].tobytes(), gact[b, :k].tobytes())
            if key == last[b]:
                sol = sp.polish(free, tact[b, :k], gact[b, :k])
                if sol is not None:
                    out[int(idx[b])] = sol
                    done.append(b)
                    continue
                failed[b] += 1
                if failed[b] >= MAX_POLISH:  # leaves uncertified: solved alone
                    done.append(b)
                    continue
            last[b] = key
        if done:
            keep = np.setdiff1d(np.arange(idx.size), done).astype(np.intp)
            if not keep.size:
                return out
            st.take(keep)
            idx = idx[keep]
            z, u, s, v, tact = z[keep], u[keep], s[keep], v[keep], tact[keep]
            last = [last[int(b)] for b in keep]
            failed = [failed[int(b)] for b in keep]
    return out


def batches(passes: Sequence[StructuredPass], size: int) -> list[list[int]]:
    """Indices of ``passes`` grouped into batches of at most ``size`` problems of similar
    ``n`` (sorted), each within :data:`MAX_BATCH_ELEMENTS` of stacked inverse."""
    order = sorted(
        range(len(passes)),
        key=lambda i: (passes[i].classes > 1, passes[i].m.n, passes[i].m.k),
    )
    out: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        n = passes[i].m.n
        several = passes[i].classes > 1
        per = n * n * (1 if not several else 2 * passes[i].classes)
        if cur and (
            len(cur) >= size
            or (len(cur) + 1) * per > MAX_BATCH_ELEMENTS
            or several != (passes[cur[0]].classes > 1)
        ):
            out.append(cur)
            cur = []
        cur.append(i)
    if cur:
        out.append(cur)
    return out
