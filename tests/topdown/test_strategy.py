"""The packaged production strategies against the signed run certificates, exact noise
parameters, and every bad strategy file refused with its key and value."""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from privtab.topdown.strategy import (
    PRODUCTION_RUNS,
    StrategyError,
    load_strategy,
    parse_strategy,
    production_strategy,
)
from tests.topdown._support import certificate

RUNS = {"us": "US-Persons", "pr": "PR-Persons", "units": "US-Units", "units-pr": "PR-Units"}


@pytest.mark.parametrize("run", sorted(RUNS))
def test_shares_equal_the_certificate(run: str) -> None:
    s = production_strategy(run)
    cert = certificate(RUNS[run])
    assert list(s.levels) == cert.levels == list(cert.geolevel)
    assert dict(s.geolevel_shares) == cert.geolevel
    for q, by_level in cert.queries.items():
        for lv, share in by_level.items():
            assert s.query_shares[lv].get(q) == share, (lv, q)  # NaN (not measured) = None
    for lv in s.levels:
        assert set(s.query_shares[lv]) == {q for q, b in cert.queries.items() if b[lv] is not None}


@pytest.mark.parametrize("run", sorted(RUNS))
def test_rho_from_the_mechanisms_is_the_certificates(run: str) -> None:
    s = production_strategy(run)
    cert = certificate(RUNS[run])
    # Σ over levels and queries of Δ₂²/(2σ²) with Δ₂² = 2, σ² = scale²/(g·q): exact
    total = Fraction(0)
    for lv in s.levels:
        for q in s.queries(lv):
            sigma2 = s.global_scale**2 / (s.geolevel_shares[lv] * s.query_shares[lv][q])
            assert s.sigma2(lv, q) == sigma2
            assert s.rho_query(lv, q) == Fraction(2) / (2 * sigma2)
            total += Fraction(2) / (2 * sigma2)
    assert total == s.rho == cert.rho == 1 / s.global_scale**2
    assert s.delta == cert.delta


def test_the_2020_numbers() -> None:
    us, units = production_strategy("us"), production_strategy("units")
    assert us.global_scale == Fraction(339, 542)
    assert us.rho == Fraction(293764, 114921)
    assert units.global_scale == Fraction(12343, 3379)
    assert units.rho == Fraction(11417641, 152349649)
    assert us.measured_cells["Block"] == 2603
    assert us.measured_cells["US"] == 2602
    assert us.queries("US")[0] == "cenrace"  # no total measured at the root
    assert us.l2_passes["Tract"][0] == ("total",)
    assert len(us.l2_passes["Block"]) == 1
    assert len(us.l2_passes["US"]) == 1
    assert us.rounder_passes["County"][0] == ("total",)
    assert production_strategy("pr").l2_passes["State"][0][0] == "cenrace"
    assert us.constraints["US"] == ("total",)
    assert "nurse_nva_0" in us.constraints["Block"]
    assert set(PRODUCTION_RUNS) == set(RUNS)


def test_to_dict_round_trips_exactly() -> None:
    for run in RUNS:
        s = production_strategy(run)
        again = parse_strategy(json.loads(json.dumps(s.to_dict())), "round trip")
        assert again == s


def _doc() -> dict[str, Any]:
    return copy.deepcopy(production_strategy("us").to_dict())


def _error(doc: Any) -> StrategyError:
    with pytest.raises(StrategyError) as err:
        parse_strategy(doc, "my-strategy.json")
    assert err.value.file == "my-strategy.json"
    return err.value


def test_a_user_can_change_shares_levels_and_queries() -> None:
    doc = _doc()
    doc["geolevel_shares"]["US"] = "103/4099"
    doc["geolevel_shares"]["Block"] = "166/4099"
    doc["query_shares"]["Block"] = {"total": "1/2", "detailed": "1/2"}
    doc["l2_passes"]["Block"] = [["total", "detailed"]]
    s = parse_strategy(doc, "mine")
    assert s.rho == s.global_scale**-2
    assert s.measured_cells["Block"] == 2017


@pytest.mark.parametrize(
    ("change", "key", "message"),
    [
        (lambda d: d["geolevel_shares"].update(US="105/4099"), "geolevel_shares", "not exactly 1"),
        (
            lambda d: d["query_shares"]["Tract"].update(total="1568/4102"),
            "query_shares.Tract",
            "not exactly 1",
        ),
        (lambda d: d["geolevel_shares"].update(US=0.025), "geolevel_shares.US", "exact fraction"),
        (
            lambda d: d["geolevel_shares"].update(US="1/0"),
            "geolevel_shares.US",
            "not an exact fraction",
        ),
        (lambda d: d["geolevel_shares"].update(US="-104/4099"), "geolevel_shares.US", "positive"),
        (
            lambda d: d["query_shares"]["Block"].update({"sex": "0"}),
            "query_shares.Block.sex",
            "unknown persons query",
        ),
        (lambda d: d["geolevel_shares"].pop("Tract"), "geolevel_shares", "'Tract' is missing"),
        (
            lambda d: d["geolevel_shares"].update(Place="1"),
            "geolevel_shares.Place",
            "unknown level",
        ),
        (lambda d: d.update(histogram="households"), "histogram", "'persons' or 'units'"),
        (lambda d: d.update(colour="blue"), "colour", "unknown key"),
        (lambda d: d.pop("global_scale"), "global_scale", "required"),
        (lambda d: d.update(levels=["US", "US"]), "levels", "twice"),
        (
            lambda d: d["l2_passes"].update(US=[["total"], ["detailed"]]),
            "l2_passes.US[0]",
            "not measured",
        ),
        (lambda d: d["l2_passes"].update(Block=[["detailed"]]), "l2_passes.Block", "in no pass"),
        (
            lambda d: d["l2_passes"].update(Tract=[["total"], ["total", "detailed"]]),
            "l2_passes.Tract[1]",
            "earlier pass",
        ),
        (
            lambda d: d["rounder_passes"].update(Block=[["hhgq * sex"]]),
            "rounder_passes.Block[0]",
            "unknown persons query",
        ),
        (lambda d: d["rounder_passes"].update(Block=[]), "rounder_passes.Block", "non-empty list"),
        (
            lambda d: d["constraints"].update(Block=["everyone_happy"]),
            "constraints.Block",
            "unknown name",
        ),
        (
            lambda d: d["invariants"].update(County=["pl94counts"]),
            "invariants.County",
            "unknown name",
        ),
        (lambda d: d.update(delta="1"), "delta", "strictly between"),
    ],
)
def test_bad_strategies_are_refused_naming_the_key(change: Any, key: str, message: str) -> None:
    doc = _doc()
    change(doc)
    err = _error(doc)
    assert err.column == key
    assert message in err.message


def test_a_strategy_file_is_read_and_its_json_errors_located(tmp_path: Path) -> None:
    good = tmp_path / "s.json"
    good.write_text(json.dumps(_doc()), encoding="utf-8")
    assert load_strategy(good) == production_strategy("us")
    bad = tmp_path / "bad.json"
    bad.write_text('{\n "name": "x",\n "levels": [1,,2]\n}\n', encoding="utf-8")
    with pytest.raises(StrategyError) as err:
        load_strategy(bad)
    assert err.value.row == 3
    assert err.value.file == str(bad)
    with pytest.raises(StrategyError, match="cannot read"):
        load_strategy(tmp_path / "missing.json")
    err2 = _error([1, 2])
    assert err2.column == "(top level)"


def test_units_strategy_knows_only_its_queries() -> None:
    doc = copy.deepcopy(production_strategy("units").to_dict())
    doc["query_shares"]["Block"] = {"hhgq": "1"}
    err = _error(doc)
    assert err.column == "query_shares.Block.hhgq"
    assert "unknown units query" in err.message
