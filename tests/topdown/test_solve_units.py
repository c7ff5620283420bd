"""The units histogram's closed-form L2 step (:mod:`privtab.topdown.solve_units`) against
Clarabel and OSQP on many random problems, one by one and batched across parents.

A realistic bug — a breakpoint of the wrong sign, a child's weight ignored, the vacant cell
rebuilt from the wrong total, one projection's multiplier used for another parent in a
batch — changes the optimum by far more than the 1e-6 relative tolerance of the objective
comparison, and the counts must sum to the parent and keep every child's housing units.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from privtab.topdown.solve import (
    ChildConstraints,
    ChildMeasurements,
    ChildrenProblem,
    solve_children,
    solve_children_batch,
)
from privtab.topdown.solve_units import UNITS_SOLVER, project_sum


def _problem(
    rng: np.random.Generator,
    *,
    root: bool = False,
    totals: bool = True,
    mixed: bool = False,
    name: str = "units",
) -> ChildrenProblem:
    k = int(rng.integers(2, 40))
    hu = rng.integers(0, int(rng.choice([5, 60, 3000])), size=k)
    occupied = rng.binomial(hu, rng.uniform(0.3, 0.98))
    truth = np.stack([hu - occupied, occupied], axis=1).astype(np.int64)
    if rng.random() < 0.15:  # a parent with no vacant unit: one masked cell
        truth[:, 1] += truth[:, 0]
        truth[:, 0] = 0
        hu = truth.sum(axis=1)
    scale = float(rng.choice([0.5, 4.0, 40.0]))
    answers = truth + rng.normal(0.0, scale, size=truth.shape)
    var: Fraction | tuple[Fraction, ...] = Fraction(13, 2)
    if mixed:
        var = tuple(Fraction(13, 2) if rng.random() < 0.7 else Fraction(13, 7) for _ in range(k))
    return ChildrenProblem(
        name, [f"b{i}" for i in range(k)], None if root else truth.sum(axis=0),
        ChildMeasurements({"detailed": answers}, {"detailed": var}),
        ChildConstraints(None, None, np.zeros(2, dtype=bool),
                         hu.astype(np.int64) if totals else None),
        [["detailed"]], [["detailed"]], 0.1, level="Block", histogram="units",
    )  # fmt: skip


def _kinds() -> list[tuple[bool, bool, bool]]:
    return [(root, totals, mixed) for root in (False, True) for totals in (True, False)
            for mixed in (False, True)]  # fmt: skip


@pytest.mark.parametrize(("root", "totals", "mixed"), _kinds())
def test_units_closed_form_matches_clarabel_and_osqp(root: bool, totals: bool, mixed: bool) -> None:
    """15 random problems of each kind (120 in all): the same L2 optimum as OSQP (objective
    within 1e-6 relative, the OSQP cross-check of every pass too), never worse than
    Clarabel's, counts that keep the parent and every child's housing units."""
    rng = np.random.default_rng(100 + 8 * root + 4 * totals + 2 * mixed)
    for _ in range(15):
        p = _problem(rng, root=root, totals=totals, mixed=mixed)
        sol = solve_children(p, cross_check="osqp")
        d = sol.diagnostics
        if d.path != "optimised":
            continue
        assert d.generic == ""
        assert d.l2_solvers == (UNITS_SOLVER,)
        assert d.cross_check is not None
        assert max(d.cross_check) <= 1e-6
        a = d.l2_objectives[0]
        osqp = solve_children(p, solver="osqp")
        b = osqp.diagnostics.l2_objectives[0]
        assert abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1e-3)
        top = max(1.0, float(np.abs(sol.l2).max()))
        np.testing.assert_allclose(sol.l2, osqp.l2, rtol=0, atol=1e-5 * top)
        # Clarabel (+ its polish) is never better; on a few problems it stops short of the
        # optimum (a child with one housing unit left at 0.9989 / 0.0011 instead of 1 / 0)
        c = solve_children(p, solver="clarabel").diagnostics.l2_objectives[0]
        assert a <= c + 1e-9 * max(abs(c), 1e-3)
        if p.parent is not None:
            np.testing.assert_array_equal(sol.counts.sum(axis=0), p.parent)
        if p.constraints.total is not None:
            np.testing.assert_array_equal(sol.counts.sum(axis=1), p.constraints.total)
        assert sol.counts.min() >= 0


def test_batched_units_problems_equal_one_by_one() -> None:
    """Many parents' units problems solved in one call (one sort of all breakpoints) give
    each problem's own solution: a mix-up of parents' multipliers would not."""
    rng = np.random.default_rng(7)
    problems = [
        _problem(rng, root=bool(i % 7 == 0), mixed=bool(i % 3 == 0), name=f"p{i}")
        for i in range(60)
    ]
    batch = solve_children_batch(problems)
    for p, got in zip(problems, batch, strict=True):
        alone = solve_children(p)
        np.testing.assert_array_equal(got.counts, alone.counts)
        np.testing.assert_allclose(
            got.l2, alone.l2, rtol=0, atol=1e-9 * max(1.0, float(alone.l2.max()))
        )
        assert got.diagnostics.l2_solvers == alone.diagnostics.l2_solvers


def test_project_sum_against_bisection() -> None:
    """The breakpoint search against a bisection on the multiplier (200 random
    projections with bounds, weights and sums across the feasible range)."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        m = int(rng.integers(1, 30))
        a = rng.uniform(0.1, 10, m)
        c = rng.normal(0, 50, m)
        lo = np.zeros(m)
        hi = np.where(rng.random(m) < 0.5, rng.uniform(0, 80, m), np.inf)
        top = float(hi.sum()) if np.isfinite(hi).all() else 500.0
        S = float(rng.uniform(0, top))
        z, _mu, ok = project_sum(a, c, lo, hi, np.zeros(m, np.intp), np.array([S]))
        assert ok.all()
        left, right = -1e7, 1e7
        for _ in range(200):
            mid = (left + right) / 2
            if np.clip(c + mid / a, lo, hi).sum() < S:
                left = mid
            else:
                right = mid
        want = np.clip(c + left / a, lo, hi)
        np.testing.assert_allclose(z, want, atol=1e-6)
        assert abs(z.sum() - S) <= 1e-8 * max(1.0, S)


def test_an_infeasible_units_problem_is_refused_naming_the_parent() -> None:
    from privtab.topdown.solve import TopDownInfeasibleError

    rng = np.random.default_rng(1)
    p = _problem(rng)
    bad = ChildrenProblem(
        "tract-9", p.children, p.parent + np.array([0, 1]), p.measurements, p.constraints,
        p.l2_passes, p.rounder_passes, 0.1, level="Block", histogram="units",
    )  # fmt: skip
    with pytest.raises(TopDownInfeasibleError, match="tract-9"):
        solve_children(bad)
