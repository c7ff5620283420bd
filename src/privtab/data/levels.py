"""Geography levels, their granularity and run scope (SafeTab-P, 2020 production).

A *population-group level* is a pair (geography level, iteration level): e.g. (COUNTY, 2)
is "detailed iterations in every county". The 2020 production release has six US geography
levels and four Puerto Rico levels, each crossed with iteration levels 1 and 2 (the
characteristic-iteration files also carry level-0 iterations, which SafeTab-P does not
tabulate). USA, STATE and PR-STATE are the *detailed* geographies (DETAILED_ONLY
iterations are tabulated there, COARSE_ONLY ones are not); the others are *coarse*
(DETAILED_ONLY iterations are not tabulated there).
"""

from __future__ import annotations

from enum import StrEnum


class Scope(StrEnum):
    """A SafeTab-P run: the 50 states + DC, or Puerto Rico (run separately in production)."""

    US = "US"
    PR = "PR"


class Granularity(StrEnum):
    """Which iterations are tabulated at a geography level."""

    DETAILED = "detailed"
    COARSE = "coarse"


class GeoLevel(StrEnum):
    """A geography level; the value is the ``REGION_TYPE`` used in the T1/T2 outputs."""

    USA = "USA"
    STATE = "STATE"
    COUNTY = "COUNTY"
    TRACT = "TRACT"
    PLACE = "PLACE"
    AIANNH = "AIANNH"
    PR_STATE = "PR-STATE"
    PR_COUNTY = "PR-COUNTY"
    PR_TRACT = "PR-TRACT"
    PR_PLACE = "PR-PLACE"

    @property
    def scope(self) -> Scope:
        return Scope.PR if self.value.startswith("PR-") else Scope.US

    @property
    def granularity(self) -> Granularity:
        if self in (GeoLevel.USA, GeoLevel.STATE, GeoLevel.PR_STATE):
            return Granularity.DETAILED
        return Granularity.COARSE

    @property
    def config_name(self) -> str:
        """The suffix used in ``config.json`` budget keys, e.g. ``pr_county``."""
        return self.value.lower().replace("-", "_")

    @property
    def region_id_length(self) -> int:
        """Number of characters of a REGION_ID at this level (USA is the single id ``1``)."""
        return _ID_LENGTH[self]


_ID_LENGTH = {
    GeoLevel.USA: 1,
    GeoLevel.STATE: 2,
    GeoLevel.COUNTY: 5,
    GeoLevel.TRACT: 11,
    GeoLevel.PLACE: 7,
    GeoLevel.AIANNH: 4,
    GeoLevel.PR_STATE: 2,
    GeoLevel.PR_COUNTY: 5,
    GeoLevel.PR_TRACT: 11,
    GeoLevel.PR_PLACE: 7,
}

US_LEVELS: tuple[GeoLevel, ...] = (
    GeoLevel.USA,
    GeoLevel.STATE,
    GeoLevel.COUNTY,
    GeoLevel.TRACT,
    GeoLevel.PLACE,
    GeoLevel.AIANNH,
)
PR_LEVELS: tuple[GeoLevel, ...] = (
    GeoLevel.PR_STATE,
    GeoLevel.PR_COUNTY,
    GeoLevel.PR_TRACT,
    GeoLevel.PR_PLACE,
)
ITERATION_LEVELS: tuple[int, ...] = (1, 2)
"""Iteration levels tabulated by SafeTab-P (level 0 iterations are ignored, as in production)."""

PR_STATE_FIPS = "72"
US_STATE_FIPS: tuple[str, ...] = tuple(
    f"{i:02d}" for i in range(1, 57) if i not in {3, 7, 14, 43, 52}
)
"""FIPS codes of the 50 states and DC (the valid ``state_filter_us`` values)."""

NO_PLACE = "99999"
NO_AIANNH = "9999"
"""GRF-C codes meaning "not in any place" / "not in any AIANNH area" (no counts released)."""


def levels_of(scope: Scope) -> tuple[GeoLevel, ...]:
    return US_LEVELS if scope is Scope.US else PR_LEVELS


PopulationGroupLevel = tuple[GeoLevel, int]
"""(geography level, iteration level), e.g. ``(GeoLevel.COUNTY, 2)``."""


__all__ = [
    "ITERATION_LEVELS",
    "NO_AIANNH",
    "NO_PLACE",
    "PR_LEVELS",
    "PR_STATE_FIPS",
    "US_LEVELS",
    "US_STATE_FIPS",
    "GeoLevel",
    "Granularity",
    "PopulationGroupLevel",
    "Scope",
    "levels_of",
]
