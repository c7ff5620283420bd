"""Plain words for what ``report.html`` names: levels, runs, analyses, statistic levels.

A population-group level ``(GEO, n)`` is a geography crossed with a level of the Census
race and ethnicity hierarchy (the ``LEVEL`` column of the characteristic-iteration files):
level 1 holds the *regional* groups (e.g. "European alone", "Sub-Saharan African alone",
"Central American"), level 2 the *detailed* groups (e.g. "Albanian alone", "Mexican").
Puerto Rico's county equivalents are *municipios*. So ``(COUNTY, 2)`` reads "county ×
detailed iterations" and ``(PR-COUNTY, 1)`` "Puerto Rico municipio × regional iterations".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ANALYSES",
    "GEOGRAPHIES",
    "ITERATION_LEVELS",
    "STAT_LEVELS",
    "analysis_name",
    "level_words",
    "run_words",
]

#: ``REGION_TYPE`` → the geography in words (singular)
GEOGRAPHIES: dict[str, str] = {
    "USA": "nation",
    "STATE": "state",
    "COUNTY": "county",
    "TRACT": "census tract",
    "PLACE": "place",
    "AIANNH": "American Indian / Alaska Native / Native Hawaiian area",
    "PR-STATE": "Puerto Rico",
    "PR-COUNTY": "Puerto Rico municipio",
    "PR-TRACT": "Puerto Rico census tract",
    "PR-PLACE": "Puerto Rico place",
}

#: iteration level (the reference files' ``LEVEL``) → its name in the race hierarchy
ITERATION_LEVELS: dict[int, str] = {1: "regional", 2: "detailed"}

#: ``STAT_LEVEL`` → what a population group received
STAT_LEVELS: dict[str, str] = {
    "-1": "total only (detailed-only group)",
    "0": "total",
    "1": "sex × 4 age groups",
    "2": "sex × 9 age groups",
    "3": "sex × 23 age groups",
}

#: analysis key in ``release.json`` → (plain name, what it starts from)
ANALYSES: dict[str, tuple[str, str]] = {
    "pld": (
        "worst-case person's privacy-loss distribution",
        "the exact noise of every count a person can be in",
    ),
    "zcdp_optimal": (
        "zero-concentrated DP, optimal conversion",
        "the total ρ only (Canonne, Kamath & Steinke's conversion)",
    ),
    "zcdp_grid": (
        "zero-concentrated DP, SafeTab paper's conversion",
        "the total ρ only, on the paper's grid of Rényi orders",
    ),
    "zcdp_analytic": (
        "zero-concentrated DP, simple formula",
        "the total ρ only: ε = ρ + 2√(ρ ln(1/δ)) (Bun & Steinke)",
    ),
    "pure": ("pure DP (sum of the levels' ε)", "each level's ε, added up; holds with δ = 0"),
    "rdp": (
        "Rényi DP, exact geometric divergence",
        "each level's Rényi curve, best order",
    ),
    "rdp_grid": (
        "Rényi DP, SafeTab paper's orders",
        "each level's Rényi curve, on the paper's orders 1.01 … 10",
    ),
    "rdp_paper": (
        "SafeTab paper's own Rényi curve (NOT a valid guarantee)",
        "the paper's Corollary 1, which understates the divergence",
    ),
}

_LEVEL = re.compile(r"^\(\s*([A-Z-]+)\s*,\s*(\d+)\s*\)$")


def level_words(key: str) -> str:
    """``"(COUNTY, 2)"`` → ``"county × detailed iterations"`` (unknown keys unchanged)."""
    m = _LEVEL.match(key.strip())
    if m is None or m.group(1) not in GEOGRAPHIES:
        return key
    it = ITERATION_LEVELS.get(int(m.group(2)), f"level-{m.group(2)}")
    return f"{GEOGRAPHIES[m.group(1)]} × {it} iterations"


def run_words(scope: str, release: Mapping[str, Any] | None = None) -> str:
    """``"US"`` → ``"United States run (50 states and DC)"`` (or the states it covered);
    ``"PR"`` → ``"Puerto Rico run"``."""
    if scope == "PR":
        return "Puerto Rico run"
    if scope != "US":
        return f"{scope} run"
    states = ((release or {}).get("config") or {}).get("state_filter_us") or []
    if states and len(states) < 51:
        n = len(states)
        return f"United States run ({n} state{'s' if n != 1 else ''}: FIPS {', '.join(states)})"
    return "United States run (50 states and DC)"


def analysis_name(key: str, entry: Mapping[str, Any] | None = None) -> str:
    """The plain name of an analysis (its ``method`` text for keys privtab does not know)."""
    if key in ANALYSES:
        return ANALYSES[key][0]
    return str((entry or {}).get("method") or key.replace("_", " "))
