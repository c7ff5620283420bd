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

# private on purpose: _terms, _objective, _total_band build and score one pass of the
# structured solver, whose active-set polish is what these tests start from a given set
from privtab._blas import one_blas_thread
from privtab.topdown.solve import (
    ChildrenProblem,
    ChildrenSolution,
    _terms,
    solve_children,
    start_problem,
)
from privtab.topdown.solve_model import GROUPS, Band, Model, Term, prepare
from privtab.topdown.solve_qp import solve_qp, solve_reduced_total
from privtab.topdown.solve_structured import StructuredPass, _objective, _total_band, implied_band
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


def _counties_pass(
    seed: int, k: int, persons: int
) -> tuple[list[Term], list[Band], StructuredPass]:
    """A state's ``k`` counties (synthetic, seeded noise) and the structured solver of their
    second pass (``detailed`` and the rest, the totals in ±0.1 bands around the first
    pass's): at its optimum every child's total row is active, at either end."""
    rng = np.random.default_rng(seed)
    # counties of very different sizes, as a state's: a few large ones, many small ones
    sizes = [(k // 20, 30.0), (k // 4, 3.0), (k - k // 20 - k // 4, 0.3)]  # (children, × mean)
    parts = [synthetic_children(rng, c, int(c * f * persons / k), 0.02) for c, f in sizes]
    truth, lower, upper = (np.concatenate(a) for a in zip(*parts, strict=True))
    p = children_problem(f"state-{seed}", truth, lower, upper, truth.sum(axis=0), "County", seed)
    p = replace(p, level="County")
    model = start_problem(p, 0.0)
    assert isinstance(model, Model)
    first = _terms(p, model, p.l2_passes[0])[0]
    tot = solve_reduced_total(model, first)
    band = Band("total", first.index, first.size, tot[:, None] - 0.1, tot[:, None] + 0.1)
    terms = _terms(p, model, p.l2_passes[1])
    total_band = _total_band(model, [band])
    assert total_band is not None
    return terms, [band], StructuredPass(model, terms, *total_band)


def test_a_polish_whose_total_rows_contradict_the_coupling_by_many_rows_is_certified() -> None:
    """Every child's total row active, the ends ordered as the multipliers want but 50 too
    many at the upper end (Σ ends − Σ parent = 0.2 × 50 persons), children of very
    different sizes: the shape of Georgia's 159 counties at 10⁷ persons. Dropping one row
    per step (main before this test) let that child absorb the whole excess and the next
    step put its row back at the other end — about one row moved per two steps, so the
    40-step limit ended the polish uncertified (here and there: the pass went to
    Clarabel). The totals' QP (``_retotal``) moves them all at once: certified in a few
    steps, the same optimum as from the ADMM's own active set, and Clarabel's."""
    with one_blas_thread():
        terms, _, sp = _counties_pass(0, 110, 20_000)
        x = sp.solve()
        assert x is not None
        m = sp.m
        tot = x.sum(axis=1)
        at_lo, at_hi = np.abs(tot - sp.tlo) < 1e-6, np.abs(tot - sp.thi) < 1e-6
        tact = np.where(at_lo, -1, np.where(at_hi, 1, 0)).astype(np.intp)
        assert np.all(tact != 0)  # the shape: every total row active at the optimum
        free = x > 0
        gact = np.zeros((m.k, GROUPS), dtype=np.intp)
        got = sp._kkt(free, tact, gact)
        assert got is not None
        low = np.flatnonzero(tact < 0)
        flip = low[np.argsort(got[2][low])][:50]  # the lower ends nearest the multipliers' cut
        start = tact.copy()
        start[flip] = 1
        y = StructuredPass(m, terms, sp.tlo, sp.thi).polish(free, start, gact)
    assert y is not None
    assert m.parent is not None
    np.testing.assert_allclose(y.sum(axis=0), m.parent, rtol=0, atol=1e-9 * m.scale * m.k)
    ty = y.sum(axis=1)
    assert np.all(ty >= sp.tlo - 1e-9 * m.scale)
    assert np.all(ty <= sp.thi + 1e-9 * m.scale)
    assert y.min() >= 0
    # the optimum is unique (strictly convex): the same as from the ADMM's active set
    # (Clarabel's objective: the slow test below)
    np.testing.assert_allclose(y, x, rtol=0, atol=1e-6 * m.scale)


@pytest.mark.slow  # Clarabel on 28,000 variables: ≈ 12 s; the default test above covers the code
def test_counties_of_different_sizes_all_totals_active_agree_with_clarabel() -> None:
    terms, bands, sp = _counties_pass(0, 110, 20_000)
    with one_blas_thread():
        x = sp.solve()
        assert x is not None
        xc = solve_qp(sp.m, terms, bands, "clarabel")
    obj = _objective(terms, [t.apply(x) for t in terms])
    ref = _objective(terms, [t.apply(xc) for t in terms])
    assert obj <= ref + 1e-6 * abs(ref)  # the certified optimum, never worse than Clarabel's
    assert abs(obj - ref) <= 1e-6 * abs(ref)
