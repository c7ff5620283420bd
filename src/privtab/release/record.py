"""The confidential run record: what an operator needs to audit a run, kept apart.

Facts computed from the confidential input — SHA-256 and size of the person file, the
exact number of persons, exact per-level memberships, timings that depend on the data
size, the non-private evaluation against the true counts — never enter the public release
folder. They go to a run record **outside** the folder (default: a sibling file
``<release>.CONFIDENTIAL-run-record.json``, mode 0600), which the operator keeps with the
confidential data. It is written after the release was published, best effort: a failure to
write it is reported as a warning and does not turn the published release into a failure.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["RECORD_KIND", "RunRecord", "default_record_path"]

RECORD_KIND = "privtab.run-record"


def default_record_path(release: str | Path) -> Path:
    """``<parent>/<name>.CONFIDENTIAL-run-record.json`` beside the release folder."""
    p = Path(os.path.abspath(Path(release).expanduser()))
    return p.parent / f"{p.name}.CONFIDENTIAL-run-record.json"


@dataclass
class RunRecord:
    """The confidential record of one run (see the module docstring)."""

    release: str
    started_utc: str
    private: bool
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Every input file (person file included): ``{"sha256": …, "bytes": …}``."""
    persons: int | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    levels: list[dict[str, Any]] = field(default_factory=list)
    """Per level: exact memberships and (on request) the non-private evaluation."""
    ledger: dict[str, Any] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=dict)
    """Rows of an input file left out unread, by file name (a reader's filter, e.g. rows of
    states outside the runs, as production's readers drop them)."""
    status: str = "published"
    host: str = field(default_factory=socket.gethostname)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": RECORD_KIND,
            "created_by": "privtab",
            "confidential": "computed from the confidential input: do not publish",
            **self.__dict__,
        }

    def write(self, path: str | Path) -> Path:
        """Write the record (mode 0600, atomically)."""
        from privtab._json import jsonable
        from privtab.atomic import atomic_write

        p = Path(os.path.realpath(Path(path).expanduser()))  # a link: its target
        p.parent.mkdir(parents=True, exist_ok=True)
        return atomic_write(p, json.dumps(jsonable(self.to_json()), indent=2) + "\n", mode=0o600)

    def write_or_warn(self, path: Path, warnings: list[str]) -> Path | None:
        """Write the record after publication: a failure is a warning appended to
        ``warnings`` (the release is already published), never an exception."""
        try:
            return self.write(path)
        except OSError as exc:
            warnings.append(f"the confidential run record could not be written to {path}: {exc}")
            return None


def check_record_path(
    path: Path, release: str | Path | None = None, *, parents: bool = False
) -> None:
    """Refuse a run-record path that lies inside the ``release`` folder (the record is
    confidential; the folder is published), whose folder does not exist (unless
    ``parents``), or that holds a file privtab did not write. Symbolic links are followed:
    the record is written to the file a link names."""
    from privtab.errors import UsageError

    real = Path(os.path.realpath(Path(path).expanduser()))
    if release is not None:
        folder = Path(os.path.realpath(Path(release).expanduser()))
        if real == folder or folder in real.parents:
            raise UsageError(
                f"run record {path} lies inside the release folder {release}: the run record "
                "is CONFIDENTIAL (it holds facts computed from the confidential input) and "
                "the release folder is published",
                hint="give --run-record a path outside --out (the default is beside it)",
            )
    if not real.parent.is_dir() and not parents:
        raise UsageError(
            f"run record {path}: the folder {real.parent} does not exist",
            hint="create it first, check the path, or pass --parents",
        )
    if not real.exists():
        return
    try:
        doc = json.loads(real.read_text(encoding="utf-8"))
        ours = isinstance(doc, dict) and doc.get("kind") == RECORD_KIND
    except (OSError, ValueError):
        ours = False
    if not ours or real.is_dir():
        raise UsageError(
            f"run record {path} exists and was not written by privtab",
            hint="choose another --run-record or remove the file yourself",
        )
