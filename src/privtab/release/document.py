"""``release.json``: the one typed, versioned description of a published release.

A release folder is a **public product** (``docs/safetab.md`` §"What a release folder
is"): it holds the noisy T1/T2 counts, values derived from them, and facts about the public
plan — nothing else computed from the confidential person file (no hash, size, row count,
data-dependent timing, exact total or exact per-level statistic). This module writes and
reads the folder's ``release.json``; :mod:`privtab.analysis`, :mod:`privtab.semantics` and
the command line read releases only through :func:`read_release_document`.

The stated guarantee (``guarantee``) is the exact composition of the charges the run made
as it drew noise (:class:`privtab.accounting.ExactGuarantee`): published as a float
rounded **up** with the exact rational beside it (``rho_exact`` / ``epsilon_exact``).

Schema (``schema_version`` :data:`SCHEMA_VERSION`; fields not listed are kept in
:attr:`ReleaseDocument.extra`):

- ``schema_version``, ``kind`` (``"privtab.safetab-p.release"``, or
  ``"privtab.safetab-h.release"`` for SafeTab-H, whose ``runs.*.levels`` are its queries),
  ``privtab_version``,
  ``started_utc`` (when the run started — before any data was read);
- ``private`` (false for seeded or noise-off test runs), ``noise`` (the random source);
- ``guarantee`` (exact, the release as a whole) and ``guarantee_note``;
- ``runs``: per run (``US``, ``PR``): ``plan``, ``guarantee`` (exact), ``privacy`` (the
  guarantee under every analysis), ``levels`` (one object per population-group level,
  with ``status`` ``"tabulated"`` or ``"empty domain"`` and its exact ``charged`` guarantee);
- ``plan`` (of the run with the largest guarantee), ``engine``, ``postprocessing``,
  ``config``, ``public_inputs`` (SHA-256 of the config, reference files and GRF-C — public
  reference data), ``outputs`` (files with their SHA-256 and row counts of the noisy
  tables).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privtab.accounting.exact import ExactGuarantee
from privtab.errors import InputError

__all__ = [
    "KIND",
    "KINDS",
    "KIND_H",
    "SCHEMA_VERSION",
    "LevelEntry",
    "ReleaseDocument",
    "ReleaseDocumentError",
    "RunEntry",
    "parse_release_document",
    "read_release_document",
]

SCHEMA_VERSION = 2
KIND = "privtab.safetab-p.release"
KIND_H = "privtab.safetab-h.release"
KINDS = (KIND, KIND_H)
"""The products whose ``release.json`` this module reads: SafeTab-P (Detailed DHC-A) and
SafeTab-H (Detailed DHC-B); the same schema, each its own ``kind``."""
FILENAME = "release.json"


class ReleaseDocumentError(InputError, ValueError):
    """``release.json`` is missing, malformed or of an unknown schema (names file, field)."""


@dataclass(frozen=True)
class LevelEntry:
    """One population-group level of a run as published."""

    level: str
    status: str
    """``"tabulated"`` or ``"empty domain"`` (skipped: no public groups, nothing charged)."""
    charged: ExactGuarantee | None
    thresholds: tuple[int, ...]
    fields: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """Every field of the level object (budgets, stability, MOE, row counts, …)."""


@dataclass(frozen=True)
class RunEntry:
    """One run (``US`` or ``PR``) of a release."""

    scope: str
    guarantee: ExactGuarantee
    plan: Mapping[str, Any]
    privacy: Mapping[str, Any]
    levels: tuple[LevelEntry, ...]


@dataclass(frozen=True)
class ReleaseDocument:
    """A parsed ``release.json`` (see the module docstring for the schema)."""

    privtab_version: str
    started_utc: str
    private: bool
    noise: str
    guarantee: ExactGuarantee
    runs: Mapping[str, RunEntry]
    postprocessing: Mapping[str, Any]
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)
    path: Path | None = None
    kind: str = KIND
    """The product (:data:`KINDS`)."""

    @property
    def schema_version(self) -> int:
        return SCHEMA_VERSION

    def level(self, scope: str, key: str) -> LevelEntry:
        for lv in self.runs[scope].levels:
            if lv.level == key:
                return lv
        raise KeyError(f"no level {key!r} in run {scope!r}")

    def thresholds(self) -> dict[str, tuple[int, ...]]:
        """``"US (COUNTY, 1)"`` → the level's thresholds, for every tabulated level."""
        return {
            f"{scope} {lv.level}": lv.thresholds
            for scope, run in self.runs.items()
            for lv in run.levels
            if lv.thresholds
        }

    def to_json(self) -> dict[str, Any]:
        """The JSON object written to ``release.json``."""
        runs = {}
        for scope, run in self.runs.items():
            runs[scope] = {
                "plan": dict(run.plan),
                "guarantee": run.guarantee.to_json(),
                "privacy": dict(run.privacy),
                "levels": [dict(lv.fields) for lv in run.levels],
            }
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": self.kind,
            "privtab_version": self.privtab_version,
            "started_utc": self.started_utc,
            "private": self.private,
            "noise": self.noise,
            "guarantee": self.guarantee.to_json(),
            **{k: v for k, v in self.extra.items() if k not in _CORE},
            "runs": runs,
            "postprocessing": dict(self.postprocessing),
        }

    def write(self, folder: str | Path) -> Path:
        """Write ``folder/release.json`` (text is written to a temporary file, then renamed)."""
        from privtab._json import jsonable
        from privtab.atomic import atomic_write

        text = json.dumps(jsonable(self.to_json()), indent=2) + "\n"
        return atomic_write(Path(folder) / FILENAME, text)


_CORE = {
    "schema_version",
    "kind",
    "privtab_version",
    "started_utc",
    "private",
    "noise",
    "guarantee",
    "runs",
    "postprocessing",
}


def _need(obj: Mapping[str, Any], key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if key not in obj:
        raise ReleaseDocumentError(f"{where}: missing field {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ReleaseDocumentError(f"{where}.{key}: unexpected value {value!r}")
    return value


def _guarantee(obj: Any, where: str) -> ExactGuarantee:
    try:
        g = ExactGuarantee.from_json(obj)
    except ValueError as exc:
        raise ReleaseDocumentError(f"{where}: {exc}") from None
    body = obj[g.definition]
    stated = body.get(g.parameter)
    if not isinstance(stated, int | float) or math.isnan(stated) or stated < g.value:
        raise ReleaseDocumentError(
            f"{where}: the stated {g.parameter} {stated!r} is below its exact value {g.value}"
        )
    return g


def _level(obj: Any, where: str) -> LevelEntry:
    if not isinstance(obj, dict):
        raise ReleaseDocumentError(f"{where}: a level is a JSON object")
    level = _need(obj, "level", where, str)
    status = _need(obj, "status", where, str)
    charged = _guarantee(obj["charged"], f"{where}.charged") if obj.get("charged") else None
    th = obj.get("thresholds") or []
    if not isinstance(th, list) or not all(isinstance(t, int) for t in th):
        raise ReleaseDocumentError(f"{where}.thresholds: expected integers, got {th!r}")
    return LevelEntry(level, status, charged, tuple(th), obj)


def _run(scope: str, obj: Any, where: str) -> RunEntry:
    if not isinstance(obj, dict):
        raise ReleaseDocumentError(f"{where}: a run is a JSON object")
    levels = _need(obj, "levels", where, list)
    return RunEntry(
        scope=scope,
        guarantee=_guarantee(_need(obj, "guarantee", where, dict), f"{where}.guarantee"),
        plan=_need(obj, "plan", where, dict),
        privacy=obj.get("privacy") or {},
        levels=tuple(_level(lv, f"{where}.levels[{i}]") for i, lv in enumerate(levels)),
    )


def parse_release_document(doc: Any, origin: str = FILENAME) -> ReleaseDocument:
    """A :class:`ReleaseDocument` from a parsed JSON object (``origin`` names it)."""
    if not isinstance(doc, dict):
        raise ReleaseDocumentError(f"{origin}: the top level must be a JSON object")
    if "schema_version" not in doc:
        raise ReleaseDocumentError(
            f"{origin}: no schema_version — not a privtab release, or written by privtab "
            "0.1 (re-run the release with this version)"
        )
    if doc["schema_version"] != SCHEMA_VERSION or doc.get("kind") not in KINDS:
        raise ReleaseDocumentError(
            f"{origin}: schema {doc.get('kind')!r} version {doc['schema_version']!r} "
            f"(this privtab reads {' and '.join(map(repr, KINDS))} version {SCHEMA_VERSION})"
        )
    runs = _need(doc, "runs", origin, dict)
    return ReleaseDocument(
        privtab_version=_need(doc, "privtab_version", origin, str),
        started_utc=_need(doc, "started_utc", origin, str),
        private=_need(doc, "private", origin, bool),
        noise=_need(doc, "noise", origin, str),
        guarantee=_guarantee(_need(doc, "guarantee", origin, dict), f"{origin}: guarantee"),
        runs={s: _run(s, r, f"{origin}: runs.{s}") for s, r in runs.items()},
        postprocessing=doc.get("postprocessing") or {},
        extra={k: v for k, v in doc.items() if k not in _CORE},
        kind=str(doc["kind"]),
    )


def read_release_document(path: str | Path) -> ReleaseDocument:
    """Read a release folder's ``release.json`` (``path`` is the folder or the file)."""
    p = Path(path)
    if p.is_dir():
        p = p / FILENAME
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReleaseDocumentError(f"{p}: not found (is this a privtab release folder?)") from None
    except OSError as exc:
        raise ReleaseDocumentError(f"{p}: cannot be read ({exc.strerror})") from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ReleaseDocumentError(f"{p}: not valid JSON ({exc})") from None
    parsed = parse_release_document(doc, str(p))
    return ReleaseDocument(**{**parsed.__dict__, "path": p.parent})
