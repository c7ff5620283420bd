"""The end-to-end privacy guarantee of a SafeTab-P plan, under every analysis.

For a plan with levels ``i`` (budget b_i, stability s_i, stage-1 fraction γ):

* ``pure`` (geometric noise): ε = Σ ε_i — SafeTab seed Theorem 1 (generalized parallel
  composition, Lemma 9, then sequential composition over levels).
* ``rdp`` (geometric): seed Theorem 2 with the *exact* Rényi divergence of the geometric
  mechanism (:func:`privtab.accounting.curves.geometric_rdp_divergence`):
  ``f(α) = Σ_i s_i · max(τ(α, γε_i/s_i) + τ(α, (1−γ)ε_i/s_i), τ(α, ε_i/s_i))`` (the max
  only where a level has TotalOnly/detailed-only groups), converted to (ε, δ) with the
  Canonne–Kamath–Steinke bound at the optimal order (``rdp``) and on the paper's order
  grid (``rdp_grid``). ``rdp_paper`` is the paper's own method — its Corollary 1 curve,
  which understates the divergence and is not a valid guarantee — kept only to show where
  its Table 2 number comes from.
* ``zcdp_analytic`` / ``zcdp_grid`` / ``zcdp_optimal`` (discrete Gaussian): ρ = Σ ρ_i
  (seed Theorem 3) converted by Bun–Steinke, on the paper's α grid, and optimally (CKS).
* ``pld``: the privacy profile of the worst-case person computed from privacy-loss
  distributions (:mod:`privtab.accounting.pld`): at each level the person is in at most
  s_i population groups, each tabulated *either* in two stages (γ, then 1−γ) *or* as a
  single total (where the level has detailed-only iterations). The composition depends
  only on how many of a level type's groups are two-stage, so :func:`plan_pld` takes the
  exact maximum over those configurations for the types whose single total has the
  coarsest loss lattice and a per-group hull dominating both options for the others
  (:func:`_worst_configurations`). ``pld`` is a valid upper bound (connect-the-dots
  discretisation, every numerical error counted against privacy). The hull is not
  ρ-zCDP (its Rényi divergence can exceed αρ), so where it is composed over many groups
  ``pld`` can lie above the ``zcdp_*`` bounds (docs/accounting.md); its ``lower`` is the
  largest ε of the homogeneous configurations a real person can have (all groups
  two-stage; all totals) with losses rounded down — the exact worst case lies between.
  The loss grid (:func:`plan_grid`) is the requested one, refined to 1/300 of the
  standard deviation of the worst-case person's total loss where that is smaller (tiny
  budgets), and coarsened where a finer one would not fit the PLD's memory bound; the
  grid used is reported.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Any, Literal

import numpy as np

from privtab.accounting import RDP
from privtab.accounting.conversions import (
    RDPMethod,
    rdp_epsilon_order,
    zcdp_analyses,
)
from privtab.accounting.curves import geometric_rdp_divergence, geometric_rdp_paper_value
from privtab.accounting.guarantees import FloatArray
from privtab.accounting.pld import (
    LossFactor,
    PLDProfile,
    compose_plds,
    discrete_gaussian_loss,
    either_of,
    feasible_grid,
    geometric_loss,
    solve_on_a_fitting_grid,
    worst_of,
)
from privtab.tabulate.plan import LevelPlan, ReleasePlan

__all__ = ["analyse", "level_factors", "plan_grid", "plan_pld", "plan_rdp"]


def _tau_exact(alpha: FloatArray, eps: float) -> FloatArray:
    return geometric_rdp_divergence(alpha, eps, 1)


def _level_rdp(lv: LevelPlan, tau: Any) -> Any:
    s = lv.stability
    e1, e2, et = (float(lv.stage1.parameter), float(lv.stage2.parameter), float(lv.total.parameter))

    def f(alpha: FloatArray) -> FloatArray:
        two = tau(alpha, e1) + tau(alpha, e2)
        if lv.has_detailed_only:
            two = np.maximum(two, tau(alpha, et))
        return np.asarray(s * two, dtype=np.float64)

    return f


def plan_rdp(plan: ReleasePlan, *, paper_curve: bool = False) -> RDP:
    """The RDP curve of a geometric plan (seed Theorem 2; exact divergence by default)."""
    if plan.privacy_defn != "puredp":
        raise ValueError("the RDP analysis of SafeTab is for geometric (puredp) plans")
    tau = geometric_rdp_paper_value if paper_curve else _tau_exact
    parts = [_level_rdp(lv, tau) for lv in plan.levels]

    def curve(alpha: FloatArray) -> FloatArray:
        total = np.zeros(np.shape(alpha), dtype=np.float64)
        for p in parts:
            total = total + p(alpha)
        return np.maximum(total, 0.0) if paper_curve else total

    label = "paper's Cor. 1 (understated)" if paper_curve else "exact geometric divergence"
    return RDP(curve, f"SafeTab Theorem 2, {label}")


Option = Literal["worst", "two_stage", "total"]

#: at most this many configurations are enumerated exactly (see :func:`plan_pld`)
MAX_CONFIGURATIONS = 64


def _loss(privacy_defn: str, parameter: Fraction) -> LossFactor:
    if privacy_defn == "zcdp":
        return discrete_gaussian_loss(float(1 / (2 * parameter)))
    return geometric_loss(float(parameter))


def _stage_losses(lv: LevelPlan) -> tuple[list[tuple[LossFactor, int]], LossFactor]:
    """A group's two-stage factors (stage 1, stage 2) and its single-total factor."""
    two = [
        (_loss(lv.privacy_defn, lv.stage1.parameter), 1),
        (_loss(lv.privacy_defn, lv.stage2.parameter), 1),
    ]
    return two, _loss(lv.privacy_defn, lv.total.parameter)


@lru_cache(maxsize=64)
def _hull(privacy_defn: str, p1: Fraction, p2: Fraction, pt: Fraction, grid: float) -> LossFactor:
    two = [(_loss(privacy_defn, p1), 1), (_loss(privacy_defn, p2), 1)]
    return either_of([two, [(_loss(privacy_defn, pt), 1)]], grid=grid)


def level_factors(
    lv: LevelPlan, grid: float, option: Option = "worst"
) -> list[tuple[LossFactor, int]]:
    """PLD factors of one level's worst-case person (``stability`` groups).

    ``worst``: each group is two-stage or, where the level has detailed-only iterations,
    either two-stage or a single total (:func:`privtab.accounting.pld.either_of`, one
    factor dominating both per group); ``two_stage`` / ``total``: every group tabulated
    that one way (a configuration a real person can have, so its ε is a lower bound on
    the worst case).
    """
    s = lv.stability
    two, one = _stage_losses(lv)
    if option == "total" and lv.has_detailed_only:
        return [(one, s)]
    if option in ("two_stage", "total") or not lv.has_detailed_only:
        return [(f, s) for f, _ in two]
    key = (lv.stage1.parameter, lv.stage2.parameter, lv.total.parameter)
    return [(_hull(lv.privacy_defn, *key, grid), s)]


def _worst_configurations(plan: ReleasePlan, grid: float) -> list[list[tuple[LossFactor, int]]]:
    """The compositions a real worst-case person can have, for :func:`plan_pld`.

    Levels with detailed-only iterations ("types": equal parameters, groups pooled) let a
    person's group be two-stage or a single total. The composition depends only on how
    many of a type's ``n`` groups are two-stage, so a type has ``n + 1`` configurations;
    their exact maximum is taken for the types whose single-total noise has the coarsest
    loss lattice (spacing 2ρ resp. 2ε: the per-group hull of :func:`either_of` is loosest
    there — +0.19 in ε for the 2020 plan's (USA/STATE, 2) levels, against 10⁻⁶ for its
    level-1 ones) while the product stays within :data:`MAX_CONFIGURATIONS`; the other
    types use the per-group hull. Either way the result is a valid upper bound.
    """
    fixed: list[tuple[LossFactor, int]] = []
    types: dict[tuple[Fraction, Fraction, Fraction], tuple[LevelPlan, int]] = {}
    for lv in plan.levels:
        if not lv.has_detailed_only:
            fixed += level_factors(lv, grid, "two_stage")
            continue
        key = (lv.stage1.parameter, lv.stage2.parameter, lv.total.parameter)
        first, n = types.get(key, (lv, 0))
        types[key] = (first, n + lv.stability)
    order = sorted(types.values(), key=lambda t: -float(t[0].total.parameter))
    enumerated: list[tuple[LevelPlan, int]] = []
    size = 1
    for lv, n in order:
        spacing = 2.0 * float(lv.total.parameter)
        if spacing > 10.0 * grid and size * (n + 1) <= MAX_CONFIGURATIONS:
            enumerated.append((lv, n))
            size *= n + 1
        else:
            fixed += [(f, n) for f, _ in level_factors(lv, grid, "worst")]
    configs: list[list[tuple[LossFactor, int]]] = [fixed]
    for lv, n in enumerated:
        two, one = _stage_losses(lv)
        configs = [
            c + [(f, k) for f, _ in two if k] + ([(one, n - k)] if n - k else [])
            for c in configs
            for k in range(n + 1)
        ]
    return configs


#: the PLD grid is at most this fraction of the standard deviation of the total loss
GRID_RESOLUTION = 300.0


def plan_grid(plan: ReleasePlan, grid: float = 1e-3) -> float:
    """The loss grid of the plan's PLD: ``grid``, refined to 1/:data:`GRID_RESOLUTION` of
    the standard deviation of the worst-case person's total loss where that is smaller
    (at a budget of 1e-12 the loss is ~10⁻⁶: a grid of 10⁻³ would report ε ≈ 0.1 against
    the true ~10⁻⁵), and coarsened where every convolution window would not fit the PLD's
    memory bound (:func:`privtab.accounting.pld.feasible_grid`; the tilted variance of a
    group with two options is taken as the larger of theirs). Connect-the-dots is valid at
    any grid: the choice trades tightness (second order in the grid) for time.

    The configurations are counted on a grid no finer than the windows allow for one
    configuration (the result is never finer than that): the standard deviation can be
    far below the losses themselves — a geometric level with a per-count ε of 200 has a
    loss variance of ~10⁻⁸⁰ (all but e^{−200} of the mass at +ε), whose 1/300 is a grid on
    which no factor can be put (indices beyond 2⁵², :class:`GridTooFineError`)."""
    var = var_bound = 0.0
    for lv in plan.levels:
        two, one = _stage_losses(lv)
        v = sum(f.variance for f, _ in two)
        b = sum(f.variance_bound for f, _ in two)
        if lv.has_detailed_only:
            v, b = max(v, one.variance), max(b, one.variance_bound)
        var += lv.stability * v
        var_bound += lv.stability * b
    h = min(grid, math.sqrt(var) / GRID_RESOLUTION) if var > 0 else grid
    h = max(h, feasible_grid(math.sqrt(var_bound), 1))
    configurations = len(_worst_configurations(plan, h))
    return max(h, feasible_grid(math.sqrt(var_bound), configurations))


def plan_pld(
    plan: ReleasePlan,
    *,
    grid: float | None = None,
    pessimistic: bool = True,
    option: Option = "worst",
) -> PLDProfile:
    """The privacy-loss distribution of the worst-case person (see module doc), on
    ``grid`` (default :func:`plan_grid`)."""
    if grid is None:
        grid = plan_grid(plan)
    if option == "worst":
        return worst_of(_worst_configurations(plan, grid), grid=grid, pessimistic=pessimistic)
    factors = [f for lv in plan.levels for f in level_factors(lv, grid, option)]
    return compose_plds(factors, grid=grid, pessimistic=pessimistic)


def _pld_bounds(plan: ReleasePlan, delta: float, grid: float) -> tuple[float, float, float]:
    """``(grid, upper, lower)``: the worst-case person's ε(δ) and a lower bound (the worst
    of the configurations real persons can have, rounded down). A grid whose windows turn
    out not to fit is coarsened (each time at least twofold) and the solve repeated."""
    options: tuple[Option, ...] = (
        ("two_stage", "total")
        if any(lv.has_detailed_only for lv in plan.levels)
        else ("two_stage",)
    )

    def solve(h: float) -> tuple[float, float]:
        upper = plan_pld(plan, grid=h).epsilon(delta)
        lower = max(
            plan_pld(plan, grid=h, pessimistic=False, option=o).epsilon(delta) for o in options
        )
        return upper, lower

    grid, (upper, lower) = solve_on_a_fitting_grid(solve, grid)
    return grid, upper, lower


def _rdp_entry(
    curve: RDP, delta: float, orders: RDPMethod, method: str, *, valid: bool | None = None
) -> dict[str, Any]:
    """One RDP analysis of ``curve`` at ``delta``: ε, the order α it is reached at, and
    (for the paper's curve) ``valid: False``."""
    eps, alpha = rdp_epsilon_order(curve, delta, orders)
    entry: dict[str, Any] = {"epsilon": eps, "delta": delta, "alpha": alpha}
    if valid is not None:
        entry["valid"] = valid
    entry["method"] = method
    return entry


def analyse(
    plan: ReleasePlan, delta: float, *, pld_grid: float = 1e-3
) -> dict[str, dict[str, Any]]:
    """Every applicable analysis of ``plan`` at ``delta``: name → {epsilon, delta, ...}.

    The PLD analysis runs on :func:`plan_grid` of ``pld_grid`` (the grid used is its
    ``grid``)."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie strictly between 0 and 1, got {delta}")
    out: dict[str, dict[str, Any]] = {}
    total = float(plan.total_budget)
    if plan.privacy_defn == "puredp":
        out["pure"] = {"epsilon": total, "delta": 0.0, "method": "Σ ε_i (seed Thm 1)"}
        exact = plan_rdp(plan)
        out["rdp"] = _rdp_entry(
            exact, delta, "optimal", "Thm 2 with the exact geometric divergence, CKS, optimal α"
        )
        out["rdp_grid"] = _rdp_entry(
            exact, delta, "grid", "Thm 2 exact divergence, α ∈ {1.01, …, 10}"
        )
        out["rdp_paper"] = _rdp_entry(
            plan_rdp(plan, paper_curve=True),
            delta,
            "grid",
            "paper's Cor. 1 curve on its α grid (understates; invalid)",
            valid=False,
        )
    else:
        out.update(zcdp_analyses(total, delta, "ρ = Σρ_i"))
    grid, upper, lower = _pld_bounds(plan, delta, plan_grid(plan, pld_grid))
    out["pld"] = {
        "epsilon": upper,
        "delta": delta,
        "grid": grid,
        "lower": lower,
        "method": "privacy-loss distribution of the worst-case person (upper bound)",
    }
    for v in out.values():
        if isinstance(v.get("epsilon"), float) and math.isinf(v["epsilon"]):
            v["epsilon"] = math.inf
    return out
