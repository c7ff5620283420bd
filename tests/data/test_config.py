"""config.json: the production file read exactly, and every kind of bad configuration."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from privtab.data import GeoLevel, Scope, read_config
from privtab.data.config import BUDGET_KEYS, parse_config
from privtab.data.errors import InputValidationError, ProblemLog

from .conftest import RejectFn, assert_problem


def _edit(params: Path, change: Any) -> Path:
    path = params / "config.json"
    raw = json.loads(path.read_text())
    change(raw)
    path.write_text(json.dumps(raw, indent=1))
    return path


def test_production_config_exact(params: Path) -> None:
    cfg = read_config(params / "config.json")
    assert cfg.privacy_defn == "zcdp"
    # exact decimals: the US run sums to rho = 4.944 exactly (census README), PR to 2.643
    assert cfg.total_budget(Scope.US) == Fraction("4.944")
    assert cfg.total_budget(Scope.PR) == Fraction("2.643")
    assert cfg.budget(GeoLevel.USA, 2) == Fraction("2.134")
    assert cfg.budget(GeoLevel.AIANNH, 1) == 0
    assert cfg.stage_1_fraction == Fraction(1, 10)
    assert cfg.threshold(GeoLevel.COUNTY, 2) == (971, 4971, 19971)
    assert cfg.threshold(GeoLevel.PR_STATE, 1) == (4971, 19971, 149971)
    assert cfg.max_race_codes == 8
    assert cfg.zero_suppression_chance == Fraction("0.9999")
    assert cfg.allow_negative_counts is True
    assert cfg.scopes == (Scope.US, Scope.PR)
    assert len(cfg.state_filter_us) == 51
    assert len(cfg.budgets) == 20
    assert list(cfg.levels(Scope.US))[:2] == [(GeoLevel.USA, 1), (GeoLevel.USA, 2)]
    json.dumps(cfg.to_dict())


def test_puredp_config(params: Path) -> None:
    path = _edit(params, lambda r: r.update(privacy_defn="puredp", run_pr=False))
    cfg = read_config(path)
    assert cfg.privacy_defn == "puredp"
    assert cfg.scopes == (Scope.US,)


@pytest.mark.parametrize(
    ("change", "kind", "column", "value"),
    [
        (lambda r: r.update(extra_key=1), "unknown_key", "extra_key", "1"),
        (
            lambda r: r.pop("privacy_budget_p_level_2_tract"),
            "missing_key",
            "privacy_budget_p_level_2_tract",
            None,
        ),
        (
            lambda r: r.update(privacy_budget_p_level_2_county=-0.1),
            "negative_budget",
            "privacy_budget_p_level_2_county",
            "-0.1",
        ),
        (
            lambda r: r.update(privacy_budget_p_level_1_usa="0.1"),
            "invalid_type",
            "privacy_budget_p_level_1_usa",
            "0.1",
        ),
        (
            lambda r: r["thresholds_p"].update({"(COUNTY, 2)": [971, 971, 19971]}),
            "thresholds_not_increasing",
            "thresholds_p.(COUNTY, 2)",
            "[971, 971, 19971]",
        ),
        (
            lambda r: r["thresholds_p"].update({"(TRACT, 1)": [5, 4, 9]}),
            "thresholds_not_increasing",
            "thresholds_p.(TRACT, 1)",
            "[5, 4, 9]",
        ),
        (
            lambda r: r["thresholds_p"].update({"(USA, 1)": [1, 2]}),
            "thresholds_count",
            "thresholds_p.(USA, 1)",
            "[1, 2]",
        ),
        (
            lambda r: r["thresholds_p"].pop("(PLACE, 2)"),
            "missing_key",
            "thresholds_p.(PLACE, 2)",
            None,
        ),
        (
            lambda r: r["thresholds_p"].update({"(BLOCK, 2)": [1, 2, 3]}),
            "unknown_key",
            "thresholds_p.(BLOCK, 2)",
            "[1, 2, 3]",
        ),
        (
            lambda r: r.update(privacy_budget_p_stage_1_fraction=1.0),
            "out_of_range",
            "privacy_budget_p_stage_1_fraction",
            "1.0",
        ),
        (lambda r: r.update(privacy_defn="rdp"), "invalid_value", "privacy_defn", "rdp"),
        (lambda r: r.update(max_race_codes=9), "out_of_range", "max_race_codes", "9"),
        (lambda r: r.update(max_race_codes=2.5), "invalid_type", "max_race_codes", "2.5"),
        (
            lambda r: r.update(zero_suppression_chance=1),
            "out_of_range",
            "zero_suppression_chance",
            "1",
        ),
        (lambda r: r.update(run_us="yes"), "invalid_type", "run_us", "yes"),
        (lambda r: r.update(run_us=False, run_pr=False), "no_run", "run_us", "false"),
        (lambda r: r["state_filter_us"].append("72"), "invalid_value", "state_filter_us", "72"),
        (lambda r: r["state_filter_us"].append("01"), "duplicate_value", "state_filter_us", "01"),
        (lambda r: r.update(reader="spark"), "invalid_value", "reader", "spark"),
    ],
)
def test_bad_config(
    params: Path,
    data_dir: Path,
    reject: RejectFn,
    change: Any,
    kind: str,
    column: str,
    value: str | None,
) -> None:
    path = _edit(params, change)
    err = reject(path, data_dir)
    assert_problem(err, kind, file="config.json", column=column, value=value)
    assert all(p.file.endswith("config.json") for p in err.problems)


def test_duplicate_key_and_bad_json(params: Path, data_dir: Path, reject: RejectFn) -> None:
    path = params / "config.json"
    text = path.read_text()
    path.write_text(
        text.replace('"max_race_codes": 8,', '"max_race_codes": 8, "max_race_codes": 7,')
    )
    assert_problem(reject(path, data_dir), "duplicate_key", column="max_race_codes")
    path.write_text(text[:-5])
    err = reject(path, data_dir)
    assert "not valid JSON" in str(assert_problem(err, "invalid_json", file="config.json"))


def test_missing_config_file(tmp_path: Path, data_dir: Path, reject: RejectFn) -> None:
    err = reject(tmp_path / "nowhere" / "config.json", data_dir)
    assert_problem(err, "missing_file", file="config.json")


def test_all_problems_reported_together(params: Path) -> None:
    def change(r: dict[str, Any]) -> None:
        r["privacy_budget_p_level_1_usa"] = -1
        r["privacy_budget_p_level_2_usa"] = -2
        r["thresholds_p"]["(USA, 1)"] = [3, 2, 1]
        r["bogus"] = True

    path = _edit(params, change)
    with pytest.raises(InputValidationError) as info:
        read_config(path)
    err = info.value
    assert err.counts[(str(path), "negative_budget")] == 2
    assert err.kinds() == {"negative_budget", "thresholds_not_increasing", "unknown_key"}
    d = err.to_dict()
    assert d["valid"] is False
    assert d["total"] == 4


def test_parse_config_from_mapping() -> None:
    log = ProblemLog(examples=100)
    assert parse_config({"max_race_codes": 8}, log=log) is None
    missing = {p.column for p in log if p.kind == "missing_key"}
    assert set(BUDGET_KEYS) <= missing
    # by default only the first ten of a kind are kept, but all are counted
    short = ProblemLog()
    parse_config({"max_race_codes": 8}, log=short)
    assert len([p for p in short if p.kind == "missing_key"]) == 10
    assert short.counts[("<dict>", "missing_key")] == len(missing)
