"""Many parents' problems in one call (:func:`privtab.topdown.solve.solve_children_batch`).

The national run solves ~2.4·10⁵ block groups' children (33 blocks, ~200 masked cells each)
and ~10⁵ tracts' children. :func:`solve_many` solves a list of problems
(normally the children problems of many parents of one level) with the same steps as
:func:`~privtab.topdown.solve.solve_children` and the same checks on every problem, but

* the structured L2 passes of all problems run as one batched ADMM on stacked arrays
  (:mod:`privtab.topdown.solve_structured_batch`), each problem polished and KKT-certified
  on its own when its active set settles — the same certified optimum as alone;
* a problem the batch does not certify is solved alone exactly as by ``solve_children``
  (structured, then Clarabel, counted in ``structured_fallbacks``), so no problem can get
  a different kind of answer from being batched.

The rounder and every runtime check run per problem, as in ``solve_children``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from privtab.topdown.solve import (
    SOLVERS,
    ChildrenProblem,
    ChildrenSolution,
    L2Result,
    _terms,
    finish_problem,
    generic_reason,
    solve_children,
    solve_one_pass,
    start_problem,
)
from privtab.topdown.solve_model import F64, Band, Model, Term
from privtab.topdown.solve_structured import (
    PassResult,
    StructuredPass,
    _objective,
    _total_band,
    solve_pass,
)
from privtab.topdown.solve_structured_batch import batches, solve_batch
from privtab.topdown.solve_units import UNITS_SOLVER, solve_units

__all__ = ["DEFAULT_BATCH", "solve_many"]

#: Problems per stacked ADMM batch (measured: docs/topdown.md, "Speed").
DEFAULT_BATCH = 32


@dataclass
class _State:
    """One problem on its way through the batch."""

    problem: ChildrenProblem
    model: Model
    t0: float
    x: F64
    bands: list[Band] = field(default_factory=list)
    solvers: list[str] = field(default_factory=list)
    objectives: list[float] = field(default_factory=list)
    fallbacks: int = 0
    l2_seconds: float = 0.0
    generic: str = ""
    terms: dict[int, list[Term]] = field(default_factory=dict)

    def pass_terms(self, p: int) -> list[Term]:
        """The terms of pass ``p`` (built once: :func:`~privtab.topdown.solve._terms`)."""
        got = self.terms.get(p)
        if got is None:
            got = self.terms[p] = _terms(self.problem, self.model, self.problem.l2_passes[p])
        return got


def solve_many(
    problems: Sequence[ChildrenProblem], *, solver: str = "default", batch: int = DEFAULT_BATCH
) -> list[ChildrenSolution]:
    """Solve every problem (module docstring), returning the solutions in order.

    ``solver`` as for :func:`~privtab.topdown.solve.solve_children`; only the structured
    solver (``"default"``) is batched, the generic ones solve problem by problem. Raises the
    first problem's :class:`~privtab.topdown.solve.TopDownInfeasibleError` or
    :class:`~privtab.topdown.solve.TopDownSolverError`, naming its geounit."""
    solver = "structured" if solver == "default" else solver
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}")
    if batch < 1:
        raise ValueError("batch must be at least 1")
    if solver != "structured":
        return [solve_children(p, solver=solver) for p in problems]
    out: list[ChildrenSolution | None] = [None] * len(problems)
    states: dict[int, _State] = {}
    for i, problem in enumerate(problems):
        got = _start(problem)
        if isinstance(got, _State):
            states[i] = got
        else:
            out[i] = got
    depth = max((len(s.problem.l2_passes) for s in states.values()), default=0)
    for p in range(depth):
        _l2_pass([s for s in states.values() if p < len(s.problem.l2_passes)], p, batch)
    for i, s in states.items():
        out[i] = _finish(s)
    return [o for o in out if o is not None]


def _start(problem: ChildrenProblem) -> _State | ChildrenSolution:
    """Validate and prepare one problem (:func:`~privtab.topdown.solve.start_problem`, as
    ``solve_children`` does); a problem passed down (one child, empty parent) is finished
    here."""
    t0 = time.perf_counter()
    started = start_problem(problem, t0)
    if isinstance(started, ChildrenSolution):
        return started
    return _State(problem, started, t0, np.zeros((started.k, started.n)))


def _l2_pass(states: Sequence[_State], p: int, batch: int) -> None:
    """Pass ``p`` of every state: the structured ones batched, the rest one by one."""
    t0 = time.perf_counter()
    states = _units_pass(states, p)
    stacked: list[_State] = []
    passes: list[StructuredPass] = []
    for s in states:
        terms = s.pass_terms(p)
        need_x = p == len(s.problem.l2_passes) - 1
        reason = generic_reason(s.model, terms, s.bands)
        s.generic = s.generic or reason
        if reason or s.model.histogram != "persons":  # as solve_children solves it
            alone = solve_one_pass(s.model, terms, s.bands, "structured", need_x)
            _record(s, PassResult(*alone))
            continue
        band = _total_band(s.model, s.bands)
        simple_total = [t.name for t in terms] == ["total"] and not s.bands and not need_x
        if band is None or simple_total or not any(t.injective for t in terms):
            _record(s, solve_pass(s.model, terms, s.bands, "structured", need_x=need_x))
            continue
        stacked.append(s)
        passes.append(StructuredPass(s.model, terms, *band))
    for group in batches(passes, batch):
        solved = solve_batch([passes[i] for i in group])
        for i, x in zip(group, solved, strict=True):
            s = stacked[i]
            terms = s.pass_terms(p)
            if x is None:  # not certified in the batch: alone, exactly as solve_children
                need_x = p == len(s.problem.l2_passes) - 1
                _record(s, solve_pass(s.model, terms, s.bands, "structured", need_x=need_x))
                continue
            answers = [t.apply(x) for t in terms]
            _record(s, PassResult(x, answers, _objective(terms, answers), "structured"))
    share = (time.perf_counter() - t0) / max(1, len(states))
    for s in states:
        s.l2_seconds += share


def _units_pass(states: Sequence[_State], p: int) -> list[_State]:
    """Pass ``p`` of the units problems among ``states``, all at once by the closed form
    (:func:`privtab.topdown.solve_units.solve_units`); returns the states left (persons
    problems, and units problems the closed form does not cover: solved as
    ``solve_children`` solves them)."""
    units = [s for s in states if s.model.histogram == "units"]
    if not units:
        return list(states)
    terms = [s.pass_terms(p) for s in units]
    solved = solve_units([s.model for s in units], terms, [s.bands for s in units])
    done: set[int] = set()
    for s, t, x in zip(units, terms, solved, strict=True):
        if x is not None:
            answers = [q.apply(x) for q in t]
            _record(s, PassResult(x, answers, _objective(t, answers), UNITS_SOLVER))
            done.add(id(s))
    return [s for s in states if id(s) not in done]


def _record(s: _State, res: PassResult) -> None:
    """Keep a pass's result and add its tolerance bands (``solve.py``'s ``_l2`` loop)."""
    terms = s.pass_terms(len(s.solvers))
    s.x = res.x
    s.solvers.append(res.solver)
    s.fallbacks += int(res.fell_back)
    s.objectives.append(res.objective)
    tol = float(s.problem.tolerance)
    for t, a in zip(terms, res.answers, strict=True):
        s.bands.append(Band(t.name, t.index, t.size, a - tol, a + tol))


def _finish(s: _State) -> ChildrenSolution:
    """The checks and the rounder of one problem (:func:`~privtab.topdown.solve.
    finish_problem`, as ``solve_children`` does)."""
    result = L2Result(tuple(s.solvers), tuple(s.objectives), s.fallbacks, None, s.generic)
    seconds = {"l2": s.l2_seconds}
    return finish_problem(s.problem, s.model, s.x, result, seconds)
