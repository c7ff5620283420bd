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
   its expensive part). The target may not equal, contain or lie inside any *protected*
   path (the command's inputs); an existing non-empty target is replaced only with
   ``overwrite`` **and** only if it is a privtab folder of the same kind — it holds the
   marker file :data:`MARKER` written by privtab, and nothing that privtab did not write
   there (the marker lists the files). Anything else is refused with a message saying why.
2. **Staging.** The content is written into a hidden sibling ``.<name>.tmp-<tag>``
   (which proves the location writable before any work). A stale staging folder left by a
   killed run (SIGKILL, power loss) is recognised by its marker — same host, process gone —
   and removed by the next run in the same place.
3. **Publication.** Only when the block finishes without an exception is the staging
   folder renamed onto the target (one ``rename`` on one file system; an old target is
   moved aside first and deleted after). On any exception — including ``KeyboardInterrupt``
   and the signals turned into :class:`Terminated` by :class:`InterruptGuard` — the
   staging folder is moved aside and deleted, and the target is left as it was.

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
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from privtab.errors import UsageError

__all__ = [
    "MARKER",
    "InterruptGuard",
    "OutputExistsError",
    "OutputRefusedError",
    "Terminated",
    "atomic_directory",
    "atomic_file",
    "atomic_write",
    "check_output",
    "read_marker",
    "remove_stale_staging",
]

MARKER = ".privtab-folder.json"
"""The marker privtab writes into every folder it creates: kind, version and the files it
wrote. It holds nothing computed from any input."""

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
    return Path(os.path.abspath(Path(p).expanduser())).resolve(strict=False)


def _inside(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def check_output(
    target: str | Path,
    *,
    overwrite: bool = False,
    kind: str | None = None,
    protect: Iterable[str | Path] = (),
) -> None:
    """Refuse an output location that would overwrite or lose something (see the module
    docstring): raises :class:`OutputRefusedError` / :class:`OutputExistsError` naming the
    reason. ``kind`` is the kind of folder being written (``release``, ``synth``, …);
    ``protect`` the command's inputs.
    """
    tgt = _resolved(target)
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
    if not tgt.exists() and not tgt.is_symlink():
        return
    if not tgt.is_dir() or tgt.is_symlink():
        raise OutputRefusedError(
            f"output {target} exists and is not a folder", hint="choose another --out"
        )
    entries = sorted(e.name for e in tgt.iterdir())
    if not entries:
        return
    if not overwrite:
        raise OutputExistsError(
            f"output {target} exists",
            hint="use --overwrite to replace a folder privtab wrote, or choose another --out",
        )
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
    written = set(marker.get("files", [])) | {MARKER}
    foreign = [e for e in entries if e not in written]
    if foreign:
        shown = ", ".join(foreign[:5]) + (" …" if len(foreign) > 5 else "")
        raise OutputRefusedError(
            f"output {target} holds files privtab did not write there ({shown}); "
            "--overwrite would delete them",
            hint="move them away or choose another --out",
        )


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


def remove_stale_staging(target: Path) -> list[Path]:
    """Remove staging/trash folders of ``target`` left by privtab processes that are gone
    (same host, process not running). Returns what was removed."""
    removed: list[Path] = []
    if not target.parent.is_dir():
        return removed
    for prefix in (_STAGING, _TRASH):
        for p in target.parent.glob(f".{target.name}{prefix}*"):
            marker = read_marker(p)
            staging = (marker or {}).get("staging") or {}
            pid = staging.get("pid")
            if (
                isinstance(pid, int)
                and staging.get("host") == _host()
                and pid != os.getpid()
                and not _alive(pid)
            ):
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
    return removed


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


def _files(folder: Path) -> list[str]:
    return sorted(e.name for e in folder.iterdir() if e.name != MARKER)


@contextlib.contextmanager
def atomic_directory(
    target: str | Path,
    *,
    kind: str,
    overwrite: bool = False,
    protect: Iterable[str | Path] = (),
    guard: InterruptGuard | None = None,
) -> Iterator[Path]:
    """Write a folder atomically (see the module docstring): yields the staging folder,
    renamed onto ``target`` when the block succeeds.

    Raises :class:`OutputRefusedError` / :class:`OutputExistsError` before anything is
    written, and a :class:`UsageError` if the location cannot be written. With ``guard``,
    the rename runs inside :meth:`InterruptGuard.publishing`.
    """
    from privtab import __version__

    protect = list(protect)
    path = Path(os.path.abspath(Path(target).expanduser()))
    check_output(path, overwrite=overwrite, kind=kind, protect=protect)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_staging(path)
        tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp = path.parent / f".{path.name}{_STAGING}{tag}"
        tmp.mkdir()
    except OSError as exc:
        raise UsageError(
            f"cannot write the output folder {target}: {exc.strerror or exc}",
            hint="choose a writable --out",
        ) from None
    base = {"created_by": "privtab", "kind": kind, "privtab_version": __version__}
    try:
        _write_marker(tmp, {**base, "staging": {"pid": os.getpid(), "host": _host()}})
        yield tmp
        _write_marker(tmp, {**base, "files": _files(tmp)})
        # the target may have changed while we worked: check again before replacing it
        check_output(path, overwrite=overwrite, kind=kind, protect=protect)
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
        self._state = "working"  # working → publishing → published (or back to working)
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
