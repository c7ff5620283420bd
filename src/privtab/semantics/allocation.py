"""Fine-grained (per-attribute) accounting of a zCDP allocation — semantics seed §8.

A release made of many noisy queries answers each query at one unit of every geographic
level. An allocation lists the ρ of every (query, level) cell. Then (seed §8.1):

* the **ρ per block** is the sum over all cells (every block lies in exactly one unit of
  each level), e.g. 2.56 (persons) + 0.07 (housing) = 2.63 for the 2020 TopDown
  redistricting release (Tables 3–5, shipped as the built-in example);
* the **ρ of a concern** — a set of attributes and, optionally, the precise location
  inside a unit of some level — is the sum over the cells whose answers can change when
  only those aspects of one record change (seed §8.2, Scenarios A–H). Neighbouring
  datasets restricted to such changes give a ρ-zCDP guarantee with this smaller ρ, so
  every power and Bayesian bound can be computed with it.

A cell is affected by a concern when its query involves one of the concern's attributes,
or when its level lies strictly below the concern's ``within`` level (moving a record
between blocks of the same tract changes every block- and block-group-level answer but
no tract-level one).

Files: TOML (the structured base × geography × query form of Tables 3–5, see the
built-in ``data/topdown_2020_redistricting.toml``, with optional ``[scenario.X]`` tables)
or CSV with one row per cell: ``universe,query,attributes,level,rho`` (attributes
separated by ``;``; levels ordered by first appearance, top level first).

The TOML form keeps the published structure (:class:`UniverseProportions`): per universe
a base ρ (Table 3), geographic-level proportions (a column of Table 4) and per-query
proportions at each level (Table 5). On load every Table 4 column and every Table 5
column (at each level the universe spends on) must sum to exactly 1, in exact fractions;
the cells' ρ are recomputed from the proportions, and
:meth:`Allocation.with_proportions` changes proportions and recomputes everything.
"""

from __future__ import annotations

import csv
import io
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = [
    "Allocation",
    "AllocationCell",
    "AllocationError",
    "Concern",
    "UniverseProportions",
    "builtin_allocation",
    "load_allocation",
    "parse_allocation_csv",
    "parse_allocation_toml",
]

BUILTIN_NAME = "topdown_2020_redistricting.toml"


class AllocationError(ValueError):
    """An allocation file or concern is malformed; the message names the field/row."""


@dataclass(frozen=True)
class AllocationCell:
    """The ρ spent by one query at one unit of one geographic level."""

    universe: str
    query: str
    attributes: frozenset[str]
    level: str
    rho: Fraction


@dataclass(frozen=True)
class Concern:
    """What a person wants protected: attributes and/or the location inside a unit.

    ``within`` names a level L: the exact location inside the person's unit of level L
    is sensitive (every level strictly below L is affected). ``None``: location is not a
    concern.
    """

    attributes: frozenset[str] = field(default_factory=frozenset)
    within: str | None = None
    name: str = "custom"
    description: str = ""

    def label(self) -> str:
        parts = sorted(self.attributes)
        if self.within is not None:
            parts.append(f"location within {self.within}")
        return ", ".join(parts) if parts else "nothing"


def _fraction(value: Any, where: str) -> Fraction:
    if isinstance(value, bool):
        raise AllocationError(f"{where}: expected a number, got {value!r}")
    try:
        if isinstance(value, float):
            out = Fraction(repr(value))
        elif isinstance(value, int | str):
            out = Fraction(str(value).strip())
        else:
            raise TypeError
    except (ValueError, ZeroDivisionError, TypeError) as exc:
        raise AllocationError(f"{where}: {value!r} is not a number or fraction") from exc
    if out < 0:
        raise AllocationError(f"{where}: must be non-negative, got {value!r}")
    return out


@dataclass(frozen=True)
class UniverseProportions:
    """One universe of an allocation in the published form (semantics seed §8.1).

    ``rho`` is the base ρ (Table 3), ``geography`` the proportion of it spent at each
    geographic level (a column of Table 4, summing to 1), ``queries`` the proportion of a
    level's share spent on each query (Table 5: at every level the universe spends on,
    the column sums to 1), ``attributes`` each query's attributes. The ρ of a query at one
    unit of a level is ``rho × geography[level] × queries[query][level]``.
    """

    name: str
    rho: Fraction
    geography: Mapping[str, Fraction]
    queries: Mapping[str, Mapping[str, Fraction]]
    attributes: Mapping[str, frozenset[str]]

    def check(self, levels: Sequence[str], where: str) -> None:
        """``AllocationError`` unless the proportions are complete and sum to exactly 1."""
        if set(self.geography) != set(levels):
            raise AllocationError(
                f"{where}: geography levels {sorted(self.geography)} do not match levels "
                f"{list(levels)}"
            )
        total = sum(self.geography.values(), Fraction(0))
        if total != 1:
            raise AllocationError(
                f"{where}: geography proportions (Table 4 column) sum to {total}, not 1"
            )
        for q, shares in self.queries.items():
            unknown = [lv for lv in shares if lv not in levels]
            if unknown:
                raise AllocationError(f"{where} query {q!r}: unknown level {unknown[0]!r}")
        for lv in levels:
            col = sum((s.get(lv, Fraction(0)) for s in self.queries.values()), Fraction(0))
            if self.geography[lv] > 0 and col != 1:
                raise AllocationError(
                    f"{where}: query proportions at level {lv!r} (Table 5 column) sum to "
                    f"{col}, not 1"
                )

    def cells(self, levels: Sequence[str]) -> list[AllocationCell]:
        """The per-(query, level) cells, ρ exact."""
        return [
            AllocationCell(
                self.name,
                q,
                self.attributes.get(q, frozenset()),
                lv,
                self.rho * self.geography[lv] * shares[lv],
            )
            for q, shares in self.queries.items()
            for lv in levels
            if lv in shares
        ]


@dataclass(frozen=True)
class Allocation:
    """A per-(query, level) zCDP allocation, with optional named concerns.

    ``proportions`` holds the published structure when the allocation was given in that
    form (TOML; empty for the flat CSV form): :meth:`geography_proportions`,
    :meth:`query_proportions` and :meth:`with_proportions` use it.
    """

    name: str
    levels: tuple[str, ...]
    cells: tuple[AllocationCell, ...]
    scenarios: Mapping[str, Concern] = field(default_factory=dict)
    source: str = ""
    proportions: tuple[UniverseProportions, ...] = ()

    @classmethod
    def from_proportions(
        cls,
        name: str,
        levels: Sequence[str],
        proportions: Sequence[UniverseProportions],
        scenarios: Mapping[str, Concern] | None = None,
        source: str = "",
        origin: str | None = None,
    ) -> Allocation:
        """An allocation from its proportions, checked to sum to exactly 1 (see
        :class:`UniverseProportions`; errors name ``origin``, e.g. the file); cell ρ
        recomputed exactly."""
        lv = tuple(levels)
        for u in proportions:
            u.check(lv, f"{origin or source or name}: universe {u.name!r}")
        cells = tuple(c for u in proportions for c in u.cells(lv))
        return cls(name, lv, cells, dict(scenarios or {}), source, tuple(proportions))

    def __post_init__(self) -> None:
        if not self.levels:
            raise AllocationError("an allocation needs at least one geographic level")
        if len(set(self.levels)) != len(self.levels):
            raise AllocationError(f"levels must be distinct, got {list(self.levels)}")
        known = set(self.levels)
        seen: set[tuple[str, str, str]] = set()
        for c in self.cells:
            if c.level not in known:
                raise AllocationError(f"query {c.query!r}: unknown level {c.level!r}")
            key = (c.universe, c.query, c.level)
            if key in seen:
                raise AllocationError(f"query {c.query!r} at level {c.level!r} is listed twice")
            seen.add(key)
        for name, concern in self.scenarios.items():
            self.check_concern(concern, where=f"scenario {name!r}")

    # ----------------------------------------------------------------- proportions

    def _universe(self, universe: str) -> UniverseProportions:
        if not self.proportions:
            raise AllocationError(
                f"{self.name}: this allocation was given cell by cell (CSV): it has no "
                "proportions; use the TOML form"
            )
        for u in self.proportions:
            if u.name == universe:
                return u
        known = ", ".join(u.name for u in self.proportions)
        raise AllocationError(f"unknown universe {universe!r}; universes are {known}")

    def base_rho(self, universe: str) -> Fraction:
        """The universe's base ρ (semantics seed Table 3)."""
        return self._universe(universe).rho

    def geography_proportions(self, universe: str) -> dict[str, Fraction]:
        """``{level: proportion}`` — a column of Table 4 (sums to exactly 1)."""
        return dict(self._universe(universe).geography)

    def query_proportions(self, universe: str) -> dict[str, dict[str, Fraction]]:
        """``{query: {level: proportion}}`` — Table 5 (each level's column sums to 1)."""
        return {q: dict(s) for q, s in self._universe(universe).queries.items()}

    def with_proportions(
        self,
        universe: str,
        *,
        rho: Fraction | None = None,
        geography: Mapping[str, Fraction] | None = None,
        queries: Mapping[str, Mapping[str, Fraction]] | None = None,
    ) -> Allocation:
        """A copy with some of ``universe``'s proportions replaced (entries not given are
        kept; ``queries`` maps query → {level: proportion}) and every ρ recomputed; the
        sums are checked again, so a change to one proportion must be balanced by
        another."""
        from dataclasses import replace

        u = self._universe(universe)
        new_queries = {q: dict(s) for q, s in u.queries.items()}
        for q, shares in (queries or {}).items():
            if q not in new_queries:
                raise AllocationError(f"universe {universe!r} has no query {q!r}")
            new_queries[q].update({lv: Fraction(v) for lv, v in shares.items()})
        new_geo = dict(u.geography)
        new_geo.update({lv: Fraction(v) for lv, v in (geography or {}).items()})
        changed = replace(
            u,
            rho=u.rho if rho is None else Fraction(rho),
            geography=new_geo,
            queries=new_queries,
        )
        props = [changed if p.name == universe else p for p in self.proportions]
        return Allocation.from_proportions(
            self.name, self.levels, props, self.scenarios, f"{self.source} (modified)"
        )

    # ----------------------------------------------------------------- descriptions

    @property
    def attributes(self) -> frozenset[str]:
        """Every attribute some query involves."""
        out: set[str] = set()
        for c in self.cells:
            out |= c.attributes
        return frozenset(out)

    @property
    def universes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.universe for c in self.cells))

    def level_name(self, name: str) -> str:
        """The level called ``name`` (case-insensitive); ``AllocationError`` if unknown."""
        for lv in self.levels:
            if lv.lower() == name.strip().lower():
                return lv
        raise AllocationError(f"unknown level {name!r}; levels are {', '.join(self.levels)}")

    def check_concern(self, concern: Concern, where: str = "concern") -> None:
        unknown = sorted(concern.attributes - self.attributes)
        if unknown:
            raise AllocationError(
                f"{where}: unknown attribute(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(self.attributes))}"
            )
        if concern.within is not None:
            self.level_name(concern.within)

    def concern(self, attributes: Iterable[str] = (), within: str | None = None) -> Concern:
        """A validated :class:`Concern` (names are matched case-insensitively)."""
        attrs = frozenset(a.strip().lower() for a in attributes if a.strip())
        lv = self.level_name(within) if within else None
        c = Concern(attrs, lv, name="custom")
        self.check_concern(c)
        return c

    # ----------------------------------------------------------------- accounting

    def rho_per_block(self) -> dict[str, Fraction]:
        """Total ρ per universe for one block (sum over all cells), plus ``total``."""
        out: dict[str, Fraction] = {u: Fraction(0) for u in self.universes}
        for c in self.cells:
            out[c.universe] += c.rho
        out["total"] = sum(out.values(), Fraction(0))
        return out

    def rho_by_level(self) -> dict[str, dict[str, Fraction]]:
        """``{universe: {level: ρ}}`` summed over the queries of each level."""
        out: dict[str, dict[str, Fraction]] = {
            u: {lv: Fraction(0) for lv in self.levels} for u in self.universes
        }
        for c in self.cells:
            out[c.universe][c.level] += c.rho
        return out

    def affected_levels(self, concern: Concern) -> tuple[str, ...]:
        """Levels strictly below ``concern.within`` (all answers there can change)."""
        if concern.within is None:
            return ()
        i = self.levels.index(self.level_name(concern.within))
        return self.levels[i + 1 :]

    def affected_cells(self, concern: Concern) -> tuple[AllocationCell, ...]:
        self.check_concern(concern)
        geo = set(self.affected_levels(concern))
        return tuple(c for c in self.cells if (c.attributes & concern.attributes) or c.level in geo)

    def concern_rho(self, concern: Concern) -> Fraction:
        """ρ relevant to ``concern`` (exact): the sum over the affected cells."""
        return sum((c.rho for c in self.affected_cells(concern)), Fraction(0))

    def rho_by_attribute(self) -> dict[str, Fraction]:
        """``{attribute: ρ}``: the ρ relevant to a concern about that attribute alone."""
        return {a: self.concern_rho(self.concern([a])) for a in sorted(self.attributes)}

    def scenario_rhos(self) -> dict[str, Fraction]:
        return {name: self.concern_rho(c) for name, c in self.scenarios.items()}


# --------------------------------------------------------------------------- parsers


def _concerns(raw: Any, where: str) -> dict[str, Concern]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise AllocationError(f"{where}: [scenario] must be a table of tables")
    out: dict[str, Concern] = {}
    for name, spec in raw.items():
        if not isinstance(spec, dict):
            raise AllocationError(f"{where}: scenario {name!r} must be a table")
        attrs = spec.get("attributes", [])
        if not isinstance(attrs, list) or not all(isinstance(a, str) for a in attrs):
            raise AllocationError(f"scenario {name!r}: attributes must be a list of strings")
        within = spec.get("within")
        if within is not None and not isinstance(within, str):
            raise AllocationError(f"scenario {name!r}: within must be a level name")
        out[str(name)] = Concern(
            frozenset(a.lower() for a in attrs),
            within,
            name=str(name),
            description=str(spec.get("description", "")),
        )
    return out


def parse_allocation_toml(text: str, origin: str = "<toml>") -> Allocation:
    """Parse the structured TOML form (see the module docstring and the built-in file)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise AllocationError(f"{origin}: not valid TOML: {exc}") from exc
    levels = doc.get("levels")
    if not isinstance(levels, list) or not levels or not all(isinstance(x, str) for x in levels):
        raise AllocationError(f"{origin}: 'levels' must be a non-empty list of level names")
    universes = doc.get("universe")
    if not isinstance(universes, list) or not universes:
        raise AllocationError(f"{origin}: at least one [[universe]] table is required")
    props: list[UniverseProportions] = []
    for ui, u in enumerate(universes):
        uname = u.get("name")
        if not isinstance(uname, str) or not uname:
            raise AllocationError(f"{origin}: universe[{ui}] needs a 'name'")
        where = f"{origin}: universe {uname!r}"
        base = _fraction(u.get("rho"), f"{where}: rho")
        geo = u.get("geography")
        if not isinstance(geo, dict):
            raise AllocationError(f"{where}: 'geography' must map each level to a proportion")
        if set(geo) != set(levels):
            raise AllocationError(
                f"{where}: geography levels {sorted(geo)} do not match levels {levels}"
            )
        geo_f = {str(lv): _fraction(v, f"{where}: geography[{lv}]") for lv, v in geo.items()}
        queries = u.get("query")
        if not isinstance(queries, list) or not queries:
            raise AllocationError(f"{where}: at least one [[universe.query]] is required")
        shares_of: dict[str, dict[str, Fraction]] = {}
        attrs_of: dict[str, frozenset[str]] = {}
        for qi, q in enumerate(queries):
            qname = q.get("name")
            if not isinstance(qname, str) or not qname:
                raise AllocationError(f"{where}: query[{qi}] needs a 'name'")
            qw = f"{where} query {qname!r}"
            if qname in shares_of:
                raise AllocationError(f"{qw}: listed twice")
            attrs = q.get("attributes", [])
            if not isinstance(attrs, list) or not all(isinstance(a, str) for a in attrs):
                raise AllocationError(f"{qw}: attributes must be a list of strings")
            shares = q.get("shares")
            if not isinstance(shares, dict):
                raise AllocationError(f"{qw}: 'shares' must map levels to proportions")
            for lv in shares:
                if lv not in levels:
                    raise AllocationError(f"{qw}: unknown level {lv!r} in shares")
            shares_of[qname] = {
                str(lv): _fraction(val, f"{qw}: shares[{lv}]") for lv, val in shares.items()
            }
            attrs_of[qname] = frozenset(a.lower() for a in attrs)
        props.append(UniverseProportions(uname, base, geo_f, shares_of, attrs_of))
    return Allocation.from_proportions(
        str(doc.get("name", origin)),
        levels,
        props,
        _concerns(doc.get("scenario"), origin),
        str(doc.get("source", origin)),
        origin=origin,
    )


_CSV_COLUMNS = ("universe", "query", "attributes", "level", "rho")


def parse_allocation_csv(text: str, origin: str = "<csv>") -> Allocation:
    """Parse the flat CSV form: one row per (universe, query, level) with its ρ."""
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip().lower() for h in (reader.fieldnames or [])]
    missing = [c for c in _CSV_COLUMNS if c not in header]
    if missing:
        raise AllocationError(
            f"{origin}: missing column(s) {', '.join(missing)}; need {','.join(_CSV_COLUMNS)}"
        )
    cells: list[AllocationCell] = []
    levels: list[str] = []
    for n, raw in enumerate(reader, start=2):
        row = {k.strip().lower(): (v or "").strip() for k, v in raw.items() if k is not None}
        where = f"{origin}: row {n}"
        for col in ("universe", "query", "level"):
            if not row.get(col):
                raise AllocationError(f"{where}: empty {col!r}")
        level = row["level"]
        if level not in levels:
            levels.append(level)
        attrs = frozenset(a.strip().lower() for a in row["attributes"].split(";") if a.strip())
        cells.append(
            AllocationCell(
                row["universe"], row["query"], attrs, level, _fraction(row["rho"], f"{where}: rho")
            )
        )
    if not cells:
        raise AllocationError(f"{origin}: no rows")
    return Allocation(name=origin, levels=tuple(levels), cells=tuple(cells), source=origin)


def load_allocation(path: str | Path) -> Allocation:
    """Read an allocation from a ``.toml`` or ``.csv`` file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise AllocationError(f"cannot read allocation file {str(p)!r}: {exc.strerror}") from exc
    suffix = p.suffix.lower()
    if suffix == ".toml":
        return parse_allocation_toml(text, str(p))
    if suffix == ".csv":
        return parse_allocation_csv(text, str(p))
    raise AllocationError(f"{str(p)!r}: allocation files must end in .toml or .csv")


def builtin_allocation() -> Allocation:
    """The 2020 TopDown redistricting allocation (semantics seed Tables 3–5, §8.2)."""
    text = (
        resources.files("privtab.semantics")
        .joinpath("data")
        .joinpath(BUILTIN_NAME)
        .read_text("utf-8")
    )
    return parse_allocation_toml(text, f"built-in {BUILTIN_NAME}")
