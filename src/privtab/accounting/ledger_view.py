"""What ``privtab ledger show`` prints: the ledger summary as headline lines and tables.

:meth:`privtab.accounting.odometer.ReleaseLedger.summary` is the JSON-ready form; here
each data set's releases and composed guarantee become tables (spent privacy rounded up,
as in the summary). :func:`resolve_dataset` reads the short keys ``show`` prints;
:func:`lifetime_budget` the budget ``set-lifetime`` is given.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

from privtab.accounting.exact import exact_or_up
from privtab.errors import UsageError
from privtab.report import round_up_sig

if TYPE_CHECKING:
    from privtab.accounting.exact import ExactGuarantee
    from privtab.accounting.odometer import ReleaseLedger
    from privtab.report.text import Table

__all__ = ["ledger_tables", "lifetime_budget", "resolve_dataset"]


def resolve_dataset(ledger: ReleaseLedger, given: str | None) -> str | None:
    """``given`` itself, or the one recorded key it is a prefix of (e.g. the short form
    ``sha256:1a2b3c4d5e6f`` that ``show`` prints)."""
    if given is None:
        return None
    keys = ledger.datasets()
    if given in keys:
        return given
    matches = [k for k in keys if k.startswith(given)]
    if len(matches) > 1:
        raise UsageError(
            f"--dataset {given!r} matches {len(matches)} data sets; give more of the key"
        )
    return matches[0] if matches else given


def lifetime_budget(rho: str | None, epsilon: str | None, clear: bool) -> ExactGuarantee | None:
    """``privtab ledger set-lifetime``: the budget given as exactly one of ``rho``,
    ``epsilon`` (read exactly: "0.1" is 1/10) or ``clear`` (``None``). Raises
    :class:`privtab.errors.UsageError` naming the flag of a bad or missing value."""
    from privtab.accounting.exact import ExactGuarantee

    given = [x for x in (rho, epsilon) if x is not None]
    if len(given) + clear != 1:
        raise UsageError("give exactly one of --rho, --epsilon, --clear")
    g: ExactGuarantee | None = None
    try:
        if rho is not None:
            g = ExactGuarantee.zcdp(rho)
        elif epsilon is not None:
            g = ExactGuarantee.pure(epsilon)
    except ValueError as exc:
        raise UsageError(f"{'--rho' if rho is not None else '--epsilon'}: {exc}") from None
    if g is not None and g.value == 0:
        raise UsageError("a lifetime budget must be positive (use --clear to remove one)")
    return g


def _num(value: float, exact: str) -> str:
    """An exact value (``"618/125"``) as published: exactly when short, else rounded up
    (:func:`privtab.accounting.exact.exact_or_up`), with the fraction beside it (the float
    ``value`` is the same number rounded up: not shown)."""
    shown = exact_or_up(Fraction(exact))
    return f"{shown} ({exact})" if "/" in exact else shown


def guarantee_text(g: dict[str, Any]) -> str:
    """``ρ = 4.944`` / ``ε = 1`` from a guarantee's JSON form (exact, or rounded up)."""
    sym = "ε" if g["definition"] == "pure" else "ρ"
    return f"{sym} = {exact_or_up(Fraction(g['value']))}"


def _status(e: dict[str, Any]) -> str:
    if e["status"] == "pending":
        label = "running" if e.get("process_alive") else "UNCONFIRMED"
    else:
        label = "published"
    return label + ("*" if e["over_lifetime"] else "")


def _where(e: dict[str, Any]) -> str:
    return "(returned to the caller)" if e.get("delivery") == "caller" else str(e["release"])


def _releases(s: dict[str, Any], d: dict[str, Any]) -> Table:
    from privtab.accounting.odometer import short_key
    from privtab.report.text import table

    mine = [e for e in s["releases"] if e["dataset"] in d["keys"]]
    rows = [(e["id"], e["when"][:16].replace("T", " "), guarantee_text(e["guarantee"]),
             _status(e), _where(e)) for e in mine]  # fmt: skip
    notes = []
    if any(e["over_lifetime"] for e in mine):
        notes.append("* recorded past the lifetime budget (--allow-more-releases)")
    for e in mine:
        if e["status"] == "pending" and not e.get("process_alive"):
            notes.append(f"{e['id']} is UNCONFIRMED (counted as spent); settle it: {e['settle']}")
    names = [short_key(k) for k in d["keys"]]
    title = f"data set {names[0]}" + (f" (also {', '.join(names[1:])})" if names[1:] else "")
    cols = ("id", "when (UTC)", "guarantee", "status", "release")
    return table(title, cols, rows, notes, left=5)


def _composed(s: dict[str, Any], d: dict[str, Any]) -> Table:
    from privtab.report.text import table

    rows = [("ρ-zCDP", _num(d["rho"]["value_float"], d["rho"]["value"]))]
    eps = d["epsilon"]
    if "pure" in eps:
        rows.append(("ε-DP (pure)", _num(eps["pure"], d["composed"]["value"])))
    for method in ("optimal", "analytic", "grid"):
        rows.append(
            (f"ε at δ = {s['delta']:g} (zCDP, {method})", round_up_sig(eps[f"zcdp_{method}"]))
        )
    if d["lifetime"] is not None:
        rows.append(("lifetime budget", guarantee_text(d["lifetime"])))
        rem = d["remaining"]
        rows.append((
            "remaining",
            "none: zCDP cannot be bounded by pure DP"
            if rem is None
            else f"{'ε' if rem['definition'] == 'pure' else 'ρ'} = "
            f"{exact_or_up(Fraction(rem['value']))}",
        ))  # fmt: skip
    title = f"composed ({d['releases']} published, {d['pending']} pending)"
    return table(title, ("definition", "value"), rows)


def ledger_tables(s: dict[str, Any]) -> tuple[list[str], list[Table]]:
    """The human form of a ledger summary: headline lines, then per data set its
    releases and composed guarantee."""
    if not s["exists"]:
        return [f"no ledger at {s['ledger']} yet: no release has been recorded"], []
    head = [f"ledger {s['ledger']}"]
    default = s["lifetime"]["default"]
    if default is not None:
        head.append(f"default lifetime budget: {guarantee_text(default)}")
    if not s["datasets"]:
        head.append("no release has been recorded")
    tables = []
    for d in s["datasets"]:
        tables += [_releases(s, d), _composed(s, d)]
    return head, tables
