"""``release.json`` of a TopDown release: the guarantee, the plans, the spines — public facts only.

A TopDown release folder is a public product: the noisy post-processed microdata and
tables, and facts about the **public** plan. Its ``release.json`` (``kind``
:data:`KIND`, ``schema_version`` :data:`SCHEMA_VERSION`) holds:

``privtab_version``, ``started_utc``, ``private``, ``noise``
    the run (``private: false`` for seeded or noise-off test runs, with the source);
``guarantee``
    per kind of record — ``persons`` and ``housing_units`` — the guarantee of the run with
    the larger ρ (the US and Puerto Rico runs hold disjoint records: parallel
    composition), every number exact (``"exact": "293764/114921"``) beside its value
    rounded **up**: ρ, ε(δ) by every analysis, Semi-DP, per attribute, per geography
    (:class:`privtab.topdown.guarantee.TopDownGuarantee`);
``runs``
    per scope (``US``, ``PR``) and histogram (``persons``, ``units``): the strategy, the
    noise of every query at every level, the pass orders, the guarantee, the spine (its
    description, levels and geounits per level — built from the GRF-C and the public
    unit invariants); a requested scope whose GRF-C has no block is listed as skipped;
``invariants``
    what the release holds exactly (state totals; per block housing units and
    group-quarters facilities) — the Semi-DP reading's assumptions;
``postprocessing``
    the algorithm (solvers, tolerance, passes, rounder, checks);
``public_inputs``
    the SHA-256 of the GRF-C (a public reference file);
``formats``
    the files' formats: ``["txt", "parquet"]`` or ``["parquet"]`` (``--no-text``;
    :mod:`privtab.topdown.formats`; absent in older releases: both);
``outputs``
    every file with its SHA-256 and row count (the MDF's rows are the invariant totals).

No input size, exact count, timing or hash of a confidential file is written (those go to
the confidential run record, :mod:`privtab.release.record`). :func:`read_document` reads
it back with the checks a reader needs (kind, version, every stated number ≥ its exact
value).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

from privtab.errors import InputError
from privtab.topdown.formats import release_formats

__all__ = [
    "FILENAME",
    "KIND",
    "SCHEMA_VERSION",
    "DocumentError",
    "headline_guarantee",
    "read_document",
    "write_document",
]

KIND = "privtab.topdown.release"
SCHEMA_VERSION = 1
FILENAME = "release.json"
RECORDS = {"persons": "persons", "units": "housing_units"}


class DocumentError(InputError):
    """``release.json`` is missing, malformed or states a number below its exact value."""


def headline_guarantee(runs: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Per kind of record, the guarantee of the scope with the largest exact ρ."""
    out: dict[str, Any] = {}
    for hist, record in RECORDS.items():
        best: tuple[Fraction, str] | None = None
        for scope, run in runs.items():
            g = run[hist]["guarantee"]
            rho = Fraction(g["rho"]["exact"])
            if best is None or rho > best[0]:
                best = (rho, scope)
        if best is not None:
            out[record] = {"scope": best[1], **runs[best[1]][hist]["guarantee"]}
    out["composition"] = (
        "each run's guarantee is per record of its histogram (a person; a housing unit); "
        "the US and Puerto Rico runs hold disjoint records (parallel composition)"
    )
    return out


def write_document(folder: Path, doc: Mapping[str, Any]) -> Path:
    """Write ``folder/release.json`` atomically."""
    from privtab._json import jsonable
    from privtab.atomic import atomic_write

    text = json.dumps(jsonable(dict(doc)), indent=2) + "\n"
    return atomic_write(folder / FILENAME, text)


def _fail(path: Path, where: str, message: str, value: Any = None) -> DocumentError:
    shown = None if value is None else str(value)
    return DocumentError(message, file=str(path), column=where, value=shown)


def _check_number(path: Path, where: str, node: Any) -> None:
    """Every ``{"exact": "p/q", "value": v}`` has ``v ≥ p/q``."""
    if isinstance(node, dict):
        if "exact" in node and "value" in node:
            try:
                exact = Fraction(str(node["exact"]))
            except (ValueError, ZeroDivisionError):
                raise _fail(path, where, "not an exact fraction", node["exact"]) from None
            v = node["value"]
            if not isinstance(v, int | float) or isinstance(v, bool) or Fraction(v) < exact:
                raise _fail(path, where, f"the stated value is below its exact value {exact}", v)
        for k, v in node.items():
            _check_number(path, f"{where}.{k}" if where else str(k), v)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _check_number(path, f"{where}[{i}]", v)


def read_document(folder: str | Path) -> dict[str, Any]:
    """Read and check a TopDown release's ``release.json`` (module docstring)."""
    path = Path(folder) / FILENAME
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DocumentError(
            f"{path} not found (is this a TopDown release?)", file=str(path)
        ) from None
    except (OSError, ValueError) as exc:
        raise DocumentError(f"cannot read: {exc}", file=str(path)) from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        got = doc.get("kind") if isinstance(doc, dict) else None
        raise _fail(path, "kind", f"not a TopDown release ({KIND!r} expected)", got)
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise _fail(
            path, "schema_version", f"version {SCHEMA_VERSION} expected", doc.get("schema_version")
        )
    for key in ("private", "guarantee", "runs", "outputs"):
        if key not in doc:
            raise _fail(path, key, "missing field")
    if not isinstance(doc["private"], bool):
        raise _fail(path, "private", "must be true or false", doc["private"])
    try:
        release_formats(doc)
    except ValueError as exc:
        raise _fail(path, "formats", str(exc), doc.get("formats")) from None
    _check_number(path, "", doc)
    return doc
