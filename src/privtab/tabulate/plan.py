"""Release plans for SafeTab-P: per population-group level, the noise of every statistic.

A population-group level *i* is a geography level × an iteration level (SafeTab seed §2;
the 2020 production config has 12 for the US run and 8 for Puerto Rico). Each level has a
budget ``b_i`` (ρ_i under zCDP with discrete Gaussian noise, ε_i under pure DP with
geometric noise), a stage-1 fraction γ, three thresholds and a stability ``s_i`` (the most
population groups of the level one person can be in — from the reference files and
``max_race_codes``, never from the data). By the generalized parallel composition of the
seed (Lemmas 9, 10, 12) every population group may spend ``b_i/s_i``:

* stage 1 (non-detailed-only iterations): a noisy total with ``γ·b_i/s_i``;
* stage 2: a new total (stat level 0) or Sex × Age cells with ``(1−γ)·b_i/s_i``
  (each person is in one cell of a group's table, so each cell gets that parameter);
* detailed-only iterations ("TotalOnly"): one noisy total with ``b_i/s_i``.

Budgets can also be *calibrated* from 95 % margin-of-error targets for the stage-2
statistics (seed App. F.1): exactly (the smallest parameter whose exact MOE meets the
target, :mod:`privtab.mechanisms.calibration`) or with the paper's closed forms
(ε = ln 20/(⌊M⌋+1), ρ = 1.92/⌊M⌋², selectable to reproduce its Tables 1, 2 and 4; the
geometric one is off by one — seed-checks README item 3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privtab.accounting import ExactGuarantee, Guarantee
from privtab.mechanisms.counts import NOISE_OF

if TYPE_CHECKING:
    from privtab.data import ReferenceData, SafeTabConfig, Scope
    from privtab.mechanisms import NoiseMechanism

__all__ = ["LevelPlan", "ReleasePlan", "StagePlan", "config_scope"]

PrivacyDefn = Literal["zcdp", "puredp"]
Stage = Literal["stage1", "stage2", "total"]
Calibration = Literal["exact", "paper"]


@dataclass(frozen=True)
class StagePlan:
    """One kind of noisy count within a level and its exact error.

    ``parameter`` is the per-count ρ_q (zCDP) or ε_q (pure DP); ``noise_scale`` is σ² of the
    discrete Gaussian or the scale b = 1/ε_q of the geometric noise (pmf ∝ e^{−|x|/b}).
    """

    stage: Stage
    noise: Literal["discrete_gaussian", "geometric"]
    parameter: Fraction
    mechanism: NoiseMechanism = field(compare=False, repr=False)
    noise_scale: float = 0.0
    variance: float = 0.0
    moe95: int = 0

    @classmethod
    def build(cls, stage: Stage, privacy_defn: PrivacyDefn, parameter: Fraction) -> StagePlan:
        """The stage's mechanism (:class:`privtab.mechanisms.counts.CountNoise`) and its
        exact error; ``ValueError`` naming the stage if the parameter is not supported."""
        from privtab.mechanisms.counts import CountNoise

        if parameter <= 0:
            raise ValueError(f"{stage} parameter must be positive, got {parameter}")
        try:
            count = CountNoise.build(privacy_defn, parameter)
        except ValueError as exc:
            raise ValueError(f"{stage}: per-count {exc}") from exc
        return cls(
            stage=stage,
            noise=count.noise,
            parameter=parameter,
            mechanism=count.mechanism,
            noise_scale=count.noise_scale,
            variance=count.variance,
            moe95=count.moe95,
        )

    def to_dict(self) -> dict[str, Any]:
        from privtab.mechanisms.counts import CountNoise

        count = CountNoise(
            self.noise,
            self.parameter,
            self.mechanism,
            self.noise_scale,
            self.variance,
            self.moe95,
        )
        return {"stage": self.stage, **count.to_dict()}


@dataclass(frozen=True)
class LevelPlan:
    """The plan of one population-group level (geography × iteration level)."""

    geo: str
    iteration_level: int
    privacy_defn: PrivacyDefn
    budget: Fraction
    gamma: Fraction
    thresholds: tuple[int, int, int]
    stability: int
    has_detailed_only: bool
    stage1: StagePlan
    stage2: StagePlan
    total: StagePlan

    @property
    def key(self) -> str:
        """The config-style name, e.g. ``(STATE, 2)``."""
        return f"({self.geo}, {self.iteration_level})"

    @classmethod
    def build(
        cls,
        *,
        geo: str,
        iteration_level: int,
        privacy_defn: PrivacyDefn,
        budget: Fraction,
        gamma: Fraction,
        thresholds: Sequence[int | Fraction],
        stability: int,
        has_detailed_only: bool = True,
    ) -> LevelPlan:
        """A level's plan from its budget: per-group ``b/s`` split γ / (1−γ)."""
        if privacy_defn not in NOISE_OF:
            raise ValueError(f"privacy_defn must be 'zcdp' or 'puredp', got {privacy_defn!r}")
        if budget <= 0:
            raise ValueError(f"level {geo} {iteration_level}: budget must be positive")
        if not 0 < gamma < 1:
            raise ValueError(f"gamma must lie strictly between 0 and 1, got {gamma}")
        if int(stability) != stability or stability < 1:
            raise ValueError(f"stability must be a positive integer, got {stability!r}")
        th = tuple(int(Fraction(t)) for t in thresholds)
        if len(th) != 3 or not th[0] < th[1] < th[2]:
            raise ValueError(f"thresholds must be three increasing numbers, got {thresholds!r}")
        per_group = Fraction(budget) / int(stability)
        try:
            stages = (
                StagePlan.build("stage1", privacy_defn, gamma * per_group),
                StagePlan.build("stage2", privacy_defn, (1 - gamma) * per_group),
                StagePlan.build("total", privacy_defn, per_group),
            )
        except ValueError as exc:
            raise ValueError(f"level ({geo}, {iteration_level}): {exc}") from exc
        return cls(
            geo=geo,
            iteration_level=iteration_level,
            privacy_defn=privacy_defn,
            budget=Fraction(budget),
            gamma=Fraction(gamma),
            thresholds=(th[0], th[1], th[2]),
            stability=int(stability),
            has_detailed_only=has_detailed_only,
            stage1=stages[0],
            stage2=stages[1],
            total=stages[2],
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LevelPlan:
        """Rebuild a level from :meth:`to_dict` output (exact fields preferred)."""
        try:
            return cls.build(
                geo=str(d["geo"]),
                iteration_level=int(d["iteration_level"]),
                privacy_defn=d["privacy_defn"],
                budget=Fraction(str(d.get("budget_exact", d["budget"]))),
                gamma=Fraction(str(d.get("gamma_exact", d["gamma"]))),
                thresholds=[int(t) for t in d["thresholds"]],
                stability=int(d["stability"]),
                has_detailed_only=bool(d.get("has_detailed_only", True)),
            )
        except KeyError as exc:
            raise ValueError(f"level description is missing the field {exc}") from exc

    def stat_level(self, stage1_counts: ArrayLike) -> NDArray[np.int8]:
        """Statistic level 0–3 of each group from its stage-1 noisy total (production's
        ``np.digitize(count, thresholds)``: below the first threshold → 0, …)."""
        levels = np.digitize(np.asarray(stage1_counts), self.thresholds)
        return np.asarray(levels, dtype=np.int8)

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": self.key,
            "geo": self.geo,
            "iteration_level": self.iteration_level,
            "privacy_defn": self.privacy_defn,
            "budget": float(self.budget),
            "budget_exact": str(self.budget),
            "gamma": float(self.gamma),
            "gamma_exact": str(self.gamma),
            "thresholds": list(self.thresholds),
            "stability": self.stability,
            "has_detailed_only": self.has_detailed_only,
            "stage1": self.stage1.to_dict(),
            "stage2": self.stage2.to_dict(),
            "total": self.total.to_dict(),
        }


def config_scope(config: SafeTabConfig, text: str) -> Scope:
    """The run of ``config`` that ``text`` names (``US`` or ``PR``, any case). Raises
    :class:`privtab.errors.UsageError` naming ``--scope`` when ``text`` is neither, or when
    the config does not make that run (``run_us``/``run_pr``)."""
    from privtab.data import Scope
    from privtab.errors import UsageError

    known = {s.value: s for s in Scope}
    if text.upper() not in known:
        raise UsageError(f"--scope must be US or PR, got {text!r}")
    if known[text.upper()] not in config.scopes:
        raise UsageError(f"the config does not run {text.upper()} (run_us/run_pr)")
    return known[text.upper()]


def _calibrate(moe: float, privacy_defn: PrivacyDefn, calibration: Calibration) -> Fraction:
    """Per-count stage-2 parameter meeting a 95 % MOE target (exact or the paper's)."""
    from privtab.mechanisms.calibration import (
        discrete_gaussian_rho_for_moe,
        geometric_epsilon_for_moe,
    )

    if privacy_defn == "zcdp":
        value = discrete_gaussian_rho_for_moe(moe, Fraction(19, 20), method=calibration)
    else:
        value = geometric_epsilon_for_moe(moe, Fraction(19, 20), method=calibration)
    return Fraction(value)


@dataclass(frozen=True)
class ReleasePlan:
    """All levels of a SafeTab-P run (zero-budget levels omitted, as in production)."""

    privacy_defn: PrivacyDefn
    levels: tuple[LevelPlan, ...]
    source: str = ""

    def __post_init__(self) -> None:
        if not self.levels:
            raise ValueError("a release plan needs at least one level with a positive budget")
        if any(lv.privacy_defn != self.privacy_defn for lv in self.levels):
            raise ValueError("all levels of a plan must use the plan's privacy definition")

    @classmethod
    def from_config(
        cls, config: SafeTabConfig, reference: ReferenceData, scope: Scope
    ) -> ReleasePlan:
        """The plan of one run (US or PR) of a validated config and its reference files."""
        from privtab.data.stability import level_stability

        levels = []
        for geo, lv in config.levels(scope):
            budget = config.budget(geo, lv)
            if budget == 0:
                continue
            stab = level_stability(reference, config.max_race_codes, lv, geo.granularity)
            its = reference.select(lv, geo.granularity)
            levels.append(
                LevelPlan.build(
                    geo=geo.value,
                    iteration_level=lv,
                    privacy_defn=config.privacy_defn,
                    budget=budget,
                    gamma=config.stage_1_fraction,
                    thresholds=config.threshold(geo, lv),
                    stability=stab.value,
                    has_detailed_only=any(bool(i.detailed_only) for i in its),
                )
            )
        return cls(config.privacy_defn, tuple(levels), source=f"{config.source} [{scope}]")

    @classmethod
    def from_moe_targets(
        cls,
        moes: Sequence[float],
        *,
        stability: int,
        gamma: Fraction | float,
        privacy_defn: PrivacyDefn,
        calibration: Calibration = "exact",
        thresholds: Sequence[int] = (1, 2, 3),
    ) -> ReleasePlan:
        """The SafeTab paper's simplified model (App. F): one level per stage-2 MOE target.

        Each level's stage-2 parameter is calibrated to its target; its budget is
        ``s · p₂ / (1 − γ)``. Every level may hold TotalOnly groups (seed Theorem 2).
        """
        g = Fraction(gamma)
        levels = []
        for i, m in enumerate(moes, start=1):
            p2 = _calibrate(m, privacy_defn, calibration)
            levels.append(
                LevelPlan.build(
                    geo=f"L{i}",
                    iteration_level=0,
                    privacy_defn=privacy_defn,
                    budget=int(stability) * p2 / (1 - g),
                    gamma=g,
                    thresholds=thresholds,
                    stability=stability,
                    has_detailed_only=True,
                )
            )
        return cls(privacy_defn, tuple(levels), source=f"MOE targets {list(moes)} ({calibration})")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReleasePlan:
        """Rebuild a plan from :meth:`to_dict` output (e.g. a release.json's ``plan``)."""
        if "levels" not in d or "privacy_defn" not in d:
            raise ValueError("a plan needs 'privacy_defn' and 'levels'")
        levels = tuple(LevelPlan.from_dict(lv) for lv in d["levels"])
        return cls(d["privacy_defn"], levels, source=str(d.get("source", "")))

    @property
    def total_budget(self) -> Fraction:
        return sum((lv.budget for lv in self.levels), Fraction(0))

    def guarantee(self) -> Guarantee:
        """ZCDP(Σρ_i) or PureDP(Σε_i) (seed Theorems 1 and 3), the float rounded up."""
        return self.exact_guarantee().to_guarantee()

    def exact_guarantee(self) -> ExactGuarantee:
        """The plan's guarantee, exactly: Σρ_i (zCDP) or Σε_i (pure DP)."""
        return ExactGuarantee("zcdp" if self.privacy_defn == "zcdp" else "pure", self.total_budget)

    def level(self, key: str) -> LevelPlan:
        for lv in self.levels:
            if lv.key == key:
                return lv
        raise KeyError(f"no level {key!r} in the plan; levels: {[lv.key for lv in self.levels]}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "privacy_defn": self.privacy_defn,
            "source": self.source,
            "total_budget": float(self.total_budget),
            "total_budget_exact": str(self.total_budget),
            "levels": [lv.to_dict() for lv in self.levels],
        }

    def budgets(self) -> Mapping[str, Fraction]:
        return {lv.key: lv.budget for lv in self.levels}
