"""``privtab invariants``: Semi-DP accounting, invariant-aware table release, semi-private test.

* ``census`` — seed §6.1: what ρ-zCDP becomes when counts are published exactly.
* ``table``  — release an r × c table keeping its one-way margins exact.
* ``test``   — the semi-private UMPU test for the odds ratio of a 2 × 2 table.
"""

from __future__ import annotations

import csv
import json
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


# --------------------------------------------------------------------------- parsing
def _parse_counts(text: str, what: str) -> list[list[int]]:
    rows = [r for r in text.replace("\n", ";").split(";") if r.strip()]
    if not rows:
        fail(f"{what}: no counts given")
    out: list[list[int]] = []
    for i, row in enumerate(rows, start=1):
        cells = [c.strip() for c in row.split(",")]
        vals = []
        for j, c in enumerate(cells, start=1):
            vals.append(_count(c, f"{what}: row {i}, column {j}"))
        out.append(vals)
    _rectangular(out, what)
    return out


def _count(text: str, where: str) -> int:
    try:
        v = int(text)
    except ValueError:
        fail(f"{where}: {text!r} is not an integer count")
    if v < 0:
        fail(f"{where}: count {v} is negative")
    return v


def _rectangular(rows: list[list[int]], what: str) -> None:
    width = len(rows[0])
    for i, r in enumerate(rows, start=1):
        if len(r) != width:
            fail(f"{what}: row {i} has {len(r)} cells, row 1 has {width}")


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _read_csv_table(path: Path) -> tuple[list[list[int]], list[str] | None, list[str] | None]:
    """Counts from a CSV file; an optional header row and first label column are detected."""
    if not path.is_file():
        fail(f"{path}: no such file")
    with path.open(newline="", encoding="utf-8") as fh:
        raw = [row for row in csv.reader(fh) if any(c.strip() for c in row)]
    if not raw:
        fail(f"{path}: the file holds no rows")
    col_labels: list[str] | None = None
    if not all(_is_int(c.strip()) for c in raw[0][1:]):
        col_labels = [c.strip() for c in raw[0]]
        raw = raw[1:]
    if not raw:
        fail(f"{path}: the file has a header but no counts")
    row_labels: list[str] | None = None
    if not all(_is_int(r[0].strip()) for r in raw):
        row_labels = [r[0].strip() for r in raw]
        raw = [r[1:] for r in raw]
        if col_labels is not None:
            col_labels = col_labels[1:]
    rows = []
    offset = 1 + (col_labels is not None)
    for i, r in enumerate(raw):
        rows.append(
            [
                _count(c.strip(), f"{path}: line {i + offset}, column {j + 1}")
                for j, c in enumerate(r)
            ]
        )
    _rectangular(rows, str(path))
    if col_labels is not None and len(col_labels) != len(rows[0]):
        fail(f"{path}: the header has {len(col_labels)} labels for {len(rows[0])} columns")
    return rows, row_labels, col_labels


def _load_table(counts: str | None, input_path: Path | None) -> list[list[int]]:
    if (counts is None) == (input_path is None):
        fail("give the table with exactly one of --counts 'a,b;c,d' or --input FILE.csv")
    if counts is not None:
        return _parse_counts(counts, "--counts")
    assert input_path is not None
    return _read_csv_table(input_path)[0]


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
    # this command has just said so on stderr: silence the library's duplicate warning
    from privtab.mechanisms import InsecureReleaseWarning

    warnings.filterwarnings("ignore", category=InsecureReleaseWarning)
    return SeededSource(seed)


# --------------------------------------------------------------------------- census
def _invariant_from_spec(spec: str) -> tuple[str, Any]:
    """(description, SemiAdjacency) for an --invariant specification."""
    from privtab.invariants import (
        CountInvariant,
        Schema,
        SemiAdjacency,
        histogram_from_records,
        semi_adjacent_parameter,
        theorem16_bound,
    )

    s = spec.strip()
    if s == "state-totals":
        return (
            "total population of each state (one-way margin of one feature, seed §6.1)",
            SemiAdjacency(
                2, True, 2, 2, "Theorem 16 with k = 1 (two or more states are non-empty)"
            ),
        )
    if s == "full-table":
        return (
            "every cell of the full cross-classification (Remark 17)",
            SemiAdjacency(2, True, 2, 2, "Remark 17: all cells published (two or more non-empty)"),
        )
    if s.startswith("margins:"):
        try:
            k = int(s.split(":", 1)[1])
        except ValueError:
            fail(f"--invariant {spec!r}: expected margins:K with K the number of features")
        if k < 1:
            fail(f"--invariant {spec!r}: K must be at least 1")
        up = theorem16_bound(k)
        return (
            f"one-way margins of {k} feature(s) (counts not given: Theorem 16 upper bound)",
            SemiAdjacency(
                up, k == 1, 2 if k > 1 else up, up, f"Theorem 16 bound k + 1 with k = {k}"
            ),
        )
    path = Path(s)
    if not path.is_file():
        fail(
            f"--invariant {spec!r}: not one of state-totals, full-table, margins:K, or an existing "
            "JSON file describing the invariant"
        )
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        fail(f"{path}: not valid JSON ({exc})")
    if not isinstance(doc, dict) or "features" not in doc:
        fail(f'{path}: expected an object with "features" and "invariant"')
    try:
        schema = Schema(doc["features"])
        kind = doc.get("invariant", "one-way-margins")
        hist = None
        if "records" in doc:
            hist = histogram_from_records(schema, doc["records"])
        elif "table" in doc:
            hist = doc["table"]
        if kind == "one-way-margins":
            inv = (
                CountInvariant.one_way_margins(schema, hist)
                if hist is not None
                else CountInvariant.one_way_margins(schema, margins=doc.get("margins"))
            )
        elif kind == "full-table":
            if hist is None:
                fail(f'{path}: the full-table invariant needs "table" or "records"')
            inv = CountInvariant.full_table(schema, hist)
        elif isinstance(kind, dict) and "queries" in kind:
            inv = CountInvariant.from_queries(
                schema, kind["queries"], hist, values=doc.get("values"), n=doc.get("n")
            )
        else:
            fail(
                f'{path}: "invariant" must be "one-way-margins", "full-table" '
                'or {"queries": [...]}'
            )
        res = semi_adjacent_parameter(inv, max_datasets=int(doc.get("max_datasets", 2000)))
    except (ValueError, TypeError, KeyError) as exc:
        fail(f"{path}: {exc}")
    return inv.describe(), res


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
        description, res = _invariant_from_spec(invariant)
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
    rows = _load_table(counts, input_path)
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
        rel = mech.release(
            x, source=_source(seed), allow_insecure=seed is not None, integer=integer
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

    from privtab.invariants import (
        GaussianCND,
        Margins2x2,
        OddsRatioTest,
        TulapCND,
        fisher_exact_umpu_power,
        naive_test,
    )

    rows = _load_table(counts, input_path)
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
        res = tst.run(x, alpha, source=_source(seed), allow_insecure=seed is not None)
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
