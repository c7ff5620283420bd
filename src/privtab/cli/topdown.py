"""``privtab topdown``: the 2020 redistricting data (P.L. 94-171) by TopDown.

* ``plan`` — no data: σ and ρ of every measured query at every level, and the guarantee
  (ρ per person or housing unit, ε(δ) by every analysis, Semi-DP, per attribute and per
  geography) of a packaged production run (``--run us|pr|units|units-pr``) or of a
  strategy file (``--strategy FILE``).

The computations are :mod:`privtab.topdown.planning`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from privtab.cli._render import JsonOption, add_group, emit, usage_errors

StrategyFile = Annotated[
    Path | None,
    typer.Option("--strategy", help="A strategy JSON file (docs/topdown.md) instead of --run."),
]


def register(app: typer.Typer) -> None:
    help = "TopDown: the 2020 redistricting data (P.L. 94-171) with exact noise and accounting."
    add_group(app, "topdown", help, {"plan": plan})


def plan(
    run: str = typer.Option(
        "us", "--run", help="A packaged 2020 production run: us, pr (persons), units, units-pr."
    ),
    strategy: StrategyFile = None,
    pld: bool = typer.Option(
        True, "--pld/--no-pld", help="Also bound ε by the privacy-loss distribution (~1 s)."
    ),
    as_json: JsonOption = False,
) -> None:
    """σ and ρ per query and level, and the guarantee — no data needed.

    Example: privtab topdown plan --run us --json
    """
    from privtab.topdown.planning import plan as make_plan
    from privtab.topdown.strategy import PRODUCTION_RUNS, load_strategy

    with usage_errors():
        if strategy is not None:
            chosen: Any = load_strategy(strategy)
        elif run in PRODUCTION_RUNS:
            chosen = run
        else:
            raise ValueError(f"--run must be one of {', '.join(PRODUCTION_RUNS)}, got {run!r}")
    p = make_plan(chosen, pld=pld)
    doc = p.to_dict()
    emit(doc, as_json, _tables(doc), lines=_lines(doc))


def _tables(doc: dict[str, Any]) -> list[Any]:
    from privtab.report.text import fmt, table

    rows = [
        [
            q["level"],
            q["query"],
            fmt(q["cells"]),
            q["share_query"],
            f"{q['sigma']:.4g}",
            f"{q['rho']['value']:.6g}",
        ]
        for q in doc["queries"]
    ]
    s = doc["strategy"]
    noise = table(
        f"{s['name']}: noise per query and level (global_scale {s['global_scale']})",
        ["level", "query", "cells", "query share", "σ", "ρ"],
        rows,
        notes=[
            "ρ = 1/σ² per query at one geounit (bounded neighbours, Δ₂² = 2); exact "
            "fractions with --json"
        ],
        left=2,
    )
    g = doc["guarantee"]
    per = [
        [a, f"{v['rho']['value']:.6f}", f"{v['epsilon']:.2f}"]
        for a, v in g["per_attribute"].items()
    ]
    per += [
        [k, f"{v['rho']['value']:.6f}", f"{v['epsilon']:.2f}"]
        for k, v in g["per_geography"].items()
    ]
    semantics = table(
        f"per attribute and per geography (ε at δ = {g['delta']}, optimal conversion)",
        ["concern", "ρ", "ε"],
        per,
    )
    return [noise, semantics]


def _lines(doc: dict[str, Any]) -> list[str]:
    g = doc["guarantee"]
    eps = ", ".join(f"{m} {v:.4f}" for m, v in g["epsilon"].items())
    semi = g["semi_dp"]
    return [
        f"ρ per {g['record']}: {g['rho']['exact']} ≈ {g['rho']['value']} (zCDP, {g['neighbours']})",
        f"ε at δ = {g['delta']}: {eps}",
        f"Semi-DP ({semi['invariant']} invariant, a = {semi['semi_adjacent']}): ρ "
        f"{semi['rho']['exact']} ≈ {semi['rho']['value']}, "
        f"ε optimal {semi['epsilon']['optimal']:.4f}",
    ]
