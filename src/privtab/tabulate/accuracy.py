"""The accuracy report of a SafeTab-P plan, exactly: what a group of true size n gets.

The Bureau tuned SafeTab-P by simulation (``accuracy_report.py``: several noisy runs on a
synthetic nation, then per size bucket the workload each group received and the 95th
percentile of the absolute error). Every one of those figures is a function of n and the
plan's noise laws, so privtab computes them exactly — no run, no data:

* **workload** (SafeTab seed Alg. 2): the stage-1 noisy total ``n + e₁`` is compared with
  θ1 < θ2 < θ3 (``np.digitize``): ``P(total | n) = F₁(θ1 − n − 1)``,
  ``P(Sex×Age4 | n) = F₁(θ2 − n − 1) − F₁(θ1 − n − 1)``, …, ``P(Sex×Age23 | n) =
  1 − F₁(θ3 − n − 1)``, where ``F₁`` is the CDF of the stage-1 noise;
* **suppression** (production's zero suppression, :mod:`privtab.tabulate.suppression`): a
  group whose workload is a total is dropped when ``n + e₂ ≤ t``; stage 1 and stage 2
  draw independent noise, so ``P(suppressed | n) = P(total | n) · F₂(t − n)``;
* **MOE** of each row, per stage-2 outcome: a total has the exact 95 % MOE of one
  stage-2 draw; the T1 row of a group with cells is the sum of its ``k`` cells (8, 18, 46:
  the MOE of the ``k``-fold convolution); a T2 cell has the MOE of one draw and a sex
  marginal that of ``k/2`` draws (:func:`privtab.mechanisms.counts.count_error`). Each
  outcome's MOE is reported with its probability ``P(w | n)``. Where one number is wanted
  for the T1 row of a group of size n whose outcome is not known, it is the **quantile of
  the mixture** — the smallest m with ``Σ_w P(w | n)·P(|E_w| ≤ m) ≥ 0.95`` — named as
  such (``moe95_t1_mixture``), never the probability-weighted average of the outcomes'
  MOEs, which is the margin of error of nothing (issue 31);
* **expected published rows** of a group: T1 ``1 − P(suppressed | n)``; T2
  ``Σ_w P(w | n)·(k_w + 2)`` (cells plus two sex marginals).

TotalOnly groups (detailed-only iterations at USA/STATE/PR-STATE) get one total with the
whole per-group share: MOE of one draw of ``plan.total``, never suppressed there.

Accuracy: ``F`` is the cumulative sum of privtab's exact pmf (:mod:`privtab.mechanisms.
laws`, normaliser to 120 bits) over a support holding all but 10⁻¹⁸ of the mass: every
probability is within ~10⁻¹³ of the exact value (tests: an independent scipy/mpmath
computation to 10⁻⁹, and Monte Carlo). Nothing here reads data: the report is public.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privtab.mechanisms import DiscreteGaussian, Geometric, LinearNoise, NoiseMechanism
from privtab.mechanisms.counts import LEVEL, count_error
from privtab.mechanisms.laws import smallest_true
from privtab.tabulate.plan import LevelPlan
from privtab.tabulate.suppression import SuppressionRule, has_total_only, suppression_rule

__all__ = [
    "CELLS",
    "WORKLOADS",
    "LevelAccuracy",
    "NoiseCDF",
    "bucket_label",
    "level_accuracy",
    "size_bucket",
]

WORKLOADS = ("total", "sex_age4", "sex_age9", "sex_age23")
"""The workload of each statistic level 0..3 (the Bureau's "Total", "Sex x Age(4)", …)."""
CELLS = {"total": 0, "sex_age4": 8, "sex_age9": 18, "sex_age23": 46}
"""T2 cells of each workload (two sexes × the age bins)."""
_TAIL = Fraction(1, 10**18)
_MARGIN = 1e-9
"""Margin of the mixture-quantile decision: a coverage computed to ~10⁻¹³ must exceed
0.95 by this much, so the quantile is never understated."""


class NoiseCDF:
    """``F(x) = P(noise ≤ x)`` at any integers, vectorised, from a mechanism's exact pmf."""

    def __init__(self, mechanism: NoiseMechanism) -> None:
        if not isinstance(mechanism, DiscreteGaussian | Geometric):
            raise TypeError(f"needs a discrete Gaussian or geometric mechanism, got {mechanism!r}")
        law = mechanism.law
        self.half = int(law.moe_index(1 - _TAIL)) + 1
        xs = np.arange(-self.half, self.half + 1)
        pmf = np.asarray(law.pmf(xs), dtype=np.float64)
        self.pmf = pmf
        self._cdf = np.cumsum(pmf)
        self._cdf /= self._cdf[-1]

    def __call__(self, x: ArrayLike) -> NDArray[np.float64]:
        idx = np.asarray(x, dtype=np.int64) + self.half
        values = self._cdf[np.clip(idx, 0, 2 * self.half)]
        return np.where(idx < 0, 0.0, values)

    def mass_between(self, lo: ArrayLike, hi: ArrayLike) -> NDArray[np.float64]:
        """``P(lo ≤ noise ≤ hi)`` (0 where ``hi < lo``)."""
        lo_a = np.asarray(lo, dtype=np.int64)
        hi_a = np.asarray(hi, dtype=np.int64)
        return np.where(hi_a < lo_a, 0.0, np.maximum(self(hi_a) - self(lo_a - 1), 0.0))


@dataclass(frozen=True)
class LevelAccuracy:
    """Exact accuracy figures of one population-group level of a plan."""

    plan: LevelPlan
    rule: SuppressionRule
    scope: str = ""
    total_only: bool = True
    """Whether the level has TotalOnly groups (detailed-only iterations at a detailed
    geography)."""

    @cached_property
    def stage1(self) -> NoiseCDF:
        return NoiseCDF(self.plan.stage1.mechanism)

    @cached_property
    def stage2(self) -> NoiseCDF:
        return NoiseCDF(self.plan.stage2.mechanism)

    @cached_property
    def total(self) -> NoiseCDF:
        return NoiseCDF(self.plan.total.mechanism)

    # -- probabilities ----------------------------------------------------------------------
    def p_workload(self, n: ArrayLike) -> NDArray[np.float64]:
        """``P(workload | n)`` for each n (rows) and workload of :data:`WORKLOADS` (columns)."""
        na = np.asarray(n, dtype=np.int64)
        th = np.asarray(self.plan.thresholds, dtype=np.int64)
        below = self.stage1(th[None, :] - na[..., None] - 1)  # P(n + e1 < θ_j)
        ones = np.ones((*na.shape, 1))
        zeros = np.zeros((*na.shape, 1))
        cum = np.concatenate([zeros, below, ones], axis=-1)
        return np.clip(np.diff(cum, axis=-1), 0.0, 1.0)

    def p_suppressed(self, n: ArrayLike) -> NDArray[np.float64]:
        """``P(the group's T1 row is dropped | n)`` (an adaptive group)."""
        na = np.asarray(n, dtype=np.int64)
        if self.rule.stage2_total is None:
            return np.zeros(na.shape)
        return self.p_workload(na)[..., 0] * self.stage2(self.rule.stage2_total - na)

    def p_suppressed_total_only(self, n: ArrayLike) -> NDArray[np.float64]:
        """``P(dropped | n)`` of a TotalOnly group (0 unless its geography is sub-state)."""
        na = np.asarray(n, dtype=np.int64)
        if self.rule.total_only is None:
            return np.zeros(na.shape)
        return self.total(self.rule.total_only - na)

    def p_total_published_within(self, n: ArrayLike, m: int) -> NDArray[np.float64]:
        """``P(workload total, published, |error| ≤ m | n)``: the stage-2 total's error
        given that the group was not suppressed (for comparing simulated MOEs)."""
        na = np.asarray(n, dtype=np.int64)
        lo = (
            -m
            if self.rule.stage2_total is None
            else np.maximum(-m, self.rule.stage2_total - na + 1)
        )
        return self.p_workload(na)[..., 0] * self.stage2.mass_between(lo, m)

    # -- margins of error -------------------------------------------------------------------
    @cached_property
    def moe95(self) -> dict[str, Any]:
        """Exact 95 % MOEs: T1 per workload (a total, or the sum of the cells), a T2 cell,
        a T2 sex marginal per workload, the stage-1 total and a TotalOnly total."""
        mech = self.plan.stage2.mechanism
        t1 = {"total": self.plan.stage2.moe95}
        marg = {}
        for w in WORKLOADS[1:]:
            t1[w] = count_error(mech, CELLS[w]).moe95
            marg[w] = count_error(mech, CELLS[w] // 2).moe95
        return {
            "t1": t1,
            "t2_cell": self.plan.stage2.moe95,
            "t2_marginal": marg,
            "stage1": self.plan.stage1.moe95,
            "total_only": self.plan.total.moe95,
        }

    @cached_property
    def _t1_coverage(self) -> dict[str, Callable[[int], float]]:
        """``m ↦ P(|E_w| ≤ m)`` of the T1 row's error for each outcome ``w`` (one stage-2
        draw for a total; the ``k``-fold sum of the cells otherwise), cached per m."""
        mech = self.plan.stage2.mechanism
        out: dict[str, Callable[[int], float]] = {
            "total": lru_cache(maxsize=None)(lambda m: float(mech.law.coverage(m)))
        }
        for w in WORKLOADS[1:]:
            law = LinearNoise([(1, mech)] * CELLS[w])
            out[w] = lru_cache(maxsize=None)(law.central_mass)
        return out

    def moe95_t1_mixture(self, n: ArrayLike) -> NDArray[np.int64]:
        """The 95 % margin of error of the T1 row of a group of size n whose outcome is not
        known: the 0.95-quantile of ``|error|`` over the mixture of outcomes, the smallest m
        with ``Σ_w P(w | n)·P(|E_w| ≤ m) ≥ 0.95`` (decided with a 10⁻⁹ margin, so never
        below the exact quantile: the coverages are accurate to ~10⁻¹³). It lies between
        the smallest and the largest outcome MOE with positive probability."""
        na = np.atleast_1d(np.asarray(n, dtype=np.int64))
        pw = self.p_workload(na)
        per = [self.moe95["t1"][w] for w in WORKLOADS]
        cover = self._t1_coverage
        out = np.empty(na.shape, dtype=np.int64)
        for i in np.ndindex(na.shape):
            p = pw[i]
            live = [j for j in range(len(WORKLOADS)) if p[j] > 0]

            def enough(m: int, p: NDArray[np.float64] = p, live: list[int] = live) -> bool:
                mass = math.fsum(p[j] * cover[WORKLOADS[j]](m) for j in live)
                return mass >= float(LEVEL) + _MARGIN

            top = max(per[j] for j in live)
            out[i] = smallest_true(enough, min(per[j] for j in live), top)
        return out.reshape(np.shape(n))

    def expected_rows(self, n: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Expected published (T1, T2) rows of an adaptive group of size n."""
        p = self.p_workload(n)
        t2_rows = np.array([0.0] + [CELLS[w] + 2.0 for w in WORKLOADS[1:]])
        return 1.0 - self.p_suppressed(n), p @ t2_rows

    # -- report ---------------------------------------------------------------------------
    def rows(self, n: ArrayLike) -> list[dict[str, Any]]:
        """One JSON row per n (the ``privtab safetab accuracy`` contract)."""
        na = np.atleast_1d(np.asarray(n, dtype=np.int64))
        pw = self.p_workload(na)
        ps = self.p_suppressed(na)
        mixture = self.moe95_t1_mixture(na)
        r1, r2 = self.expected_rows(na)
        pto = self.p_suppressed_total_only(na)
        out = []
        for i, nv in enumerate(na.tolist()):
            row: dict[str, Any] = {
                "n": int(nv),
                "p_workload": {w: float(pw[i, j]) for j, w in enumerate(WORKLOADS)},
                "p_suppressed": float(ps[i]),
                "p_published": float(1.0 - ps[i]),
                "moe95_t1": {
                    w: {"moe95": self.moe95["t1"][w], "p": float(pw[i, j])}
                    for j, w in enumerate(WORKLOADS)
                },
                "moe95_t1_mixture": int(mixture[i]),
                "moe95_t2": {
                    w: {
                        "cell": self.moe95["t2_cell"],
                        "marginal": self.moe95["t2_marginal"][w],
                        "p": float(pw[i, j + 1]),
                    }
                    for j, w in enumerate(WORKLOADS[1:])
                },
                "expected_rows": {"t1": float(r1[i]), "t2": float(r2[i])},
            }
            if self.total_only:
                row["total_only"] = {
                    "moe95_t1": self.moe95["total_only"],
                    "p_suppressed": float(pto[i]),
                }
            out.append(row)
        return out

    def to_json(self, n: ArrayLike) -> dict[str, Any]:
        return {
            "level": self.plan.key,
            "scope": self.scope,
            "region_type": self.plan.geo,
            "iteration_level": self.plan.iteration_level,
            "thresholds": list(self.plan.thresholds),
            "noise": self.plan.stage2.noise,
            "noise_scale": {
                "stage1": self.plan.stage1.noise_scale,
                "stage2": self.plan.stage2.noise_scale,
                "total_only": self.plan.total.noise_scale,
            },
            "suppression": self.rule.to_json(),
            "moe95": self.moe95,
            "rows": self.rows(n),
        }


def level_accuracy(
    plan: LevelPlan,
    zero_suppression_chance: Fraction | float | str | None,
    *,
    scope: str = "",
) -> LevelAccuracy:
    """The exact accuracy figures of ``plan``'s level with production's zero suppression at
    ``zero_suppression_chance`` (0 or ``None``: off)."""
    rule = suppression_rule(plan, zero_suppression_chance)
    return LevelAccuracy(plan, rule, scope, has_total_only(plan))


def size_bucket(n: ArrayLike) -> NDArray[np.int64]:
    """The Bureau's size bucket of each n: 0 for [0, 1], j for (10^(j−1), 10^j]."""
    na = np.asarray(n, dtype=np.int64)
    out = np.zeros(na.shape, dtype=np.int64)
    edge = 1
    j = 0
    while True:
        above = na > edge
        if not above.any():
            return out
        j += 1
        out[above] = j
        edge *= 10


def bucket_label(j: int) -> str:
    """``[0, 1]``, ``(1, 10]``, ``(10, 100]``, …"""
    if j == 0:
        return "[0, 1]"
    return f"({10 ** (j - 1)}, {10**j}]"
