"""``privtab safetab plan|run`` and ``privtab demo`` from the command line.

Oracle values: safetab-detailed-dhc-race-ethnicity.txt Tables 1, 2, 4 (App. F.1), as
recomputed in shared/seed-checks (ids 002.table4.*, 002.table2.*).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privtab.cli import app
from privtab.data import toy_dataset_dir
from tests.data.conftest import person_line, write_persons
from tests.tabulate.conftest import demo_params

runner = CliRunner()
PAPER = ["--moe", "6,6,11,11,50,50,50", "--stability", "9", "--gamma", "0.1", "--delta", "1e-10"]
FAST = ["--pld-grid", "0.01"]  # a coarser (still valid, looser) PLD: the tests check the rest


def _json(args: list[str]) -> dict:
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_plan_reproduces_paper_tables() -> None:
    d = _json(["safetab", "plan", *PAPER, "--calibration", "paper", "--json"])
    lv = d["levels"]
    assert [round(x["geometric_eps_total"], 2) for x in lv] == [
        4.28,
        4.28,
        2.50,
        2.50,
        0.59,
        0.59,
        0.59,
    ]
    assert round(lv[4]["geometric_eps_total"], 3) == 0.587
    assert [round(x["dgauss_rho_total"], 3) for x in lv[:4]] == [0.533, 0.533, 0.159, 0.159]
    assert lv[4]["dgauss_rho_total"] == pytest.approx(0.00768)
    eps = d["epsilon"]
    assert round(eps["geometric_pure"], 1) == 15.3
    assert round(eps["dgauss_zcdp_analytic"], 1) == 12.8
    assert round(eps["dgauss_zcdp_grid"], 1) == 12.2
    # the RDP analysis with the exact geometric divergence (the paper's 13.2 is invalid)
    assert eps["geometric_rdp"] == pytest.approx(14.194, abs=5e-4)
    assert eps["dgauss_pld"] < eps["dgauss_zcdp_optimal"] <= eps["dgauss_zcdp_grid"]
    assert d["delta"] == 1e-10
    # the paper's geometric calibration misses its own MOE by one (Cor. 2 floor)
    assert [x["geometric_moe_exact"] for x in lv] == [7, 7, 12, 12, 51, 51, 51]
    assert [x["dgauss_moe_exact"] for x in lv] == [6, 6, 11, 11, 50, 50, 50]


def test_plan_exact_calibration_meets_every_target() -> None:
    d = _json(["safetab", "plan", *PAPER, "--json", *FAST])
    for x, m in zip(d["levels"], [6, 6, 11, 11, 50, 50, 50], strict=True):
        assert x["geometric_moe_exact"] <= m
        assert x["dgauss_moe_exact"] <= m
    # MOE 6 with exact geometric calibration needs ε ≈ 0.4569 per count (issue 4)
    assert d["levels"][0]["geometric_eps_step2"] / 9 == pytest.approx(0.4569, abs=1e-4)


def test_plan_production_config() -> None:
    d = _json(["safetab", "plan", "--json", *FAST])
    assert d["total_budget"] == pytest.approx(4.944)
    assert len(d["levels"]) == 11  # (AIANNH, 1) has budget 0
    assert {lv["stability"] for lv in d["levels"]} == {9}
    assert d["epsilon"]["zcdp_optimal"] < d["epsilon"]["zcdp_analytic"]
    pr = _json(["safetab", "plan", "--scope", "PR", "--json", *FAST])
    assert pr["total_budget"] == pytest.approx(2.643)
    bad = runner.invoke(app, ["safetab", "plan", "--scope", "XX"])
    assert bad.exit_code == 2
    assert "US or PR" in bad.output


# --------------------------------------------------------------------------------------
# every class of bad input: a clear message, exit code 1, nothing written


def _inputs(tmp: Path) -> tuple[Path, Path]:
    params = tmp / "params"
    config = demo_params(params, ["01", "02", "04", "11"])
    data = tmp / "data"
    data.mkdir()
    shutil.copy(toy_dataset_dir() / "GRF-C.txt", data / "GRF-C.txt")
    return config, data


def _persons(data: Path, *lines: str) -> None:
    write_persons(data / "person-records.txt", [person_line(), *lines])


def _edit_config(config: Path, change: Callable[[dict], None]) -> None:
    raw = json.loads(config.read_text())
    change(raw)
    config.write_text(json.dumps(raw))


BAD: dict[str, Callable[[Path, Path], None]] = {
    "unknown_race_code": lambda c, d: _persons(d, person_line(QRACE1="1011")),
    "too_many_race_codes": lambda c, d: (
        _persons(d, person_line(QRACE1="1010", QRACE2="1020", QRACE3="1030")),
        _edit_config(c, lambda r: r.update(max_race_codes=2)),
    ),
    "duplicate_race_code": lambda c, d: _persons(d, person_line(QRACE1="1010", QRACE2="1010")),
    "age_out_of_range": lambda c, d: _persons(d, person_line(QAGE="116")),
    "invalid_sex": lambda c, d: _persons(d, person_line(QSEX="3")),
    "block_not_in_grfc": lambda c, d: _persons(d, person_line(TABBLK="9999")),
    "malformed_id": lambda c, d: _persons(d, person_line(TABTRACTCE="12345")),
    "code_in_two_iterations": lambda c, d: (
        _persons(d),
        (c.parent / "race-and-ethnicity-code-to-iteration.txt").open("a").write("1004|1010\n"),
    ),
    "thresholds_not_increasing": lambda c, d: (
        _persons(d),
        _edit_config(c, lambda r: r["thresholds_p"].update({"(COUNTY, 2)": [971, 971, 19971]})),
    ),
    "negative_budget": lambda c, d: (
        _persons(d),
        _edit_config(c, lambda r: r.update(privacy_budget_p_level_2_county=-0.1)),
    ),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_input_stops_before_writing(kind: str, tmp_path: Path) -> None:
    config, data = _inputs(tmp_path)
    BAD[kind](config, data)
    out = tmp_path / "release"
    res = runner.invoke(
        app,
        [
            "safetab",
            "run",
            "--config",
            str(config),
            "--data",
            str(data),
            "--out",
            str(out),
            "--json",
            "--quiet",
        ],
    )
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    kinds = {p["kind"] for p in doc["problems"]}
    assert kind in kinds, doc
    problem = next(p for p in doc["problems"] if p["kind"] == kind)
    assert problem["file"]
    assert problem["message"]
    if kind not in ("code_in_two_iterations", "thresholds_not_increasing", "negative_budget"):
        assert problem["row"] == 3  # line 3: the header is line 1
        assert problem["column"]
        assert problem["value"] is not None
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "params"]


def test_run_cli_test_modes(tmp_path: Path) -> None:
    config, data = _inputs(tmp_path)
    _persons(data, person_line(QAGE="070", QSEX="2"))
    out = tmp_path / "rel"
    args = [
        "safetab",
        "run",
        "--config",
        str(config),
        "--data",
        str(data),
        "--out",
        str(out),
        *FAST,
    ]
    res = runner.invoke(app, [*args, "--seed", "3", "--json", "--quiet", "--no-report"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["private"] is False
    assert "persons" not in doc  # confidential: in the run record only
    record = json.loads(Path(doc["run_record"]).read_text())
    assert record["persons"] == 2
    assert "NOT private" in res.stderr
    # an existing release is not overwritten without --overwrite
    again = runner.invoke(app, [*args, "--seed", "3", "--quiet"])
    assert again.exit_code == 2
    assert "--overwrite" in again.stderr
    exact = runner.invoke(
        app, [*args, "--insecure-no-noise", "--overwrite", "--json", "--quiet", "--evaluate"]
    )
    assert exact.exit_code == 0, exact.output
    ev = json.loads(exact.stdout)["evaluation_nonprivate"]
    assert all(v.get("rmse", 0) == 0 for e in ev.values() for v in e.values())


@pytest.mark.slow
def test_demo_runs(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        [
            "demo",
            "--persons",
            "20000",
            "--states",
            "DE,PR",
            "--out",
            str(tmp_path / "d"),
            "--json",
            "--quiet",
        ],
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["private"] is True
    # DE and PR have no AIANNH area: that level's public domain is empty, it draws no noise
    # and is not charged — the production plan's 618/125 less its 159/1000
    assert d["guarantee"] == {"zcdp": {"rho": pytest.approx(4.785), "rho_exact": "957/200"}}
    assert Path(d["outputs"]["report"]).exists()
    # then SafeTab-H on the same population's households, chained to that T1: no AIANNH
    # group either, so the production NMFv5's 8.895302 less its AIANNH level-2 budgets
    h = d["safetab_h"]
    assert h["private"] is True
    assert h["guarantee"]["zcdp"]["rho_exact"] == "2152391/250000"  # 8.609564
    assert h["budget_drawn"]["US"]["not_drawn"] == ["T3 (AIANNH, 2)", "T4 (AIANNH, 2)"]
    assert Path(h["outputs"]["report"]).exists()
    assert sum(h["rows"].values()) > 0


def test_spark_options_are_checked(tmp_path: Path) -> None:
    base = ["safetab", "run", "--data", str(tmp_path), "--out", str(tmp_path / "o")]
    res = runner.invoke(app, [*base, "--spark-master", "local[1]"])
    assert res.exit_code == 2
    assert "--engine spark" in res.stderr
    res = runner.invoke(app, [*base, "--engine", "spark", "--spark-conf", "novalue"])
    assert res.exit_code == 2
    assert "KEY=VALUE" in res.stderr
    res = runner.invoke(app, [*base, "--engine", "flink"])
    assert res.exit_code == 2
    assert not (tmp_path / "o").exists()
