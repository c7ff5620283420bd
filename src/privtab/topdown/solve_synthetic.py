"""Synthetic per-parent problems for testing and timing the solvers — NOT private.

:func:`synthetic_problem` draws a parent's children from a synthetic truth (persons by
hhgq, voting age, Hispanic origin and race with roughly national shares; a few children
hold group-quarters facilities), derives the children's constraints from their synthetic
units exactly as the production constraints do (persons of GQ type ``t`` ≥ facilities of
type ``t``; 0 where a child has no unit of a type; no minors in nursing facilities), and
measures every query with exact discrete Gaussian noise of production's variance
``σ²_q = global_scale² / (geolevel share × query share)`` drawn from a
:class:`~privtab.random.SeededSource` — a test source, so nothing here may be published.
The parent is the sum of the children's truths (consistent by construction).

The shares are the 2020 US persons run's (``../shared/census-2020/topdown/README.md``:
``global_scale = 339/542``, geolevel and query shares per level).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privtab.topdown.histogram import CELLS, MEASURED_QUERIES, SHAPE, query
from privtab.topdown.solve import (
    PRODUCTION_TOLERANCE,
    ChildConstraints,
    ChildMeasurements,
    ChildrenProblem,
    production_passes,
)

__all__ = [
    "GEOLEVEL_SHARES",
    "GLOBAL_SCALE",
    "QUERY_SHARES",
    "children_problem",
    "measure",
    "synthetic_children",
    "synthetic_problem",
    "time_batch",
    "time_solvers",
]

#: The persons run's global scale.
GLOBAL_SCALE = Fraction(339, 542)
#: Geolevel shares of the US persons run.
GEOLEVEL_SHARES: dict[str, Fraction] = {
    "US": Fraction(104, 4099),
    "State": Fraction(1440, 4099),
    "County": Fraction(447, 4099),
    "Tract": Fraction(687, 4099),
    "Block_Group": Fraction(1256, 4099),
    "Block": Fraction(165, 4099),
}
_ONE = ("hispanic", "votingage", "hhinstlevels", "hhgq", "votingage * hispanic")
_COLS = ("US", "State", "County", "Tract", "Block_Group", "Block")
_TABLE: dict[str, tuple[tuple[int, int] | None, ...]] = {
    "total": (None, (3773, 4097), (3126, 4097), (1567, 4102), (1705, 4099), (5, 4097)),
    "cenrace": ((52, 4097), (6, 4097), (10, 4097), (4, 2051), (3, 4099), (9, 4097)),
    **dict.fromkeys(_ONE, ((26, 4097), (6, 4097), (10, 4097), (5, 4102), (3, 4099), (5, 4097))),
    "hispanic * cenrace": (
        (130, 4097),
        (12, 4097),
        (28, 4097),
        (1933, 4102),
        (1055, 4099),
        (21, 4097),
    ),
    "votingage * cenrace": ((130, 4097), (12, 4097), (28, 4097), (10, 2051), (9, 4099), (21, 4097)),
    "votingage * hispanic * cenrace": (
        (26, 241),
        (2, 241),
        (101, 4097),
        (67, 4102),
        (24, 4099),
        (71, 4097),
    ),
    "detailed": ((189, 241), (230, 4097), (754, 4097), (241, 2051), (1288, 4099), (3945, 4097)),
}
#: Query shares of the US persons run per level (``None``: not measured).
QUERY_SHARES: dict[str, dict[str, Fraction]] = {
    level: {q: Fraction(*share) for q, row in _TABLE.items() if (share := row[j]) is not None}
    for j, level in enumerate(_COLS)
}

_TOTAL_FIRST = ("State", "County", "Tract", "Block_Group")


def _cell_probabilities(rng: np.random.Generator) -> NDArray[np.float64]:
    """A household-population cell distribution: 77% adults, 19% Hispanic, race skewed."""
    race = 1.0 / (1.0 + np.arange(SHAPE[3])) ** 1.0
    race = np.concatenate([race[:1], rng.permutation(race[1:])])
    race /= race.sum()
    va = np.array([0.23, 0.77])
    hisp = np.array([0.81, 0.19])
    p = np.einsum("v,h,r->vhr", va, hisp, race)
    return np.asarray(p / p.sum(), dtype=np.float64)


def synthetic_children(
    rng: np.random.Generator, children: int, persons: int, gq_share: float = 0.05
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Synthetic children ``(truth (k, CELLS), gq_lower (k, 8), gq_upper (k, 8))``: persons
    spread over the children, a few of which hold GQ facilities (lower bound: their number
    of facilities; upper bound 0 for a type without a unit; no minors in nursing)."""
    k = children
    size = rng.dirichlet(np.full(k, 2.0)) if k > 1 else np.ones(1)
    per_child = rng.multinomial(persons, size)
    base = _cell_probabilities(rng)
    truth = np.zeros((k, CELLS), dtype=np.int64)
    lower = np.zeros((k, 8), dtype=np.int64)
    upper = np.full((k, 8), -1, dtype=np.int64)
    for i in range(k):
        n_gq = rng.binomial(per_child[i], gq_share) if rng.random() < 0.3 else 0
        types = {int(t) for t in rng.choice(np.arange(1, 8), size=rng.integers(1, 3))}
        counts = np.zeros(SHAPE, dtype=np.int64)
        counts[0] = rng.multinomial(per_child[i] - n_gq, base.ravel()).reshape(SHAPE[1:])
        split = rng.multinomial(n_gq, np.full(len(types), 1 / len(types)))
        for t, m in zip(sorted(types) if n_gq else (), split, strict=False):
            p = base.copy()
            if t == 3:  # no minors in nursing facilities
                p[0] = 0
                p /= p.sum()
            counts[t] = rng.multinomial(m, p.ravel()).reshape(SHAPE[1:])
            lower[i, t] = int(rng.integers(1, 3))
        truth[i] = counts.ravel()
        occupied = truth[i].reshape(8, -1).sum(axis=1)
        upper[i] = np.where(occupied > 0, -1, 0)
        upper[i, 0] = -1 if occupied[0] > 0 or rng.random() < 0.5 else 0
        lower[i] = np.where(occupied > 0, np.minimum(lower[i], occupied), 0)
    return truth, lower, upper


def measure(
    truth: NDArray[np.int64], level: str, seed: int | str, *, noise: bool = True
) -> ChildMeasurements:
    """Every query of ``level`` on the children's ``truth`` with production's discrete
    Gaussian noise from a seeded (NOT private) source; ``noise=False``: exact answers."""
    from privtab.random import SeededSource, discrete_gaussian

    src = SeededSource(f"synthetic-measurements-{seed}")
    answers: dict[str, NDArray[np.float64]] = {}
    variances: dict[str, Fraction] = {}
    for name in (q for q in MEASURED_QUERIES if q in QUERY_SHARES[level]):
        var = GLOBAL_SCALE**2 / (GEOLEVEL_SHARES[level] * QUERY_SHARES[level][name])
        exact = query(name).answer(truth).astype(np.int64)
        if noise:
            exact = exact + discrete_gaussian(var, exact.shape, source=src)
        answers[name] = exact.astype(np.float64)
        variances[name] = var
    return ChildMeasurements(answers, variances)


def children_problem(
    geounit: str,
    truth: NDArray[np.int64],
    gq_lower: NDArray[np.int64],
    gq_upper: NDArray[np.int64],
    parent: NDArray[np.int64] | None,
    level: str,
    seed: int | str,
    *,
    noise: bool = True,
    total: NDArray[np.int64] | None = None,
) -> ChildrenProblem:
    """The problem of ``level`` children with the given truth and bounds under ``parent``
    (``None``: the root), production passes and tolerance, seeded noise (NOT private)."""
    m = measure(truth, level, seed, noise=noise)
    l2, rnd = production_passes(list(m.answers), total_first=level in _TOTAL_FIRST)
    structural = np.zeros(SHAPE, dtype=bool)
    structural[3, 0] = True
    return ChildrenProblem(
        geounit=geounit,
        children=tuple(f"{geounit}-{i:03d}" for i in range(truth.shape[0])),
        parent=parent,
        measurements=m,
        constraints=ChildConstraints(gq_lower, gq_upper, structural.ravel(), total),
        l2_passes=l2,
        rounder_passes=rnd,
        tolerance=PRODUCTION_TOLERANCE,
    )


def synthetic_problem(
    seed: int,
    *,
    children: int = 33,
    persons: int = 1000,
    level: str = "Block",
    gq_share: float = 0.05,
    noise: bool = True,
    root: bool = False,
) -> ChildrenProblem:
    """A ``level``'s children of one synthetic parent (the parent: the sum of their truths;
    ``root``: the root alone, with its exact total). Seeded, NOT private."""
    rng = np.random.default_rng(seed)
    truth, lower, upper = synthetic_children(rng, 1 if root else children, persons, gq_share)
    return children_problem(
        f"synthetic-{level}-{seed}",
        truth,
        lower,
        upper,
        None if root else truth.sum(axis=0),
        level,
        seed,
        noise=noise,
        total=truth.sum(axis=1) if root else None,
    )


def time_solvers(
    seeds: Sequence[int], solvers: Sequence[str], **problem: Any
) -> dict[str, dict[str, list[float]]]:
    """Per-problem CPU seconds of each L2 solver on the same synthetic problems, solved in
    turn (same run, same load): ``{solver: {"total"|"l2"|"rounder": [s, …]}}``. Problems
    are built before timing; each solution goes through every runtime check."""
    import time

    from privtab.topdown.solve import solve_children

    out: dict[str, dict[str, list[float]]] = {
        s: {"total": [], "l2": [], "rounder": []} for s in solvers
    }
    for seed in seeds:
        p = synthetic_problem(seed, **problem)
        for s in solvers:
            t0 = time.process_time()
            sol = solve_children(p, solver=s)
            out[s]["total"].append(time.process_time() - t0)
            out[s]["l2"].append(sol.diagnostics.seconds.get("l2", 0.0))
            out[s]["rounder"].append(sol.diagnostics.seconds.get("rounder", 0.0))
    return out


def time_batch(
    call_sizes: Sequence[int], *, repeat: int = 1, batch: int | None = None, **problem: Any
) -> list[dict[str, float]]:
    """Per-problem CPU seconds of :func:`~privtab.topdown.solve.solve_children` one problem
    at a time against :func:`~privtab.topdown.solve.solve_children_batch` given ``size``
    problems in one call, on the same synthetic problems in the same run (alternating, best
    of ``repeat``), with the agreement of the answers: ``[{"size", "one", "batch",
    "ratio", "max_l2_diff", "same_counts"}, …]``. Problems are built before timing."""
    import time

    from privtab.topdown.solve import solve_children, solve_children_batch
    from privtab.topdown.solve_batch import DEFAULT_BATCH

    out = []
    for size in call_sizes:
        probs = [synthetic_problem(seed, **problem) for seed in range(size)]
        best_one = best_batch = float("inf")
        for _ in range(repeat):
            t0 = time.process_time()
            one = [solve_children(p) for p in probs]
            t1 = time.process_time()
            many = solve_children_batch(probs, batch=batch or DEFAULT_BATCH)
            t2 = time.process_time()
            best_one, best_batch = min(best_one, t1 - t0), min(best_batch, t2 - t1)
        pairs = list(zip(one, many, strict=True))
        out.append(
            {
                "size": float(size),
                "one": best_one / size,
                "batch": best_batch / size,
                "ratio": best_one / best_batch,
                "max_l2_diff": max(float(np.abs(a.l2 - b.l2).max()) for a, b in pairs),
                "same_counts": float(sum(np.array_equal(a.counts, b.counts) for a, b in pairs)),
            }
        )
    return out
