"""SafeTab release analysis on simulated T1/T2 frames in the engine's layout.

The engine developer adds the end-to-end test on a real synthetic release; here the
release is simulated (``_release.simulate``: thresholds pick the level from a noisy
stage-1 total) so the truth is known.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from privtab.analysis import add_intervals, combine_totals, consistent_t2, load_release
from privtab.analysis.safetab import draw_count

from ._release import THRESHOLDS, simulate


def _truth_frame(sim_total: np.ndarray) -> pl.DataFrame:
    return pl.DataFrame(
        {"REGION_ID": [f"{i:05d}" for i in range(sim_total.size)], "TRUE": sim_total}
    )


def test_load_release_parquet_and_text(tmp_path: Path) -> None:
    sim = simulate(40, total_only=5, seed=2)
    pq, txt = tmp_path / "pq", tmp_path / "txt"
    for d in (pq, txt):
        d.mkdir()  # simulated tables without a release.json
    sim.t1.write_parquet(pq / "t1.parquet")
    sim.t2.write_parquet(pq / "t2.parquet")
    sim.t1.write_csv(txt / "t1.txt", separator="|")
    sim.t2.write_csv(txt / "t2.txt", separator="|")
    a, b = load_release(pq), load_release(txt)
    assert a.metadata == {}
    assert a.document is None
    assert a.private is None
    assert a.t1.equals(b.t1)
    assert a.t2.equals(b.t2)
    assert b.t1["STAT_LEVEL"].dtype == pl.Int8
    with pytest.raises(FileNotFoundError):
        load_release(tmp_path / "missing")


def test_draw_count() -> None:
    sim = simulate(50, seed=3)
    row = sim.t1.filter(pl.col("COUNT_SOURCE") == "sum_of_t2").row(0, named=True)
    assert draw_count(row["NOISE"], row["NOISE_SCALE"], row["VARIANCE"]) in (8, 18, 46)
    with pytest.raises(ValueError, match="whole number"):
        draw_count("geometric", 2.0, 1.234)


@pytest.mark.parametrize("noise", ["discrete_gaussian", "geometric"])
def test_interval_columns_cover(noise: str) -> None:
    """Every T1 row's interval covers its truth with the stated exact coverage (the
    stage-2 noise is independent of the level, so this holds given the level too)."""
    scales = {"discrete_gaussian": (40.0, 4.0, 2.0), "geometric": (6.0, 2.0, 1.5)}[noise]
    s1, s0, sc = scales
    sim = simulate(
        3000, noise=noise, stage1_scale=s1, total_scale=s0, cell_scale=sc, total_only=300, seed=4
    )
    t1 = add_intervals(sim.t1, 0.9)
    t1 = add_intervals(
        t1, 0.9, count_col="STAGE1_COUNT", scale_col="STAGE1_NOISE_SCALE",
        variance_col="STAGE1_VARIANCE", prefix="STAGE1_",
    )  # fmt: skip
    truth = sim.true_total
    lo, hi, cov = (t1[c].to_numpy() for c in ("LOWER90", "UPPER90", "COVERAGE90"))
    assert t1["LOWER90"].dtype == pl.Int64
    assert (cov >= 0.9).all()
    hits = (lo <= truth) & (truth <= hi)
    se = math.sqrt(float(np.sum(cov * (1 - cov)))) / truth.size
    assert abs(hits.mean() - cov.mean()) <= 4 * se
    # stage-1 intervals (null for TotalOnly rows)
    s = t1.filter(pl.col("STAGE1_COUNT").is_not_null())
    slo, shi = s["STAGE1_LOWER90"].to_numpy(), s["STAGE1_UPPER90"].to_numpy()
    st = truth[: s.height]
    scov = s["STAGE1_COVERAGE90"].to_numpy()
    assert abs(((slo <= st) & (st <= shi)).mean() - scov.mean()) <= 4 * math.sqrt(
        float(np.mean(scov * (1 - scov))) / s.height
    )
    assert t1.filter(pl.col("STAGE1_COUNT").is_null())["STAGE1_LOWER90"].null_count() == 300
    # the single-draw 95% MOE matches the release's MOE95 column
    single = add_intervals(sim.t2, 0.95)
    assert (single["MOE95"] == sim.t2["MOE95"]).all()


def test_combined_totals_smaller_error_and_stated_variance() -> None:
    """Combined estimates beat COUNT alone; away from the thresholds their empirical error
    matches the stated variance."""
    sim = simulate(6000, total_only=300, seed=5)
    out = combine_totals(sim.t1, thresholds=list(THRESHOLDS), level=0.9)
    err_c = out["COMBINED_COUNT"].to_numpy() - sim.true_total
    err_2 = out["COUNT"].to_numpy() - sim.true_total
    assert (err_c**2).mean() < 0.8 * (err_2**2).mean()
    far = (out["STAGE1_THRESHOLD_SD"] >= 3).fill_null(False).to_numpy()
    for lvl in (1, 2, 3):
        m = far & (out["STAT_LEVEL"].to_numpy() == lvl)
        stated = out["COMBINED_VARIANCE"].to_numpy()[m]
        emp = (err_c[m] ** 2).mean()
        # chi-square: relative s.e. of a mean of squared normal errors ≈ √(2/n)
        assert abs(emp / stated.mean() - 1) <= 4 * math.sqrt(2 / m.sum())
        assert abs(err_c[m].mean()) <= 4 * math.sqrt(stated.mean() / m.sum())
    # TotalOnly rows are unchanged
    tot = out.filter(pl.col("STAT_LEVEL") == -1)
    assert (tot["COMBINED_COUNT"] == tot["COUNT"].cast(pl.Float64)).all()
    assert (tot["STAGE1_WEIGHT"] == 0).all()
    # exact combined intervals cover (far from the thresholds, where the weights are fixed)
    lo, hi = out["COMBINED_LOWER90"].to_numpy(), out["COMBINED_UPPER90"].to_numpy()
    hits = ((lo <= sim.true_total) & (sim.true_total <= hi))[far]
    assert hits.mean() >= 0.9 - 4 * math.sqrt(0.09 / far.sum())


def test_selection_effect_near_a_threshold() -> None:
    """At a threshold the level is chosen from stage-1 noise: given the level the combined
    estimate is biased (as documented) while COUNT stays unbiased; the guard removes it."""
    n = 4000
    sim = simulate(n, seed=6, true_totals=np.full(n, int(THRESHOLDS[1])))
    out = combine_totals(sim.t1, thresholds=list(THRESHOLDS))
    truth = sim.true_total
    upper = out["STAT_LEVEL"].to_numpy() == 2  # selected because stage 1 came out high
    err_c = out["COMBINED_COUNT"].to_numpy()[upper] - truth[upper]
    err_2 = out["COUNT"].to_numpy()[upper] - truth[upper]
    var2 = out["VARIANCE"].to_numpy()[upper].mean()
    assert abs(err_2.mean()) <= 4 * math.sqrt(var2 / upper.sum())  # stage 2: unbiased
    assert err_c.mean() > 1.0  # combined: biased upward given the level
    guarded = combine_totals(sim.t1, thresholds=list(THRESHOLDS), min_threshold_sd=2.0)
    g_err = guarded["COMBINED_COUNT"].to_numpy()[upper] - truth[upper]
    assert abs(g_err.mean()) < 0.5 * err_c.mean()


def test_consistent_t2() -> None:
    sim = simulate(800, seed=7)
    fitted = consistent_t2(sim.t1, sim.t2, nonnegative=False)
    comb = combine_totals(sim.t1)
    sums = fitted.group_by("REGION_ID").agg(pl.col("FITTED_COUNT").sum())
    joined = sums.join(comb.select("REGION_ID", "COMBINED_COUNT"), on="REGION_ID")
    np.testing.assert_allclose(joined["FITTED_COUNT"], joined["COMBINED_COUNT"], atol=1e-8)
    nn = consistent_t2(sim.t1, sim.t2, nonnegative=True)
    assert (nn["FITTED_COUNT"] >= 0).all()
    # fitted cells are closer to the truth than the raw cells
    truth = np.concatenate([sim.true_cells[k] for k in sim.true_cells])
    order = nn["REGION_ID"].to_list()
    assert order == sorted(order)  # t2 is in group order, like the truth
    raw = ((sim.t2["COUNT"].to_numpy() - truth) ** 2).mean()
    fit = ((fitted["FITTED_COUNT"].to_numpy() - truth) ** 2).mean()
    assert fit < raw


def test_moe95_column_is_checked() -> None:
    sim = simulate(60, seed=8)
    checked = add_intervals(sim.t1, 0.95)  # the release's MOE95 agrees with the exact law
    assert (checked["MOE95"] == sim.t1["MOE95"]).all()
    broken = sim.t1.with_columns((pl.col("MOE95") + 1).alias("MOE95"))
    with pytest.raises(ValueError, match="disagree with the exact noise law"):
        add_intervals(broken, 0.95)


@pytest.mark.slow
def test_on_a_real_synthetic_release(tmp_path: Path) -> None:
    """End to end on the engine's output (5,000 synthetic persons in VT): the exact MOE95
    of every row agrees with the engine's, and the analysis functions run."""
    from typer.testing import CliRunner

    from privtab.cli import app

    runner = CliRunner()
    data, rel = tmp_path / "data", tmp_path / "rel"
    synth = ["synth", "--persons", "5000", "--out", str(data), "--states", "VT", "-q"]
    res = runner.invoke(app, synth)
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["safetab", "run", "--data", str(data), "--out", str(rel), "--json"])
    assert res.exit_code == 0, res.output
    release = load_release(rel)
    t1 = add_intervals(release.t1, 0.95)
    t2 = add_intervals(release.t2, 0.95)
    assert (t1["COVERAGE95"] >= 0.95).all()
    assert t2.height == release.t2.height
    comb = combine_totals(release.t1, level=0.9)
    has1 = comb.filter(pl.col("STAGE1_COUNT").is_not_null())
    assert (has1["COMBINED_VARIANCE"] < has1["VARIANCE"]).all()


def test_clamped_flag_and_intervals_stay_valid() -> None:
    from privtab.analysis import SafeTabRelease

    sim = simulate(3000, seed=10, true_totals=np.random.default_rng(1).integers(0, 4, 3000))
    rel = SafeTabRelease(sim.t1, sim.t2, {"postprocessing": {"nonnegative": True}})
    assert rel.clamped
    assert not SafeTabRelease(sim.t1, sim.t2, {}).clamped
    clamped = sim.t1.with_columns(pl.col("COUNT").clip(lower_bound=0))
    iv = add_intervals(clamped, 0.9)
    truth = sim.true_total
    hits = (iv["LOWER90"].to_numpy() <= truth) & (truth <= iv["UPPER90"].to_numpy())
    raw = add_intervals(sim.t1, 0.9)
    raw_hits = (raw["LOWER90"].to_numpy() <= truth) & (truth <= raw["UPPER90"].to_numpy())
    assert (hits >= raw_hits).all()  # clamping never loses coverage for true counts ≥ 0
