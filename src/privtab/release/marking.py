"""How every output of a test run says it is **not private**.

A release made with a seeded random source or with noise off (``--seed``,
``--insecure-no-noise``: tests and reproducible examples only) must never be mistaken for
a private one, wherever a downstream reader looks:

- ``release.json``: ``"private": false``;
- every Parquet file: key-value metadata :data:`PRIVATE_KEY` = ``"false"`` and
  :data:`NOTE_KEY` explaining why (private releases carry ``"true"``);
- the folder: a :data:`NOT_PRIVATE_FILE` file (text outputs — pipe-delimited Census
  tables — have no comment syntax, so the marker sits beside them);
- ``report.html``: a banner on the first screen.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["NOTE_KEY", "NOT_PRIVATE_FILE", "PRIVATE_KEY", "parquet_metadata", "write_not_private"]

NOT_PRIVATE_FILE = "NOT_PRIVATE"
PRIVATE_KEY = "privtab.private"
NOTE_KEY = "privtab.note"

_NOTE = (
    "NOT PRIVATE: made with a seeded random source or without noise, for tests only. "
    "These counts carry no privacy guarantee; do not publish them."
)


def parquet_metadata(private: bool) -> dict[str, str]:
    """Key-value metadata for every Parquet file of a release."""
    if private:
        return {PRIVATE_KEY: "true"}
    return {PRIVATE_KEY: "false", NOTE_KEY: _NOTE}


def write_not_private(folder: Path, reason: str) -> Path:
    """Write the ``NOT_PRIVATE`` marker file into ``folder``."""
    from privtab.atomic import atomic_write

    return atomic_write(folder / NOT_PRIVATE_FILE, f"{_NOTE}\nReason: {reason}\n")
