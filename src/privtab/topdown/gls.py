"""The tree GLS: unbiased estimates and exact standard deviations for every geounit from
TopDown's noisy measurements (issue 30, deliverable 1).

**The model.** A hierarchy of geounits (a tree: root, parent map); each geounit ``g`` has a
histogram ``x_g`` (for TopDown the 2,016 cells of :mod:`privtab.topdown.histogram`) and a
parent's histogram is the sum of its children's (``x_p = Σ_c x_c``; the leaves' histograms
are the unknowns). For some geounits and queries ``F`` (Kronecker products of one factor
per attribute, :class:`KronQuery`; a general matrix is the one-attribute case) we hold noisy
answers ``y = F x_g + e`` whose noise is independent across cells, queries and geounits,
unbiased, with a known variance ``v`` per (geounit, query). Some geounits also carry exact
linear equality constraints ``R x_g = c`` (:class:`Constraints`).

**The estimate.** :func:`tree_gls` computes, for every geounit and every cell of any linear
query, the generalized least squares estimate from *all* measurements in the tree subject to
the constraints — the best linear unbiased estimate (Gauss–Markov: among estimators linear
in the measurements that are unbiased for every histogram satisfying the constraints, it
has the least variance) — with its exact variance. Estimates are consistent by
construction: every parent's estimate is exactly the sum of its children's. No privacy cost
(post-processing of the noisy measurements). Negative and fractional estimates are kept:
rounding or clipping would bias them.

**The algorithm** (Cumings-Menon, *Full-Information Estimation for Hierarchical Data*,
arXiv 2404.13164, Census code ``uscensusbureau/DAS_2020_GLS_Uncertainty_Evaluation``; the
two-pass form of Hay et al. 2010's hierarchical "boosting"): linear in the number of
geounits, two passes.

* Bottom-up: each geounit's *subtree estimate* ``x̂_g`` (from the measurements in its
  subtree only) with covariance ``C_g``. A leaf: ``C = I_g⁻¹``, ``x̂ = C b_g`` with the
  information ``I_g = Σ_q F_qᵀF_q/v_q`` and score ``b_g = Σ_q F_qᵀ y_q/v_q``. A parent: its
  children's estimates sum to ``s = Σ x̂_c`` with covariance ``S = Σ C_c``; combined with the
  parent's own measurements, ``C = (𝟙 + S I_g)⁻¹ S`` and ``x̂ = (𝟙 + S I_g)⁻¹ (S b_g + s)``
  (the inverse-covariance combination ``(I_g + S⁻¹)⁻¹``, written so that neither ``I_g``
  nor ``S`` need be invertible). Then each exact constraint of the geounit conditions the
  estimate (a noiseless Kalman update ``x̂ += K(e − E x̂)``, ``C −= K E C``,
  ``K = C E (E C E)⁺`` with ``E`` the constraint's projector and ``e`` its minimum-norm
  solution).
* Top-down: the root's final estimate is its subtree estimate. A child of ``p``:
  ``x̃_c = x̂_c + A_c (x̃_p − s_p)``, ``V_c = C_c + A_c (V_p − S_p) A_cᵀ`` with
  ``A_c = C_c S_p⁺`` (the children's subtree estimates conditioned on their sum; a single
  child takes its parent's estimate, ``A = 𝟙``). Summing over siblings gives ``x̃_p``.

Every matrix here is in the algebra of :mod:`privtab.topdown.blocks` (Kronecker structure:
a 2,016-cell covariance is a few small blocks), batched over the geounits of a level.

**Equality constraints, as the Census product treats them.** The Census estimator
(``main_two_pass_alg.py``) turns the invariant totals (``total`` at the geolevels whose
totals are invariant: the states) and every ``≤`` constraint whose bound is 0 (a GQ type
with no facility in the geounit, no minors in nursing facilities) into extra measurements
of variance 2⁻¹⁴ — approximately exact — and drops the other inequality constraints (``≥``
lower bounds, positive upper bounds: a linear unbiased estimator cannot use them), and it
omits the block-level ones. privtab imposes the equalities it is given *exactly* (the limit
of variance → 0; the pseudo-inverses make redundant constraints harmless — a parent's zero
implied by its children's, the US total implied by exact state totals) and at every geounit
given, blocks included: the same estimator in the limit, never biased (the constraints are
true of the data) and at least as precise. The builder of the constraints (from a release's
invariants) decides which to pass; inequality constraints are never used.

**Exact standard deviation.** TopDown's noise is discrete Gaussian: each answer's noise
``N_ℤ(σ²)`` has variance slightly below ``σ²``. The variances given to this module are the
noise's *exact* variances — :func:`noise_variance` computes that of ``N_ℤ(σ²)`` from
privtab's law (:class:`~privtab.mechanisms.laws.DiscreteGaussianLaw`), not ``σ²`` (the
relative difference is below 10⁻⁸ for σ² ≥ 1, but nothing is gained by the approximation)
— and the weights of the estimator are computed from them, so the standard deviation
reported is the exact standard deviation of the linear estimator (up to floating-point
rounding), whatever the noise's shape.

**Intervals.** The estimator's error is a linear combination with non-integer weights of
thousands of independent discrete Gaussians; its exact law is not tabulable (privtab's exact
convolution, :class:`~privtab.mechanisms.linear.LinearNoise`, handles fractional weights
by enumerating point masses, which is exponential in the number of terms), so intervals are
the normal approximation ``estimate ± z·sd`` (as the Census's ``est_cis.py``). Its coverage
is measured by Monte Carlo with privtab's exact samplers (``tests/topdown/test_gls.py``,
``docs`` of the command): see :func:`normal_moe`.

**Limits.** The measurements must identify every leaf's histogram (a leaf whose information
matrix is singular is an error naming it); a geounit without measurements is allowed where
it is a single child (it takes its parent's estimate — the production spine's bypassed
geounits), not beside siblings. Cross-covariances between geounits (needed to aggregate
off-spine entities, the Census's ``est_cis.py``) are not computed here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from privtab.errors import UsageError
from privtab.random import RationalLike
from privtab.topdown.blocks import Basis, Blocks, VBlocks
from privtab.topdown.kron import KronCells, KronQuery

__all__ = [
    "CellEstimates",
    "Constraints",
    "GeounitTree",
    "Measurements",
    "Part",
    "SplitGLS",
    "TreeGLS",
    "noise_variance",
    "normal_moe",
    "tree_gls",
    "tree_gls_split",
]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]

#: Relative tolerance of the rank decisions (pseudo-inverses, the leaf check).
RTOL = 1e-9
#: Geounits per batched step (bounds the temporaries of a level with many geounits).
CHUNK = 4096


# ----------------------------------------------------------------------------------------
# inputs
# ----------------------------------------------------------------------------------------
@lru_cache(maxsize=4096)
def _dg_variance(sigma2: Fraction) -> float:
    from privtab.mechanisms.laws import DiscreteGaussianLaw

    return float(DiscreteGaussianLaw(sigma2).variance)


def noise_variance(sigma2: RationalLike) -> float:
    """The exact variance of the discrete Gaussian ``N_ℤ(σ²)`` (pmf ∝ ``e^{−x²/(2σ²)}`` on
    ℤ; Canonne, Kamath & Steinke 2020), computed by privtab's law in high precision —
    slightly below ``σ²``.

    >>> from fractions import Fraction
    >>> noise_variance(Fraction(1, 4)) < 0.25 and abs(noise_variance(100) - 100) < 1e-9
    True
    """
    from privtab.random.rational import as_rational

    return _dg_variance(as_rational(sigma2, "sigma2", positive=True))


def _as_answers(a: Any, k: int, size: int, what: str) -> F64:
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim == 2:
        arr = arr[:, None, :]
    if arr.ndim != 3 or arr.shape[0] != k or arr.shape[2] != size:
        raise ValueError(
            f"{what}: expected shape ({k}, {size}) or ({k}, R, {size}), got {arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what}: answers must be finite")
    return arr


@dataclass(frozen=True)
class Measurements:
    """Noisy answers of one query at several geounits: ``answers[i]`` (``(size,)``, or
    ``(R, size)`` for ``R`` replicate measurement sets solved together) is geounit
    ``geounits[i]``'s, each cell's noise of variance ``variances[i]`` (the exact noise
    variance: :func:`noise_variance` for a discrete Gaussian)."""

    query: KronQuery
    geounits: tuple[str, ...]
    answers: F64
    variances: F64

    def __post_init__(self) -> None:
        q = KronQuery.of(self.query)
        object.__setattr__(self, "query", q)
        object.__setattr__(self, "geounits", tuple(self.geounits))
        k = len(self.geounits)
        what = f"measurements of {q.name!r}"
        object.__setattr__(self, "answers", _as_answers(self.answers, k, q.size, what))
        v = np.broadcast_to(np.asarray(self.variances, dtype=np.float64), (k,)).copy()
        if not np.all(np.isfinite(v) & (v > 0)):
            raise ValueError(f"{what}: variances must be positive and finite")
        object.__setattr__(self, "variances", v)


@dataclass(frozen=True)
class Constraints:
    """Exact equalities ``query(x_g) = values[i]`` for ``g = geounits[i]`` (values
    ``(size,)`` or ``(R, size)``), e.g. an invariant total or structural zeros."""

    query: KronQuery
    geounits: tuple[str, ...]
    values: F64

    def __post_init__(self) -> None:
        q = KronQuery.of(self.query)
        object.__setattr__(self, "query", q)
        object.__setattr__(self, "geounits", tuple(self.geounits))
        what = f"constraints {q.name!r}"
        vals = _as_answers(self.values, len(self.geounits), q.size, what)
        object.__setattr__(self, "values", vals)


@dataclass(frozen=True)
class GeounitTree:
    """A tree of geounits: ``parents`` maps every geounit but the root to its parent;
    ``level_names`` (optional) names the depths (``("State", "County", …)``). The children
    of a geounit are ordered by id."""

    root: str
    parents: Mapping[str, str]
    level_names: tuple[str, ...] | None = None

    @classmethod
    def from_levels(
        cls,
        ids: Sequence[Sequence[str]],
        parent_index: Sequence[Sequence[int]],
        level_names: Sequence[str] | None = None,
    ) -> GeounitTree:
        """From per-level ids and, for every level below the root, each geounit's parent
        as an index into the level above (a declared hierarchy's arrays)."""
        if len(ids[0]) != 1:
            raise UsageError(f"the root level must have one geounit, not {len(ids[0])}")
        parents = {}
        for lvl in range(1, len(ids)):
            above = ids[lvl - 1]
            for g, p in zip(ids[lvl], parent_index[lvl - 1], strict=True):
                parents[str(g)] = str(above[int(p)])
        names = tuple(level_names) if level_names is not None else None
        return cls(str(ids[0][0]), parents, names)


@dataclass(frozen=True)
class _Levels:
    """Levels of a hierarchy, each ordered so that siblings are contiguous in their
    parents' order: ``parent[l][i]`` indexes level ``l − 1``; ``start[l][j]`` and
    ``count[l][j]`` locate node ``j``'s children in level ``l + 1``."""

    ids: tuple[tuple[str, ...], ...]
    parent: tuple[I64, ...]
    start: tuple[I64, ...]
    count: tuple[I64, ...]
    where: dict[str, tuple[int, int]]

    @classmethod
    def build(cls, h: GeounitTree) -> _Levels:
        children: dict[str, list[str]] = {}
        for child, par in h.parents.items():
            if child == h.root:
                raise UsageError(f"hierarchy: the root {h.root!r} has a parent ({par!r})")
            children.setdefault(par, []).append(child)
        levels: list[list[str]] = [[h.root]]
        parents: list[I64] = [np.zeros(0, dtype=np.int64)]
        seen = {h.root}
        while True:
            nxt: list[str] = []
            pidx: list[int] = []
            for j, g in enumerate(levels[-1]):
                for c in sorted(children.get(g, [])):
                    if c in seen:
                        raise UsageError(f"hierarchy: geounit {c!r} is reached twice")
                    seen.add(c)
                    nxt.append(c)
                    pidx.append(j)
            if not nxt:
                break
            levels.append(nxt)
            parents.append(np.asarray(pidx, dtype=np.int64))
        missing = sorted(set(h.parents) - seen)
        if missing:
            raise UsageError(
                f"hierarchy: geounit {missing[0]!r} does not descend from the root {h.root!r} "
                f"(its parent {h.parents[missing[0]]!r} is unknown or in a cycle)"
            )
        starts: list[I64] = []
        counts: list[I64] = []
        for lvl in range(len(levels)):
            n = len(levels[lvl])
            if lvl + 1 < len(levels):
                cnt = np.bincount(parents[lvl + 1], minlength=n).astype(np.int64)
            else:
                cnt = np.zeros(n, dtype=np.int64)
            starts.append(np.concatenate([[0], np.cumsum(cnt)[:-1]]).astype(np.int64))
            counts.append(cnt)
        where = {g: (lvl, i) for lvl, ids in enumerate(levels) for i, g in enumerate(ids)}
        return cls(
            tuple(tuple(x) for x in levels), tuple(parents), tuple(starts), tuple(counts), where
        )

    def locate(self, geounits: Sequence[str], what: str) -> tuple[I64, I64]:
        lv = np.empty(len(geounits), dtype=np.int64)
        ix = np.empty(len(geounits), dtype=np.int64)
        for i, g in enumerate(geounits):
            hit = self.where.get(g)
            if hit is None:
                raise UsageError(f"{what}: geounit {g!r} is not in the hierarchy")
            lv[i], ix[i] = hit
        return lv, ix


# ----------------------------------------------------------------------------------------
# outputs
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CellEstimates:
    """GLS estimates and exact standard deviations of ``cells`` at ``geounits``:
    ``estimate`` is ``(geounits, cells)`` (``(geounits, R, cells)`` for replicates),
    ``std`` is ``(geounits, cells)``."""

    geounits: tuple[str, ...]
    cells: tuple[str, ...]
    estimate: F64
    std: F64


def normal_moe(std: F64 | float, level: float) -> F64:
    """The normal-approximation margin of error ``z_{(1+level)/2}·sd`` (the module
    docstring says why, and the tests measure its coverage)."""
    from statistics import NormalDist

    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    z = NormalDist().inv_cdf((1 + level) / 2)
    return np.asarray(std, dtype=np.float64) * z


@dataclass
class _Up:
    """Bottom-up results of one level: subtree estimates and covariances, whether the
    subtree informs the geounit, and (for parents) the children's sums ``s``, ``S``."""

    c: Blocks
    x: VBlocks
    informed: B
    s_sum: Blocks | None = None
    x_sum: VBlocks | None = None


@dataclass(frozen=True)
class _Con:
    """Constraints of one query at some geounits of a level (``values`` ``None``: zeros)."""

    projector: int
    nodes: I64
    values: F64 | None

    def subset(self, keep: B | I64) -> _Con:
        vals = None if self.values is None else self.values[keep]
        return _Con(self.projector, self.nodes[keep], vals)

    def moved(self, nodes: I64) -> _Con:
        return _Con(self.projector, nodes, self.values)


class TreeGLS:
    """The solved tree: GLS estimates and covariances of every geounit down to ``depth``
    (see :func:`tree_gls`)."""

    def __init__(
        self,
        tree: _Levels,
        basis: Basis,
        estimates: list[VBlocks],
        covariances: list[Blocks],
        replicated: bool,
        level_names: tuple[str, ...] | None,
        bottom_up: list[_Up] | None = None,
        floor: float = 0.0,
    ) -> None:
        self._tree = tree
        self.basis = basis
        self._x = estimates
        self._v = covariances
        self._replicated = replicated
        self.level_names = level_names
        self._ups = bottom_up
        self._floor = floor

    @property
    def levels(self) -> tuple[tuple[str, ...], ...]:
        """Geounit ids by depth (solved levels only)."""
        return self._tree.ids[: len(self._x)]

    def _level(self, level: int | str) -> int:
        if isinstance(level, str):
            if self.level_names is None or level not in self.level_names:
                raise ValueError(f"unknown level {level!r}")
            level = self.level_names.index(level)
        if not 0 <= level < len(self._x):
            raise ValueError(f"level {level} is not solved (0..{len(self._x) - 1})")
        return level

    def histograms(self, level: int | str) -> F64:
        """The estimated histograms of a level: ``(geounits, n)`` (``(geounits, R, n)``)."""
        lv = self._level(level)
        x = self.basis.from_blocks(self._x[lv])
        return x if self._replicated else x[:, 0, :]

    def covariance(self, level: int | str, index: int) -> F64:
        """The dense covariance of one geounit's histogram estimate (small problems)."""
        blocks = self._v[self._level(level)].take(np.asarray([index]))
        return self.basis.to_dense(Blocks(tuple(a[0] for a in blocks.arrays)))

    def estimates(self, cells: KronCells, level: int | str) -> CellEstimates:
        """Estimates and exact standard deviations of ``cells`` at every geounit of a level."""
        lv = self._level(level)
        if cells.domain != self.basis.shape:
            raise ValueError(f"cells are over {cells.domain}, the histogram is {self.basis.shape}")
        rows = cells.rows()
        x = self.basis.from_blocks(self._x[lv])
        est = x @ rows.T
        v = self._v[lv].flat()
        var = v @ self.basis.row_grams(rows).T
        # a cell the constraints determine has variance 0 up to rounding: report 0
        scale = np.abs(v).max(axis=1, initial=0.0)[:, None] * (rows * rows).sum(axis=1)[None, :]
        std = np.sqrt(np.where(var > RTOL * scale, var, 0.0))
        return CellEstimates(
            self._tree.ids[lv], cells.names, est if self._replicated else est[:, 0, :], std
        )

    def parent_index(self, level: int | str) -> I64:
        """For each geounit of ``level`` (below the root), its parent's index in the level
        above."""
        lv = self._level(level)
        if lv == 0:
            raise ValueError("the root has no parent")
        return self._tree.parent[lv]

    def children(self, level: int | str, parent: int) -> range:
        """The indices (in the level below) of the children of geounit ``parent``."""
        lv = self._level(level)
        start = int(self._tree.start[lv][parent])
        return range(start, start + int(self._tree.count[lv][parent]))

    def _bottom_up_results(self) -> list[_Up]:
        if self._ups is None:
            raise ValueError("solve with keep_bottom_up=True to condition or aggregate")
        return self._ups

    def _s_plus(self, lv: int, parents: I64) -> Blocks:
        """``S_p⁺`` of ``parents`` of level ``lv`` (zeros for a single child's parent)."""
        pup = self._bottom_up_results()[lv]
        assert pup.s_sum is not None
        out = Blocks.zeros(parents.size, self.basis.block_sizes)
        multi = np.flatnonzero(self._tree.count[lv][parents] >= 2)
        if multi.size:
            out.put(multi, _pinv(pup.s_sum.take(parents[multi]), self._floor))
        return out

    def condition_children(
        self, level: int | str, parents: Sequence[int], values: Any
    ) -> tuple[I64, F64]:
        """The children of ``parents`` (geounits of ``level``) estimated from the
        measurements in their own subtrees **given** that each parent's histogram is
        ``values[i]`` — the top-down step of the GLS with a known parent,
        ``x̂_c + C_c S_p⁺ (v − s_p)`` (a single child: ``v``): the best linear unbiased
        estimate of the children from their subtrees' measurements under ``Σ children =
        v``. Returns the children's indices in the level below and their ``(k, n)``
        histograms, in order (needs ``keep_bottom_up=True``; one measurement set)."""
        lv = self._level(level)
        ups = self._bottom_up_results()
        if lv + 1 >= len(ups):
            raise ValueError(f"level {level!r} has no children in the tree")
        if self._replicated:
            raise ValueError("conditioning needs one measurement set, not replicates")
        par = np.asarray(parents, dtype=np.int64).reshape(-1)
        vals = np.asarray(values, dtype=np.float64).reshape(par.size, self.basis.size)
        count = self._tree.count[lv][par]
        kids = np.concatenate(
            [np.arange(self._tree.start[lv][p], self._tree.start[lv][p] + k) for p, k in
             zip(par.tolist(), count.tolist(), strict=True)]
            or [np.zeros(0, dtype=np.int64)]
        ).astype(np.int64)  # fmt: skip
        owner = np.repeat(np.arange(par.size), count)
        v = self.basis.to_blocks(vals[:, None, :])
        pup, cup = ups[lv], ups[lv + 1]
        assert pup.x_sum is not None
        a = cup.c.take(kids) @ self._s_plus(lv, par).take(owner)
        x = cup.x.take(kids) + a.apply(v.take(owner) - pup.x_sum.take(par[owner]))
        single = np.flatnonzero(count[owner] == 1)
        if single.size:
            x.put(single, v.take(owner[single]))
        return kids, self.basis.from_blocks(x)[:, 0, :]

    def aggregate(
        self, cells: KronCells, level: int | str, groups: Any, n_groups: int
    ) -> tuple[F64, F64]:
        """Estimates and exact standard deviations of ``cells`` of **sums of geounits**:
        group ``g`` is the geounits ``i`` of ``level`` with ``groups[i] == g`` (``-1``: in
        no group) — a tabulation geography made of several geounits. Returns
        ``(n_groups, cells)`` arrays (groups without geounits: 0, 0).

        The variance of ``Σ_i W_i x̃_i`` over geounits of one level (``W = 𝟙`` at first) is
        carried up the tree: with ``x̃_i = x̂_i + A_i(x̃_p − s_p)`` the geounits of one
        parent contribute ``Σ_i W_i(x̂_i − A_i s_p)``, uncorrelated with everything else the
        estimate depends on, of variance ``Σ_i W_i C_i W_iᵀ − B_p S_p B_pᵀ``
        (``B_p = Σ_i W_i A_i``), and leave ``B_p x̃_p`` to the level above; a group reduced
        to one geounit ``j`` ends with ``W V_j Wᵀ`` (its final covariance). Needs
        ``keep_bottom_up=True``; exact up to rounding (checked against a dense GLS)."""
        lv = self._level(level)
        if cells.domain != self.basis.shape:
            raise ValueError(f"cells are over {cells.domain}, the histogram is {self.basis.shape}")
        if self._replicated:
            raise ValueError("aggregation needs one measurement set, not replicates")
        g = np.asarray(groups, dtype=np.int64).reshape(-1)
        if g.size != len(self._tree.ids[lv]):
            raise ValueError(f"groups: one entry per geounit of the level ({g.size} given)")
        rows = cells.rows()
        grams = self.basis.row_grams(rows)
        x = self.basis.from_blocks(self._x[lv])[:, 0, :]
        est = np.zeros((n_groups, rows.shape[0]))
        var = np.zeros((n_groups, rows.shape[0]))
        members = np.flatnonzero(g >= 0)
        np.add.at(est, g[members], x[members] @ rows.T)
        order = members[np.argsort(g[members], kind="stable")]
        bounds = np.flatnonzero(np.diff(g[order])) + 1
        for chunk in _chunks(order, bounds, CHUNK):
            cov = self._group_covariance(lv, g[chunk], chunk)
            ids = np.unique(g[chunk])
            var[ids] = cov.flat() @ grams.T
        scale = np.abs(var).max(axis=0, initial=0.0)[None, :]
        std = np.sqrt(np.where(var > RTOL * np.maximum(scale, 1.0), var, 0.0))
        return est, std

    def _group_covariance(self, lv: int, grp: I64, nodes: I64) -> Blocks:
        """The covariance (blocks) of each group's sum (groups ``np.unique(grp)``, in
        order): see :meth:`aggregate`."""
        ups = self._bottom_up_results()
        sizes = self.basis.block_sizes
        gid, local = np.unique(grp, return_inverse=True)
        resid = Blocks.zeros(gid.size, sizes)
        out = Blocks.zeros(gid.size, sizes)
        w = Blocks.identity(nodes.size, sizes)
        pg = local.astype(np.int64)  # each pair's group
        pn = nodes.astype(np.int64)  # each pair's geounit (of level `level`)
        level = lv
        while pg.size:
            n_pairs = np.bincount(pg, minlength=gid.size)
            done = n_pairs[pg] == 1
            if level == 0:
                done[:] = True
            if done.any():  # a group reduced to one geounit: W V Wᵀ with its final V
                fin = np.flatnonzero(done)
                wk = w.take(fin)
                vk = self._v[level].take(pn[fin])
                out.put(pg[fin], (wk @ vk @ wk.t()).sym())
                keep = np.flatnonzero(~done)
                pg, pn, w = pg[keep], pn[keep], w.take(keep)
                if not pg.size:
                    break
            par = self._tree.parent[level][pn]
            single = self._tree.count[level - 1][par] == 1
            multi = np.flatnonzero(~single)
            a = Blocks.identity(pg.size, sizes)
            if multi.size:
                c = ups[level].c.take(pn[multi])
                a.put(multi, c @ self._s_plus(level - 1, par[multi]))
                wm = w.take(multi)
                _add_rows(resid, pg[multi], (wm @ c @ wm.t()))
            wa = w @ a
            key = np.lexsort((par, pg))
            pg_s, par_s = pg[key], par[key]
            starts = np.flatnonzero(
                np.concatenate([[True], (pg_s[1:] != pg_s[:-1]) | (par_s[1:] != par_s[:-1])])
            ).astype(np.int64)
            b = wa.take(key).segment_sum(starts, np.arange(starts.size), starts.size)
            new_g, new_p = pg_s[starts], par_s[starts]
            multi_p = np.flatnonzero(self._tree.count[level - 1][new_p] >= 2)
            if multi_p.size:
                pup = ups[level - 1]
                assert pup.s_sum is not None
                bm = b.take(multi_p)
                _add_rows(resid, new_g[multi_p], Blocks(tuple(-a for a in
                          (bm @ pup.s_sum.take(new_p[multi_p]) @ bm.t()).arrays)))  # fmt: skip
            pg, pn, w = new_g, new_p, b
            level -= 1
        return (out + resid).sym()


def _add_rows(acc: Blocks, rows: I64, values: Blocks) -> None:
    """``acc[rows[i]] += values[i]`` (rows may repeat)."""
    for a, v in zip(acc.arrays, values.arrays, strict=True):
        np.add.at(a, rows, v)


def _chunks(order: I64, bounds: I64, size: int) -> Iterator[I64]:
    """``order`` cut at group boundaries ``bounds`` into pieces of about ``size``."""
    lo = 0
    cuts = [*bounds.tolist(), order.size]
    for i, hi in enumerate(cuts):
        if hi - lo >= size or i == len(cuts) - 1:
            if hi > lo:
                yield order[lo:hi]
            lo = hi


@dataclass(frozen=True)
class _Prior:
    """Subtree estimates of some geounits of one level, solved apart."""

    nodes: I64
    c: Blocks
    x: VBlocks


# ----------------------------------------------------------------------------------------
# the solver
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Design:
    """Queries, the basis, and every level's information, score and constraints."""

    basis: Basis
    info: list[Blocks]
    score: list[VBlocks]
    measured: list[B]
    constraints: list[list[_Con]]  # per level
    projectors: list[Blocks]
    cqueries: list[KronQuery]
    reps: int
    replicated: bool
    floor: float


def _queries(queries: Sequence[KronQuery]) -> dict[str, KronQuery]:
    """Queries by name (one query per name)."""
    out: dict[str, KronQuery] = {}
    for q in queries:
        old = out.setdefault(q.name, q)
        same = len(old.factors) == len(q.factors) and all(
            a.shape == b.shape and np.array_equal(a, b)
            for a, b in zip(old.factors, q.factors, strict=True)
        )
        if not same:
            raise ValueError(f"two different queries are named {q.name!r}")
    return out


def _basis(mq: Mapping[str, KronQuery], cq: Mapping[str, KronQuery]) -> Basis:
    domains = {q.domain for q in [*mq.values(), *cq.values()]}
    if len(domains) != 1:
        raise ValueError(f"queries are over different histograms: {sorted(domains)}")
    shape = domains.pop()
    per_attr: list[list[F64]] = [[] for _ in shape]
    for q in mq.values():
        for a, g in enumerate(q.grams()):
            per_attr[a].append(g)
    for q in cq.values():
        for a, p in enumerate(q.projectors()):
            per_attr[a].append(p)
    return Basis(shape, per_attr)


def _replicates(measurements: Sequence[Measurements], constraints: Sequence[Constraints]) -> int:
    counts = {int(m.answers.shape[1]) for m in measurements}
    counts |= {int(c.values.shape[1]) for c in constraints}
    reps = max(counts, default=1)
    if counts - {1, reps}:
        raise ValueError(f"replicate counts differ: {sorted(counts)}")
    return reps


def _measurement_inputs(
    tree: _Levels, basis: Basis, measurements: Sequence[Measurements], names: list[str], reps: int
) -> tuple[list[F64], list[F64]]:
    """Per level: the weights ``1/v`` (geounits × queries; 0 where not measured) and the
    scores ``Σ_q F_qᵀ y_q / v_q`` (geounits × R × n)."""
    weights = [np.zeros((len(ids), len(names))) for ids in tree.ids]
    score = [np.zeros((len(ids), reps, basis.size)) for ids in tree.ids]
    for m in measurements:
        lv, ix = tree.locate(m.geounits, f"measurements of {m.query.name!r}")
        j = names.index(m.query.name)
        adj = m.query.adjoint(m.answers / m.variances[:, None, None])
        for lvl in np.unique(lv):
            sel = lv == lvl
            w = weights[lvl]
            if np.any(w[ix[sel], j] > 0) or len(np.unique(ix[sel])) != int(sel.sum()):
                dup = [g for g, s in zip(m.geounits, sel, strict=True) if s]
                raise UsageError(
                    f"query {m.query.name!r} is measured twice at a geounit of {dup[:3]}"
                )
            w[ix[sel], j] = 1.0 / m.variances[sel]
            score[lvl][ix[sel]] += adj[sel]
    return weights, score


def _design(
    tree: _Levels,
    measurements: Sequence[Measurements],
    constraints: Sequence[Constraints],
    *,
    basis: Basis | None = None,
    floor: float | None = None,
) -> _Design:
    if not measurements and floor is None:
        raise UsageError("tree GLS: no measurements")
    mq = _queries([m.query for m in measurements])
    cq = _queries([c.query for c in constraints])
    if basis is None:
        basis = _basis(mq, cq)
    names = list(mq)
    reps = _replicates(measurements, constraints)
    weights, score = _measurement_inputs(tree, basis, measurements, names, reps)
    grams = [basis.kron(mq[n].grams()) for n in names]
    info = []
    for w in weights:
        arrays = []
        for k, d in enumerate(basis.block_sizes):
            if not grams:  # nothing measured (a tree whose subtrees were solved apart)
                arrays.append(np.zeros((w.shape[0], d, d)))
                continue
            stack = np.stack([g.arrays[k] for g in grams])  # (J, d, d)
            arrays.append(np.einsum("nj,jab->nab", w, stack))
        info.append(Blocks(tuple(arrays)))
    proj_id = {name: i for i, name in enumerate(cq)}
    cons: list[list[_Con]] = [[] for _ in tree.ids]
    for c in constraints:
        lv, ix = tree.locate(c.geounits, f"constraints {c.query.name!r}")
        for lvl in np.unique(lv):
            sel = lv == lvl
            vals = c.values[sel]
            cons[lvl].append(_Con(proj_id[c.query.name], ix[sel], vals if vals.any() else None))
    return _Design(
        basis=basis,
        info=info,
        score=[basis.to_blocks(score.pop(0)) for _ in tree.ids],  # frees as it goes
        measured=[w.sum(axis=1) > 0 for w in weights],
        constraints=cons,
        projectors=[basis.kron(q.projectors()) for q in cq.values()],
        cqueries=list(cq.values()),
        reps=reps,
        replicated=reps > 1,
        floor=floor
        if floor is not None
        else 1e-12 * min(float(m.variances.min()) for m in measurements),
    )


def _pinv(m: Blocks, floor: float) -> Blocks:
    """Pseudo-inverse of symmetric PSD blocks (eigenvalues below ``RTOL × largest`` or the
    absolute ``floor`` count as zero)."""
    lead = m.arrays[0].shape[:-2]
    eigs = [np.linalg.eigh(a) for a in m.arrays]
    top = np.zeros(lead)
    for w, _ in eigs:
        top = np.maximum(top, np.abs(w).max(axis=-1, initial=0.0))
    cut = np.maximum(RTOL * top, floor)
    out = []
    for w, v in eigs:
        keep = w > cut[..., None]
        inv_w = np.where(keep, 1.0 / np.where(keep, w, 1.0), 0.0)
        out.append((v * inv_w[..., None, :]) @ np.swapaxes(v, -1, -2))
    return Blocks(tuple(out))


def _inverse_checked(m: Blocks, ids: Sequence[str]) -> Blocks:
    """Inverse of symmetric positive-definite blocks; a singular one is a located error."""
    lead = m.arrays[0].shape[:-2]
    eigs = [np.linalg.eigh(a) for a in m.arrays]
    top = np.zeros(lead)
    low = np.full(lead, np.inf)
    for w, _ in eigs:
        top = np.maximum(top, w.max(axis=-1, initial=0.0))
        low = np.minimum(low, w.min(axis=-1, initial=np.inf))
    bad = np.flatnonzero(~(low > RTOL * top))
    if bad.size:
        raise UsageError(
            f"tree GLS: the measurements of geounit {ids[int(bad[0])]!r} do not identify its "
            f"histogram (its information matrix is singular) and nothing below it does"
            + (f"; {bad.size - 1} more such geounits" if bad.size > 1 else "")
        )
    out = [(v / w[..., None, :]) @ np.swapaxes(v, -1, -2) for w, v in eigs]
    return Blocks(tuple(out))


def _condition(up: _Up, design: _Design, cons: Sequence[_Con]) -> list[_Con]:
    """Apply the exact constraints of informed geounits; return those of uninformed ones
    (single children: they hold at the parent, whose histogram is theirs)."""
    pushed: list[_Con] = []
    for con in cons:
        ok = up.informed[con.nodes]
        if not ok.all():
            pushed.append(con.subset(~ok))
        con = con.subset(ok)
        for lo in range(0, con.nodes.size, CHUNK):
            part = con.subset(np.arange(lo, min(lo + CHUNK, con.nodes.size)))
            _condition_chunk(up, design, part)
    return pushed


def _condition_chunk(up: _Up, design: _Design, con: _Con) -> None:
    proj = design.projectors[con.projector]
    c = up.c.take(con.nodes)
    x = up.x.take(con.nodes)
    gain = c @ proj @ _pinv(proj @ c @ proj, design.floor)
    miss = proj.apply(x)
    if con.values is not None:
        e = design.cqueries[con.projector].min_norm(con.values)
        target = design.basis.to_blocks(np.broadcast_to(e, (e.shape[0], x.reps, e.shape[2])))
        miss = target - miss
    else:
        miss = VBlocks(tuple(-a for a in miss.arrays), miss.reps)
    up.c.put(con.nodes, (c - gain @ proj @ c).sym())
    up.x.put(con.nodes, x + gain.apply(miss))


def _bottom_up(
    tree: _Levels, design: _Design, priors: Mapping[int, _Prior] | None = None
) -> list[_Up]:
    """Subtree estimates level by level, leaves first; ``priors`` (level → estimates of
    some of its geounits from their own subtrees, solved apart) stand in for subtrees."""
    sizes = design.basis.block_sizes
    ups: list[_Up | None] = [None] * len(tree.ids)
    pushed: list[_Con] = []
    for lvl in range(len(tree.ids) - 1, -1, -1):
        ids = tree.ids[lvl]
        n = len(ids)
        info, score, measured = design.info[lvl], design.score[lvl], design.measured[lvl]
        prior = (priors or {}).get(lvl)
        count = tree.count[lvl]
        c = Blocks.zeros(n, sizes)
        x = VBlocks(tuple(np.zeros_like(a) for a in score.arrays), design.reps)
        informed = np.zeros(n, dtype=bool)
        s_sum: Blocks | None = None
        x_sum: VBlocks | None = None
        if lvl + 1 < len(tree.ids):
            child = ups[lvl + 1]
            assert child is not None
            has = np.flatnonzero(count > 0)
            starts = tree.start[lvl][has]
            s_sum = child.c.segment_sum(starts, has, n)
            x_sum = child.x.segment_sum(starts, has, n)
            n_inf = np.zeros(n, dtype=np.int64)
            n_inf[has] = np.add.reduceat(child.informed.astype(np.int64), starts)
            bad = np.flatnonzero((count >= 2) & (n_inf < count))
            if bad.size:
                kids = tree.parent[lvl + 1] == bad[0]
                lost = [
                    g
                    for g, k, i in zip(tree.ids[lvl + 1], kids, child.informed, strict=True)
                    if k and not i
                ]
                raise UsageError(
                    f"tree GLS: geounit {lost[0]!r} has siblings but no measurements in its "
                    f"subtree identify its histogram"
                )
            combine = (count >= 1) & (n_inf == count)
        else:
            combine = np.zeros(n, dtype=bool)
        leaves = np.flatnonzero(~combine & measured)
        for lo in range(0, leaves.size, CHUNK):
            leaf = leaves[lo : lo + CHUNK]
            inv = _inverse_checked(info.take(leaf), [ids[i] for i in leaf])
            c.put(leaf, inv)
            x.put(leaf, inv.apply(score.take(leaf)))
        informed[leaves] = True
        if prior is not None:
            if combine[prior.nodes].any() or measured[prior.nodes].any():
                raise UsageError("tree GLS: a geounit solved apart has measurements or children")
            c.put(prior.nodes, prior.c)
            x.put(prior.nodes, prior.x)
            informed[prior.nodes] = True
        comb = np.flatnonzero(combine)
        if comb.size:
            assert s_sum is not None
            assert x_sum is not None
            s_k, i_k = s_sum.take(comb), info.take(comb)
            m = Blocks.identity(comb.size, sizes) + s_k @ i_k
            ck, xk = m.solve(s_k, s_k.apply(score.take(comb)) + x_sum.take(comb))
            c.put(comb, ck.sym())
            x.put(comb, xk)
            informed[comb] = True
        up = _Up(c, x, informed, s_sum, x_sum)
        left = _condition(up, design, [*design.constraints[lvl], *pushed])
        pushed = [con.moved(tree.parent[lvl][con.nodes]) for con in left] if lvl > 0 else []
        if lvl == 0 and not informed[0]:
            raise UsageError(f"tree GLS: no measurements inform the root {ids[0]!r}")
        ups[lvl] = up
    return [u for u in ups if u is not None]


def _top_down(
    tree: _Levels,
    design: _Design,
    ups: list[_Up],
    depth: int,
    root_final: tuple[VBlocks, Blocks] | None = None,
) -> tuple[list[VBlocks], list[Blocks]]:
    """Final estimates and covariances down to ``depth``; the root's are its subtree
    estimate, or ``root_final`` (the root's final estimate from a larger tree)."""
    xs = [ups[0].x if root_final is None else root_final[0]]
    vs = [ups[0].c if root_final is None else root_final[1]]
    for lvl in range(1, depth + 1):
        pup = ups[lvl - 1]
        assert pup.s_sum is not None
        multi_par = np.flatnonzero(tree.count[lvl - 1] >= 2)
        s_plus = Blocks.zeros(len(tree.ids[lvl - 1]), design.basis.block_sizes)
        if multi_par.size:
            s_plus.put(multi_par, _pinv(pup.s_sum.take(multi_par), design.floor))
        n = len(tree.ids[lvl])
        x = VBlocks(tuple(np.empty_like(a) for a in ups[lvl].x.arrays), design.reps)
        v = Blocks(tuple(np.empty_like(a) for a in ups[lvl].c.arrays))
        for lo in range(0, n, CHUNK):
            kids = np.arange(lo, min(lo + CHUNK, n))
            xk, vk = _children(tree, lvl, kids, (xs[-1], vs[-1]), pup, ups[lvl], s_plus)
            x.put(kids, xk)
            v.put(kids, vk)
        xs.append(x)
        vs.append(v)
    return xs, vs


def _children(
    tree: _Levels,
    lvl: int,
    kids: I64,
    parent_final: tuple[VBlocks, Blocks],
    pup: _Up,
    cup: _Up,
    s_plus: Blocks,
) -> tuple[VBlocks, Blocks]:
    """Final estimates and covariances of the geounits ``kids`` of level ``lvl``."""
    assert pup.s_sum is not None
    assert pup.x_sum is not None
    par = tree.parent[lvl][kids]
    x_p, v_p = parent_final[0].take(par), parent_final[1].take(par)
    c = cup.c.take(kids)
    a = c @ s_plus.take(par)
    x = cup.x.take(kids) + a.apply(x_p - pup.x_sum.take(par))
    v = (c + a @ (v_p - pup.s_sum.take(par)) @ a.t()).sym()
    one = np.flatnonzero(tree.count[lvl - 1][par] == 1)
    if one.size:  # a single child is its parent
        x.put(one, x_p.take(one))
        v.put(one, v_p.take(one))
    return x, v


def tree_gls(
    hierarchy: GeounitTree,
    measurements: Sequence[Measurements],
    constraints: Sequence[Constraints] = (),
    *,
    depth: int | None = None,
    keep_bottom_up: bool = False,
) -> TreeGLS:
    """The GLS estimate of every geounit's histogram from all ``measurements`` under the
    exact ``constraints``, with exact covariances (see the module docstring).
    ``keep_bottom_up`` keeps the subtree estimates (down to ``depth``) for
    :meth:`TreeGLS.condition_children` and :meth:`TreeGLS.aggregate`.

    The bottom-up pass always uses the whole tree; the top-down pass stops at ``depth``
    (default: the leaves), so e.g. tracts can be estimated from block measurements without
    keeping block estimates. Errors naming the geounit: an unknown geounit, a query measured
    twice at one geounit, a leaf whose measurements do not identify its histogram, an
    uninformed geounit beside siblings.

    >>> import numpy as np
    >>> total = KronQuery("total", (np.ones((1, 2)),))
    >>> cells = KronQuery("detailed", (np.eye(2),))
    >>> h = GeounitTree("A", {"a1": "A", "a2": "A"})
    >>> ms = [Measurements(total, ("A",), [[10.0]], [1.0]),
    ...       Measurements(cells, ("a1", "a2"), [[3.0, 2.0], [4.0, 0.0]], [2.0, 2.0])]
    >>> est = tree_gls(h, ms).estimates(KronCells.of_query(total), 0)
    >>> round(float(est.estimate[0, 0]), 6), round(float(est.std[0, 0]) ** 2, 6)
    (9.888889, 0.888889)
    """
    tree, names = _tree(hierarchy)
    design = _design(tree, measurements, constraints)
    d = _depth(tree, depth)
    ups = _bottom_up(tree, design)
    xs, vs = _top_down(tree, design, ups, d)
    kept = ups[: d + 1] if keep_bottom_up else None
    return TreeGLS(tree, design.basis, xs, vs, design.replicated, names, kept, design.floor)


def _tree(hierarchy: GeounitTree) -> tuple[_Levels, tuple[str, ...] | None]:
    tree = _Levels.build(hierarchy)
    names = hierarchy.level_names
    if names is not None and len(names) != len(tree.ids):
        raise UsageError(f"the tree has {len(tree.ids)} levels but {len(names)} level names")
    return tree, names


def _depth(tree: _Levels, depth: int | None) -> int:
    last = len(tree.ids) - 1
    d = last if depth is None else depth
    if not 0 <= d <= last:
        raise ValueError(f"depth must be in 0..{last}, got {depth}")
    return d


@dataclass(frozen=True)
class Part:
    """A subtree solved apart by :func:`tree_gls_split`: its hierarchy (rooted at a leaf of
    the top tree), and the measurements and constraints of its geounits (the root's
    included)."""

    hierarchy: GeounitTree
    measurements: Sequence[Measurements]
    constraints: Sequence[Constraints] = ()


class SplitGLS:
    """The result of :func:`tree_gls_split`: ``top`` (the top tree, solved) and
    :meth:`parts` (each part's subtree, solved on demand — one part in memory at a time)."""

    def __init__(
        self,
        top: TreeGLS,
        finals: dict[str, tuple[VBlocks, Blocks]],
        load: Callable[[str], Part],
        solve: Callable[[str, Part, tuple[VBlocks, Blocks]], TreeGLS],
    ) -> None:
        self.top = top
        self._finals = finals
        self._load = load
        self._solve = solve

    @property
    def part_roots(self) -> tuple[str, ...]:
        return tuple(self._finals)

    def part(self, root: str) -> TreeGLS:
        """One part's subtree, solved (its bottom-up pass again, then top-down from its
        root's final estimate)."""
        return self._solve(root, self._load(root), self._finals[root])

    def parts(self) -> Iterator[tuple[str, TreeGLS]]:
        """Every part, in the top tree's order."""
        for root in self._finals:
            yield root, self.part(root)


def tree_gls_split(
    top: GeounitTree,
    top_measurements: Sequence[Measurements],
    top_constraints: Sequence[Constraints],
    load: Callable[[str], Part],
    *,
    measured_queries: Sequence[KronQuery],
    constraint_queries: Sequence[KronQuery],
    min_variance: float,
    depth: int | None = None,
    keep_bottom_up: bool = False,
) -> SplitGLS:
    """The same estimates as :func:`tree_gls` on the whole tree, with one part in memory
    at a time: the whole tree is ``top`` with each of its leaves replaced by the subtree
    ``load(leaf)`` returns (e.g. the states of a nation). The parts' bottom-up passes give
    their roots' subtree estimates, which stand in for the parts in the top tree's
    two passes; then each part is solved top-down from its root's final estimate
    (:meth:`SplitGLS.parts`: its bottom-up pass is done again — nothing of a part is kept).

    Every part must use one basis: ``measured_queries`` and ``constraint_queries`` list
    every query measured or constrained anywhere; ``min_variance`` is the smallest noise
    variance anywhere (the rank tolerance's floor). ``depth`` is the parts' own depth."""
    mq = _queries(measured_queries)
    cq = _queries(constraint_queries)
    basis = _basis(mq, cq)
    floor = 1e-12 * float(min_variance)
    ttree, tnames = _tree(top)
    leaves = [
        (lvl, i)
        for lvl, ids in enumerate(ttree.ids)
        for i in range(len(ids))
        if ttree.count[lvl][i] == 0
    ]
    roots = [ttree.ids[lvl][i] for lvl, i in leaves]
    reps = _replicates(top_measurements, top_constraints)

    def design_of(tree: _Levels, part: Part) -> _Design:
        d = _design(tree, part.measurements, part.constraints, basis=basis, floor=floor)
        if d.reps != reps and top_measurements:
            raise ValueError(f"replicate counts differ: {d.reps} in a part, {reps} at the top")
        return d

    def bottom(root: str) -> tuple[_Levels, _Design, list[_Up], tuple[str, ...] | None, Part]:
        part = load(root)
        tree, names = _tree(part.hierarchy)
        if tree.ids[0][0] != root:
            raise UsageError(f"the part loaded for {root!r} is rooted at {tree.ids[0][0]!r}")
        design = design_of(tree, part)
        ups = _bottom_up(tree, design)
        if not ups[0].informed[0]:
            raise UsageError(f"tree GLS: nothing in the subtree of {root!r} informs it")
        return tree, design, ups, names, part

    priors: dict[int, list[tuple[int, VBlocks, Blocks]]] = {}
    for (lvl, i), root in zip(leaves, roots, strict=True):
        _, _, ups, _, _ = bottom(root)
        priors.setdefault(lvl, []).append((i, ups[0].x, ups[0].c))
    tdesign = _design(ttree, top_measurements, top_constraints, basis=basis, floor=floor)
    stacked = {
        lvl: _Prior(
            np.asarray([i for i, _, _ in rows], dtype=np.int64),
            Blocks(tuple(np.concatenate(a) for a in zip(*(c.arrays for _, _, c in rows),
                                                         strict=True))),
            VBlocks(tuple(np.concatenate(a) for a in zip(*(x.arrays for _, x, _ in rows),
                                                          strict=True)), tdesign.reps),
        )
        for lvl, rows in priors.items()
    }  # fmt: skip
    tups = _bottom_up(ttree, tdesign, stacked)
    last = len(ttree.ids) - 1
    txs, tvs = _top_down(ttree, tdesign, tups, last)
    top_result = TreeGLS(
        ttree, basis, txs, tvs, tdesign.replicated, tnames,
        tups if keep_bottom_up else None, floor,
    )  # fmt: skip
    finals = {
        root: (txs[lvl].take(np.asarray([i])), tvs[lvl].take(np.asarray([i])))
        for (lvl, i), root in zip(leaves, roots, strict=True)
    }

    def solve(root: str, part: Part, final: tuple[VBlocks, Blocks]) -> TreeGLS:
        tree, names = _tree(part.hierarchy)
        design = design_of(tree, part)
        ups = _bottom_up(tree, design)
        d = _depth(tree, depth)
        xs, vs = _top_down(tree, design, ups, d, final)
        kept = ups[: d + 1] if keep_bottom_up else None
        return TreeGLS(tree, basis, xs, vs, design.replicated, names, kept, floor)

    return SplitGLS(top_result, finals, load, solve)
