"""TopDown's per-parent optimisation problem (contract C3): the L2 step and the controlled
rounder of one parent's children, on open solvers, checked on every problem.

**The problem** (built by the measurement side for the root and for every parent)::

    ChildrenProblem(
        geounit="0100000US01",            # the parent's id (named by every error)
        children=("…01001", "…01003"),    # the children's ids, k of them
        parent=hist,                      # (CELLS,) int64 optimised parent; None at the root
        measurements=ChildMeasurements(
            answers={"total": (k, 1) float64, …, "detailed": (k, 2016) float64},
            variances={"total": Fraction(…), …},   # the exact variance of each answer's
        ),                                         # noise: one, or one per child
        constraints=ChildConstraints(
            gq_lower=(k, 8) int64,        # persons of hhgq t ≥ lower (facilities of type t)
            gq_upper=(k, 8) int64,        # persons of hhgq t ≤ upper; −1: no bound; 0: none
            structural_zeros=(CELLS,) bool,   # cells 0 everywhere (minors in nursing)
            total=None | (groups,) int64,     # exact totals (root, states)
            total_group=None | (k,) int64,    # child → index into total (−1: none);
        ),                                    #   None: child i ↔ total[i]
        l2_passes=(("total",), (…all other measured queries…)),
        rounder_passes=(("total",), ("hhgq", "hhgq * hispanic", …, "detailed")),
        tolerance=0.1,
        level="County",                   # the children's level (messages, diagnostics)
        histogram="persons",              # or "units" (H1: vacant, occupied; no hhgq bounds)
    )
    solve_children(problem) -> ChildrenSolution(l2=(k, CELLS) float64,
                                                counts=(k, CELLS) int64, diagnostics)

Refinements of the lead's sketch: ``rounder_passes`` are passes (production rounds
``total`` first at State, County, Tract and Block_Group children, like the L2 step);
``total_group`` lets the exact totals belong to groups of children (production's AIAN and
non-AIAN parts of a state share one invariant total); a query's variance may be given per
child (after the spine's bypass a child that absorbed its single child's budget share has
less noise than its siblings: each child is weighted by its own 1/σ²); ``gq_lower`` /
``gq_upper`` are ``None`` where no bound is in force (the units run); ``histogram``
selects the histogram (:func:`privtab.topdown.solve_model.layout`); the diagnostics are a
:class:`SolveDiagnostics`. :func:`production_passes` gives production's orders. These are
the only problem classes: :class:`privtab.topdown.problems.ProblemBuilder` builds them.

**Paths.** A persons problem goes to the structured solver: one Hessian per class of
children with equal weights (one class, unless siblings' variances differ after the
spine's bypass: then usually two), exact totals of single children and of groups of
children (a state's two parts) included. A units problem goes to an exact closed form
(:mod:`privtab.topdown.solve_units`, vectorised across the parents of a batch). What
neither covers (tolerance bands on other queries than ``total``, a units problem with a
``total`` term and no exact totals) takes the generic path (Clarabel with an exact polish;
a ``total``-only first pass in the children's persons by hhgq) and says so in
``SolveDiagnostics.generic``; a pass the structured solver cannot certify goes to Clarabel
too, counted in ``structured_fallbacks``.

**The L2 step** (production ``DataIndQueriesL2NPass`` under
``L2PlusRounderWithBackup_interleaved``): in pass ``p`` minimise
``Σ_{q ∈ pass p} (1/σ²_q) Σ_i ‖Q_q xᵢ − y_{q,i}‖²`` over ``x ≥ 0`` with
``Σ_i xᵢ = parent`` cell by cell, the hhgq bounds, the exact totals, the structural zeros
and — for every query of every earlier pass — ``|Q_q xᵢ − Q_q xᵢ^{(earlier)}| ≤ tolerance``
on each answer. Production's tolerance is ``opt_tol``: it first minimises a variable
tolerance over the current model, where the previous solution is feasible with tolerance
0, so its optimum is 0 plus the barrier's residual, then adds ``opt_tol_slack = 0.1`` — an
absolute bound of 0.1 on every answer of the earlier queries. privtab uses the given
``tolerance`` as that bound (0.1, :data:`PRODUCTION_TOLERANCE`), without the residual.
Cells that are 0 in the parent get no variables; nor do cells of an hhgq whose upper bound
is 0 for a child; a parent with one child passes its histogram down, an all-zero parent
gives all-zero children (both checked against the children's constraints). Values below
1e-7 are set to 0, as production does.

**The rounder**: :mod:`privtab.topdown.solve_round` (integrality by total unimodularity,
argued there and checked on every LP; HiGHS MIP as a counted fallback).

**Solvers, measured not trusted.** ``solver="structured"`` (``"default"``) exploits the
problem's structure (:mod:`privtab.topdown.solve_structured`: one ``n × n`` factorisation
shared by all children, ADMM, then an exact active-set solve whose KKT conditions are
verified); ``"clarabel"`` and ``"osqp"`` solve the same pass as a generic sparse QP
(:mod:`privtab.topdown.solve_qp`). ``cross_check="osqp"`` (or any other) solves every
pass again with a second solver and raises :class:`TopDownSolverError` if the objectives
differ by more than 1e-6 relative. Every problem's L2 and rounded solutions are checked at
run time (children sum to the parent, non-negativity, every constraint; integrality of the
rounding). An infeasible problem raises :class:`TopDownInfeasibleError` naming the geounit
and the violated constraints, never a relaxed solve.

**Measured** (synthetic block group: 33 blocks, 1,000 persons, ~6,000 variables,
production variances; one BLAS thread; CPU time per problem on the shared 2-core machine
under load 6–18): the structured solver 31–38 ms for the whole problem (L2 and rounding),
OSQP 530–630 ms and Clarabel 340–390 ms with the same rounder — about 20× and 12×
(``time_solvers`` in :mod:`privtab.topdown.solve_synthetic`). A county-like parent of 27
tracts (105,000 persons): 0.4 s against Clarabel's 13–16 s. On the problems of a seeded
10⁵-person synthetic nation (``privtab synth --persons 100000 --seed 7``; CPU seconds per
level, the same captured problems solved in slices of 32 by the code before and after, in
turn, load 25–36): the units run's blocks 19.8 → 2.2 s and block groups 5.0 → 0.85 s (the
closed form instead of Clarabel); the nation's 66 state parts (15 shared state totals,
three classes of weights) 5.2 → 0.85 s, with a 2·10⁻⁸ lower objective than Clarabel's; the
states' counties (61 of 64 with unequal variances) 8.5 → 5.2 s, one pass left uncertified
and handed to Clarabel (docs/topdown.md §8).

**Differences from production** (deliberate, documented): open solvers instead of Gurobi;
the tolerance is the configured 0.1 without the barrier residual production adds; the L2
solution is exact (KKT-verified) where production accepted ``SUBOPTIMAL`` and
``ITERATION_LIMIT`` statuses; values within 1e-6 of an integer are snapped before flooring
and leftover answers are rounded on a 1e-6 grid, so the rounding does not depend on a
solver's last digits; cells of an hhgq whose upper bound is 0 carry no variables (production
keeps them and bounds their sum by 0: the same feasible set).

Privacy: everything here is post-processing of the noisy measurements and of public
(invariant) constraints, so it costs no privacy (post-processing theorem; the semantics
seed §8 on TopDown's post-processing).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from privtab.topdown.solve_model import (
    F64,
    Band,
    Model,
    Term,
    TopDownInfeasibleError,
    TopDownSolverError,
    check_feasible,
    check_solution,
    layout,
    prepare,
    query_size,
)

__all__ = [
    "PRODUCTION_TOLERANCE",
    "ChildConstraints",
    "ChildMeasurements",
    "ChildrenProblem",
    "ChildrenSolution",
    "SolveDiagnostics",
    "TopDownInfeasibleError",
    "TopDownSolverError",
    "production_passes",
    "solve_children",
    "solve_children_batch",
]

#: Production's inter-pass tolerance (``opt_tol_slack = 0.1`` of the 2020 configuration).
PRODUCTION_TOLERANCE = 0.1

#: The solvers of the L2 step.
SOLVERS = ("structured", "clarabel", "osqp")

_ZERO = 1e-7  # production's reformSolution: values below this are 0


def _fraction(x: Fraction | int | None) -> Fraction | None:
    return None if x is None else x if type(x) is Fraction else Fraction(x)


def _distinct(values: Sequence[Fraction | None]) -> list[Fraction | None]:
    """The distinct objects of ``values`` (by identity: a Fraction's hash is slow and the
    children's variances repeat a few objects), to be compared by value afterwards."""
    return list({id(x): x for x in values}.values())


#: A query's noise variance: one for every child, or each child's (``None``: not measured —
#: a single child whose share moved to its parent, passed its parent's histogram).
Variance = Fraction | Sequence[Fraction | None]


@dataclass(frozen=True, eq=False)
class ChildMeasurements:
    """The children's noisy answers (``answers[q]``: ``(k, query(q).size)`` float64) and
    the exact variance of each answer's noise per query (``variances[q]``: one
    :class:`~fractions.Fraction` for all children, or one per child — after the spine's
    bypass siblings can differ: a child that absorbed its single child's share has less
    noise)."""

    answers: Mapping[str, NDArray[np.float64]]
    variances: Mapping[str, Variance]

    def child_variances(self, query: str, k: int) -> tuple[Fraction | None, ...]:
        """The variance of each of the ``k`` children's answers to ``query``."""
        v = self.variances[query]
        if isinstance(v, Fraction | int):
            return (Fraction(v),) * k
        # the same few Fraction objects repeat (one per budget share): converted once each
        seen: dict[int, Fraction | None] = {}
        out = tuple(
            seen[id(x)] if id(x) in seen else seen.setdefault(id(x), _fraction(x)) for x in v
        )
        if len(out) != k:
            raise ValueError(f"{len(out)} variances of {query!r} for {k} children")
        return out

    def distinct_variances(self, query: str, k: int) -> tuple[Fraction | None, ...]:
        """The distinct variances (by object) among the ``k`` children's answers to
        ``query`` — :meth:`child_variances` without the per-child tuple (found once per
        query: validation and every pass ask)."""
        seen: dict[str, tuple[Fraction | None, ...]] = self.__dict__.setdefault("_distinct", {})
        got = seen.get(query)
        if got is not None:
            return got
        v = self.variances[query]
        if isinstance(v, Fraction | int):
            got = (Fraction(v),)
        elif len(v) != k:
            raise ValueError(f"{len(v)} variances of {query!r} for {k} children")
        else:
            got = tuple(_fraction(x) for x in dict(zip(map(id, v), v, strict=True)).values())
        seen[query] = got
        return got

    def uniform_variance(self, query: str) -> Fraction | None:
        """The variance of ``query`` when every child has the same, else ``None``."""
        v = self.variances[query]
        if isinstance(v, Fraction | int):
            return Fraction(v)
        distinct = set(_distinct(v))
        one = distinct.pop() if len(distinct) == 1 else None
        return None if one is None else Fraction(one)


@dataclass(frozen=True, eq=False)
class ChildConstraints:
    """The children's constraints, from invariants public to the algorithm.

    ``gq_lower[i, t]`` ≤ persons of hhgq ``t`` in child ``i`` ≤ ``gq_upper[i, t]``
    (``-1``: no upper bound; ``0``: no unit of that type, so no variables there; both
    ``None``: no bounds — the units run); ``structural_zeros`` cells are 0 in every child;
    ``total[g]`` is the exact population of the children ``i`` with ``total_group[i] == g``
    (``total_group=None``: child ``i`` has exact total ``total[i]``; ``total=None``: no
    exact totals). The AIAN and non-AIAN parts of a state share one group."""

    gq_lower: NDArray[np.int64] | None
    gq_upper: NDArray[np.int64] | None
    structural_zeros: NDArray[np.bool_]
    total: NDArray[np.int64] | None = None
    total_group: NDArray[np.int64] | None = None


@dataclass(frozen=True, eq=False)
class ChildrenProblem:
    """One parent's children to optimise jointly (see the module docstring). ``level`` is
    the children's level (for messages and diagnostics), ``histogram`` the protected
    histogram (``"persons"`` or ``"units"``, :mod:`privtab.topdown.schema`)."""

    geounit: str
    children: Sequence[str]
    parent: NDArray[np.int64] | None
    measurements: ChildMeasurements
    constraints: ChildConstraints
    l2_passes: Sequence[Sequence[str]]
    rounder_passes: Sequence[Sequence[str]]
    tolerance: float = PRODUCTION_TOLERANCE
    level: str = ""
    histogram: str = "persons"


@dataclass(frozen=True)
class SolveDiagnostics:
    """What solving one problem took: ``path`` is ``"optimised"``, ``"single child"`` or
    ``"empty parent"``; ``cells`` the masked cells, ``variables`` the L2 variables;
    ``l2_solvers``/``l2_objectives`` per pass (the objective ``Σ w ‖Qx − y‖²``, constants
    included); ``structured_fallbacks`` passes the structured solver could not certify
    and a generic solver solved; ``rounder_objectives`` per rounder pass (the L1 distance);
    ``rounder_mip_fallbacks`` fractional LP vertices re-solved as MIPs; ``laminar`` whether
    the rounder's rows were certified totally unimodular; ``cross_check`` the relative
    objective differences to the second solver per pass (``None`` if not asked);
    ``generic`` why the L2 step took the generic path instead of the structured solver
    (``""``: it did not; ``"variances differ"``: siblings with different shares;
    ``"units histogram"``); ``seconds`` wall-clock time of the steps. All of it is a
    function of the noisy measurements and the invariants only, but timings and sizes
    are for logs and benchmarks, not for a release folder."""

    geounit: str
    children: int
    path: str
    cells: int = 0
    variables: int = 0
    l2_solvers: tuple[str, ...] = ()
    l2_objectives: tuple[float, ...] = ()
    structured_fallbacks: int = 0
    rounder_objectives: tuple[float, ...] = ()
    rounder_lps: int = 0
    rounder_mip_fallbacks: int = 0
    laminar: bool = True
    cross_check: tuple[float, ...] | None = None
    generic: str = ""
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ChildrenSolution:
    """The children's L2 solution ``(k, cells)`` float64, their integer histograms
    ``(k, cells)`` int64 and how they were found."""

    l2: NDArray[np.float64]
    counts: NDArray[np.int64]
    diagnostics: SolveDiagnostics


def production_passes(
    measured: Sequence[str], *, total_first: bool
) -> tuple[tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...]]:
    """Production's ``(l2_passes, rounder_passes)`` (2020 strategy
    ``Strategy1b_ST_CTY_TR_BG_isoTot_Ordering``): ``total_first`` for State, County, Tract
    and Block_Group children — ``total``, then every other measured query — otherwise
    (Block children, the root) one pass. The rounder's queries are production's, including
    ``detailed`` twice (also as ``hhgq * votingage * hispanic * cenrace``)."""
    rest: tuple[str, ...] = ("hhgq", "hhgq * hispanic", "hhgq * hispanic * cenrace")
    rest += ("hhgq * votingage * hispanic * cenrace", "detailed")
    others = tuple(q for q in measured if q != "total")
    if total_first and "total" in measured:
        return (("total",), others), (("total",), rest)
    return (tuple(measured),), (("total", *rest),)


def solve_children(
    problem: ChildrenProblem, *, solver: str = "default", cross_check: str | None = None
) -> ChildrenSolution:
    """Solve one parent's children: the L2 passes, then the controlled rounder (module
    docstring). ``solver``: ``"default"`` (= ``"structured"``), ``"clarabel"`` or
    ``"osqp"``; ``cross_check``: a second solver for every pass. Raises
    :class:`TopDownInfeasibleError` for an infeasible problem and
    :class:`TopDownSolverError` when a solution fails its checks."""
    solver = "structured" if solver == "default" else solver
    if solver not in SOLVERS or (cross_check is not None and cross_check not in SOLVERS):
        raise ValueError(f"solver must be one of {SOLVERS}")
    t0 = time.perf_counter()
    started = start_problem(problem, t0)
    if isinstance(started, ChildrenSolution):
        return started
    model = started
    t1 = time.perf_counter()
    l2, result = _l2(problem, model, solver, cross_check)
    t2 = time.perf_counter()
    return finish_problem(problem, model, l2, result, {"prepare": t1 - t0, "l2": t2 - t1})


def start_problem(problem: ChildrenProblem, t0: float) -> Model | ChildrenSolution:
    """The first steps of every solve (single or batched): validate the problem, prepare
    its model and check its feasibility; a problem passed down (one child, an empty parent)
    is finished here and returned as its solution."""
    k = len(problem.children)
    _validate(problem)
    c = problem.constraints
    lower, upper = _bounds(problem)
    parent = None if problem.parent is None else np.asarray(problem.parent, dtype=np.int64)
    group, totals = _totals(c, k)
    zeros = np.asarray(c.structural_zeros, dtype=bool)
    model = prepare(
        problem.geounit,
        problem.children,
        parent,
        lower,
        upper,
        zeros,
        group,
        totals,
        problem.histogram,
    )
    check_feasible(model, parent, zeros, lower, upper)
    if parent is not None and (k == 1 or not parent.any()):
        return _pass_down(problem, model, parent, t0)
    return _drop_implied_total(model)


def finish_problem(
    problem: ChildrenProblem,
    model: Model,
    l2: F64,
    result: L2Result,
    seconds: dict[str, float],
) -> ChildrenSolution:
    """The last steps of every solve (single or batched): the L2 solution checked, the
    controlled rounder, the rounding checked, the diagnostics."""
    from privtab.topdown.solve_round import round_children

    l2 = np.where(l2 < _ZERO, 0.0, l2)
    check_solution(model, l2, integral=False, what="L2 solution")
    t2 = time.perf_counter()
    rounding = round_children(model, l2, problem.rounder_passes)
    check_solution(model, rounding.counts.astype(np.float64), integral=True, what="rounding")
    diag = SolveDiagnostics(
        geounit=problem.geounit,
        children=model.k,
        path="optimised",
        cells=model.n,
        variables=int(model.allowed.sum()),
        l2_solvers=result.solvers,
        l2_objectives=result.objectives,
        structured_fallbacks=result.fallbacks,
        rounder_objectives=rounding.objectives,
        rounder_lps=rounding.lps,
        rounder_mip_fallbacks=rounding.mip_fallbacks,
        laminar=rounding.laminar,
        cross_check=result.checks,
        generic=result.generic,
        seconds={**seconds, "rounder": time.perf_counter() - t2},
    )
    return ChildrenSolution(model.full(l2), model.full(rounding.counts), diag)


def _bounds(problem: ChildrenProblem) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(gq_lower, gq_upper)`` as arrays (none given: 0 and no upper bound)."""
    c = problem.constraints
    shape = (len(problem.children), layout(problem.histogram).groups)
    lower = np.zeros(shape, np.int64) if c.gq_lower is None else np.asarray(c.gq_lower)
    upper = np.full(shape, -1, np.int64) if c.gq_upper is None else np.asarray(c.gq_upper)
    return lower.astype(np.int64), upper.astype(np.int64)


def _totals(c: ChildConstraints, k: int) -> tuple[NDArray[np.intp], NDArray[np.int64]]:
    if c.total is None:
        return np.full(k, -1, dtype=np.intp), np.zeros(0, dtype=np.int64)
    total = np.asarray(c.total, dtype=np.int64)
    if c.total_group is None:
        return np.arange(k, dtype=np.intp), total
    return np.asarray(c.total_group, dtype=np.intp), total


def _drop_implied_total(model: Model) -> Model:
    """An exact total shared by **all** the children of a parent equals the parent's total
    (checked by :func:`check_feasible`): the cell rows ``Σ_i xᵢ = parent`` imply it. The
    dependent row is dropped — interior-point solvers can take a redundant equality for an
    infeasible one — and the structured solver then covers the problem."""
    g = model.total_group
    whole = model.group_total.size == 1 and g.size > 1 and bool(np.all(g == 0))
    if model.parent is None or not whole:
        return model
    return dataclasses.replace(
        model, total_group=np.full(model.k, -1, dtype=np.intp), group_total=np.zeros(0)
    )


def _pass_down(
    problem: ChildrenProblem, model: Model, parent: NDArray[np.int64], t0: float
) -> ChildrenSolution:
    """One child takes the parent's histogram; an empty parent gives empty children —
    both checked against the children's constraints like any solution."""
    k = len(problem.children)
    counts = np.zeros((k, model.layout.cells), dtype=np.int64)
    path = "empty parent"
    if k == 1:
        counts[0] = parent
        path = "single child"
    masked = counts[:, model.cells].astype(np.float64)
    try:
        check_solution(model, masked, integral=True, what="histogram passed down")
    except TopDownSolverError as e:
        raise TopDownInfeasibleError(problem.geounit, [str(e)]) from None
    diag = SolveDiagnostics(
        problem.geounit, k, path, cells=model.n, seconds={"total": time.perf_counter() - t0}
    )
    return ChildrenSolution(counts.astype(np.float64), counts, diag)  # l2: the same counts


def _terms(problem: ChildrenProblem, model: Model, names: Sequence[str]) -> list[Term]:
    """The pass's terms, weight ``1/σ²``; with siblings' variances differing, the weight
    of the largest variance times each child's factor ``σ²_max/σ²_i``."""
    m = problem.measurements
    out = []
    for name in dict.fromkeys(names):
        kinds = m.distinct_variances(name, model.k)
        measured = [v for v in kinds if v is not None]
        ref = max(measured)
        scale = None
        if len(set(measured)) > 1 or len(measured) < len(kinds):
            var = m.child_variances(name, model.k)
            ratio = {id(v): float(ref / v) if v is not None else 0.0 for v in _distinct(var)}
            scale = np.array([ratio[id(v)] for v in var])
        answers = np.asarray(m.answers[name], dtype=np.float64)
        out.append(model.term(name, float(1 / ref), answers, scale))
    return out


@dataclass(frozen=True)
class L2Result:
    """What the L2 passes took (for :class:`SolveDiagnostics`)."""

    solvers: tuple[str, ...]
    objectives: tuple[float, ...]
    fallbacks: int
    checks: tuple[float, ...] | None
    generic: str


def generic_reason(model: Model, terms: Sequence[Term], bands: Sequence[Band] = ()) -> str:
    """Why a pass cannot go to the structured solver (a persons problem) or to the units
    closed form (:mod:`privtab.topdown.solve_units`), or ``""``."""
    if model.histogram != "persons":
        from privtab.topdown.solve_units import units_case

        return "" if units_case(model, terms, bands) is not None else f"{model.histogram} histogram"
    if any(t.scale is not None and bool(np.any(t.scale <= 0)) for t in terms):
        return "variances differ"  # a child without a measurement (never optimised)
    return ""


def _objective(terms: Sequence[Term], answers: Sequence[F64]) -> float:
    """``Σ_q Σ_i w_{q,i} ‖Q_q xᵢ − y_{q,i}‖²`` (constants included)."""
    return float(
        math.fsum(
            float(t.child_weights(a.shape[0]) @ np.sum((a - t.answers) ** 2, axis=1))
            for t, a in zip(terms, answers, strict=True)
        )
    )


def _generic_pass(
    model: Model, terms: Sequence[Term], bands: Sequence[Band], solver: str, need_x: bool
) -> tuple[F64, list[F64], str]:
    """One pass by a generic solver (``clarabel`` or ``osqp``): a total-only pass followed
    by others in the children's persons by hhgq, as the structured path does."""
    from privtab.topdown.solve_qp import solve_qp, solve_reduced_total

    if [t.name for t in terms] == ["total"] and not bands and not need_x:
        totals = solve_reduced_total(model, terms[0])
        return np.zeros((model.k, model.n)), [totals[:, None]], "clarabel (by hhgq)"
    x = solve_qp(model, terms, bands, solver)
    return x, [t.apply(x) for t in terms], solver


def solve_one_pass(
    model: Model, terms: Sequence[Term], bands: Sequence[Band], solver: str, need_x: bool
) -> tuple[F64, list[F64], float, str, bool]:
    """``(x, answers, objective, solver used, structured fallback)`` of one pass."""
    if solver == "structured" and model.histogram == "units":
        from privtab.topdown.solve_units import UNITS_SOLVER, solve_units

        ux = solve_units([model], [terms], [bands])[0]
        if ux is not None:
            answers = [t.apply(ux) for t in terms]
            return ux, answers, _objective(terms, answers), UNITS_SOLVER, False
        covered = not generic_reason(model, terms, bands)
        x, answers, used = _generic_pass(model, terms, bands, "clarabel", need_x)
        return x, answers, _objective(terms, answers), used, covered
    if solver == "structured" and not generic_reason(model, terms):
        from privtab.topdown.solve_structured import solve_pass

        res = solve_pass(model, terms, bands, solver, need_x=need_x)
        return res.x, res.answers, res.objective, res.solver, res.fell_back
    generic = "clarabel" if solver == "structured" else solver
    x, answers, used = _generic_pass(model, terms, bands, generic, need_x)
    return x, answers, _objective(terms, answers), used, False


def _l2(
    problem: ChildrenProblem, model: Model, solver: str, cross_check: str | None
) -> tuple[F64, L2Result]:
    bands: list[Band] = []
    solvers: list[str] = []
    objectives: list[float] = []
    diffs: list[float] = []
    fallbacks = 0
    generic = ""
    x = np.zeros((model.k, model.n))
    last = len(problem.l2_passes) - 1
    for p, names in enumerate(problem.l2_passes):
        terms = _terms(problem, model, names)
        generic = generic or generic_reason(model, terms, bands)
        x, answers, objective, used, fell_back = solve_one_pass(
            model, terms, bands, solver, p == last
        )
        solvers.append(used)
        fallbacks += int(fell_back)
        objectives.append(objective)
        if cross_check is not None:
            other = solve_one_pass(model, terms, bands, cross_check, p == last)
            # relative, with a floor of 1e-3 for objectives near 0 (noise-free data)
            diff = abs(other[2] - objective)
            rel = diff / max(abs(objective), abs(other[2]), 1e-3)
            diffs.append(rel)
            if rel > 1e-6:
                raise TopDownSolverError(
                    f"geounit {model.geounit!r}: the L2 objectives of {used} "
                    f"({objective!r}) and {other[3]} ({other[2]!r}) differ by {rel:.3g} "
                    "relative"
                )
        tol = float(problem.tolerance)
        for t, a in zip(terms, answers, strict=True):
            bands.append(Band(t.name, t.index, t.size, a - tol, a + tol))
    checks = tuple(diffs) if cross_check else None
    return x, L2Result(tuple(solvers), tuple(objectives), fallbacks, checks, generic)


def _validate(problem: ChildrenProblem) -> None:
    """Shapes, names and values of a problem (``ValueError``: a caller's bug)."""
    k = len(problem.children)
    hist = problem.histogram
    try:
        lay = layout(hist)
    except ValueError:
        raise ValueError(f"{problem.geounit}: unknown histogram {hist!r}") from None
    cells = lay.cells
    if k == 0 or len(set(problem.children)) != k:
        raise ValueError(f"{problem.geounit}: children must be non-empty and distinct")
    passed_down = problem.parent is not None and k == 1
    if problem.parent is not None:
        p = np.asarray(problem.parent)
        if p.shape != (cells,) or p.dtype.kind not in "iu" or np.any(p < 0):
            raise ValueError(f"{problem.geounit}: parent must be ({cells},) non-negative ints")
    m = problem.measurements
    if set(m.answers) != set(m.variances):
        raise ValueError(f"{problem.geounit}: answers and variances name different queries")
    for name, a in m.answers.items():
        shape = (k, query_size(name, hist))
        if np.shape(a) != shape or not np.all(np.isfinite(a)):
            raise ValueError(f"{problem.geounit}: answers of {name!r} must be finite {shape}")
        var = m.distinct_variances(name, k)
        if not passed_down and not all(v is not None and v > 0 for v in var):
            raise ValueError(f"{problem.geounit}: variance of {name!r} must be positive")
    listed = [n for p in problem.l2_passes for n in p]
    if set(listed) != set(m.answers):
        raise ValueError(
            f"{problem.geounit}: the L2 passes {sorted(set(listed))} must name exactly the "
            f"measured queries {sorted(m.answers)}"
        )
    for name in (n for p in problem.rounder_passes for n in p):
        query_size(name, hist)
    c = problem.constraints
    groups = lay.groups
    for arr, what in ((c.gq_lower, "gq_lower"), (c.gq_upper, "gq_upper")):
        if arr is None:
            continue
        a = np.asarray(arr)
        if a.shape != (k, groups) or a.dtype.kind not in "iu":
            raise ValueError(f"{problem.geounit}: {what} must be ({k}, {groups}) ints")
    lower, upper = _bounds(problem)
    if np.any(lower < 0) or np.any(upper < -1):
        raise ValueError(f"{problem.geounit}: gq_lower must be ≥ 0 and gq_upper ≥ −1")
    sz = np.asarray(c.structural_zeros)
    if sz.shape != (cells,) or sz.dtype != np.bool_:
        raise ValueError(f"{problem.geounit}: structural_zeros must be ({cells},) bool")
    if c.total is not None:
        t = np.asarray(c.total)
        g = np.arange(k) if c.total_group is None else np.asarray(c.total_group)
        ok = t.ndim == 1 and t.dtype.kind in "iu" and np.all(t >= 0) and g.shape == (k,)
        if not ok or (g.size and (g.max() >= t.size or g.min() < -1)):
            raise ValueError(f"{problem.geounit}: total/total_group are inconsistent")
    elif c.total_group is not None:
        raise ValueError(f"{problem.geounit}: total_group without total")
    if not (math.isfinite(problem.tolerance) and problem.tolerance >= 0):
        raise ValueError(f"{problem.geounit}: tolerance must be finite and ≥ 0")


def solve_children_batch(
    problems: Sequence[ChildrenProblem], *, solver: str = "default", batch: int = 32
) -> list[ChildrenSolution]:
    """Solve many problems (normally the children problems of many parents of one level)
    in one call: the same answers and checks as :func:`solve_children` problem by problem,
    the structured L2 passes batched (:mod:`privtab.topdown.solve_batch`)."""
    from privtab.topdown.solve_batch import solve_many

    return solve_many(problems, solver=solver, batch=batch)
