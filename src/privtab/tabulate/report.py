"""``report.html`` of a SafeTab-P release, for the policy maker who signs it off and the
data user who reads it.

It opens with one sentence to quote (:func:`privtab.tabulate.report_privacy.headline`:
the guarantee and the tightest valid ε at the release's δ), then what the other analyses
say and why they are larger; a test release (seeded or noise-off) has a red NOT PRIVATE
banner above it. Sections: the privacy guarantee (every analysis of every run, and the
ε(δ) curve: the pointwise minimum of the valid bounds), the population-group levels in
words ("county × detailed iterations") with their margins of error and the statistics each
group received, a section for data users (how to read T1/T2 and MOE95, example rows with
iteration names, how to get intervals) and the references cited.

Everything shown comes from ``release.json`` (the public plan, the noisy tallies, the
analyses), the release's own noisy T1/T2 rows and the public reference files — the
report, like the release, holds nothing else computed from the confidential input and has
no privacy cost. ``levels`` is not used: its evaluation tallies are confidential.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privtab.accounting.exact import exact_or_up
from privtab.report import (
    FigureBlock,
    figure_html,
    legend_outside,
    new_figure,
    page,
    png,
    table_html,
    write_html,
)
from privtab.report.references import Citations
from privtab.tabulate.report_privacy import (
    NO_CURVES,
    NOTHING_AHEAD,
    DrawnAhead,
    PldCurves,
    headline,
    plain_reading,
    privacy_curves,
    privacy_figure,
    privacy_table,
    runs_that_drew_noise,
    tightest,
)
from privtab.tabulate.report_text import STAT_LEVELS, level_words
from privtab.tabulate.report_users import data_users_section
from privtab.tabulate.results import LevelSummary

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["draw_ahead", "write_report"]

_RUN_SHORT = {"US": "United States", "PR": "Puerto Rico"}


def _label(d: Mapping[str, Any]) -> str:
    """A level in words (the Puerto Rico geographies say so: no run prefix needed)."""
    return level_words(d["level"])


def _bar_height(n: float) -> float:
    return 1.6 + 0.32 * n


_MOE_KINDS = (
    (0.27, "stage1", "first-stage total"),
    (0.0, "stage2_cell", "second-stage total or sex × age cell"),
    (-0.27, "total_only", "total of a detailed-only group"),
)


def _has_total_only(release: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
    """Whether a tabulated level holds TotalOnly groups (detailed-only iterations at USA,
    STATE or PR-STATE), from its public plan in ``release``."""
    from privtab.tabulate.suppression import has_total_only_groups

    plan = release["runs"][row["scope"]]["plan"]["levels"]
    lv = next((p for p in plan if p["level"] == row["level"]), None)
    return lv is None or has_total_only_groups(lv["geo"], lv.get("has_detailed_only", True))


def _moe_figure(
    release: Mapping[str, Any],
    levels: Sequence[dict[str, Any]],
    ahead: DrawnAhead = NOTHING_AHEAD,
) -> FigureBlock:
    data = tuple(
        (
            _label(d),
            *(
                d["moe95"][key] if key != "total_only" or _has_total_only(release, d) else None
                for _, key, _ in _MOE_KINDS
            ),
        )
        for d in levels
    )
    text = (
        "How precise each kind of count is: the margin of error is the smallest number m "
        "such that the published count lies within m of the count before noise with "
        "probability at least 95%, computed exactly from the noise distribution. Counts made "
        "by adding sex × age cells (the totals of large groups) have the margin of error of "
        "the sum, listed per row in T1's MOE95 column. Levels without detailed-only groups "
        "have no total-only bar."
    )
    image = ahead.png("fig-moe", data, lambda: _draw_moe(data))
    return FigureBlock("fig-moe", "Margin of error by level", image, text)


def _draw_moe(data: tuple[tuple[Any, ...], ...]) -> Figure:
    n = len(data)
    fig, ax = new_figure(9.0, _bar_height(3 * n / 2))
    y = np.arange(n)[::-1].astype(float)
    for i, (off, _, label) in enumerate(_MOE_KINDS, start=1):
        widths = [np.nan if row[i] is None else row[i] for row in data]
        ax.barh(y + off, widths, height=0.27, label=label)
    ax.set_yticks(y, [row[0] for row in data], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("exact 95% margin of error (persons)")
    legend_outside(ax, where="top")
    return fig


def _stat_figure(levels: Sequence[dict[str, Any]]) -> FigureBlock:
    n = len(levels)
    fig, ax = new_figure(9.0, _bar_height(n))
    y = np.arange(n)[::-1].astype(float)
    left = np.zeros(n)
    groups = np.array([max(d["groups"], 1) for d in levels], dtype=float)
    for key, label in STAT_LEVELS.items():
        share = np.array([d["stat_levels"].get(key, 0) for d in levels], dtype=float) / groups
        ax.barh(y, share, left=left, label=label, height=0.7)
        left += share
    ax.set_yticks(y, [_label(d) for d in levels], fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the level's population groups")
    legend_outside(ax, where="top")
    text = (
        "Which statistics each population group received. The first stage publishes a noisy "
        "total; groups whose noisy total passes the level's thresholds get sex × age tables "
        "with more age detail (T2), the others a second noisy total. Groups of detailed-only "
        "iterations get a single total. Empty groups are tabulated too (the list of groups "
        "is public), which is why most groups of the detailed levels receive a total only."
    )
    return FigureBlock("fig-stat-levels", "Statistics each group received", png(fig), text)


def _levels_section(release: Mapping[str, Any], rows: Sequence[dict[str, Any]]) -> str:
    zcdp = "zcdp" in release["guarantee"]
    head = [
        "run",
        "level",
        "budget (ρ)" if zcdp else "budget (ε)",
        "groups per person (max)",
        "regions",
        "iterations",
        "noisy counts",
        "MOE first stage",
        "MOE second stage",
        "MOE total only",
    ]
    table = [
        [
            _RUN_SHORT.get(r["scope"], r["scope"]),
            f"{level_words(r['level'])} {r['level']}",
            exact_or_up(Fraction(r["budget_exact"])) if "budget_exact" in r else f"{r['budget']}",
            str(r["stability"]),
            f"{r['regions']:,}",
            f"{r['iterations']:,}",
            f"{r['noise_draws']:,}",
            str(r["moe95"]["stage1"]),
            str(r["moe95"]["stage2_cell"]),
            str(r["moe95"]["total_only"]) if _has_total_only(release, r) else "—",
        ]
        for r in rows
    ]
    empty = [
        f"{_RUN_SHORT.get(s, s)}: {level_words(d['level'])} {d['level']}"
        for s, run in release["runs"].items()
        for d in run["levels"]
        if d.get("status") != "tabulated"
    ]
    intro = (
        "<h2>Population-group levels</h2><p>A level is a geography crossed with a level of "
        "the Census race and ethnicity hierarchy: <em>regional</em> iterations are broad "
        "groups (e.g. European, Sub-Saharan African, Central American), <em>detailed</em> "
        "iterations the specific groups (e.g. Albanian, Mexican); each comes as "
        "<em>alone</em> and <em>alone or in any combination</em> for race. A person is in at "
        "most the listed number of groups of a level; the level's budget is split among "
        "them. Puerto Rico's county equivalents are <em>municipios</em>.</p>"
    )
    note = (
        "<p>Not tabulated (no public population group, so no noise and no budget spent): "
        + html.escape("; ".join(empty))
        + ".</p>"
        if empty
        else ""
    )
    return intro + table_html(head, table) + note


def _banner(release: Mapping[str, Any]) -> str:
    if release["private"]:
        return ""
    return (
        "NOT PRIVATE — this is a test release made with "
        + html.escape(str(release.get("noise", "a seeded source or no noise")))
        + ". Its counts carry no protection, whatever the guarantee below says: do not "
        "publish them."
    )


def draw_ahead(release: Mapping[str, Any], known: PldCurves = NO_CURVES) -> DrawnAhead:
    """The figures that show the public plan only — the ε(δ) curve and the margins of
    error — drawn from a partial ``release.json`` (its runs' ``plan`` and ``privacy``,
    ``config``, and each run's tabulated ``levels`` with their ``level`` and ``moe95``): a
    run draws them while the levels are tabulated, and :func:`write_report` reuses each
    one that shows the same data as the finished release."""
    drawn = runs_that_drew_noise(release)
    _, _, eps, delta = tightest(drawn)
    ahead = DrawnAhead(record=True)
    privacy_figure(drawn, privacy_curves(drawn, known=known), (delta, eps), Citations(), ahead)
    _moe_figure(release, _tabulated(release), ahead)
    return DrawnAhead(ahead.pngs)


def _tabulated(release: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {"scope": scope, **d}
        for scope, run in release["runs"].items()
        for d in run["levels"]
        if d.get("status") == "tabulated"
    ]


def write_report(
    path: Path,
    release: dict[str, Any],
    levels: Sequence[LevelSummary],
    known: PldCurves = NO_CURVES,
    ahead: DrawnAhead = NOTHING_AHEAD,
) -> Path:
    """Write the release's HTML report to ``path`` (atomically, mode 0644).

    ``release`` is ``release.json``'s object; T1/T2 rows for the examples are read from the
    folder of ``path``. ``levels`` is accepted for the callers' convenience and not used;
    ``known``: PLD curves the run computed ahead (:func:`prefetch_pld_curves`); ``ahead``:
    figures it drew ahead (:func:`draw_ahead`), used where they show the same data."""
    del levels  # its evaluation tallies are confidential; release.json has the public ones
    rows = _tabulated(release)
    cite = Citations()
    drawn = runs_that_drew_noise(release)
    top = headline(drawn, cite)
    curve = privacy_figure(drawn, privacy_curves(drawn, known=known), top, cite, ahead)
    sections = [
        "<h2>Privacy guarantee</h2>"
        + privacy_table(drawn)
        + figure_html(curve)
        + plain_reading(drawn, cite)
        + "<p>More bounds, figures and other attackers: <code>privtab semantics --release"
        "</code>.</p>",
        _levels_section(release, rows),
        figure_html(_moe_figure(release, rows, ahead)),
        figure_html(_stat_figure(rows)),
        data_users_section(path.parent, release),
    ]
    text = page(
        "SafeTab-P release report",
        f"{release['outputs']['t1_rows']:,} T1 rows · {release['outputs']['t2_rows']:,} T2 "
        "rows (noisy counts only: the report, like the release, holds nothing else computed "
        "from the confidential input)",
        sections,
        [],
        banner=_banner(release),
        headline=f'<p class="headline">{top.sentence}</p><p class="sub">{top.others}</p>',
        references=cite.html(),
        note=f"algorithm: {cite.cite('safetab', 'Algorithms 1–3')}",
    )
    written = write_html(path, text)
    written.chmod(0o644)  # a published file: readable like the tables next to it
    return written
