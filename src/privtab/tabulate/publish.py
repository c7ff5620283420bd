"""From a chunk's noisy tables to its published rows, as the 2020 production code published.

The engine's chunk (:class:`~privtab.tabulate.results.ChunkResult`) holds the raw noisy
counts as arrays. :func:`publish_chunk` turns it into the rows written, in production's
order (``safetab_p_analytics.py``), deciding on the arrays and building frames only for
the rows published:

1. **zero suppression** (:mod:`privtab.tabulate.suppression`): T1 rows of stage-2 totals
   (and TotalOnly totals) at sub-state geographies whose *raw* noisy count is ≤ the
   level's exact threshold are dropped — before any clamping, so the rule is production's
   for every ``zero_suppression_chance`` (also one whose threshold is negative);
2. **clamping at zero** when negative counts are not allowed: every T2 cell, every other
   T1 count and the stage-1 count are clamped; a group with Sex × Age cells gets as T1 the
   **sum of its clamped cells** (production's T1 for those groups;
   :meth:`~privtab.tabulate.algorithm.NoisyGroups.clamped`);
3. **sex marginals**: for every group with cells, two T2 rows (``SEX`` 1 and 2,
   ``AGESTART = AGEEND = "*"``) holding the sum of that sex's (published) cells, with the
   noise law of that sum in the companion columns.

Privacy: every step reads noisy counts and the public plan only — post-processing, no
privacy cost (SafeTab seed §4; semantics seed §4.2). The number of rows dropped is a
function of the noisy output, so it is published (``release.json``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from privtab.mechanisms.counts import count_error
from privtab.tabulate.plan import LevelPlan
from privtab.tabulate.results import ChunkResult
from privtab.tabulate.suppression import SuppressionRule, suppression_mask
from privtab.tabulate.tables import t1_frame, t2_frame

__all__ = ["GROUP", "MARGINAL_AGE", "PublishedChunk", "publish_chunk", "sex_marginals"]

GROUP = ["REGION_ID", "REGION_TYPE", "ITERATION_CODE"]
"""The key of a population group (T1's key; T2's without the cell columns)."""
MARGINAL_AGE = "*"
"""``AGESTART`` and ``AGEEND`` of a sex marginal."""


@dataclass(frozen=True)
class PublishedChunk:
    """A chunk's rows as written (T1 and T2 with their companion columns) and how many T1
    rows zero suppression removed."""

    t1: pl.DataFrame
    t2: pl.DataFrame
    suppressed: int


def sex_marginals(t2: pl.DataFrame, plan: LevelPlan) -> pl.DataFrame:
    """Production's sex marginals of a chunk's cells: per group and sex, the sum of its
    cells, ``AGESTART = AGEEND = "*"``, with the noise of that sum (``k/2`` independent
    draws of the stage-2 mechanism for a group of ``k`` cells)."""
    if t2.height == 0:
        return t2
    sums = (
        t2.with_columns((pl.len().over(GROUP) // 2).alias("_H"))
        .group_by([*GROUP, "SEX"], maintain_order=True)
        .agg(
            pl.col("COUNT").sum(),
            pl.col("NOISE").first(),
            pl.col("NOISE_SCALE").first(),
            pl.col("VARIANCE").sum(),
            pl.col("_H").first(),
        )
    )
    halves = sums["_H"].unique().to_list()
    moe = {h: count_error(plan.stage2.mechanism, h).moe95 for h in halves}
    return sums.select(
        *GROUP,
        pl.lit(MARGINAL_AGE).alias("AGESTART"),
        pl.lit(MARGINAL_AGE).alias("AGEEND"),
        "SEX",
        "COUNT",
        "NOISE",
        "NOISE_SCALE",
        "VARIANCE",
        pl.col("_H").replace_strict(moe, return_dtype=pl.Int64).alias("MOE95"),
    ).select(t2.columns)


def publish_chunk(part: ChunkResult, rule: SuppressionRule, *, nonnegative: bool) -> PublishedChunk:
    """One chunk's published rows from its raw (unclamped) noisy counts (module docstring).

    Suppression and clamping are decided on the arrays; frames are built only for the T1
    rows kept (most sub-state groups of a large level are dropped)."""
    if rule.active and part.dom.geo.value != rule.region_type:
        raise ValueError(
            f"publish: rule of level {rule.level} applied to REGION_TYPE {part.dom.geo.value}"
        )
    groups = part.groups
    drop = suppression_mask(groups.count, groups.stat, rule)
    kept = np.flatnonzero(~drop)
    if nonnegative:
        groups = groups.clamped()
    t1 = t1_frame(part.plan, part.dom, groups, kept)
    t2 = t2_frame(part.plan, part.dom, groups)
    t2 = pl.concat([t2, sex_marginals(t2, part.plan)])
    return PublishedChunk(t1, t2, int(drop.sum()))
