"""``report.html`` of a SafeTab-H release: what was published and what it protects.

Built from ``release.json`` alone (public: the plan, the noisy tallies, the guarantees),
on the shared report scaffolding (:mod:`privtab.report`): a red banner for test runs; the
headline guarantee per household and per person (DHC-A and DHC-B together); the queries
(budget, stability, σ² or scale, exact 95 % MOE of a cell and of each table's total);
where the T1's rows went (groups per level, rows not tabulated and why); the statistic
levels the groups got; a figure of the MOE of each table's total per query, and the
privacy-loss curve ε(δ) of the worst-case household.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from privtab.report import FigureBlock, new_figure, page, png, round_up, table_html, write_html

__all__ = ["write_report"]


def _guarantee_words(g: Mapping[str, Any]) -> str:
    if "zcdp" in g:
        body = g["zcdp"]
        return f"ρ = {body.get('rho_exact', body['rho'])}-zCDP"
    body = g["pure"]
    return f"ε = {body.get('epsilon_exact', body['epsilon'])}-DP"


def _headline(rel: Mapping[str, Any]) -> str:
    person = rel.get("person_level") or {}
    g = _guarantee_words(rel["guarantee"])
    p = _guarantee_words(person["guarantee"]) if person.get("guarantee") else "—"
    eps = person.get("epsilon")
    delta = person.get("delta")
    extra = (
        f" (ε = {round_up(float(eps))} at δ = {delta:g})"
        if isinstance(eps, float) and delta
        else ""
    )
    scope = (
        "DHC-A and DHC-B together"
        if person.get("complete")
        else "DHC-B's part (add DHC-A's guarantee for both)"
    )
    return (
        '<p class="headline">Each household is protected by '
        f"<b>{html.escape(g)}</b> (one household record added or removed); each person by "
        f"<b>{html.escape(p)}</b>{html.escape(extra)} — {scope}.</p>"
        '<p class="sub">A person changes at most one household record, so DHC-B costs a '
        "person at most twice a household's ρ: ρ<sub>person</sub> = ρ<sub>P</sub> + "
        "2ρ<sub>H</sub>. The statistic level of every group was chosen from SafeTab-P's "
        "published T1 (no budget spent); every noisy cell got independent noise; "
        "the other cells are sums of noisy cells.</p>" + _not_drawn(rel)
    )


def _not_drawn(rel: Mapping[str, Any]) -> str:
    """A sentence per run whose guarantee is below its config's budget: the queries that
    had no T1 population group drew and published nothing (``budget_drawn``)."""
    found = rel.get("budget_drawn") or {}
    out = []
    for scope, run in found.items():
        if not isinstance(run, Mapping) or not run.get("not_drawn"):
            continue
        out.append(
            f'<p class="sub">{html.escape(scope)} run: '
            f"{html.escape(', '.join(run['not_drawn']))} had no T1 population group (their "
            "region type has no region of the run's states, or T1 no group there), so nothing "
            "was drawn or published for them and the run's guarantee, "
            f"{html.escape(_guarantee_words(run['charged']))}, is below the config's budget, "
            f"{html.escape(_guarantee_words(run['configured']))}. Which queries draw is "
            "decided by public inputs only (T1, GRF-C).</p>"
        )
    return "".join(out)


def _queries(rel: Mapping[str, Any]) -> tuple[str, list[tuple[str, float, int]]]:
    rows: list[list[str]] = []
    moes: list[tuple[str, float, int]] = []
    for scope, run in rel["runs"].items():
        for lv in run["levels"]:
            if lv.get("status") != "tabulated":
                rows.append([scope, lv["level"], lv["status"], "—", "—", "—", "—", "—", "—"])
                continue
            cell = lv["cell"]
            per = lv["groups_per_stat_level"]
            total_moes = {t: m.get("0") for t, m in lv["moe95"].items()}
            scale = "σ²" if cell["noise"] == "discrete_gaussian" else "b"
            rows.append(
                [
                    scope,
                    lv["level"],
                    f"{lv['budget']:g}",
                    str(lv["stability"]),
                    f"{scale} = {cell['noise_scale']:.4g}",
                    str(cell["moe95"]),
                    ", ".join(f"{t}: {m}" for t, m in total_moes.items()),
                    f"{lv['groups']:,}",
                    ", ".join(f"{t} {n:,}" for t, n in per.items() if n),
                ]
            )
            moes.append((f"{scope} {lv['level']}", float(cell["moe95"]), int(lv["groups"])))
    head = [
        "run",
        "query",
        "budget",
        "s",
        "noise per cell",
        "MOE95 cell",
        "MOE95 total, per table",
        "groups",
        "groups per table",
    ]
    text = (
        "<h2>Queries</h2><p>One query per table (T3, T4) and population-group level "
        "(geography × iteration level) with a positive budget. A household is in at most "
        "<i>s</i> groups of a query (the stability, from the reference files), so each cell "
        "gets the per-cell parameter budget/<i>s</i>. A published total that sums <i>k</i> "
        "noisy cells has variance <i>k</i>σ²; its exact MOE is shown per table.</p>"
        + table_html(head, rows)
    )
    return text, moes


def _domain(rel: Mapping[str, Any]) -> str:
    rows = []
    for scope, d in (rel.get("domain") or {}).items():
        not_tab = d.get("t1_rows_not_tabulated", {})
        rows.append(
            [
                scope,
                f"{d.get('t1_rows_read', 0):,}",
                f"{sum(d.get('groups', {}).values()):,}",
                ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in not_tab.items() if v) or "—",
            ]
        )
    return (
        "<h2>The T1 domain</h2><p>SafeTab-H tabulates exactly the population groups of "
        "SafeTab-P's published T1: a group absent from T1 is not released, a group in T1 "
        "without a household is released as 0 plus noise. Rows of another run or outside "
        "the run's states, level-0 iterations and iterations not tabulated at their "
        "geography (DETAILED_ONLY below the state, COARSE_ONLY at USA/STATE) are not "
        "tabulated, as in production.</p>"
        + table_html(["run", "T1 rows read", "groups tabulated", "T1 rows not tabulated"], rows)
    )


def _moe_figure(moes: Sequence[tuple[str, float, int]]) -> FigureBlock | None:
    if not moes:
        return None
    fig, ax = new_figure(7.5, max(2.5, 0.28 * len(moes) + 1))
    labels = [m[0] for m in moes]
    ax.barh(range(len(moes)), [m[1] for m in moes], color="#1f4e79")
    ax.set_yticks(range(len(moes)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("exact 95 % margin of error of one noisy cell (households)")
    return FigureBlock(
        "moe",
        "Margin of error of a noisy cell, per query",
        png(fig),
        "Each bar is the exact 95 % margin of error of one noisy cell of the query: the "
        "true count lies within ± this of the published one with probability at least "
        "95 %. Marginals that sum k cells have larger margins (table above).",
    )


def _privacy_table(rel: Mapping[str, Any]) -> str:
    rows = []
    for scope, run in rel["runs"].items():
        for name, a in (run.get("privacy") or {}).items():
            eps = a.get("epsilon")
            rows.append(
                [
                    scope,
                    name,
                    "—" if eps is None else round_up(float(eps)),
                    f"{a.get('delta', 0):g}",
                    str(a.get("method", "")),
                ]
            )
    return "<h2>The guarantee per household, under every analysis</h2>" + table_html(
        ["run", "analysis", "ε (rounded up)", "δ", "method"], rows
    )


def write_report(path: Path, release: Mapping[str, Any]) -> Path:
    """Write ``report.html`` of the release described by ``release`` (``release.json``)."""
    banner = (
        ""
        if release.get("private", True)
        else "NOT PRIVATE: seeded or noise-free test output. Do not publish these numbers."
    )
    queries, moes = _queries(release)
    figure = _moe_figure(moes)
    text = page(
        "SafeTab-H release: Detailed DHC-B (T3 household type, T4 tenure)",
        f"started {release.get('started_utc', '')} · engine {release.get('engine', '')}",
        [queries, _domain(release), _privacy_table(release)],
        [figure] if figure is not None else [],
        banner=banner,
        headline=_headline(release),
    )
    return write_html(path, text)
