"""The guarantee of every production run against its signed certificate: ρ exact, ε by the
zCDP conversions and the privacy-loss distribution, Semi-DP, per attribute and per
geography (semantics seed Tables 3–5 as a second source), the bypass's block patterns —
and ``privtab topdown plan``."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privtab.accounting import zcdp_epsilon
from privtab.cli import app
from privtab.invariants import census_semi_dp
from privtab.semantics.allocation import builtin_allocation
from privtab.topdown.guarantee import allocation, float_up, guarantee, round_up
from privtab.topdown.inputs import block_units
from privtab.topdown.planning import plan
from privtab.topdown.spine import budget_shares, us_spine
from privtab.topdown.strategy import production_strategy
from tests.topdown._support import certificate, population

RUNS = {"us": "US-Persons", "pr": "PR-Persons", "units": "US-Units", "units-pr": "PR-Units"}


@pytest.mark.parametrize("run", sorted(RUNS))
def test_the_guarantee_is_the_certificates(run: str) -> None:
    s = production_strategy(run)
    cert = certificate(RUNS[run])
    g = guarantee(s, pld=False)
    assert g.rho == cert.rho
    assert g.delta == cert.delta
    # the certificates print the Canonne–Kamath–Steinke ("optimal") conversion
    assert round(g.epsilon["optimal"], 2) == round(float(cert.epsilon), 2)
    assert g.epsilon["optimal"] == pytest.approx(float(cert.epsilon), abs=1e-4)
    assert {a: round(e, 2) for a, e in g.epsilon_per_attribute.items()} == cert.per_attribute
    assert {k: round(e, 2) for k, e in g.epsilon_per_geography.items()} == cert.per_geography
    assert g.epsilon["optimal"] <= g.epsilon["analytic"]


def test_per_attribute_rho_by_direct_summation() -> None:
    s = production_strategy("us")
    attrs = {"hhinstlevels": {"hhgq"}, "detailed": {"hhgq", "votingage", "hispanic", "cenrace"},
             "total": set()}  # fmt: skip
    expected: dict[str, Fraction] = {}
    for a in ("hhgq", "votingage", "hispanic", "cenrace"):
        total = Fraction(0)
        for lv in s.levels:
            for q in s.queries(lv):
                involved = attrs.get(q, {p.strip() for p in q.split("*")})
                if a in involved:
                    total += 1 / s.sigma2(lv, q)
        expected[a] = total
    assert guarantee(s, pld=False).per_attribute == expected
    # Block-within-Tract: every query at Block_Group and Block
    within = sum(
        (1 / s.sigma2(lv, q) for lv in ("Block_Group", "Block") for q in s.queries(lv)), Fraction(0)
    )
    assert guarantee(s, pld=False).per_geography["Block-within-Tract"] == within


def test_the_seeds_tables_give_the_same_proportions() -> None:
    """semantics seed Tables 3–5 (privtab's built-in allocation, ρ rounded to 2.56 there)."""
    seed = builtin_allocation()
    s = production_strategy("us")
    names = dict(zip(seed.levels, s.levels, strict=True))  # CBG ↔ Block_Group
    geo = seed.geography_proportions("persons")
    assert {names[k]: v for k, v in geo.items()} == dict(s.geolevel_shares)
    for q, shares in seed.query_proportions("persons").items():
        ours = "detailed" if q.startswith("HHGQ x") else q.lower().replace(" x ", " * ")
        for lv, v in shares.items():
            assert s.query_shares[names[lv]].get(ours, Fraction(0)) == v, (q, lv)
    units = production_strategy("units")
    assert {names[k]: v for k, v in seed.geography_proportions("housing").items()} == dict(
        units.geolevel_shares
    )
    assert allocation(s).rho_per_block()["total"] == s.rho


def test_pld_bounds_and_semi_dp() -> None:
    s = production_strategy("us")
    g = guarantee(s)
    assert g.epsilon["pld_lower"] <= g.epsilon["pld"] <= g.epsilon["optimal"]
    assert g.epsilon["pld"] - g.epsilon["pld_lower"] < 0.1
    semi = census_semi_dp(float_up(s.rho), 2, 1e-10)
    assert g.rho_semi == 4 * s.rho
    assert g.semi_adjacent == 2
    assert g.epsilon_semi["optimal"] == semi.epsilon_semi_optimal
    assert g.epsilon_semi["optimal"] == pytest.approx(
        float(zcdp_epsilon(float(4 * s.rho), 1e-10)), rel=1e-9
    )


def test_with_a_spine_every_block_pattern_keeps_rho() -> None:
    pop = population(51)
    sp = us_spine(pop.grfc, block_units(pop.units))
    s = production_strategy("us")
    shares = budget_shares(sp.hierarchy, s.geolevel_shares)
    g = guarantee(s, shares, pld=False)
    nominal = guarantee(s, pld=False)
    assert g.rho == nominal.rho
    assert g.block_patterns > 1
    assert g.blocks_checked == sp.hierarchy.size("Block")
    for a, r in nominal.per_attribute.items():
        assert g.per_attribute[a] >= r  # the worst block pattern, at least the nominal one


def test_published_numbers_are_rounded_up_with_the_exact_value_beside() -> None:
    assert round_up(Fraction(293764, 114921)) == 2.556226 > 293764 / 114921
    assert round_up(Fraction(1, 2)) == 0.5
    assert float_up(Fraction(1, 3)) >= Fraction(1, 3)
    d = guarantee(production_strategy("units"), pld=False).to_dict()
    assert d["rho"] == {"exact": "11417641/152349649", "value": 0.074944}
    assert d["record"] == "housing unit"
    assert d["semi_dp"]["invariant"] == "block totals"


runner = CliRunner()


def test_plan_command_json_and_table(tmp_path: Path) -> None:
    res = runner.invoke(app, ["topdown", "plan", "--run", "us", "--json", "--no-pld"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["guarantee"]["rho"]["exact"] == "293764/114921"
    assert len(doc["queries"]) == 65
    assert doc["levels"][0]["level"] == "US"
    detailed = next(q for q in doc["queries"] if q["level"] == "Block" and q["query"] == "detailed")
    s = production_strategy("us")
    assert detailed["sigma2"] == str(s.sigma2("Block", "detailed"))
    assert sum(Fraction(lv["rho"]["exact"]) for lv in doc["levels"]) == s.rho
    assert doc == plan("us", pld=False).to_dict()
    human = runner.invoke(app, ["topdown", "plan", "--run", "units-pr"])
    assert human.exit_code == 0
    assert "11417641/152349649" in human.stdout
    bad = runner.invoke(app, ["topdown", "plan", "--run", "mars"])
    assert bad.exit_code == 2
    assert "--run must be one of" in bad.output
    f = tmp_path / "s.json"
    doc2 = production_strategy("pr").to_dict()
    doc2["query_shares"]["Tract"]["total"] = "1/2"
    f.write_text(json.dumps(doc2))
    res = runner.invoke(app, ["topdown", "plan", "--strategy", str(f), "--json"])
    assert res.exit_code == 1
    err = json.loads(res.stdout)["error"]
    assert err["file"] == str(f)
    assert err["column"] == "query_shares.Tract"
