"""A release and the release ledger, end to end (issue 31): the budget of a data set is
counted once — whatever the file's encoding or row order, a crash, a rerun, a concurrent
run or a signal in the ledger step — and every release says what the data set already
had. Private runs (the secure source) on 1,500 synthetic persons of one state with four
levels (seconds each); the ledger is a file of each test's own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privtab.accounting import ExactGuarantee
from privtab.accounting.odometer import LedgerEntry, ReleaseLedger
from privtab.cli import app
from privtab.release import read_release_document
from tests._links import LINK_KINDS, symlinked_output

from .conftest import demo_params

runner = CliRunner()
LEVELS_OFF = {
    f"privacy_budget_p_level_{lv}_{geo}": 0
    for geo in ("county", "tract", "place", "aiannh")
    for lv in (1, 2)
}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(config.json, data folder): 1,500 persons in Delaware, the USA and STATE levels."""
    from privtab.data.synth import synthesize

    root = tmp_path_factory.mktemp("ledger-e2e")
    synthesize(root / "data", 1_500, states=["10"], seed=3)
    return demo_params(root / "params", ["10"], run_pr=False, **LEVELS_OFF), root / "data"


def _args(tiny: tuple[Path, Path], out: Path, ledger: Path, data: Path | None = None) -> list[str]:
    config, folder = tiny
    return [
        "safetab", "run", "--config", str(config), "--data", str(data or folder),
        "--out", str(out), "--ledger", str(ledger), "--no-report", "--format", "txt",
    ]  # fmt: skip


def _run(
    tiny: tuple[Path, Path], out: Path, ledger: Path, *extra: str, **kw: Path
) -> tuple[int, str]:
    res = runner.invoke(app, [*_args(tiny, out, ledger, **kw), *extra])
    return res.exit_code, res.output


def _rho(out: Path) -> Fraction:
    return Fraction(read_release_document(out).guarantee.value)


def _copy(tiny: tuple[Path, Path], dest: Path, how: str) -> Path:
    """The data folder with its person file re-encoded (CRLF) or its rows reversed."""
    dest.mkdir()
    for f in tiny[1].iterdir():
        (dest / f.name).write_bytes(f.read_bytes())
    persons = dest / "person-records.txt"
    lines = persons.read_bytes().splitlines()
    if how == "crlf":
        persons.write_bytes(b"\r\n".join(lines) + b"\r\n")
    else:
        persons.write_bytes(b"\n".join([lines[0], *reversed(lines[1:])]) + b"\n")
    return dest


def _records_key(config: Path, data: Path, batch_rows: int = 1 << 20) -> str:
    from privtab.accounting.digest import RecordDigest
    from privtab.data import load_inputs
    from privtab.tabulate.aggregate import PERSONS_SCHEMA, aggregate_persons

    inputs = load_inputs(config, data, validate_persons=False)
    digest = RecordDigest(PERSONS_SCHEMA)
    aggregate_persons(inputs, digest=digest, batch_rows=batch_rows)
    return digest.key


def test_the_records_digest_of_every_layout_of_one_file(
    tiny: tuple[Path, Path], tmp_path: Path
) -> None:
    """The person file as written, with CRLF line endings, with its rows reversed, as
    Parquet, read in other batches: one records digest; one changed person: another."""
    from privtab.data.synth import synthesize

    config, data = tiny
    key = _records_key(config, data)
    assert key.startswith("records:")
    assert _records_key(config, _copy(tiny, tmp_path / "crlf", "crlf")) == key
    assert _records_key(config, _copy(tiny, tmp_path / "rev", "reordered")) == key
    assert _records_key(config, data, batch_rows=97) == key
    synthesize(tmp_path / "pq", 1_500, states=["10"], seed=3, fmt="parquet")  # as `tiny`
    assert _records_key(config, tmp_path / "pq") == key
    changed = _copy(tiny, tmp_path / "changed", "crlf")
    persons = changed / "person-records.txt"
    lines = persons.read_bytes().split(b"\r\n")
    cols = lines[0].split(b"|")
    row = lines[1].split(b"|")
    age = cols.index(b"QAGE")
    row[age] = str((int(row[age]) + 1) % 100).encode()
    persons.write_bytes(b"\r\n".join([lines[0], b"|".join(row), *lines[2:]]))
    assert _records_key(config, changed) != key


@pytest.mark.parametrize("how", ["crlf", "reordered"])
def test_a_re_encoded_or_reordered_copy_is_the_same_data_set(
    tiny: tuple[Path, Path], tmp_path: Path, how: str
) -> None:
    """The issue: the same persons with CRLF line endings (or reordered rows) were a new
    data set — released twice under a lifetime that allowed one. Now the records digest
    ties them: the second release is refused before any noise is drawn."""
    ledger = tmp_path / "ledger.json"
    code, text = _run(tiny, tmp_path / "first", ledger)
    assert code == 0, text
    rho = _rho(tmp_path / "first")
    copy = _copy(tiny, tmp_path / "copy", how)
    assert (copy / "person-records.txt").read_bytes() != (
        tiny[1] / "person-records.txt"
    ).read_bytes()
    code, text = _run(
        tiny, tmp_path / "second", ledger, "--lifetime-rho", str(rho * 3 / 2), data=copy
    )
    assert code == 2, text
    assert "1 earlier release(s)" in text
    assert "lifetime" in text
    assert not (tmp_path / "second").exists()
    assert not any(p.name.startswith(".second") for p in tmp_path.iterdir())
    (entry,) = ReleaseLedger.open(ledger).entries()  # the refused run's claim is withdrawn
    assert entry.dataset.startswith("records:")
    # the ledger knows the data set by its records; the release folder never does
    for f in (tmp_path / "first").rglob("*"):
        if f.is_file():
            assert entry.dataset[8:] not in f.read_text(errors="replace")


def test_every_further_release_says_what_the_data_set_already_had(
    tiny: tuple[Path, Path], tmp_path: Path
) -> None:
    """The issue: a second release of the same data set composed to 2ρ without a word."""
    ledger = tmp_path / "ledger.json"
    code, text = _run(tiny, tmp_path / "first", ledger)
    assert code == 0, text
    assert "already has" not in text
    code, text = _run(tiny, tmp_path / "second", ledger)
    assert code == 0, text
    flat = " ".join(text.split())
    rho = _rho(tmp_path / "first")
    assert "this data set already has 1 release(s)" in flat
    spent = ExactGuarantee.zcdp(2 * rho)
    assert (
        f"totalling {ExactGuarantee.zcdp(rho)}; with this release it has spent {spent} (ε ≤ "
        in flat
    )
    summary = ReleaseLedger.open(ledger).summary()
    (d,) = summary["datasets"]
    assert Fraction(d["composed"]["value"]) == 2 * rho


HOLD = r"""
import os, signal, sys, time
import privtab.tabulate.context as context

PHASE = sys.argv[1]


def hold(name):
    if name == PHASE:
        print(f"HOLD {name}", file=sys.stderr, flush=True)
        time.sleep(60)


context.phase = hold
if PHASE == "ledger":  # just after the ledger step wrote the pending entry
    from privtab.accounting.odometer import ReleaseLedger

    original = ReleaseLedger._add

    def add(*a, **k):
        done = original(*a, **k)
        print("HOLD ledger", file=sys.stderr, flush=True)
        time.sleep(1.0)
        return done

    ReleaseLedger._add = add
from privtab.cli import main

sys.argv = ["privtab", *sys.argv[2:]]
main()
"""


def _start_held(
    tiny: tuple[Path, Path], out: Path, ledger: Path, phase: str, *extra: str
) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, phase, *_args(tiny, out, ledger), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith(f"HOLD {phase}"):
            return proc
    proc.wait()
    pytest.fail(f"never reached {phase}: {''.join(seen)}")


def _settle(ledger: Path, entry: str, flag: str) -> tuple[int, str]:
    res = runner.invoke(app, ["ledger", "settle", entry, flag, "--ledger", str(ledger)])
    return res.exit_code, res.output


def _killed_at(tiny: tuple[Path, Path], out: Path, ledger: Path, phase: str) -> LedgerEntry:
    """A run SIGKILLed at ``phase``: the pending entry it left."""
    proc = _start_held(tiny, out, ledger, phase)
    proc.kill()
    proc.wait()
    (old,) = ReleaseLedger.open(ledger).entries()
    assert old.pending
    return old


def test_sigkill_rerun_settle_counts_the_budget_once(
    tiny: tuple[Path, Path], tmp_path: Path
) -> None:
    """The issue's scenario: a SIGKILLed run leaves an UNCONFIRMED entry; a rerun into the
    same --out published without mentioning it; `settle OLD --published` was accepted
    although the folder is the rerun's — the budget counted twice, irreversibly."""
    ledger, out = tmp_path / "ledger.json", tmp_path / "release"
    old = _killed_at(tiny, out, ledger, "level")
    code, text = _run(tiny, out, ledger)  # the rerun
    assert code == 0, text
    flat = " ".join(text.split())
    assert f"ledger entry {old.id}" in flat
    assert "UNCONFIRMED" in flat
    assert f"privtab ledger settle {old.id} --not-published --ledger {ledger}" in flat
    code, text = _settle(ledger, old.id, "--published")
    assert code == 2, text
    assert "written by the run of ledger entry" in text
    code, text = _settle(ledger, old.id, "--not-published")
    assert code == 0, text
    entries = ReleaseLedger.open(ledger).entries()
    assert [e.status for e in entries] == ["published"]
    assert (
        ReleaseLedger.open(ledger).composed(entries[0].dataset)
        == read_release_document(out).guarantee
    )  # counted once


def test_sigkill_after_publication_then_rerun_with_overwrite(
    tiny: tuple[Path, Path], tmp_path: Path
) -> None:
    """Killed after the rename, before the commit: the folder is the old entry's own. A
    rerun with --overwrite may not destroy it before the entry is settled; settling says
    published (not published is refused); then both releases are counted."""
    ledger, out = tmp_path / "ledger.json", tmp_path / "release"
    old = _killed_at(tiny, out, ledger, "published")
    assert (out / "release.json").exists()
    code, text = _run(tiny, out, ledger, "--overwrite")
    assert code == 2, text
    assert f"holds the release of ledger entry {old.id}" in text
    assert f"privtab ledger settle {old.id} --published" in " ".join(text.split())
    assert len(ReleaseLedger.open(ledger).entries()) == 1
    code, text = _settle(ledger, old.id, "--not-published")
    assert code == 2, text
    code, text = _settle(ledger, old.id, "--published")
    assert code == 0, text
    code, text = _run(tiny, out, ledger, "--overwrite")
    assert code == 0, text
    rho = _rho(out)
    entries = ReleaseLedger.open(ledger).entries()
    assert [e.status for e in entries] == ["published", "published"]
    assert ReleaseLedger.open(ledger).composed(entries[0].dataset).value == 2 * rho  # type: ignore[union-attr]


def test_a_run_refused_because_another_writes_the_same_out_reserves_nothing(
    tiny: tuple[Path, Path], tmp_path: Path
) -> None:
    ledger, out = tmp_path / "ledger.json", tmp_path / "release"
    proc = _start_held(tiny, out, ledger, "level")
    try:
        (first,) = ReleaseLedger.open(ledger).entries()
        started = time.monotonic()
        code, text = _run(tiny, out, ledger)
        assert code == 2, text
        assert "another privtab process" in text
        assert time.monotonic() - started < 30  # refused at once, not after the work
        assert [e.id for e in ReleaseLedger.open(ledger).entries()] == [first.id]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert ReleaseLedger.open(ledger).entries() == []  # the interrupted run withdrew its own


def test_a_run_refused_at_publication_withdraws_its_reservation(
    tiny: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The target appeared while the run worked (another writer): the run is refused at
    the rename, and its pending entry is withdrawn (the issue: a refused run left a charge)."""
    import privtab.tabulate.context as context

    ledger, out = tmp_path / "ledger.json", tmp_path / "release"

    def meanwhile(name: str) -> None:
        if name == "write":
            out.mkdir()
            (out / "someone-elses.txt").write_text("x")

    monkeypatch.setattr(context, "phase", meanwhile)
    code, text = _run(tiny, out, ledger)
    assert code == 2, text
    assert f"output {out} exists" in text
    assert ReleaseLedger.open(ledger).entries() == []
    assert sorted(p.name for p in out.iterdir()) == ["someone-elses.txt"]


def test_a_run_that_fails_before_publication_cancels_its_reservation(
    tiny: tuple[Path, Path], tmp_path: Path
) -> None:
    """A bad person row is found while the records are read — after the reservation (the
    ledger is checked before the person file is read): exit 1, no release, and the
    pending entry is gone (one of the issue's two surviving mutants)."""
    ledger, out = tmp_path / "ledger.json", tmp_path / "release"
    bad = _copy(tiny, tmp_path / "bad", "reordered")
    persons = bad / "person-records.txt"
    lines = persons.read_text().splitlines()
    cols = lines[0].split("|")
    row = lines[5].split("|")
    row[cols.index("QAGE")] = "abc"
    persons.write_text("\n".join([*lines[:5], "|".join(row), *lines[6:]]) + "\n")
    code, text = _run(tiny, out, ledger, data=bad)
    assert code == 1, text
    assert "column QAGE, value 'abc'" in text
    assert "checking the release ledger" in text  # it was reserved ...
    assert ReleaseLedger.open(ledger).entries() == []  # ... and cancelled
    assert not out.exists()


def test_sigterm_during_the_ledger_step_leaves_no_entry(
    tiny: tuple[Path, Path], tmp_path: Path
) -> None:
    """The issue: SIGTERM during the ledger step left a pending entry that the next run
    did not mention. Now the interrupted run waits for its ledger step and withdraws it."""
    ledger, out = tmp_path / "ledger.json", tmp_path / "release"
    proc = _start_held(tiny, out, ledger, "ledger")
    assert ReleaseLedger.open(ledger).entries()[0].pending  # written, not yet returned
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "no release was written" in stderr
    assert ReleaseLedger.open(ledger).entries() == []
    assert not out.exists()


def test_a_python_release_without_out_is_recorded_as_returned_to_the_caller(
    tiny: tuple[Path, Path], tmp_path: Path
) -> None:
    """The issue: privtab.safetab.release() without out= recorded a *published* entry at a
    temporary folder deleted on close."""
    from privtab.safetab import release

    config, data = tiny
    ledger = tmp_path / "ledger.json"
    r = release(data, config=config, ledger=ledger, progress=False)
    r.close()
    (e,) = ReleaseLedger.open(ledger).entries()
    assert (e.status, e.delivery, e.release) == ("published", "caller", "")
    shown = runner.invoke(app, ["ledger", "show", "--ledger", str(ledger)])
    assert "(returnedtothecaller)" in shown.stdout.replace("│", "").replace(" ", "").replace(
        "\n", ""
    )
    with pytest.warns(UserWarning, match="this data set already has 1 release"):
        r = release(data, config=config, ledger=ledger, progress=False, out=tmp_path / "rel")
    r.close()
    assert ReleaseLedger.open(ledger).entries()[1].release == str(tmp_path / "rel")


# ------------------------------------------------------------- the release folder
@pytest.mark.parametrize("where", ["inside", "deeper", "equal"])
def test_the_run_record_is_never_inside_the_release_folder(
    tiny: tuple[Path, Path], tmp_path: Path, where: str
) -> None:
    out = tmp_path / "release"
    record = {"inside": out / "rec.json", "deeper": out / "t1" / "rec.json", "equal": out}[where]
    code, text = _run(tiny, out, tmp_path / "ledger.json", "--run-record", str(record), "--parents")
    assert code == 2, text
    assert "lies inside the release folder" in text
    assert "CONFIDENTIAL" in text
    assert not out.exists()
    assert not (tmp_path / "ledger.json").exists()


def test_the_json_summary_holds_no_timings(tiny: tuple[Path, Path], tmp_path: Path) -> None:
    """The issue: `safetab run --json` printed per-phase timings (confidential: they
    depend on the data) on stdout. They are in the run record only."""
    out = tmp_path / "release"
    res = runner.invoke(app, [*_args(tiny, out, tmp_path / "ledger.json"), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert "seconds" not in json.dumps(summary)
    record = json.loads(Path(summary["run_record"]).read_text())
    assert record["seconds"]["total"] > 0
    marker = json.loads((out / ".privtab-folder.json").read_text())
    assert record["ledger"]["folder"] == marker["id"]
    # the records digest is kept in the ledger only
    (entry,) = ReleaseLedger.open(tmp_path / "ledger.json").entries()
    assert entry.dataset.startswith("records:")
    assert entry.dataset[len("records:") :] not in json.dumps(record) + res.output


def test_the_release_names_no_operator_path_and_carries_the_start_time(
    tiny: tuple[Path, Path], tmp_path: Path
) -> None:
    """The issue: release.json carried the config's absolute path; file times followed the
    data-dependent aggregation time."""
    import datetime as dt
    import hashlib

    config, data = tiny
    out = tmp_path / "release"
    res = runner.invoke(app, [*_args(tiny, out, tmp_path / "ledger.json"), "--evaluate"])
    assert res.exit_code == 0, res.output
    paths = {str(config.parent), str(data), str(tmp_path), str(Path.home()), os.getcwd()}
    paths.discard("/")
    for f in out.rglob("*"):
        if f.is_file():
            raw = f.read_bytes()
            for p in paths:
                assert p.encode() not in raw, (f, p)
    doc = json.loads((out / "release.json").read_text())
    assert doc["config"]["source"] == "config.json"
    assert doc["config"]["source_sha256"] == hashlib.sha256(config.read_bytes()).hexdigest()
    assert doc["plan"]["source"] == "config.json [US]"
    start = dt.datetime.fromisoformat(doc["started_utc"]).timestamp()
    assert {p.stat().st_mtime for p in [out, *out.rglob("*")]} == {start}


@pytest.mark.parametrize("link", LINK_KINDS)
def test_a_symlinked_out_is_refused_before_any_work(
    tiny: tuple[Path, Path], tmp_path: Path, link: str
) -> None:
    """The issue: a symlink to a folder was replaced by a real folder (the target stayed
    empty); a dangling one ran the whole release and crashed at the rename with a pending
    entry; a loop was an internal error."""
    out, real = symlinked_output(tmp_path, link)
    code, text = _run(tiny, out, tmp_path / "ledger.json")
    assert code == 2, text
    assert "is a symbolic link" in text
    assert "internal error" not in text
    assert out.is_symlink()
    assert list(real.iterdir()) == []
    assert not (tmp_path / "ledger.json").exists()  # refused before any work


def test_parent_folders_are_created_only_with_parents(
    tiny: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "not" / "there" / "release"
    code, text = _run(tiny, out, tmp_path / "ledger.json")
    assert code == 2, text
    assert "does not exist" in text
    assert not (tmp_path / "not").exists()
    code, text = _run(tiny, out, tmp_path / "ledger.json", "--parents")
    assert code == 0, text
    assert (out / "release.json").exists()


def test_overwrite_never_deletes_a_user_file_at_any_depth(
    tiny: tuple[Path, Path], tmp_path: Path
) -> None:
    """The issue: --overwrite deleted t1/USER-NOTES.txt and t2/user-dir/keep.txt."""
    ledger, out = tmp_path / "ledger.json", tmp_path / "release"
    code, text = _run(tiny, out, ledger)
    assert code == 0, text
    (out / "t2" / "user-dir").mkdir()
    (out / "t2" / "user-dir" / "keep.txt").write_text("mine")
    (out / "t1" / "USER-NOTES.txt").write_text("mine too")
    code, text = _run(tiny, out, ledger, "--overwrite")
    assert code == 2, text
    assert "t1/USER-NOTES.txt" in text
    assert "t2/user-dir/" in text
    assert (out / "t2" / "user-dir" / "keep.txt").read_text() == "mine"
    assert (out / "t1" / "USER-NOTES.txt").read_text() == "mine too"
    assert len(ReleaseLedger.open(ledger).entries()) == 1  # the refused run reserved nothing
