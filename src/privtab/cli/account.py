"""``privtab account``: convert and compose privacy guarantees."""

from __future__ import annotations

from typing import Any

import typer

from privtab.cli._common import fail, print_json


def register(app: typer.Typer) -> None:
    app.command("account")(account)


def account(
    zcdp: float | None = typer.Option(None, "--zcdp", help="A ρ-zCDP guarantee."),
    pure: float | None = typer.Option(None, "--pure", help="A pure ε-DP guarantee."),
    gdp: float | None = typer.Option(None, "--gdp", help="A μ-GDP guarantee."),
    rdp_geometric: float | None = typer.Option(
        None,
        "--rdp-geometric",
        help="The two-sided geometric mechanism with pure-DP parameter ε (exact RDP curve).",
    ),
    delta: float = typer.Option(1e-10, "--delta", help="δ at which to report ε."),
    compose: int = typer.Option(1, "--compose", min=1, help="Compose N copies."),
    group: int = typer.Option(1, "--group", min=1, help="Group privacy for K records."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Convert a privacy guarantee to (ε, δ) by every applicable method.

    Example: privtab account --zcdp 2.63 --delta 1e-10
    """
    from privtab.accounting import GDP, ZCDP, PureDP, group_privacy
    from privtab.accounting.composition import compose_by_degree
    from privtab.accounting.curves import geometric_rdp
    from privtab.accounting.guarantees import Guarantee
    from privtab.accounting.summary import epsilon_by_method

    given = {
        k: v
        for k, v in {"zcdp": zcdp, "pure": pure, "gdp": gdp, "rdp_geometric": rdp_geometric}.items()
        if v is not None
    }
    if len(given) != 1:
        fail("give exactly one of --zcdp, --pure, --gdp, --rdp-geometric")
    kind, value = next(iter(given.items()))
    if not 0 < delta < 1:
        fail(f"--delta must lie strictly between 0 and 1, got {delta}")
    try:
        g: Guarantee
        if kind == "rdp_geometric":
            # K records change every count by up to K: the exact divergence at shift K.
            g = geometric_rdp(value * group, sensitivity=group)
        else:
            base: Guarantee = (
                ZCDP(value) if kind == "zcdp" else PureDP(value) if kind == "pure" else GDP(value)
            )
            g = group_privacy(base, group) if group > 1 else base
        if compose > 1:
            g = compose_by_degree(g, compose)
        table = epsilon_by_method(g, delta)
    except ValueError as exc:
        fail(str(exc))
    payload: dict[str, Any] = {
        "input": {kind: value, "compose": compose, "group": group},
        "guarantee": str(g),
        "delta": delta,
        "epsilon": {m: r["epsilon"] for m, r in table.items()},
        "alpha": {m: r["alpha"] for m, r in table.items()},
    }
    if kind == "rdp_geometric":
        payload["epsilon"]["pure"] = value * group * compose
    if as_json:
        print_json(payload)
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{g}  at δ = {delta:g}")
    t.add_column("method")
    t.add_column("ε", justify="right")
    t.add_column("order α*", justify="right")
    for m, eps in payload["epsilon"].items():
        a = payload["alpha"].get(m, float("nan"))
        t.add_row(m, f"{eps:.6f}", "" if a != a else f"{a:.4f}")
    Console().print(t)
