"""``privtab ledger show|set-lifetime|settle``: the confidential ledger of releases.

The ledger (:mod:`privtab.accounting.odometer`) records every private release of a data set
and composes them; ``privtab safetab run`` checks it before each release. These commands
read it, set lifetime budgets, and settle releases left pending by an interrupted run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from privtab.cli._render import fail, print_json

if TYPE_CHECKING:
    from privtab.accounting.odometer import ReleaseLedger

ledger_app = typer.Typer(
    help="The confidential ledger of releases: composed guarantees and lifetime budgets.",
    no_args_is_help=True,
)

_LEDGER_HELP = "Ledger file (default: $PRIVTAB_LEDGER, else ~/.local/state/privtab/ledger.json)."


def register(app: typer.Typer) -> None:
    app.add_typer(ledger_app, name="ledger")


def _open(path: str | None) -> ReleaseLedger:
    from privtab.accounting.odometer import ReleaseLedger
    from privtab.errors import UserError

    try:
        return ReleaseLedger.open(None if path is None else Path(path))
    except UserError as err:
        fail(str(err), err.exit_code)


def _dataset_key(ledger: ReleaseLedger, given: str | None) -> str | None:
    """``given`` itself, or the one recorded key it is a prefix of (e.g. the short form
    ``sha256:1a2b3c4d5e6f`` that ``show`` prints)."""
    if given is None:
        return None
    keys = ledger.datasets()
    if given in keys:
        return given
    matches = [k for k in keys if k.startswith(given)]
    if len(matches) > 1:
        fail(f"--dataset {given!r} matches {len(matches)} data sets; give more of the key")
    return matches[0] if matches else given


@ledger_app.command("show")
def show_cmd(
    ledger_path: str | None = typer.Option(None, "--ledger", help=_LEDGER_HELP),
    dataset: str | None = typer.Option(
        None, "--dataset", help="Only this data set (its key, or a prefix of it)."
    ),
    delta: float = typer.Option(1e-10, "--delta", help="δ of the (ε, δ) conversions."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Every recorded release and, per data set, the composed guarantee: ρ (exact), ε
    (pure DP) and ε at δ by each zCDP conversion, with the lifetime budget and what is left.

    Example: privtab ledger show --json
    """
    if not 0 < delta < 1:
        fail(f"--delta must lie strictly between 0 and 1, got {delta}")
    ledger = _open(ledger_path)
    summary = ledger.summary(delta, _dataset_key(ledger, dataset))
    if as_json:
        print_json(summary)
        return
    _print_summary(summary)


def _print_summary(s: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from privtab.accounting.odometer import short_key

    console = Console()
    if not s["exists"]:
        console.print(f"no ledger at {s['ledger']} yet: no release has been recorded")
        return
    console.print(f"ledger {s['ledger']}", overflow="fold")
    default = s["lifetime"]["default"]
    if default is not None:
        console.print(f"default lifetime budget: {_g(default)}")
    if not s["datasets"]:
        console.print("no release has been recorded")
    for d in s["datasets"]:
        key = d["dataset"]
        mine = [e for e in s["releases"] if e["dataset"] == key]
        caption = (
            "* recorded past the lifetime budget (--allow-more-releases)"
            if any(e["over_lifetime"] for e in mine)
            else None
        )
        t = Table(
            title=f"data set {short_key(key)}",
            title_justify="left",
            caption=caption,
            caption_justify="left",
        )
        t.add_column("id", no_wrap=True)
        t.add_column("when (UTC)", no_wrap=True)
        t.add_column("guarantee", no_wrap=True)
        t.add_column("status", no_wrap=True)
        t.add_column("release", overflow="fold", min_width=12)
        for e in mine:
            if e["dataset"] == key:
                t.add_row(
                    e["id"], e["when"][:16].replace("T", " "), _g(e["guarantee"]), _status(e),
                    e["release"],
                )  # fmt: skip
        console.print(t)
        c = Table(title=f"composed ({d['releases']} published, {d['pending']} pending)",
                  title_justify="left")  # fmt: skip
        c.add_column("definition")
        c.add_column("value", justify="right")
        c.add_row("ρ-zCDP", _num(d["rho"]["value_float"], d["rho"]["value"]))
        eps = d["epsilon"]
        if "pure" in eps:
            c.add_row("ε-DP (pure)", _num(eps["pure"], d["composed"]["value"]))
        for method in ("optimal", "analytic", "grid"):
            c.add_row(f"ε at δ = {s['delta']:g} (zCDP, {method})", f"{eps[f'zcdp_{method}']:.4f}")
        if d["lifetime"] is not None:
            c.add_row("lifetime budget", _g(d["lifetime"]))
            rem = d["remaining"]
            c.add_row(
                "remaining",
                "none: zCDP cannot be bounded by pure DP"
                if rem is None
                else f"{'ε' if rem['definition'] == 'pure' else 'ρ'} = {rem['value_float']:.6g}",
            )
        console.print(c)


def _num(value: float, exact: str) -> str:
    return f"{value:.6g}" if "/" not in exact else f"{value:.6g} ({exact})"


def _g(g: dict[str, Any]) -> str:
    sym = "ε" if g["definition"] == "pure" else "ρ"
    return f"{sym} = {g['value_float']:.6g}"


def _status(e: dict[str, Any]) -> str:
    if e["status"] == "pending":
        label = "running" if e.get("process_alive") else "UNCONFIRMED"
    else:
        label = "published"
    return label + ("*" if e["over_lifetime"] else "")


@ledger_app.command("set-lifetime")
def set_lifetime_cmd(
    rho: str | None = typer.Option(None, "--rho", help="Lifetime ρ-zCDP budget (exact: 1.5, 3/2)."),
    epsilon: str | None = typer.Option(None, "--epsilon", help="Lifetime pure ε-DP budget."),
    clear: bool = typer.Option(False, "--clear", help="Remove the lifetime budget."),
    dataset: str | None = typer.Option(
        None, "--dataset", help="For this data set only (default: every data set without one)."
    ),
    ledger_path: str | None = typer.Option(None, "--ledger", help=_LEDGER_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Set the lifetime budget that ``safetab run`` checks every release against.

    Values are read exactly as written (0.1 is 1/10). Example: privtab ledger set-lifetime --rho 10
    """
    from privtab.accounting.exact import ExactGuarantee
    from privtab.errors import UserError

    given = [x for x in (rho, epsilon) if x is not None]
    if len(given) + clear != 1:
        fail("give exactly one of --rho, --epsilon, --clear")
    g: ExactGuarantee | None = None
    try:
        if rho is not None:
            g = ExactGuarantee.zcdp(rho)
        elif epsilon is not None:
            g = ExactGuarantee.pure(epsilon)
    except ValueError as exc:
        fail(f"{'--rho' if rho is not None else '--epsilon'}: {exc}")
    if g is not None and g.value == 0:
        fail("a lifetime budget must be positive (use --clear to remove one)")
    ledger = _open(ledger_path)
    key = _dataset_key(ledger, dataset)
    try:
        ledger.set_lifetime(g, key)
    except UserError as err:
        fail(str(err), err.exit_code)
    target = "default" if key is None else key
    if as_json:
        print_json({"ledger": str(ledger.path), "dataset": key, "lifetime": _maybe(g)})
        return
    typer.echo(f"{ledger.path}: lifetime budget ({target}) " + ("cleared" if g is None else f"{g}"))


def _maybe(g: Any) -> dict[str, Any] | None:
    return None if g is None else dict(g.to_dict())


@ledger_app.command("settle")
def settle_cmd(
    entry_id: str = typer.Argument(..., help="The pending release's id (from ledger show)."),
    published: bool | None = typer.Option(
        None,
        "--published/--not-published",
        help="Whether the release was published (look at its path first).",
    ),
    release: str | None = typer.Option(None, "--release", help="Its final path, if moved."),
    ledger_path: str | None = typer.Option(None, "--ledger", help=_LEDGER_HELP),
) -> None:
    """Settle a release left pending by an interrupted run.

    A pending release counts as spent until settled. --published keeps it for good;
    --not-published removes it (only if no release from that run exists anywhere).
    """
    from privtab.errors import UserError

    if published is None:
        fail("say whether the release was published: --published or --not-published")
    ledger = _open(ledger_path)
    try:
        done = ledger.settle(entry_id, published=published, release=release)
    except UserError as err:
        fail(str(err), err.exit_code)
    if done is None:
        typer.echo(f"{ledger.path}: pending release {entry_id} removed (not published)")
    else:
        typer.echo(f"{ledger.path}: release {entry_id} recorded as published ({done.release})")
