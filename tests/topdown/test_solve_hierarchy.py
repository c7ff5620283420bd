"""TopDown's post-processing over a whole synthetic hierarchy, top-down: the root with its
exact total, then a total-first level (production's County-like passes), then blocks —
each level's parents being the level above's optimised, rounded histograms.

The default test runs one small hierarchy; the slow one (``--runslow``) several seeds at a
realistic block-group size with every pass cross-checked by a second solver (the default
test ``test_a_small_hierarchy_top_down`` covers the same code)."""

from __future__ import annotations

import numpy as np
import pytest

from privtab.topdown.histogram import CELLS
from privtab.topdown.solve import solve_children
from privtab.topdown.solve_synthetic import children_problem, synthetic_children

from .test_solve import check


def _hierarchy(seed: int, mids: int, blocks: int, persons: int, cross: str | None) -> None:
    rng = np.random.default_rng(seed)
    truth, lo, up = synthetic_children(rng, mids * blocks, persons, 0.2)
    mid_truth = truth.reshape(mids, blocks, CELLS).sum(axis=1)
    mid_lo = lo.reshape(mids, blocks, 8).sum(axis=1)
    mid_up = np.where((up.reshape(mids, blocks, 8) == 0).all(axis=1), 0, -1)
    root_up = np.where((up == 0).all(axis=0), 0, -1)[None, :]
    total = np.array([persons], dtype=np.int64)
    root = children_problem(
        "R",
        mid_truth.sum(axis=0)[None, :],
        lo.sum(axis=0)[None, :],
        root_up,
        None,
        "US",
        seed,
        total=total,
    )
    sol = solve_children(root, cross_check=cross)
    check(root, sol)
    assert sol.counts.sum() == persons  # the invariant total, exactly
    level = children_problem("R", mid_truth, mid_lo, mid_up, sol.counts[0], "County", seed)
    mid = solve_children(level, cross_check=cross)
    check(level, mid)
    assert mid.diagnostics.l2_solvers[0] == "structured (by hhgq)"  # total first
    leaves = []
    for j in range(mids):
        sl = slice(j * blocks, (j + 1) * blocks)
        bg = children_problem(f"M{j}", truth[sl], lo[sl], up[sl], mid.counts[j], "Block", seed)
        out = solve_children(bg, cross_check=cross)
        check(bg, out)
        assert out.diagnostics.structured_fallbacks == 0
        assert out.diagnostics.rounder_mip_fallbacks == 0
        leaves.append(out.counts)
    np.testing.assert_array_equal(np.concatenate(leaves).sum(axis=0), sol.counts[0])


def test_a_small_hierarchy_top_down() -> None:
    _hierarchy(0, mids=3, blocks=4, persons=300, cross="clarabel")


@pytest.mark.slow  # realistic sizes, several seeds (~1 min); covered by the test above
@pytest.mark.parametrize("seed", range(4))
def test_realistic_hierarchies_top_down(seed: int) -> None:
    _hierarchy(seed, mids=4, blocks=33, persons=4 * 1000, cross="osqp")
