"""``privtab ledger show|set-lifetime|settle``: the confidential ledger of releases.

The ledger (:mod:`privtab.accounting.odometer`) records every private release of a data set
and composes them; ``privtab safetab run`` checks it before each release. These commands
read it, set lifetime budgets, and settle releases left pending by an interrupted run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from privtab._options import open_unit
from privtab.cli._render import DeltaOption, JsonOption, emit, fail, group

if TYPE_CHECKING:
    from privtab.accounting.odometer import ReleaseLedger

ledger_app = group("The confidential ledger of releases: composed guarantees and lifetime budgets.")

LedgerPath = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        help="Ledger file (default: $PRIVTAB_LEDGER, else ~/.local/state/privtab/ledger.json).",
    ),
]


def register(app: typer.Typer) -> None:
    app.add_typer(ledger_app, name="ledger")


def _open(path: str | None) -> ReleaseLedger:
    from privtab.accounting.odometer import ReleaseLedger

    return ReleaseLedger.open(None if path is None else Path(path))


@ledger_app.command("show")
def show_cmd(
    ledger_path: LedgerPath = None,
    dataset: str | None = typer.Option(
        None, "--dataset", help="Only this data set (its key, or a prefix of it)."
    ),
    delta: DeltaOption = 1e-10,
    as_json: JsonOption = False,
) -> None:
    """Every recorded release and, per data set, the composed guarantee: ρ (exact), ε
    (pure DP) and ε at δ by each zCDP conversion, with the lifetime budget and what is left.

    Example: privtab ledger show --json
    """
    from privtab.accounting.ledger_view import ledger_tables, resolve_dataset

    open_unit("--delta", delta)
    ledger = _open(ledger_path)
    summary = ledger.summary(delta, resolve_dataset(ledger, dataset))
    head, tables = ledger_tables(summary)
    emit(summary, as_json, tables, head=head)


@ledger_app.command("set-lifetime")
def set_lifetime_cmd(
    rho: str | None = typer.Option(None, "--rho", help="Lifetime ρ-zCDP budget (exact: 1.5, 3/2)."),
    epsilon: str | None = typer.Option(None, "--epsilon", help="Lifetime pure ε-DP budget."),
    clear: bool = typer.Option(False, "--clear", help="Remove the lifetime budget."),
    dataset: str | None = typer.Option(
        None, "--dataset", help="For this data set only (default: every data set without one)."
    ),
    ledger_path: LedgerPath = None,
    as_json: JsonOption = False,
) -> None:
    """Set the lifetime budget that ``safetab run`` checks every release against.

    Values are read exactly as written (0.1 is 1/10). Example: privtab ledger set-lifetime --rho 10
    """
    from privtab.accounting.ledger_view import lifetime_budget, resolve_dataset

    g = lifetime_budget(rho, epsilon, clear)
    ledger = _open(ledger_path)
    key = resolve_dataset(ledger, dataset)
    ledger.set_lifetime(g, key)
    lifetime = None if g is None else dict(g.to_dict())
    doc = {"ledger": str(ledger.path), "dataset": key, "lifetime": lifetime}
    target = "default" if key is None else key
    done = "cleared" if g is None else f"{g}"
    emit(doc, as_json, [], lines=[f"{ledger.path}: lifetime budget ({target}) {done}"])


@ledger_app.command("settle")
def settle_cmd(
    entry_id: str = typer.Argument(..., help="The pending release's id (from ledger show)."),
    published: bool | None = typer.Option(
        None,
        "--published/--not-published",
        help="Whether the release was published (look at its path first).",
    ),
    release: str | None = typer.Option(None, "--release", help="Its final path, if moved."),
    ledger_path: LedgerPath = None,
) -> None:
    """Settle a release left pending by an interrupted run.

    A pending release counts as spent until settled. --published keeps it for good (only if
    the folder at its path is the one its run wrote); --not-published removes it (refused
    while its own folder is there). `privtab ledger show` and every later run print the
    command to use.
    """
    if published is None:
        fail("say whether the release was published: --published or --not-published")
    ledger = _open(ledger_path)
    done = ledger.settle(entry_id, published=published, release=release)
    if done is None:
        typer.echo(f"{ledger.path}: pending release {entry_id} removed (not published)")
    else:
        typer.echo(f"{ledger.path}: release {entry_id} recorded as published ({done.release})")
