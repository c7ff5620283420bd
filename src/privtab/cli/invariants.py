"""``privtab invariants``: Semi-DP accounting, invariant-aware table release, semi-private test.

* ``census`` — seed §6.1: what ρ-zCDP becomes when counts are published exactly.
* ``table``  — release an r × c table keeping its one-way margins exact.
* ``test``   — the semi-private UMPU test for the odds ratio of a 2 × 2 table.

The computations are :mod:`privtab.invariants.overview`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privtab._options import open_unit
from privtab.cli._render import JsonOption, add_group, emit, usage_errors

Counts = Annotated[Path | None, typer.Option("--input", help="CSV of counts (an optional "
                   "header row and label column are skipped).")]  # fmt: skip
Seed = Annotated[int | None, typer.Option("--seed", help="TEST ONLY: reproducible, NOT private.")]


def register(app: typer.Typer) -> None:
    help = "Semi-DP: privacy guarantees and mechanisms when some counts are published exactly."
    commands = {"census": census, "table": table, "test": odds_ratio_test}
    add_group(app, "invariants", help, commands)


def census(
    rho: float = typer.Option(
        2.56, "--rho", help="The advertised ρ-zCDP (2020 Census persons: 2.56)."
    ),
    semi_adjacent: int | None = typer.Option(
        None,
        "--semi-adjacent",
        min=0,
        help="The semi-adjacent parameter a (default 2: state totals).",
    ),
    delta: float = typer.Option(1e-10, "--delta", help="δ at which ε is reported."),
    invariant: str | None = typer.Option(
        None,
        "--invariant",
        help="Compute a from an invariant: state-totals | full-table | margins:K | FILE.json "
        '({"features": {...}, "invariant": "one-way-margins"|"full-table"|{"queries": [...]}, '
        '"table"|"records"|"margins": ...}).',
    ),
    as_json: JsonOption = False,
) -> None:
    """Seed §6.1: ρ-zCDP with an invariant is a²ρ-zCDP on invariant-conforming data.

    Example: privtab invariants census --rho 2.56 --semi-adjacent 2 --delta 1e-10 --json
    """
    from privtab.invariants.overview import census_overview, census_table

    open_unit("--delta", delta)
    with usage_errors():
        ov = census_overview(rho, semi_adjacent, delta, invariant)
    emit(ov, as_json, [census_table(ov)])


def table(
    counts: str | None = typer.Option(
        None, "--counts", help="The table, rows separated by ';': '12,7;5,9'."
    ),
    input_path: Counts = None,
    mechanism: str = typer.Option(
        "projected-gaussian",
        "--mechanism",
        help="One of: projected-gaussian, optimal-knorm, naive-gaussian, naive-l1, naive-l2, "
        "naive-linf.",
    ),
    mu: float | None = typer.Option(
        None, "--mu", help="Semi-DP μ-GDP target (Gaussian mechanisms)."
    ),
    rho: float | None = typer.Option(
        None, "--rho", help="Semi-DP ρ-zCDP target (Gaussian: μ = √(2ρ))."
    ),
    epsilon: float | None = typer.Option(
        None, "--epsilon", help="Semi-DP ε target (K-norm mechanisms)."
    ),
    semi_adjacent: int | None = typer.Option(
        None, "--semi-adjacent", min=0, help="Override a (default: exact a from the margins)."
    ),
    integer: bool = typer.Option(
        False, "--integer", help="Also post-process to non-negative integers."
    ),
    output: Annotated[
        Path | None, typer.Option("--output", help="Write the released table as CSV (atomically).")
    ] = None,
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --output."),
    seed: Seed = None,
    as_json: JsonOption = False,
) -> None:
    """Release an r × c table with its one-way margins kept exactly (seed §5).

    Example: privtab invariants table --counts '30,12,8;10,25,15' --mu 1 --integer --json
    """
    from privtab.invariants.overview import (
        check_table_output,
        table_release,
        table_view,
        write_table_csv,
    )
    from privtab.invariants.specs import load_table

    if output is not None:
        check_table_output(output, input_path, overwrite)
    rows = load_table(counts, input_path)
    with usage_errors():
        rel, out = table_release(
            rows, mechanism, mu=mu, rho=rho, epsilon=epsilon, semi_adjacent=semi_adjacent,
            integer=integer, seed=seed,
        )  # fmt: skip
    if output is not None:
        write_table_csv(output, rel)
        out["output"] = str(output)
    emit(out, as_json, [table_view(rel, mechanism, out["expected_l2_squared"])])


def odds_ratio_test(
    counts: str | None = typer.Option(None, "--counts", help="The 2 × 2 table: 'a,b;c,d'."),
    input_path: Annotated[
        Path | None, typer.Option("--input", help="CSV with the 2 × 2 table.")
    ] = None,
    epsilon: float | None = typer.Option(None, "--epsilon", help="ε-DP (Tulap noise)."),
    mu: float | None = typer.Option(None, "--mu", help="μ-GDP (Gaussian noise)."),
    theta0: float = typer.Option(1.0, "--theta0", help="Odds ratio under the null."),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level."),
    alternative: str = typer.Option(
        "greater", "--alternative", help="greater (θ > θ₀) or less (θ < θ₀)."
    ),
    power_at: Annotated[
        list[float] | None,
        typer.Option(
            "--power-at",
            metavar="THETA",
            help="Also report the exact power at this odds ratio (repeatable).",
        ),
    ] = None,
    seed: Seed = None,
    as_json: JsonOption = False,
) -> None:
    """Semi-private UMPU test of the odds ratio of a 2 × 2 table with invariant margins (Thm 37).

    Example: privtab invariants test --counts '15,5;6,14' --epsilon 1 --json
    """
    from privtab.invariants.overview import odds_ratio_lines, odds_ratio_overview
    from privtab.invariants.specs import load_table

    rows = load_table(counts, input_path)
    with usage_errors():
        ov = odds_ratio_overview(
            rows, epsilon=epsilon, mu=mu, theta0=theta0, alpha=alpha, alternative=alternative,
            power_at=power_at or [], seed=seed,
        )  # fmt: skip
    emit(ov, as_json, [], lines=odds_ratio_lines(ov, alpha))
