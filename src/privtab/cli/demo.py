"""``privtab demo``: the main job on built-in data (README command one)."""

from __future__ import annotations

import typer

from privtab.cli._common import print_json


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)


def demo(as_json: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """Run the built-in demonstration.

    Until the SafeTab engine lands this is the accounting demo: the 2020 production
    SafeTab-P budget (ρ = 4.944) and the SafeTab paper's Table 2, by every conversion.
    """
    from privtab.accounting import ZCDP
    from privtab.accounting.summary import epsilon_by_method

    rows = {
        "2020 SafeTab-P US production (rho=4.944)": ZCDP(4.944),
        "SafeTab paper Table 2 (rho=1.4071)": ZCDP(1.407062038567493),
        "2020 TopDown persons+housing (rho=2.63)": ZCDP(2.63),
    }
    result = {name: epsilon_by_method(g, 1e-10) for name, g in rows.items()}
    if as_json:
        print_json(
            {
                "delta": 1e-10,
                "results": {k: {m: v["epsilon"] for m, v in r.items()} for k, r in result.items()},
            }
        )
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title="privtab accounting demo: ε at δ = 1e-10")
    t.add_column("release")
    for m in ("analytic", "grid", "optimal"):
        t.add_column(m, justify="right")
    for name, r in result.items():
        t.add_row(name, *(f"{r[m]['epsilon']:.4f}" for m in ("analytic", "grid", "optimal")))
    Console().print(t)
