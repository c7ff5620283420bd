"""The tree GLS against an independent dense GLS of the whole stacked design.

The reference (:func:`dense_gls`) stacks every measurement of every geounit as rows over the
leaves' histograms, eliminates the exact constraints by a null-space parametrisation
(``x = x₀ + N u``) and solves with :func:`privtab.analysis.combine.gls` (``(AᵀWA)⁻¹``): no
tree, no blocks, no passes. The tree GLS must agree to 1e-9 on estimates and on full
covariance matrices of every geounit, on ≥ 50 random spines (random depth 2–4, branching
1–5, random shapes with recode factors, random query subsets and variances, exact totals
and structural zeros, single children and unmeasured internal geounits). The Census repo's
own check (``two_pass_gls_algorithm_cov_test.py``) compares covariances the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import scipy.linalg

from privtab.analysis.combine import gls
from privtab.errors import UsageError
from privtab.topdown.gls import (
    Constraints,
    GeounitTree,
    Measurements,
    noise_variance,
    normal_moe,
    tree_gls,
)
from privtab.topdown.kron import KronCells, KronQuery

TOL = 1e-9


@dataclass
class Spine:
    hierarchy: GeounitTree
    nodes: list[str]
    leaves: list[str]
    under: dict[str, list[str]]  # geounit -> leaves below it (itself for a leaf)


def random_spine(rng: np.random.Generator, max_leaves: int) -> Spine:
    while True:
        depth = int(rng.integers(2, 5))  # levels: 2..4
        parents: dict[str, str] = {}
        level = ["r"]
        for _ in range(depth - 1):
            nxt = []
            for p in level:
                for k in range(int(rng.integers(1, 6))):
                    c = f"{p}.{k}"
                    parents[c] = p
                    nxt.append(c)
            level = nxt
        if len(level) <= max_leaves:
            break
    nodes = ["r", *parents]
    leaves = level
    under: dict[str, list[str]] = {g: [] for g in nodes}
    for leaf in leaves:
        g: str | None = leaf
        while g is not None:
            under[g].append(leaf)
            g = parents.get(g)
    return Spine(GeounitTree("r", parents), nodes, leaves, under)


def attribute_factors(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    """Identity, total, and (for n ≥ 3) a random recode partition, like hhinstlevels."""
    out = [np.eye(n), np.ones((1, n))]
    if n >= 3:
        labels = rng.integers(0, 2, size=n)
        labels[0], labels[1] = 0, 1
        out.append(np.stack([(labels == k).astype(float) for k in range(2)]))
    return out


def random_queries(rng: np.random.Generator, shape: tuple[int, ...]) -> list[KronQuery]:
    per = [attribute_factors(rng, n) for n in shape]
    qs = [KronQuery("detailed", tuple(np.eye(n) for n in shape))]
    qs.append(KronQuery("total", tuple(np.ones((1, n)) for n in shape)))
    for k in range(5):
        qs.append(KronQuery(f"q{k}", tuple(f[int(rng.integers(len(f)))] for f in per)))
    return qs


@dataclass
class Problem:
    spine: Spine
    shape: tuple[int, ...]
    measurements: list[Measurements]
    constraints: list[Constraints]
    truth: dict[str, np.ndarray]


def random_problem(rng: np.random.Generator, *, dense_matrix: bool = False) -> Problem:
    shapes = [(3, 2, 4), (2, 2, 3), (4, 3), (2, 3, 2, 2), (5,)]
    shape = shapes[int(rng.integers(len(shapes)))]
    n = int(np.prod(shape))
    spine = random_spine(rng, max_leaves=max(4, 800 // n // 2))
    leaf_truth = {g: rng.integers(0, 20, size=n).astype(float) for g in spine.leaves}
    # structural zeros: the first cell of attribute 0's level 0 at some leaves
    zero_q = KronQuery("zero0", (np.eye(shape[0])[:1], *(np.eye(m) for m in shape[1:])))
    zeroed = [g for g in spine.leaves if rng.random() < 0.4]
    for g in zeroed:
        t = leaf_truth[g].reshape(shape)
        t[0] = 0.0
    truth = {g: sum(leaf_truth[leaf] for leaf in spine.under[g]) for g in spine.nodes}
    if dense_matrix:
        qs = [KronQuery("detailed", (np.eye(n),))]
        qs += [KronQuery.from_matrix(f"m{k}", rng.normal(size=(3, n))) for k in range(4)]
        zero_q = KronQuery("zero0", (np.eye(n)[:1],))
        for g in zeroed:
            leaf_truth[g][0] = 0.0
        truth = {g: sum(leaf_truth[leaf] for leaf in spine.under[g]) for g in spine.nodes}
    else:
        qs = random_queries(rng, shape)
    rows: dict[str, list[tuple[str, float]]] = {q.name: [] for q in qs}
    for g in spine.nodes:
        is_leaf = g in spine.leaves
        chosen = [q for q in qs[1:] if rng.random() < 0.5]
        if is_leaf:
            chosen = [qs[0], *chosen]
        elif rng.random() < 0.2:
            chosen = []  # an unmeasured internal geounit
        for q in chosen:
            rows[q.name].append((g, float(rng.uniform(0.3, 5.0))))
    ms = []
    for q in qs:
        if not rows[q.name]:
            continue
        geos = [g for g, _ in rows[q.name]]
        var = np.array([v for _, v in rows[q.name]])
        ans = np.stack([q.answer(truth[g]) for g in geos])
        ans = ans + rng.normal(size=ans.shape) * np.sqrt(var)[:, None]
        ms.append(Measurements(q, tuple(geos), ans, var))
    cons = []
    tot_geos = [g for g in spine.nodes if g not in spine.leaves and rng.random() < 0.3]
    if tot_geos:
        tq = KronQuery("inv_total", tuple(np.ones((1, m)) for m in shape))
        if dense_matrix:
            tq = KronQuery("inv_total", (np.ones((1, n)),))
        cons.append(
            Constraints(tq, tuple(tot_geos), np.stack([tq.answer(truth[g]) for g in tot_geos]))
        )
    if zeroed:
        cons.append(Constraints(zero_q, tuple(zeroed), np.zeros((len(zeroed), zero_q.size))))
    return Problem(spine, shape, ms, cons, truth)


def dense_gls(p: Problem) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Estimate and covariance of every geounit's histogram from the stacked design."""
    x, cov, aggs = dense_joint(p)
    return {g: (b @ x, b @ cov @ b.T) for g, b in aggs.items()}


def dense_joint(
    p: Problem, *, below: str | None = None, fixed: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """The leaves' GLS estimate and joint covariance, and each geounit's aggregation
    matrix over the leaves. ``below``/``fixed``: only the measurements and constraints
    strictly below geounit ``below``, with its histogram fixed at ``fixed`` (the leaves
    outside its subtree are then unconstrained and meaningless)."""
    n = int(np.prod(p.shape))
    leaves = p.spine.leaves
    col = {g: i for i, g in enumerate(leaves)}

    def agg(g: str) -> np.ndarray:
        b = np.zeros((n, n * len(leaves)))
        for leaf in p.spine.under[g]:
            b[:, col[leaf] * n : (col[leaf] + 1) * n] += np.eye(n)
        return b

    aggs = {g: agg(g) for g in p.spine.nodes}
    keep = set(p.spine.nodes)
    if below is not None:
        inside = set(p.spine.under[below])
        keep = {g for g in p.spine.nodes if g != below and set(p.spine.under[g]) <= inside}
    a_rows, y, v = [], [], []
    for m in p.measurements:
        f = m.query.matrix()
        for g, ans, var in zip(m.geounits, m.answers[:, 0, :], m.variances, strict=True):
            if g not in keep:
                continue
            a_rows.append(f @ aggs[g])
            y.append(ans)
            v.append(np.full(ans.size, var))
    c_rows, c_vals = [], []
    for c in p.constraints:
        f = c.query.matrix()
        for g, val in zip(c.geounits, c.values[:, 0, :], strict=True):
            if g not in keep:
                continue
            c_rows.append(f @ aggs[g])
            c_vals.append(val)
    if below is not None:
        assert fixed is not None
        c_rows.append(aggs[below])
        c_vals.append(fixed)
        outside = [g for g in p.spine.leaves if g not in inside]
        for g in outside:  # pin the leaves outside the subtree (not estimated)
            c_rows.append(aggs[g])
            c_vals.append(np.zeros(n))
    a = np.vstack(a_rows)
    yy, vv = np.concatenate(y), np.concatenate(v)
    if c_rows:
        cm, cv = np.vstack(c_rows), np.concatenate(c_vals)
        x0 = np.linalg.lstsq(cm, cv, rcond=None)[0]
        null = scipy.linalg.null_space(cm)
    else:
        x0 = np.zeros(a.shape[1])
        null = np.eye(a.shape[1])
    sol = gls(a @ null, yy - a @ x0, vv)
    x = x0 + null @ sol.coef
    cov = null @ sol.covariance @ null.T
    return x, cov, aggs


def _check(p: Problem) -> None:
    res = tree_gls(p.spine.hierarchy, p.measurements, p.constraints)
    ref = dense_gls(p)
    for lvl, ids in enumerate(res.levels):
        hist = res.histograms(lvl)
        for i, g in enumerate(ids):
            est, cov = ref[g]
            scale = max(1.0, float(np.abs(est).max()))
            assert np.abs(hist[i] - est).max() <= TOL * scale, g
            cscale = max(1.0, float(np.abs(cov).max()))
            assert np.abs(res.covariance(lvl, i) - cov).max() <= TOL * cscale, g


@pytest.mark.parametrize("seed", range(56))
def test_tree_gls_equals_dense_gls_on_random_spines(seed: int) -> None:
    _check(random_problem(np.random.default_rng(seed)))


@pytest.mark.parametrize("seed", range(6))
def test_tree_gls_equals_dense_gls_with_general_matrix_queries(seed: int) -> None:
    _check(random_problem(np.random.default_rng(1000 + seed), dense_matrix=True))


def test_sum_of_children_is_the_parent_and_constraints_hold_exactly() -> None:
    p = random_problem(np.random.default_rng(7))
    res = tree_gls(p.spine.hierarchy, p.measurements, p.constraints)
    where = {g: (lvl, i) for lvl, ids in enumerate(res.levels) for i, g in enumerate(ids)}
    hists = [res.histograms(lvl) for lvl in range(len(res.levels))]
    parents = p.spine.hierarchy.parents
    for g in p.spine.nodes:
        kids = [c for c, par in parents.items() if par == g]
        if kids:
            lvl, i = where[g]
            total = sum(hists[where[c][0]][where[c][1]] for c in kids)
            assert np.abs(total - hists[lvl][i]).max() <= 1e-9 * max(1.0, np.abs(total).max())
    for c in p.constraints:
        for g, val in zip(c.geounits, c.values[:, 0, :], strict=True):
            lvl, i = where[g]
            assert np.abs(c.query.answer(hists[lvl][i]) - val).max() <= 1e-9 * max(
                1.0, float(np.abs(val).max())
            )


def test_the_worked_example() -> None:
    # total at A (variance 1) and the two children's cells (variance 2 each):
    # children's total 9 has variance 8, so the combination is (10 + 9/8)/(1 + 1/8).
    total = KronQuery("total", (np.ones((1, 2)),))
    cells = KronQuery("detailed", (np.eye(2),))
    h = GeounitTree("A", {"a1": "A", "a2": "A"})
    ms = [
        Measurements(total, ("A",), [[10.0]], [1.0]),
        Measurements(cells, ("a1", "a2"), [[3.0, 2.0], [4.0, 0.0]], [2.0, 2.0]),
    ]
    res = tree_gls(h, ms)
    est = res.estimates(KronCells.of_query(total), 0)
    assert est.estimate[0, 0] == pytest.approx((10 + 9 / 8) / (1 + 1 / 8), abs=1e-12)
    assert est.std[0, 0] ** 2 == pytest.approx(1 / (1 + 1 / 8), abs=1e-12)
    kids = res.histograms(1)
    assert kids.sum(axis=0).sum() == pytest.approx(est.estimate[0, 0], abs=1e-12)
    # each child cell moves by a quarter of the parent's correction (equal variances)
    assert kids[0, 0] - 3.0 == pytest.approx((est.estimate[0, 0] - 9) / 4, abs=1e-12)


def test_single_unmeasured_child_takes_its_parent() -> None:
    cells = KronQuery("detailed", (np.eye(3),))
    h = GeounitTree("A", {"B": "A", "b1": "B", "b2": "B", "C": "A", "c": "C"})
    ans = {"A": [5.0, 1.0, 2.0], "b1": [1.0, 1, 1], "b2": [2.0, 0, 1], "C": [1.0, 1, 1]}
    geos = tuple(ans)
    ms = [Measurements(cells, geos, np.array([ans[g] for g in geos]), np.ones(len(geos)))]
    res = tree_gls(h, ms)
    lvl2 = dict(zip(res.levels[2], res.histograms(2), strict=True))
    lvl1 = dict(zip(res.levels[1], res.histograms(1), strict=True))
    assert np.allclose(lvl2["c"], lvl1["C"], atol=1e-12)
    assert np.allclose(res.covariance(2, res.levels[2].index("c")), res.covariance(1, 1))


def test_errors_name_the_geounit() -> None:
    cells = KronQuery("detailed", (np.eye(2),))
    total = KronQuery("total", (np.ones((1, 2)),))
    h = GeounitTree("A", {"a1": "A", "a2": "A"})
    with pytest.raises(UsageError, match=r"'a2'.*do not identify"):
        tree_gls(
            h,
            [
                Measurements(cells, ("a1",), [[1.0, 2.0]], [1.0]),
                Measurements(total, ("a2", "A"), [[1.0], [4.0]], [1.0, 1.0]),
            ],
        )
    with pytest.raises(UsageError, match="'a2' has siblings"):
        tree_gls(h, [Measurements(cells, ("a1", "A"), [[1.0, 2.0], [3, 4]], [1.0, 1.0])])
    with pytest.raises(UsageError, match="'zz' is not in the hierarchy"):
        tree_gls(h, [Measurements(cells, ("zz",), [[1.0, 2.0]], [1.0])])
    with pytest.raises(UsageError, match=r"'b'.*does not descend"):
        tree_gls(GeounitTree("A", {"a": "A", "b": "c", "c": "b"}), [])
    with pytest.raises(UsageError, match="measured twice"):
        tree_gls(h, [Measurements(cells, ("a1", "a1"), [[1.0, 2.0], [1, 2]], [1.0, 1.0])])


def test_replicates_solve_like_separate_runs() -> None:
    p = random_problem(np.random.default_rng(11))
    rng = np.random.default_rng(12)
    reps = 3
    stacked = []
    for m in p.measurements:
        extra = m.answers + rng.normal(size=(m.answers.shape[0], reps, m.answers.shape[2]))
        stacked.append(Measurements(m.query, m.geounits, extra, m.variances))
    res = tree_gls(p.spine.hierarchy, stacked, p.constraints)
    last = len(res.levels) - 1
    for r in range(reps):
        single = [
            Measurements(m.query, m.geounits, m.answers[:, r, :], m.variances) for m in stacked
        ]
        one = tree_gls(p.spine.hierarchy, single, p.constraints)
        assert np.allclose(res.histograms(last)[:, r, :], one.histograms(last), atol=1e-9)


def test_noise_variance_is_the_discrete_gaussian_variance() -> None:
    from fractions import Fraction

    # direct summation of x² p(x) over the lattice (σ² = 1/2: well below σ²)
    s2 = 0.5
    x = np.arange(-40, 41)
    w = np.exp(-(x**2) / (2 * s2))
    assert noise_variance(Fraction(1, 2)) == pytest.approx(
        float((x**2 * w).sum() / w.sum()), rel=1e-12
    )
    assert noise_variance(Fraction(1, 2)) < 0.5
    assert normal_moe(1.0, 0.95) == pytest.approx(1.959963984540054)


@pytest.mark.slow  # dense 4,000-unknown GLS (≈ 30 s); the random spines cover the algorithm
def test_real_histogram_equals_dense_gls() -> None:
    """The 2,016-cell histogram with the 2020 strategy's 11 queries at a root and two leaves,
    the root total exact and no minors in nursing facilities at the leaves: the tree GLS
    (blocks of the real attribute structure) against a dense constrained GLS."""
    import scipy.linalg as sl

    from privtab.topdown.histogram import CELLS, MEASURED_QUERIES, query

    rng = np.random.default_rng(21)
    qs = [KronQuery.of(query(name)) for name in MEASURED_QUERIES]
    h = GeounitTree("r", {"a": "r", "b": "r"})
    truth = {g: rng.integers(0, 3, size=CELLS).astype(float) for g in ("a", "b")}
    nurse = KronQuery("nurse", (np.eye(8)[3:4], np.eye(2)[:1], np.eye(2), np.eye(63)))
    zero_cells = np.flatnonzero(nurse.matrix().sum(axis=0))
    for g in ("a", "b"):
        truth[g][zero_cells] = 0.0
    truth["r"] = truth["a"] + truth["b"]
    ms = []
    rows, ys, ws = [], [], []
    agg = {"a": np.array([1.0, 0.0]), "b": np.array([0.0, 1.0]), "r": np.array([1.0, 1.0])}
    for q in qs:
        var = rng.uniform(0.5, 30.0, size=3)
        geos = ("r", "a", "b")
        ans = np.stack([q.answer(truth[g]) for g in geos]) + rng.normal(size=(3, q.size))
        ms.append(Measurements(q, geos, ans, var))
        m = q.matrix()
        for g, a, v in zip(geos, ans, var, strict=True):
            rows.append(np.kron(agg[g][None, :], m))
            ys.append(a)
            ws.append(np.full(q.size, 1.0 / v))
    total = KronQuery.of(query("total"))
    cons = [
        Constraints(total, ("r",), [[truth["r"].sum()]]),
        Constraints(nurse, ("a", "b"), np.zeros((2, nurse.size))),
    ]
    res = tree_gls(h, ms, cons)
    # dense: unknowns are the leaves' cells outside the structural zeros, the total by a
    # null-space parametrisation
    keep = np.setdiff1d(np.arange(CELLS), zero_cells)
    cols = np.concatenate([keep, CELLS + keep])
    a_mat = np.vstack(rows)[:, cols]
    y, w = np.concatenate(ys), np.concatenate(ws)
    tot_row = np.ones((1, cols.size))
    x0 = tot_row.T[:, 0] * truth["r"].sum() / cols.size
    null = sl.null_space(tot_row)
    an = a_mat @ null
    info = an.T @ (an * w[:, None])
    cho = sl.cho_factor(info)
    u = sl.cho_solve(cho, an.T @ (w * (y - a_mat @ x0)))
    cov_u = sl.cho_solve(cho, np.eye(info.shape[0]))
    x = x0 + null @ u
    cov = null @ cov_u @ null.T
    full = np.zeros(2 * CELLS)
    full[cols] = x
    leaves = res.histograms(1)
    assert res.levels[1] == ("a", "b")
    assert np.abs(leaves.reshape(-1) - full).max() <= 1e-8
    fullcov = np.zeros((2 * CELLS, 2 * CELLS))
    fullcov[np.ix_(cols, cols)] = cov
    for i in range(2):
        block = fullcov[i * CELLS : (i + 1) * CELLS, i * CELLS : (i + 1) * CELLS]
        assert np.abs(res.covariance(1, i) - block).max() <= 1e-9 * max(1.0, np.abs(block).max())


def test_chunked_levels_equal_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    import privtab.topdown.gls as gls_module

    p = random_problem(np.random.default_rng(31))
    whole = tree_gls(p.spine.hierarchy, p.measurements, p.constraints)
    monkeypatch.setattr(gls_module, "CHUNK", 2)
    parts = tree_gls(p.spine.hierarchy, p.measurements, p.constraints)
    for lvl in range(len(whole.levels)):
        assert np.allclose(parts.histograms(lvl), whole.histograms(lvl), atol=1e-10)
        for i in range(len(whole.levels[lvl])):
            assert np.allclose(parts.covariance(lvl, i), whole.covariance(lvl, i), atol=1e-10)


def test_constraint_at_an_unmeasured_single_child_holds_at_its_parent() -> None:
    """``a`` is its parent ``A``'s only child and measures nothing: its exact total is a
    constraint on ``A`` (same histogram); the dense GLS agrees."""
    rng = np.random.default_rng(41)
    parents = {"A": "r", "B": "r", "a": "A", "b1": "B", "b2": "B"}
    leaves = ["a", "b1", "b2"]
    under = {"r": leaves, "A": ["a"], "B": ["b1", "b2"], "a": ["a"], "b1": ["b1"], "b2": ["b2"]}
    spine = Spine(GeounitTree("r", parents), ["r", *parents], leaves, under)
    shape = (2, 3)
    truth_leaf = {g: rng.integers(0, 9, size=6).astype(float) for g in leaves}
    truth = {g: sum(truth_leaf[x] for x in under[g]) for g in under}
    det = KronQuery("detailed", (np.eye(2), np.eye(3)))
    tot = KronQuery("total", (np.ones((1, 2)), np.ones((1, 3))))
    geos = ("r", "A", "b1", "b2")
    var = np.array([2.0, 1.0, 3.0, 0.5])
    ans = np.stack([det.answer(truth[g]) for g in geos]) + rng.normal(size=(4, 6))
    ms = [Measurements(det, geos, ans, var)]
    cons = [Constraints(tot, ("a",), [[truth["a"].sum()]])]
    p = Problem(spine, shape, ms, cons, truth)
    _check(p)
    res = tree_gls(spine.hierarchy, ms, cons)
    a_hist = res.histograms(2)[res.levels[2].index("a")]
    assert a_hist.sum() == pytest.approx(truth["a"].sum(), abs=1e-9)


def test_tree_from_level_arrays_and_level_names() -> None:
    tree = GeounitTree.from_levels(
        [["S"], ["S1", "S2"], ["S1a", "S1b", "S2a"]], [[0, 0], [0, 0, 1]], ("St", "Co", "Tr")
    )
    assert tree.parents == {"S1": "S", "S2": "S", "S1a": "S1", "S1b": "S1", "S2a": "S2"}
    cells = KronQuery("detailed", (np.eye(2),))
    geos = ("S1a", "S1b", "S2a")
    ms = [Measurements(cells, geos, np.ones((3, 2)), np.ones(3))]
    res = tree_gls(tree, ms, depth=1)
    assert res.levels == (("S",), ("S1", "S2"))
    est = res.estimates(KronCells.of_query(cells), "Co")
    assert np.allclose(est.estimate, [[2.0, 2.0], [1.0, 1.0]])
    assert np.allclose(est.std**2, [[2.0, 2.0], [1.0, 1.0]])
    with pytest.raises(ValueError, match="not solved"):
        res.estimates(KronCells.of_query(cells), "Tr")
    bad = GeounitTree(tree.root, tree.parents, ("St", "Co"))
    with pytest.raises(UsageError, match="3 levels but 2 level names"):
        tree_gls(bad, ms)
