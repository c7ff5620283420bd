"""End-to-end tests of ``privtab analyze`` (one JSON object on stdout with --json)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from privtab.cli import app

from ._release import simulate

runner = CliRunner()


def _args(line: str) -> list[str]:
    return line.split()


def _json(args: list[str]) -> dict[str, Any]:
    res = runner.invoke(app, ["analyze", *args])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert isinstance(out, dict)
    return out


def test_ci_laplace_course_q11() -> None:
    out = _json(_args("ci --mechanism laplace --epsilon 1 --value 4 --level 0.9 --json"))
    assert out["lower"] == pytest.approx(4 - math.log(10), abs=1e-9)
    assert out["upper"] == pytest.approx(4 + math.log(10), abs=1e-9)
    assert str(out["lower"]).startswith("1.697")
    assert str(out["upper"]).startswith("6.302")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--mechanism", "geometric", "--epsilon", "0.5"], 5),
        (["--mechanism", "geometric", "--epsilon", "1", "--sensitivity", "2"], 5),
        (["--mechanism", "discrete_gaussian", "--rho", "0.1"], None),
    ],
)
def test_ci_integer_mechanisms(args: list[str], expected: int | None) -> None:
    from privtab.mechanisms import DiscreteGaussian

    out = _json(["ci", *args, "--value", "10", "--level", "0.9", "--json"])
    assert isinstance(out["lower"], int)
    assert isinstance(out["upper"], int)
    moe = expected if expected is not None else DiscreteGaussian(0.1).moe(0.9)
    assert (out["lower"], out["upper"]) == (10 - moe, 10 + moe)
    assert out["coverage"] >= 0.9


def test_ci_vectors() -> None:
    box = _json(["ci", "--mechanism", "laplace", "--epsilon", "1", "--sensitivity", "3",
                 "--values", "5,-3,1", "--level", "0.95", "--simultaneous", "bonferroni",
                 "--json"])  # fmt: skip
    assert box["moe"][0] == pytest.approx(12.283033686666302, abs=1e-8)
    s = _json(["ci", "--mechanism", "geometric", "--epsilon", "1", "--values", "3,4",
               "--combination", "difference", "--level", "0.9", "--json"])  # fmt: skip
    assert s["estimate"] == -1
    assert isinstance(s["lower"], int)
    r = _json(["ci", "--mechanism", "geometric", "--epsilon", "1", "--values", "30,60",
               "--combination", "ratio", "--json"])  # fmt: skip
    assert r["lower"] < 0.5 < r["upper"]


def test_ci_errors() -> None:
    res = runner.invoke(app, ["analyze", "ci", "--mechanism", "laplace", "--value", "1"])
    assert res.exit_code == 2
    res = runner.invoke(app, _args("analyze ci --mechanism nope --epsilon 1 --value 1"))
    assert res.exit_code == 2


def test_combine_and_gls() -> None:
    v = 17.834255192513016
    out = _json(["combine", "--values", "2,7", "--variances", f"{v},{2 * v}", "--json"])
    assert out["estimate"] == pytest.approx(11 / 3)
    assert out["variance"] == pytest.approx(11.889503461675343, rel=1e-9)
    g = _json(["combine", "--design", "1,0;0,1;1,1", "--values", "1,2,3.5",
               "--variances", "1,1,1", "--contrast", "1,1", "--json"])  # fmt: skip
    # x1 + x2 from (1, 2) directly (variance 2) and 3.5 (variance 1): (1/3)·3 + (2/3)·3.5
    assert g["estimate"] == pytest.approx(10 / 3, abs=1e-12)
    assert g["variance"] == pytest.approx(2 / 3, abs=1e-12)


def test_dp_test_command() -> None:
    out = _json(["test", "--observed", "34.21", "--n", "100", "--p0", "0.255",
                 "--mechanism", "laplace", "--epsilon", "0.5", "--json"])  # fmt: skip
    assert out["p_value"] == pytest.approx(0.0922425639107668, abs=1e-10)
    assert out["naive_p_value"] == pytest.approx(0.04567953909627406, abs=1e-10)
    mc = _json(["test", "--observed", "34.21", "--n", "100", "--p0", "0.255",
                "--mechanism", "laplace", "--epsilon", "0.5", "--method", "monte-carlo",
                "--reps", "20000", "--seed", "3", "--json"])  # fmt: skip
    assert abs(mc["p_value"] - 0.0922) < 0.01
    assert mc["seeded"] is True


def test_postprocess_values() -> None:
    out = _json(["postprocess", "--values", "5,-2,7", "--total", "12", "--variance", "2",
                 "--total-variance", "3", "--round", "--json"])  # fmt: skip
    assert min(out["values"]) >= 0
    assert out["privacy_cost"] == 0
    clip = _json(["postprocess", "--values", "5,-2,7", "--json"])
    assert clip["values"] == [5.0, 0.0, 7.0]


def test_release_directory_commands(tmp_path: Path) -> None:
    sim = simulate(200, total_only=10, seed=9)
    rel = tmp_path / "release"
    rel.mkdir()
    sim.t1.write_parquet(rel / "t1.parquet")
    sim.t2.write_parquet(rel / "t2.parquet")
    out = tmp_path / "out"
    ci = _json(["ci", "--release", str(rel), "--level", "0.9", "--out", str(out), "--json"])
    assert "LOWER90" in ci["t1_columns_added"]
    assert "STAGE1_UPPER90" in ci["t1_columns_added"]
    t1 = pl.read_parquet(out / "t1.parquet")
    assert (t1["LOWER90"] <= t1["COUNT"]).all()
    comb = _json(["combine", "--release", str(rel), "--thresholds", "20,60,150", "--json"])
    assert comb["groups_combined"] == 200
    assert comb["mean_variance_ratio"] < 1
    pp = _json(["postprocess", "--release", str(rel), "--round", "--json"])
    assert pp["negative_after"] == 0
    res = runner.invoke(app, ["analyze", "ci", "--release", str(tmp_path / "none"), "--json"])
    assert res.exit_code == 2
