"""Fine-grained accounting of the 2020 TopDown allocation (semantics seed §8, Tables 3–5)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from privtab.semantics import builtin_allocation, load_allocation
from privtab.semantics.allocation import AllocationError

# seed-checks, item 8 (values stripped from the seed text, recomputed from Tables 3–5)
SCENARIOS = {
    "A": 0.11150074378640834,
    "B": 0.9259579207302198,
    "C": 1.010290094946216,
    "D": 1.0021514912368974,
    "E": 1.3786839275164668,
    "F": 0.6115914957456827,
    "G": 1.0265114272535467,
    "H": 1.0257854383876845,
}
LEVEL_RHO = {
    "US": 0.06495242742132228,
    "State": 0.8993413027567699,
    "County": 0.279170529397414,
    "Tract": 0.4290607465235423,
    "CBG": 0.7844254696267382,
    "Block": 0.10304952427421323,
}


def test_rho_per_block_is_exactly_2_63() -> None:
    a = builtin_allocation()
    per = a.rho_per_block()
    assert per["persons"] == Fraction("2.56")
    assert per["housing"] == Fraction("0.07")
    assert per["total"] == Fraction(263, 100)


def test_per_level_and_column_sums() -> None:
    a = builtin_allocation()
    by = a.rho_by_level()
    for lv, v in LEVEL_RHO.items():
        assert float(by["persons"][lv]) == pytest.approx(v, abs=1e-12)
        # Table 5 columns sum to exactly 1 at every level
        shares = sum(
            (c.rho for c in a.cells if c.universe == "persons" and c.level == lv), Fraction(0)
        ) / (Fraction("2.56") * by["persons"][lv] / Fraction("2.56"))
        assert shares == 1


def test_seed_text_examples() -> None:
    a = builtin_allocation()
    cell = {(c.query, c.level): c.rho for c in a.cells}
    assert float(cell[("OCCUPANCY STATUS", "County")]) == pytest.approx(0.005975609756097561)
    assert float(cell[("VOTINGAGE x CENRACE", "State")]) == pytest.approx(0.0026341458709009617)


@pytest.mark.parametrize(("name", "rho"), SCENARIOS.items())
def test_scenarios_a_to_h(name: str, rho: float) -> None:
    a = builtin_allocation()
    assert float(a.concern_rho(a.scenarios[name])) == pytest.approx(rho, abs=1e-12)


def test_custom_concern_and_errors() -> None:
    a = builtin_allocation()
    assert a.concern_rho(a.concern(["race"], None)) == a.concern_rho(a.scenarios["C"])
    assert a.concern_rho(a.concern([], "cbg")) == a.concern_rho(a.scenarios["A"])
    assert a.concern_rho(a.concern([], "block")) == 0
    with pytest.raises(AllocationError, match="unknown attribute"):
        a.concern(["religion"], None)
    with pytest.raises(AllocationError, match="unknown level"):
        a.concern([], "planet")


def test_user_csv_and_toml(tmp_path: Path) -> None:
    csv = tmp_path / "alloc.csv"
    csv.write_text(
        "universe,query,attributes,level,rho\n"
        "persons,TOTAL,,Nation,0.5\npersons,RACE,race,Nation,0.25\n"
        "persons,TOTAL,,County,1/4\npersons,RACE,race;age,County,0.5\n"
    )
    a = load_allocation(csv)
    assert a.levels == ("Nation", "County")
    assert a.rho_per_block()["total"] == Fraction(3, 2)
    assert a.concern_rho(a.concern(["race"], None)) == Fraction(3, 4)
    assert a.concern_rho(a.concern([], "Nation")) == Fraction(3, 4)
    bad = tmp_path / "bad.csv"
    bad.write_text("universe,query,attributes,level,rho\npersons,TOTAL,,Nation,abc\n")
    with pytest.raises(AllocationError, match=r"row 2: rho: 'abc'"):
        load_allocation(bad)
    toml = tmp_path / "a.toml"
    toml.write_text(
        'levels = ["A", "B"]\n[[universe]]\nname = "persons"\nrho = "1"\n'
        'geography = { A = "1/2", B = "1/2" }\n[[universe.query]]\nname = "Q"\n'
        'attributes = ["x"]\nshares = { A = "1", B = "1" }\n'
        '[scenario.S]\nattributes = ["x"]\n'
    )
    t = load_allocation(toml)
    assert t.scenario_rhos() == {"S": Fraction(1)}
    toml.write_text(
        'levels = ["A"]\n[[universe]]\nname = "p"\nrho = "1"\ngeography = { B = "1" }\n'
    )
    with pytest.raises(AllocationError, match="geography levels"):
        load_allocation(toml)
    (tmp_path / "x.txt").write_text("x")
    with pytest.raises(AllocationError, match=r"\.toml or \.csv"):
        load_allocation(tmp_path / "x.txt")


# --------------------------------------------------- the published proportions (issue 21)

TABLE4_PERSONS = {
    "US": "104/4099",
    "State": "1440/4099",
    "County": "447/4099",
    "Tract": "687/4099",
    "CBG": "1256/4099",
    "Block": "165/4099",
}
TABLE4_HOUSING = {
    "US": "1/205",
    "State": "1/205",
    "County": "7/82",
    "Tract": "364/1025",
    "CBG": "1759/4100",
    "Block": "99/820",
}


def test_tables_3_to_5_as_exact_fractions() -> None:
    """Semantics seed §8.1: Table 3 bases, Table 4 columns (sum to exactly 1), Table 5
    columns (each level's per-query proportions sum to exactly 1), and the cells' ρ are
    their products (the seed's worked example: VOTINGAGE x CENRACE in a state is
    2.56 × 1440/4099 × 12/4097)."""
    a = builtin_allocation()
    assert a.base_rho("persons") == Fraction("2.56")
    assert a.base_rho("housing") == Fraction("0.07")
    persons, housing = a.geography_proportions("persons"), a.geography_proportions("housing")
    assert persons == {k: Fraction(v) for k, v in TABLE4_PERSONS.items()}
    assert housing == {k: Fraction(v) for k, v in TABLE4_HOUSING.items()}
    assert sum(persons.values()) == 1
    assert sum(housing.values()) == 1
    table5 = a.query_proportions("persons")
    assert len(table5) == 11
    assert table5["VOTINGAGE x CENRACE"]["State"] == Fraction(12, 4097)
    assert table5["TOTAL"]["US"] == 0
    for lv in a.levels:
        assert sum(q[lv] for q in table5.values()) == 1
        assert a.rho_by_level()["persons"][lv] == Fraction("2.56") * persons[lv]
    cell = {(c.query, c.level): c.rho for c in a.cells}
    assert cell[("VOTINGAGE x CENRACE", "State")] == Fraction("2.56") * Fraction(
        1440, 4099
    ) * Fraction(12, 4097)
    assert a.rho_by_attribute()["race"] == a.concern_rho(a.scenarios["C"])
    assert a.rho_by_attribute()["ethnicity"] == a.concern_rho(a.scenarios["D"])


def test_changing_proportions_recomputes_everything() -> None:
    """Move 1/4097 of the State budget from TOTAL to CENRACE: the per-block ρ is unchanged
    (the Table 4 column still sums to 1), Scenario C (race) grows by exactly
    2.56 × 1440/4099 × 1/4097; an unbalanced change is refused naming the level."""
    a = builtin_allocation()
    b = a.with_proportions(
        "persons",
        queries={
            "TOTAL": {"State": Fraction(3772, 4097)},
            "CENRACE": {"State": Fraction(7, 4097)},
        },
    )
    assert b.rho_per_block() == a.rho_per_block()
    delta = Fraction("2.56") * Fraction(1440, 4099) * Fraction(1, 4097)
    assert b.concern_rho(b.scenarios["C"]) == a.concern_rho(a.scenarios["C"]) + delta
    assert b.scenario_rhos()["A"] == a.scenario_rhos()["A"]
    with pytest.raises(AllocationError, match=r"level 'State' \(Table 5 column\) sum to 4098/4097"):
        a.with_proportions("persons", queries={"CENRACE": {"State": Fraction(7, 4097)}})
    with pytest.raises(AllocationError, match=r"Table 4 column\) sum to"):
        a.with_proportions("housing", geography={"US": Fraction(2, 205)})
    halved = a.with_proportions("housing", rho=Fraction("0.035"))
    assert halved.rho_per_block()["housing"] == Fraction("0.035")
    with pytest.raises(AllocationError, match="unknown universe"):
        a.geography_proportions("dwellings")


def test_user_allocation_file_in_the_same_format(tmp_path: Path) -> None:
    """A user's TOML in the built-in format is loaded the same way, its sums checked on
    load (the message names the file, universe and level)."""
    from importlib import resources

    text = (
        resources.files("privtab.semantics")
        .joinpath("data/topdown_2020_redistricting.toml")
        .read_text("utf-8")
    )
    user = tmp_path / "mine.toml"
    user.write_text(text.replace('rho = "2.56"', 'rho = "1.28"'))
    mine = load_allocation(user)
    assert mine.rho_per_block()["persons"] == Fraction("1.28")
    assert mine.concern_rho(mine.scenarios["C"]) == builtin_allocation().concern_rho(
        builtin_allocation().scenarios["C"]
    ) - Fraction("1.28") * sum(
        (
            mine.geography_proportions("persons")[c.level]
            * mine.query_proportions("persons")[c.query][c.level]
            for c in mine.cells
            if c.universe == "persons" and "race" in c.attributes
        ),
        Fraction(0),
    )
    user.write_text(text.replace('Block = "5/4097" }', 'Block = "6/4097" }', 1))
    with pytest.raises(AllocationError, match=r"mine\.toml: universe 'persons'.*'Block'"):
        load_allocation(user)
    user.write_text(text.replace('US = "104/4099"', 'US = "105/4099"'))
    with pytest.raises(AllocationError, match="Table 4 column"):
        load_allocation(user)
    csv = tmp_path / "flat.csv"
    csv.write_text("universe,query,attributes,level,rho\np,Q,,L,1\n")
    with pytest.raises(AllocationError, match="no proportions"):
        load_allocation(csv).geography_proportions("p")
