"""The plan of a SafeTab-P release: its levels, budgets and exact guarantee, before any data.

:func:`plan` reads a config (default: the packaged 2020 production parameters) and its
reference files and returns a :class:`Plan`: one :class:`privtab.tabulate.ReleasePlan` per
run (US, Puerto Rico). With ``geography`` (the GRF-C), levels whose public domain is empty
(no region or no iteration) are left out, exactly as a release leaves them out — then the
plan's :attr:`Plan.guarantee` is the guarantee a release of that geography states.

Privacy: a plan is computed from public parameters only (config, reference files, GRF-C).
The US and Puerto Rico runs hold disjoint persons, so the release satisfies the larger of
the runs' guarantees (parallel composition); each run the sum of its levels' budgets
(SafeTab seed Theorems 1 and 3, Lemmas 9 and 10).
"""

from __future__ import annotations

import html
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from privtab.accounting.exact import ExactGuarantee, exact_or_up

if TYPE_CHECKING:
    import polars as pl

    from privtab.data import Geography, ReferenceData, SafeTabConfig
    from privtab.safetab.inputs import InputSource
    from privtab.tabulate import ReleasePlan

__all__ = ["Plan", "describe_guarantee", "plan"]


def describe_guarantee(g: ExactGuarantee) -> str:
    """``ρ = 4.944 zCDP`` / ``ε = 19.2 pure DP``: the exact value when it is a short
    decimal, else rounded up (:func:`privtab.accounting.exact.exact_or_up`)."""
    if g.definition == "zcdp":
        return f"ρ = {exact_or_up(g.value)} zCDP"
    return f"ε = {exact_or_up(g.value)} pure DP"


def epsilon_words(epsilon: float, delta: float) -> str:
    """``ε ≤ 24.41 at δ = 1e-10``: the bound rounded up (4 significant digits)."""
    from privtab.report import round_up_sig

    return f"ε ≤ {round_up_sig(epsilon, 4)} at δ = {delta:.0e}"


@dataclass(frozen=True)
class Plan:
    """The levels and budgets of a release, run by run (``US``, ``PR``).

    ``runs`` maps a run to its :class:`privtab.tabulate.ReleasePlan`; ``source`` names the
    config. :attr:`budgets` and :attr:`guarantee` are exact (fractions).
    """

    runs: Mapping[str, ReleasePlan]
    source: str = ""

    @property
    def guarantee(self) -> ExactGuarantee:
        """The release's guarantee: the larger run's Σ budgets, exactly."""
        return ExactGuarantee.parallel(p.exact_guarantee() for p in self.runs.values())

    @property
    def budgets(self) -> dict[str, Fraction]:
        """``"US (COUNTY, 1)"`` → the level's budget (ρ or ε), exactly."""
        return {f"{s} {lv.key}": lv.budget for s, p in self.runs.items() for lv in p.levels}

    @property
    def privacy_defn(self) -> str:
        """``zcdp`` (discrete Gaussian noise) or ``puredp`` (geometric noise)."""
        return next(iter(self.runs.values())).privacy_defn

    def epsilon(self, delta: float = 1e-10) -> float:
        """ε such that the plan's guarantee implies (ε, δ)-DP (zCDP: the optimal
        conversion of Canonne, Kamath & Steinke 2020; pure DP: ε), rounded up."""
        from privtab.accounting import epsilon_at

        return epsilon_at(self.guarantee, delta)

    def to_frame(self) -> pl.DataFrame:
        """One row per level: run, level, budget, stability, thresholds and the exact 95 %
        margins of error of its noisy counts."""
        import polars as pl

        rows = [
            {
                "RUN": scope,
                "LEVEL": lv.key,
                "BUDGET": float(lv.budget),
                "STABILITY": lv.stability,
                "THRESHOLDS": list(lv.thresholds),
                "MOE95_STAGE1": lv.stage1.moe95,
                "MOE95_CELL": lv.stage2.moe95,
                "MOE95_TOTAL_ONLY": lv.total.moe95,
            }
            for scope, p in self.runs.items()
            for lv in p.levels
        ]
        return pl.DataFrame(rows)

    def __repr__(self) -> str:
        sizes = ", ".join(f"{s} {len(p.levels)}" for s, p in self.runs.items())
        n = sum(len(p.levels) for p in self.runs.values())
        return f"<privtab Plan: {describe_guarantee(self.guarantee)}, {n} levels ({sizes})>"

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{html.escape(s)}</td><td>{html.escape(lv.key)}</td>"
            f"<td style='text-align:right'>{exact_or_up(lv.budget)}</td>"
            f"<td style='text-align:right'>{lv.stability}</td>"
            f"<td style='text-align:right'>{lv.stage2.moe95}</td></tr>"
            for s, p in self.runs.items()
            for lv in p.levels
        )
        headline = html.escape(describe_guarantee(self.guarantee))
        return (
            f"<div><strong>SafeTab-P plan</strong>: {headline}"
            f" ({html.escape(epsilon_words(self.epsilon(), 1e-10))})<table><thead><tr><th>run</th>"
            "<th>level</th><th>budget</th><th>stability</th><th>cell MOE95</th></tr></thead>"
            f"<tbody>{rows}</tbody></table></div>"
        )


def config_path(config: str | Path | None) -> Path:
    """``config.json`` from a file, its folder, or the packaged 2020 production config."""
    from privtab.data.inputs import resolve_config_path

    return resolve_config_path(config)


def _read_parameters(config: str | Path | None) -> tuple[SafeTabConfig, ReferenceData]:
    from privtab.data import read_config, read_reference

    path = config_path(config)
    return read_config(path), read_reference(path.parent)


def plans_for(
    cfg: SafeTabConfig, ref: ReferenceData, geography: Geography | None
) -> dict[str, ReleasePlan]:
    """Each run's plan; with a geography, only levels whose public domain is not empty."""
    from privtab.tabulate import ReleasePlan
    from privtab.tabulate.domain import level_domain

    out: dict[str, ReleasePlan] = {}
    for scope in cfg.scopes:
        whole = ReleasePlan.from_config(cfg, ref, scope)
        if geography is None:
            out[scope.value] = whole
            continue
        keep = tuple(lv for lv in whole.levels if level_domain(lv, geography, ref).size > 0)
        if keep:
            out[scope.value] = replace(whole, levels=keep)
    return out


def _geography(geography: InputSource, cfg: SafeTabConfig) -> Geography:
    from privtab.data import read_geography
    from privtab.safetab.inputs import FRAME, frame_of, renamed_errors

    df = frame_of(geography, "geography")
    if df is None:
        return read_geography(geography, cfg.state_filter_us)
    with tempfile.TemporaryDirectory(prefix="privtab-plan-") as tmp:
        path = Path(tmp) / "GRF-C.parquet"
        df.write_parquet(path)
        with renamed_errors({str(path): "geography" + FRAME}):
            return read_geography(path, cfg.state_filter_us)


def plan(config: str | Path | None = None, *, geography: InputSource | None = None) -> Plan:
    """The plan of a release with ``config`` (a ``config.json``, its folder, or ``None`` for
    the packaged 2020 production parameters); with ``geography`` (a GRF-C path or
    DataFrame) only the levels a release of that geography tabulates.

    >>> p = plan()
    >>> p
    <privtab Plan: ρ = 4.944 zCDP, 19 levels (US 11, PR 8)>
    >>> p.budgets["US (COUNTY, 1)"]
    Fraction(1, 125)
    """
    cfg, ref = _read_parameters(config)
    geo = None if geography is None else _geography(geography, cfg)
    return Plan(plans_for(cfg, ref, geo), source=cfg.source)
