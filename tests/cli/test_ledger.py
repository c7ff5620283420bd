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


def _reserve_then_die(path: str, release: str) -> None:
    import os

    ReleaseLedger.open(path).reserve(KEY, ExactGuarantee.zcdp(1), release=release, folder="f1")
    os._exit(9)  # killed: no cleanup


def test_show_lists_an_unconfirmed_entry_with_the_command_that_settles_it(
    ledger_file: Path, tmp_path: Path
) -> None:
    import multiprocessing as mp

    p = mp.get_context("fork").Process(
        target=_reserve_then_die, args=(str(ledger_file), str(tmp_path / "rel"))
    )
    p.start()
    p.join(30)
    (e,) = ReleaseLedger.open(ledger_file).entries()
    command = f"privtab ledger settle {e.id} --not-published --ledger {ledger_file}"
    out = _json(["ledger", "show", "--ledger", str(ledger_file), "--json"])
    assert out["releases"][0]["settle"] == command
    res = runner.invoke(app, ["ledger", "show", "--ledger", str(ledger_file)])
    assert res.exit_code == 0, res.output
    flat = " ".join(res.stdout.replace("│", " ").split())
    assert "UNCONFIRMED" in flat
    assert command.replace(" ", "") in flat.replace(" ", "")


def test_settle_refuses_an_outcome_the_folder_contradicts(
    ledger_file: Path, tmp_path: Path
) -> None:
    from privtab.atomic import atomic_directory

    out = tmp_path / "rel"
    ledger = ReleaseLedger.open(ledger_file)
    old = ledger.reserve(KEY, ExactGuarantee.zcdp(1), release=out, folder="old-folder")
    new = ledger.reserve(KEY, ExactGuarantee.zcdp(1), release=out, folder="new-folder")
    with atomic_directory(out, kind="release", folder_id="new-folder") as tmp:
        (tmp / "release.json").write_text("{}")
    new.commit()
    base = ["--ledger", str(ledger_file)]
    res = runner.invoke(app, ["ledger", "settle", old.entry.id, "--published", *base])
    assert res.exit_code == 2
    assert f"written by the run of ledger entry {new.entry.id}" in res.stderr
    assert "--not-published" in res.stderr
    assert "Traceback" not in res.output
    res = runner.invoke(app, ["ledger", "settle", old.entry.id, "--not-published", *base])
    assert res.exit_code == 0, res.output
    assert [e.id for e in ReleaseLedger.open(ledger_file).entries()] == [new.entry.id]


def test_show_groups_two_names_of_the_same_records(ledger_file: Path) -> None:
    ledger = ReleaseLedger.open(ledger_file)
    records = "records:" + "ef" * 32
    ledger.record("census-a", ExactGuarantee.zcdp(1), release="/r/a", identities=[records])
    ledger.record("census-b", ExactGuarantee.zcdp(1), release="/r/b", identities=[records])
    out = _json(["ledger", "show", "--ledger", str(ledger_file), "--json"])
    (d,) = out["datasets"]
    assert d["keys"] == ["census-a", "census-b"]
    assert d["rho"]["value"] == "2"
    shown = runner.invoke(app, ["ledger", "show", "--ledger", str(ledger_file)])
    assert "data set census-a (also census-b)" in shown.stdout
    one = _json(["ledger", "show", "--ledger", str(ledger_file), "--dataset", "census-b", "--json"])
    assert [r["dataset"] for r in one["releases"]] == ["census-a", "census-b"]


@pytest.mark.parametrize("how", ["symlink", "hardlink"])
def test_the_ledger_path_is_resolved_or_refused(tmp_path: Path, how: str) -> None:
    import os

    real = tmp_path / "real.json"
    ReleaseLedger.open(real).record(KEY, ExactGuarantee.zcdp(1), release="/r/a")
    other = tmp_path / "other.json"
    if how == "symlink":
        other.symlink_to(real)
        out = _json(["ledger", "show", "--ledger", str(other), "--json"])
        assert out["ledger"] == str(real)
        assert len(out["releases"]) == 1
    else:
        os.link(real, other)
        res = runner.invoke(app, ["ledger", "show", "--ledger", str(other)])
        assert res.exit_code == 2
        assert "hard links" in res.stderr
