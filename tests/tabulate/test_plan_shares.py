"""Every level of a plan spends exactly its budget: the stage shares, checked exactly.

By the generalized parallel composition (SafeTab seed Lemmas 9, 10, 12) a level with
budget b and stability s is b-private when each population group spends b/s: stage 1
γ·b/s and stage 2 (1 − γ)·b/s in sequence, or the TotalOnly count b/s. These tests
recompute the shares from the plan's inputs in exact rationals; a plan that changes a
share (e.g. stage 1 at 2γ·b/s) overspends and fails (mutant ``stage1-share``).
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from privtab.data import Scope, read_config, read_reference
from privtab.data.resources import production_config_path
from privtab.tabulate import LevelPlan, ReleasePlan


def _random_levels(seed: int, n: int) -> list[tuple[str, Fraction, Fraction, int]]:
    rng = random.Random(seed)
    return [
        (
            rng.choice(["zcdp", "puredp"]),
            Fraction(rng.randint(1, 40), 10),  # decimal budgets 0.1 … 4.0
            Fraction(rng.randint(1, 9), 10),  # γ 0.1 … 0.9
            rng.randint(1, 12),
        )
        for _ in range(n)
    ]


@pytest.mark.parametrize(("defn", "budget", "gamma", "stability"), _random_levels(15, 40))
def test_level_shares_are_exact(
    defn: str, budget: Fraction, gamma: Fraction, stability: int
) -> None:
    lv = LevelPlan.build(
        geo="STATE",
        iteration_level=1,
        privacy_defn=defn,  # type: ignore[arg-type]
        budget=budget,
        gamma=gamma,
        thresholds=(1, 2, 3),
        stability=stability,
    )
    per_group = budget / stability
    assert lv.stage1.parameter == gamma * per_group
    assert lv.stage2.parameter == (1 - gamma) * per_group
    assert lv.total.parameter == per_group
    # what one person can cost: s groups × (stage 1 + stage 2), or s TotalOnly counts
    assert stability * (lv.stage1.parameter + lv.stage2.parameter) == budget
    assert stability * lv.total.parameter == budget


def test_production_plan_shares_are_exact() -> None:
    path = production_config_path()
    cfg, ref = read_config(path), read_reference(path.parent)
    for scope in cfg.scopes:
        plan = ReleasePlan.from_config(cfg, ref, scope)
        assert plan.levels
        for lv in plan.levels:
            geo = next(
                g for g, i in cfg.levels(scope) if g.value == lv.geo and i == lv.iteration_level
            )
            assert lv.budget == cfg.budget(geo, lv.iteration_level)
            g = cfg.stage_1_fraction
            assert lv.stage1.parameter * lv.stability == g * lv.budget
            assert lv.stage2.parameter * lv.stability == (1 - g) * lv.budget
            assert lv.total.parameter * lv.stability == lv.budget
        assert plan.total_budget == sum(cfg.budget(g, i) for g, i in cfg.levels(scope))
    assert Scope.US in cfg.scopes
