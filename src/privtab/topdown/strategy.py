"""TopDown's strategy: exact rational budget shares per level and query, and the pass orders.

A strategy is a JSON file of privtab's own (documented in ``docs/topdown.md``; the four
2020 production runs are packaged: :func:`production_strategy`):

``name``, ``source``
    what it is and where the numbers come from;
``histogram``
    ``"persons"`` (2,016 cells) or ``"units"`` (H1: vacant / occupied), :mod:`.schema`;
``global_scale``
    the production ``global_scale`` (persons 339/542, units 12343/3379), an exact fraction;
``delta``
    the δ at which (ε, δ) statements are reported (production ``approx_dp_delta`` 10⁻¹⁰);
``levels``
    geographic levels from the root down (the spine's level names);
``geolevel_shares``
    level → share of the budget (exact fractions summing to exactly 1);
``query_shares``
    level → {query → share} (production query names; each level's shares sum to exactly
    1; a query not listed is not measured at that level — the US root measures no total);
``l2_passes`` / ``rounder_passes``
    level → list of passes, each a list of query names: the production query orderings
    of the least-squares step and the rounder for the children at that level (pass order
    is the order of the list; a query name may appear in one pass only);
``invariants`` / ``constraints``
    level → names, as the production ``theInvariants.<level>`` / ``theConstraints.<level>``
    (:mod:`privtab.topdown.constraints`).

Every number is exact (:class:`fractions.Fraction`; written ``"1440/4099"`` or an integer —
floats are refused). Noise (production ``programs/engine/engine_utils.py``): at a geounit
of level ``g`` the query ``q`` gets independent discrete Gaussian noise with variance
parameter ``σ² = global_scale² / (share_g · share_q)`` on every cell. Bounded (replace-one)
neighbours change each query's answers by −1 and +1 in two cells (Δ₂² = 2), so the query
costs ``ρ = Δ₂²/(2σ²) = 1/σ²`` zCDP (Canonne, Kamath & Steinke 2020, Thm. 4) and a record's
ρ is ``Σ_g Σ_q share_g · share_q / global_scale² = 1/global_scale²`` — 293764/114921 for
persons, 11417641/152349649 for housing units (the certificates' ρ).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any

from privtab.errors import InputError
from privtab.topdown.schema import Schema, schema

__all__ = [
    "CONSTRAINT_NAMES",
    "INVARIANT_NAMES",
    "PRODUCTION_RUNS",
    "Strategy",
    "StrategyError",
    "load_strategy",
    "parse_strategy",
    "production_strategy",
]

#: ``--run`` name → packaged file.
PRODUCTION_RUNS: dict[str, str] = {
    "us": "us-persons.json",
    "pr": "pr-persons.json",
    "units": "us-units.json",
    "units-pr": "pr-units.json",
}

#: Invariants and constraints a strategy may name (production names, ``constraints`` module).
INVARIANT_NAMES = ("tot", "gqhh_vect", "gqhh_tot")
CONSTRAINT_NAMES = ("total", "hhgq_total_lb", "hhgq_total_ub", "nurse_nva_0", "total_by_group")


class StrategyError(InputError):
    """A strategy file is malformed: the message names the file, the key and the value."""


@dataclass(frozen=True)
class Strategy:
    """A validated TopDown strategy (see the module docstring); every share exact."""

    name: str
    source: str
    histogram: str
    global_scale: Fraction
    delta: Fraction
    levels: tuple[str, ...]
    geolevel_shares: Mapping[str, Fraction]
    query_shares: Mapping[str, Mapping[str, Fraction]]
    l2_passes: Mapping[str, tuple[tuple[str, ...], ...]]
    rounder_passes: Mapping[str, tuple[tuple[str, ...], ...]]
    invariants: Mapping[str, tuple[str, ...]]
    constraints: Mapping[str, tuple[str, ...]]

    @property
    def schema(self) -> Schema:
        """The protected histogram (:mod:`privtab.topdown.schema`)."""
        return schema(self.histogram)

    def queries(self, level: str) -> tuple[str, ...]:
        """The queries measured at ``level``, in the file's order."""
        return tuple(self.query_shares[self._level(level)])

    def sigma2(self, level: str, query: str, share: Fraction | None = None) -> Fraction:
        """The exact noise variance parameter σ² of ``query`` at a geounit of ``level``:
        ``global_scale² / (share · share_q)``, ``share`` the geounit's share of the budget
        (default the level's; the spine's bypass gives some geounits more)."""
        g = self.geolevel_shares[self._level(level)] if share is None else Fraction(share)
        q = self.query_shares[level].get(query)
        if q is None:
            raise KeyError(f"query {query!r} is not measured at level {level!r}")
        if g <= 0:
            raise ValueError(f"a geounit share must be positive, got {g}")
        return self.global_scale**2 / (g * q)

    def rho_query(self, level: str, query: str) -> Fraction:
        """ρ of one query at one geounit of ``level``: Δ₂²/(2σ²) = 1/σ² (Δ₂² = 2)."""
        return 1 / self.sigma2(level, query)

    def rho_level(self, level: str) -> Fraction:
        """ρ of everything measured at one geounit of ``level``."""
        return sum((self.rho_query(level, q) for q in self.queries(level)), Fraction(0))

    @property
    def rho(self) -> Fraction:
        """ρ per record (person or housing unit): the sum over levels and queries, exact."""
        return sum((self.rho_level(lv) for lv in self.levels), Fraction(0))

    @property
    def measured_cells(self) -> dict[str, int]:
        """Noisy cells per geounit of every level."""
        s = self.schema
        return {lv: sum(s.query(q).size for q in self.queries(lv)) for lv in self.levels}

    def _level(self, level: str) -> str:
        if level not in self.geolevel_shares:
            raise KeyError(f"unknown level {level!r}; levels are {list(self.levels)}")
        return level

    def to_dict(self) -> dict[str, Any]:
        """The strategy as its JSON document (fractions as exact strings)."""

        def fr(x: Fraction) -> str:
            return str(x)

        return {
            "name": self.name,
            "source": self.source,
            "histogram": self.histogram,
            "global_scale": fr(self.global_scale),
            "delta": fr(self.delta),
            "levels": list(self.levels),
            "geolevel_shares": {lv: fr(v) for lv, v in self.geolevel_shares.items()},
            "query_shares": {
                lv: {q: fr(v) for q, v in qs.items()} for lv, qs in self.query_shares.items()
            },
            "l2_passes": {lv: [list(p) for p in ps] for lv, ps in self.l2_passes.items()},
            "rounder_passes": {lv: [list(p) for p in ps] for lv, ps in self.rounder_passes.items()},
            "invariants": {lv: list(v) for lv, v in self.invariants.items()},
            "constraints": {lv: list(v) for lv, v in self.constraints.items()},
        }


# ----------------------------------------------------------------------------- parsing


class _Where:
    def __init__(self, origin: str) -> None:
        self.origin = origin

    def fail(self, key: str, value: Any, message: str) -> StrategyError:
        shown = value if isinstance(value, str) else json.dumps(value)
        return StrategyError(message, file=self.origin, column=key, value=shown)


def _fraction(w: _Where, key: str, value: Any, *, positive: bool = True) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise w.fail(key, value, 'write a share as an exact fraction, e.g. "1440/4099"')
    try:
        out = Fraction(value.strip()) if isinstance(value, str) else Fraction(value)
    except (ValueError, ZeroDivisionError):
        raise w.fail(key, value, "not an exact fraction") from None
    if (positive and out <= 0) or out < 0:
        raise w.fail(key, value, "must be positive" if positive else "must not be negative")
    return out


def _mapping(w: _Where, key: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise w.fail(key, value, "must be an object")
    return value


def _names(w: _Where, key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise w.fail(key, value, "must be a list of names")
    if len(set(value)) != len(value):
        raise w.fail(key, value, "lists a name twice")
    return tuple(value)


def _levels_keyed(
    w: _Where, key: str, value: Any, levels: Sequence[str], *, all_levels: bool
) -> dict[str, Any]:
    m = _mapping(w, key, value)
    for lv in m:
        if lv not in levels:
            raise w.fail(f"{key}.{lv}", lv, f"unknown level; levels are {list(levels)}")
    missing = [lv for lv in levels if lv not in m]
    if all_levels and missing:
        raise w.fail(key, sorted(m), f"level {missing[0]!r} is missing")
    return {lv: m[lv] for lv in levels if lv in m}


def _sum_one(w: _Where, key: str, shares: Mapping[str, Fraction]) -> None:
    total = sum(shares.values(), Fraction(0))
    if total != 1:
        raise w.fail(
            key, {k: str(v) for k, v in shares.items()}, f"shares sum to {total}, not exactly 1"
        )


def _passes(
    w: _Where,
    key: str,
    value: Any,
    known: Sequence[str],
    sch: Schema,
    measured: Sequence[str] | None,
) -> tuple[tuple[str, ...], ...]:
    if not isinstance(value, list) or not value:
        raise w.fail(key, value, "must be a non-empty list of passes (lists of query names)")
    out = tuple(_names(w, f"{key}[{i}]", p) for i, p in enumerate(value))
    seen: set[str] = set()
    for i, p in enumerate(out):
        if not p:
            raise w.fail(f"{key}[{i}]", [], "a pass needs at least one query")
        for q in p:
            try:
                sch.query(q)
            except ValueError:
                raise w.fail(f"{key}[{i}]", q, f"unknown {sch.name} query") from None
            if q in seen:
                raise w.fail(f"{key}[{i}]", q, "query already in an earlier pass")
            if measured is not None and q not in measured:
                raise w.fail(f"{key}[{i}]", q, f"not measured at this level ({list(known)})")
            seen.add(q)
    if measured is not None:
        unused = [q for q in measured if q not in seen]
        if unused:
            raise w.fail(key, unused[0], "measured at this level but in no pass")
    return out


def parse_strategy(doc: Any, origin: str = "<strategy>") -> Strategy:
    """A :class:`Strategy` from its JSON document, validated (module docstring); a
    :class:`StrategyError` names ``origin``, the key (``query_shares.Tract.total``) and
    the value of the first problem."""
    w = _Where(origin)
    d = _mapping(w, "(top level)", doc)
    known = {"name", "source", "histogram", "global_scale", "delta", "levels",
             "geolevel_shares", "query_shares", "l2_passes", "rounder_passes",
             "invariants", "constraints"}  # fmt: skip
    for k in d:
        if k not in known:
            raise w.fail(k, k, f"unknown key; known keys are {sorted(known)}")
    for k in ("histogram", "global_scale", "levels", "geolevel_shares", "query_shares",
              "l2_passes", "rounder_passes"):  # fmt: skip
        if k not in d:
            raise w.fail(k, None, "required key is missing")
    hist = d["histogram"]
    if hist not in ("persons", "units"):
        raise w.fail("histogram", hist, "must be 'persons' or 'units'")
    sch = schema(hist)
    levels = _names(w, "levels", d["levels"])
    if not levels:
        raise w.fail("levels", [], "needs at least one level")
    geo_raw = _levels_keyed(w, "geolevel_shares", d["geolevel_shares"], levels, all_levels=True)
    geo = {lv: _fraction(w, f"geolevel_shares.{lv}", v) for lv, v in geo_raw.items()}
    _sum_one(w, "geolevel_shares", geo)
    qs_raw = _levels_keyed(w, "query_shares", d["query_shares"], levels, all_levels=True)
    qshares: dict[str, dict[str, Fraction]] = {}
    for lv, m in qs_raw.items():
        key = f"query_shares.{lv}"
        shares: dict[str, Fraction] = {}
        for q, v in _mapping(w, key, m).items():
            try:
                sch.query(q)
            except ValueError:
                raise w.fail(f"{key}.{q}", q, f"unknown {hist} query") from None
            shares[q] = _fraction(w, f"{key}.{q}", v)
        if not shares:
            raise w.fail(key, m, "no query is measured at this level")
        _sum_one(w, key, shares)
        qshares[lv] = shares
    l2_raw = _levels_keyed(w, "l2_passes", d["l2_passes"], levels, all_levels=True)
    l2 = {
        lv: _passes(w, f"l2_passes.{lv}", p, levels, sch, tuple(qshares[lv]))
        for lv, p in l2_raw.items()
    }
    r_raw = _levels_keyed(w, "rounder_passes", d["rounder_passes"], levels, all_levels=True)
    rounder = {
        lv: _passes(w, f"rounder_passes.{lv}", p, levels, sch, None) for lv, p in r_raw.items()
    }
    inv = _named_by_level(w, "invariants", d.get("invariants", {}), levels, INVARIANT_NAMES)
    cons = _named_by_level(w, "constraints", d.get("constraints", {}), levels, CONSTRAINT_NAMES)
    scale = _fraction(w, "global_scale", d["global_scale"])
    delta = _fraction(w, "delta", d.get("delta", "1/10000000000"))
    if delta >= 1:
        raise w.fail("delta", d.get("delta"), "δ must lie strictly between 0 and 1")
    name = d.get("name", origin)
    source = d.get("source", "")
    if not isinstance(name, str) or not isinstance(source, str):
        raise w.fail("name", name, "'name' and 'source' must be strings")
    return Strategy(name, source, hist, scale, delta, levels, geo, qshares, l2, rounder, inv, cons)


def _named_by_level(
    w: _Where, key: str, value: Any, levels: Sequence[str], known: Sequence[str]
) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for lv, names in _levels_keyed(w, key, value, levels, all_levels=False).items():
        got = _names(w, f"{key}.{lv}", names)
        for n in got:
            if n not in known:
                raise w.fail(f"{key}.{lv}", n, f"unknown name; known: {list(known)}")
        out[lv] = got
    return out


def load_strategy(path: str | Path) -> Strategy:
    """Read and validate a strategy JSON file (:func:`parse_strategy`)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise StrategyError(f"cannot read the strategy file: {exc.strerror}", file=str(p)) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise StrategyError(
            f"not valid JSON: {exc.msg}", file=str(p), row=exc.lineno, column=f"char {exc.colno}"
        ) from None
    return parse_strategy(doc, str(p))


def production_strategy(run: str = "us") -> Strategy:
    """The packaged 2020 production strategy of ``run``: ``us`` and ``pr`` (persons),
    ``units`` (US housing units) and ``units-pr`` — transcribed from the signed run
    certificates and the production code (``source`` says which)."""
    if run not in PRODUCTION_RUNS:
        raise KeyError(f"unknown run {run!r}; runs are {sorted(PRODUCTION_RUNS)}")
    fname = PRODUCTION_RUNS[run]
    text = (
        resources.files("privtab.topdown")
        .joinpath("data")
        .joinpath("strategies")
        .joinpath(fname)
        .read_text("utf-8")
    )
    return parse_strategy(json.loads(text), f"built-in {fname}")
