"""The public domain of a population-group level: regions × iterations, and its chunks.

A level's domain is every region of the GRF-C at its geography level (restricted to
``state_filter_us`` for the US run, state 72 for PR) × every iteration the reference files
tabulate at its iteration level and granularity — empty groups included, nothing taken
from the person data (SafeTab seed §2; DESIGN.md §3). Group ``G = region · I + iteration``
indexes it region-major. Large levels are tabulated in chunks of whole states
(:func:`state_chunks`); every group is in exactly one chunk.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from privtab.data import Geography, GeoLevel, ReferenceData
from privtab.data.levels import Granularity
from privtab.tabulate.plan import LevelPlan

__all__ = ["NESTED_IN_STATE", "Domain", "level_domain", "state_chunks"]

NESTED_IN_STATE = frozenset(
    {
        GeoLevel.STATE,
        GeoLevel.PR_STATE,
        GeoLevel.COUNTY,
        GeoLevel.TRACT,
        GeoLevel.PLACE,
        GeoLevel.PR_COUNTY,
        GeoLevel.PR_TRACT,
        GeoLevel.PR_PLACE,
    }
)
"""Geography levels whose region ids start with the state's FIPS code (tabulated in chunks
of whole states; USA and AIANNH areas, which may cross states, in one piece)."""


@dataclass(frozen=True)
class Domain:
    """The public domain of a level (or of a slice of its regions): regions × iterations,
    group ``G = region_index · I + iteration_index`` (region-major)."""

    geo: GeoLevel
    regions: tuple[str, ...]
    codes: tuple[str, ...]
    total_only: NDArray[np.bool_]  # per iteration
    first_region: int = 0
    """Index of ``regions[0]`` in the level's full domain (for slices)."""

    @property
    def size(self) -> int:
        return len(self.regions) * len(self.codes)

    def slice(self, lo: int, hi: int) -> Domain:
        """Regions ``lo:hi`` (indices into this domain) with every iteration."""
        return Domain(
            self.geo,
            self.regions[lo:hi],
            self.codes,
            self.total_only,
            self.first_region + lo,
        )


def level_domain(plan: LevelPlan, geography: Geography, reference: ReferenceData) -> Domain:
    """The public domain of ``plan``'s level, from the GRF-C and the reference files."""
    geo = GeoLevel(plan.geo)
    its = reference.select(plan.iteration_level, geo.granularity)
    detailed = geo.granularity is Granularity.DETAILED
    return Domain(
        geo=geo,
        regions=geography.domain(geo),
        codes=tuple(i.code for i in its),
        total_only=np.array([detailed and bool(i.detailed_only) for i in its], dtype=np.bool_),
    )


def state_chunks(
    dom: Domain,
    max_groups: int,
    state_cells: Mapping[str, int] | None = None,
    max_cells: int | None = None,
) -> list[tuple[int, int, list[str]]]:
    """Consecutive runs of whole states ``(lo, hi, states)`` over ``dom``'s sorted regions,
    each with at most ``max_groups`` groups and (given ``state_cells``, the cells of each
    state) at most ``max_cells`` cells, unless a single state has more."""
    n_it = max(len(dom.codes), 1)
    cells_of = state_cells or {}
    cap = max_cells if max_cells is not None else float("inf")
    out: list[tuple[int, int, list[str]]] = []
    lo = 0
    states: list[str] = []
    cells = 0
    i = 0
    regions = dom.regions
    while i < len(regions):
        st = regions[i][:2]
        j = i
        while j < len(regions) and regions[j][:2] == st:
            j += 1
        more = cells_of.get(st, 0)
        if states and ((j - lo) * n_it > max_groups or cells + more > cap):
            out.append((lo, i, states))
            lo, states, cells = i, [], 0
        states.append(st)
        cells += more
        i = j
    if states:
        out.append((lo, len(regions), states))
    return out
