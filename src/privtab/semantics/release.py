"""Read a guarantee from a release file (``release.json``) or a Rényi curve file.

``release.json`` — the file a SafeTab run writes next to its tables. privtab semantics
reads exactly one field, the top-level ``"guarantee"`` object, which holds exactly one of

* ``{"pure": {"epsilon": E}}``
* ``{"approx": {"epsilon": E, "delta": D}}``
* ``{"zcdp": {"rho": R}}``
* ``{"gdp": {"mu": M}}``
* ``{"rdp": {"alphas": [a1, ...], "taus": [t1, ...]}}`` (orders > 1 and their τ)

Everything else in the file is ignored, except in a privtab SafeTab-P release, whose runs
(United States, Puerto Rico: disjoint persons) :func:`load_release_runs` returns one by one,
each with its own guarantee and plan (for the power against its worst-case person). A
SafeTab-H release's guarantee is per household; its ``person_level`` (DHC-A and DHC-B
together, per person) is shown beside it (:func:`privtab.semantics.overview.
person_level`). Rényi
curve files (``--rdp-file``) are either JSON ``{"alphas": [...], "taus": [...]}`` or CSV
with columns ``alpha,tau``.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privtab.accounting.guarantees import GDP, RDP, ZCDP, ApproxDP, Guarantee, PureDP

if TYPE_CHECKING:
    from privtab.accounting.pld import PLDProfile
    from privtab.tabulate.plan import ReleasePlan

__all__ = [
    "ReleaseError",
    "ReleaseRun",
    "exact_release_value",
    "guarantee_from_release",
    "load_rdp_file",
    "load_release_guarantee",
    "load_release_runs",
    "load_release_status",
]


class ReleaseError(ValueError):
    """A release or curve file is malformed; the message names the file and field."""


def _num(obj: dict[str, Any], key: str, where: str) -> float:
    if key not in obj:
        raise ReleaseError(f"{where}: missing field {key!r}")
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ReleaseError(f"{where}.{key}: expected a number, got {v!r}")
    return float(v)


def _rdp_from_lists(alphas: Any, taus: Any, where: str) -> RDP:
    if not isinstance(alphas, list) or not isinstance(taus, list):
        raise ReleaseError(f"{where}: 'alphas' and 'taus' must be lists of numbers")
    for name, seq in (("alphas", alphas), ("taus", taus)):
        for i, v in enumerate(seq):
            if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(float(v)):
                raise ReleaseError(f"{where}.{name}[{i}]: expected a number, got {v!r}")
    try:
        return RDP.tabulated(alphas, taus)
    except ValueError as exc:
        raise ReleaseError(f"{where}: {exc}") from exc


def guarantee_from_release(doc: Any, origin: str = "release.json") -> Guarantee:
    """The :class:`Guarantee` in a parsed release document (see the module docstring)."""
    if not isinstance(doc, dict):
        raise ReleaseError(f"{origin}: the top level must be a JSON object")
    g = doc.get("guarantee")
    if not isinstance(g, dict):
        raise ReleaseError(f"{origin}: missing top-level object 'guarantee'")
    kinds = [k for k in ("pure", "approx", "zcdp", "gdp", "rdp") if k in g]
    unknown = sorted(set(g) - {"pure", "approx", "zcdp", "gdp", "rdp"})
    if unknown or len(kinds) != 1:
        raise ReleaseError(
            f"{origin}: 'guarantee' must hold exactly one of pure, approx, zcdp, gdp, rdp; "
            f"got {sorted(g)}"
        )
    kind = kinds[0]
    body = g[kind]
    where = f"{origin}: guarantee.{kind}"
    if not isinstance(body, dict):
        raise ReleaseError(f"{where}: expected an object")
    try:
        if kind == "pure":
            return PureDP(_num(body, "epsilon", where))
        if kind == "approx":
            return ApproxDP(_num(body, "epsilon", where), _num(body, "delta", where))
        if kind == "zcdp":
            return ZCDP(_num(body, "rho", where))
        if kind == "gdp":
            return GDP(_num(body, "mu", where))
    except ValueError as exc:
        if isinstance(exc, ReleaseError):
            raise
        raise ReleaseError(f"{where}: {exc}") from exc
    return _rdp_from_lists(body.get("alphas"), body.get("taus"), where)


MAX_FILE_BYTES = 64 << 20
"""The largest release.json or Rényi curve file read (64 MiB; they are read whole)."""


def _read_text(p: Path) -> str:
    """The UTF-8 text of a regular file of at most :data:`MAX_FILE_BYTES` (a pipe, a
    device or a huge file is refused, not read)."""
    from privtab._files import read_regular_bytes

    raw, why = read_regular_bytes(p, MAX_FILE_BYTES)
    if raw is None:
        raise ReleaseError(f"cannot read {str(p)!r}: {why}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReleaseError(
            f"{str(p)!r}: not valid UTF-8 (byte {exc.start + 1} of the file is "
            f"0x{raw[exc.start]:02X})"
        ) from None


def _read_release_json(path: str | Path) -> tuple[Path, Any]:
    """The file read (``release.json`` inside a folder) and its parsed JSON."""
    p = Path(path)
    if p.is_dir():
        p = p / "release.json"
    text = _read_text(p)
    try:
        return p, json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReleaseError(f"{str(p)!r}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    except (RecursionError, ValueError) as exc:  # nesting too deep; a number too long
        raise ReleaseError(f"{str(p)!r}: not a usable JSON document ({exc})") from None


def exact_release_value(doc: Any) -> Fraction | None:
    """The exact ρ or ε of a parsed release document's ``guarantee`` (its ``rho_exact`` /
    ``epsilon_exact``), or ``None`` when it states none."""
    g = doc.get("guarantee") if isinstance(doc, dict) else None
    if not isinstance(g, dict):
        return None
    for kind, key in (("zcdp", "rho_exact"), ("pure", "epsilon_exact")):
        body = g.get(kind)
        if isinstance(body, dict) and isinstance(body.get(key), str):
            try:
                return Fraction(body[key])
            except (ValueError, ZeroDivisionError):
                return None
    return None


def load_release_guarantee(path: str | Path) -> Guarantee:
    """Read ``path`` (a ``release.json`` or a release folder) and return its guarantee."""
    return load_release_status(path)[0]


def load_release_status(path: str | Path) -> tuple[Guarantee, bool]:
    """The guarantee of a release file and whether the release is private.

    A privtab release (``schema_version`` present) is read through
    :func:`privtab.release.read_release_document` — its exact guarantee, rounded up — and
    its ``private`` flag (``False`` for seeded or noise-off test releases, whose stated
    guarantee describes the plan only: their counts carry no protection). Any other file
    with a top-level ``guarantee`` object (see the module docstring) is taken as private.
    """
    from privtab.release.document import ReleaseDocumentError, parse_release_document

    p, doc = _read_release_json(path)
    if isinstance(doc, dict) and "schema_version" in doc:
        try:
            rel = parse_release_document(doc, str(p))
        except ReleaseDocumentError as exc:
            raise ReleaseError(str(exc)) from None
        return rel.guarantee.to_guarantee(), rel.private
    return guarantee_from_release(doc, str(p)), True


@dataclass(frozen=True)
class ReleaseRun:
    """One run of a SafeTab-P release: its name in words, guarantee (rounded up) and plan."""

    scope: str
    name: str
    guarantee: PureDP | ZCDP
    plan: ReleasePlan
    pld_grid: float = 1e-3
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    exact: Fraction | None = None
    """The run's ρ (or ε) exactly, as release.json states it (printed exactly or rounded
    up: :func:`privtab.accounting.exact.exact_or_up`)."""

    @cached_property
    def pld(self) -> PLDProfile:
        """The privacy-loss distribution of the run's worst-case person (an upper bound:
        :func:`privtab.tabulate.plan_pld`, at the grid the run used)."""
        from privtab.tabulate.privacy import plan_pld

        return plan_pld(self.plan, grid=self.pld_grid)


def load_release_runs(path: str | Path) -> tuple[dict[str, Any], list[ReleaseRun]]:
    """The parsed ``release.json`` and its runs (none for a file that is not a privtab
    release: only its top-level ``guarantee`` is known then)."""
    from privtab.release.document import KIND, ReleaseDocumentError, parse_release_document
    from privtab.tabulate import ReleasePlan
    from privtab.tabulate.report_text import run_words

    p, doc = _read_release_json(path)
    if not (isinstance(doc, dict) and "schema_version" in doc):
        return doc if isinstance(doc, dict) else {}, []
    try:
        rel = parse_release_document(doc, str(p))
    except ReleaseDocumentError as exc:
        raise ReleaseError(str(exc)) from None
    runs: list[ReleaseRun] = []
    if rel.kind != KIND:  # SafeTab-H: its guarantee (per household) and person level only
        return rel.to_json(), runs
    for scope, run in rel.runs.items():
        try:
            plan = ReleasePlan.from_dict(dict(run.plan))
        except (ValueError, TypeError, KeyError) as exc:
            raise ReleaseError(f"{p}: runs.{scope}.plan is not a privtab plan: {exc}") from None
        grid = (run.privacy.get("pld") or {}).get("grid", 1e-3)
        runs.append(
            ReleaseRun(
                scope,
                run_words(scope, doc),
                run.guarantee.to_guarantee(),
                plan,
                float(grid),
                {"privacy": dict(run.privacy)},
                run.guarantee.value,
            )
        )
    return rel.to_json(), runs


def load_rdp_file(path: str | Path) -> RDP:
    """A tabulated Rényi curve from JSON ``{"alphas", "taus"}`` or CSV ``alpha,tau``."""
    p = Path(path)
    text = _read_text(p)
    if p.suffix.lower() == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ReleaseError(f"{str(p)!r}: not valid JSON ({exc.msg})") from exc
        except (RecursionError, ValueError) as exc:  # nesting too deep; a number too long
            raise ReleaseError(f"{str(p)!r}: not a usable JSON document ({exc})") from None
        if not isinstance(doc, dict):
            raise ReleaseError(f"{str(p)!r}: expected an object with 'alphas' and 'taus'")
        return _rdp_from_lists(doc.get("alphas"), doc.get("taus"), str(p))
    if p.suffix.lower() != ".csv":
        raise ReleaseError(f"{str(p)!r}: Rényi curve files must end in .json or .csv")
    reader = csv.DictReader(io.StringIO(text))
    cols = [c.strip().lower() for c in (reader.fieldnames or [])]
    if "alpha" not in cols or "tau" not in cols:
        raise ReleaseError(f"{str(p)!r}: need columns 'alpha' and 'tau', got {cols}")
    alphas: list[float] = []
    taus: list[float] = []
    for n, raw in enumerate(reader, start=2):
        row = {k.strip().lower(): (v or "").strip() for k, v in raw.items() if k is not None}
        for col, dest in (("alpha", alphas), ("tau", taus)):
            try:
                dest.append(float(row[col]))
            except ValueError as exc:
                raise ReleaseError(
                    f"{str(p)!r}: row {n}: {col} {row[col]!r} is not a number"
                ) from exc
    return _rdp_from_lists(alphas, taus, str(p))
