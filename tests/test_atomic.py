"""The one atomic-write helper: all or nothing, never over what privtab did not write."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from privtab.atomic import (
    MARKER,
    InterruptGuard,
    OutputExistsError,
    OutputRefusedError,
    Terminated,
    atomic_directory,
    check_output,
    read_marker,
)
from privtab.errors import UsageError


def _write(target: Path, kind: str = "release", overwrite: bool = False, **files: str) -> None:
    with atomic_directory(target, kind=kind, overwrite=overwrite) as tmp:
        for name, text in files.items():
            (tmp / name).write_text(text)
        assert not target.exists() or read_marker(target) is not None


def test_writes_atomically_with_a_marker_listing_the_files(tmp_path: Path) -> None:
    target = tmp_path / "out"
    _write(target, a="1", b="2")
    marker = read_marker(target)
    assert marker is not None
    assert marker["kind"] == "release"
    assert marker["files"] == ["a", "b"]
    assert "staging" not in marker
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_an_exception_leaves_the_target_as_it_was(tmp_path: Path) -> None:
    target = tmp_path / "out"
    _write(target, a="1")

    def interrupted() -> None:
        with atomic_directory(target, kind="release", overwrite=True) as tmp:
            (tmp / "b").write_text("2")
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert sorted(p.name for p in target.iterdir()) == [MARKER, "a"]


def test_overwrite_replaces_only_a_privtab_folder_of_the_same_kind(tmp_path: Path) -> None:
    target = tmp_path / "out"
    _write(target, a="1")
    with pytest.raises(OutputExistsError, match="exists"):
        _write(target, a="2")
    _write(target, overwrite=True, c="3")
    assert sorted(p.name for p in target.iterdir()) == [MARKER, "c"]
    with pytest.raises(OutputRefusedError, match="not a 'synth'"):
        _write(target, kind="synth", overwrite=True, d="4")


def test_overwrite_refuses_a_folder_privtab_did_not_write(tmp_path: Path) -> None:
    target = tmp_path / "mine"
    target.mkdir()
    (target / "precious.txt").write_text("keep me")
    with pytest.raises(OutputRefusedError, match="not written by privtab"):
        _write(target, overwrite=True, a="1")
    assert (target / "precious.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_overwrite_refuses_a_release_holding_foreign_files(tmp_path: Path) -> None:
    target = tmp_path / "out"
    _write(target, a="1")
    (target / "notes.txt").write_text("mine")
    with pytest.raises(OutputRefusedError, match=r"did not write there \(notes.txt\)"):
        _write(target, overwrite=True, a="2")
    assert (target / "notes.txt").read_text() == "mine"


def test_a_file_is_never_replaced(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.write_text("a file")
    with pytest.raises(OutputRefusedError, match="not a folder"):
        _write(target, overwrite=True, a="1")
    assert target.read_text() == "a file"


@pytest.mark.parametrize("where", ["equal", "inside", "contains"])
def test_inputs_are_protected(tmp_path: Path, where: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "person-records.txt").write_text("persons")
    target = {"equal": data, "inside": data / "out", "contains": tmp_path}[where]
    with pytest.raises(OutputRefusedError, match=str(data.name)):
        check_output(target, overwrite=True, kind="release", protect=[data])
    with pytest.raises(OutputRefusedError):
        _ = atomic_directory(target, kind="release", overwrite=True, protect=[data]).__enter__()
    assert (data / "person-records.txt").read_text() == "persons"
    assert sorted(p.name for p in data.iterdir()) == ["person-records.txt"]


def test_an_unwritable_location_is_a_usage_error(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root can write anywhere; the read-only case is tested with a read-only mount")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(UsageError, match="cannot write"):
            _write(ro / "out", a="1")
    finally:
        ro.chmod(0o700)


def test_stale_staging_of_a_killed_run_is_removed(tmp_path: Path) -> None:
    """A SIGKILLed writer leaves its hidden staging folder; the next run removes it."""
    target = tmp_path / "out"
    code = (
        "import os, sys, time\n"
        "from privtab.atomic import atomic_directory\n"
        f"with atomic_directory({str(target)!r}, kind='release') as tmp:\n"
        "    (tmp / 'a').write_text('1'); print('ready', flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.kill()
    proc.wait()
    stale = [p for p in tmp_path.iterdir() if p.name.startswith(".out.tmp-")]
    assert len(stale) == 1
    assert not target.exists()
    _write(target, b="2")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_staging_of_a_live_process_is_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "out"
    other = tmp_path / ".out.tmp-1-abcdef01"
    other.mkdir()
    marker = {"created_by": "privtab", "kind": "release", "staging": {"pid": os.getppid()}}
    marker["staging"]["host"] = __import__("socket").gethostname()
    (other / MARKER).write_text(json.dumps(marker))
    _write(target, a="1")
    assert other.exists()


def test_a_signal_before_publication_aborts_and_leaves_nothing(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)

    def terminated() -> None:
        with (
            InterruptGuard() as guard,
            atomic_directory(tmp_path / "o", kind="release", guard=guard) as tmp,
        ):
            (tmp / "x").write_text("x")
            os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(Terminated, match="SIGTERM"):
        terminated()
    assert list(tmp_path.iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_after_publication_is_deferred(tmp_path: Path, signum: int) -> None:
    with InterruptGuard() as guard:
        with atomic_directory(tmp_path / "o", kind="release", guard=guard) as tmp:
            (tmp / "x").write_text("x")
        assert guard.published
        os.kill(os.getpid(), signum)  # e.g. during clean-up after the rename
    assert guard.deferred == signum
    assert (tmp_path / "o" / "x").read_text() == "x"
