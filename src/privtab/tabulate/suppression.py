"""Zero suppression as the 2020 production code applied it: post-processing of noisy totals.

Production SafeTab-P (``safetab_p_analytics.py`` in the Bureau's DAS 2020 DDHCA release),
whenever ``config.json`` has ``zero_suppression_chance`` = *c* (0.9999 in NMFv7), drops a T1
row when

* the row is a **total released by itself** — a stage-2 total (statistic level 0) or a
  TotalOnly total (a detailed-only iteration); groups with Sex × Age cells are never
  dropped (their T1 is the sum of their cells);
* its geography is **sub-state**: every ``REGION_TYPE`` except ``USA``, ``STATE`` and
  ``PR-STATE`` (so TotalOnly rows, which exist only at those three, are never dropped in
  practice; the rule is written for them anyway, as production writes it);
* its **noisy** count is ≤ the threshold ``t``: the smallest integer with
  ``P(noise ≤ t) ≥ c`` for *that row's* noise law (production: Tumult's inverse CMF of the
  discrete Gaussian / two-sided geometric at ``c``).

It is applied to the noisy count *before* any clamping at zero. With the production budgets
``t`` = 21 for level-2 iterations (stage-2 σ² = 31.45) and 93 for level-1 iterations
(σ² = 625) at county, tract, place and AIANNH; a group of true size 0 is dropped with
probability ``c``. ``c = 0`` (or no key) disables it; when noise is off (a test run)
production thresholds at 0, i.e. drops exact zeros — :func:`suppression_threshold` with
``noise=False`` does the same.

**Privacy.** None gained, none lost: the decision is a function of the noisy count alone
(post-processing invariance; semantics seed §4.2). It protects nobody; it shortens the
tables. Its cost to data users: a missing row means "small or empty", and a suppressed
group of true size n is indistinguishable from an absent one —
:func:`privtab.tabulate.accuracy.level_accuracy` gives the exact probability for any n.

**Exactness.** ``t`` is decided with the certified CDF of privtab's noise laws
(:class:`privtab.mechanisms.DiscreteGaussianLaw`, :class:`~privtab.mechanisms.
DiscreteLaplaceLaw`): ``P(noise ≤ x) ≥ c`` is decided at high precision for the exact
rational ``c`` (``0.9999`` is 9999/10000), never by float rounding.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
from numpy.typing import ArrayLike, NDArray

from privtab.mechanisms import DiscreteGaussian, Geometric, NoiseMechanism
from privtab.mechanisms.laws import DiscreteGaussianLaw, DiscreteLaplaceLaw, smallest_true

if TYPE_CHECKING:
    from privtab.tabulate.plan import LevelPlan, StagePlan

__all__ = [
    "EXEMPT_REGION_TYPES",
    "STAGE2_TOTAL",
    "TOTAL_ONLY",
    "SuppressionResult",
    "SuppressionRule",
    "has_total_only",
    "has_total_only_groups",
    "suppress",
    "suppression_mask",
    "suppression_rule",
    "suppression_threshold",
]

EXEMPT_REGION_TYPES = frozenset({"USA", "STATE", "PR-STATE"})
"""Geographies whose totals are never suppressed (production's exclusion list)."""
TOTAL_ONLY = -1
"""``STAT_LEVEL`` of a TotalOnly group (one total with the group's whole share)."""
STAGE2_TOTAL = 0
"""``STAT_LEVEL`` of a group whose stage 2 is a new total."""


def _as_chance(chance: Fraction | float | str | None) -> Fraction:
    """``zero_suppression_chance`` as an exact rational in [0, 1) (a float is read as the
    decimal it prints as: 0.9999 is 9999/10000, as in ``config.json``)."""
    if chance is None:
        return Fraction(0)
    value = Fraction(repr(chance)) if isinstance(chance, float) else Fraction(chance)
    if not 0 <= value < 1:
        raise ValueError(f"zero_suppression_chance must lie in [0, 1), got {chance!r}")
    return value


def _law(mechanism: NoiseMechanism) -> DiscreteGaussianLaw | DiscreteLaplaceLaw:
    if isinstance(mechanism, DiscreteGaussian | Geometric):
        return mechanism.law
    raise TypeError(
        f"zero suppression needs a discrete Gaussian or geometric noise law, got {mechanism!r}"
    )


def suppression_threshold(
    noise: StagePlan | NoiseMechanism,
    chance: Fraction | float | str | None,
    *,
    noise_on: bool = True,
) -> int | None:
    """The smallest integer ``t`` with ``P(noise ≤ t) ≥ chance`` for ``noise``'s law, or
    ``None`` when suppression is off (``chance`` 0 or ``None``). With ``noise_on=False``
    (a noise-free test run) the threshold is 0, as in production."""
    c = _as_chance(chance)
    if c == 0:
        return None
    if not noise_on:
        return 0
    mech = noise if isinstance(noise, NoiseMechanism) else noise.mechanism
    return exact_quantile(_law(mech), c)


def exact_quantile(law: DiscreteGaussianLaw | DiscreteLaplaceLaw, c: Fraction) -> int:
    """The smallest integer ``t`` with ``P(noise ≤ t) ≥ c`` for a rational ``0 < c < 1``,
    decided exactly (:meth:`cdf_ge`) for every ``c`` — also one a float cannot hold, such
    as ``1 − 10⁻²⁰``: a galloping then bisecting search between two certified bounds from
    the law's closed-form tail (``O(log)`` exact decisions, whatever the scale), started
    at a float guess."""
    # P(X ≤ hi) ≥ 1 − P(|X| > hi) ≥ c, and P(X ≤ lo) ≤ P(|X| > −lo − 1)/2 ≤ c/2 < c
    hi = law.tail_index(1 - c)
    lo = -law.tail_index(c) - 1
    q = float(c)
    guess = hi if not 0 < q < 1 else int(np.asarray(law.quantile(q)).item())
    start = min(max(guess, lo + 1), hi) - lo
    return lo + smallest_true(lambda m: law.cdf_ge(lo + m, c), start, hi - lo)


@dataclass(frozen=True)
class SuppressionRule:
    """Production's zero suppression for one population-group level.

    ``stage2_total`` / ``total_only`` are the thresholds of the two kinds of totals that
    may be dropped (``None``: that kind is never dropped at this level — the geography is
    exempt, or suppression is off).
    """

    level: str
    region_type: str
    chance: Fraction
    stage2_total: int | None
    total_only: int | None

    @property
    def active(self) -> bool:
        return self.stage2_total is not None or self.total_only is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "region_type": self.region_type,
            "zero_suppression_chance": float(self.chance),
            "zero_suppression_chance_exact": str(self.chance),
            "applies": self.active,
            "threshold_stage2_total": self.stage2_total,
            "threshold_total_only": self.total_only,
        }


def suppression_rule(
    plan: LevelPlan,
    chance: Fraction | float | str | None,
    *,
    noise_on: bool = True,
) -> SuppressionRule:
    """The rule of ``plan``'s level at ``chance`` (production: the config's
    ``zero_suppression_chance``; 0 or ``None`` = off)."""
    c = _as_chance(chance)
    exempt = plan.geo in EXEMPT_REGION_TYPES
    on = c > 0 and not exempt
    totals = on and has_total_only(plan)
    return SuppressionRule(
        level=plan.key,
        region_type=plan.geo,
        chance=c,
        stage2_total=suppression_threshold(plan.stage2, c, noise_on=noise_on) if on else None,
        total_only=suppression_threshold(plan.total, c, noise_on=noise_on) if totals else None,
    )


def has_total_only(plan: LevelPlan) -> bool:
    """Whether the level can hold TotalOnly groups: detailed-only iterations at a detailed
    geography (USA, STATE, PR-STATE); a level of a model plan (not a Census geography)
    whenever it has detailed-only iterations."""
    return has_total_only_groups(plan.geo, plan.has_detailed_only)


def has_total_only_groups(geo: str, has_detailed_only: bool) -> bool:
    """:func:`has_total_only` from a level's geography and ``has_detailed_only`` (e.g.
    read from a plan in ``release.json``)."""
    from privtab.data import GeoLevel
    from privtab.data.levels import Granularity

    try:
        detailed = GeoLevel(geo).granularity is Granularity.DETAILED
    except ValueError:
        detailed = True
    return detailed and bool(has_detailed_only)


def suppression_mask(
    counts: ArrayLike, stat_levels: ArrayLike, rule: SuppressionRule
) -> NDArray[np.bool_]:
    """Which T1 rows the rule drops, from their *unclamped* noisy counts and statistic
    levels (``-1`` TotalOnly, ``0`` stage-2 total, ``1..3`` sums of cells)."""
    c = np.asarray(counts, dtype=np.int64)
    s = np.asarray(stat_levels, dtype=np.int64)
    if c.shape != s.shape:
        raise ValueError(f"counts {c.shape} and stat_levels {s.shape} differ in shape")
    drop = np.zeros(c.shape, dtype=np.bool_)
    if rule.stage2_total is not None:
        drop |= (s == STAGE2_TOTAL) & (c <= rule.stage2_total)
    if rule.total_only is not None:
        drop |= (s == TOTAL_ONLY) & (c <= rule.total_only)
    return drop


@dataclass(frozen=True)
class SuppressionResult:
    """The T1 rows kept and how many were dropped (the dropped rows are not kept anywhere)."""

    t1: pl.DataFrame
    removed: int


def suppress(t1: pl.DataFrame, rule: SuppressionRule) -> SuppressionResult:
    """Apply ``rule`` to a level's T1 frame (columns ``COUNT`` — the noisy count *before*
    clamping — and ``STAT_LEVEL``). Every row of the frame must belong to the rule's level
    (its ``REGION_TYPE`` is the rule's, checked). Post-processing: no privacy cost."""
    if not rule.active or t1.height == 0:
        return SuppressionResult(t1, 0)
    if "REGION_TYPE" in t1.columns:
        types = set(t1["REGION_TYPE"].unique().to_list())
        if types != {rule.region_type}:
            raise ValueError(
                f"suppress: rule of level {rule.level} applied to REGION_TYPE {sorted(types)}"
            )
    drop = suppression_mask(t1["COUNT"].to_numpy(), t1["STAT_LEVEL"].to_numpy(), rule)
    removed = int(drop.sum())
    if removed == 0:
        return SuppressionResult(t1, 0)
    return SuppressionResult(t1.filter(pl.Series(~drop)), removed)
