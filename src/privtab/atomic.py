"""Everything privtab writes lands atomically: files and folders, all or nothing.

This is the one module that renames files into place. :func:`atomic_write` writes a small
file (text or bytes) through a temporary sibling, with an explicit mode and, when asked,
``fsync`` of the file and its folder; :func:`atomic_file` hands a temporary path to a writer
that produces a file itself (e.g. a Polars sink) and renames it onto the target on success.

Folders written by privtab: all or nothing, never over what privtab did not write.

Every command that writes a folder (``safetab run``, ``demo``, ``synth``, ``analyze …
--out``, ``invariants … --out``) writes it through :func:`atomic_directory`, the one
atomic-write helper:

1. **Refusals first** (:func:`check_output`, also callable early so that a run fails before
   its expensive part), each with a message saying why:

   * a target that is a **symbolic link** — to a folder, dangling or a loop — is refused
     (the rule is *refuse*, never write through: the release goes where ``--out`` says,
     and a link is never replaced by a folder); the folders above the target may be links;
   * a target whose **parent folder does not exist**, unless ``parents`` (``--parents``) —
     a mistyped path never creates folders;
   * a target that equals, contains or lies inside a *protected* path (the command's
     inputs);
   * an existing non-empty target, unless ``overwrite`` **and** it is a privtab folder of
     the same kind that holds **nothing privtab did not write, at any depth**: its marker
     :data:`MARKER` lists every file privtab wrote (relative paths, with their sizes) and
     every folder, and a file or folder not listed, a listed file whose size changed, or a
     symbolic link anywhere in it is refused by name;
   * a target that another privtab process is writing at the same moment (its staging
     folder, below, belongs to a live process).

2. **Staging.** The content is written into a hidden sibling ``.<name>.tmp-<tag>``
   (which proves the location writable before any work). A stale staging folder left by a
   killed run (SIGKILL, power loss) is recognised by its marker — same host, process gone —
   and removed by the next run in the same place.
3. **Publication.** Only when the block finishes without an exception is the marker
   written (kind, version, the folder's random ``id``, every file and folder), every file
   and folder given the same modification and access time — ``stamp``, the run's start,
   so no file time tells how long any part of the work took — and the staging folder
   renamed onto the target (one ``rename`` on one file system; an old target is moved
   aside first and deleted after). On any exception — including ``KeyboardInterrupt`` and
   the signals turned into :class:`Terminated` by :class:`InterruptGuard` — the staging
   folder is moved aside and deleted, and the target is left as it was.

A folder's marker holds nothing computed from any input: its kind, the privtab version, a
random id (``uuid4``: it lets the release ledger tell which run wrote the folder) and the
names and sizes of the files privtab wrote (the published files themselves). The inode
change time (``ctime``) of each file is set by the kernel and cannot be chosen; it is not
carried by a copy or an archive of the folder, which is how a release is published.

:class:`InterruptGuard` turns SIGINT, SIGTERM and SIGHUP into :class:`Terminated` while a
command works, and — once :meth:`InterruptGuard.publishing` has been entered — defers them
instead: a signal that arrives while or after the folder is renamed into place can no
longer turn a published release into a reported failure
(:attr:`InterruptGuard.deferred` tells the caller that clean-up was cut short).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from privtab.errors import UsageError

__all__ = [
    "MARKER",
    "MARKER_VERSION",
    "InterruptGuard",
    "OutputExistsError",
    "OutputRefusedError",
    "Terminated",
    "atomic_directory",
    "atomic_file",
    "atomic_write",
    "check_output",
    "foreign_entries",
    "read_marker",
    "remove_stale_staging",
]

MARKER = ".privtab-folder.json"
"""The marker privtab writes into every folder it creates: kind, version, the folder's
random id and the files and folders it wrote. It holds nothing computed from any input."""
MARKER_VERSION = 2
"""Version 2 lists files at every depth with their sizes (version 1: top-level names)."""

_STAGING = ".tmp-"
_TRASH = ".trash-"


class OutputRefusedError(UsageError):
    """The output location cannot be used (it would overwrite or lose something)."""


class OutputExistsError(OutputRefusedError, FileExistsError):
    """The output folder exists and is not empty (``--overwrite`` replaces a privtab folder
    of the same kind)."""


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when SIGINT, SIGTERM or SIGHUP arrives inside an
    :class:`InterruptGuard` (before publication)."""


def read_marker(folder: str | Path) -> dict[str, Any] | None:
    """The marker of a privtab folder, or ``None`` if ``folder`` has none (or a bad one)."""
    try:
        doc = json.loads((Path(folder) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("created_by") == "privtab" else None


def _resolved(p: str | Path) -> Path:
    absolute = os.path.abspath(Path(p).expanduser())
    try:
        return Path(absolute).resolve(strict=False)
    except (RuntimeError, OSError):  # a loop of symbolic links
        raise OutputRefusedError(
            f"{p} lies behind a loop of symbolic links", hint="give a real path"
        ) from None


def _inside(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def check_output(
    target: str | Path,
    *,
    overwrite: bool = False,
    kind: str | None = None,
    protect: Iterable[str | Path] = (),
    parents: bool = False,
) -> None:
    """Refuse an output location that would overwrite or lose something (see the module
    docstring): raises :class:`OutputRefusedError` / :class:`OutputExistsError` naming the
    reason. ``kind`` is the kind of folder being written (``release``, ``synth``, …);
    ``protect`` the command's inputs; ``parents``: missing parent folders may be created.
    """
    _check_output(target, overwrite, kind, list(protect), parents, None)


def _check_output(
    target: str | Path,
    overwrite: bool,
    kind: str | None,
    protect: list[str | Path],
    parents: bool,
    own: Path | None,
) -> None:
    """:func:`check_output`; ``own``: the caller's staging folder (not another writer)."""
    given = Path(os.path.abspath(Path(target).expanduser()))
    if given.is_symlink():
        raise OutputRefusedError(
            f"output {target} is a symbolic link (to {os.readlink(given)}): privtab never "
            "writes through a link nor replaces one",
            hint="give the real folder as the output, or remove the link",
        )
    _check_parent(target, given.parent, parents)
    tgt = _resolved(given)
    for p in protect:
        prot = _resolved(p)
        if _inside(tgt, prot) or _inside(prot, tgt):
            how = (
                "is"
                if tgt == prot
                else ("lies inside" if _inside(tgt, prot) else "contains the input")
            )
            raise OutputRefusedError(
                f"output {target} {how} {p}" if how != "is" else f"output {target} is input {p}",
                hint="write the output to a folder apart from every input",
            )
    _refuse_other_writers(tgt, target, own)
    if not tgt.exists():
        return
    if not tgt.is_dir():
        raise OutputRefusedError(
            f"output {target} exists and is not a folder", hint="choose another --out"
        )
    if not any(tgt.iterdir()):
        return
    if not overwrite:
        raise OutputExistsError(
            f"output {target} exists",
            hint="use --overwrite to replace a folder privtab wrote, or choose another --out",
        )
    _check_replaceable(tgt, target, kind)


def _check_parent(target: str | Path, parent: Path, parents: bool) -> None:
    """The folder that will hold the target exists (or may be created: ``parents``)."""
    if parent.is_dir():
        return
    if parent.exists() or parent.is_symlink():
        raise OutputRefusedError(
            f"output {target}: {parent} is not a folder", hint="choose another output"
        )
    if not parents:
        raise OutputRefusedError(
            f"output {target}: the folder {parent} does not exist (privtab creates missing "
            "parent folders only when asked)",
            hint="create it first or check the path (a command with --parents, such as "
            "`privtab safetab run`, creates it when given that flag)",
        )


def _check_replaceable(tgt: Path, target: str | Path, kind: str | None) -> None:
    """``--overwrite`` of the non-empty folder ``tgt``: privtab wrote it as ``kind`` and it
    holds nothing else, at any depth."""
    marker = read_marker(tgt)
    if marker is None:
        raise OutputRefusedError(
            f"output {target} was not written by privtab (no {MARKER}): --overwrite "
            "replaces only folders privtab wrote",
            hint="choose another --out, or empty the folder yourself",
        )
    if kind is not None and marker.get("kind") != kind:
        raise OutputRefusedError(
            f"output {target} is a privtab {marker.get('kind')!r} folder, not a {kind!r} "
            "folder: --overwrite replaces only a folder of the same kind",
            hint="choose another --out",
        )
    foreign = foreign_entries(tgt, marker)
    if foreign and marker.get("marker_version") != MARKER_VERSION:
        raise OutputRefusedError(
            f"output {target} was written by an older privtab whose marker does not list the "
            f"files inside its folders ({', '.join(foreign[:5])}): --overwrite cannot tell "
            "that it holds nothing else",
            hint="remove the folder yourself or choose another --out",
        )
    if foreign:
        more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        shown = ", ".join(foreign[:5]) + more
        raise OutputRefusedError(
            f"output {target} holds files privtab did not write there ({shown}); "
            "--overwrite would delete them",
            hint="move them away or choose another --out",
        )


def foreign_entries(folder: Path, marker: dict[str, Any]) -> list[str]:
    """What ``folder`` holds that its ``marker`` does not list as written by privtab, at any
    depth (relative paths; folders end with ``/``): unlisted files and folders, listed
    files whose size changed, symbolic links. A version-1 marker lists top-level names
    only: a folder inside it cannot be vouched for and is named."""
    if marker.get("marker_version") != MARKER_VERSION:
        listed = set(marker.get("files", [])) | {MARKER}
        return sorted(
            e.name + ("/" if e.is_dir() and e.name in listed else "")
            for e in folder.iterdir()
            if e.name not in listed or e.is_symlink() or e.is_dir()
        )
    files = set(marker.get("files", []))
    sizes = marker.get("sizes", {})
    folders = set(marker.get("folders", []))
    out: list[str] = []
    for root, dirs, names in os.walk(folder):
        here = Path(root).relative_to(folder)
        for d in sorted(dirs):
            rel = (here / d).as_posix()
            if (Path(root) / d).is_symlink() or rel not in folders:
                out.append(rel + "/")
                dirs.remove(d)  # not descended into: named as a whole
        for n in names:
            rel = (here / n).as_posix()
            if rel == MARKER:
                continue
            p = Path(root) / n
            if p.is_symlink() or rel not in files or sizes.get(rel, -1) != p.lstat().st_size:
                out.append(rel)
    return sorted(out)


def _host() -> str:
    return socket.gethostname()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - another user's live process
        return True
    return True


def _staging_owner(folder: Path) -> dict[str, Any] | None:
    """``{"pid", "host"}`` of the privtab process a staging/trash folder belongs to."""
    staging = (read_marker(folder) or {}).get("staging") or {}
    return staging if isinstance(staging.get("pid"), int) else None


def _staging_folders(target: Path, prefixes: tuple[str, ...]) -> list[Path]:
    if not target.parent.is_dir():
        return []
    return [p for pre in prefixes for p in target.parent.glob(f".{target.name}{pre}*")]


def remove_stale_staging(target: Path) -> list[Path]:
    """Remove staging/trash folders of ``target`` left by privtab processes that are gone
    (same host, process not running). Returns what was removed."""
    removed: list[Path] = []
    for p in _staging_folders(target, (_STAGING, _TRASH)):
        owner = _staging_owner(p)
        if (
            owner is not None
            and owner.get("host") == _host()
            and owner["pid"] != os.getpid()
            and not _alive(owner["pid"])
        ):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def _other_writers(target: Path, own: Path | None = None) -> list[tuple[Path, dict[str, Any]]]:
    """Staging folders of ``target`` that belong to another privtab writer that may be
    running: a live process on this host (another thread's included), or any process on
    another host (whose liveness cannot be seen from here)."""
    out = []
    for p in _staging_folders(target, (_STAGING,)):
        owner = _staging_owner(p)
        if p == own or owner is None:
            continue
        if owner.get("host") != _host() or _alive(owner["pid"]):
            out.append((p, owner))
    return out


def _refuse_other_writers(tgt: Path, target: str | Path, own: Path | None = None) -> None:
    writers = _other_writers(tgt, own)
    if writers:
        folder, owner = writers[0]
        raise OutputRefusedError(
            f"another privtab process (pid {owner['pid']} on {owner.get('host')}) is writing "
            f"the output {target} right now (its staging folder {folder.name})",
            hint="wait for that run to finish or choose another --out; if no such run is "
            f"active (a machine that crashed), remove {folder}",
        )


def atomic_write(
    path: str | Path, data: str | bytes, *, mode: int = 0o644, durable: bool = False
) -> Path:
    """Write ``data`` to ``path`` atomically: a temporary sibling created with ``mode``
    (``0o600`` for confidential files), then one rename. ``durable`` also ``fsync`` s the
    file and its folder (for ledgers: the write survives a crash once this returns)."""
    p = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, mode)  # whatever the umask
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if durable:
        dfd = os.open(p.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return p


@contextlib.contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """A temporary sibling of ``path`` for a writer to fill; renamed onto ``path`` when the
    block succeeds, removed otherwise."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        yield tmp
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _write_marker(folder: Path, doc: dict[str, Any]) -> None:
    atomic_write(folder / MARKER, json.dumps(doc, indent=2) + "\n")


def _discard(folder: Path, tag: str) -> None:
    """Move ``folder`` aside (so late writers cannot recreate files in it), then delete."""
    trash = folder.parent / f".{folder.name.lstrip('.')}{_TRASH}{tag}"
    try:
        folder.rename(trash)
    except OSError:
        trash = folder
    shutil.rmtree(trash, ignore_errors=True)


def _listing(folder: Path) -> dict[str, Any]:
    """Every file (relative path → size) and folder below ``folder``, the marker excluded."""
    sizes: dict[str, int] = {}
    folders: list[str] = []
    for root, dirs, names in os.walk(folder):
        here = Path(root).relative_to(folder)
        folders += [(here / d).as_posix() for d in dirs]
        for n in names:
            rel = (here / n).as_posix()
            if rel != MARKER:
                sizes[rel] = (Path(root) / n).lstat().st_size
    files = sorted(sizes)
    return {"files": files, "sizes": {f: sizes[f] for f in files}, "folders": sorted(folders)}


def _stamp(folder: Path, when: float) -> None:
    """Give every file and folder below ``folder`` (and itself, last) the access and
    modification time ``when``: file times then say nothing about how long the work took."""
    for root, dirs, names in os.walk(folder, topdown=False):
        for n in [*names, *dirs]:
            os.utime(Path(root) / n, (when, when), follow_symlinks=False)
    os.utime(folder, (when, when), follow_symlinks=False)


@contextlib.contextmanager
def atomic_directory(
    target: str | Path,
    *,
    kind: str,
    overwrite: bool = False,
    protect: Iterable[str | Path] = (),
    guard: InterruptGuard | None = None,
    parents: bool = False,
    folder_id: str | None = None,
    stamp: float | None = None,
) -> Iterator[Path]:
    """Write a folder atomically (see the module docstring): yields the staging folder,
    renamed onto ``target`` when the block succeeds.

    ``parents``: create missing parent folders (else refused). ``folder_id``: the random
    id written into the marker (default: a new ``uuid4``; the release ledger records it).
    ``stamp``: the time (seconds since the epoch) every file and folder is given (default:
    when this call started, in whole seconds). Raises :class:`OutputRefusedError` /
    :class:`OutputExistsError` before anything is written, and a :class:`UsageError` if
    the location cannot be written. With ``guard``, the rename runs inside
    :meth:`InterruptGuard.publishing`.
    """
    from privtab import __version__

    when = float(int(time.time())) if stamp is None else stamp
    protect = list(protect)
    path = Path(os.path.abspath(Path(target).expanduser()))
    _check_output(path, overwrite, kind, protect, parents, None)
    tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp = path.parent / f".{path.name}{_STAGING}{tag}"
    try:
        if parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_staging(path)
        tmp.mkdir()
    except OSError as exc:
        raise UsageError(
            f"cannot write the output folder {target}: {exc.strerror or exc}",
            hint="choose a writable --out",
        ) from None
    base = {
        "created_by": "privtab",
        "kind": kind,
        "privtab_version": __version__,
        "marker_version": MARKER_VERSION,
        "id": folder_id or uuid.uuid4().hex,
    }
    try:
        _write_marker(tmp, {**base, "staging": {"pid": os.getpid(), "host": _host()}})
        _refuse_other_writers(path, target, own=tmp)  # two runs that started together
        yield tmp
        _write_marker(tmp, {**base, **_listing(tmp)})
        _stamp(tmp, when)
        # the target may have changed while we worked: check again before replacing it
        _check_output(path, overwrite, kind, protect, True, tmp)
    except BaseException:
        _discard(tmp, tag)
        raise
    with guard.publishing() if guard is not None else contextlib.nullcontext():
        old: Path | None = None
        try:
            if path.exists():
                old = path.parent / f".{path.name}{_TRASH}{tag}"
                path.rename(old)
            tmp.rename(path)
        except BaseException:
            if old is not None and not path.exists():
                old.rename(path)
            _discard(tmp, tag)
            raise
    if old is not None:
        with contextlib.suppress(OSError):
            shutil.rmtree(old, ignore_errors=True)


class InterruptGuard:
    """SIGINT/SIGTERM/SIGHUP → :class:`Terminated` in the main thread until publication;
    deferred (recorded in :attr:`deferred`) from :meth:`publishing` on.

    A no-op outside the main thread (signal handlers can only be set there).
    """

    SIGNALS = tuple(
        s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s
    )

    def __init__(self) -> None:
        self._previous: dict[int, Any] = {}
        # working → publishing → published (or back to working); "cleaning" while deferring
        self._state = "working"
        self.deferred: int | None = None

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        if self._state == "working":
            raise Terminated(f"interrupted by {signal.Signals(signum).name}")
        self.deferred = signum

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            for s in self.SIGNALS:
                self._previous[s] = signal.signal(s, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, prev in self._previous.items():
            signal.signal(s, prev)
        self._previous.clear()

    @property
    def published(self) -> bool:
        return self._state == "published"

    @contextlib.contextmanager
    def deferring(self) -> Iterator[None]:
        """Signals are deferred inside this block (recorded in :attr:`deferred`, not raised
        after it): for the short clean-up of a run that is already failing — withdrawing
        its claims — which a second signal must not cut short."""
        before = self._state
        if before == "working":
            self._state = "cleaning"
        try:
            yield
        finally:
            if self._state == "cleaning":
                self._state = before

    @contextlib.contextmanager
    def publishing(self) -> Iterator[None]:
        """Signals are deferred inside (and after) this block; if the block fails, a
        deferred signal is raised again as :class:`Terminated`."""
        self._state = "publishing"
        try:
            yield
        except BaseException:
            self._state = "working"
            if self.deferred is not None:
                raise Terminated(f"interrupted by {signal.Signals(self.deferred).name}") from None
            raise
        self._state = "published"
