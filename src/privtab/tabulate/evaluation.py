"""The non-private evaluation: released counts against the exact counts.

A diagnostic for tests and tuning (``--evaluate``): it reads the exact counts, so it is
**not private** and never enters a release — only the confidential run record. Per kind of
count: mean error, RMSE against its model, and the share within the exact 95 % MOE against
its exact coverage, with the binomial standard error of that share.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from privtab.mechanisms.counts import CountError, count_error
from privtab.tabulate.algorithm import NoisyGroups
from privtab.tabulate.plan import LevelPlan

__all__ = ["evaluate_groups", "merge_evaluations"]


def _evaluate(noisy: NDArray[np.int64], true: NDArray[np.int64], err: CountError) -> dict[str, Any]:
    e = (noisy - true).astype(np.float64)
    n = int(e.size)
    if n == 0:
        return {"count": 0}
    return {
        "count": n,
        "mean_error": float(e.mean()),
        "rmse": float(np.sqrt(np.mean(e * e))),
        "expected_rmse": float(np.sqrt(err.variance)),
        "moe95": err.moe95,
        "within_moe95": float(np.mean(np.abs(e) <= err.moe95)),
        "expected_within_moe95": err.coverage,
        "binomial_se": float(np.sqrt(err.coverage * (1 - err.coverage) / n)),
    }


def evaluate_groups(plan: LevelPlan, out: NoisyGroups) -> dict[str, Any]:
    """Every kind of count of a chunk against the truth (before the final clamping)."""
    truth = out.exact
    to, ad = out.total_only, ~out.total_only
    lv0 = out.stat == 0
    ev: dict[str, Any] = {
        "total_only": _evaluate(out.count[to], truth[to], count_error(plan.total.mechanism)),
        "stage1": _evaluate(out.stage1[ad], truth[ad], count_error(plan.stage1.mechanism)),
        "stage2_total": _evaluate(out.count[lv0], truth[lv0], count_error(plan.stage2.mechanism)),
    }
    for table in out.cells:
        g = table.groups
        e_sum = count_error(plan.stage2.mechanism, 2 * table.n_bins)
        ev[f"sum_of_t2_level{table.level}"] = _evaluate(out.count[g], truth[g], e_sum)
    if out.cells:
        noisy = np.concatenate([t.noisy for t in out.cells])
        exact = np.concatenate([t.exact for t in out.cells])
        ev["t2_cells"] = _evaluate(noisy, exact, count_error(plan.stage2.mechanism))
    return ev


def merge_evaluations(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One level's evaluation from its chunks' (counts pooled, rates weighted)."""
    out: dict[str, Any] = {}
    for kind in sorted({k for p in parts for k in p}):
        evs = [p[kind] for p in parts if p.get(kind, {}).get("count", 0) > 0]
        n = sum(e["count"] for e in evs)
        if n == 0:
            out[kind] = {"count": 0}
            continue
        cov = sum(e["expected_within_moe95"] * e["count"] for e in evs) / n
        out[kind] = {
            "count": n,
            "mean_error": sum(e["mean_error"] * e["count"] for e in evs) / n,
            "rmse": float(np.sqrt(sum(e["rmse"] ** 2 * e["count"] for e in evs) / n)),
            "expected_rmse": evs[0]["expected_rmse"],
            "moe95": evs[0]["moe95"],
            "within_moe95": sum(e["within_moe95"] * e["count"] for e in evs) / n,
            "expected_within_moe95": cov,
            "binomial_se": float(np.sqrt(cov * (1 - cov) / n)),
        }
    return out
