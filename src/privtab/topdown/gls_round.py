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
3. **the repair and the integer step, production's machinery**: the estimate replaces
   the children's noisy measurements in the parent's :class:`ChildrenProblem` (each
   measured query's answers computed from it, one weight per query for all children,
   production's pass order and inter-pass tolerance), solved by
   :func:`privtab.topdown.solve.solve_children` — the L2 step returns the estimate itself
   where it is feasible and otherwise repairs it as production repairs measurements
   (non-negative, children summing to the parent cell by cell, hhgq bounds, exact totals,
   structural zeros; the totals first at the State, County, Tract and Block_Group
   children), then production's multi-pass controlled rounder with its integrality
   checks. Invariants, constraints, output checks and files are production's.

The measured gain is in ``docs/topdown.md`` (and ``docs/benchmarks.md``). Production
TopDown stays the default; this is an option.

The GLS of a run is solved as one tree up to :data:`WHOLE_TREE_GEOUNITS` geounits (one
bottom-up pass, every subtree estimate kept), and above that state by state
(:func:`~privtab.topdown.gls.tree_gls_split`: the states' subtree estimates give the
nation's; each state's subtree is solved again when its parents are reached — one state in
memory at a time). Memory grows with the geounits of the largest state: the covariance
blocks of every geounit of its subtree (measured: +3.8 GiB over production for a
24,267-block state); a deeper split is not built.

Privacy: everything is computed from the noisy measurements and the public invariants
(post-processing of the measurements: no privacy cost, the post-processing theorem; the
semantics seed §8 on TopDown's post-processing). Nothing of the confidential data enters.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from privtab.topdown.gls import (
    Constraints,
    GeounitTree,
    Measurements,
    SplitGLS,
    TreeGLS,
    tree_gls,
    tree_gls_split,
)
from privtab.topdown.gls_release import GROUP_LEVEL, GLSRun, _gid, _group_id
from privtab.topdown.solve import (
    ChildMeasurements,
    ChildrenProblem,
    ChildrenSolution,
    solve_children,
)

__all__ = [
    "GLS_ROUND",
    "POSTPROCESSORS",
    "WHOLE_TREE_GEOUNITS",
    "GLSRoundSolve",
    "gls_round_problem",
]

F64 = NDArray[np.float64]

#: ``--postprocess`` values: production TopDown (the default) and the GLS-first one.
POSTPROCESSORS = ("production", "gls-round")

#: ``release.json``'s ``postprocessing`` of a gls-round release.
GLS_ROUND: dict[str, str] = {
    "algorithm": "gls-round: the tree GLS of every geounit from all the noisy measurements "
    "(two passes over the spine, exact equalities: invariant totals, zeros where a bound is "
    "≤ 0), then production's top-down order: the root, then every parent's children jointly",
    "l2": "the children's GLS estimate conditioned on the parent's integer histogram, "
    "in place of their noisy measurements in production's L2 step (each measured query's "
    "answers from the estimate, one weight per query, production's pass order and "
    "tolerance): the estimate itself where it is feasible, else repaired under the "
    "children's constraints (non-negative, summing to the parent cell by cell, hhgq "
    "bounds, exact totals, structural zeros), totals first where production fits them first",
    "rounder": "production's multipass controlled rounding (total, then hhgq ⊃ "
    "hhgq×hispanic ⊃ hhgq×hispanic×cenrace ⊃ detailed), HiGHS LP with a totally "
    "unimodular constraint matrix, integrality checked on every problem",
    "checks": "as production: every problem, every state, the written folder",
    "reference": "issue 30 item 4; BlueDown (arXiv 2603.10099); the tree GLS of arXiv 2404.13164",
}


def gls_round_problem(problem: ChildrenProblem, estimate: F64) -> ChildrenProblem:
    """``problem`` with the children's GLS ``estimate`` (``(k, cells)``) in place of their
    noisy measurements: each measured query's answers are the estimate's (``Q_q x̂``), with
    the query's weight (one for all children: the largest of the children's noise
    variances) and production's pass order and tolerance — so the L2 step returns the
    estimate itself wherever it is feasible, and where non-negativity or a bound binds it
    repairs it as production repairs measurements (the totals first at the levels
    production fits them first). Constraints, parent and rounder passes unchanged."""
    from privtab.topdown.solve_model import answer_index, apply, query_size

    k = len(problem.children)
    est = np.asarray(estimate, dtype=np.float64)
    if est.ndim != 2 or est.shape[0] != k:
        raise ValueError(f"{problem.geounit}: estimate must be ({k}, cells), got {est.shape}")
    hist = problem.histogram
    m = problem.measurements
    answers = {q: apply(answer_index(q, hist), query_size(q, hist), est) for q in m.answers}
    # one weight per query for every child: the estimate is not the children's own noisy
    # answer, so the bypass's per-child variances do not describe it (and the structured
    # solver, one Hessian for all children, then covers every persons problem)
    variances = {q: max(v for v in m.child_variances(q, k) if v is not None) for q in m.answers}
    return dataclasses.replace(problem, measurements=ChildMeasurements(answers, variances))


#: A run whose spine has at most this many geounits is solved as one tree (one bottom-up
#: pass, every subtree estimate kept: memory grows with it); a larger run with state
#: groups (the US) is solved state by state, one state in memory at a time (each state's
#: bottom-up pass is then done twice: for the nation's estimate, then for its parents).
WHOLE_TREE_GEOUNITS = 60_000


@dataclass(frozen=True, eq=False)
class _Solved:
    """A solved tree and where the spine's levels are in it: spine level ``m`` is tree
    level ``m + offset``; ``index[l]`` maps tree level ``l``'s ids to positions."""

    tree: TreeGLS
    offset: int
    index: list[dict[str, int]]

    @classmethod
    def of(cls, tree: TreeGLS, offset: int) -> _Solved:
        return cls(tree, offset, [{g: i for i, g in enumerate(ids)} for ids in tree.levels])


class GLSRoundSolve:
    """The per-parent solve of ``--postprocess gls-round`` for one run (a
    :data:`~privtab.topdown.engine.SolveFn`: the engine calls it for the root and for every
    parent in production's order; module docstring).

    ``run``: the run's noisy measurements as tree-GLS inputs
    (:func:`~privtab.topdown.gls_release.read_gls_run`); the GLS is solved at the first
    call (whole, or state by state: :data:`WHOLE_TREE_GEOUNITS`). ``seconds`` accumulates
    the time of the GLS (both passes, every state)."""

    def __init__(
        self,
        run: GLSRun,
        say: Callable[[str], None] | None = None,
        *,
        whole_tree_geounits: int | None = None,
    ) -> None:
        self.run = run
        self.say = say or (lambda _m: None)
        self.whole_tree_geounits = (
            WHOLE_TREE_GEOUNITS if whole_tree_geounits is None else whole_tree_geounits
        )
        self.seconds = 0.0
        self._whole: _Solved | None = None
        self._split: SplitGLS | None = None
        self._part: tuple[int, _Solved] | None = None

    # ------------------------------------------------------------------ the GLS
    def _solve(self) -> None:
        if self._whole is not None or self._split is not None:
            return
        t0 = time.perf_counter()
        run, h = self.run, self.run.hierarchy
        root = _gid(0, h.ids(0)[0])
        geounits = sum(h.describe().values())
        if run.group_level is None or geounits <= self.whole_tree_geounits:
            self.say(f"{run.name}: tree GLS ({geounits:,} geounits)")
            tree, ms, cs = self._whole_inputs(root)
            offset = 0 if run.group_level is None else 1
            self._whole = _Solved.of(tree_gls(tree, ms, cs, keep_bottom_up=True), offset)
        else:
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

    def _whole_inputs(self, root: str) -> tuple[GeounitTree, list[Measurements], list[Constraints]]:
        """The whole tree (with the level of state groups where the run has one)."""
        run = self.run
        if run.group_level is None:
            parents, levels = run.subtree(0, np.zeros(1, dtype=np.int64), None)
            ms = [m for k in range(len(run.levels)) for m in run.measurements(k, levels[k])]
            cs = [c for k in range(len(run.levels)) for c in run.constraints(k, levels[k])]
            return GeounitTree(root, parents, run.levels), ms, cs
        parents = {}
        ms, cs = run.measurements(0), run.constraints(0)
        for g, name in enumerate(run.group_names):
            part = run.part(g)
            parents[_group_id(name)] = root
            parents.update(part.hierarchy.parents)
            ms += part.measurements
            cs += part.constraints
        names = (run.levels[0], GROUP_LEVEL, *run.levels[1:])
        return GeounitTree(root, parents, names), ms, cs

    def _group_tree(self, group: int) -> _Solved:
        """One state's subtree (spine levels from the group level down), solved; the
        latest kept."""
        if self._whole is not None:
            return self._whole
        if self._part is None or self._part[0] != group:
            assert self._split is not None
            g = self.run.group_level
            assert g is not None
            self._part = None  # one state in memory at a time
            t0 = time.perf_counter()
            name = self.run.group_names[group]
            self.say(f"{self.run.name}: tree GLS, state {name} top-down")
            tree = self._split.part(_group_id(name))
            self.seconds += time.perf_counter() - t0
            self._part = (group, _Solved.of(tree, 1 - g))
        return self._part[1]

    # ------------------------------------------------------------------ estimates
    def estimate(self, problem: ChildrenProblem) -> F64:
        """The GLS estimate of the problem's children given their parent's (integer)
        histogram; the root's GLS estimate for the root."""
        self._solve()
        run, h = self.run, self.run.hierarchy
        if problem.parent is None:  # the root
            top = self._whole.tree if self._whole is not None else self._top()
            return top.histograms(0)[:1]
        value = np.asarray(problem.parent, dtype=np.float64)
        k = h.level(problem.level)
        first = run.index(k)[str(problem.children[0])]
        parent = int(h.parent(k)[first])
        g = run.group_level
        if g is not None and k == g:  # the root's children: through the states
            return self._through_groups(value, problem.children, k)
        if g is None:
            solved = self._whole
            assert solved is not None
        else:
            solved = self._group_tree(int(run.group_of[h.ancestors(g, k - 1)[parent]]))
        level = k - 1 + solved.offset
        pid = _gid(k - 1, h.ids(k - 1)[parent])
        kids, est = solved.tree.condition_children(level, [solved.index[level][pid]], value)
        return _ordered(solved.tree.levels[level + 1], kids, est, problem.children, k)

    def _top(self) -> TreeGLS:
        assert self._split is not None
        return self._split.top

    def _through_groups(self, root: F64, children: Sequence[str], k: int) -> F64:
        """The root's children (the state parts) given the root: the states given the
        root, then each state's parts given the state."""
        run = self.run
        top = self._whole.tree if self._whole is not None else self._top()
        groups, values = top.condition_children(0, [0], root)
        want = {_gid(k, str(c)): i for i, c in enumerate(children)}
        out = np.full((len(children), values.shape[1]), np.nan)
        for gi, v in zip(groups.tolist(), values, strict=True):
            name = top.levels[1][gi].split("|", 1)[1]
            solved = self._group_tree(run.group_names.index(name))
            level = k - 1 + solved.offset  # the groups' level in that tree
            at = solved.index[level][_group_id(name)]
            kids, est = solved.tree.condition_children(level, [at], v)
            for i, row in zip(kids.tolist(), est, strict=True):
                out[want[solved.tree.levels[level + 1][i]]] = row
        if np.isnan(out).any():
            raise ValueError("gls-round: a state part of the problem is not in the GLS tree")
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


def _ordered(
    level_ids: Sequence[str], kids: NDArray[np.int64], est: F64, children: Sequence[str], k: int
) -> F64:
    """The rows of ``est`` (the tree's ``kids``) in the order of the problem's
    ``children`` (spine level ``k`` ids)."""
    pos = {level_ids[int(i)]: r for r, i in enumerate(kids.tolist())}
    try:
        rows = [pos[_gid(k, str(c))] for c in children]
    except KeyError as exc:
        raise ValueError(f"gls-round: child {exc.args[0]!r} is not in the GLS tree") from None
    return est[np.asarray(rows, dtype=np.int64)]
