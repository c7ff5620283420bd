"""``privtab invariants``: Semi-DP accounting, invariant-aware table release, semi-private test.

* ``census`` — seed §6.1: what ρ-zCDP becomes when counts are published exactly.
* ``table``  — release an r × c table keeping its one-way margins exact.
* ``test``   — the semi-private UMPU test for the odds ratio of a 2 × 2 table.
"""

from __future__ import annotations

import csv
import math
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer

from privtab.cli._common import fail, print_json, warn

MECHANISMS = (
    "projected-gaussian",
    "optimal-knorm",
    "naive-gaussian",
    "naive-l1",
    "naive-l2",
    "naive-linf",
)


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        name="invariants",
        help="Semi-DP: privacy guarantees and mechanisms when some counts are published exactly.",
        no_args_is_help=True,
    )
    sub.command("census")(census)
    sub.command("table")(table)
    sub.command("test")(odds_ratio_test)
    app.add_typer(sub, name="invariants")


def _check_output_file(output: Path, input_path: Path | None, overwrite: bool) -> None:
    """Refuse an --output that is the input, a folder, or an existing file (without
    --overwrite): nothing privtab did not write is ever replaced silently."""
    if input_path is not None and output.resolve() == input_path.resolve():
        fail(f"--output {output} is the --input file; choose another --output")
    if output.is_dir():
        fail(f"--output {output} is a folder; give a file name")
    if output.exists() and not overwrite:
        fail(f"--output {output} exists (use --overwrite to replace it)")


def _write_csv_atomic(path: Path, rows: list[list[Any]]) -> None:
    import io

    from privtab.atomic import atomic_write

    buf = io.StringIO(newline="")
    csv.writer(buf).writerows(rows)
    atomic_write(path.resolve(), buf.getvalue())


def _source(seed: int | None) -> Any:
    from privtab.random import SeededSource

    if seed is None:
        return None
    warn(f"--seed {seed}: using a reproducible TEST source; the output is NOT private")
    return SeededSource(seed)


def _release_quietly(release: Any, *args: Any, **kwargs: Any) -> Any:
    """Call a release whose insecure-source warning this command has already printed (the
    library's duplicate is silenced for this call only)."""

    from privtab.mechanisms import InsecureReleaseWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureReleaseWarning)
        return release(*args, **kwargs)


# --------------------------------------------------------------------------- census
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
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Seed §6.1: ρ-zCDP with an invariant is a²ρ-zCDP on invariant-conforming data.

    Example: privtab invariants census --rho 2.56 --semi-adjacent 2 --delta 1e-10 --json
    """
    from privtab.invariants import census_semi_dp

    if not (rho >= 0 and math.isfinite(rho)):
        fail(f"--rho must be a non-negative number, got {rho}")
    if not 0 < delta < 1:
        fail(f"--delta must lie strictly between 0 and 1, got {delta}")
    extra: dict[str, Any] | None = None
    if invariant is not None:
        if semi_adjacent is not None:
            fail("give --semi-adjacent or --invariant, not both")
        from privtab.invariants.specs import invariant_from_spec

        description, res = invariant_from_spec(invariant)
        a = res.value
        extra = {"description": description, "semi_adjacent": res.to_dict()}
        if not res.exact:
            warn(
                f"the semi-adjacent parameter is only bounded "
                f"({res.lower} ≤ a ≤ {res.upper}); using {a}"
            )
    else:
        a = 2 if semi_adjacent is None else semi_adjacent
    try:
        out = census_semi_dp(rho, a, delta)
    except ValueError as exc:
        fail(str(exc))
    payload: dict[str, Any] = dict(out.to_dict())
    if extra is not None:
        payload["invariant"] = extra
    if as_json:
        print_json(payload)
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"Semi-DP with semi-adjacent parameter a = {a} (δ = {delta:g})")
    t.add_column("")
    t.add_column("ρ (zCDP)", justify="right")
    t.add_column("ε, Bun–Steinke", justify="right")
    t.add_column("ε, tight", justify="right")
    t.add_row(
        "advertised",
        f"{out.rho:g}",
        f"{out.epsilon_advertised:.3f}",
        f"{out.epsilon_advertised_optimal:.3f}",
    )
    t.add_row(
        "Semi-DP", f"{out.rho_semi:g}", f"{out.epsilon_semi:.3f}", f"{out.epsilon_semi_optimal:.3f}"
    )
    con = Console()
    con.print(t)
    if extra is not None:
        con.print(
            f"invariant: {extra['description']}; a = {a} ({extra['semi_adjacent']['method']})"
        )


# --------------------------------------------------------------------------- table
def table(
    counts: str | None = typer.Option(
        None, "--counts", help="The table, rows separated by ';': '12,7;5,9'."
    ),
    input_path: Annotated[
        Path | None,
        typer.Option(
            "--input", help="CSV of counts (an optional header row and label column are skipped)."
        ),
    ] = None,
    mechanism: str = typer.Option(
        "projected-gaussian", "--mechanism", help="One of: " + ", ".join(MECHANISMS)
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
    seed: int | None = typer.Option(None, "--seed", help="TEST ONLY: reproducible, NOT private."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Release an r × c table with its one-way margins kept exactly (seed §5).

    Example: privtab invariants table --counts '30,12,8;10,25,15' --mu 1 --integer --json
    """
    import numpy as np

    from privtab.invariants import (
        CountInvariant,
        NaiveGaussian,
        NaiveKNorm,
        OptimalKNorm,
        ProjectedGaussian,
        Schema,
        semi_adjacent_parameter,
    )

    if mechanism not in MECHANISMS:
        fail(f"--mechanism must be one of {', '.join(MECHANISMS)}, got {mechanism!r}")
    if output is not None:
        _check_output_file(output, input_path, overwrite)
    from privtab.invariants.specs import load_table

    rows = load_table(counts, input_path)
    x = np.array(rows, dtype=np.int64)
    r, c = x.shape
    inv = CountInvariant.one_way_margins(Schema.grid(r, c), x)
    exact = semi_adjacent_parameter(inv)
    a = exact.value if semi_adjacent is None else semi_adjacent
    if a < exact.value:
        fail(
            f"--semi-adjacent {a} is below the semi-adjacent parameter of these margins "
            f"({exact.value})"
        )
    if a == 0:
        warn("only one table has these margins (a = 0): there is nothing left to protect")
    gaussian = mechanism in ("projected-gaussian", "naive-gaussian")
    if gaussian:
        if epsilon is not None:
            fail(f"--epsilon applies to the K-norm mechanisms; {mechanism} takes --mu or --rho")
        if (mu is None) == (rho is None):
            fail(f"{mechanism} needs exactly one of --mu or --rho")
        mu_v = float(mu) if mu is not None else math.sqrt(2.0 * float(rho))  # type: ignore[arg-type]
        if not (mu_v > 0 and math.isfinite(mu_v)):
            fail(f"the privacy parameter must be positive, got μ = {mu_v}")
    else:
        if mu is not None or rho is not None:
            fail(f"{mechanism} is a K-norm mechanism: give --epsilon, not --mu/--rho")
        if epsilon is None or not (epsilon > 0 and math.isfinite(epsilon)):
            fail(f"{mechanism} needs --epsilon > 0")
    try:
        mech: Any
        a_mech = max(a, 1)
        if mechanism == "projected-gaussian":
            mech = ProjectedGaussian(r, c, a=a, mu=mu_v)
        elif mechanism == "naive-gaussian":
            mech = NaiveGaussian(r, c, a=a_mech, mu=mu_v)
        elif mechanism == "optimal-knorm":
            if (r - 1) * (c - 1) >= 8:
                warn(
                    f"computing the convex hull of the sensitivity space in {(r - 1) * (c - 1)} "
                    "dimensions: this can take minutes"
                )
            mech = OptimalKNorm(r, c, a=a, epsilon=float(epsilon))  # type: ignore[arg-type]
        else:
            mech = NaiveKNorm(r, c, a=a_mech, epsilon=float(epsilon), norm=mechanism.split("-")[1])  # type: ignore[arg-type]
        rel = _release_quietly(
            mech.release, x, source=_source(seed), allow_insecure=seed is not None, integer=integer
        )
    except ValueError as exc:
        fail(str(exc))
    payload = rel.to_dict()
    payload["semi_adjacent"] = exact.to_dict() | {"used": a}
    payload["expected_l2_squared"] = mech.expected_squared_l2()
    if hasattr(mech, "sigma"):
        payload["sigma"] = mech.sigma
    if output is not None:
        data = rel.integer_table if rel.integer_table is not None else rel.table
        _write_csv_atomic(output, [list(map(_fmt, row)) for row in data.tolist()])
        payload["output"] = str(output)
    if as_json:
        print_json(payload)
        return
    from rich.console import Console
    from rich.table import Table

    con = Console()
    t = Table(title=f"{mechanism}: {rel.guarantee}")
    for j in range(c):
        t.add_column(f"col {j + 1}", justify="right")
    t.add_column("row sum", justify="right")
    shown = rel.integer_table if rel.integer_table is not None else rel.table
    for i in range(r):
        t.add_row(*[_fmt(v) for v in shown[i].tolist()], str(int(rel.row_margins[i])))
    t.add_row(*[str(int(v)) for v in rel.col_margins], str(int(rel.row_margins.sum())))
    con.print(t)
    con.print(
        f"largest margin deviation: {rel.margin_error:.3g}; "
        f"E‖noise‖₂² = {mech.expected_squared_l2():.4g}"
    )
    if not rel.private:
        con.print("[bold red]NOT PRIVATE: produced with a test seed[/]")


def _fmt(v: Any) -> str:
    if isinstance(v, int):
        return str(v)
    return f"{float(v):.6g}"


# --------------------------------------------------------------------------- test
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
            "--power-at", help="Also report the exact power at this odds ratio (repeatable)."
        ),
    ] = None,
    seed: int | None = typer.Option(None, "--seed", help="TEST ONLY: reproducible, NOT private."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Semi-private UMPU test of the odds ratio of a 2 × 2 table with invariant margins (Thm 37).

    Example: privtab invariants test --counts '15,5;6,14' --epsilon 1 --json
    """
    import numpy as np

    from privtab.invariants import OddsRatioTest
    from privtab.invariants.specs import load_table
    from privtab.invariants.umpu import (
        GaussianCND,
        Margins2x2,
        TulapCND,
        fisher_exact_umpu_power,
        naive_test,
    )

    rows = load_table(counts, input_path)
    x = np.array(rows, dtype=np.int64)
    if x.shape != (2, 2):
        fail(f"the odds-ratio test needs a 2 × 2 table, got {x.shape[0]} × {x.shape[1]}")
    if (epsilon is None) == (mu is None):
        fail("give exactly one of --epsilon (Tulap noise) or --mu (Gaussian noise)")
    if alternative not in ("greater", "less"):
        fail(f"--alternative must be 'greater' or 'less', got {alternative!r}")
    if not 0 < alpha < 1:
        fail(f"--alpha must lie strictly between 0 and 1, got {alpha}")
    try:
        cnd: Any = TulapCND(float(epsilon)) if epsilon is not None else GaussianCND(float(mu))  # type: ignore[arg-type]
        tst = OddsRatioTest(cnd, theta0=theta0, alternative=alternative)  # type: ignore[arg-type]
        res = _release_quietly(
            tst.run, x, alpha, source=_source(seed), allow_insecure=seed is not None
        )
        margins = Margins2x2.of(x)
        naive = naive_test(cnd, 3, theta0=theta0, alternative=alternative)
        power = [
            {
                "theta": th,
                "semi_private": tst.power(th, margins, alpha),
                "naive_dp": naive.power(th, margins, alpha),
                "non_private": (
                    fisher_exact_umpu_power(th, margins, alpha, theta0)
                    if alternative == "greater"
                    else None
                ),
            }
            for th in power_at or []
        ]
    except ValueError as exc:
        fail(str(exc))
    payload = res.to_dict()
    if power:
        payload["power"] = power
    if as_json:
        print_json(payload)
        return
    from rich.console import Console

    con = Console()
    con.print(f"released statistic T = x₁₁ + noise = {res.statistic:.4f}")
    con.print(
        f"p-value = {res.p_value:.4g}; critical value m = {res.critical_value:.4f}; "
        f"{'REJECT' if res.reject else 'do not reject'} H₀ at α = {alpha:g}"
    )
    con.print(f"guarantee: {res.guarantee}")
    for p in power:
        con.print(
            f"power at θ = {p['theta']:g}: semi-private {p['semi_private']:.4f}, "
            f"naive DP {p['naive_dp']:.4f}"
        )
    if not res.private:
        con.print("[bold red]NOT PRIVATE: produced with a test seed[/]")
