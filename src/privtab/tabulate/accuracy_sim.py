"""The Bureau-style accuracy simulation: K seeded releases of an input against its truth.

What the 2020 production ``accuracy_report.py`` measured (NOT private — it reads the true
counts of the input; run it on synthetic or otherwise public data only): per level and
population-group size bucket ([0, 1], (1, 10], (10, 100], …), how often each workload was
selected and the empirical 95 % MOE (the 95th percentile of the absolute error of the
published statistics: the total for the "total" workload, the cells otherwise). privtab
runs the same simulation and sets the **exact** figures of :mod:`privtab.tabulate.accuracy`
beside it for the same groups, with the standard error the simulation should show:

* ``selected``: group-trials whose stage 1 chose the workload (suppressed groups
  included — only totals are suppressed) vs ``K·Σ_g P(w | n_g)``;
* ``suppressed`` vs ``K·Σ_g P(suppressed | n_g)``;
* ``within``: published statistics with ``|error| ≤`` the exact MOE vs their exact expected
  number (a cell: its coverage; a total: ``P(|e| ≤ m, published)`` — suppression keeps only
  counts above the threshold, so a small group's published totals are biased upwards);
* ``moe95_simulated`` (the Bureau's figure) beside the exact MOE of the statistic's law.

The engine is driven through its protocol (:class:`privtab.tabulate.engines.Engine`); one
function, :func:`published_chunks`, turns its output into production's published rows
(suppression before clamping), so the simulation does not depend on how a release run is
wired. The truth comes from one noise-free run whose thresholds are all below zero, so
every adaptive group is tabulated at Sex × Age23 (the Age4 and Age9 bins are unions of
Age23 bins).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import NDArray

from privtab.data import SafeTabInputs
from privtab.data.ages import STAT_LEVEL_BINS
from privtab.mechanisms.counts import count_error
from privtab.random import SeededSource
from privtab.tabulate.accuracy import WORKLOADS, LevelAccuracy, bucket_label, size_bucket
from privtab.tabulate.chunk import Drawing
from privtab.tabulate.engines import Engine
from privtab.tabulate.plan import LevelPlan
from privtab.tabulate.publish import MARGINAL_AGE, publish_chunk
from privtab.tabulate.suppression import SuppressionRule

__all__ = [
    "SIM_WORKLOADS",
    "LevelSimulation",
    "prepare_engine",
    "published_chunks",
    "simulate_level",
    "true_sizes",
]

GROUP = ["REGION_ID", "REGION_TYPE", "ITERATION_CODE"]
SIM_WORKLOADS = ("total_only", *WORKLOADS)
"""Workloads of the simulation: index = STAT_LEVEL + 1."""
Say = Callable[[str], None]


def published_chunks(
    engine: Engine,
    plan: LevelPlan,
    *,
    source: SeededSource,
    rule: SuppressionRule,
    nonnegative: bool,
) -> Iterator[tuple[pl.DataFrame, pl.DataFrame]]:
    """The published T1/T2 rows of one level, chunk by chunk, exactly as a release publishes
    them (:func:`privtab.tabulate.publish.publish_chunk`: zero suppression on the raw noisy
    totals, clamping, sex marginals). The one place that drives the engine."""
    for part in engine.tabulate(plan, Drawing(source)):
        out = publish_chunk(part, rule, nonnegative=nonnegative)
        yield out.t1, out.t2


def _age_maps() -> pl.DataFrame:
    """Each Age23 bin (AGESTART) → the Age4 and Age9 bins holding it."""
    b23, b9, b4 = STAT_LEVEL_BINS[3], STAT_LEVEL_BINS[2], STAT_LEVEL_BINS[1]
    assert b23 is not None
    assert b9 is not None
    assert b4 is not None
    rows = []
    for a, _ in b23.bounds():
        row: dict[str, str] = {"A23": str(a)}
        for tag, bins in (("4", b4), ("9", b9)):
            lo, hi = bins.bounds()[int(np.digitize(a, bins.cuts))]
            row[f"S{tag}"], row[f"E{tag}"] = str(lo), str(hi)
        rows.append(row)
    return pl.DataFrame(rows)


@dataclass
class _Truth:
    groups: pl.DataFrame
    """GROUP + ``N`` (true size) + ``TO`` (TotalOnly) for every group of the domain."""
    cells: pl.DataFrame
    """GROUP + SEX + AGESTART + AGEEND + ``TRUE`` for the non-zero cells at every bin set."""


def _truth(engine: Engine, plan: LevelPlan) -> _Truth:
    forced = replace(plan, thresholds=(-3, -2, -1))
    t1s, t2s = [], []
    maps = _age_maps()
    for part in engine.tabulate(forced, Drawing(SeededSource(0), noise=False)):
        t1s.append(
            part.t1.select(
                *GROUP,
                pl.col("COUNT").alias("N"),
                (pl.col("STAT_LEVEL") == -1).alias("TO"),
            )
        )
        nz = part.t2.filter(pl.col("COUNT") != 0).select(
            *GROUP, "SEX", pl.col("AGESTART").alias("A23"), "AGEEND", pl.col("COUNT").alias("TRUE")
        )
        t2s.append(nz.join(maps, on="A23", how="left"))
    groups = pl.concat(t1s)
    fine = pl.concat(t2s)  # an engine yields at least one chunk for a non-empty domain
    cells = [fine.select(*GROUP, "SEX", pl.col("A23").alias("AGESTART"), "AGEEND", "TRUE")]
    for tag in ("4", "9"):
        cells.append(
            fine.group_by(*GROUP, "SEX", f"S{tag}", f"E{tag}")
            .agg(pl.col("TRUE").sum())
            .select(
                *GROUP,
                "SEX",
                pl.col(f"S{tag}").alias("AGESTART"),
                pl.col(f"E{tag}").alias("AGEEND"),
                "TRUE",
            )
        )
    return _Truth(groups, pl.concat(cells))  # renamed also when no cell is non-zero


@dataclass
class _Accumulator:
    """Per (bucket, workload): counts and the histogram of absolute errors."""

    selected: int = 0
    suppressed: int = 0
    statistics: int = 0
    within: int = 0
    errors: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def add_errors(self, abs_err: NDArray[np.int64], moe: int) -> None:
        if abs_err.size == 0:
            return
        hist = np.bincount(abs_err)
        if hist.size > self.errors.size:
            hist[: self.errors.size] += self.errors
            self.errors = hist
        else:
            self.errors[: hist.size] += hist
        self.statistics += int(abs_err.size)
        self.within += int((abs_err <= moe).sum())

    def quantile(self, q: float) -> float | None:
        """numpy's default (linear) quantile of the absolute errors, from the histogram."""
        n = int(self.errors.sum())
        if n == 0:
            return None
        h = (n - 1) * q
        lo, hi = int(np.floor(h)), int(np.ceil(h))
        cum = np.cumsum(self.errors)
        x_lo = int(np.searchsorted(cum, lo + 1))
        x_hi = int(np.searchsorted(cum, hi + 1))
        return float(x_lo + (h - lo) * (x_hi - x_lo))


@dataclass
class LevelSimulation:
    """The simulated and exact figures of one level, per size bucket and workload."""

    level: str
    scope: str
    trials: int
    nonnegative: bool
    rows: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "scope": self.scope,
            "trials": self.trials,
            "errors_compared": not self.nonnegative,
            "buckets": self.rows,
        }


def _exact_moes(acc: LevelAccuracy) -> dict[str, tuple[int, float]]:
    """Exact MOE and coverage of each workload's published statistic."""
    stage2 = count_error(acc.plan.stage2.mechanism)
    total = count_error(acc.plan.total.mechanism)
    out = {"total_only": (total.moe95, total.coverage)}
    for w in WORKLOADS:
        out[w] = (stage2.moe95, stage2.coverage)
    return out


def _exact_bucket(
    acc: LevelAccuracy, n: NDArray[np.int64], to: NDArray[np.bool_], trials: int
) -> dict[str, dict[str, float]]:
    """Expected figures (and their standard errors) of K trials for the groups of one
    bucket: selections, suppressions and published totals within the MOE."""
    k = float(trials)
    out: dict[str, dict[str, float]] = {}
    na, nt = n[~to], n[to]
    pw = acc.p_workload(na) if na.size else np.zeros((0, 4))
    ps = acc.p_suppressed(na) if na.size else np.zeros(0)
    moes = _exact_moes(acc)
    for j, w in enumerate(WORKLOADS):
        p = pw[:, j]
        out[w] = {
            "groups_exact": k * float(p.sum()),
            "groups_se": float(np.sqrt(k * float((p * (1 - p)).sum()))),
        }
    out["total"]["suppressed_exact"] = k * float(ps.sum())
    out["total"]["suppressed_se"] = float(np.sqrt(k * float((ps * (1 - ps)).sum())))
    if na.size:
        m = moes["total"][0]
        pin = acc.p_total_published_within(na, m)
        out["total"]["within_exact"] = k * float(pin.sum())
        out["total"]["within_se"] = float(np.sqrt(k * float((pin * (1 - pin)).sum())))
    pto = acc.p_suppressed_total_only(nt) if nt.size else np.zeros(0)
    out["total_only"] = {
        "groups_exact": k * float(nt.size),
        "groups_se": 0.0,
        "suppressed_exact": k * float(pto.sum()),
        "suppressed_se": float(np.sqrt(k * float((pto * (1 - pto)).sum()))),
    }
    return out


def _tally_trial(
    get: Callable[[int, str], _Accumulator],
    groups: pl.DataFrame,
    truth: _Truth,
    moes: dict[str, tuple[int, float]],
    t1: pl.DataFrame,
    t2: pl.DataFrame,
) -> None:
    """Add one trial's published rows to the accumulators (per size bucket × workload):
    suppressed groups, selections, and the errors of the published statistics."""
    g = groups.join(t1, on=GROUP, how="left")
    # suppressed groups: no T1 row (only totals are suppressed: workload total / TO)
    sup = g.filter(pl.col("COUNT").is_null())
    for (b, to), part in sup.group_by("_B", "TO"):
        get(int(b), "total_only" if to else "total").suppressed += part.height
    sel = g.with_columns(
        pl.when(pl.col("COUNT").is_null())
        .then(pl.when(pl.col("TO")).then(-1).otherwise(0))
        .otherwise(pl.col("STAT_LEVEL"))
        .alias("_W")
    )
    for (b, w), part in sel.group_by("_B", "_W"):
        get(int(b), SIM_WORKLOADS[int(w) + 1]).selected += part.height
    totals = g.filter(pl.col("COUNT").is_not_null() & (pl.col("STAT_LEVEL") <= 0))
    totals = totals.with_columns((pl.col("COUNT") - pl.col("N")).abs().alias("_E"))
    for (b, w), part in totals.group_by("_B", "STAT_LEVEL"):
        name = SIM_WORKLOADS[int(w) + 1]
        get(int(b), name).add_errors(part["_E"].to_numpy(), moes[name][0])
    cells = (
        t2.join(truth.cells, on=[*GROUP, "SEX", "AGESTART", "AGEEND"], how="left")
        .with_columns(pl.col("TRUE").fill_null(0))
        .join(t1.select(*GROUP, "STAT_LEVEL"), on=GROUP, how="left")
        .join(groups.select(*GROUP, "_B"), on=GROUP, how="left")
        .with_columns((pl.col("COUNT") - pl.col("TRUE")).abs().alias("_E"))
    )
    for (b, w), part in cells.group_by("_B", "STAT_LEVEL"):
        name = SIM_WORKLOADS[int(w) + 1]
        get(int(b), name).add_errors(part["_E"].to_numpy(), moes[name][0])


def simulate_level(
    engine: Engine,
    acc: LevelAccuracy,
    *,
    trials: int,
    seed: int,
    nonnegative: bool = False,
    say: Say | None = None,
) -> LevelSimulation:
    """K seeded releases of one level (``engine`` prepared on the input) against the truth,
    with the exact figures for the same groups (see the module docstring). NOT private."""
    plan = acc.plan
    truth = _truth(engine, plan)
    groups = truth.groups.with_columns(pl.Series("_B", size_bucket(truth.groups["N"].to_numpy())))
    moes = _exact_moes(acc)
    accs: dict[tuple[int, str], _Accumulator] = {}

    def get(b: int, w: str) -> _Accumulator:
        return accs.setdefault((b, w), _Accumulator())

    for trial in range(trials):
        if say is not None:
            say(f"{acc.scope} {plan.key}: trial {trial + 1}/{trials}")
        src = SeededSource(f"privtab-accuracy:{seed}:{trial}")
        pub1, pub2 = [], []
        for t1, t2 in published_chunks(
            engine, plan, source=src, rule=acc.rule, nonnegative=nonnegative
        ):
            pub1.append(t1.select(*GROUP, "COUNT", "STAT_LEVEL"))
            cells = t2.filter(pl.col("AGESTART") != MARGINAL_AGE)  # marginals: sums, not draws
            pub2.append(cells.select(*GROUP, "SEX", "AGESTART", "AGEEND", "COUNT"))
        _tally_trial(get, groups, truth, moes, pl.concat(pub1), pl.concat(pub2))

    rows = []
    for b in sorted(set(groups["_B"].to_list())):
        members = groups.filter(pl.col("_B") == b)
        exact = _exact_bucket(
            acc, members["N"].to_numpy(), members["TO"].to_numpy().astype(bool), trials
        )
        for w in SIM_WORKLOADS:
            a = accs.get((b, w), _Accumulator())
            ex = exact.get(w, {})
            m, cov = moes[w]
            if a.selected == 0 and ex.get("groups_exact", 0.0) == 0.0:
                continue
            row: dict[str, Any] = {
                "bucket": bucket_label(b),
                "workload": w,
                "groups": int(members.filter(pl.col("TO") == (w == "total_only")).height),
                "selected_simulated": a.selected,
                "selected_exact": ex.get("groups_exact", 0.0),
                "selected_se": ex.get("groups_se", 0.0),
                "suppressed_simulated": a.suppressed,
                "suppressed_exact": ex.get("suppressed_exact", 0.0),
                "suppressed_se": ex.get("suppressed_se", 0.0),
                "statistics": a.statistics,
                "moe95_simulated": a.quantile(0.95),
                "moe95_exact": m,
                "within_simulated": a.within,
            }
            if w in ("total", "total_only") and "within_exact" in ex:
                row["within_exact"] = ex["within_exact"]
                row["within_se"] = ex["within_se"]
            else:  # cells (and TotalOnly totals, never suppressed): independent draws
                row["within_exact"] = a.statistics * cov
                row["within_se"] = float(np.sqrt(a.statistics * cov * (1 - cov)))
            if nonnegative:  # clamped counts: the exact laws of the errors do not apply
                row["within_exact"] = row["within_se"] = None
            rows.append(row)
    return LevelSimulation(plan.key, acc.scope, trials, nonnegative, rows)


def true_sizes(engine: Engine, plan: LevelPlan) -> pl.DataFrame:
    """The true size ``N`` of every group of the level's domain and whether it is TotalOnly
    (``TO``): one noise-free run (NOT private)."""
    parts = [
        part.t1.select(*GROUP, pl.col("COUNT").alias("N"), (pl.col("STAT_LEVEL") == -1).alias("TO"))
        for part in engine.tabulate(plan, Drawing(SeededSource(0), noise=False))
    ]
    return pl.concat(parts)


def prepare_engine(inputs: SafeTabInputs, engine: str | Engine = "polars") -> Engine:
    """An engine that has validated and aggregated ``inputs``' person file."""
    from privtab.tabulate.engines import make_engine

    eng = make_engine(engine) if isinstance(engine, str) else engine
    eng.prepare(inputs, lambda _msg: None)
    return eng
