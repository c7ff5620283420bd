"""Fine-grained accounting of the 2020 TopDown allocation (semantics seed §8, Tables 3–5)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from privtab.semantics import AllocationError, builtin_allocation, load_allocation

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
