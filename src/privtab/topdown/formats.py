"""The file formats of a TopDown release: the Census pipe-delimited text and Parquet.

Every data file of a release (``mdf/persons``, ``mdf/units``, ``pl94/<TABLE>``) is written
as Parquet; the text files (the Census layout) are written too unless the run asks for
Parquet only (``privtab topdown run --no-text``). The text is ≈ 97 % of a release's bytes
(≈ 3.1 GB of 3.2 GB at 10⁷ persons; ≈ 110 GB at the 2020 size, where the Parquet files are
≈ 3 GB), so a national run on a small disk writes Parquet only. ``release.json`` states
the formats (``formats``: ``["txt", "parquet"]`` or ``["parquet"]``); a release without the
field (written before it existed) has both. The formats are a layout choice of the run,
not a function of the data: nothing confidential is revealed by them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["BOTH", "PARQUET_ONLY", "formats", "release_formats"]

#: Text (Census layout) and Parquet: the default.
BOTH: tuple[str, ...] = ("txt", "parquet")
#: Parquet only (``--no-text``).
PARQUET_ONLY: tuple[str, ...] = ("parquet",)


def formats(text: bool) -> tuple[str, ...]:
    """The file extensions a release writes: :data:`BOTH`, or :data:`PARQUET_ONLY` when
    ``text`` is false."""
    return BOTH if text else PARQUET_ONLY


def release_formats(doc: Mapping[str, Any]) -> tuple[str, ...]:
    """The formats a ``release.json`` states (:data:`BOTH` when it states none); a value
    other than the two layouts raises :class:`ValueError`."""
    got = doc.get("formats", list(BOTH))
    for allowed in (BOTH, PARQUET_ONLY):
        if got == list(allowed):
            return allowed
    raise ValueError(f"must be {list(BOTH)} or {list(PARQUET_ONLY)}")
