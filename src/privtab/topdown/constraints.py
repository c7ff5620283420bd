"""TopDown's invariants and constraints, per geounit of every level (production rules).

Production (``programs/invariants/invariantsmaker.py``, ``programs/constraints/
querybase_constraints.py`` and ``Constraints_PL94*.py``, ``programs/nodes/nodes.py``) makes
the invariants a level's config names (``theInvariants.<level>``) from the true data and
the constraints it names (``theConstraints.<level>``) from those invariants; a geounit's
invariants and constraints are those of its children **added up** (right-hand sides add),
and where its own level names a constraint again the **stricter** bound is kept (``≥``:
the larger right-hand side, ``≤``: the smaller). Names (the strategy's ``invariants`` and
``constraints``, :mod:`privtab.topdown.strategy`):

========================  ================================================================
``gqhh_vect``             units by type: housing units (occupied or vacant), then
                          group-quarters facilities of major types 1..7 (8 counts)
``gqhh_tot``              all units
``tot``                   the true total of the protected histogram (persons, or housing
                          units in the units run)
``hhgq_total_lb``         persons of hhgq ``t`` ≥ ``n_t · lb_t`` (``lb = [0,1,…,1]``: a
                          facility holds at least one person, a housing unit may be
                          vacant); with ``tot``: where no other unit type exists, ≥ ``tot``
``hhgq_total_ub``         persons of hhgq ``t`` ≤ ``n_t · 99999`` (0 where there is no unit
                          of type ``t``); with ``tot``: also ≤ ``tot − Σ_{s≠t} n_s·lb_s``
                          where ``n_t > 0`` (else 0)
``nurse_nva_0``           no persons under 18 in nursing facilities (hhgq 3): structural
                          zeros
``total``                 the histogram total = ``tot`` (exact)
``total_by_group``        the sum of the totals of the units of one group (the AIAN and
                          non-AIAN parts of a state) = the group's true total (README: the
                          state totals are invariant; only the sum of a state's two parts)
========================  ================================================================

A name configured at one level exists at that level and every level above it (aggregated),
so the 2020 persons run has the unit-count bounds everywhere, the state(-part) bounds made
with the true part totals at State and above, and the national total at the root.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from numpy.typing import NDArray

from privtab.errors import InputError
from privtab.topdown.histogram import SHAPE, cell_index
from privtab.topdown.inputs import SparseHistograms
from privtab.topdown.spine import Spine
from privtab.topdown.strategy import Strategy

__all__ = [
    "HHGQ_CAP",
    "HHGQ_LOWER_PER_UNIT",
    "LevelConstraints",
    "build_constraints",
    "check_feasible",
    "nurse_minor_cells",
]

IntArray = NDArray[np.int64]

#: Production ``hhgq_cap``: at most 99,999 persons per unit of any type.
HHGQ_CAP = 99999
#: Production ``hhgq_lb`` of the 2020 schema: 0 persons per housing unit (vacant units
#: exist), 1 per group-quarters facility.
HHGQ_LOWER_PER_UNIT = np.array([0, 1, 1, 1, 1, 1, 1, 1], dtype=np.int64)
UNIT_COLUMNS = ("HU", "GQ1", "GQ2", "GQ3", "GQ4", "GQ5", "GQ6", "GQ7")
NURSING = 3


def nurse_minor_cells() -> NDArray[np.bool_]:
    """The persons cells of people under 18 in nursing facilities (``nurse_nva_0``)."""
    out = np.zeros(int(np.prod(SHAPE)), dtype=bool)
    for hisp in range(SHAPE[2]):
        for race in range(SHAPE[3]):
            out[cell_index(NURSING, 0, hisp, race)] = True
    return out


@dataclass(frozen=True, eq=False)
class LevelConstraints:
    """The constraints of every geounit of one level (``None``: not in force there).

    ``lower``/``upper``: ``(n, 8)`` bounds on the persons of each hhgq level;
    ``total``: ``(n,)`` exact totals; ``group_index``/``group_total``: ``total_by_group``
    (each unit's group, each group's exact total); ``structural_zeros``: cells that are 0
    in every geounit; ``invariants``: the invariants in force (name → ``(n, …)`` array).
    """

    level: str
    lower: IntArray | None
    upper: IntArray | None
    total: IntArray | None
    group_index: IntArray | None
    group_total: IntArray | None
    structural_zeros: NDArray[np.bool_] | None
    invariants: dict[str, IntArray]


def _available(strategy: Strategy, key: str, k: int) -> set[str]:
    table = strategy.invariants if key == "invariants" else strategy.constraints
    names: set[str] = set()
    for j, lv in enumerate(strategy.levels):
        if j >= k:
            names.update(table.get(lv, ()))
    return names


def _unit_counts(spine: Spine, units: pl.DataFrame | None) -> IntArray:
    n = len(spine.blocks)
    if units is None:
        return np.zeros((n, len(UNIT_COLUMNS)), dtype=np.int64)
    joined = spine.blocks.select("BLOCK").join(units, on="BLOCK", how="left")
    return (
        joined.select(*(pl.col(c).fill_null(0) for c in UNIT_COLUMNS)).to_numpy().astype(np.int64)
    )


def _bounds(inv: dict[str, IntArray], upper: bool) -> IntArray:
    n_t = inv["gqhh_vect"]
    lb_per_type = n_t * HHGQ_LOWER_PER_UNIT
    if "tot" not in inv:
        return n_t * (HHGQ_CAP if upper else HHGQ_LOWER_PER_UNIT)
    tot = inv["tot"][:, None]
    if upper:
        others = lb_per_type.sum(axis=1, keepdims=True) - lb_per_type
        rhs1 = np.where(n_t > 0, tot - others, 0)
        return np.minimum(rhs1, n_t * HHGQ_CAP)
    other_units = inv["gqhh_tot"][:, None] - n_t
    return np.where(other_units > 0, lb_per_type, np.broadcast_to(tot, n_t.shape))


def _invariants(
    strategy: Strategy, spine: Spine, counts: IntArray, totals: Sequence[IntArray]
) -> list[dict[str, IntArray]]:
    h = spine.hierarchy
    per_level = [counts]
    for k in range(len(h.levels) - 1, 0, -1):
        per_level.append(np.asarray(h.aggregate(per_level[-1], k), dtype=np.int64))
    per_level.reverse()
    out: list[dict[str, IntArray]] = []
    for k in range(len(h.levels)):
        names = _available(strategy, "invariants", k)
        inv: dict[str, IntArray] = {}
        if "gqhh_vect" in names:
            inv["gqhh_vect"] = per_level[k]
        if "gqhh_tot" in names:
            inv["gqhh_tot"] = per_level[k].sum(axis=1)
        if "tot" in names:
            inv["tot"] = np.asarray(totals[k], dtype=np.int64)
        out.append(inv)
    return out


def build_constraints(
    strategy: Strategy,
    spine: Spine,
    units: pl.DataFrame | None,
    totals: Sequence[IntArray],
) -> list[LevelConstraints]:
    """The constraints of every level, root first (module docstring).

    ``units``: :func:`privtab.topdown.inputs.block_units` (``None``: no units, every
    unit count 0); ``totals``: the true histogram totals of every level's geounits
    (:meth:`SparseHistograms.totals` of :meth:`SparseHistograms.levels`), used only where
    the strategy names the ``tot`` invariant.
    """
    h = spine.hierarchy
    if h.levels != strategy.levels:
        raise ValueError(
            f"spine levels {list(h.levels)} differ from the strategy's {list(strategy.levels)}"
        )
    needs_units = {"hhgq_total_lb", "hhgq_total_ub", "nurse_nva_0"}
    if strategy.histogram != "persons" and needs_units & _available(strategy, "constraints", 0):
        raise ValueError("hhgq bounds and nurse_nva_0 apply to the persons histogram only")
    invs = _invariants(strategy, spine, _unit_counts(spine, units), totals)
    out: list[LevelConstraints] = []
    below: LevelConstraints | None = None
    for k in range(len(h.levels) - 1, -1, -1):
        below = _level(strategy, spine, k, invs[k], below)
        out.append(below)
    return out[::-1]


_NEEDS = {
    "hhgq_total_lb": ("gqhh_vect", "gqhh_tot"),
    "hhgq_total_ub": ("gqhh_vect", "gqhh_tot"),
    "total": ("tot",),
    "total_by_group": ("tot",),
}


def _combined(
    own: IntArray | None, agg: IntArray | None, stricter: Callable[[IntArray, IntArray], IntArray]
) -> IntArray | None:
    if own is None or agg is None:
        return own if agg is None else agg
    return stricter(own, agg)


def _level(
    strategy: Strategy,
    spine: Spine,
    k: int,
    inv: dict[str, IntArray],
    below: LevelConstraints | None,
) -> LevelConstraints:
    """Level ``k``'s constraints: its children's added up, its own, the stricter kept."""
    h = spine.hierarchy
    lv = h.levels[k]
    here = set(strategy.constraints.get(lv, ()))
    have = _available(strategy, "constraints", k)
    for name in sorted(here):
        lost = [m for m in _NEEDS.get(name, ()) if m not in inv]
        if lost:
            raise ValueError(f"constraint {name} at {lv} needs the invariant(s) {lost}")

    def added(a: IntArray | None) -> IntArray | None:
        return None if a is None else np.asarray(h.aggregate(a, k + 1), dtype=np.int64)

    agg_lo = added(below.lower) if below is not None else None
    agg_up = added(below.upper) if below is not None else None
    agg_tot = added(below.total) if below is not None else None
    lower = upper = total = None
    if "hhgq_total_lb" in have:
        own = _bounds(inv, upper=False) if "hhgq_total_lb" in here else None
        lower = _combined(own, agg_lo, np.maximum)
    if "hhgq_total_ub" in have:
        own = _bounds(inv, upper=True) if "hhgq_total_ub" in here else None
        upper = _combined(own, agg_up, np.minimum)
    if "total" in have:
        total = inv["tot"].copy() if "total" in here else agg_tot
    gi = gt = None
    if "total_by_group" in here:
        gi, names = spine.unit_groups(lv)
        gt = np.zeros(len(names), dtype=np.int64)
        np.add.at(gt, gi, inv["tot"])
    zeros = nurse_minor_cells() if "nurse_nva_0" in have else None
    return LevelConstraints(lv, lower, upper, total, gi, gt, zeros, inv)


def _hhgq_totals(leaves: SparseHistograms, chunk: int = 1 << 22) -> IntArray:
    """Every leaf's persons by hhgq, ``(n_units, 8)`` exact int64, summed ``chunk``
    entries at a time (the nation's 5.7 × 10⁷ block entries never get a key array)."""
    per_type = SHAPE[1] * SHAPE[2] * SHAPE[3]
    flat = np.zeros(leaves.n_units * SHAPE[0], dtype=np.int64)
    for lo in range(0, leaves.unit.size, chunk):
        hi = min(lo + chunk, leaves.unit.size)
        # hhgq leads the cell index: a unit's sorted cells give runs of equal keys
        key = leaves.unit[lo:hi] * SHAPE[0] + leaves.cell[lo:hi] // per_type
        starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
        np.add.at(flat, key[starts], np.add.reduceat(leaves.count[lo:hi], starts))
    return flat.reshape(leaves.n_units, SHAPE[0])


def check_feasible(
    leaves: SparseHistograms,
    constraints: LevelConstraints,
    spine: Spine,
    *,
    source: str = "persons",
) -> None:
    """Refuse data that violate their own block constraints (a group-quarters person in a
    block without a facility of that type, fewer persons of a type than facilities, a
    minor in a nursing facility): an :class:`~privtab.errors.InputError` naming the block,
    the constraint and the numbers. Production only warns here; TopDown's problems would
    then be infeasible."""
    h = spine.hierarchy
    block_ids = (
        spine.blocks.get_column("BLOCK") if "BLOCK" in spine.blocks.columns else h.unit_ids[-1]
    )
    hhgq = _hhgq_totals(leaves)
    checks: list[tuple[str, NDArray[np.bool_], IntArray | None, str]] = []
    if constraints.upper is not None:
        checks.append(("hhgq_total_ub", hhgq > constraints.upper, constraints.upper, "≤"))
    if constraints.lower is not None:
        checks.append(("hhgq_total_lb", hhgq < constraints.lower, constraints.lower, "≥"))
    for name, bad, rhs, sign in checks:
        if bad.any():
            b, t = (int(x) for x in np.argwhere(bad)[0])
            assert rhs is not None
            raise InputError(
                f"{int(bad.any(axis=1).sum())} block(s) break {name}: block {block_ids[b]} has "
                f"{hhgq[b, t]} persons of hhgq {t}, the units there require {sign} {rhs[b, t]}",
                file=source,
                column="QGQTYP",
                value=str(block_ids[b]),
                hint="every group-quarters person needs a facility of that type in the block",
            )
    if constraints.structural_zeros is not None:
        hit = constraints.structural_zeros[leaves.cell] & (leaves.count > 0)
        if hit.any():
            b = int(leaves.unit[np.flatnonzero(hit)[0]])
            raise InputError(
                f"block {block_ids[b]} has persons under 18 in a nursing facility "
                "(nurse_nva_0: QGQTYP 301 and QAGE < 18 cannot occur)",
                file=source,
                column="QAGE",
                value=str(block_ids[b]),
            )
