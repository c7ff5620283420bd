"""``report.html`` of a TopDown release: the guarantee every way, the noise, how to read it.

Built from ``release.json`` alone (public facts: the plan, the guarantee, the spine's
shape), with privtab's report scaffolding (:mod:`privtab.report`): the headline
guarantee per person and per housing unit; ε(δ) by every analysis; the Semi-DP reading
of the invariant state totals (seed 003 §6); the per-attribute and per-geography reading
(seed 000 §8); the noise of every query at every level (σ, exact σ² in ``release.json``)
with a figure; what is exact (the invariants); and, for data users, how to read the
tables and the microdata. Numbers shown as bounds on privacy loss are rounded up.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from privtab.report import FigureBlock, new_figure, page, png, table_html, write_html
from privtab.topdown.formats import release_formats

__all__ = ["render_report", "write_report"]

_METHODS = {
    "analytic": "zCDP → (ε, δ), Bun & Steinke 2016",
    "optimal": "zCDP → (ε, δ), Canonne, Kamath & Steinke 2020 (the certificates' ε)",
    "grid": "zCDP → (ε, δ), numerical",
    "pld": "worst-case privacy-loss distribution (certified upper bound)",
    "pld_lower": "privacy-loss distribution, lower bound (not a guarantee)",
}


def _up(x: float, digits: int = 2) -> str:
    from privtab.report import round_up

    return round_up(float(x), digits)


def _headline(doc: Mapping[str, Any]) -> str:
    g = doc["guarantee"]
    parts = []
    for key, who in (("persons", "person"), ("housing_units", "housing unit")):
        if key not in g:
            continue
        r = g[key]
        eps = r["epsilon"].get("optimal")
        parts.append(
            f"each {who}'s record is protected with ρ = {html.escape(r['rho']['exact'])} "
            f"≈ {r['rho']['value']} zCDP (ε = {_up(eps)} at δ = {html.escape(r['delta'])})"
        )
    text = "; ".join(parts)
    return f'<p class="headline">In this release, {text}.</p>'


def _epsilon_table(g: Mapping[str, Any]) -> str:
    rows = []
    for key, who in (("persons", "per person"), ("housing_units", "per housing unit")):
        if key not in g:
            continue
        for m, e in g[key]["epsilon"].items():
            rows.append([who, _METHODS.get(m, m), _up(e)])
    return table_html(["record", "analysis", "ε"], rows)


def _semantics(g: Mapping[str, Any]) -> str:
    rows = []
    for key, who in (("persons", "person"), ("housing_units", "housing unit")):
        if key not in g:
            continue
        r = g[key]
        for a, v in r["per_attribute"].items():
            rows.append([who, f"attribute {a}", str(v["rho"]["value"]), _up(v["epsilon"])])
        for geo, v in r["per_geography"].items():
            rows.append([who, geo, str(v["rho"]["value"]), _up(v["epsilon"])])
    return table_html(["record", "what may change", "ρ", "ε (optimal)"], rows)


def _semi(g: Mapping[str, Any]) -> str:
    rows = []
    for key, who in (("persons", "person"), ("housing_units", "housing unit")):
        if key not in g:
            continue
        s = g[key]["semi_dp"]
        rows.append(
            [
                who,
                s["invariant"],
                str(s["semi_adjacent"]),
                f"{s['rho']['exact']} ≈ {s['rho']['value']}",
                _up(s["epsilon"]["optimal"]),
            ]
        )
    return table_html(["record", "invariant", "a", "ρ (Semi-DP)", "ε (optimal)"], rows)


def _noise_table(run: Mapping[str, Any]) -> str:
    levels = run["strategy"]["levels"]
    queries: dict[str, dict[str, float]] = {}
    for q in run["queries"]:
        queries.setdefault(q["query"], {})[q["level"]] = q["sigma"]
    rows = [
        [name, *(f"{by[lv]:.3g}" if lv in by else "—" for lv in levels)]
        for name, by in queries.items()
    ]
    return table_html(["query", *levels], rows)


def _noise_figure(runs: Mapping[str, Mapping[str, Any]]) -> FigureBlock | None:
    """σ of the total and of a detailed cell per level, every scope's persons run."""
    series = []
    for scope, run in runs.items():
        plan = run["persons"]
        for q in ("total", "detailed"):
            pts = [(x["level"], x["sigma"]) for x in plan["queries"] if x["query"] == q]
            if pts:
                series.append((f"{scope} {q}", pts))
    if not series:
        return None
    fig, ax = new_figure(7.0, 3.8)
    for label, pts in series:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    ax.set_yscale("log")
    ax.set_ylabel("σ of one noisy cell (persons)")
    ax.set_xlabel("geographic level")
    from privtab.report import legend_outside

    legend_outside(ax)
    return FigureBlock(
        "noise",
        "Noise of the persons measurements by level",
        png(fig),
        "Each point is the standard deviation σ of the discrete Gaussian noise added to one "
        "cell of the query at one geounit of the level (log scale). The total is measured "
        "with little noise at State, County, Tract and Block_Group; each block's detailed "
        "cells carry most of the budget, but a block's histogram has 2,016 cells, so small "
        "groups in small areas are dominated by noise before post-processing.",
    )


_READING = """
<p>The release holds the <b>Microdata Detail Files</b> ({files}) and the <b>P.L. 94-171
tables</b> P1–P5 and H1 (<code>pl94/&lt;TABLE&gt;.{ext}</code>:
<code>GEOID|GEOLEVEL|CELL|COUNT</code>, one row per geography and cell, Census cell names
P0010001 … H0010003) for the nation, every state, county, tract, block group, block,
place and AIANNH area. The tables are exact tabulations of the microdata: any two tables
agree, and every geography equals the sum of its parts.</p>
<p>Every count is a non-negative integer obtained by post-processing noisy measurements
(least squares under the constraints, then controlled rounding), so it has error. The
error is small for large groups and large areas, and relatively large for small ones: a
block's count is best used only as a building block of larger areas. Post-processing
makes the error of small counts <b>biased</b> upwards on average (a count cannot be
negative). What is exact: the invariants listed below. For unbiased estimates with
standard errors, use the tree GLS of the noisy measurements (<code>privtab topdown
gls</code>, <code>docs/topdown-gls.md</code>) when the release carries them
(<code>--nmf</code>).</p>
"""


def _reading(doc: Mapping[str, Any]) -> str:
    """How to read the tables, naming the files the release holds (its ``formats``)."""
    if "txt" in release_formats(doc):
        files = ("<code>mdf/persons.txt</code>, <code>mdf/units.txt</code>, Census layout, "
                 "with Parquet copies")  # fmt: skip
        return _READING.format(files=files, ext="txt")
    files = ("<code>mdf/persons.parquet</code>, <code>mdf/units.parquet</code>, the Census "
             "columns; no text files: the run wrote Parquet only")  # fmt: skip
    return _READING.format(files=files, ext="parquet")


def render_report(doc: Mapping[str, Any]) -> str:
    """The report's HTML from a ``release.json`` document."""
    g = doc["guarantee"]
    runs = doc["runs"]
    banner = (
        ""
        if doc["private"]
        else "NOT PRIVATE: this release was made with a seeded random source or without "
        f"noise ({html.escape(str(doc['noise']))}). Its counts carry no privacy "
        "guarantee; do not publish them."
    )
    sections = [
        "<h2>The guarantee, every way</h2>",
        "<p>zCDP with bounded neighbours (replacing one record changes at most two cells "
        "of every query by −1 and +1). Exact fractions are in <code>release.json</code>; "
        "every number here is rounded up.</p>",
        _epsilon_table(g),
        "<h2>Semi-DP: the invariant totals</h2>",
        "<p>The state totals (persons) and the housing units of every block (units) are "
        "published exactly. Read against neighbours that keep them (seed 003, §6), two "
        "data sets that differ only in where one person lives are at most a = 2 "
        "replacements apart: the release is a²ρ-zCDP with respect to them.</p>",
        _semi(g),
        "<h2>Per attribute and per geography</h2>",
        "<p>If only one attribute of a record may differ (or only the block within an "
        "area), only the queries that attribute can move count (seed 000, §8; the "
        "certificates' tables).</p>",
        _semantics(g),
    ]
    for scope, run in runs.items():
        for hist in ("persons", "units"):
            r = run[hist]
            spine = r["spine"]
            sections.append(f"<h2>{html.escape(scope)} {hist} run: noise per level (σ)</h2>")
            sections.append(
                f"<p>Strategy <code>{html.escape(r['strategy']['name'])}</code> "
                f"(global scale {html.escape(r['strategy']['global_scale'])}); spine: "
                f"{html.escape(spine['description'])}; geounits: "
                + ", ".join(f"{html.escape(k)} {v:,}" for k, v in spine["geounits"].items())
                + ".</p>"
            )
            sections.append(_noise_table(r))
    skipped: Mapping[str, str] = doc.get("skipped_runs", {})
    if skipped:
        sections.append(
            "<p>Not run: "
            + "; ".join(f"{html.escape(k)} ({html.escape(v)})" for k, v in skipped.items())
            + ".</p>"
        )
    inv: Sequence[str] = doc.get("invariants", [])
    sections.append("<h2>What is exact</h2><ul>")
    sections.append("".join(f"<li>{html.escape(x)}</li>" for x in inv) + "</ul>")
    sections.append("<h2>How to read the tables</h2>" + _reading(doc))
    fig = _noise_figure(runs)
    return page(
        "TopDown release: the redistricting data (P.L. 94-171)",
        f"started {doc.get('started_utc', '')}",
        sections,
        [fig] if fig is not None else [],
        banner=banner,
        headline=_headline(doc),
    )


def write_report(path: str | Path, doc: Mapping[str, Any]) -> Path:
    """Write ``report.html`` for ``doc`` (atomically)."""
    return write_html(path, render_report(doc))
