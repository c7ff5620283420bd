"""The tree GLS's derived folder: estimates and standard deviations of every published cell.

``privtab topdown gls --release R --out G`` (the command is wired where the release reader
lives) solves the tree GLS (:mod:`privtab.topdown.gls`) from a release's noisy
measurements and writes a new folder ``G`` — never inside the release:

``gls-<LEVEL>.txt``
    pipe-delimited with a header, ``GEOID|CELL|ESTIMATE|STD_DEV``, one row per geounit of
    the level and cell (Census cell names ``P0010001`` … ``P0050010``:
    :mod:`privtab.topdown.tables`), geounits in the hierarchy's order, cells in
    publication order; numbers with 6 decimals (``STD_DEV`` ``0.000000`` exactly for cells
    the invariants determine);
``gls-<LEVEL>.parquet``
    the same columns with float64 values (nothing rounded) and privtab's privacy metadata;
``release.json``
    the source release's document with its ``kind`` replaced by :data:`DOCUMENT_KIND`
    (the folder is not a TopDown release; ``derived_from.kind`` keeps the source's),
    ``derived_from`` (the source folder and the command), ``gls`` (the method, the
    interval recipe, the levels and cells) and
    ``outputs`` (every file's SHA-256 and row count);
``NOT_PRIVATE``
    when the source release is a test release (seeded or noise off).

GEOIDs are the ids of the geounits the measurements were taken on (the spine's: a state's
AIAN and non-AIAN parts are separate geounits; a tabulation geography made of several
geounits needs the cross-covariances this version does not compute). Everything written is
computed from the noisy measurements and the invariants the release already implies (exact
totals where invariant, zeros where the public unit counts force them): post-processing,
no privacy cost. An interval at level ``L`` is ``ESTIMATE ± z_{(1+L)/2}·STD_DEV``
(:func:`privtab.topdown.gls.normal_moe`; coverage measured in ``docs``).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privtab.topdown.gls import TreeGLS
from privtab.topdown.kron import KronCells

if TYPE_CHECKING:
    import polars as pl
    from numpy.typing import NDArray

    F64 = NDArray[np.float64]

__all__ = [
    "DOCUMENT_KIND",
    "FOLDER_KIND",
    "GLS_COLUMNS",
    "GLSFolderWriter",
    "estimates_frame",
    "gls_frame",
    "gls_method",
    "is_gls_folder",
    "read_gls_folder",
    "write_gls_folder",
]

#: The kind of folder a derived GLS folder is (:mod:`privtab.atomic`).
FOLDER_KIND = "topdown-gls"
#: The ``kind`` of a derived GLS folder's ``release.json``.
DOCUMENT_KIND = "privtab.topdown.gls"
#: The columns of every ``gls-<LEVEL>`` file.
GLS_COLUMNS: tuple[str, ...] = ("GEOID", "CELL", "ESTIMATE", "STD_DEV")


def gls_frame(geoids: Sequence[str], cells: Sequence[str], estimate: F64, std: F64) -> pl.DataFrame:
    """Estimates ``(geographies, cells)`` and their standard deviations as a long frame
    ``GEOID|CELL|ESTIMATE|STD_DEV`` (float64; geographies in the given order, each one's
    cells in the given order)."""
    import polars as pl

    n, k = estimate.shape
    return pl.DataFrame(
        {
            "GEOID": np.repeat(np.asarray(geoids, dtype=object), k).tolist(),
            "CELL": np.tile(np.asarray(cells, dtype=object), n).tolist(),
            "ESTIMATE": estimate.reshape(-1),
            "STD_DEV": std.reshape(-1),
        },
        schema=dict.fromkeys(GLS_COLUMNS[:2], pl.String)
        | dict.fromkeys(GLS_COLUMNS[2:], pl.Float64),
    )


def estimates_frame(result: TreeGLS, cells: KronCells, level: int | str) -> pl.DataFrame:
    """One level's estimates as a long frame ``GEOID|CELL|ESTIMATE|STD_DEV`` (float64;
    geounits in the tree's order, cells in the given order). A replicated solve is refused
    (one measurement set per release)."""
    est = result.estimates(cells, level)
    if est.estimate.ndim != 2:
        raise ValueError("a replicated solve has no single estimate per cell")
    return gls_frame(est.geounits, est.cells, est.estimate, est.std)


def _text(df: pl.DataFrame, *, header: bool = True) -> bytes:
    import polars as pl

    # values that print as ±0.000000 are written 0.000000 (no "-0.000000")
    tidy = [
        pl.when(pl.col(c).abs() < 5e-7).then(0.0).otherwise(pl.col(c)).alias(c)
        for c in ("ESTIMATE", "STD_DEV")
    ]
    buf = io.BytesIO()
    df.with_columns(tidy).write_csv(buf, separator="|", float_precision=6, include_header=header)
    return buf.getvalue()


class GLSFolderWriter:
    """Appends levels' frames to the files of a derived GLS folder being staged in
    ``folder`` (the staging folder of :func:`privtab.atomic.atomic_directory`): one text
    and one Parquet file per level, rows in the order added; :meth:`finish` writes
    ``release.json`` (and ``NOT_PRIVATE`` when the source is a test release)."""

    def __init__(self, folder: Path, *, private: bool) -> None:
        self.folder = folder
        self.private = private
        self.rows: dict[str, int] = {}
        self._parquet: dict[str, Any] = {}

    def add(self, level: str, df: pl.DataFrame) -> None:
        """Append ``df`` (:data:`GLS_COLUMNS`) to level ``level``'s files."""
        import pyarrow.parquet as pq

        if tuple(df.columns) != GLS_COLUMNS:
            raise ValueError(f"level {level}: columns {df.columns}, expected {GLS_COLUMNS}")
        txt = f"gls-{level}.txt"
        first = txt not in self.rows
        with open(self.folder / txt, "ab") as fh:
            fh.write(_text(df, header=first))
        name = f"gls-{level}.parquet"
        table = df.to_arrow()
        if name not in self._parquet:
            from privtab.release.marking import parquet_metadata

            meta = {k.encode(): v.encode() for k, v in parquet_metadata(self.private).items()}
            schema = table.schema.with_metadata(meta)
            self._parquet[name] = pq.ParquetWriter(self.folder / name, schema)
        self._parquet[name].write_table(table.cast(self._parquet[name].schema))
        for f in (txt, name):
            self.rows[f] = self.rows.get(f, 0) + df.height

    def close(self) -> None:
        for w in self._parquet.values():
            w.close()
        self._parquet.clear()

    def finish(
        self,
        *,
        document: Mapping[str, Any],
        command: str,
        source: str | Path | None,
        method: Mapping[str, Any] | None,
    ) -> None:
        """Close the files and write the folder's ``release.json`` (module docstring)."""
        import json

        from privtab._json import jsonable
        from privtab.atomic import atomic_write
        from privtab.data.inputs import sha256_file
        from privtab.release.marking import write_not_private

        self.close()
        if not self.private:
            write_not_private(self.folder, f"derived from the test release {source}")
        files = {
            name: {"sha256": sha256_file(self.folder / name), "rows": n}
            for name, n in sorted(self.rows.items())
        }
        doc = {
            **dict(document),
            "kind": DOCUMENT_KIND,
            "derived_from": {
                "release": None if source is None else str(Path(source).resolve()),
                "kind": document.get("kind"),
                "command": command,
            },
            "gls": dict(method or {}),
            "outputs": {"files": files},
        }
        atomic_write(self.folder / "release.json", json.dumps(jsonable(doc), indent=2) + "\n")


def write_gls_folder(
    out: str | Path,
    frames: Mapping[str, pl.DataFrame],
    *,
    document: Mapping[str, Any],
    command: str,
    source: str | Path | None = None,
    method: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> list[str]:
    """Write ``frames`` (level name → :func:`estimates_frame`) into the new folder ``out``
    (atomically; refused inside or over ``source``, the release read). ``document`` is the
    source release's ``release.json`` object: its ``private`` flag is kept (a test release
    makes a folder marked not private). Returns the paths written."""
    from privtab.atomic import atomic_directory

    private = document.get("private") is not False
    protect = [source] if source is not None else []
    target = Path(out)
    with atomic_directory(target, kind=FOLDER_KIND, overwrite=overwrite, protect=protect) as tmp:
        writer = GLSFolderWriter(tmp, private=private)
        try:
            for level, df in frames.items():
                writer.add(level, df)
        finally:
            writer.close()
        writer.finish(document=document, command=command, source=source, method=method)
    return [str(target / name) for name in writer.rows]


def gls_method(
    levels: Sequence[str], cells: KronCells, constraints: Sequence[str]
) -> dict[str, Any]:
    """The ``gls`` entry of the derived ``release.json``."""
    return {
        "method": "tree GLS (two-pass, bottom-up then top-down; arXiv 2404.13164): the best "
        "linear unbiased estimate from every noisy measurement of the tree, children summing "
        "to parents exactly",
        "std_dev": "exact standard deviation of the linear estimator from the exact "
        "discrete-Gaussian noise variances",
        "intervals": "ESTIMATE ± z·STD_DEV (normal approximation; coverage measured in docs)",
        "constraints": list(constraints),
        "levels": list(levels),
        "cells": len(cells.names),
    }


def is_gls_folder(folder: str | Path) -> bool:
    """Whether ``folder``'s ``release.json`` is a derived GLS folder's (:data:`DOCUMENT_KIND`)."""
    import json

    try:
        doc = json.loads((Path(folder) / "release.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("kind") == DOCUMENT_KIND


def read_gls_folder(folder: str | Path) -> tuple[dict[str, Any], dict[str, pl.DataFrame]]:
    """A derived GLS folder: its ``release.json`` object and, per level (``COUNTY``,
    ``spine-Tract`` …), the frame :data:`GLS_COLUMNS` of its Parquet file — every file the
    document lists, checked against its SHA-256 and row count and for the columns
    (:class:`~privtab.errors.InputError` naming the file)."""
    import json

    import polars as pl

    from privtab.data.inputs import sha256_file
    from privtab.errors import InputError

    d = Path(folder)
    doc_path = d / "release.json"
    try:
        doc = json.loads(doc_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"not a derived GLS folder: {exc}", file=str(doc_path)) from None
    if not isinstance(doc, dict) or doc.get("kind") != DOCUMENT_KIND:
        got = doc.get("kind") if isinstance(doc, dict) else None
        raise InputError(
            f"not a derived GLS folder ({DOCUMENT_KIND!r} expected)",
            file=str(doc_path), column="kind", value=str(got),
        )  # fmt: skip
    files = doc.get("outputs", {}).get("files", {})
    frames: dict[str, pl.DataFrame] = {}
    for name, info in sorted(files.items()):
        if not (name.startswith("gls-") and name.endswith(".parquet")):
            continue
        path = d / name
        if not path.is_file() or sha256_file(path) != info.get("sha256"):
            raise InputError(
                "missing or changed since the folder was written (SHA-256 differs from "
                "release.json)",
                file=str(path),
            )
        df = pl.read_parquet(path)
        if tuple(df.columns) != GLS_COLUMNS or df.height != info.get("rows"):
            raise InputError(
                f"columns {df.columns} and {df.height} rows; release.json lists "
                f"{info.get('rows')} rows of {'|'.join(GLS_COLUMNS)}",
                file=str(path),
            )
        frames[name.removeprefix("gls-").removesuffix(".parquet")] = df
    if not frames:
        raise InputError("lists no gls-<LEVEL>.parquet file", file=str(doc_path))
    return doc, frames
