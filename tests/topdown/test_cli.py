"""``privtab topdown run`` and ``validate-output``: one JSON object with ``--json``, the
release written and valid, the ledger (private runs only), clear refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privtab.cli import app
from tests.topdown._support import population, write_c1

runner = CliRunner()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("td-cli")
    pop = population(9, states=("01",))
    write_c1(pop.grfc, d / "GRF-C.txt")
    write_c1(pop.units, d / "cef-units.txt")
    write_c1(pop.persons, d / "cef-persons.txt")
    return d


def test_a_private_run_prints_one_json_object_and_is_in_the_ledger(
    data: Path, tmp_path: Path
) -> None:
    out, ledger = tmp_path / "release", tmp_path / "state" / "ledger.json"
    res = runner.invoke(
        app,
        ["topdown", "run", "--data", str(data), "--out", str(out), "--run", "us",
         "--no-report", "--ledger", str(ledger), "--dataset-id", "test-population", "--json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["private"] is True
    assert doc["runs"] == ["US"]
    assert doc["guarantee"]["persons"]["rho"]["exact"] == "293764/114921"
    assert doc["outputs"]["mdf/persons.txt"] > 0
    assert not (out / "NOT_PRIVATE").exists()
    assert not (out / "report.html").exists()
    entries = json.loads(ledger.read_text())["entries"]
    assert [e["dataset"] for e in entries] == ["test-population"]
    rho = json.loads(ledger.read_text())["entries"][0]["guarantee"]
    assert rho  # ρ per person + ρ per housing unit, recorded exactly
    valid = runner.invoke(app, ["topdown", "validate-output", str(out), "--grfc", str(data),
                                "--json"])  # fmt: skip
    assert valid.exit_code == 0, valid.output
    assert json.loads(valid.stdout)["valid"] is True


def test_a_seeded_run_is_marked_and_not_in_the_ledger(data: Path, tmp_path: Path) -> None:
    out, ledger = tmp_path / "release", tmp_path / "ledger.json"
    res = runner.invoke(
        app,
        ["topdown", "run", "--data", str(data), "--out", str(out), "--seed", "3",
         "--ledger", str(ledger)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "NOT PRIVATE" in res.output
    assert (out / "NOT_PRIVATE").exists()
    assert (out / "report.html").exists()
    assert not ledger.exists()
    again = runner.invoke(
        app, ["topdown", "run", "--data", str(data), "--out", str(out), "--seed", "3"]
    )
    assert again.exit_code == 2
    assert "exists" in again.output  # --overwrite needed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engine", "flink"], "unknown engine 'flink'"),
        (["--workers", "2", "--engine", "spark"], "--workers is the polars engine's"),
        (["--run", "mars"], "--run must be us, pr or both"),
        (["--seed", "1", "--insecure-no-noise"], "not both"),
        (["--lifetime-rho", "abc"], "--lifetime-rho"),
    ],
)
def test_bad_usage_is_refused_before_anything_runs(
    data: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "release"
    res = runner.invoke(app, ["topdown", "run", "--data", str(data), "--out", str(out), *args])
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert not out.exists()


def test_validate_output_fails_with_exit_1_on_a_tampered_folder(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "release"
    assert runner.invoke(app, ["topdown", "run", "--data", str(data), "--out", str(out),
                               "--seed", "4", "--no-report"]).exit_code == 0  # fmt: skip
    p1 = out / "pl94" / "P1.txt"
    p1.write_text(p1.read_text().replace("|NATION|P0010001|", "|NATION|P0010099|", 1))
    res = runner.invoke(app, ["topdown", "validate-output", str(out)])
    assert res.exit_code == 1
    assert "P1.txt" in res.output
    assert "CELL" in res.output
