"""The bulk levels' fast paths give the answers of the paths they replace (issue 29, item 2).

* The rounder's certificate (:meth:`privtab.topdown.solve_round._Lp.ideal_b`): when
  ``round(frac)`` of the ``detailed`` query meets every row of the pass exactly, the LP's
  unique optimum is taken without HiGHS. Checked against HiGHS itself (the certificate
  disabled) on many random roundings, most of them degenerate on purpose: L2 solutions
  that are integral but for a few shifted persons (objective 0 — the certificate's case),
  shifts of exactly one half (ties, rounded half to even: the rows are then missed and
  HiGHS solves), and noisy synthetic problems.
* :func:`privtab.topdown.solve_qp._reduced_matrices` (the total-only first pass): entry for
  entry the matrices that stacking the row blocks with ``scipy.sparse`` gives.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
import scipy.sparse as sp

# private on purpose (below): the rounder's certificate and the reduced pass's matrices
# are compared with what they replace, which the public API cannot reach
from privtab.topdown import solve_round
from privtab.topdown.histogram import MEASURED_QUERIES
from privtab.topdown.solve import ChildrenProblem, production_passes, solve_children, start_problem
from privtab.topdown.solve_model import Model
from privtab.topdown.solve_qp import _reduced_matrices  # private on purpose: the matrices
from privtab.topdown.solve_round import Rounding
from privtab.topdown.solve_synthetic import synthetic_problem

from .test_solve import check


def _model(seed: int, level: str, k: int, persons: int) -> tuple[Model, ChildrenProblem]:
    problem = synthetic_problem(
        seed, children=k, persons=persons, level=level, gq_share=0.2, noise=True
    )
    model = start_problem(problem, 0.0)
    assert isinstance(model, Model)
    return model, problem


def _shifted(
    model: Model, problem: ChildrenProblem, rng: np.random.Generator, shift: float
) -> np.ndarray:
    """The problem's own integral solution (it meets every constraint) with ``shift``
    persons moved from one child to another in a few random cells: the L2 solution of a
    problem whose rounding is (nearly) determined — degenerate on purpose."""
    x = solve_children(problem).counts[:, model.cells].astype(np.float64)
    for _ in range(int(rng.integers(1, 6))):
        i, j = rng.choice(model.k, size=2, replace=False)
        cells = np.flatnonzero((x[i] >= 1) & model.allowed[j])
        if cells.size:
            c = int(rng.choice(cells))
            x[i, c] -= shift
            x[j, c] += shift
    return x


def _both(
    model: Model, l2: np.ndarray, passes: Sequence[Sequence[str]]
) -> tuple[Rounding, Rounding, list[bool], list[bool]]:
    """The rounding with the certificate and by HiGHS alone, and per pass that reached
    the certificate: whether it was taken, and whether the pass has an injective query."""
    taken: list[bool] = []
    injective: list[bool] = []
    original = solve_round._Lp.ideal_b

    def counted(self: solve_round._Lp) -> np.ndarray | None:
        got = original(self)
        taken.append(got is not None)
        return got

    def never(self: solve_round._Lp) -> None:
        injective.append(self.ideal is not None)
        return None

    try:
        solve_round._Lp.ideal_b = counted  # type: ignore[method-assign]
        fast = solve_round.round_children(model, l2, passes)
        solve_round._Lp.ideal_b = never  # type: ignore[method-assign]
        highs = solve_round.round_children(model, l2, passes)
    finally:
        solve_round._Lp.ideal_b = original  # type: ignore[method-assign]
    return fast, highs, taken, injective


@pytest.mark.parametrize("level", ["Block", "Block_Group"])
def test_the_certified_rounding_is_the_highs_optimum(level: str) -> None:
    """120 random roundings per level (60 shifted by less than ½, 20 by exactly ½ — ties,
    rounded half to even — and 40 noisy L2 solutions): the same counts and objectives as
    HiGHS, and the certificate taken exactly on the passes whose optimum HiGHS finds to be
    0 and that hold an injective query (``detailed``) — never elsewhere."""
    rng = np.random.default_rng(29)
    _, passes = production_passes(list(MEASURED_QUERIES), total_first=level != "Block")
    hits = {"shifted": 0, "tie": 0, "noisy": 0}
    for case in range(120):
        kind = "shifted" if case < 60 else "tie" if case < 80 else "noisy"
        model, problem = _model(case, level, int(rng.integers(2, 12)), int(rng.integers(8, 90)))
        if kind == "noisy":
            l2 = solve_children(problem).l2[:, model.cells]
        else:
            l2 = _shifted(model, problem, rng, 0.5 if kind == "tie" else rng.uniform(0.05, 0.45))
        fast, highs, taken, injective = _both(model, l2, passes)
        np.testing.assert_array_equal(fast.counts, highs.counts)
        np.testing.assert_allclose(fast.objectives, highs.objectives, atol=1e-9)
        assert len(taken) == len(injective)
        # the passes that reached a solver, aligned with the rounder's passes
        objs = list(highs.objectives)[len(highs.objectives) - len(taken) :]
        want = [inj and abs(o) < 1e-9 for inj, o in zip(injective, objs, strict=True)]
        assert taken == want
        hits[kind] += sum(taken)
    assert hits["shifted"] >= 20  # the certificate's case is exercised
    assert hits["noisy"] < 40


def test_a_certified_rounding_meets_every_constraint() -> None:
    """Whole problems whose rounding is certified pass every check of a solution."""
    seen = 0
    for seed in range(12):
        problem = synthetic_problem(seed, children=5, persons=40, level="Block", noise=False)
        sol = solve_children(problem)
        check(problem, sol)
        seen += sol.diagnostics.rounder_objectives == (0.0,)
    assert seen


def _stacked(
    k: int, groups: int, ii: np.ndarray, gg: np.ndarray, c: np.ndarray, fin: np.ndarray,
    parent: bool, total_group: np.ndarray, n_tot: int,
) -> tuple[sp.csc_matrix, sp.csc_matrix]:  # fmt: skip
    """The reduced total pass's matrices as they were built: row blocks stacked."""
    ns = ii.size
    ncol = ns + k
    P = sp.triu(sp.diags(np.concatenate([np.zeros(ns), 2.0 * c])).tocsc()).tocsc()
    sv = np.arange(ns)
    rows = [
        sp.csr_matrix(
            (
                np.concatenate([np.ones(k), -np.ones(ns)]),
                (np.concatenate([np.arange(k), ii]), np.concatenate([ns + np.arange(k), sv])),
            ),
            shape=(k, ncol),
        )
    ]
    if parent:
        rows.append(sp.csr_matrix((np.ones(ns), (gg, sv)), shape=(groups, ncol)))
    if n_tot:
        g = total_group[ii]
        keep = g >= 0
        rows.append(
            sp.csr_matrix((np.ones(int(keep.sum())), (g[keep], sv[keep])), shape=(n_tot, ncol))
        )
    sel = sp.eye(ncol, format="csr")[:ns]
    A = sp.vstack([sp.vstack(rows).tocsc(), sp.vstack([-sel, sel[fin]]).tocsc()]).tocsc()
    return P, A


def test_reduced_total_matrices_equal_the_stacked_rows() -> None:
    rng = np.random.default_rng(7)
    for _ in range(60):
        k, groups = int(rng.integers(1, 9)), 8
        allowed = rng.random((k, groups)) < 0.6
        ii, gg = np.nonzero(allowed)
        c = np.where(rng.random(k) < 0.2, 0.0, rng.uniform(0.5, 3, k))
        fin = rng.random(ii.size) < 0.5
        n_tot = int(rng.integers(0, 3))
        tg = rng.integers(-1, n_tot, k) if n_tot else np.full(k, -1)
        parent = bool(rng.random() < 0.8)
        got = _reduced_matrices(k, groups, ii, gg, c, fin, groups if parent else None, tg, n_tot)
        want = _stacked(k, groups, ii, gg, c, fin, parent, tg, n_tot)
        for a, b in zip(got, want, strict=True):
            a.sort_indices()
            assert a.shape == b.shape
            np.testing.assert_array_equal(a.indptr, b.indptr)
            np.testing.assert_array_equal(a.indices, b.indices)
            np.testing.assert_array_equal(a.data, b.data)
