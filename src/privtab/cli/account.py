"""``privtab account``: convert and compose privacy guarantees."""

from __future__ import annotations

import typer

from privtab.cli._render import JsonOption, emit, usage_errors


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
    as_json: JsonOption = False,
) -> None:
    """Convert a privacy guarantee to (ε, δ) by every applicable method.

    Example: privtab account --zcdp 2.63 --delta 1e-10
    """
    from privtab.accounting.summary import account_given, account_table

    given = {"zcdp": zcdp, "pure": pure, "gdp": gdp, "rdp_geometric": rdp_geometric}
    with usage_errors():
        result = account_given(given, delta, compose=compose, group=group)
    emit(result, as_json, [account_table(result)])
