"""End-to-end tests of ``privtab invariants {census,table,test}``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from privtab.cli import app

runner = CliRunner()


def run_json(*args: str) -> dict[str, object]:
    res = runner.invoke(app, ["invariants", *args, "--json"])
    assert res.exit_code == 0, res.stderr + res.stdout
    out = json.loads(res.stdout)
    assert isinstance(out, dict)
    return out


def test_census_defaults_exact_keys() -> None:
    out = run_json("census", "--rho", "2.56", "--semi-adjacent", "2", "--delta", "1e-10")
    assert list(out) == [
        "rho",
        "semi_adjacent",
        "rho_semi",
        "epsilon_advertised",
        "epsilon_semi",
        "epsilon_advertised_optimal",
        "epsilon_semi_optimal",
        "delta",
    ]
    assert out["rho_semi"] == pytest.approx(10.24)
    assert out["epsilon_advertised"] == pytest.approx(17.91528291900186, abs=1e-9)
    assert out["epsilon_semi"] == pytest.approx(40.95056583800372, abs=1e-9)
    assert round(float(out["epsilon_advertised_optimal"]), 3) == 17.158  # type: ignore[arg-type]
    assert round(float(out["epsilon_semi_optimal"]), 3) == 39.823  # type: ignore[arg-type]
    assert run_json("census") == out


def test_census_other_parameters_and_invariants(tmp_path: Path) -> None:
    out = run_json("census", "--rho", "1", "--semi-adjacent", "3", "--delta", "1e-6")
    assert out["rho_semi"] == 9.0
    st = run_json("census", "--invariant", "state-totals")
    assert st["semi_adjacent"] == 2
    assert st["rho_semi"] == pytest.approx(10.24)
    m3 = run_json("census", "--invariant", "margins:3")
    assert m3["semi_adjacent"] == 4
    spec = {
        "features": {"sex": ["F", "M"], "tenure": ["own", "rent"]},
        "invariant": "one-way-margins",
        "table": [[2, 1], [1, 0]],
    }
    f = tmp_path / "inv.json"
    f.write_text(json.dumps(spec))
    ex = run_json("census", "--invariant", str(f))
    inv = ex["invariant"]
    assert isinstance(inv, dict)
    assert ex["semi_adjacent"] == 3
    assert inv["semi_adjacent"]["exact"] is True
    spec_q = {
        "features": {"x": ["0", "1"]},
        "invariant": {"queries": [{"x": ["1"]}]},
        "values": [1],
        "n": 3,
    }
    f.write_text(json.dumps(spec_q))
    assert run_json("census", "--invariant", str(f))["semi_adjacent"] == 2


def test_census_errors() -> None:
    res = runner.invoke(app, ["invariants", "census", "--delta", "2"])
    assert res.exit_code == 2
    assert "--delta" in res.stderr
    res = runner.invoke(
        app, ["invariants", "census", "--semi-adjacent", "2", "--invariant", "full-table"]
    )
    assert res.exit_code == 2
    assert "not both" in res.stderr
    res = runner.invoke(app, ["invariants", "census", "--invariant", "nonsense"])
    assert res.exit_code == 2
    assert "not one of" in res.stderr


def test_table_projected_gaussian_keeps_margins() -> None:
    out = run_json(
        "table", "--counts", "30,12,8;10,25,15;5,9,40", "--mu", "1", "--integer", "--seed", "3"
    )
    assert out["private"] is False
    t = np.array(out["table"])
    assert np.allclose(t.sum(axis=1), [50, 50, 54])
    assert np.allclose(t.sum(axis=0), [45, 46, 63])
    it = np.array(out["integer_table"])
    assert it.min() >= 0
    assert it.sum(axis=1).tolist() == [50, 50, 54]
    assert out["sigma"] == pytest.approx(6**0.5)
    sa = out["semi_adjacent"]
    assert isinstance(sa, dict)
    assert sa["value"] == 3
    assert sa["used"] == 3


@pytest.mark.parametrize(
    ("mechanism", "param"),
    [
        ("optimal-knorm", "--epsilon"),
        ("naive-gaussian", "--mu"),
        ("naive-l1", "--epsilon"),
        ("naive-linf", "--epsilon"),
    ],
)
def test_table_other_mechanisms(mechanism: str, param: str) -> None:
    out = run_json(
        "table", "--counts", "3,4;5,6", "--mechanism", mechanism, param, "1", "--seed", "1"
    )
    assert out["mechanism"] == mechanism
    assert out["expected_l2_squared"] > 0  # type: ignore[operator]


def test_table_csv_input_and_atomic_output(tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_text("race,own,rent\nA,10,4\nB,3,9\n")
    dst = tmp_path / "out.csv"
    out = run_json(
        "table",
        "--input",
        str(src),
        "--rho",
        "0.5",
        "--integer",
        "--output",
        str(dst),
        "--seed",
        "2",
    )
    rows = [list(map(int, line.split(","))) for line in dst.read_text().strip().splitlines()]
    assert np.array(rows).sum(axis=1).tolist() == [14, 12]
    assert out["output"] == str(dst)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "out.csv"]  # no temp left


def test_table_bad_input_named() -> None:
    res = runner.invoke(app, ["invariants", "table", "--counts", "1,x;2,3", "--mu", "1"])
    assert res.exit_code == 2
    assert "row 1, column 2" in res.stderr
    res = runner.invoke(app, ["invariants", "table", "--counts", "1,2;3", "--mu", "1"])
    assert res.exit_code == 2
    assert "row 2 has 1 cells" in res.stderr
    res = runner.invoke(app, ["invariants", "table", "--counts", "1,2;3,4", "--epsilon", "1"])
    assert res.exit_code == 2
    assert "--mu or --rho" in res.stderr
    res = runner.invoke(
        app, ["invariants", "table", "--counts", "1,2;3,4", "--mu", "1", "--semi-adjacent", "1"]
    )
    assert res.exit_code == 2
    assert "below the semi-adjacent parameter" in res.stderr


def test_table_secure_default_is_private() -> None:
    out = run_json("table", "--counts", "3,4;5,6", "--mu", "1")
    assert out["private"] is True


def test_odds_ratio_test_command() -> None:
    out = run_json(
        "test", "--counts", "15,5;6,14", "--epsilon", "1", "--power-at", "3", "--seed", "4"
    )
    assert out["private"] is False
    assert out["reject"] == (out["p_value"] <= 0.05)  # type: ignore[operator]
    power = out["power"]
    assert isinstance(power, list)
    assert power[0]["semi_private"] > power[0]["naive_dp"] > 0.05
    res = runner.invoke(app, ["invariants", "test", "--counts", "1,2,3;4,5,6", "--mu", "1"])
    assert res.exit_code == 2
    assert "2 × 2" in res.stderr
    res = runner.invoke(app, ["invariants", "test", "--counts", "1,2;3,4"])
    assert res.exit_code == 2
    assert "exactly one of --epsilon" in res.stderr
