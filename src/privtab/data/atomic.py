"""Atomic output directories: all or nothing, also on Ctrl-C and SIGTERM.

:func:`atomic_directory` yields a fresh hidden directory next to the target; the caller
writes everything there; only when the block finishes without an exception is it renamed
onto the target (one ``rename`` on the same file system). On any exception — including
``KeyboardInterrupt`` and, inside :func:`interrupts_as_exceptions`, SIGTERM — the temporary
directory is removed and the target is left as it was.
"""

from __future__ import annotations

import os
import shutil
import signal
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType


class OutputExistsError(FileExistsError):
    """The output directory exists and is not empty (pass ``overwrite=True`` to replace it)."""


def check_output(target: str | Path, *, overwrite: bool = False) -> None:
    """Raise :class:`OutputExistsError` if ``target`` is a file or a non-empty directory.

    Call it before long work so that a run fails fast; :func:`atomic_directory` checks again.
    """
    target = Path(target)
    if target.exists() and not overwrite and (not target.is_dir() or any(target.iterdir())):
        raise OutputExistsError(f"output {target} exists (use --overwrite to replace it)")


@contextmanager
def atomic_directory(target: str | Path, *, overwrite: bool = False) -> Iterator[Path]:
    """Write a directory atomically: yields a temporary directory renamed onto ``target``.

    Raises :class:`OutputExistsError` before anything is written if ``target`` exists and
    is a non-empty directory (or a file) and ``overwrite`` is false.
    """
    target = Path(target).absolute()
    check_output(target, overwrite=overwrite)
    target.parent.mkdir(parents=True, exist_ok=True)
    tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp = target.parent / f".{target.name}.tmp-{tag}"
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old: Path | None = None
    try:
        if target.exists():
            old = target.parent / f".{target.name}.old-{tag}"
            target.rename(old)
        tmp.rename(target)
    except BaseException:
        if old is not None and not target.exists():
            old.rename(target)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        if old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when SIGTERM arrives inside :func:`interrupts_as_exceptions`."""


@contextmanager
def interrupts_as_exceptions() -> Iterator[None]:
    """Turn SIGTERM into a :class:`Terminated` exception so ``finally``/cleanup code runs."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise Terminated(f"terminated by signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not in the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


__all__ = [
    "OutputExistsError",
    "Terminated",
    "atomic_directory",
    "check_output",
    "interrupts_as_exceptions",
]
