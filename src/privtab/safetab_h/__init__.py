"""SafeTab-H: the 2020 Census Detailed DHC-B tables (households by race/ethnicity group).

Detailed DHC-B publishes, for every population group of SafeTab-P's Detailed DHC-A (a
geography × a detailed race or ethnicity group that SafeTab-P's T1 published), the
households whose householder is in the group by **household type** (T3: family or not,
married couple, other family by sex of householder, living alone or not) and by
**tenure** (T4: owned with a mortgage, owned free and clear, rented). The detail a group
gets — its *statistic level* — is chosen from its published T1 count, so no budget is
spent on it; every noisy cell gets independent discrete Gaussian (zCDP) or geometric (pure
DP) noise; the other cells are sums of noisy cells. privtab reproduces the 2020 production
code (``uscensusbureau/DAS_2020_DDHCB_Production_Code``) exactly, on SafeTab-P's engine
(:mod:`privtab.tabulate`) and publishing floors (:mod:`privtab.publish`).

- :func:`run_release` → :class:`HRunResult` — a whole release (``privtab safetab-h run``);
- :func:`plan` → :class:`HPlan` — the queries, budgets, noise and MOE of a config;
- :func:`person_guarantee` — the per-person guarantee of DHC-A and DHC-B together.

Inside (one job per module): ``config`` (config.json), ``inputs`` (all inputs validated
together), ``domain`` (T1 → groups per level), ``tables`` (T3/T4 cells, trees, levels),
``plan``, ``algorithm`` (noise, clamping, marginals), ``engine`` (polars) and ``spark``,
``run``, ``validation`` (output rules), ``privacy`` (analyses, person level), ``accuracy``,
``report``. See ``docs/safetab-h.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privtab._lazy import lazy_exports

if TYPE_CHECKING:
    from privtab.safetab_h.planning import plan
    from privtab.safetab_h.privacy import person_guarantee
    from privtab.safetab_h.queries import HPlan
    from privtab.safetab_h.run import HRunResult, run_release

__all__ = ["HPlan", "HRunResult", "person_guarantee", "plan", "run_release"]

_WHERE = {
    "HPlan": "queries",
    "HRunResult": "run",
    "person_guarantee": "privacy",
    "plan": "planning",
    "run_release": "run",
}

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
