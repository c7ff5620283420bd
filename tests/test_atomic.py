"""The one atomic-write helper: all or nothing, never over what privtab did not write."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from privtab.atomic import (
    MARKER,
    MARKER_VERSION,
    InterruptGuard,
    OutputExistsError,
    OutputRefusedError,
    Terminated,
    atomic_directory,
    check_output,
    foreign_entries,
    read_marker,
)
from privtab.errors import UsageError
from tests._links import LINK_KINDS, symlinked_output


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


def test_a_live_writer_of_the_same_target_is_refused_and_left_alone(tmp_path: Path) -> None:
    """Another privtab process writing the same folder (its staging folder belongs to a
    live process): refused before any work, naming it; its staging folder is kept."""
    target = tmp_path / "out"
    other = tmp_path / ".out.tmp-1-abcdef01"
    other.mkdir()
    marker = {"created_by": "privtab", "kind": "release", "staging": {"pid": os.getppid()}}
    marker["staging"]["host"] = __import__("socket").gethostname()
    (other / MARKER).write_text(json.dumps(marker))
    with pytest.raises(OutputRefusedError, match=f"another privtab process \\(pid {os.getppid()}"):
        check_output(target)
    with pytest.raises(OutputRefusedError, match="is writing the output"):
        _write(target, a="1")
    assert other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [other.name]
    # another folder beside it is not concerned
    _write(tmp_path / "out2", a="1")


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


# ------------------------------------------------------------ issue 31: folder hygiene
def _tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): (p.read_text() if p.is_file() else "/")
        for p in sorted(root.rglob("*"))
    }


def _release_with_folders(target: Path, overwrite: bool = False) -> None:
    with atomic_directory(target, kind="release", overwrite=overwrite) as tmp:
        for d in ("t1", "t2"):
            (tmp / d).mkdir()
            (tmp / d / "part-00000-us-c000.csv").write_text(f"{d} rows\n")
            (tmp / d / "_SUCCESS").write_text("")
        (tmp / "release.json").write_text("{}")


def test_the_marker_lists_every_file_and_folder_at_every_depth(tmp_path: Path) -> None:
    target = tmp_path / "out"
    _release_with_folders(target)
    marker = read_marker(target)
    assert marker is not None
    assert marker["marker_version"] == MARKER_VERSION
    assert marker["files"] == [
        "release.json",
        "t1/_SUCCESS",
        "t1/part-00000-us-c000.csv",
        "t2/_SUCCESS",
        "t2/part-00000-us-c000.csv",
    ]
    assert marker["sizes"]["t1/part-00000-us-c000.csv"] == len("t1 rows\n")
    assert marker["folders"] == ["t1", "t2"]
    assert len(marker["id"]) == 32
    assert int(marker["id"], 16) >= 0
    assert foreign_entries(target, marker) == []
    _release_with_folders(target, overwrite=True)  # only privtab's files: replaced
    assert read_marker(target)["id"] != marker["id"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("planted", "named"),
    [
        ("t1/USER-NOTES.txt", "t1/USER-NOTES.txt"),
        ("t2/user-dir/keep.txt", "t2/user-dir/"),
        ("NOTES.txt", "NOTES.txt"),
        ("user-dir/keep.txt", "user-dir/"),
    ],
)
def test_overwrite_refuses_a_file_privtab_did_not_write_at_any_depth(
    tmp_path: Path, planted: str, named: str
) -> None:
    """The issue: --overwrite deleted t1/USER-NOTES.txt and t2/user-dir/keep.txt; a user
    file at the top level ended in a partial release. Now: refused by name, before any
    work, and nothing is deleted."""
    target = tmp_path / "out"
    _release_with_folders(target)
    (target / planted).parent.mkdir(parents=True, exist_ok=True)
    (target / planted).write_text("mine")
    before = _tree(target)
    with pytest.raises(OutputRefusedError, match=re.escape(f"did not write there ({named})")):
        check_output(target, overwrite=True, kind="release")
    with pytest.raises(OutputRefusedError, match=named):
        _release_with_folders(target, overwrite=True)
    assert _tree(target) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_overwrite_refuses_a_changed_file_and_a_link_inside(tmp_path: Path) -> None:
    target = tmp_path / "out"
    _release_with_folders(target)
    (target / "t1" / "part-00000-us-c000.csv").write_text("edited by hand, longer\n")
    with pytest.raises(OutputRefusedError, match=r"t1/part-00000-us-c000\.csv"):
        check_output(target, overwrite=True, kind="release")
    _release_with_folders(target := tmp_path / "out2")
    (target / "t2" / "_SUCCESS").unlink()
    (target / "t2" / "_SUCCESS").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OutputRefusedError, match="t2/_SUCCESS"):
        check_output(target, overwrite=True, kind="release")


def test_a_folder_of_an_older_privtab_with_folders_inside_is_not_replaced(tmp_path: Path) -> None:
    """A version-1 marker lists top-level names only: what is inside t1/ is unknown."""
    target = tmp_path / "out"
    (target / "t1").mkdir(parents=True)
    (target / "t1" / "x.csv").write_text("x")
    (target / "release.json").write_text("{}")
    old = {"created_by": "privtab", "kind": "release", "files": ["release.json", "t1"]}
    (target / MARKER).write_text(json.dumps(old))
    with pytest.raises(OutputRefusedError, match="older privtab"):
        check_output(target, overwrite=True, kind="release")
    (target / "t1" / "x.csv").unlink()
    (target / "t1").rmdir()
    old["files"] = ["release.json"]
    (target / MARKER).write_text(json.dumps(old))
    check_output(target, overwrite=True, kind="release")  # flat: checked as before


@pytest.mark.parametrize("link", LINK_KINDS)
def test_a_symlinked_output_is_refused_before_any_work(tmp_path: Path, link: str) -> None:
    """The rule: an output that is a symbolic link is refused (never written through,
    never replaced by a folder) — to a folder, dangling, or a loop."""
    out, real = symlinked_output(tmp_path, link)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(OutputRefusedError, match="is a symbolic link"):
        check_output(out, kind="release")
    with pytest.raises(OutputRefusedError, match="is a symbolic link"):
        _write(out, overwrite=True, a="1")
    assert out.is_symlink()
    assert list(real.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_an_output_behind_a_link_loop_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(OutputRefusedError):
        check_output(tmp_path / "a" / "out", kind="release", parents=True)


def test_parent_folders_are_created_only_when_asked(tmp_path: Path) -> None:
    """The issue: --out /nonexistent/dir/rel created /nonexistent/dir/ silently."""
    out = tmp_path / "missing" / "dir" / "rel"
    with pytest.raises(OutputRefusedError, match=r"does not exist.*--parents"):
        check_output(out, kind="release")
    with pytest.raises(OutputRefusedError, match="does not exist"):
        _write(out, a="1")
    assert list(tmp_path.iterdir()) == []
    with atomic_directory(out, kind="release", parents=True) as tmp:
        (tmp / "a").write_text("1")
    assert (out / "a").read_text() == "1"
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputRefusedError, match="is not a folder"):
        check_output(tmp_path / "file" / "rel", kind="release", parents=True)


def test_every_file_time_is_the_stamp_not_the_time_of_the_work(tmp_path: Path) -> None:
    """No file time tells how long a part of the work took (the issue: headers.csv 2.01 s
    after the start at 2·10⁴ persons, 2.68 s at 2·10⁵): every file and folder carries the
    stamp — by default when the call started, in whole seconds."""
    import time

    stamp = 1_700_000_000.0
    out = tmp_path / "out"
    with atomic_directory(out, kind="release", stamp=stamp) as tmp:
        (tmp / "t1").mkdir()
        (tmp / "t1" / "a.csv").write_text("1")
        time.sleep(1.1)  # the work takes time ...
        (tmp / "b.json").write_text("2")
    every = [out, *out.rglob("*")]
    assert len(every) == 5  # the folder, t1/, t1/a.csv, b.json, the marker
    assert {p.stat().st_mtime for p in every} == {stamp}
    started = time.time()
    with atomic_directory(out2 := tmp_path / "out2", kind="release") as tmp:
        (tmp / "a").write_text("1")
        time.sleep(1.1)
    times = {p.stat().st_mtime for p in [out2, *out2.rglob("*")]}
    assert len(times) == 1
    (t,) = times
    assert t == int(t)
    assert int(started) - 1 <= t <= started


def test_deferring_holds_signals_until_the_clean_up_is_done(tmp_path: Path) -> None:
    with InterruptGuard() as guard:
        with guard.deferring():
            os.kill(os.getpid(), signal.SIGTERM)  # would raise Terminated while working
        assert guard.deferred == signal.SIGTERM
        assert not guard.published
        with pytest.raises(Terminated):  # working again: the next signal interrupts
            os.kill(os.getpid(), signal.SIGTERM)
