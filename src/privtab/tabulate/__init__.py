"""The SafeTab-P engine: release plans, privacy analyses and (issue 4) the algorithm.

See ``docs/safetab.md``.
"""

from privtab.tabulate.plan import LevelPlan, ReleasePlan, StagePlan
from privtab.tabulate.privacy import analyse, level_factors, plan_pld, plan_rdp

__all__ = [
    "LevelPlan",
    "ReleasePlan",
    "StagePlan",
    "analyse",
    "level_factors",
    "plan_pld",
    "plan_rdp",
]
