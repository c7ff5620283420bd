"""The tree GLS's extensions against the whole-tree solve and an independent dense GLS.

* :func:`tree_gls_split` (one part in memory at a time) equals :func:`tree_gls` on the whole
  tree: estimates and covariances of every geounit to 1e-9, on random spines;
* :meth:`TreeGLS.aggregate` (sums of geounits: tabulation geographies) equals the dense
  GLS's ``B cov Bᵀ`` for random groups of leaves and of a middle level;
* :meth:`TreeGLS.condition_children` equals the dense GLS of the measurements below a
  parent under "the parent's histogram is v".

The random problems are those of ``test_gls`` (exact totals, structural zeros, single
children and unmeasured internal geounits, recode factors).
"""

from __future__ import annotations

import numpy as np
import pytest

from privtab.topdown.gls import (
    Constraints,
    GeounitTree,
    Measurements,
    Part,
    tree_gls,
    tree_gls_split,
)
from privtab.topdown.kron import KronCells, KronQuery
from tests.topdown.test_gls import Problem, dense_joint, random_problem

TOL = 1e-9


def _close(a: np.ndarray, b: np.ndarray, what: str) -> None:
    scale = max(1.0, float(np.abs(b).max(initial=0.0)))
    assert np.abs(a - b).max(initial=0.0) <= TOL * scale, what


def _split(p: Problem) -> tuple[GeounitTree, list[str], dict[str, Part]]:
    """The top tree (root and its children) and the subtree of each child."""
    parents = p.spine.hierarchy.parents
    kids = [g for g, par in parents.items() if par == "r"]

    def inside(g: str, top: str) -> bool:
        while g != top and g in parents:
            g = parents[g]
        return g == top

    parts = {}
    for k in kids:
        sub = {g: par for g, par in parents.items() if g != k and inside(g, k)}
        ms = [_restrict_m(m, lambda g, k=k: inside(g, k)) for m in p.measurements]
        cs = [_restrict_c(c, lambda g, k=k: inside(g, k)) for c in p.constraints]
        parts[k] = Part(GeounitTree(k, sub), [m for m in ms if m is not None], [c for c in cs if c])
    top = GeounitTree("r", dict.fromkeys(kids, "r"))
    return top, kids, parts


def _restrict_m(m: Measurements, keep: object) -> Measurements | None:
    sel = [i for i, g in enumerate(m.geounits) if keep(g)]  # type: ignore[operator]
    if not sel:
        return None
    return Measurements(
        m.query, tuple(m.geounits[i] for i in sel), m.answers[sel], m.variances[sel]
    )


def _restrict_c(c: Constraints, keep: object) -> Constraints | None:
    sel = [i for i, g in enumerate(c.geounits) if keep(g)]  # type: ignore[operator]
    if not sel:
        return None
    return Constraints(c.query, tuple(c.geounits[i] for i in sel), c.values[sel])


@pytest.mark.parametrize("seed", range(12))
def test_split_solve_equals_the_whole_tree(seed: int) -> None:
    p = random_problem(np.random.default_rng(seed))
    whole = tree_gls(p.spine.hierarchy, p.measurements, p.constraints)
    top, kids, parts = _split(p)
    top_ms = [m for m in (_restrict_m(m, lambda g: g == "r") for m in p.measurements) if m]
    top_cs = [c for c in (_restrict_c(c, lambda g: g == "r") for c in p.constraints) if c]
    res = tree_gls_split(
        top,
        top_ms,
        top_cs,
        parts.__getitem__,
        measured_queries=[m.query for m in p.measurements],
        constraint_queries=[c.query for c in p.constraints],
        min_variance=min(float(m.variances.min()) for m in p.measurements),
    )
    where = {g: (lvl, i) for lvl, ids in enumerate(whole.levels) for i, g in enumerate(ids)}
    lvl, i = where["r"]
    _close(res.top.histograms(0)[0], whole.histograms(lvl)[i], "root")
    _close(res.top.covariance(0, 0), whole.covariance(lvl, i), "root covariance")
    seen = 0
    for root, sub in res.parts():
        assert root in kids
        for slvl, ids in enumerate(sub.levels):
            hist = sub.histograms(slvl)
            for j, g in enumerate(ids):
                lvl, i = where[g]
                _close(hist[j], whole.histograms(lvl)[i], g)
                _close(sub.covariance(slvl, j), whole.covariance(lvl, i), f"{g} covariance")
                seen += 1
    assert seen == len(p.spine.nodes) - 1


def _cells(shape: tuple[int, ...]) -> KronCells:
    """The total, the first and the last cell (rank-one rows of the histogram)."""
    factors = tuple(np.stack([np.ones(m), np.eye(m)[0], np.eye(m)[m - 1]]) for m in shape)
    return KronCells(("all", "first", "last"), factors)


@pytest.mark.parametrize("seed", range(12))
def test_sums_of_geounits_have_the_dense_variance(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    p = random_problem(rng)
    res = tree_gls(p.spine.hierarchy, p.measurements, p.constraints, keep_bottom_up=True)
    x, cov, aggs = dense_joint(p)
    cells = _cells(p.shape)
    rows = cells.rows()
    for lvl in sorted({len(res.levels) - 1, max(1, len(res.levels) - 2)}):
        ids = res.levels[lvl]
        n_groups = max(1, len(ids) // 2)
        groups = rng.integers(-1, n_groups, size=len(ids))
        est, std = res.aggregate(cells, lvl, groups, n_groups)
        for k in range(n_groups):
            members = [g for g, gr in zip(ids, groups, strict=True) if gr == k]
            if not members:
                assert np.all(est[k] == 0)
                assert np.all(std[k] == 0)
                continue
            b = sum(aggs[g] for g in members)
            want_est = rows @ (b @ x)
            want_var = np.einsum("ci,ij,cj->c", rows @ b, cov, rows @ b)
            _close(est[k], want_est, f"level {lvl} group {k} estimate")
            scale = max(1.0, float(want_var.max()))
            assert np.abs(std[k] ** 2 - want_var).max() <= 1e-8 * scale, (lvl, k)


@pytest.mark.parametrize("seed", range(8))
def test_children_given_their_parent_are_the_dense_conditional_gls(seed: int) -> None:
    rng = np.random.default_rng(300 + seed)
    p = random_problem(rng)
    res = tree_gls(p.spine.hierarchy, p.measurements, p.constraints, keep_bottom_up=True)
    # a parent value consistent with every constraint: the estimate from other noise
    noisy = [
        Measurements(m.query, m.geounits, m.answers + rng.normal(size=m.answers.shape) * 3,
                     m.variances)
        for m in p.measurements
    ]  # fmt: skip
    other = tree_gls(p.spine.hierarchy, noisy, p.constraints)
    for lvl in range(len(res.levels) - 1):
        ids = res.levels[lvl]
        parents = [i for i in range(len(ids)) if len(res.children(lvl, i))]
        values = other.histograms(lvl)[parents]
        kids, hists = res.condition_children(lvl, parents, values)
        assert kids.tolist() == [c for i in parents for c in res.children(lvl, i)]
        checked = set(rng.choice(parents, size=min(3, len(parents)), replace=False).tolist())
        for i, v in zip(parents, values, strict=True):
            if i not in checked:  # the dense solve is the slow part: three per level
                continue
            g = ids[i]
            x, _, aggs = dense_joint(p, below=g, fixed=v)
            for c in res.children(lvl, i):
                row = int(np.flatnonzero(kids == c)[0])
                _close(hists[row], aggs[res.levels[lvl + 1][c]] @ x, f"{g} → child {c}")
            total = sum(hists[int(np.flatnonzero(kids == c)[0])] for c in res.children(lvl, i))
            _close(total, v, f"{g}: children sum to the given parent")


def test_conditioning_and_aggregation_need_the_bottom_up_pass() -> None:
    p = random_problem(np.random.default_rng(1))
    res = tree_gls(p.spine.hierarchy, p.measurements, p.constraints)
    with pytest.raises(ValueError, match="keep_bottom_up"):
        res.condition_children(0, [0], res.histograms(0))
    total = KronQuery("t", tuple(np.ones((1, m)) for m in p.shape))
    with pytest.raises(ValueError, match="keep_bottom_up"):
        res.aggregate(KronCells.of_query(total), len(res.levels) - 1,
                      np.zeros(len(res.levels[-1]), dtype=np.int64), 1)  # fmt: skip
