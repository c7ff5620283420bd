"""``--postprocess gls-round``: TopDown's post-processing with the tree GLS as its L2 step.

Production TopDown (:mod:`privtab.topdown.solve`) fits each parent's children to *their own*
noisy measurements (weighted non-negative least squares, two passes), then rounds. Every
geounit's estimate therefore ignores the measurements of its descendants: a county's
children are fitted to the tracts' noisy answers, never to what the block groups and blocks
below say about them. The GLS-first post-processor (issue 30 item 4; the design of Google's
BlueDown, arXiv 2603.10099: a linear-time hierarchical GLS, then integer steps) uses them
all:

1. **the tree GLS** (:mod:`privtab.topdown.gls`, from the run's noisy measurement folder
   through the adapter :mod:`privtab.topdown.gls_release`): the best linear unbiased
   estimate of every geounit's histogram from *every* measurement in the tree, under the
   exact equalities (invariant totals, zeros where a bound is ≤ 0);
2. **top-down, per parent, as production** (same engine, same order, same invariants and
   constraints): the children's estimate is the GLS of the children **conditioned on the
   parent's published integer histogram** (:meth:`~privtab.topdown.gls.TreeGLS.condition_children`:
   ``x̂_c + C_c S_p⁺ (parent − s_p)``, the best linear unbiased estimate from the children's
   subtrees given their sum; the root takes its GLS estimate);
3. **the integer step, production's machinery**: that estimate is the one "measurement"
   (the ``detailed`` cells, equal weights) of the parent's :class:`ChildrenProblem`,
   solved by :func:`privtab.topdown.solve.solve_children` — the non-negative least-squares
   projection onto the children's constraints (children sum to the parent cell by cell,
   hhgq bounds, exact totals, structural zeros), then production's multi-pass controlled
   rounder with its integrality checks. Invariants, constraints, output checks and files
   are production's.

The measured gain is in ``docs/topdown.md`` (and ``docs/benchmarks.md``). Production
TopDown stays the default; this is an option.

The GLS of a US run is solved state by state (:func:`~privtab.topdown.gls.tree_gls_split`):
the state parts' subtree estimates give the nation's; each state's subtree is solved again
when its parents are reached (one state in memory at a time).

Privacy: everything is computed from the noisy measurements and the public invariants
(post-processing of the measurements: no privacy cost, the post-processing theorem; the
semantics seed §8 on TopDown's post-processing). Nothing of the confidential data enters.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from privtab.topdown.gls import GeounitTree, SplitGLS, TreeGLS, tree_gls, tree_gls_split
from privtab.topdown.gls_release import GLSRun
from privtab.topdown.solve import (
    ChildMeasurements,
    ChildrenProblem,
    ChildrenSolution,
    solve_children,
)

__all__ = ["GLS_ROUND", "POSTPROCESSORS", "GLSRoundSolve", "gls_round_problem"]

F64 = NDArray[np.float64]

#: ``--postprocess`` values: production TopDown (the default) and the GLS-first one.
POSTPROCESSORS = ("production", "gls-round")

#: The one query of a gls-round problem: every cell, equal weights.
QUERY = "detailed"

#: ``release.json``'s ``postprocessing`` of a gls-round release.
GLS_ROUND: dict[str, str] = {
    "algorithm": "gls-round: the tree GLS of every geounit from all the noisy measurements "
    "(two passes over the spine, exact equalities: invariant totals, zeros where a bound is "
    "≤ 0), then production's top-down order: the root, then every parent's children jointly",
    "l2": "the children's GLS estimate conditioned on the parent's integer histogram, "
    "projected (Euclidean, all cells) onto the children's constraints: non-negative, "
    "summing to the parent cell by cell, hhgq bounds, exact totals, structural zeros",
    "rounder": "production's multipass controlled rounding (total, then hhgq ⊃ "
    "hhgq×hispanic ⊃ hhgq×hispanic×cenrace ⊃ detailed), HiGHS LP with a totally "
    "unimodular constraint matrix, integrality checked on every problem",
    "checks": "as production: every problem, every state, the written folder",
    "reference": "issue 30 item 4; BlueDown (arXiv 2603.10099); the tree GLS of arXiv 2404.13164",
}


def gls_round_problem(problem: ChildrenProblem, estimate: F64) -> ChildrenProblem:
    """``problem`` with the children's GLS ``estimate`` (``(k, cells)``) as its one
    measurement (``detailed``, variance 1: the L2 step is the Euclidean projection onto
    the children's constraints) — constraints, parent and rounder passes unchanged."""
    k = len(problem.children)
    est = np.asarray(estimate, dtype=np.float64)
    if est.ndim != 2 or est.shape[0] != k:
        raise ValueError(f"{problem.geounit}: estimate must be ({k}, cells), got {est.shape}")
    return dataclasses.replace(
        problem,
        measurements=ChildMeasurements({QUERY: est}, {QUERY: Fraction(1)}),
        l2_passes=((QUERY,),),
    )


def _sep(k: int, ident: str) -> str:
    from privtab.topdown.gls_release import _gid

    return _gid(k, ident)


class GLSRoundSolve:
    """The per-parent solve of ``--postprocess gls-round`` for one run (a
    :data:`~privtab.topdown.engine.SolveFn`: the engine calls it for the root and for every
    parent in production's order; module docstring).

    ``run``: the run's noisy measurements as tree-GLS inputs
    (:func:`~privtab.topdown.gls_release.read_gls_run`); the GLS is solved at the first
    call. ``seconds`` accumulates the time of the GLS (both passes, every state)."""

    def __init__(self, run: GLSRun, say: Callable[[str], None] | None = None) -> None:
        self.run = run
        self.say = say or (lambda _m: None)
        self.seconds = 0.0
        self._whole: TreeGLS | None = None
        self._split: SplitGLS | None = None
        self._part: tuple[int, TreeGLS, list[dict[str, int]]] | None = None

    # ------------------------------------------------------------------ the GLS
    def _solve(self) -> None:
        if self._whole is not None or self._split is not None:
            return
        t0 = time.perf_counter()
        run, h = self.run, self.run.hierarchy
        root = _sep(0, h.ids(0)[0])
        if run.group_level is None:
            self.say(f"{run.name}: tree GLS ({sum(h.describe().values()):,} geounits)")
            parents, levels = run.subtree(0, np.zeros(1, dtype=np.int64), None)
            ms = [m for k in range(len(run.levels)) for m in run.measurements(k, levels[k])]
            cs = [c for k in range(len(run.levels)) for c in run.constraints(k, levels[k])]
            self._whole = tree_gls(GeounitTree(root, parents, run.levels), ms, cs,
                                   keep_bottom_up=True)  # fmt: skip
        else:
            from privtab.topdown.gls_release import GROUP_LEVEL, _group_id

            self.say(f"{run.name}: tree GLS, {len(run.group_names)} states bottom-up")
            top = GeounitTree(root, {_group_id(n): root for n in run.group_names},
                              (run.levels[0], GROUP_LEVEL))  # fmt: skip
            self._split = tree_gls_split(
                top,
                run.measurements(0),
                run.constraints(0),
                lambda name: run.part(run.group_names.index(name.split("|", 1)[1])),
                measured_queries=list(run.queries.values()),
                constraint_queries=run.constraint_queries,
                min_variance=run.min_variance(),
                keep_bottom_up=True,
            )
        self.seconds += time.perf_counter() - t0

    def _group_tree(self, group: int) -> tuple[TreeGLS, list[dict[str, int]]]:
        """One state's subtree, solved (the latest kept)."""
        if self._part is None or self._part[0] != group:
            from privtab.topdown.gls_release import _group_id

            assert self._split is not None
            self._part = None  # one state in memory at a time
            t0 = time.perf_counter()
            name = self.run.group_names[group]
            self.say(f"{self.run.name}: tree GLS, state {name} top-down")
            tree = self._split.part(_group_id(name))
            self.seconds += time.perf_counter() - t0
            self._part = (group, tree, [_index(ids) for ids in tree.levels])
        return self._part[1], self._part[2]

    # ------------------------------------------------------------------ estimates
    def estimate(self, problem: ChildrenProblem) -> F64:
        """The GLS estimate of the problem's children given its (integer) parent."""
        self._solve()
        run, h = self.run, self.run.hierarchy
        k = h.level(problem.level) if problem.level else 0
        if problem.parent is None:  # the root
            tree = self._whole if self._whole is not None else self._top()
            return tree.histograms(0)[:1]
        parent_hist = np.asarray(problem.parent, dtype=np.float64)
        first = run.index(k)[str(problem.children[0])]
        parent = int(h.parent(k)[first])
        if self._whole is not None:
            tree, index = self._whole, self._whole_index()
            return self._condition(tree, index, k - 1, parent, parent_hist, problem.children, k)
        g = run.group_level
        assert g is not None
        if k - 1 < g:  # the root's children: through the states (groups)
            return self._through_groups(parent_hist, problem.children, k)
        group = int(run.group_of[h.ancestors(g, k - 1)[parent]])
        tree, index = self._group_tree(group)
        return self._condition(tree, index, k - 1 - g + 1, parent, parent_hist,
                               problem.children, k, spine_parent=k - 1)  # fmt: skip

    def _top(self) -> TreeGLS:
        assert self._split is not None
        return self._split.top

    def _whole_index(self) -> list[dict[str, int]]:
        key = "_whole_idx"
        cached: list[dict[str, int]] | None = self.__dict__.get(key)
        if cached is None:
            assert self._whole is not None
            cached = [_index(ids) for ids in self._whole.levels]
            self.__dict__[key] = cached
        return cached

    def _condition(
        self,
        tree: TreeGLS,
        index: list[dict[str, int]],
        level: int,
        parent: int,
        value: F64,
        children: Sequence[str],
        child_spine_level: int,
        spine_parent: int | None = None,
    ) -> F64:
        """Condition the children of ``parent`` (a unit of spine level ``child_spine_level −
        1``, at ``level`` of ``tree``) on ``value``; rows in ``children``'s order."""
        sp = child_spine_level - 1 if spine_parent is None else spine_parent
        pid = _sep(sp, self.run.hierarchy.ids(sp)[parent])
        kids, est = tree.condition_children(level, [index[level][pid]], value)
        return _ordered(tree.levels[level + 1], kids, est, children, child_spine_level)

    def _through_groups(self, root: F64, children: Sequence[str], k: int) -> F64:
        """The root's children given the root: the states given the root, then each
        state's parts given the state."""
        run = self.run
        top = self._top()
        groups, values = top.condition_children(0, [0], root)
        want = {str(c): i for i, c in enumerate(children)}
        out = np.zeros((len(children), values.shape[1]))
        for gi, v in zip(groups.tolist(), values, strict=True):
            name = top.levels[1][gi].split("|", 1)[1]
            tree, _ = self._group_tree(run.group_names.index(name))
            kids, est = tree.condition_children(0, [0], v)
            for i, row in zip(kids.tolist(), est, strict=True):
                ident = tree.levels[1][i].split("|", 1)[1]
                if ident in want:
                    out[want[ident]] = row
        return out

    # ------------------------------------------------------------------ the solve
    def __call__(self, problem: ChildrenProblem) -> ChildrenSolution:
        """The children's GLS estimate, made non-negative, consistent and integral by
        production's per-parent solve (module docstring)."""
        from privtab.topdown.engine import solve_parent

        if problem.parent is not None and (
            len(problem.children) == 1 or not np.any(problem.parent)
        ):
            return solve_parent(problem)  # passed down: nothing to estimate
        return solve_children(gls_round_problem(problem, self.estimate(problem)))


def _index(ids: Sequence[str]) -> dict[str, int]:
    return {g: i for i, g in enumerate(ids)}


def _ordered(
    level_ids: Sequence[str], kids: NDArray[np.int64], est: F64, children: Sequence[str], k: int
) -> F64:
    """The rows of ``est`` (the tree's ``kids``) in the order of the problem's
    ``children`` (spine level ``k`` ids)."""
    pos = {level_ids[int(i)]: r for r, i in enumerate(kids.tolist())}
    try:
        rows = [pos[_sep(k, str(c))] for c in children]
    except KeyError as exc:
        raise ValueError(f"gls-round: child {exc.args[0]!r} is not in the GLS tree") from None
    return est[np.asarray(rows, dtype=np.int64)]
