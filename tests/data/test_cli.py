"""``privtab synth`` and ``privtab validate`` end to end."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from privtab.cli import app

from .conftest import person_line, snapshot

runner = CliRunner()


def test_synth_json_and_validate(tmp_path: Path) -> None:
    out = tmp_path / "n"
    res = runner.invoke(
        app, ["synth", "--persons", "5000", "--out", str(out), "--states", "DC,PR", "--json"]
    )
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout)
    assert payload["persons"] == 5000
    assert payload["synthetic"] is True
    assert set(payload["persons_by_state"]) == {"11", "72"}
    assert "synth:" in res.stderr  # progress goes to stderr
    res = runner.invoke(app, ["validate", "--data", str(out), "--json"])
    assert res.exit_code == 0, res.output
    v = json.loads(res.stdout)
    assert v["valid"] is True
    assert v["person_rows"] == 5000
    us = v["runs"]["US"]
    assert us["total_budget"] == 4.944
    assert {lv["stability"] for lv in us["levels"]} == {9}
    assert {lv["geography"] for lv in v["runs"]["PR"]["levels"]} == {
        "PR-STATE",
        "PR-COUNTY",
        "PR-TRACT",
        "PR-PLACE",
    }
    # human-readable output too
    res = runner.invoke(app, ["validate", "--data", str(out), "-q"])
    assert res.exit_code == 0
    assert "valid" in res.stdout


def test_synth_refuses_existing_output(tmp_path: Path) -> None:
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "x").write_text("x")
    res = runner.invoke(app, ["synth", "-n", "10", "-o", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert "exists" in res.stderr
    res = runner.invoke(app, ["synth", "-n", "10", "-o", str(tmp_path / "p"), "--states", "ZZ"])
    assert res.exit_code == 2
    assert "unknown state" in res.stderr
    assert not (tmp_path / "p").exists()
    res = runner.invoke(app, ["synth", "-n", "10", "-o", str(tmp_path / "p"), "--format", "csv"])
    assert res.exit_code == 2


def test_validate_reports_problems_and_exits_1(tmp_path: Path, data_dir: Path) -> None:
    path = data_dir / "person-records.txt"
    path.write_text(path.read_text() + person_line(QAGE="130", QRACE2="9999") + "\n")
    before = snapshot(tmp_path)
    res = runner.invoke(app, ["validate", "--data", str(data_dir), "--json"])
    assert res.exit_code == 1
    out = json.loads(res.stdout)
    assert out["valid"] is False
    got = {(p["kind"], p["row"], p["column"], p["value"]) for p in out["problems"]}
    assert got == {
        ("age_out_of_range", 7, "QAGE", "130"),
        ("unknown_race_code", 7, "QRACE2", "9999"),
    }
    res = runner.invoke(app, ["validate", "--data", str(data_dir)])
    assert res.exit_code == 1
    assert "line 7, column QRACE2, value '9999'" in res.stderr  # one located line each
    assert "Traceback" not in res.stderr
    assert "invalid input" in res.stderr
    assert snapshot(tmp_path) == before  # validate never writes


def test_validate_with_config_directory(params: Path, data_dir: Path) -> None:
    cfg = params / "config.json"
    cfg.write_text(cfg.read_text().replace('"privacy_defn": "zcdp"', '"privacy_defn": "puredp"'))
    res = runner.invoke(
        app, ["validate", "--config", str(params), "--data", str(data_dir), "--json"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["privacy_defn"] == "puredp"
    res = runner.invoke(app, ["validate", "--data", str(data_dir / "nowhere"), "--json"])
    assert res.exit_code == 1
    kinds = {p["kind"] for p in json.loads(res.stdout)["problems"]}
    assert kinds == {"missing_file"}
