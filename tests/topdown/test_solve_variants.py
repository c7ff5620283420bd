"""The solver on the problems the spine and the units run make: siblings whose variances
differ (a child that absorbed its single child's budget share) and the units histogram
(vacant / occupied, every child's housing units exact).

Neither takes the generic path any more: the structured solver keeps one Hessian per class
of children with equal weights (and exact totals shared by several children), the units
histogram has a closed form (:mod:`privtab.topdown.solve_units`). Checked against a second
solver
(OSQP cross-check of every pass) and against the KKT conditions of the weighted objective
computed here: wherever every child is positive in a cell, the gradients of the children's
weighted objectives agree (the coupling's multiplier), each child's weight its own 1/σ².
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest

from privtab.topdown.histogram import CELLS
from privtab.topdown.solve import (
    ChildConstraints,
    ChildMeasurements,
    ChildrenProblem,
    solve_children,
)
from privtab.topdown.solve_synthetic import synthetic_problem


def _mixed(problem: ChildrenProblem, factor: Fraction, which: int = 0) -> ChildrenProblem:
    """The same problem with child ``which``'s variances divided by ``factor``."""
    m = problem.measurements
    k = len(problem.children)
    variances = {}
    for q in m.answers:
        v = m.child_variances(q, k)
        variances[q] = tuple(x / factor if i == which and x is not None else x
                             for i, x in enumerate(v))  # fmt: skip
    return replace(problem, measurements=ChildMeasurements(m.answers, variances))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_siblings_with_different_variances_agree_across_solvers(seed: int) -> None:
    p = _mixed(synthetic_problem(seed, children=5, persons=400, level="Block_Group"),
               Fraction(7, 2))  # fmt: skip
    sol = solve_children(p, cross_check="osqp")  # every pass again by OSQP, 1e-6 relative
    assert sol.diagnostics.generic == ""  # the structured solver, one Hessian per class
    assert sol.diagnostics.cross_check is not None
    assert max(sol.diagnostics.cross_check) <= 1e-6
    np.testing.assert_array_equal(sol.counts.sum(axis=0), p.parent)


def test_per_child_weights_meet_the_kkt_conditions() -> None:
    """One pass (detailed only, no bounds, large counts): where all children are positive
    in a cell, w_i (x_ic − y_ic) is the same for every child i (the coupling's multiplier),
    with each child's own weight — and not with a common weight."""
    rng = np.random.default_rng(5)
    k = 4
    truth = rng.integers(200, 400, size=(k, CELLS))
    noisy = truth + rng.integers(-20, 21, size=truth.shape)
    var = (Fraction(2), Fraction(2), Fraction(1, 3), Fraction(2))
    zeros = np.zeros(CELLS, dtype=bool)
    p = ChildrenProblem(
        "kkt", [f"c{i}" for i in range(k)], truth.sum(axis=0),
        ChildMeasurements({"detailed": noisy.astype(float)}, {"detailed": var}),
        ChildConstraints(None, None, zeros), [["detailed"]], [["detailed"]], 0.1,
    )  # fmt: skip
    sol = solve_children(p)
    x = sol.l2
    w = np.array([float(1 / v) for v in var])[:, None]
    grad = w * (x - noisy)
    positive = np.all(x > 1e-6, axis=0)
    assert positive.mean() > 0.99
    spread = grad[:, positive].max(axis=0) - grad[:, positive].min(axis=0)
    assert spread.max() < 1e-6
    unweighted = (x - noisy)[:, positive]
    assert (unweighted.max(axis=0) - unweighted.min(axis=0)).max() > 1  # weights matter


def test_uniform_variances_per_child_take_the_structured_path() -> None:
    p = synthetic_problem(4, children=6, persons=300, level="Block")
    k = len(p.children)
    tuples = {q: (v,) * k for q, v in p.measurements.variances.items()}
    q = replace(p, measurements=ChildMeasurements(p.measurements.answers, tuples))
    a, b = solve_children(p), solve_children(q)
    assert b.diagnostics.generic == ""
    assert b.diagnostics.l2_solvers == a.diagnostics.l2_solvers
    np.testing.assert_array_equal(a.counts, b.counts)


def _units_problem(seed: int, noise: bool) -> tuple[ChildrenProblem, np.ndarray]:
    rng = np.random.default_rng(seed)
    k = 6
    hu = rng.integers(0, 40, size=k)
    occupied = rng.binomial(hu, 0.85)
    truth = np.stack([hu - occupied, occupied], axis=1).astype(np.int64)  # [vacant, occupied]
    var = Fraction(13, 2)
    answers = truth + (rng.integers(-4, 5, size=truth.shape) if noise else 0)
    p = ChildrenProblem(
        "units", [f"b{i}" for i in range(k)], truth.sum(axis=0),
        ChildMeasurements({"detailed": answers.astype(float)}, {"detailed": var}),
        ChildConstraints(None, None, np.zeros(2, dtype=bool), hu.astype(np.int64)),
        [["detailed"]], [["detailed"]], 0.1, level="Block", histogram="units",
    )  # fmt: skip
    return p, truth


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_units_histogram_keeps_every_block_s_housing_units(seed: int) -> None:
    p, truth = _units_problem(seed, noise=True)
    sol = solve_children(p, cross_check="osqp")
    assert sol.diagnostics.generic == ""  # the closed form (solve_units)
    assert sol.counts.shape == (6, 2)
    np.testing.assert_array_equal(sol.counts.sum(axis=1), truth.sum(axis=1))  # invariant
    np.testing.assert_array_equal(sol.counts.sum(axis=0), p.parent)
    assert sol.counts.min() >= 0
    exact, _ = _units_problem(seed, noise=False)
    np.testing.assert_array_equal(solve_children(exact).counts, truth)


def test_a_units_problem_with_a_persons_query_is_refused() -> None:
    p, _ = _units_problem(1, noise=False)
    bad = replace(
        p, measurements=ChildMeasurements({"detailed": np.zeros((6, 2)), "hhgq": np.zeros((6, 8))},
                                          {"detailed": Fraction(1), "hhgq": Fraction(1)})
    )  # fmt: skip
    with pytest.raises(ValueError, match="unknown units query"):
        solve_children(bad)


def _classes(problem: ChildrenProblem, rng: np.random.Generator) -> ChildrenProblem:
    """Children in two or three classes of variances (the spine's bypass: a child that
    absorbed its single child's share has less noise, by a different factor per query)."""
    m = problem.measurements
    k = len(problem.children)
    which = rng.integers(0, 3, size=k)
    which[0] = 1  # at least one child differs
    factor = {q: (Fraction(1), Fraction(int(rng.integers(2, 9)), 2), Fraction(5, 4))
              for q in m.answers}  # fmt: skip
    variances = {
        q: tuple(v / factor[q][int(c)] for v, c in zip(m.child_variances(q, k), which, strict=True))
        for q in m.answers
    }
    return replace(problem, measurements=ChildMeasurements(m.answers, variances))


@pytest.mark.parametrize("level", ["Block", "Block_Group"])
def test_classes_of_siblings_on_the_structured_solver_match_clarabel(level: str) -> None:
    """Siblings in 2–3 classes of weights (one Hessian per class): the structured solver's
    certified optimum has Clarabel's objective (1e-6 relative, every pass) and the same
    rounded counts (none of these problems has a tie in the rounding), alone and batched."""
    from privtab.topdown.solve import solve_children_batch

    rng = np.random.default_rng(11 if level == "Block" else 12)
    problems = [
        _classes(synthetic_problem(int(s), children=int(rng.integers(3, 12)), persons=300,
                                   level=level), rng)
        for s in rng.integers(0, 10_000, size=6)
    ]  # fmt: skip
    batched = solve_children_batch(problems)
    for p, b in zip(problems, batched, strict=True):
        a = solve_children(p)
        g = solve_children(p, solver="clarabel")
        assert a.diagnostics.generic == ""
        assert "structured" in a.diagnostics.l2_solvers[-1]
        assert a.diagnostics.structured_fallbacks == 0
        for x, y in zip(a.diagnostics.l2_objectives, g.diagnostics.l2_objectives, strict=True):
            assert abs(x - y) <= 1e-6 * max(abs(x), abs(y), 1e-3)
        np.testing.assert_array_equal(a.counts, g.counts)
        np.testing.assert_array_equal(a.counts, b.counts)
        assert b.diagnostics.l2_solvers == a.diagnostics.l2_solvers


def _pairs(k: int, rng: np.random.Generator) -> np.ndarray:
    """Groups of exact totals: random pairs of children (production's AIAN and non-AIAN
    parts of a state share one invariant total), some other children alone, the rest
    without an exact total (−1)."""
    group = np.full(k, -1, dtype=np.int64)
    order = rng.permutation(k)
    g = 0
    for a, b in zip(order[0::2], order[1::2], strict=False):
        if rng.random() < 0.7:
            group[[a, b]] = g
            g += 1
    singles = np.flatnonzero((group < 0) & (rng.random(k) < 0.5))
    group[singles] = g + np.arange(singles.size)
    return group


@pytest.mark.parametrize("seed", [21, 22, 23, 24])
def test_exact_totals_shared_by_siblings_on_the_structured_solver(seed: int) -> None:
    """Exact totals of pairs of children (a state's two parts) — a row per group, bordered
    onto the coupling in the polish, a projection onto the bands and the group's sum in
    the ADMM: Clarabel's objective (1e-6 relative, every pass), no fallback, the totals
    kept exactly by the rounding."""
    from privtab.topdown.solve_synthetic import children_problem, synthetic_children

    rng = np.random.default_rng(seed)
    k = int(rng.integers(4, 12))
    truth, lower, upper = synthetic_children(rng, k, 2000, 0.05)
    group = _pairs(k, rng)
    on = group >= 0
    totals = np.bincount(group[on], weights=truth.sum(axis=1)[on]).astype(np.int64)
    p = children_problem(f"shared-{seed}", truth, lower, upper, truth.sum(axis=0), "County", seed)
    p = replace(p, constraints=replace(p.constraints, total=totals, total_group=group))
    p = _classes(p, rng) if seed % 2 else p
    a = solve_children(p)
    g = solve_children(p, solver="clarabel")
    assert a.diagnostics.l2_solvers[-1] == "structured"
    assert a.diagnostics.structured_fallbacks == 0
    for x, y in zip(a.diagnostics.l2_objectives, g.diagnostics.l2_objectives, strict=True):
        assert x <= y + 1e-6 * max(abs(y), 1e-3)  # never worse than Clarabel
        assert abs(x - y) <= 1e-6 * max(abs(x), abs(y), 1e-3)
    got = np.bincount(group[group >= 0], weights=a.counts.sum(axis=1)[group >= 0])
    np.testing.assert_array_equal(got.astype(np.int64), totals)
    np.testing.assert_array_equal(a.counts.sum(axis=0), p.parent)
