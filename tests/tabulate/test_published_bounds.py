"""Every place a privacy bound is printed states it exactly or rounded up (issue 31).

The same guarantee used to be printed four ways — ``ρ = 4.9441`` (report.html), ``4.94401``
(``privtab semantics --release``), ``4.944`` (plan, validate, ledger) for the exact 618/125
— and ``ε ≤ 24.4`` in ``repr(Release)`` where ε is 24.40195: false as an upper bound. The
rule now: a ρ or ε known exactly (a budget, a composed total) is printed exactly when it is
a short decimal, else rounded *up* (:func:`privtab.accounting.exact.exact_or_up`); a bound
known as a float (an ε at δ) is rounded up (:func:`privtab.report.round_up_sig`).

This sweeps every surface that prints a bound — the CLI tables of ``safetab plan``,
``validate``, ``safetab run``, ``ledger show``, ``semantics --release``, ``account``, the
``repr`` and HTML of :class:`privtab.safetab.Release` and :class:`privtab.safetab.Plan`,
``report.html`` and the semantics HTML report — for one private release whose budgets are
chosen so that rounding to nearest goes *down* (``2.1341231`` → ``2.13412`` at 6 digits).
Every printed decimal within 0.5 % of a known value must be at least that value (a float
within two units in its last place), and an exactly known value that is a short decimal
must be printed as exactly that decimal.
"""

from __future__ import annotations

import html
import json
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from typer.testing import CliRunner

from privtab.cli import app
from tests.tabulate.conftest import demo_params

runner = CliRunner()
STATES = ["10", "72"]  # DE and Puerto Rico: every level of both runs, a small domain
BUDGETS = {
    "privacy_budget_p_level_2_usa": 2.1341231,
    "privacy_budget_p_level_2_state": 0.1590001,
    "privacy_budget_p_level_2_pr_state": 2.1341231,
}
"""Budgets whose 6-digit nearest rounding is below them (the rest: production)."""
_DECIMAL = re.compile(r"(?<![\w.])\d[\d,]*\.\d+(?:e[-+]?\d+)?(?![\w.])", re.I)


@pytest.fixture(scope="module")
def surfaces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from privtab.data.synth import synthesize

    root = tmp_path_factory.mktemp("bounds")
    synthesize(root / "data", 300, states=STATES, seed=7)
    config = demo_params(root / "params", STATES, **BUDGETS)
    rel, ledger = root / "release", root / "ledger.json"

    def cli(*args: str) -> str:
        res = runner.invoke(app, list(args), env={"COLUMNS": "200"})
        assert res.exit_code == 0, res.output
        return res.stdout + res.stderr

    out = {
        "safetab run": cli("safetab", "run", "--data", str(root / "data"), "--config",
                           str(config), "--out", str(rel), "--ledger", str(ledger),
                           "--pld-grid", "0.01", "--quiet"),
        "safetab plan": cli("safetab", "plan", "--config", str(config), "--pld-grid", "0.01"),
        "validate": cli("validate", "--data", str(root / "data"), "--config", str(config),
                        "--quiet"),
        "ledger show": cli("ledger", "show", "--ledger", str(ledger)),
        "semantics --release": cli("semantics", "--release", str(rel), "--html",
                                   str(root / "semantics.html")),
    }  # fmt: skip
    doc = json.loads((rel / "release.json").read_text())
    rho = Fraction(doc["guarantee"]["zcdp"]["rho_exact"])
    out["account"] = cli("account", "--zcdp", f"{float(rho)!r}")
    out["report.html"] = _text((rel / "report.html").read_text())
    out["semantics.html"] = _text((root / "semantics.html").read_text())
    import privtab.safetab as st

    r = st.Release.open(rel, config=config)
    p = st.plan(config)
    out["repr(Release)"] = repr(r)
    out["Release._repr_html_"] = _text(r._repr_html_())
    out["repr(Plan)"] = repr(p)
    out["Plan._repr_html_"] = _text(p._repr_html_())
    plan_json = _json_of(["safetab", "plan", "--config", str(config), "--pld-grid", "0.01",
                          "--json"])  # fmt: skip
    account_json = _json_of(["account", "--zcdp", f"{float(rho)!r}", "--json"])
    exact: set[Fraction] = {rho, p.guarantee.value}
    floats: set[float] = {r.epsilon(1e-10), p.epsilon()}
    for run in doc["runs"].values():
        exact.add(Fraction(run["guarantee"]["zcdp"]["rho_exact"]))
        exact |= {Fraction(lv["budget_exact"]) for lv in run["levels"]}
        floats |= {float(a["epsilon"]) for a in run["privacy"].values()}
    floats |= {float(v) for v in plan_json["epsilon"].values()}
    floats |= {float(v) for v in account_json["epsilon"].values()}
    exact |= {Fraction(str(v)) for v in BUDGETS.values()}
    return {"texts": out, "exact": exact, "floats": floats, "rho": rho}


def _json_of(args: list[str]) -> dict[str, Any]:
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def _text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def _renders(shown: Decimal, exact: set[Fraction], floats: set[float]) -> bool:
    """Whether ``shown`` is a valid rendering of some known value: an exact value that is
    a short decimal printed as exactly that decimal, another exact value rounded up (by
    less than 1 %), a float bound rounded up (or within two units in its last place)."""
    import math

    for v in exact:
        dv = Decimal(v.numerator) / Decimal(v.denominator)
        short = _short(v)
        if short is not None and shown == short:
            return True
        if short is None and dv <= shown <= dv * Decimal("1.01"):
            return True
    return any(
        Decimal(f) - 2 * Decimal(math.ulp(f)) <= shown <= Decimal(f) * Decimal("1.01")
        for f in floats
    )


def _violations(text: str, exact: set[Fraction], floats: set[float]) -> tuple[list[str], int]:
    """Printed decimals within 0.5 % of a known value that are no valid rendering of any
    known value (below it, or a short exact value printed otherwise); and how many
    printed decimals stand for a known value."""
    known = [Decimal(v.numerator) / Decimal(v.denominator) for v in exact]
    known += [Decimal(f) for f in floats]
    bad: list[str] = []
    matched = 0
    for m in _DECIMAL.finditer(text):
        shown = Decimal(m.group().replace(",", ""))
        if not any(k > 0 and abs(shown - k) <= k * Decimal("0.005") for k in known):
            continue
        matched += 1
        if not _renders(shown, exact, floats):
            context = text[max(0, m.start() - 50) : m.end() + 10].replace("\n", " ")
            bad.append(f"{m.group()}: …{context}…")
    return bad, matched


def _short(v: Fraction) -> Decimal | None:
    d = Decimal(v.numerator) / Decimal(v.denominator)
    return d if Fraction(d) == v and len(d.normalize().as_tuple().digits) <= 6 else None


SURFACES = ["safetab run", "safetab plan", "validate", "ledger show", "semantics --release",
            "account", "report.html", "semantics.html", "repr(Release)", "Release._repr_html_",
            "repr(Plan)", "Plan._repr_html_"]  # fmt: skip


@pytest.mark.parametrize("surface", SURFACES)
def test_every_printed_bound_is_exact_or_rounded_up(surfaces: dict[str, Any], surface: str) -> None:
    text = surfaces["texts"][surface]
    bad, matched = _violations(text, surfaces["exact"], surfaces["floats"])
    assert not bad, "\n".join(bad)
    assert matched, f"{surface} printed no bound at all (the sweep would be vacuous):\n{text}"


def test_the_guarantee_reads_the_same_everywhere(surfaces: dict[str, Any]) -> None:
    """The release's ρ (not a short decimal here) is printed one way wherever it is."""
    from privtab.accounting.exact import exact_or_up

    shown = exact_or_up(surfaces["rho"])
    assert Fraction(shown) > surfaces["rho"]  # rounded up, not to nearest
    for name in ("safetab run", "ledger show", "semantics --release", "report.html",
                 "semantics.html", "repr(Release)"):  # fmt: skip
        assert shown in surfaces["texts"][name], name
