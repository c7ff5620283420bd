"""The SafeTab-P engine: release plans, privacy analyses, the algorithm and releases.

- :class:`ReleasePlan` / :class:`LevelPlan` — budgets, noise and exact MOE per level;
- :func:`analyse` — the end-to-end guarantee under every analysis (pure, RDP, zCDP, PLD);
- :func:`aggregate_persons` — validated one-pass aggregation of the person file;
- :func:`tabulate_level` — SafeTab seed Algorithms 1–3 for one level;
- :func:`run_release` — a whole release written atomically (T1/T2, release.json, report).

See ``docs/safetab.md``.
"""

from privtab.tabulate.aggregate import Cells, aggregate_persons, cells_from_frame
from privtab.tabulate.engine import T1_SCHEMA, T2_SCHEMA, LevelResult, tabulate_level
from privtab.tabulate.plan import LevelPlan, ReleasePlan, StagePlan
from privtab.tabulate.privacy import analyse, level_factors, plan_pld, plan_rdp
from privtab.tabulate.run import RunOptions, RunResult, run_release

__all__ = [
    "T1_SCHEMA",
    "T2_SCHEMA",
    "Cells",
    "LevelPlan",
    "LevelResult",
    "ReleasePlan",
    "RunOptions",
    "RunResult",
    "StagePlan",
    "aggregate_persons",
    "analyse",
    "cells_from_frame",
    "level_factors",
    "plan_pld",
    "plan_rdp",
    "run_release",
    "tabulate_level",
]
