"""Release parameters whose noise privtab cannot draw, or whose noise alone would fill memory.

A config can be valid key by key and still ask for something no run can deliver. Both
cases are refused by :func:`check_noise_limits` when the inputs are read — from the config,
the reference files and the GRF-C only (public facts, never the person file), before a
ledger reservation, staging folder or noise draw:

* **A per-count parameter outside the exact samplers' range.** A level with budget ``b``,
  stage-1 fraction ``γ`` and stability ``s`` draws noise with the per-count parameters
  ``γ·b/s`` (stage 1), ``(1−γ)·b/s`` (stage 2) and ``b/s`` (TotalOnly groups). Each must lie
  in the range of :mod:`privtab.mechanisms.ranges` (zCDP: ρ ≥ 2⁻⁸⁹, i.e. σ ≤ 2⁴⁴; pure DP:
  ε ≥ 2⁻⁵⁴), e.g. ``privacy_budget_p_stage_1_fraction`` = 1e-30 is refused naming the key.
* **Noise that alone publishes absurd tables.** Stage 1 decides from a group's noisy total
  how many Sex × Age cells its stage 2 publishes (0, 8, 18 or 46 at the thresholds θ₁ < θ₂
  < θ₃). Almost every group of a level is empty, so when the stage-1 noise is large against
  θ₁ about half the groups of the level get 46 cells *from the noise alone*:
  ``privacy_budget_p_stage_1_fraction`` = 1e-20 on 300 persons put 1.6·10⁸ cells into one
  array (6.95 GB, 63 s). The expected number of such cells,

      Σ over levels of G · (8·P(N ≥ θ₁) + 10·P(N ≥ θ₂) + 28·P(N ≥ θ₃))

  (``G`` the level's groups that draw a stage-1 total, ``N`` the stage-1 noise of an empty
  group; a tail of the normal law for the discrete Gaussian, the exact tail of the discrete
  Laplace), is a fact of the public plan. Above :data:`MAX_NOISE_T2_CELLS` the run is
  refused with the levels that contribute most — far above any sensible plan (the 2020
  production plan expects fewer than one such cell in the whole nation) and below what
  would exhaust a machine.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Literal

from privtab.data.config import STAGE_1_KEY, SafeTabConfig, budget_key, threshold_key
from privtab.data.errors import Problem, ProblemLog
from privtab.data.geography import Geography
from privtab.data.iterations import ReferenceData
from privtab.data.levels import GeoLevel, Granularity
from privtab.data.stability import level_stability

__all__ = ["MAX_NOISE_T2_CELLS", "check_noise_limits", "noise_only_t2_cells"]

MAX_NOISE_T2_CELLS = 10**7
"""The most T2 cells the stage-1 noise alone may be expected to open in a release (about
0.5 GB of working memory and 0.4 GB of T2 text); see the module docstring."""
CELLS_ADDED = (8, 10, 28)
"""Cells a group gains at each threshold: Sex × Age4 (8), × Age9 (18), × Age23 (46)."""


@dataclass(frozen=True)
class _Level:
    geo: GeoLevel
    iteration_level: int
    budget: Fraction
    stability: int
    stage1_groups: int
    """Groups of the level that draw a stage-1 total (all but its TotalOnly groups)."""

    @property
    def key(self) -> str:
        return threshold_key(self.geo, self.iteration_level)


def _levels(cfg: SafeTabConfig, ref: ReferenceData, geo: Geography) -> Iterator[_Level]:
    """Every level that draws noise: a positive budget and a non-empty public domain."""
    for scope in cfg.scopes:
        for g, lv in cfg.levels(scope):
            budget = cfg.budget(g, lv)
            its = ref.select(lv, g.granularity)
            regions = len(geo.domain(g))
            if budget == 0 or not its or not regions:
                continue
            detailed = g.granularity is Granularity.DETAILED
            total_only = sum(1 for i in its if detailed and i.detailed_only)
            stab = level_stability(ref, cfg.max_race_codes, lv, g.granularity).value
            yield _Level(g, lv, budget, stab, regions * (len(its) - total_only))


def _tail(cfg: SafeTabConfig, parameter: Fraction, threshold: int) -> float:
    """``P(N ≥ threshold)`` for the per-count noise of ``parameter`` (an estimate for the
    discrete Gaussian: the normal tail with a continuity correction; exact for the
    discrete Laplace)."""
    if cfg.privacy_defn == "zcdp":
        sigma = math.sqrt(float(1 / (2 * parameter)))
        return 0.5 * math.erfc((threshold - 0.5) / (sigma * math.sqrt(2)))
    r = math.exp(-float(parameter))  # the discrete Laplace of scale 1/ε: P(X = x) ∝ r^|x|
    if threshold >= 1:
        return r**threshold / (1 + r)
    return 1 - r ** (1 - threshold) / (1 + r)


def noise_only_t2_cells(cfg: SafeTabConfig, ref: ReferenceData, geo: Geography) -> dict[str, float]:
    """Per level (``"(GEO, level)"``), the expected number of T2 cells that stage-1 noise
    alone opens in empty groups (see the module docstring)."""
    out: dict[str, float] = {}
    for lv in _levels(cfg, ref, geo):
        stage1 = cfg.stage_1_fraction * lv.budget / lv.stability
        thresholds = cfg.threshold(lv.geo, lv.iteration_level)
        per_group = sum(
            k * _tail(cfg, stage1, int(t)) for k, t in zip(CELLS_ADDED, thresholds, strict=True)
        )
        out[lv.key] = lv.stage1_groups * per_group
    return out


def check_noise_limits(
    cfg: SafeTabConfig, ref: ReferenceData, geo: Geography, config_path: Path, log: ProblemLog
) -> None:
    """Add a problem for every per-count parameter outside the samplers' range and, if they
    are all in range, one when the noise alone would open more than
    :data:`MAX_NOISE_T2_CELLS` T2 cells (see the module docstring)."""
    from privtab.mechanisms.ranges import check_noise_parameter

    source = str(config_path)
    kind: Literal["rho", "epsilon"] = "rho" if cfg.privacy_defn == "zcdp" else "epsilon"
    bad = False
    for lv in _levels(cfg, ref, geo):
        per_group = lv.budget / lv.stability
        budget = budget_key(lv.geo, lv.iteration_level)
        stages = [
            ("stage-1", STAGE_1_KEY, cfg.stage_1_fraction * per_group),
            ("stage-2", budget, (1 - cfg.stage_1_fraction) * per_group),
            ("TotalOnly", budget, per_group),
        ]
        for stage, key, parameter in stages:
            try:
                check_noise_parameter(kind, parameter)
            except ValueError as exc:
                bad = True
                log.add(
                    Problem(
                        source,
                        "unsupported_noise",
                        f"level {lv.key} (stability {lv.stability}): its {stage} noise cannot "
                        f"be drawn exactly: per-count {exc}",
                        column=key,
                    )
                )
                break
    if bad:
        return
    cells = noise_only_t2_cells(cfg, ref, geo)
    total = sum(cells.values())
    if total <= MAX_NOISE_T2_CELLS:
        return
    worst = sorted(cells, key=lambda k: -cells[k])[:3]
    shown = ", ".join(f"{k} ≈ {cells[k]:.3g}" for k in worst)
    log.add(
        Problem(
            source,
            "noise_too_large",
            f"the stage-1 noise alone would lift empty population groups over the thresholds "
            f"and publish about {total:.3g} T2 cells whatever the data (largest: {shown}), "
            f"more than the limit of {MAX_NOISE_T2_CELLS:,} (a run would need memory and "
            "output in proportion); raise privacy_budget_p_stage_1_fraction or the level "
            "budgets, or the thresholds_p of those levels",
            column=STAGE_1_KEY,
            value=f"{float(cfg.stage_1_fraction):g}",
        )
    )
