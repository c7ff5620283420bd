"""What ``privtab safetab plan|run`` and ``privtab demo`` report, as JSON and as tables.

:func:`plan_summary` describes a release plan (each level's budget, noise, exact MOE and
the end-to-end guarantee by every analysis) — public facts about the plan, no data;
:func:`release_summary` a finished run: what ``release.json`` says, plus the run's
timings, and — only when the operator asked for ``evaluate`` — the NON-PRIVATE error
against the true counts (never written into the release). ``*_tables`` give their
human form.
"""

from __future__ import annotations

import logging
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privtab.accounting.exact import exact_or_up
from privtab.report import round_up_sig
from privtab.report.text import Table, table

if TYPE_CHECKING:
    from privtab.tabulate.run import RunResult

__all__ = ["plan_summary", "plan_tables", "release_summary", "release_tables"]

LOG = logging.getLogger("privtab.tabulate")


def plan_summary(
    config: str | Path | None, scope: str = "US", delta: float = 1e-10, pld_grid: float = 1e-3
) -> dict[str, Any]:
    """The plan of one run (``US``/``PR``) of a config (default: 2020 production) with its
    guarantee at ``delta`` by every analysis. Raises a ``UsageError`` for a run the config
    does not make, an input error for a bad config."""
    from privtab.data import read_config, read_reference
    from privtab.data.inputs import resolve_config_path
    from privtab.tabulate.plan import ReleasePlan, config_scope
    from privtab.tabulate.privacy import analyse

    path = resolve_config_path(config)
    cfg = read_config(path)
    ref = read_reference(path.parent)
    sc = config_scope(cfg, scope)
    plan = ReleasePlan.from_config(cfg, ref, sc)
    LOG.info("analysing the %s plan's privacy loss (every analysis; the PLD takes longest)", sc)
    analyses = analyse(plan, delta, pld_grid=pld_grid)
    return {
        "source": plan.source,
        "scope": sc.value,
        "privacy_defn": plan.privacy_defn,
        "total_budget": float(plan.total_budget),
        "total_budget_exact": str(plan.total_budget),
        "levels": [lv.to_dict() for lv in plan.levels],
        "epsilon": {k: v["epsilon"] for k, v in analyses.items()},
        "analyses": analyses,
        "delta": delta,
    }


def _exact(d: dict[str, Any], key: str) -> str:
    """A budget of a plan or level dict: from its ``<key>_exact`` string, exactly when
    short, else rounded up (:func:`privtab.accounting.exact.exact_or_up`)."""
    exact = d.get(f"{key}_exact")
    if isinstance(exact, str):
        return exact_or_up(Fraction(exact))
    return round_up_sig(float(d[key]))


def _guarantee(g: dict[str, Any]) -> str:
    """``ρ = 4.785 zCDP`` from a release's ``guarantee`` object (exact, or rounded up)."""
    if "zcdp" in g:
        return f"ρ = {_exact(g['zcdp'], 'rho')} zCDP"
    return f"ε = {_exact(g['pure'], 'epsilon')} pure DP"


def _eps(v: float) -> str:
    """An ε bound in a table: rounded up to 6 significant digits."""
    return round_up_sig(float(v), 6)


def _total_only_moe(lv: dict[str, Any]) -> str:
    """A level's TotalOnly MOE, or ``—`` when the level has no TotalOnly group."""
    from privtab.tabulate.suppression import has_total_only_groups

    if "stat_levels" in lv:
        has = bool(lv["stat_levels"].get("-1", 0))
    else:
        has = has_total_only_groups(lv.get("geo", ""), lv.get("has_detailed_only", True))
    moe = lv["moe95"]["total_only"] if "moe95" in lv else lv["total"]["moe95"]
    return str(moe) if has else "—"


def _epsilon_table(epsilon: dict[str, Any], delta: float) -> Table:
    rows = [(k, _eps(v)) for k, v in epsilon.items()]
    return table(f"end-to-end ε at δ = {delta:g} (rounded up)", ("analysis", "ε"), rows)


def plan_tables(res: dict[str, Any], paper: bool = False) -> list[Table]:
    """The human form of :func:`plan_summary` (or of the paper model, ``paper``)."""
    cols: tuple[str, ...]
    rows: list[tuple[str, ...]]
    if paper:
        cols = ("MOE", "geo ε step 2", "geo ε total", "exact MOE", "DG ρ step 2", "DG ρ total",
                "exact MOE")  # fmt: skip
        rows = [
            (f"{lv['moe']:g}", round_up_sig(lv["geometric_eps_step2"], 4),
             round_up_sig(lv["geometric_eps_total"], 4), str(lv["geometric_moe_exact"]),
             round_up_sig(lv["dgauss_rho_step2"], 4), round_up_sig(lv["dgauss_rho_total"], 4),
             str(lv["dgauss_moe_exact"]))
            for lv in res["levels"]
        ]  # fmt: skip
        title = f"SafeTab paper model ({res['calibration']} calibration)"
        first = table(title, cols, rows, left=0)
    else:
        cols = ("level", "budget", "Δ", "thresholds", "MOE st.1", "MOE st.2", "MOE total",
                "σ²/scale")  # fmt: skip
        rows = [
            (lv["level"], _exact(lv, "budget"), str(lv["stability"]),
             ", ".join(str(x) for x in lv["thresholds"]), str(lv["stage1"]["moe95"]),
             str(lv["stage2"]["moe95"]), _total_only_moe(lv),
             f"{lv['stage2']['noise_scale']:.4g}")
            for lv in res["levels"]
        ]  # fmt: skip
        title = f"{res['source']}: total {res['privacy_defn']} budget {_exact(res, 'total_budget')}"
        notes = (
            "Δ: stability (the most groups of the level one person is in); MOE st.1 / st.2: "
            "exact 95% margin of error of a stage-1 total / a stage-2 count; MOE total: of a "
            "TotalOnly total (—: the level has none); σ²/scale: of the stage-2 noise.",
        )
        first = table(title, cols, rows, notes=notes)
    return [first, _epsilon_table(res["epsilon"], res["delta"])]


def _scoped(res: RunResult) -> list[tuple[str, Any]]:
    pairs = []
    it = iter(res.levels)
    for scope, run in res.release["runs"].items():
        for d in run["levels"]:
            if d["status"] == "tabulated":
                pairs.append((scope, next(it)))
    return pairs


def release_summary(res: RunResult) -> dict[str, Any]:
    """The JSON summary of a run: outputs, guarantee, levels (and the evaluation if any)."""
    rel = res.release
    levels = [{"scope": s, **d} for s, run in rel["runs"].items() for d in run["levels"]]
    out: dict[str, Any] = {
        "out": str(res.out),
        "private": rel["private"],
        "run_record": str(res.record_path) if res.record_path else None,
        "t1_rows": rel["outputs"]["t1_rows"],
        "t2_rows": rel["outputs"]["t2_rows"],
        "guarantee": rel["guarantee"],
        "epsilon": {
            scope: {k: v["epsilon"] for k, v in run["privacy"].items()}
            for scope, run in rel["runs"].items()
            if run["privacy"]
        },
        "delta": next(r["privacy"]["pld"]["delta"] for r in rel["runs"].values() if r["privacy"]),
        "levels": levels,
    }  # no timings: they depend on the data (confidential, in the run record only)
    if any(lv.evaluation for lv in res.levels):
        out["evaluation_nonprivate"] = {
            f"{scope} {lv.plan.key}": lv.evaluation for scope, lv in _scoped(res)
        }
    return out


def _level_row(lv: dict[str, Any]) -> tuple[str, ...]:
    if lv["status"] != "tabulated":
        return (lv["scope"], lv["level"], _exact(lv, "budget"), lv["status"], "", "", "")
    return (
        lv["scope"], lv["level"], _exact(lv, "budget"),
        f"{lv['regions']:,} × {lv['iterations']:,}", f"{lv['noise_draws']:,}",
        str(lv["moe95"]["stage2_cell"]), _total_only_moe(lv),
    )  # fmt: skip


STAT_KEYS = ("-1", "0", "1", "2", "3")
STAT_NAMES = ("total-only", "total", "Age4", "Age9", "Age23")


def _stat_table(levels: list[dict[str, Any]]) -> Table:
    rows = [
        (lv["scope"], lv["level"], *(f"{lv['stat_levels'].get(k, 0):,}" for k in STAT_KEYS))
        for lv in levels
        if lv["status"] == "tabulated"
    ]
    return table(
        "statistics each level's groups received (groups)",
        ("run", "level", *STAT_NAMES),
        rows,
        left=2,
    )


def _pooled(ev: dict[str, Any], kinds: tuple[str, ...]) -> str:
    n = sum(ev.get(k, {}).get("count", 0) for k in kinds)
    if n == 0:
        return "—"
    had = [k for k in kinds if ev.get(k, {}).get("count")]
    got = sum(ev[k]["within_moe95"] * ev[k]["count"] for k in had)
    exp = sum(ev[k]["expected_within_moe95"] * ev[k]["count"] for k in had)
    return f"{got / n:.3f} ({exp / n:.3f}) of {n:,}"


T1_KINDS = ("total_only", "stage2_total", "sum_of_t2_level1", "sum_of_t2_level2",
            "sum_of_t2_level3")  # fmt: skip


def _evaluation_table(evaluation: dict[str, Any]) -> Table:
    rows = []
    for name, ev in evaluation.items():
        st1 = ev.get("stage1", {})
        rmse = f"{st1['rmse']:.2f} ({st1['expected_rmse']:.2f})" if st1.get("count") else "—"
        rows.append((name, rmse, _pooled(ev, T1_KINDS), _pooled(ev, ("t2_cells",))))
    return table(
        "NON-PRIVATE evaluation against the true counts (diagnostic only)",
        ("level", "stage-1 RMSE (model)", "T1 within MOE95 (model)",
         "T2 cells within MOE95 (model)"),
        rows,
    )  # fmt: skip


def release_tables(s: dict[str, Any]) -> tuple[list[str], list[Table]]:
    """The human form of :func:`release_summary`: headline lines, then tables."""
    tag = "private" if s["private"] else "NOT PRIVATE (test mode)"
    head = [f"release written to {s['out']} ({tag}): {s['t1_rows']:,} T1 rows, "
            f"{s['t2_rows']:,} T2 rows; {_guarantee(s['guarantee'])}"]  # fmt: skip
    if s.get("run_record"):
        head.append(f"confidential run record (do not publish): {s['run_record']}")
    cols = ("run", "level", "budget", "groups", "noisy counts", "MOE cell",
            "MOE total-only")  # fmt: skip
    notes = ("groups: regions × iterations; MOE: exact 95% margin of error of a stage-2 count "
             "and of a TotalOnly total (—: the level has none).",)  # fmt: skip
    tables = [
        table("levels", cols, [_level_row(lv) for lv in s["levels"]], left=2, notes=notes),
        _stat_table(s["levels"]),
    ]
    rows = [(scope, k, _eps(v)) for scope, eps in s["epsilon"].items() for k, v in eps.items()]
    tables.append(table(f"guarantee: ε at δ = {s['delta']:g} (rounded up)",
                        ("run", "analysis", "ε"), rows, left=2))  # fmt: skip
    if "evaluation_nonprivate" in s:
        tables.append(_evaluation_table(s["evaluation_nonprivate"]))
    return head, tables
