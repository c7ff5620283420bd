"""``report.html`` of a SafeTab-P release: per-level tables and three figures.

Figures: the exact 95 % margin of error of every kind of count per level; the distribution
of statistic levels chosen by stage 1 per level; the privacy-loss curve ε(δ) of the run with
the largest budget (worst-case person's privacy-loss distribution, and the zCDP / pure
bound). Everything shown is computed from the noisy output and the public plan — the
report is part of the release and has no privacy cost.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from privtab.report import FigureBlock, new_figure, page, png, table_html, write_html
from privtab.tabulate.plan import ReleasePlan
from privtab.tabulate.results import LevelSummary

__all__ = ["write_report"]

_STAT_NAMES = {
    "-1": "total only (TotalOnly)",
    "0": "total",
    "1": "Sex×Age4",
    "2": "Sex×Age9",
    "3": "Sex×Age23",
}


def _moe_figure(levels: Sequence[dict[str, Any]]) -> FigureBlock:
    fig, ax = new_figure(8.0, 4.2)
    names = [f"{d['scope']} {d['level']}" for d in levels]
    x = np.arange(len(names))
    for off, key, label in (
        (-0.25, "stage1", "stage-1 total"),
        (0.0, "stage2_cell", "stage-2 total / cell"),
        (0.25, "total_only", "TotalOnly total"),
    ):
        ax.bar(x + off, [d["moe95"][key] for d in levels], width=0.25, label=label)
    ax.set_xticks(x, names, rotation=60, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("exact 95% margin of error (persons)")
    ax.legend(fontsize=8)
    text = (
        "How precise each kind of count is: the margin of error is the smallest number m such "
        "that the published count lies within m of the truth with probability at least 95%, "
        "computed exactly from the noise distribution. Sums of Sex × Age cells (the totals of "
        "large groups) have the MOE of the sum, listed per row in T1."
    )
    return FigureBlock("fig-moe", "Margin of error by level", png(fig), text)


def _stat_figure(levels: Sequence[dict[str, Any]]) -> FigureBlock:
    fig, ax = new_figure(8.0, 4.2)
    names = [f"{d['scope']} {d['level']}" for d in levels]
    x = np.arange(len(names))
    bottom = np.zeros(len(names))
    for key, label in _STAT_NAMES.items():
        vals = np.array([d["stat_levels"].get(key, 0) for d in levels], dtype=float)
        groups = np.array([max(d["groups"], 1) for d in levels], dtype=float)
        share = vals / groups
        ax.bar(x, share, bottom=bottom, label=label)
        bottom += share
    ax.set_xticks(x, names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("share of population groups")
    ax.legend(fontsize=8)
    text = (
        "Which statistics each population group received. Stage 1 releases a noisy total; "
        "groups whose noisy total passes the level's thresholds get Sex × Age tables with "
        "more age detail, the rest a second total. Empty groups are tabulated too (the domain "
        "is public), which is why most groups of detailed levels receive a total only."
    )
    return FigureBlock("fig-stat-levels", "Statistic levels chosen", png(fig), text)


def _privacy_figure(plan: ReleasePlan) -> FigureBlock:
    from privtab.accounting import zcdp_epsilon
    from privtab.tabulate.privacy import plan_pld

    pld = plan_pld(plan)
    # ε(δ) from the tilted PLD: full relative accuracy however small δ is
    deltas = np.geomspace(1e-15, 1e-2, 27)
    fig, ax = new_figure(7.0, 4.2)
    ax.plot(
        deltas, pld.epsilon_curve(deltas), label="privacy-loss distribution (worst-case person)"
    )
    total = float(plan.total_budget)
    if plan.privacy_defn == "zcdp":
        ax.plot(
            deltas,
            [float(zcdp_epsilon(total, float(d), "optimal")) for d in deltas],
            "--",
            label=f"zCDP ρ = {total:.4g}, optimal conversion",
        )
    else:
        ax.axhline(total, linestyle="--", color="k", label=f"pure ε = {total:.4g}")
    ax.set_xscale("log")
    ax.set_xlabel("δ")
    ax.set_ylabel("ε")
    ax.legend(fontsize=8)
    text = (
        "The release's privacy guarantee as a curve: for every δ, the ε such that the release "
        "is (ε, δ)-differentially private for every person. The solid curve is computed from "
        "the exact privacy-loss distribution of a person in the most population groups; the "
        "dashed one is the textbook bound from the total budget."
    )
    return FigureBlock("fig-privacy-curve", "Privacy-loss curve ε(δ)", png(fig), text)


def write_report(path: Path, release: dict[str, Any], levels: Sequence[LevelSummary]) -> Path:
    """Write the release's HTML report to ``path`` (atomically)."""
    del levels  # everything needed is in the release document
    rows: list[dict[str, Any]] = []
    for scope, run in release["runs"].items():
        for d in run["levels"]:
            if d.get("status") == "tabulated":
                rows.append({"scope": scope, **d})
    sections = []
    private = release["private"]
    banner = (
        "<p><strong>Private release</strong>: noise from a cryptographically secure source.</p>"
        if private
        else '<p style="color:#b00"><strong>NOT PRIVATE</strong>: this release used a seeded '
        "source or no noise (tests only). Do not publish.</p>"
    )
    sections.append("<h2>Release</h2>" + banner)
    g_rows = []
    for scope, run in release["runs"].items():
        for name, a in run["privacy"].items():
            g_rows.append(
                [
                    scope,
                    name,
                    f"{a['epsilon']:.4f}" if isinstance(a["epsilon"], float) else str(a["epsilon"]),
                    f"{a['delta']:.0e}",
                    a.get("method", ""),
                ]
            )
    sections.append(
        "<h2>Privacy guarantee</h2>" + table_html(["run", "analysis", "ε", "δ", "method"], g_rows)
    )
    head = [
        "run",
        "level",
        "budget",
        "stability",
        "regions",
        "iterations",
        "noisy counts",
        "MOE stage 1",
        "MOE stage 2",
        "MOE TotalOnly",
    ]
    table = [
        [
            r["scope"],
            r["level"],
            f"{r['budget']:.4g}",
            str(r["stability"]),
            f"{r['regions']:,}",
            f"{r['iterations']:,}",
            f"{r['noise_draws']:,}",
            str(r["moe95"]["stage1"]),
            str(r["moe95"]["stage2_cell"]),
            str(r["moe95"]["total_only"]),
        ]
        for r in rows
    ]
    sections.append("<h2>Levels</h2>" + table_html(head, table))
    figs = [
        _moe_figure(rows),
        _stat_figure(rows),
        _privacy_figure(ReleasePlan.from_dict(release["plan"])),
    ]
    text = page(
        "SafeTab-P release report",
        html.escape(
            f"{release['outputs']['t1_rows']:,} T1 rows · "
            f"{release['outputs']['t2_rows']:,} T2 rows (noisy counts only: the report, like "
            "the release, holds nothing else computed from the confidential input)"
        ),
        sections,
        figs,
    )
    written = write_html(path, text)
    written.chmod(0o644)  # a published file: readable like the tables next to it
    return written
