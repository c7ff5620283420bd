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
    SettleRefusedError,
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
    with pytest.raises(UsageError, match="a directory"):
        ReleaseLedger.open(tmp_path)


def test_a_pipe_or_device_is_refused_before_reading(tmp_path: Path) -> None:
    """Reading a FIFO would block forever and /dev/zero would exhaust memory: both are
    refused by their kind, before any read."""
    fifo = tmp_path / "ledger.json"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="named pipe") as err:
        ReleaseLedger.open(fifo)
    assert err.value.file == str(fifo.absolute())
    with pytest.raises(UsageError, match="character device"):
        ReleaseLedger.open("/dev/zero")


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


# ----------------------------------------------------------------------- issue 31
LIFE5 = ExactGuarantee.zcdp(5)
RHO4785 = ExactGuarantee.zcdp("4.785")
RECORDS = "records:" + "cd" * 32


def test_a_symlink_to_the_ledger_records_in_the_ledger_itself(tmp_path: Path) -> None:
    """The issue: through a symlink, the write replaced the link with a new file, so two
    releases of ρ 4.785 each passed a lifetime of ρ 5. Now the link is followed: one
    file, one lock, the second release refused."""
    real = tmp_path / "state" / "ledger.json"
    real.parent.mkdir()
    link = tmp_path / "my-ledger.json"
    link.symlink_to(real)
    via_link = ReleaseLedger.open(link)
    assert via_link.path == real
    via_link.record(DATA, RHO4785, release="/out/r1", lifetime=LIFE5)
    assert link.is_symlink()
    assert real.is_file()
    with pytest.raises(LifetimeBudgetExceededError, match=str(real)):
        ReleaseLedger.open(real).reserve(DATA, RHO4785, release="/out/r2", lifetime=LIFE5)
    with pytest.raises(LifetimeBudgetExceededError):
        ReleaseLedger.open(link).reserve(DATA, RHO4785, release="/out/r2", lifetime=LIFE5)
    assert len(ReleaseLedger.open(real).entries()) == 1
    assert not (tmp_path / "my-ledger.json.lock").exists()  # one lock, beside the real file
    assert (real.parent / "ledger.json.lock").exists()


def test_a_dangling_symlink_creates_the_ledger_at_its_target(tmp_path: Path) -> None:
    link = tmp_path / "ledger.json"
    link.symlink_to(tmp_path / "target.json")
    ReleaseLedger.open(link).record(DATA, RHO, release="/out/r1")
    assert link.is_symlink()
    assert len(ReleaseLedger.open(tmp_path / "target.json").entries()) == 1


def test_a_symlink_loop_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "a.json").symlink_to(tmp_path / "b.json")
    (tmp_path / "b.json").symlink_to(tmp_path / "a.json")
    with pytest.raises(UsageError, match="loop of symbolic links"):
        ReleaseLedger.open(tmp_path / "a.json")


def test_a_hard_linked_ledger_is_refused(tmp_path: Path) -> None:
    """The issue: a hard link lost the release the same way. Rule: refused (an atomic
    rewrite cannot keep two names of one file), before and at every change."""
    real = tmp_path / "ledger.json"
    ledger = ReleaseLedger.open(real)
    ledger.record(DATA, RHO4785, release="/out/r1", lifetime=LIFE5)
    os.link(real, tmp_path / "other-name.json")
    for name in ("ledger.json", "other-name.json"):
        with pytest.raises(UsageError, match="2 hard links"):
            ReleaseLedger.open(tmp_path / name)
    with pytest.raises(UsageError, match="hard links"):  # made after open()
        ledger.reserve(DATA, RHO4785, release="/out/r2", allow_more=True)
    assert real.read_text() == (tmp_path / "other-name.json").read_text()
    assert len(json.loads(real.read_text())["entries"]) == 1


def test_the_records_digest_ties_copies_of_one_data_set(ledger: ReleaseLedger) -> None:
    """A CRLF or re-sorted copy has other bytes (another sha256: key) but the same records
    digest: the releases compose and the lifetime budget holds."""
    first = ledger.reserve("sha256:" + "11" * 32, RHO4785, release="/out/r1", lifetime=LIFE5)
    first = first.identify([RECORDS], dataset=RECORDS, lifetime=LIFE5)
    first.commit()
    assert ledger.entries()[0].dataset == RECORDS
    assert ledger.entries()[0].identities == ("sha256:" + "11" * 32, RECORDS)
    copy = "sha256:" + "22" * 32
    res = ledger.reserve(copy, RHO4785, release="/out/r2", lifetime=LIFE5, identities=[copy])
    assert res.history.earlier == ()  # the bytes alone are new ...
    with pytest.raises(LifetimeBudgetExceededError, match="1 earlier release"):
        res.identify([RECORDS], dataset=RECORDS, lifetime=LIFE5)  # ... the records are not
    assert [e.id for e in ledger.entries()] == [first.entry.id]  # the claim is withdrawn
    assert ledger.composed(copy) is None
    assert ledger.composed(RECORDS) == RHO4785


def test_identify_reports_the_earlier_releases_and_other_names(ledger: ReleaseLedger) -> None:
    ledger.record("census-2030", RHO, release="/out/a", identities=[RECORDS])
    res = ledger.reserve("census-2030-v2", RHO, release="/out/b")
    assert res.history.earlier == ()
    res = res.identify([RECORDS])
    assert res.entry.dataset == "census-2030-v2"  # a declared name is kept
    assert res.history.other_names == ("census-2030",)
    assert [e.dataset for e in res.history.earlier] == ["census-2030"]
    assert res.history.total == ExactGuarantee.zcdp(2 * RHO.value)
    notes = res.history.notes(ledger.path, 1e-10)
    assert "under the data-set name(s) 'census-2030'" in notes[0]
    assert "already has 1 release(s)" in notes[1]
    assert "totalling ρ = 4.944; with this release it has spent ρ = 9.888 (ε ≤" in notes[1]
    eps = ledger.summary(1e-10)["datasets"][0]["epsilon"]["zcdp_optimal"]
    shown = Fraction(notes[1].split("ε ≤ ")[1].split(" ")[0])
    assert Fraction(eps) <= shown <= Fraction(eps) + Fraction(1, 10_000)  # rounded up
    # one data set in the summary, both names listed
    (d,) = ledger.summary()["datasets"]
    assert d["keys"] == ["census-2030", "census-2030-v2"]
    assert d["pending"] == 1


def test_a_first_release_has_nothing_to_report(ledger: ReleaseLedger) -> None:
    res = ledger.reserve(DATA, RHO, release="/out/a").identify([RECORDS])
    assert res.history.notes(ledger.path) == []


def _folder(path: Path, folder_id: str) -> Path:
    from privtab.atomic import MARKER

    path.mkdir(parents=True)
    marker = {"created_by": "privtab", "kind": "release", "id": folder_id}
    (path / MARKER).write_text(json.dumps(marker))
    return path


def test_settle_checks_whose_folder_is_at_the_path(ledger: ReleaseLedger, tmp_path: Path) -> None:
    """The issue: after a SIGKILL, a rerun published into the same --out under a new entry,
    and `settle OLD --published` was accepted — counted twice, irreversibly."""
    out = tmp_path / "release"
    old = ledger.reserve(DATA, RHO, release=out, folder="f-old")  # killed: never published
    new = ledger.reserve(DATA, RHO, release=out, folder="f-new", allow_more=True)
    _folder(out, "f-new")
    new.commit()
    assert ledger.settle_command(old.entry).split()[4] == "--not-published"
    with pytest.raises(
        SettleRefusedError, match=f"written by the run of ledger entry {new.entry.id}"
    ):
        ledger.settle(old.entry.id, published=True)
    assert ledger.settle(old.entry.id, published=False) is None
    assert ledger.composed(DATA) == RHO  # counted once


def test_settle_published_needs_the_entrys_own_folder(
    ledger: ReleaseLedger, tmp_path: Path
) -> None:
    out = tmp_path / "release"
    res = ledger.reserve(DATA, RHO, release=out, folder="f-1")
    with pytest.raises(SettleRefusedError, match="there is no release folder"):
        ledger.settle(res.entry.id, published=True)
    _folder(out, "someone-else")
    with pytest.raises(SettleRefusedError, match="is not the release folder"):
        ledger.settle(res.entry.id, published=True)
    moved = _folder(tmp_path / "moved", "f-1")
    assert ledger.settle_command(res.entry).split()[4] == "--not-published"
    done = ledger.settle(res.entry.id, published=True, release=moved)
    assert done is not None
    assert done.release == str(moved)


def test_settle_not_published_is_refused_while_its_folder_is_there(
    ledger: ReleaseLedger, tmp_path: Path
) -> None:
    """Killed after the rename, before the commit: the folder is its own — published."""
    out = _folder(tmp_path / "release", "f-1")
    res = ledger.reserve(DATA, RHO, release=out, folder="f-1")
    assert ledger.settle_command(res.entry) == (
        f"privtab ledger settle {res.entry.id} --published --ledger {ledger.path}"
    )
    with pytest.raises(SettleRefusedError, match="its own release folder is at"):
        ledger.settle(res.entry.id, published=False)
    assert ledger.settle(res.entry.id, published=True) is not None


def test_a_release_never_replaces_the_folder_of_an_unconfirmed_entry(
    ledger: ReleaseLedger, tmp_path: Path
) -> None:
    out = _folder(tmp_path / "release", "f-1")
    res = ledger.reserve(DATA, RHO, release=out, folder="f-1")
    with pytest.raises(UsageError, match=f"release of ledger entry {res.entry.id}.*settle it"):
        ledger.reserve(DATA, RHO, release=out, folder="f-2", replaces="f-1")
    assert len(ledger.entries()) == 1
    ledger.settle(res.entry.id, published=True)
    ledger.reserve(DATA, RHO, release=out, folder="f-2", replaces="f-1")  # settled: fine


def test_unconfirmed_entries_are_listed_with_their_command(ledger: ReleaseLedger) -> None:
    ctx = mp.get_context("fork")
    p = ctx.Process(target=_reserve_then_die, args=(str(ledger.path),))
    p.start()
    p.join(30)
    live = ledger.reserve("other", RHO, release="/out/live")  # this process: running
    (dead,) = ledger.unconfirmed()
    assert dead.release == "/out/killed"
    (note,) = ledger.pending_notes(exclude=live.entry.id)
    assert f"ledger entry {dead.id}" in note
    assert "UNCONFIRMED" in note
    assert note.endswith(f"privtab ledger settle {dead.id} --not-published --ledger {ledger.path}")
    rows = {r["id"]: r for r in ledger.summary()["releases"]}
    assert rows[dead.id]["settle"] == ledger.settle_command(dead)
    assert rows[dead.id]["process_alive"] is False
    assert rows[live.entry.id]["process_alive"] is True


def test_a_release_returned_to_the_caller_is_recorded_as_such(ledger: ReleaseLedger) -> None:
    res = ledger.reserve(DATA, RHO, release=None)
    assert res.entry.delivery == "caller"
    assert res.entry.release == ""
    assert res.entry.where == "returned to the caller"
    assert ledger.settle_command(res.entry).split()[4] == "--published"
    done = res.commit()
    assert (done.status, done.delivery, done.release) == ("published", "caller", "")


def test_a_version_1_ledger_is_read_and_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    v1 = {
        "schema_version": 1,
        "kind": "privtab release ledger",
        "lifetime": {"default": None, "datasets": {DATA: LIFE5.to_dict()}},
        "entries": [
            {
                "id": "abc",
                "when": "2026-01-01T00:00:00+00:00",
                "dataset": DATA,
                "release": "/out/r1",
                "plan": "p",
                "guarantee": RHO4785.to_dict(),
                "status": "published",
            }
        ],
    }
    path.write_text(json.dumps(v1))
    ledger = ReleaseLedger.open(path)
    (old,) = ledger.entries()
    assert (old.identities, old.folder, old.delivery) == ((), "", "folder")
    # the same file read again (its sha256: key is the old entry's key): the v1 lifetime holds
    with pytest.raises(LifetimeBudgetExceededError):
        ledger.reserve("census", RHO4785, release="/out/r2", identities=[DATA])
    ledger.record("other", RHO, release="/out/x")
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == SCHEMA_VERSION == 2
    assert doc["entries"][0]["id"] == "abc"
