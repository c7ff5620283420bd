"""The SafeTab-P algorithm for the groups of one chunk, over dense arrays (any engine).

For a level *i* (geography level × iteration level) with plan ``b_i``, stability ``s_i``,
stage-1 fraction γ and thresholds θ1 < θ2 < θ3, every population group of the chunk — a
slice of the level's **public** domain, empty groups included — is tabulated (SafeTab seed
Algorithms 1–3):

* a TotalOnly group (a DETAILED_ONLY iteration, at USA / STATE / PR-STATE) gets one noisy
  total with parameter ``b_i/s_i`` (Algorithm 2, line 9);
* every other group gets a stage-1 noisy total with ``γ·b_i/s_i`` (line 15); its statistic
  level is ``digitize(total, θ)``: below θ1 → a new total, then Sex × Age4, Sex × Age9,
  Sex × Age23 cells, each with ``(1−γ)·b_i/s_i`` (lines 18–31).

Privacy (seed Theorems 1 and 3): one person is in at most ``s_i`` groups of the level;
within a group the stage-2 statistics form a histogram (a person is in one cell), so each
group costs ``b_i/s_i`` by sequential composition, the level ``b_i`` by generalized parallel
composition (Lemmas 9, 10). The only privacy-critical step is :class:`NoiseDraw`: every
published count is an exact count plus one independent draw of its stage's mechanism
(exact samplers of :mod:`privtab.random`: discrete Gaussian σ² = 1/(2ρ), geometric scale
1/ε); the stages it drew from are what :class:`privtab.tabulate.charges.RunLedger` charges.
Everything after the draws — statistic levels from noisy totals, T1 totals as sums of noisy
cells, clamping at zero (:meth:`NoisyGroups.clamped`) — is post-processing of noisy values.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import polars as pl
from numpy.typing import NDArray

from privtab.data.ages import STAT_LEVEL_BINS, AgeBins
from privtab.random import RandomSource
from privtab.tabulate.plan import LevelPlan, StagePlan

__all__ = [
    "SEX_AGES",
    "TOTAL_ONLY",
    "CellTable",
    "ExactCounts",
    "NoiseDraw",
    "NoisyGroups",
    "run_algorithm",
    "sex_age",
]

TOTAL_ONLY = -1
"""Statistic level of TotalOnly groups (no stage 1)."""


class NoiseDraw:
    """Adds one stage's noise to exact counts: the privacy-critical step.

    ``draw(stage, exact)`` returns ``exact + Z`` with ``Z`` independent draws of ``stage``'s
    mechanism, one per count, from ``source`` — each count is one invocation of that
    mechanism on a sensitivity-1 count, guaranteeing its ρ (zCDP) or ε (pure DP). Every
    stage that draws is recorded in :attr:`used` (the run charges them). ``enabled=False``
    (tests only: exact counts, not private) adds nothing but records the same.
    """

    def __init__(self, source: RandomSource | None, enabled: bool = True) -> None:
        self.source = source
        self.enabled = enabled
        self.draws = 0
        self.used: set[str] = set()

    def __call__(self, stage: StagePlan, exact: NDArray[np.int64]) -> NDArray[np.int64]:
        size = int(exact.size)
        self.draws += size
        if size == 0:
            return exact.copy()
        self.used.add(stage.stage)
        if not self.enabled:
            return exact.copy()
        noise = stage.mechanism.sample_noise(size, source=self.source)
        return exact + np.asarray(noise, dtype=np.int64).reshape(exact.shape)


SEX_AGES = 256
"""Sex × age index range: ``(sex − 1) · 128 + age`` (sex 1 or 2, age 0–115 < 128)."""


def sex_age(sex: NDArray[np.integer], age: NDArray[np.integer]) -> NDArray[np.int64]:
    """The sex × age index of every (sex, age) pair: ``(sex − 1) · 128 + age``."""
    return (np.asarray(sex, dtype=np.int64) - 1) * (SEX_AGES // 2) + np.asarray(age, np.int64)


@dataclass(frozen=True)
class ExactCounts:
    """Exact persons of a chunk's groups: per group, and per non-zero (group, sex, age).

    Computed from confidential data; never published (only noisy counts derived from them
    through :class:`NoiseDraw` are)."""

    total: NDArray[np.int64]
    """Persons per group ``G`` (dense over the chunk's domain)."""
    group: NDArray[np.int64]
    sex_age: NDArray[np.int64]
    """:func:`sex_age` of every entry."""
    n: NDArray[np.int64]

    @classmethod
    def from_entries(
        cls,
        group: NDArray[np.int64],
        sex_age: NDArray[np.int64],
        n: NDArray[np.int64],
        size: int,
    ) -> ExactCounts:
        """From the entries (group, sex × age, persons) of the ``size`` groups (an entry
        per pair at most; groups without persons have none)."""
        total = np.bincount(group, weights=n, minlength=size).astype(np.int64)
        return cls(total=total, group=group, sex_age=sex_age, n=n)

    @classmethod
    def from_frame(cls, fine: pl.DataFrame, size: int) -> ExactCounts:
        """From rows ``G``, ``QSEX``, ``QAGE``, ``N`` (groups without persons have no row)."""
        return cls.from_entries(
            fine["G"].to_numpy().astype(np.int64),
            sex_age(fine["QSEX"].to_numpy(), fine["QAGE"].to_numpy()),
            fine["N"].to_numpy().astype(np.int64),
            size,
        )

    def cells(self, groups: NDArray[np.int64], bins: AgeBins) -> NDArray[np.int64]:
        """The exact Sex × ``bins`` cells of ``groups``: ``groups × (2 · bins)``, sex-major
        — the entries of these groups times the sex × age → (sex, age bin) incidence
        (a scatter-add over the entries)."""
        n_cells = 2 * bins.n_bins
        pos = np.full(self.total.size, -1, dtype=np.int64)
        pos[groups] = np.arange(groups.size)
        p = pos[self.group]
        keep = p >= 0
        flat = p[keep] * n_cells + _bin_columns(bins)[self.sex_age[keep]]
        out = np.bincount(flat, weights=self.n[keep], minlength=groups.size * n_cells)
        return out.astype(np.int64).reshape(groups.size, n_cells)


def _bin_columns(bins: AgeBins) -> NDArray[np.int64]:
    """Sex × age index → the (sex, age bin) column ``(sex − 1) · bins + bin``; −1 for ages
    outside the bins (none in validated data)."""
    lookup = np.asarray(bins.lookup(), dtype=np.int64)
    out = np.full(SEX_AGES, -1, dtype=np.int64)
    half = SEX_AGES // 2
    for sex in (0, 1):
        out[sex * half : sex * half + lookup.size] = sex * bins.n_bins + lookup
    return out


@dataclass(frozen=True)
class CellTable:
    """The Sex × Age cells of the groups at one statistic level (1, 2 or 3)."""

    level: int
    groups: NDArray[np.int64]
    """Group indices (into the chunk) at this level."""
    exact: NDArray[np.int64]
    """``groups × (2 · bins)`` exact cells, sex-major (never published)."""
    noisy: NDArray[np.int64]
    """The noisy cells (raw; clamped by :meth:`NoisyGroups.clamped`)."""

    @property
    def n_bins(self) -> int:
        bins = STAT_LEVEL_BINS[self.level]
        assert bins is not None
        return bins.n_bins


@dataclass(frozen=True)
class NoisyGroups:
    """What the algorithm publishes for a chunk's groups, as arrays (raw noisy counts: never
    clamped here; :meth:`clamped` is the post-processing a release applies)."""

    count: NDArray[np.int64]
    """The T1 count of every group: a noisy total, or the sum of its noisy cells."""
    stat: NDArray[np.int8]
    """Statistic level: −1 TotalOnly, 0 total, 1/2/3 Sex × Age4/9/23."""
    stage1: NDArray[np.int64]
    """The noisy stage-1 total (meaningless where ``stat == TOTAL_ONLY``)."""
    total_only: NDArray[np.bool_]
    cells: tuple[CellTable, ...]
    exact: NDArray[np.int64]
    """Exact totals (for the non-private evaluation only; never published; empty after
    :meth:`noisy_only`)."""
    draws: int
    stages_used: frozenset[str]

    def noisy_only(self) -> NoisyGroups:
        """The same groups without the exact counts (what leaves the algorithm for
        publication: noisy counts and public facts only)."""
        none = np.zeros(0, dtype=np.int64)
        return replace(self, exact=none, cells=tuple(replace(t, exact=none) for t in self.cells))

    def clamped(self) -> NoisyGroups:
        """Counts clamped at 0 (post-processing, no privacy cost): every cell, then each
        group's count = the sum of its clamped cells (groups without cells: its noisy total
        clamped), the stage-1 total clamped. Statistic levels are unchanged."""
        cells = tuple(replace(t, noisy=np.maximum(t.noisy, 0)) for t in self.cells)
        count = np.maximum(self.count, 0)
        for t in cells:
            count[t.groups] = t.noisy.reshape(t.groups.size, -1).sum(axis=1)
        return replace(self, count=count, stage1=np.maximum(self.stage1, 0), cells=cells)


def run_algorithm(
    plan: LevelPlan,
    total_only: NDArray[np.bool_],
    exact: ExactCounts,
    draw: NoiseDraw,
) -> NoisyGroups:
    """SafeTab seed Algorithms 1–3 for one chunk (see the module docstring).

    ``total_only`` marks the chunk's TotalOnly groups. Every count is raw (unclamped):
    clamping at 0 is post-processing of the release (:meth:`NoisyGroups.clamped`).
    """
    truth = exact.total
    count = np.zeros(truth.size, dtype=np.int64)
    to_idx = np.flatnonzero(total_only)
    count[to_idx] = draw(plan.total, truth[to_idx])
    if to_idx.size == 0:  # no TotalOnly group (every sub-state level): whole arrays
        stage1 = draw(plan.stage1, truth)
        stat = plan.stat_level(stage1)
    else:
        ad_idx = np.flatnonzero(~total_only)
        stage1 = np.zeros(truth.size, dtype=np.int64)
        stat = np.full(truth.size, TOTAL_ONLY, dtype=np.int8)
        stage1[ad_idx] = draw(plan.stage1, truth[ad_idx])
        stat[ad_idx] = plan.stat_level(stage1[ad_idx])
    # TotalOnly groups have stat −1: the groups of each level, in group order
    lv0 = np.flatnonzero(stat == 0)
    count[lv0] = draw(plan.stage2, truth[lv0])
    cells = []
    for k in (1, 2, 3):
        groups = np.flatnonzero(stat == k)
        if groups.size:
            table = _cell_table(plan, k, groups, exact, draw)
            count[groups] = table.noisy.reshape(groups.size, -1).sum(axis=1)
            cells.append(table)
    return NoisyGroups(
        count=count,
        stat=stat,
        stage1=stage1,
        total_only=np.asarray(total_only, dtype=np.bool_),
        cells=tuple(cells),
        exact=truth,
        draws=draw.draws,
        stages_used=frozenset(draw.used),
    )


def _cell_table(
    plan: LevelPlan,
    k: int,
    groups: NDArray[np.int64],
    exact: ExactCounts,
    draw: NoiseDraw,
) -> CellTable:
    """Exact and noisy Sex × Age cells of ``groups`` at statistic level ``k``."""
    bins = STAT_LEVEL_BINS[k]
    assert bins is not None
    cells = exact.cells(groups, bins).reshape(-1)
    noisy = draw(plan.stage2, cells)
    return CellTable(k, groups, cells, noisy)
