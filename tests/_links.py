"""Symbolic links for the output-location tests: to a folder, dangling, or a loop."""

from __future__ import annotations

from pathlib import Path

LINK_KINDS = ("to-folder", "dangling", "loop")


def symlinked_output(tmp: Path, kind: str) -> tuple[Path, Path]:
    """``(link, real)`` in ``tmp``: ``tmp/out`` a symbolic link of ``kind`` and ``tmp/real``
    an empty folder (the target of the ``to-folder`` link)."""
    real, out = tmp / "real", tmp / "out"
    real.mkdir()
    if kind == "to-folder":
        out.symlink_to(real)
    elif kind == "dangling":
        out.symlink_to(tmp / "nowhere")
    else:
        out.symlink_to(tmp / "loop")
        (tmp / "loop").symlink_to(out)
    return out, real
