"""The ledger across releases: exact composition, lifetime checks, locking, crashes."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import stat
from fractions import Fraction
from pathlib import Path

import pytest

from privtab.accounting import ExactGuarantee
from privtab.accounting.exact import compose_exact
from privtab.accounting.odometer import (
    LEDGER_ENV,
    SCHEMA_VERSION,
    LifetimeBudgetExceededError,
    ReleaseLedger,
    default_ledger_path,
    fingerprint_files,
)
from privtab.errors import InputError, UsageError

RHO = ExactGuarantee.zcdp("4.944")
DATA = "sha256:" + "ab" * 32


@pytest.fixture
def ledger(tmp_path: Path) -> ReleaseLedger:
    return ReleaseLedger.open(tmp_path / "state" / "ledger.json")


def test_default_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "x.json"))
    assert default_ledger_path() == tmp_path / "x.json"
    monkeypatch.delenv(LEDGER_ENV)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "st"))
    assert default_ledger_path() == tmp_path / "st" / "privtab" / "ledger.json"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_ledger_path() == tmp_path / "home/.local/state/privtab/ledger.json"
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "y.json"))
    assert ReleaseLedger.open().path == tmp_path / "y.json"


def test_empty_ledger_is_not_created_by_reading(ledger: ReleaseLedger) -> None:
    assert ledger.entries() == []
    assert ledger.composed(DATA) is None
    assert ledger.check(DATA, RHO) is False
    assert not ledger.exists
    assert not ledger.path.parent.exists()


def test_record_writes_a_private_versioned_file(ledger: ReleaseLedger) -> None:
    e = ledger.record(DATA, RHO, release="/out/r1", plan="NMFv7-2020 [US]", note="first")
    assert e.status == "published"
    assert not e.over_lifetime
    assert e.when.endswith("+00:00")
    doc = json.loads(ledger.path.read_text())
    assert doc["schema_version"] == SCHEMA_VERSION
    assert doc["entries"][0]["guarantee"] == {
        "definition": "zcdp",
        "value": "618/125",
        "value_float": 4.944000000000001,  # rounded up: 4.944 as a float is below 618/125
    }
    assert Fraction(doc["entries"][0]["guarantee"]["value_float"]) >= Fraction(618, 125)
    assert stat.S_IMODE(ledger.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(ledger.path.parent.stat().st_mode) == 0o700
    assert [p.name for p in ledger.path.parent.iterdir() if p.name.endswith(".tmp")] == []
    assert ReleaseLedger.open(ledger.path).entries() == [e]


def test_second_release_over_the_lifetime_is_refused(ledger: ReleaseLedger) -> None:
    """The acceptance scenario: lifetime 1.5× one release's ρ; the second is refused with
    a message naming the ledger and the numbers; --allow-more-releases records it."""
    lifetime = ExactGuarantee.zcdp(RHO.value * Fraction(3, 2))
    ledger.record(DATA, RHO, release="/out/r1", lifetime=lifetime)
    with pytest.raises(LifetimeBudgetExceededError) as err:
        ledger.reserve(DATA, RHO, release="/out/r2", lifetime=lifetime)
    msg = str(err.value)
    assert str(ledger.path) in msg
    assert "1 earlier release(s) totalling ρ = 4.944" in msg
    assert "this release is ρ = 4.944" in msg
    assert "together ρ = 9.888 > lifetime ρ = 7.416" in msg
    assert "--allow-more-releases" in msg
    assert isinstance(err.value, UsageError)
    assert len(ledger.entries()) == 1
    res = ledger.reserve(DATA, RHO, release="/out/r2", lifetime=lifetime, allow_more=True)
    assert res.over_lifetime
    res.commit()
    assert [e.over_lifetime for e in ledger.entries(DATA)] == [False, True]
    assert ledger.composed(DATA) == ExactGuarantee("zcdp", 2 * RHO.value)


def test_other_data_sets_are_separate(ledger: ReleaseLedger) -> None:
    life = ExactGuarantee.zcdp(5)
    ledger.record(DATA, RHO, release="a", lifetime=life)
    ledger.record("other", RHO, release="b", lifetime=life)
    assert ledger.datasets() == [DATA, "other"]
    assert ledger.composed("other") == RHO


def test_mixed_definitions_compose_in_zcdp(ledger: ReleaseLedger) -> None:
    """ε-DP ⇒ ε²/2-zCDP term by term (Bun & Steinke 2016, Prop. 1.4)."""
    ledger.record(DATA, ExactGuarantee.pure("0.5"), release="a")
    ledger.record(DATA, ExactGuarantee.pure("0.5"), release="b")
    assert ledger.composed(DATA) == ExactGuarantee.pure(1)
    ledger.record(DATA, ExactGuarantee.zcdp("0.1"), release="c")
    assert ledger.composed(DATA) == ExactGuarantee("zcdp", Fraction(1, 8) * 2 + Fraction(1, 10))
    # a zCDP history cannot be bounded by a pure-DP lifetime
    with pytest.raises(LifetimeBudgetExceededError, match="cannot be bounded by a pure-DP"):
        ledger.check(DATA, ExactGuarantee.pure("0.1"), ExactGuarantee.pure(100))
    # a pure release against a zCDP lifetime: ε²/2
    assert ledger.check("new", ExactGuarantee.pure(1), ExactGuarantee.zcdp("0.5")) is False
    with pytest.raises(LifetimeBudgetExceededError):
        ledger.check("new", ExactGuarantee.pure(1), ExactGuarantee.zcdp("0.49"))


def test_compose_exact_converts_each_pure_term() -> None:
    """Three pure terms and a zCDP one: Σε²/2 + ρ, not (Σε)²/2 + ρ."""
    gs = [ExactGuarantee.pure(1)] * 3 + [ExactGuarantee.zcdp(0)]
    assert compose_exact(gs) == ExactGuarantee("zcdp", Fraction(3, 2))
    assert compose_exact(gs[:3]) == ExactGuarantee.pure(3)
    assert compose_exact([]) is None


def test_lifetime_settings_and_the_stricter_rule(ledger: ReleaseLedger) -> None:
    ledger.set_lifetime(ExactGuarantee.zcdp(6))
    assert ledger.lifetime(DATA) == ExactGuarantee.zcdp(6)
    ledger.record(DATA, RHO, release="a")
    with pytest.raises(LifetimeBudgetExceededError, match="lifetime ρ = 6"):
        ledger.check(DATA, RHO)
    ledger.set_lifetime(ExactGuarantee.zcdp(100), DATA)
    assert ledger.check(DATA, RHO) is False
    # a flag and the ledger setting both apply: the smaller binds
    with pytest.raises(LifetimeBudgetExceededError, match="lifetime ρ = 9"):
        ledger.check(DATA, RHO, ExactGuarantee.zcdp(9))
    ledger.set_lifetime(None, DATA)
    assert ledger.lifetime(DATA) == ExactGuarantee.zcdp(6)
    ledger.set_lifetime(None)
    assert ledger.lifetime(DATA) is None
    assert ledger.lifetimes() == (None, {})


def test_exact_boundary(ledger: ReleaseLedger) -> None:
    """Ten releases of exactly 1/10 fit ε = 1; ten of the float 0.1 do not."""
    life = ExactGuarantee.pure(1)
    for i in range(10):
        ledger.record("exact", ExactGuarantee.pure(Fraction(1, 10)), release=str(i), lifetime=life)
    for i in range(9):
        ledger.record("float", ExactGuarantee.pure(0.1), release=str(i), lifetime=life)
    with pytest.raises(LifetimeBudgetExceededError):
        ledger.record("float", ExactGuarantee.pure(0.1), release="9", lifetime=life)


def test_pending_counts_until_settled(ledger: ReleaseLedger) -> None:
    life = ExactGuarantee.zcdp(RHO.value * Fraction(3, 2))
    res = ledger.reserve(DATA, RHO, release="/out/r1", plan="p", lifetime=life)
    (e,) = ledger.entries(DATA)
    assert e.pending
    assert e.process_alive() is True
    assert ledger.composed(DATA) == RHO
    with pytest.raises(LifetimeBudgetExceededError, match="unconfirmed"):
        ledger.check(DATA, RHO, life)
    res.cancel()
    assert ledger.entries() == []
    res2 = ledger.reserve(DATA, RHO, release="/out/r1", lifetime=life)
    done = res2.commit("/final/r1")
    assert done.release == "/final/r1"
    assert not done.pending
    with pytest.raises(UsageError, match="never removed"):
        ledger.settle(done.id, published=False)
    res2.cancel()  # a published release stays
    assert len(ledger.entries()) == 1
    with pytest.raises(UsageError, match="no release with id"):
        ledger.settle("nope", published=True)


def test_commit_after_the_operator_removed_the_pending_entry(ledger: ReleaseLedger) -> None:
    res = ledger.reserve(DATA, RHO, release="/out/r1")
    ledger.settle(res.entry.id, published=False)
    assert ledger.entries() == []
    res.commit()
    assert [e.status for e in ledger.entries()] == ["published"]


def _reserve_then_die(path: str) -> None:
    ledger = ReleaseLedger.open(path)
    ledger.reserve(DATA, RHO, release="/out/killed")
    os._exit(9)  # killed between reserving and committing: no cleanup runs


def test_a_crash_leaves_an_unconfirmed_entry_and_no_lock(ledger: ReleaseLedger) -> None:
    ctx = mp.get_context("fork")
    p = ctx.Process(target=_reserve_then_die, args=(str(ledger.path),))
    p.start()
    p.join(30)
    assert p.exitcode == 9
    (e,) = ledger.entries()
    assert e.pending
    assert e.process_alive() is False
    # the stale reservation still counts: a second release that would fit alone is refused
    life = ExactGuarantee.zcdp(RHO.value * Fraction(3, 2))
    with pytest.raises(LifetimeBudgetExceededError, match=e.id):
        ledger.reserve(DATA, RHO, release="/out/r2", lifetime=life)
    # the lock is free: another transaction goes through at once
    ledger.set_lifetime(life)
    ledger.settle(e.id, published=False)
    ledger.reserve(DATA, RHO, release="/out/r2").commit()
    assert len(ledger.entries()) == 1


def _race(path: str, barrier: object, out: object) -> None:
    ledger = ReleaseLedger.open(path)
    life = ExactGuarantee.zcdp(RHO.value * Fraction(3, 2))
    barrier.wait()  # type: ignore[attr-defined]
    try:
        ledger.reserve(DATA, RHO, release=f"/out/{os.getpid()}", lifetime=life)
        out.put("ok")  # type: ignore[attr-defined]
    except LifetimeBudgetExceededError:
        out.put("refused")  # type: ignore[attr-defined]


def test_concurrent_runs_cannot_both_pass_the_check(ledger: ReleaseLedger) -> None:
    """Four processes reserve at the same instant; the budget allows one: one succeeds."""
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(ledger.path), barrier, out)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    results = sorted(out.get(timeout=5) for _ in procs)
    assert results == ["ok", "refused", "refused", "refused"]
    assert len(ledger.entries()) == 1


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("{not json", "not valid JSON"),
        ('{"kind": "something else"}', "not a privtab release ledger"),
        ('{"kind": "privtab release ledger", "schema_version": 99}', "schema_version 99"),
        (
            '{"kind": "privtab release ledger", "schema_version": 1, "entries": [{"id": 1}]}',
            "damaged",
        ),
    ],
)
def test_a_bad_ledger_file_is_a_located_error(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "ledger.json"
    path.write_text(content)
    with pytest.raises(InputError, match=match) as err:
        ReleaseLedger.open(path)
    assert err.value.file == str(path.absolute())
    assert path.read_text() == content


def test_a_directory_is_not_a_ledger(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is a directory"):
        ReleaseLedger.open(tmp_path)


def test_fingerprint(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"1,2,3\n")
    b.write_bytes(b"1,2,4\n")
    fa = fingerprint_files([a])
    assert fa.startswith("sha256:")
    assert len(fa) == 7 + 64
    assert fa == fingerprint_files([str(a)])
    assert fa != fingerprint_files([b])
    assert fingerprint_files([a, b]) != fingerprint_files([b, a])


def test_summary_in_every_definition(ledger: ReleaseLedger) -> None:
    ledger.set_lifetime(ExactGuarantee.zcdp(10))
    ledger.record(DATA, RHO, release="a")
    ledger.record(DATA, RHO, release="b")
    s = ledger.summary(1e-10)
    (d,) = s["datasets"]
    assert d["composed"]["value"] == str(2 * RHO.value)
    assert d["rho"]["value"] == "1236/125"
    assert set(d["epsilon"]) == {"zcdp_analytic", "zcdp_optimal", "zcdp_grid"}
    assert d["epsilon"]["zcdp_optimal"] <= d["epsilon"]["zcdp_analytic"]
    assert Fraction(d["remaining"]["value"]) == 10 - 2 * RHO.value
    assert Fraction(d["remaining"]["value_float"]) <= 10 - 2 * RHO.value
    assert len(s["releases"]) == 2
