"""TopDown's per-parent problem: properties of every solution, agreement of independent
solvers and of the closed-form GLS, infeasibility named, the rounder's integrality.

Problems are drawn from synthetic truths with production's variances and seeded discrete
Gaussian noise (:mod:`privtab.topdown.solve_synthetic`). The heavier checks (realistic
block-group problems, a hierarchy solved top-down with many seeds) are in
``test_solve_slow.py``.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privtab.analysis.combine import gls
from privtab.topdown.histogram import CELLS, MEASURED_QUERIES, SHAPE, cell_index, query
from privtab.topdown.solve import (
    PRODUCTION_TOLERANCE,
    ChildConstraints,
    ChildMeasurements,
    ChildrenProblem,
    ChildrenSolution,
    TopDownInfeasibleError,
    production_passes,
    solve_children,
)
from privtab.topdown.solve_synthetic import children_problem, synthetic_problem

_NURSING_MINORS = np.zeros(SHAPE, dtype=bool)
_NURSING_MINORS[3, 0] = True


def check(problem: ChildrenProblem, sol: ChildrenSolution) -> None:
    """Every property a solution must have (independently of the library's own checks)."""
    counts, l2 = sol.counts, sol.l2
    k = len(problem.children)
    c = problem.constraints
    assert counts.dtype == np.int64
    assert counts.shape == (k, CELLS)
    assert counts.min(initial=0) >= 0
    assert l2.min(initial=0) >= 0
    if problem.parent is not None:
        np.testing.assert_array_equal(counts.sum(axis=0), problem.parent)
        np.testing.assert_allclose(l2.sum(axis=0), problem.parent, atol=1e-5)
    by_hhgq = counts.reshape(k, 8, -1).sum(axis=2)
    assert np.all(by_hhgq >= c.gq_lower)
    assert np.all((c.gq_upper < 0) | (by_hhgq <= c.gq_upper))
    assert not counts[:, c.structural_zeros].any()  # no minors in nursing facilities
    assert not counts.reshape((k, *SHAPE))[:, 3, 0].any()
    if c.total is not None:
        group = np.arange(k) if c.total_group is None else np.asarray(c.total_group)
        for g, total in enumerate(c.total):
            assert counts[group == g].sum() == total


def small(seed: int, k: int, persons: int, level: str, noise: bool) -> ChildrenProblem:
    return synthetic_problem(
        seed, children=k, persons=persons, level=level, gq_share=0.2, noise=noise
    )


@settings(max_examples=25)
@given(
    seed=st.integers(0, 10**6),
    k=st.integers(1, 5),
    persons=st.integers(0, 60),
    level=st.sampled_from(["Block", "Block_Group", "Tract"]),
    noise=st.booleans(),
)
def test_solutions_sum_to_the_parent_are_integral_and_meet_every_constraint(
    seed: int, k: int, persons: int, level: str, noise: bool
) -> None:
    problem = small(seed, k, persons, level, noise)
    # cross_check: Clarabel solves every pass again; objectives must agree to 1e-6
    sol = solve_children(problem, cross_check="clarabel")
    check(problem, sol)
    d = sol.diagnostics
    if d.path == "optimised":
        assert d.cross_check is not None
        assert max(d.cross_check) <= 1e-6
        assert d.rounder_mip_fallbacks == 0
        assert d.laminar
        # a handful of persons under total bands can make the structured solver's
        # active-set steps cycle: Clarabel then solves the pass, counted (and cross-checked
        # above); realistic problems must need no fallback (test_realistic_problems_…,
        # test_solve_batch.py, test_solve_hierarchy.py)
        assert d.structured_fallbacks == 0 or persons <= 12
        assert len(d.l2_objectives) == len(problem.l2_passes)
    elif k == 1:
        assert d.path == "single child"
        np.testing.assert_array_equal(sol.counts[0], problem.parent)
    else:
        assert persons == 0
        assert d.path == "empty parent"
        assert not sol.counts.any()


@settings(max_examples=4)  # a root has ~1,900 cells: a second each (n³ factorisation)
@given(seed=st.integers(0, 10**6), persons=st.integers(1, 60), noise=st.booleans())
def test_the_root_keeps_its_exact_total(seed: int, persons: int, noise: bool) -> None:
    problem = synthetic_problem(seed, persons=persons, level="US", root=True, noise=noise)
    assert problem.parent is None
    assert "total" not in problem.measurements.answers
    sol = solve_children(problem, cross_check="osqp")
    check(problem, sol)
    assert sol.counts.sum() == persons


@pytest.mark.parametrize("level", ["Block", "Block_Group", "US"])
@pytest.mark.parametrize("solver", ["structured", "clarabel", "osqp"])
def test_noise_off_gives_back_the_truth(level: str, solver: str) -> None:
    rng = np.random.default_rng(7)
    from privtab.topdown.solve_synthetic import synthetic_children

    root = level == "US"
    truth, lower, upper = synthetic_children(rng, 1 if root else 4, 80, 0.2)
    problem = children_problem(
        "noise-off",
        truth,
        lower,
        upper,
        None if root else truth.sum(axis=0),
        level,
        0,
        noise=False,
        total=truth.sum(axis=1) if root else None,
    )
    sol = solve_children(problem, solver=solver)
    np.testing.assert_allclose(sol.l2, truth, atol=1e-6)
    np.testing.assert_array_equal(sol.counts, truth)
    assert max(sol.diagnostics.l2_objectives) < 1e-8


def test_two_solvers_agree_and_round_the_same_where_the_l2_solutions_coincide() -> None:
    agreed = 0
    for seed in range(12):
        problem = small(seed, 4, 50, ["Block", "Block_Group"][seed % 2], True)
        a = solve_children(problem)
        b = solve_children(problem, solver="clarabel")
        c = solve_children(problem, solver="osqp")
        for other in (b, c):
            for fa, fb in zip(
                a.diagnostics.l2_objectives, other.diagnostics.l2_objectives, strict=True
            ):
                # different solvers' first passes give bands a hair apart: 1e-6 relative
                assert abs(fa - fb) <= 1e-6 * max(abs(fa), 1.0)
        if np.abs(a.l2 - b.l2).max() < 1e-7:
            agreed += 1
            np.testing.assert_array_equal(a.counts, b.counts)
    assert agreed >= 8  # the comparison is not vacuous


def _design(problem: ChildrenProblem, cells: np.ndarray) -> tuple[np.ndarray, ...]:
    """Rows of every measured query restricted to ``cells``, their answers and variances."""
    m = problem.measurements
    rows, values, variances = [], [], []
    k = len(problem.children)
    for name, answers in m.answers.items():
        q = query(name).matrix().toarray()[:, cells]
        keep = q.any(axis=1)
        for i in range(k):
            block = np.zeros((int(keep.sum()), k * cells.size))
            block[:, i * cells.size : (i + 1) * cells.size] = q[keep]
            rows.append(block)
            values.append(answers[i][keep])
            variances.append(np.full(int(keep.sum()), float(m.variances[name])))
    return np.vstack(rows), np.concatenate(values), np.concatenate(variances)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_l2_step_is_the_closed_form_gls_where_non_negativity_is_not_binding(
    seed: int,
) -> None:
    """Large counts in a few household cells: non-negativity and the bounds are slack, so
    the L2 step is generalised least squares under ``Σ children = parent``, solved here by
    ``privtab.analysis.gls`` on a basis of that constraint's null space."""
    rng = np.random.default_rng(seed)
    k = 3
    cells = np.sort(rng.choice(SHAPE[3] * 4, size=10, replace=False))  # hhgq 0 cells
    truth = np.zeros((k, CELLS), dtype=np.int64)
    truth[:, cells] = rng.integers(300, 600, size=(k, cells.size))
    lower = np.zeros((k, 8), dtype=np.int64)
    upper = np.zeros((k, 8), dtype=np.int64)
    upper[:, 0] = -1
    problem = children_problem(f"gls-{seed}", truth, lower, upper, truth.sum(axis=0), "Block", seed)
    sol = solve_children(problem)
    assert sol.l2[:, cells].min() > 50  # not binding
    parent = truth.sum(axis=0)[cells].astype(np.float64)
    x0 = np.tile(parent / k, k)
    basis = np.kron(np.vstack([np.eye(k - 1), -np.ones((1, k - 1))]), np.eye(cells.size))
    design, values, variances = _design(problem, cells)
    est = gls(design @ basis, values - design @ x0, variances)
    expected = (x0 + basis @ est.coef).reshape(k, cells.size)
    np.testing.assert_allclose(sol.l2[:, cells], expected, rtol=0, atol=1e-6)
    for other in ("clarabel", "osqp"):
        np.testing.assert_allclose(
            solve_children(problem, solver=other).l2[:, cells], expected, atol=1e-4
        )


def test_the_total_first_pass_bounds_the_final_totals() -> None:
    """Production's tolerance: every child's total ends within 0.1 of the first pass's."""
    from privtab.topdown.solve import _terms, _totals  # private on purpose: the pass itself
    from privtab.topdown.solve_model import prepare
    from privtab.topdown.solve_structured import solve_pass

    problem = small(3, 5, 400, "Tract", True)
    c = problem.constraints
    g, t = _totals(c, 5)
    model = prepare(
        problem.geounit,
        problem.children,
        problem.parent,
        c.gq_lower,
        c.gq_upper,
        c.structural_zeros,
        g,
        t,
    )
    first = solve_pass(model, _terms(problem, model, ["total"]), [], "clarabel").answers[0]
    l2 = solve_children(problem).l2
    gap = np.abs(l2.sum(axis=1) - first[:, 0])
    assert gap.max() <= PRODUCTION_TOLERANCE + 1e-7
    assert gap.max() > PRODUCTION_TOLERANCE / 2  # the band is what holds them


# ---- infeasible problems: an error naming the geounit and the constraint ----------------


def _problem(
    parent: np.ndarray | None,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    total: np.ndarray | None = None,
    total_group: np.ndarray | None = None,
    geounit: str = "G-17",
) -> ChildrenProblem:
    k = lower.shape[0]
    names = [q for q in MEASURED_QUERIES if q != "total"] if parent is None else MEASURED_QUERIES
    answers = {q: np.ones((k, query(q).size)) for q in names}
    variances = {q: Fraction(3, 2) for q in names}
    l2, rnd = production_passes(list(names), total_first=False)
    return ChildrenProblem(
        geounit,
        tuple(f"{geounit}-{i}" for i in range(k)),
        parent,
        ChildMeasurements(answers, variances),
        ChildConstraints(lower, upper, _NURSING_MINORS.ravel(), total, total_group),
        l2,
        rnd,
        PRODUCTION_TOLERANCE,
    )


def _parent(**persons: int) -> np.ndarray:
    p = np.zeros(CELLS, dtype=np.int64)
    for key, n in persons.items():
        h, v, s, r = (int(c) for c in key[1:].split("_"))
        p[cell_index(h, v, s, r)] = n
    return p


@pytest.mark.parametrize(
    ("kwargs", "phrase"),
    [
        (  # lower bounds exceed the parent
            {"parent": _parent(c1_1_0_0=1), "lo": [[0, 1] + [0] * 6] * 2},
            "lower bounds of the children on hhgq 1",
        ),
        (  # a child's lower bound above its upper bound
            {"parent": _parent(c0_1_0_0=5), "lo": [[2] + [0] * 7] * 2, "up": [[1] + [-1] * 7] * 2},
            "exceeds its upper bound",
        ),
        (  # persons in a structurally zero cell (a minor in a nursing facility)
            {"parent": _parent(c3_0_0_0=1, c0_1_0_0=3)},
            "structurally zero",
        ),
        (  # the parent has persons of a type no child has a unit of
            {"parent": _parent(c2_1_0_0=2), "up": [[-1, -1, 0, -1, -1, -1, -1, -1]] * 2},
            "upper bounds of the children on hhgq 2",
        ),
        (  # the root's exact total below its lower bounds
            {"parent": None, "lo": [[0, 4] + [0] * 6], "total": [3]},
            "exact total 3",
        ),
        (  # exact totals that do not add up to the parent
            {"parent": _parent(c0_1_0_0=5), "total": [2, 2]},
            "exact totals of the children sum to 4",
        ),
    ],
)
def test_infeasible_problems_name_the_geounit_and_the_constraint(
    kwargs: dict[str, object], phrase: str
) -> None:
    parent = kwargs["parent"]
    k = 1 if parent is None else 2
    lo = np.asarray(kwargs.get("lo", [[0] * 8] * k), dtype=np.int64)
    up = np.asarray(kwargs.get("up", [[-1] * 8] * k), dtype=np.int64)
    total = kwargs.get("total")
    problem = _problem(
        parent,  # type: ignore[arg-type]
        lo,
        up,
        total=None if total is None else np.asarray(total, dtype=np.int64),
    )
    with pytest.raises(TopDownInfeasibleError, match=phrase) as err:
        solve_children(problem)
    assert err.value.geounit == "G-17"
    assert "'G-17'" in str(err.value)


def test_a_solver_proves_joint_infeasibility_of_group_totals_and_bounds() -> None:
    """Two children sharing an exact total of 3 can only hold household persons, of which
    the parent has 5: every per-hhgq condition holds, the solver finds the contradiction."""
    lo = np.zeros((3, 8), dtype=np.int64)
    up = np.full((3, 8), -1, dtype=np.int64)
    up[:2, 1:] = 0
    up[2, 0] = 0
    problem = _problem(
        _parent(c0_1_0_0=5, c1_1_0_0=2),
        lo,
        up,
        total=np.array([3], dtype=np.int64),
        total_group=np.array([0, 0, -1], dtype=np.int64),
    )
    with pytest.raises(TopDownInfeasibleError, match="G-17"):
        solve_children(problem)


def test_single_children_and_empty_parents_are_checked_too() -> None:
    lo = np.array([[0, 1, 0, 0, 0, 0, 0, 0]], dtype=np.int64)
    ok = solve_children(_problem(_parent(c1_1_0_0=2), lo, np.full((1, 8), -1)))
    assert ok.diagnostics.path == "single child"
    assert ok.counts.sum() == 2
    empty = _problem(
        np.zeros(CELLS, dtype=np.int64),
        np.zeros((3, 8), dtype=np.int64),
        np.full((3, 8), -1, dtype=np.int64),
    )
    assert not solve_children(empty).counts.any()
    needs = _problem(
        np.zeros(CELLS, dtype=np.int64), np.tile(lo, (3, 1)), np.full((3, 8), -1, dtype=np.int64)
    )
    with pytest.raises(TopDownInfeasibleError, match="lower bounds"):
        solve_children(needs)


def test_malformed_problems_are_refused() -> None:
    good = small(1, 3, 30, "Block", True)
    bad_answers = dict(good.measurements.answers)
    bad_answers["total"] = bad_answers["total"][:2]
    cases = [
        replace(good, children=()),
        replace(good, measurements=ChildMeasurements(bad_answers, good.measurements.variances)),
        replace(good, l2_passes=(("total",),)),
        replace(good, tolerance=float("nan")),
        replace(good, rounder_passes=(("race",),)),
    ]
    for case in cases:
        with pytest.raises(ValueError, match=r"synthetic|unknown TopDown query"):
            solve_children(case)
    with pytest.raises(ValueError, match="solver"):
        solve_children(good, solver="gurobi")


# ---- the rounder ------------------------------------------------------------------------


def test_production_rounder_rows_are_laminar_and_others_are_reported() -> None:
    from privtab.topdown.solve_round import laminar

    _, rnd = production_passes(list(MEASURED_QUERIES), total_first=True)
    assert laminar(rnd)
    assert not laminar([["cenrace", "hhgq"]])
    problem = replace(small(5, 4, 60, "Block", True), rounder_passes=(("cenrace", "hhgq"),))
    sol = solve_children(problem)
    check(problem, sol)
    assert not sol.diagnostics.laminar


def test_lp_vertices_are_integral_and_equal_the_mip_optimum(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Total unimodularity in practice: every rounder LP's optimum equals its MIP's."""
    from privtab.topdown import solve_round  # private on purpose: the LP itself

    gaps: list[float] = []
    original = solve_round._Lp._run

    def both(
        self: solve_round._Lp, lp: solve_round.LpArrays, *, mip: bool
    ) -> tuple[np.ndarray, float]:
        b, obj = original(self, lp, mip=False)
        assert np.all(np.abs(b - np.round(b)) <= 1e-9)  # an integral vertex
        _, obj_mip = original(self, lp, mip=True)
        gaps.append(abs(obj - obj_mip))
        return b, obj

    monkeypatch.setattr(solve_round._Lp, "_run", both)
    for seed in range(4):
        problem = small(seed, 4, 50, ["Block", "Block_Group"][seed % 2], True)
        check(problem, solve_children(problem))
    assert gaps
    assert max(gaps) <= 1e-9


@pytest.mark.slow  # realistic block groups, three solvers (~1 min); small ones run above
@pytest.mark.parametrize("level", ["Block", "Block_Group"])
def test_realistic_problems_agree_across_solvers(level: str) -> None:
    agreed = 0
    for seed in range(4):
        kids, persons = (33, 1000) if level == "Block" else (4, 4000)
        problem = synthetic_problem(seed, children=kids, persons=persons, level=level)
        a = solve_children(problem, cross_check="osqp")
        check(problem, a)
        assert a.diagnostics.structured_fallbacks == 0
        assert a.diagnostics.rounder_mip_fallbacks == 0
        b = solve_children(problem, solver="clarabel")
        check(problem, b)
        if np.abs(a.l2 - b.l2).max() < 1e-7:
            agreed += 1
            np.testing.assert_array_equal(a.counts, b.counts)
    assert agreed >= 2


def test_a_problem_measuring_only_totals_is_solved_and_checked() -> None:
    """One pass with ``total`` only: the cells are not unique; the generic path gives a
    solution meeting every constraint, with the optimal totals."""
    base = small(2, 4, 60, "Block", True)
    m = base.measurements
    only = replace(
        base,
        measurements=ChildMeasurements(
            {"total": m.answers["total"]}, {"total": m.variances["total"]}
        ),
        l2_passes=(("total",),),
    )
    a = solve_children(only)
    check(only, a)
    b = solve_children(only, solver="osqp")
    np.testing.assert_allclose(a.l2.sum(axis=1), b.l2.sum(axis=1), atol=1e-5)


@pytest.mark.parametrize("solver", ["clarabel", "osqp"])
def test_a_large_root_is_checked_on_its_own_scale(solver: str) -> None:
    """The root's tolerances follow its exact total (no parent to scale them)."""
    problem = synthetic_problem(4, persons=300_000, level="US", root=True)
    sol = solve_children(problem, solver=solver)
    check(problem, sol)
    assert sol.counts.sum() == 300_000


def test_solving_is_deterministic() -> None:
    problem = small(11, 5, 60, "Block_Group", True)
    a, b = solve_children(problem), solve_children(problem)
    np.testing.assert_array_equal(a.counts, b.counts)
    np.testing.assert_array_equal(a.l2, b.l2)
