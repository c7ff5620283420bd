"""Whether a path names a file privtab may read: one check for every input of every command.

Standard library only (cheap to import). :func:`file_problem` tells why a path cannot be
read as an input file — missing, a broken or looping symbolic link, a name too long, a
directory, a named pipe, a device (``/dev/zero``), a socket, or larger than a limit — so
that a command refuses it with one located message instead of blocking on a pipe, reading a
device forever or filling memory. :func:`read_regular_bytes` reads a small file whole after
that check.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["file_problem", "read_regular_bytes"]

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_problem(path: Path, max_bytes: int | None = None) -> tuple[str, str] | None:
    """``(kind, message)`` of why ``path`` cannot be read as an input file, or ``None``
    when it is a regular file (symbolic links followed) of at most ``max_bytes`` bytes."""
    try:
        st = path.stat()
    except OSError as exc:
        if exc.errno == errno.ENOENT and os.path.lexists(path):
            return "broken_link", "a symbolic link whose target does not exist"
        if exc.errno == errno.ELOOP:
            return "broken_link", "a symbolic link that loops (it never reaches a file)"
        if exc.errno == errno.ENAMETOOLONG:
            return "name_too_long", "the file name is too long for the file system"
        if exc.errno == errno.ENOENT:
            return "missing_file", "no such file"
        return "unreadable", f"cannot read the file: {exc.strerror}"
    for test, what in _KINDS:
        if test(st.st_mode):
            return (
                "not_a_file",
                f"this is {what}, not a regular file; privtab reads inputs from regular "
                "files only (a pipe or device may block or never end)",
            )
    if not stat.S_ISREG(st.st_mode):
        return "not_a_file", "not a regular file; privtab reads inputs from regular files only"
    if max_bytes is not None and st.st_size > max_bytes:
        return (
            "too_large",
            f"the file holds {st.st_size:,} bytes, more than the {max_bytes:,} bytes a file "
            "of this kind may have (it is read whole into memory)",
        )
    return None


def read_regular_bytes(path: str | Path, max_bytes: int) -> tuple[bytes | None, str | None]:
    """The bytes of ``path`` when it is a regular file of at most ``max_bytes`` bytes, else
    ``(None, why)`` (:func:`file_problem`'s message, or the OS error's)."""
    p = Path(path)
    found = file_problem(p, max_bytes)
    if found is not None:
        return None, found[1]
    try:
        return p.read_bytes(), None
    except OSError as exc:
        return None, f"cannot read the file: {exc.strerror}"
