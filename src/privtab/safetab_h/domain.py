"""SafeTab-H's domain: the population groups of SafeTab-P's T1, run by run, level by level.

Production (``safetab_h_analytics.py``, its readers and ``preprocessing.py``) tabulates,
for a run (US or PR) and a level (region type × iteration level 1 or 2), exactly the T1
groups that

1. belong to the run — rows whose REGION_TYPE is one of the run's (USA … AIANNH; PR-*),
   whose REGION_ID starts with a state of the run (``state_filter_us``; ``72``) — except
   USA, always kept, and AIANNH, kept when its code is the AIANNHCE of a GRF-C block of
   the run's states (the CSV reader's rule; the CEF reader also keeps only regions of
   blocks with units, which a T1 of the same population satisfies). Rows of other states
   are not an error: production's readers drop them before validating anything;
2. have an iteration of that LEVEL that the level tabulates at that granularity
   (DETAILED_ONLY iterations only at USA / STATE / PR-STATE, COARSE_ONLY ones only below):
   T1 rows of other iterations are *pruned* (production's inner join with the flat map's
   iteration domain — such rows arise from SafeTab-P's coterminous-geography
   post-processing).

A group absent from T1 is not released (SafeTab-P's suppression is inherited); a group in
T1 without a household is released (0 + noise). Everything here is public: T1 is noisy
output, the GRF-C and reference files are public.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import NDArray

from privtab.data import Geography, GeoLevel, ReferenceData, Scope
from privtab.data.errors import Problem, ProblemLog
from privtab.data.levels import levels_of
from privtab.data.pop_groups import FILE, PopulationGroups, check_region_id_lengths

__all__ = ["LevelGroups", "RunGroups", "outside_examples", "run_groups"]

ROW = "ROW"


@dataclass(frozen=True)
class LevelGroups:
    """The groups of one level, sorted by region then iteration (reference-file order).

    ``region`` / ``iteration``: the group's index in the level's GRF-C region domain
    (``-1``: a T1 region without a GRF-C block of the run, e.g. a place code with no
    block — released as 0 + noise, as production does) and in the iterations the level
    tabulates (:meth:`privtab.data.ReferenceData.select`)."""

    geo: GeoLevel
    iteration_level: int
    region_id: tuple[str, ...]
    iteration_code: tuple[str, ...]
    t1_count: NDArray[np.int64]
    region: NDArray[np.int64]
    iteration: NDArray[np.int64]

    @property
    def size(self) -> int:
        return int(self.t1_count.size)

    @property
    def key(self) -> str:
        return f"({self.geo.value}, {self.iteration_level})"

    def series(self) -> tuple[pl.Series, pl.Series]:
        """REGION_ID and ITERATION_CODE as polars Series (built once per chunk)."""
        cached: tuple[pl.Series, pl.Series] | None = self.__dict__.get("_series")
        if cached is None:
            cached = (
                pl.Series(self.region_id, dtype=pl.String),
                pl.Series(self.iteration_code, dtype=pl.String),
            )
            object.__setattr__(self, "_series", cached)
        return cached

    def take(self, lo: int, hi: int) -> LevelGroups:
        """Groups ``lo:hi``."""
        return LevelGroups(
            self.geo,
            self.iteration_level,
            self.region_id[lo:hi],
            self.iteration_code[lo:hi],
            self.t1_count[lo:hi],
            self.region[lo:hi],
            self.iteration[lo:hi],
        )


@dataclass(frozen=True)
class RunGroups:
    """A run's groups per level and what happened to T1's other rows (counts of T1 rows:
    public)."""

    scope: Scope
    levels: dict[tuple[GeoLevel, int], LevelGroups]
    t1_rows: int
    dropped: dict[str, int] = field(default_factory=dict)
    """T1 rows not tabulated, by reason: ``other_run`` (a region type of the other run),
    ``outside_states`` (a state — or AIANNH area — outside the run), ``level_0`` (an
    iteration of LEVEL 0), ``pruned`` (an iteration the level does not tabulate at its
    granularity)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "t1_rows_read": self.t1_rows,
            "t1_rows_not_tabulated": dict(self.dropped),
            "groups": {f"{g.value},{lv}": lg.size for (g, lv), lg in self.levels.items()},
        }


def _run_rows(
    rows: pl.DataFrame, scope: Scope, states: tuple[str, ...], geography: Geography
) -> tuple[pl.DataFrame, int, int]:
    """The T1 rows of a run's region types, in its states: (kept, rows of the other run's
    region types, rows outside the run's states)."""
    types = [g.value for g in levels_of(scope)]
    mine = rows.filter(pl.col("REGION_TYPE").is_in(types))
    units = geography.units.filter(pl.col("TABBLKST").is_in(list(states)))
    aiannh = units["AIANNHCE"].unique().to_list()  # production keeps 9999 too
    keep = (
        (pl.col("REGION_TYPE") == GeoLevel.USA.value)
        | ((pl.col("REGION_TYPE") == GeoLevel.AIANNH.value) & pl.col("REGION_ID").is_in(aiannh))
        | (
            ~pl.col("REGION_TYPE").is_in([GeoLevel.USA.value, GeoLevel.AIANNH.value])
            & pl.col("REGION_ID").str.slice(0, 2).is_in(list(states))
        )
    )
    kept = mine.filter(keep)
    return kept, rows.height - mine.height, mine.height - kept.height


def _level(
    rows: pl.DataFrame, geo: GeoLevel, lv: int, geography: Geography, reference: ReferenceData
) -> tuple[LevelGroups, int]:
    """The groups of one level among ``rows`` (the run's rows of region type ``geo`` and
    iteration LEVEL ``lv``) and how many rows the granularity pruned."""
    its = [i.code for i in reference.select(lv, geo.granularity)]
    position = {c: k for k, c in enumerate(its)}
    regions = {r: k for k, r in enumerate(geography.domain(geo))}
    kept = rows.filter(pl.col("ITERATION_CODE").is_in(its))
    kept = kept.with_columns(
        pl.col("ITERATION_CODE").replace_strict(position, return_dtype=pl.Int64).alias("_I"),
        pl.col("REGION_ID").replace_strict(regions, default=-1, return_dtype=pl.Int64).alias("_R"),
    ).sort("REGION_ID", "_I")
    groups = LevelGroups(
        geo=geo,
        iteration_level=lv,
        region_id=tuple(kept["REGION_ID"].to_list()),
        iteration_code=tuple(kept["ITERATION_CODE"].to_list()),
        t1_count=kept["COUNT"].to_numpy().astype(np.int64),
        region=kept["_R"].to_numpy().astype(np.int64),
        iteration=kept["_I"].to_numpy().astype(np.int64),
    )
    return groups, rows.height - kept.height


def run_groups(
    t1: PopulationGroups,
    scope: Scope,
    states: tuple[str, ...],
    geography: Geography,
    reference: ReferenceData,
    log: ProblemLog,
) -> RunGroups:
    """A run's groups per level (module docstring); rows of the run whose REGION_ID does
    not have its type's length are problems in ``log`` (``region_id_length``), and a run
    with no T1 row at all is one (``no_t1_groups``: production's "No T1 pop groups data")."""
    kept, other_run, outside = _run_rows(t1.rows, scope, states, geography)
    kept = check_region_id_lengths(kept, log)
    if kept.height == 0:
        log.add(
            Problem(
                t1.source,
                "no_t1_groups",
                f"T1 has no population group of the {scope.value} run (states "
                f"{', '.join(states)}): is it the T1 of this population and state filter?",
            )
        )
    level_of = {c: it.level for c, it in reference.iterations.items()}
    kept = kept.with_columns(
        pl.col("ITERATION_CODE").replace_strict(level_of, return_dtype=pl.Int64).alias("_LV")
    )
    levels: dict[tuple[GeoLevel, int], LevelGroups] = {}
    pruned = 0
    for geo in levels_of(scope):
        of_geo = kept.filter(pl.col("REGION_TYPE") == geo.value)
        for lv in (1, 2):
            groups, gone = _level(of_geo.filter(pl.col("_LV") == lv), geo, lv, geography, reference)
            levels[(geo, lv)] = groups
            pruned += gone
    level_0 = kept.filter(pl.col("_LV") == 0).height
    dropped = {
        "other_run": other_run,
        "outside_states": outside,
        "level_0": level_0,
        "pruned": pruned,
    }
    return RunGroups(scope, levels, t1.rows.height, dropped)


def outside_examples(t1: PopulationGroups, scope: Scope, states: tuple[str, ...],
                     geography: Geography, limit: int = 3) -> list[str]:  # fmt: skip
    """A few located T1 rows of the run's region types left out as outside its states
    (for the warning that says so)."""
    types = [g.value for g in levels_of(scope)]
    mine = t1.rows.filter(pl.col("REGION_TYPE").is_in(types))
    kept, _, _ = _run_rows(mine, scope, states, geography)
    out = mine.join(kept.select(FILE, ROW), on=[FILE, ROW], how="anti").head(limit)
    return [
        f"{f}, line {r}: {rt} {rid}"
        for f, r, rt, rid in out.select(FILE, ROW, "REGION_TYPE", "REGION_ID").iter_rows()
    ]
