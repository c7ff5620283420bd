"""``privtab ledger show|set-lifetime|settle``."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privtab.accounting import ExactGuarantee
from privtab.accounting.odometer import ReleaseLedger
from privtab.cli import app

runner = CliRunner()
KEY = "sha256:" + "0123456789abcdef" * 4


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    return tmp_path / "ledger.json"


def _json(args: list[str]) -> dict:
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_show_an_absent_ledger(ledger_file: Path) -> None:
    out = _json(["ledger", "show", "--ledger", str(ledger_file), "--json"])
    assert out["exists"] is False
    assert out["datasets"] == []
    assert out["releases"] == []
    res = runner.invoke(app, ["ledger", "show", "--ledger", str(ledger_file)])
    assert res.exit_code == 0
    assert "no release has been recorded" in " ".join(res.stdout.split())
    assert not ledger_file.exists()


def test_show_two_releases_composed_exactly(ledger_file: Path) -> None:
    rho = ExactGuarantee.zcdp("0.1")
    ledger = ReleaseLedger.open(ledger_file)
    for i in range(2):
        ledger.record(KEY, rho, release=f"/releases/{i}", plan="NMFv7-2020 [US]")
    out = _json(["ledger", "show", "--ledger", str(ledger_file), "--json", "--delta", "1e-9"])
    (d,) = out["datasets"]
    assert d["releases"] == 2
    assert Fraction(d["composed"]["value"]) == 2 * Fraction(1, 10)
    assert d["rho"]["value"] == "1/5"
    assert out["delta"] == 1e-9
    assert [r["release"] for r in out["releases"]] == ["/releases/0", "/releases/1"]


def test_set_lifetime_then_show_fits_80_columns(ledger_file: Path) -> None:
    base = ["--ledger", str(ledger_file)]
    res = runner.invoke(app, ["ledger", "set-lifetime", "--rho", "3/2", *base])
    assert res.exit_code == 0, res.output
    assert "ρ = 1.5" in res.stdout
    ledger = ReleaseLedger.open(ledger_file)
    long_path = "/data/releases/2030/us-detailed-dhc-race-and-ethnicity/" + "x" * 60
    ledger.record(KEY, ExactGuarantee.zcdp(1), release=long_path, plan="p")
    pending = ledger.reserve(KEY, ExactGuarantee.pure("1/3"), release="/r2", allow_more=True)
    out = _json(
        ["ledger", "set-lifetime", "--epsilon", "2", "--dataset", KEY[:19], *base, "--json"]
    )
    assert out["dataset"] == KEY
    assert out["lifetime"]["value"] == "2"
    res = runner.invoke(app, ["ledger", "set-lifetime", "--rho", "5", "--dataset", KEY, *base])
    assert res.exit_code == 0
    res = runner.invoke(app, ["ledger", "show", *base], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    text = res.stdout.replace("\n", "").replace("│", "").replace(" ", "")
    assert long_path in text  # folded, not cut
    assert "sha256:0123456789ab" in res.stdout
    assert pending.entry.id in res.stdout
    assert "ε at δ = 1e-10 (zCDP, optimal)" in res.stdout
    assert "lifetime budget" in res.stdout
    res = runner.invoke(app, ["ledger", "set-lifetime", "--clear", "--dataset", KEY, *base])
    assert res.exit_code == 0
    assert ReleaseLedger.open(ledger_file).lifetime(KEY) == ExactGuarantee.zcdp("1.5")


def test_settle(ledger_file: Path) -> None:
    ledger = ReleaseLedger.open(ledger_file)
    r = ledger.reserve(KEY, ExactGuarantee.zcdp(1), release="/r1")
    base = ["--ledger", str(ledger_file)]
    res = runner.invoke(app, ["ledger", "settle", r.entry.id, *base])
    assert res.exit_code == 2
    assert "--published or --not-published" in res.stderr
    res = runner.invoke(app, ["ledger", "settle", r.entry.id, "--published", *base])
    assert res.exit_code == 0, res.output
    assert "recorded as published" in res.stdout
    res = runner.invoke(app, ["ledger", "settle", r.entry.id, "--not-published", *base])
    assert res.exit_code == 2
    assert "never removed" in res.stderr
    assert len(ReleaseLedger.open(ledger_file).entries()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["set-lifetime"], "exactly one of"),
        (["set-lifetime", "--rho", "1", "--epsilon", "1"], "exactly one of"),
        (["set-lifetime", "--rho", "abc"], "--rho: rho must be a finite real number"),
        (["set-lifetime", "--rho", "0"], "must be positive"),
        (["show", "--delta", "2"], "--delta"),
        (["settle", "nope", "--published"], "no release with id 'nope'"),
    ],
)
def test_usage_errors(ledger_file: Path, args: list[str], message: str) -> None:
    res = runner.invoke(app, ["ledger", *args, "--ledger", str(ledger_file)])
    assert res.exit_code == 2
    assert message in res.stderr
    assert "Traceback" not in res.output


def test_a_damaged_ledger_is_exit_1_without_traceback(ledger_file: Path) -> None:
    ledger_file.write_text("{")
    res = runner.invoke(app, ["ledger", "show", "--ledger", str(ledger_file)])
    assert res.exit_code == 1
    assert str(ledger_file) in res.stderr
    assert "not valid JSON" in res.stderr
    assert "Traceback" not in res.output
