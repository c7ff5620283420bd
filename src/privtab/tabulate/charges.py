"""The guarantee of a release, derived from the mechanisms that drew its noise.

Every noisy count of a level is drawn by one of the level's three stage mechanisms
(:class:`~privtab.tabulate.plan.StagePlan`): stage 1, stage 2 (a total or a histogram of
Sex × Age cells — each person is in one cell), or the TotalOnly total. A population group
is tabulated *either* in two stages (stage 1, then stage 2: sequential composition) *or* as
a TotalOnly total, so one group costs at most ``max(c₁ + c₂, c_total)`` over the paths the
level actually used; a person is in at most ``s`` groups of the level (its stability), so
the level costs ``s · max(…)`` (generalized parallel composition by degree, SafeTab seed
Lemmas 9, 10 and Theorems 1, 3). A run is the sequential composition of its levels; a level
whose public domain is empty draws nothing and costs nothing.

:class:`RunLedger` is charged level by level *as the noise is drawn* and refuses a charge
that would exceed the plan's total budget; what ``release.json`` states is its total, in
exact rational arithmetic (:class:`privtab.accounting.ExactGuarantee`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from privtab.accounting.exact import Definition, ExactGuarantee, compose_exact
from privtab.tabulate.plan import LevelPlan, ReleasePlan, StagePlan

__all__ = ["BudgetOverrunError", "RunLedger", "level_charge", "stage_cost"]

STAGES = ("stage1", "stage2", "total")


class BudgetOverrunError(RuntimeError):
    """A level's charge would take the run past its planned budget (a bug: nothing is
    published)."""


def _definition(plan: LevelPlan | ReleasePlan) -> Definition:
    return "zcdp" if plan.privacy_defn == "zcdp" else "pure"


def stage_cost(stage: StagePlan) -> ExactGuarantee:
    """The exact guarantee of one draw of ``stage``'s mechanism (sensitivity 1): ρ of the
    discrete Gaussian or ε of the geometric, read from the mechanism object itself
    (:func:`privtab.mechanisms.counts.mechanism_cost`)."""
    from privtab.mechanisms.counts import mechanism_cost

    return mechanism_cost(stage.mechanism)


def level_charge(plan: LevelPlan, used: Iterable[str]) -> ExactGuarantee:
    """The exact guarantee of a level whose groups drew noise from the stages ``used``
    (see the module docstring); zero if nothing was drawn."""
    stages = set(used)
    unknown = stages - set(STAGES)
    if unknown:
        raise ValueError(f"unknown stages {sorted(unknown)}")
    paths = []
    if stages & {"stage1", "stage2"}:
        paths.append(stage_cost(plan.stage1) + stage_cost(plan.stage2))
    if "total" in stages:
        paths.append(stage_cost(plan.total))
    if not paths:
        return ExactGuarantee.zero(_definition(plan))
    return ExactGuarantee.parallel(paths).times(plan.stability)


@dataclass
class RunLedger:
    """The charges of one run, level by level, against the plan's total budget."""

    plan: ReleasePlan
    charges: dict[str, ExactGuarantee] = field(default_factory=dict)

    @property
    def budget(self) -> ExactGuarantee:
        return ExactGuarantee(_definition(self.plan), self.plan.total_budget)

    @property
    def total(self) -> ExactGuarantee:
        return compose_exact(self.charges.values()) or ExactGuarantee.zero(_definition(self.plan))

    def charge(self, level: LevelPlan, used: Iterable[str]) -> ExactGuarantee:
        """Record the level's charge (once per level); refuse to exceed the budget."""
        if level.key in self.charges:
            raise BudgetOverrunError(f"level {level.key} was charged twice")
        cost = level_charge(level, used)
        if (self.total + cost).value > self.budget.value:
            raise BudgetOverrunError(
                f"level {level.key} would take the run to {self.total + cost} "
                f"over its budget {self.budget}"
            )
        self.charges[level.key] = cost
        return cost
