"""SafeTab-H's accuracy, exactly, from the plan: levels are deterministic given T1.

SafeTab-P picks a group's statistic level from a *noisy* stage-1 count, so P(level | true
size) is a probability (``privtab safetab accuracy``). SafeTab-H picks it from the
*published* T1 count ``c``: the T3 level is the number of thresholds at or below ``c``,
the T4 level 1 exactly when ``c ≥ θ`` — **deterministic given T1**: P(level | c) is 1 for
one level and 0 for the others, and it costs no budget. (Given the group's *true* number of
persons it is random only through SafeTab-P's noise, which is SafeTab-P's business.)

:func:`accuracy` gives, per query and T1 count, the table published, its rows and the
exact 95 % MOE of every published cell (a cell that sums ``k`` noisy cells: the ``k``-fold
convolution of the cell noise, variance ``k σ²``); with a T1 (``groups``), how many of the
query's groups get each table. All public: plan, config, T1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from privtab.safetab_h.domain import RunGroups
from privtab.safetab_h.queries import HPlan

__all__ = ["DEFAULT_COUNTS", "accuracy"]

DEFAULT_COUNTS = (-10, 0, 10, 100, 500, 1000, 5000, 10000, 20000, 50000, 150000, 10**6)


def accuracy(
    plans: dict[str, HPlan],
    counts: Sequence[int] = DEFAULT_COUNTS,
    groups: dict[str, RunGroups] | None = None,
) -> dict[str, Any]:
    """Per run and query: for each T1 count the table (P = 1) and its cells' exact MOE;
    with ``groups``, the query's groups per table."""
    runs: dict[str, Any] = {}
    for scope, plan in plans.items():
        queries = []
        for q in plan.queries:
            d = q.design
            level = d.stat_level(np.asarray(counts, dtype=np.int64), q.thresholds)
            moes = q.cell_moes()
            rows = [
                {
                    "t1_count": int(c),
                    "table": d.table(int(k)),
                    "p_table": {d.table(j): float(j == k) for j in range(d.levels)},
                    "rows": len(d.published(int(k))),
                    "moe95": moes[d.table(int(k))],
                }
                for c, k in zip(counts, level, strict=True)
            ]
            entry: dict[str, Any] = {
                "query": q.key,
                "thresholds": list(q.thresholds),
                "cell_variance": q.cell.variance,
                "rows": rows,
            }
            if groups is not None:
                from privtab.data import GeoLevel

                lg = groups[scope].levels[(GeoLevel(q.geo), q.iteration_level)]
                got = d.stat_level(lg.t1_count, q.thresholds)
                entry["groups_per_table"] = {
                    d.table(k): int(np.count_nonzero(got == k)) for k in range(d.levels)
                }
            queries.append(entry)
        runs[scope] = {"queries": queries}
    return {
        "deterministic": True,
        "note": "the statistic level is a function of the published T1 count: P(table | T1 "
        "count) is 1 for one table and 0 for the others; no budget is spent on it",
        "runs": runs,
        "private": True,
    }
