"""SafeTab-H's guarantee under every analysis, per household and per person.

**Per household** (add or remove one household record — production's ``AddOneRow`` on the
household table). Each query ``q`` draws, for every cell of its keyset, one count with
per-cell parameter ``p_q = b_q/s_q``; a household is in at most ``s_q`` groups of ``q``
(the flat map's stability) and in one cell of each, so its worst case is ``s_q`` draws of
each query's mechanism:

* ``zcdp_*`` (discrete Gaussian): ρ = Σ_q s_q p_q = Σ_q ρ_q (sequential composition;
  SafeTab seed Lemmas 9, 10 for the generalized parallel composition within a query),
  converted by Bun–Steinke (``analytic``), on the paper's α grid and optimally (CKS);
* ``pure`` (geometric): ε = Σ_q ε_q; ``rdp``: Σ_q s_q τ(α, ε_q/s_q) with the exact
  geometric Rényi divergence τ, converted at the optimal order (CKS);
* ``pld``: the privacy-loss distribution of the worst-case household, the composition of
  ``s_q`` copies of each query's per-cell loss (:mod:`privtab.accounting.pld`; a valid
  upper bound — there is one configuration, so it is also tight up to the grid; ``lower``
  is the same composition rounded down).

**Per person, DHC-A and DHC-B together** (:func:`person_guarantee`). Under the neighbouring
relation of SafeTab-P — one person added or removed — a person's record changes at most
one household record: the household they belong to (its type, its tenure is unchanged, or
its householder's race when they were the householder, or the household itself when they
lived alone). So the household data change by at most one *substitution* (or one
addition/removal). A query's exact cells form a vector ``x = Σ_h v_h`` of 0/1 indicator
vectors, each household's ``v_h`` with at most ``s_q`` ones (one per group); substituting
``h`` by ``h'`` changes ``x`` by ``v_{h'} − v_h``, whose entries lie in {−1, 0, 1} (both
are 0/1) with at most ``|v_h| + |v_{h'}| ≤ 2 s_q`` non-zeros: squared L2 norm and L1 norm
at most ``2 s_q`` — twice an addition's. Each cell is a sensitivity-1 Gaussian (geometric)
count, so a substitution costs ``2ρ_q`` (``2ε_q``): the pair of releases satisfies

    ρ_person = ρ_P + 2 ρ_H        (pure DP: ε_P + 2 ε_H)

by adaptive sequential composition (Bun–Steinke 2016 Lemma 2.3: SafeTab-H's queries depend
on SafeTab-P's *noisy* T1 only). Group privacy alone would give ``4ρ_H`` for zCDP (k²ρ,
Bun–Steinke Prop. 27) and ``2ε_H`` for pure DP (Dwork–Roth Thm 2.2); the indicator
structure halves the zCDP factor. The bound is tight: a householder of a two-person
household whose removal changes both the householder's race (to one with disjoint
iterations) and the household type reaches ``2 s_q`` changed cells in every query
(checked by brute force in ``tests/safetab_h/test_person_level.py``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from privtab.accounting import RDP, zcdp_epsilon
from privtab.accounting.conversions import rdp_epsilon_order, zcdp_analyses
from privtab.accounting.curves import geometric_rdp_divergence
from privtab.accounting.exact import ExactGuarantee
from privtab.accounting.guarantees import FloatArray
from privtab.accounting.pld import (
    LossFactor,
    compose_plds,
    discrete_gaussian_loss,
    feasible_grid,
    geometric_loss,
    solve_on_a_fitting_grid,
)
from privtab.safetab_h.queries import HPlan

__all__ = [
    "PERSON_FACTOR",
    "analyse",
    "person_guarantee",
    "person_guarantee_json",
    "plan_grid",
    "plan_pld",
]

PERSON_FACTOR = 2
"""A person changes at most one household record: one substitution, which costs twice an
addition for SafeTab-H's indicator-vector queries (module docstring)."""
GRID_RESOLUTION = 300.0


def _factors(plan: HPlan) -> list[tuple[LossFactor, int]]:
    out: list[tuple[LossFactor, int]] = []
    for q in plan.queries:
        p = q.cell.parameter
        loss = (
            discrete_gaussian_loss(float(1 / (2 * p)))
            if plan.privacy_defn == "zcdp"
            else geometric_loss(float(p))
        )
        out.append((loss, q.stability))
    return out


def plan_grid(plan: HPlan, grid: float = 1e-3) -> float:
    """The PLD's loss grid: ``grid``, refined to 1/300 of the standard deviation of the
    worst-case household's loss where that is smaller, coarsened where a window would not
    fit (as SafeTab-P's, :func:`privtab.tabulate.privacy.plan_grid`)."""
    factors = _factors(plan)
    var = sum(f.variance * n for f, n in factors)
    bound = sum(f.variance_bound * n for f, n in factors)
    h = min(grid, math.sqrt(var) / GRID_RESOLUTION) if var > 0 else grid
    return max(h, feasible_grid(math.sqrt(bound), 1))


def plan_pld(plan: HPlan, *, grid: float | None = None, pessimistic: bool = True) -> Any:
    """The privacy-loss distribution of the worst-case household (``s_q`` copies of each
    query's per-cell loss)."""
    return compose_plds(
        _factors(plan), grid=plan_grid(plan) if grid is None else grid, pessimistic=pessimistic
    )


def _rdp(plan: HPlan) -> RDP:
    parts = [(q.stability, float(q.cell.parameter)) for q in plan.queries]

    def curve(alpha: FloatArray) -> FloatArray:
        total = np.zeros(np.shape(alpha), dtype=np.float64)
        for s, eps in parts:
            total = total + s * geometric_rdp_divergence(alpha, eps, 1)
        return total

    return RDP(curve, "Σ_q s_q τ(α, ε_q/s_q), exact geometric divergence")


def analyse(plan: HPlan, delta: float, *, pld_grid: float = 1e-3) -> dict[str, dict[str, Any]]:
    """Every applicable analysis of ``plan`` (per household) at ``delta``: name →
    {epsilon, delta, …} (module docstring)."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie strictly between 0 and 1, got {delta}")
    out: dict[str, dict[str, Any]] = {}
    total = float(plan.total_budget)
    if plan.privacy_defn == "puredp":
        out["pure"] = {"epsilon": total, "delta": 0.0, "method": "Σ ε_q"}
        eps, alpha = rdp_epsilon_order(_rdp(plan), delta, "optimal")
        out["rdp"] = {"epsilon": eps, "delta": delta, "alpha": alpha,
                      "method": "exact geometric divergence, CKS, optimal α"}  # fmt: skip
    else:
        out.update(zcdp_analyses(total, delta, "ρ = Σρ_q"))

    def solve(h: float) -> tuple[float, float]:
        upper = plan_pld(plan, grid=h).epsilon(delta)
        return upper, plan_pld(plan, grid=h, pessimistic=False).epsilon(delta)

    grid, (upper, lower) = solve_on_a_fitting_grid(solve, plan_grid(plan, pld_grid))
    out["pld"] = {
        "epsilon": upper,
        "delta": delta,
        "grid": grid,
        "lower": lower,
        "method": "privacy-loss distribution of the worst-case household (upper bound)",
    }
    return out


def person_guarantee(household: ExactGuarantee, persons: ExactGuarantee | None) -> ExactGuarantee:
    """The per-person guarantee of releasing DHC-A (``persons``: SafeTab-P's guarantee,
    per person added or removed) and DHC-B (``household``: SafeTab-H's, per household
    added or removed) of one population: ``ρ_P + 2ρ_H`` (pure: ``ε_P + 2ε_H``; a pure and
    a zCDP part compose in zCDP). ``persons=None``: DHC-B's part alone, ``2ρ_H``."""
    part = household.times(PERSON_FACTOR)
    return part if persons is None else persons + part


def person_guarantee_json(
    household: ExactGuarantee, persons: ExactGuarantee | None, source: str, delta: float
) -> dict[str, Any]:
    """``release.json``'s ``person_level``: the guarantee per person of DHC-A and DHC-B
    together (exact, and ε at ``delta`` by the optimal zCDP conversion)."""
    g = person_guarantee(household, persons)
    zc = g.as_zcdp()
    eps = float(zcdp_epsilon(zc.upper(), delta, "optimal"))
    return {
        "guarantee": g.to_json(),
        "household_part": household.times(PERSON_FACTOR).to_json(),
        "persons_part": None if persons is None else persons.to_json(),
        "persons_source": source,
        "epsilon": eps if g.definition == "zcdp" else float(g.upper()),
        "delta": delta if g.definition == "zcdp" else 0.0,
        "relation": "one person added or removed; their household record then changes by "
        "at most one substitution (or addition/removal)",
        "formula": "rho_P + 2 rho_H" if g.definition == "zcdp" else "eps_P + 2 eps_H",
        "why": "each SafeTab-H query's exact cells are a sum of 0/1 vectors with at most s "
        "ones per household: a substitution changes at most 2s cells by one (L2^2, L1 <= "
        "2s), twice an addition; SafeTab-H reads SafeTab-P's noisy T1 only (adaptive "
        "composition). No Census statement exists: privtab derives it "
        "(docs/safetab-h.md, privtab.safetab_h.privacy).",
        "complete": persons is not None,
    }
