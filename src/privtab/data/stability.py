"""Stability of the record → population-group maps, from the reference files and K alone.

The stability Δ(g_i) of population-group level i is the largest number of groups of that
level one record can fall in (SafeTab paper §3, "Δ(g_i) = max_r |g_i(r)|", seed
``safetab-detailed-dhc-race-ethnicity.txt``). Within one region a record falls in the
iterations of the level its race codes and ethnicity code select, so Δ is a property of
the iteration files and of ``max_race_codes`` (K) only — never of the data.

Two numbers are computed for each (iteration level, geography granularity):

- ``census_rule`` = h_r · max(2, K) + h_e, the rule of the 2020 production code (census
  README), where h_r (h_e) is the largest number of race-alone (ethnicity) iterations of
  the level that contain one code — "the number of hierarchy levels". It assumes that the
  alone and alone-or-in-combination hierarchies have the same structure.
- ``exact`` = the true maximum of |g(r)| over every possible record (1..K distinct valid
  race codes, one ethnicity code), computed combinatorially without that assumption.
  With every code in at most one iteration per (kind, level, ALONE, granularity) — which
  :mod:`privtab.data.iterations` validates — a record's race part is
  [all codes in one alone group G] + |{alone-or-in-combination groups of its codes}|, so
  the maximum is max(min(K, D), max_G (1 + min(K, d(G)))) where D is the number of
  non-empty alone-or-in-combination groups and d(G) the number of distinct ones among the
  codes of alone group G; the ethnicity part is h_e (one code).

``value`` is what an engine must use: the Census rule when it is an upper bound of the exact
maximum (it is, for the production files: 9 at every level), the exact maximum otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from privtab._json import fields_dict
from privtab.data.iterations import Iteration, IterationKind, ReferenceData
from privtab.data.levels import (
    ITERATION_LEVELS,
    GeoLevel,
    Granularity,
    PopulationGroupLevel,
    Scope,
    levels_of,
)


@dataclass(frozen=True)
class Stability:
    """Stability of one (iteration level, granularity); see the module docstring."""

    iteration_level: int
    granularity: Granularity
    max_race_codes: int
    h_race: int
    """Most race-alone iterations of the level containing one code (Census h_r)."""
    h_race_combination: int
    """Most race alone-or-in-combination iterations of the level containing one code."""
    h_ethnicity: int
    """Most ethnicity iterations of the level containing one code (Census h_e)."""
    census_rule: int
    exact: int

    @property
    def value(self) -> int:
        """The stability to use: the Census rule if it bounds the exact maximum, else exact."""
        return self.census_rule if self.census_rule >= self.exact else self.exact

    @property
    def census_rule_holds(self) -> bool:
        return self.census_rule >= self.exact

    def to_dict(self) -> dict[str, Any]:
        return fields_dict(self, granularity=self.granularity.value, value=self.value)


def _height(its: list[Iteration]) -> int:
    """Largest number of the given iterations that share one code."""
    per_code: dict[int, int] = {}
    for it in its:
        for c in it.codes:
            per_code[c] = per_code.get(c, 0) + 1
    return max(per_code.values(), default=0)


def _single_owner(its: list[Iteration]) -> dict[int, str]:
    owner: dict[int, str] = {}
    for it in its:
        for c in it.codes:
            if c in owner:
                raise ValueError(
                    f"code {c} is in iterations {owner[c]} and {it.code} of one level; "
                    "validate the reference files first (privtab.data.read_reference)"
                )
            owner[c] = it.code
    return owner


def level_stability(
    reference: ReferenceData, max_race_codes: int, iteration_level: int, granularity: Granularity
) -> Stability:
    """Stability of the iterations of ``iteration_level`` tabulated at ``granularity``."""
    if max_race_codes < 1:
        raise ValueError(f"max_race_codes must be at least 1, got {max_race_codes}")
    its = list(reference.select(iteration_level, granularity))
    alone = [i for i in its if i.kind is IterationKind.RACE and i.alone]
    combo = [i for i in its if i.kind is IterationKind.RACE and not i.alone]
    eth = [i for i in its if i.kind is IterationKind.ETHNICITY]
    h_r, h_c, h_e = _height(alone), _height(combo), _height(eth)
    k = max_race_codes
    census = h_r * max(2, k) + h_e
    combo_of = _single_owner(combo)
    _single_owner(alone)
    n_combo = len({combo_of[c] for c in combo_of})
    race_best = min(k, n_combo)
    for g in alone:
        if g.codes:
            d = len({combo_of[c] for c in g.codes if c in combo_of})
            race_best = max(race_best, 1 + min(k, d))
    return Stability(
        iteration_level=iteration_level,
        granularity=granularity,
        max_race_codes=k,
        h_race=h_r,
        h_race_combination=h_c,
        h_ethnicity=h_e,
        census_rule=census,
        exact=race_best + h_e,
    )


def stabilities(
    reference: ReferenceData, max_race_codes: int, scope: Scope
) -> dict[PopulationGroupLevel, Stability]:
    """Stability of every population-group level (geography × iteration level) of a run."""
    cache: dict[tuple[int, Granularity], Stability] = {}
    out: dict[tuple[GeoLevel, int], Stability] = {}
    for geo in levels_of(scope):
        for lv in ITERATION_LEVELS:
            key = (lv, geo.granularity)
            if key not in cache:
                cache[key] = level_stability(reference, max_race_codes, lv, geo.granularity)
            out[(geo, lv)] = cache[key]
    return out


__all__ = ["Stability", "level_stability", "stabilities"]
