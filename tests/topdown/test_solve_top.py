"""The top levels' single large problems (the nation's state parts, a state's counties):
the structured solver certifies them itself instead of handing them to Clarabel, and its
answers agree with Clarabel's (the second-solver check).

The problems are synthetic (:mod:`privtab.topdown.solve_synthetic`, seeded noise) but
have the two shapes that made every polish of the captured 10⁵- and 10⁶-person nations'
State pass and of 17 of their 63 County passes fail (docs/topdown.md §14): state parts
without group quarters, whose hhgq rows fix their totals, sharing exact totals in
AIAN/non-AIAN pairs; and counties with empty children. Before the fixes every one of
these problems went to Clarabel (4 of the 4 state problems, 10 of 10 such counties).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from privtab.topdown.solve import ChildrenProblem, ChildrenSolution, solve_children
from privtab.topdown.solve_model import prepare
from privtab.topdown.solve_structured import implied_band
from privtab.topdown.solve_synthetic import children_problem, synthetic_children


def _state_parts(seed: int, states: int = 16, split: int = 8) -> ChildrenProblem:
    """A nation's state parts: ``split`` states in two parts (AIAN, non-AIAN) sharing one
    exact total, the others whole; parts without group quarters have their household
    persons fixed (``gq_lower[0] = gq_upper[0]`` = their total), as production's
    invariants give them."""
    rng = np.random.default_rng(seed)
    truth, lower, upper = synthetic_children(rng, states + split, 20_000, 0.02)
    group = np.concatenate([np.arange(states), np.arange(split)]).astype(np.int64)
    total = np.bincount(group, weights=truth.sum(axis=1), minlength=states).astype(np.int64)
    no_gq = (upper[:, 1:] == 0).all(axis=1)
    lower[no_gq, 0] = upper[no_gq, 0] = truth[no_gq].sum(axis=1)
    p = children_problem(
        f"nation-{seed}", truth, lower, upper, truth.sum(axis=0), "State", seed, total=total
    )
    return replace(p, constraints=replace(p.constraints, total_group=group), level="State")


def _counties_with_empty(seed: int, k: int = 36, empty: int = 3) -> ChildrenProblem:
    """A state's counties, ``empty`` of them without persons (their first-pass totals
    near 0: the total row of a child without free cells is active at a band end)."""
    rng = np.random.default_rng(seed)
    truth, lower, upper = synthetic_children(rng, k, 20_000, 0.02)
    truth[:empty] = 0
    lower[:empty] = 0
    upper[:empty] = np.where(upper[:empty] == 0, 0, -1)
    p = children_problem(f"state-{seed}", truth, lower, upper, truth.sum(axis=0), "County", seed)
    return replace(p, level="County")


def _certified_and_checked(problem: ChildrenProblem) -> ChildrenSolution:
    sol = solve_children(problem, cross_check="clarabel")  # raises if the optima differ
    d = sol.diagnostics
    assert d.structured_fallbacks == 0
    assert d.l2_solvers[-1] == "structured"
    assert d.cross_check is not None
    assert max(d.cross_check) <= 1e-6
    parent = problem.parent
    assert parent is not None
    np.testing.assert_array_equal(sol.counts.sum(axis=0), parent)
    np.testing.assert_allclose(sol.l2.sum(axis=0), parent, atol=1e-6)
    assert sol.counts.min() >= 0
    assert sol.l2.min() >= 0
    return sol


@pytest.mark.parametrize("seed", [0, 1])
def test_state_parts_are_certified_by_the_structured_solver(seed: int) -> None:
    p = _state_parts(seed)
    sol = _certified_and_checked(p)
    c = p.constraints
    assert c.total is not None
    assert c.total_group is not None
    for g, total in enumerate(c.total):
        assert sol.counts[c.total_group == g].sum() == total
        assert abs(sol.l2[c.total_group == g].sum() - total) <= 1e-6
    by_hhgq = sol.counts.reshape(len(p.children), 8, -1).sum(axis=2)
    assert c.gq_lower is not None
    assert c.gq_upper is not None
    assert np.all(by_hhgq >= c.gq_lower)
    assert np.all((c.gq_upper < 0) | (by_hhgq <= c.gq_upper))


@pytest.mark.parametrize("seed", [0, 1])
def test_counties_with_empty_children_are_certified_by_the_structured_solver(seed: int) -> None:
    _certified_and_checked(_counties_with_empty(seed))


def test_the_total_band_is_narrowed_by_what_the_hhgq_bounds_imply() -> None:
    p = _state_parts(0)
    c = p.constraints
    assert c.gq_lower is not None
    assert c.gq_upper is not None
    assert p.parent is not None
    k = len(p.children)
    model = prepare(
        p.geounit,
        p.children,
        np.asarray(p.parent),
        c.gq_lower,
        c.gq_upper,
        c.structural_zeros,
        np.full(k, -1, dtype=np.intp),
        np.zeros(0, dtype=np.int64),
        "persons",
    )
    fixed = (c.gq_upper[:, 1:] == 0).all(axis=1)  # household persons fixed: total fixed
    assert fixed.any()
    assert not fixed.all()
    mid = model.lo.sum(axis=1) + 0.04  # a band of ±0.1 around a total 0.04 above the floor
    lo, hi = implied_band(model, mid - 0.1, mid + 0.1)
    np.testing.assert_array_equal(lo[fixed], model.lo[fixed].sum(axis=1))
    np.testing.assert_array_equal(hi[fixed], model.lo[fixed].sum(axis=1))
    np.testing.assert_array_equal(lo[~fixed], np.maximum(mid - 0.1, model.lo.sum(axis=1))[~fixed])
    np.testing.assert_array_equal(hi[~fixed], (mid + 0.1)[~fixed])
    # children without a band keep none
    lo2, hi2 = implied_band(model, np.full(k, -np.inf), np.full(k, np.inf))
    assert np.all(np.isneginf(lo2))
    assert np.all(np.isposinf(hi2))
