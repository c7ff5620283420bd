"""End-to-end SafeTab-P releases: exactness with noise off (against an independent
implementation), the error model with noise on, the release files, and test-mode guards."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from privtab.data import GeoLevel, Scope, read_config, toy_dataset_dir
from privtab.data.ages import STAT_LEVEL_BINS
from privtab.errors import UsageError
from privtab.mechanisms import InsecureSourceError
from privtab.random import SeededSource
from privtab.tabulate import RunOptions, run_release
from tests.tabulate.conftest import (
    SYNTH_STATES,
    CoveragePool,
    Truth,
    demo_params,
    reference_tabulation,
    release_marginals,
    release_tables,
    without_suppression,
)

pytestmark = pytest.mark.filterwarnings("ignore::privtab.mechanisms.InsecureReleaseWarning")

EXACT = RunOptions(noise=False, allow_insecure=True, report=False, pld_grid=1e-2)


def _check_exact(out: Path, truth: Truth, config: Path) -> None:
    """Every T1/T2 row equals the reference count; the domain is the full public product
    but for the sub-state totals production's zero suppression drops (noise off: threshold
    0, so exactly the empty groups); statistic levels are the ones the thresholds imply for
    the true totals; sex marginals are the sums of the cells."""
    cfg = read_config(config)
    t1, t2 = release_tables(out)
    suppressing = bool(cfg.zero_suppression_chance)
    for geo, region, _it in truth.t1:
        assert region in truth.domains[geo]
    got = {
        (r["REGION_TYPE"], r["REGION_ID"], r["ITERATION_CODE"]): r for r in t1.iter_rows(named=True)
    }
    # nothing released outside the public domain; every public group released once
    assert len(got) == t1.height
    for (geo, region, it), row in got.items():
        assert region in truth.domains[geo], (geo, region)
        true = truth.t1.get((geo, region, it), 0)
        assert row["COUNT"] == true, (geo, region, it)
        if int(row["STAT_LEVEL"]) >= 0:
            assert row["STAGE1_COUNT"] == true
    # statistic levels against the thresholds, per level
    for geo in t1["REGION_TYPE"].unique().to_list():
        g = GeoLevel(geo)
        for lv in (1, 2):
            if cfg.budget(g, lv) == 0:
                continue
            th = [float(x) for x in cfg.threshold(g, lv)]
            from privtab.data import read_reference

            codes = {i.code for i in read_reference(config.parent).select(lv, g.granularity)}
            rows = t1.filter(
                (pl.col("REGION_TYPE") == geo) & pl.col("ITERATION_CODE").is_in(list(codes))
            )
            domain = [(r, c) for r in truth.domains.get(geo, ()) for c in codes]
            empty = sum(truth.t1.get((geo, r, c), 0) == 0 for r, c in domain)
            dropped = empty if suppressing and g.value not in ("USA", "STATE", "PR-STATE") else 0
            assert th[0] > 0  # an empty group is a stage-2 total: suppressed when dropped
            assert rows.height == len(domain) - dropped
            adaptive = rows.filter(pl.col("STAT_LEVEL") >= 0)
            expect = np.digitize(adaptive["COUNT"].to_numpy(), th)
            assert (adaptive["STAT_LEVEL"].to_numpy() == expect).all()
    # T2 cells: sums of the reference's per-age counts over each bin
    for r in t2.iter_rows(named=True):
        lo, hi, sex = int(r["AGESTART"]), int(r["AGEEND"]), int(r["SEX"])
        true = sum(
            truth.ages.get((r["REGION_TYPE"], r["REGION_ID"], r["ITERATION_CODE"], sex, a), 0)
            for a in range(lo, hi + 1)
        )
        assert r["COUNT"] == true
    # each group with cells has the full Sex × Age table of its statistic level
    with_cells = t1.filter(pl.col("STAT_LEVEL") >= 1)
    n_cells = {k: 2 * b.n_bins for k, b in STAT_LEVEL_BINS.items() if b is not None}
    assert t2.height == sum(n_cells[int(k)] for k in with_cells["STAT_LEVEL"].to_list())
    marg = release_marginals(out)
    assert marg.height == 2 * with_cells.height
    keys = ["REGION_TYPE", "REGION_ID", "ITERATION_CODE", "SEX"]
    sums = t2.group_by(keys).agg(pl.col("COUNT").sum().alias("S"))
    assert marg.join(sums, on=keys).filter(pl.col("COUNT") != pl.col("S")).height == 0


@pytest.fixture(scope="module")
def exact_release(synth_small, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The noise-off release of the small synthetic nation (its folder and release.json),
    read by the exactness test and the state-chunk test (built once)."""
    config, data = synth_small
    out = tmp_path_factory.mktemp("exact") / "release"
    return out, run_release(config, data, out, EXACT).release


def test_exact_counts_synthetic(synth_small, ref, exact_release) -> None:
    config, data = synth_small
    out, release = exact_release
    assert release["private"] is False
    truth = reference_tabulation(data, ref, SYNTH_STATES, [Scope.US, Scope.PR])
    _check_exact(out, truth, config)
    # some groups reach every statistic level, so all branches were exercised
    t1, _ = release_tables(out)
    assert set(t1["STAT_LEVEL"].unique().to_list()) >= {-1, 0, 1, 2, 3}


@pytest.mark.slow
def test_exact_counts_100k(ref, tmp_path: Path) -> None:
    from privtab.data.synth import synthesize

    states = ["10", "44", "50", "72"]
    synthesize(tmp_path / "data", 100_000, states=states, seed=5)
    config = demo_params(tmp_path / "params", states)
    res = run_release(config, tmp_path / "data", tmp_path / "out", EXACT)
    truth = reference_tabulation(tmp_path / "data", ref, states, [Scope.US, Scope.PR])
    _check_exact(tmp_path / "out", truth, config)
    assert res.record.persons == 100_000


def test_exact_counts_toy_dataset(ref, tmp_path: Path) -> None:
    """The Census toy dataset, with its four toy codes added to a copy of the code list."""
    params = tmp_path / "params"
    config = demo_params(params, ["01", "02", "04", "11"])  # states of the toy GRF-C
    codes = params / "race-and-ethnicity-codes.txt"
    codes.write_text(codes.read_text() + "1011|t\r\n1012|t\r\n1021|t\r\n2021|t\r\n")
    data = tmp_path / "data"
    data.mkdir()
    for f in ("GRF-C.txt", "person-records.txt"):
        shutil.copy(toy_dataset_dir() / f, data / f)
    out = tmp_path / "out"
    res = run_release(config, data, out, EXACT)
    from privtab.data import read_reference

    truth = reference_tabulation(
        data, read_reference(params), ["01", "02", "04", "11"], [Scope.US, Scope.PR]
    )
    assert sum(v for k, v in truth.t1.items() if k[0] == "USA") > 0
    _check_exact(out, truth, config)
    assert res.record.persons == 10


def test_error_model_coverage(synth_small, tmp_path: Path) -> None:
    """Over repeated seeded runs the released counts cover the truth within their stated
    exact 95% MOE at the exact rate P(|noise| ≤ MOE), within binomial error (6 s.e.)."""
    config, data = synth_small
    pool = CoveragePool()
    for seed in (1, 2, 3):
        res = run_release(
            config,
            data,
            tmp_path / f"r{seed}",
            RunOptions(
                source=SeededSource(seed),
                allow_insecure=True,
                evaluate=True,
                report=False,
                pld_grid=1e-2,
            ),
        )
        pool.add(res.levels)
    pool.check(min_checked=10)


def test_release_files_and_guarantee(synth_small, tmp_path: Path) -> None:
    config, data = synth_small
    out = tmp_path / "rel"
    res = run_release(
        config, data, out, RunOptions(source=SeededSource(9), allow_insecure=True, pld_grid=1e-2)
    )
    assert sorted(p.name for p in out.iterdir()) == [
        ".privtab-folder.json",
        "NOT_PRIVATE",
        "release.json",
        "report.html",
        "t1",
        "t1-error.parquet",
        "t2",
        "t2-error.parquet",
    ]
    doc = json.loads((out / "release.json").read_text())
    assert doc["private"] is False
    assert "SeededSource" in doc["noise"]
    # synth_small has no AIANNH area: that level's domain is empty, skipped, not charged
    us_levels = {lv["level"]: lv for lv in doc["runs"]["US"]["levels"]}
    assert us_levels["(AIANNH, 2)"]["status"] == "empty domain"
    assert doc["runs"]["US"]["plan"]["total_budget"] == pytest.approx(4.944 - 0.159)
    assert doc["runs"]["PR"]["plan"]["total_budget"] == pytest.approx(2.643)
    assert doc["guarantee"] == {"zcdp": {"rho": pytest.approx(4.785), "rho_exact": "957/200"}}
    assert doc["schema_version"] == 2
    us = doc["runs"]["US"]
    tabulated = [lv for lv in us["levels"] if lv["status"] == "tabulated"]
    assert all(lv["stability"] == 9 == lv["stability_exact"] for lv in tabulated)
    pr = us["privacy"]
    assert pr["zcdp_optimal"]["epsilon"] <= pr["zcdp_analytic"]["epsilon"]
    assert pr["pld"]["lower"] <= pr["pld"]["epsilon"]  # (the coarse test grid: see plan tests)
    # public inputs only: the config, the four reference files and the GRF-C
    assert len(doc["public_inputs"]) == 6
    assert "person-records.txt" not in doc["public_inputs"]
    assert all(len(v["sha256"]) == 64 for v in doc["public_inputs"].values())
    t1, _ = release_tables(out)
    assert doc["outputs"]["t1_rows"] == t1.height
    html = (out / "report.html").read_text()
    for ident in ("fig-moe", "fig-stat-levels", "fig-privacy-curve"):
        assert f'id="{ident}"' in html
    assert "NOT PRIVATE" in html
    # the MOE column is the exact MOE of each row's noise
    plan = {lv["level"]: lv for lv in us["plan"]["levels"]}
    st = t1.filter((pl.col("REGION_TYPE") == "STATE") & (pl.col("COUNT_SOURCE") == "stage2_total"))
    state2 = plan["(STATE, 2)"]["stage2"]
    assert set(st.filter(pl.col("ITERATION_CODE").str.len_chars() == 4)["MOE95"].to_list()) <= {
        state2["moe95"],
        plan["(STATE, 1)"]["stage2"]["moe95"],
    }
    assert res.seconds["total"] > 0


def test_secure_source_required(synth_small, tmp_path: Path) -> None:
    config, data = synth_small
    with pytest.raises(InsecureSourceError):
        run_release(config, data, tmp_path / "x", RunOptions(source=SeededSource(1)))
    with pytest.raises(UsageError, match="allow_insecure"):
        run_release(config, data, tmp_path / "x", RunOptions(noise=False))
    assert not (tmp_path / "x").exists()


def test_failure_leaves_no_partial_release(synth_small, tmp_path: Path, monkeypatch) -> None:
    config, data = synth_small
    import privtab.tabulate.engines.polars as engines_mod

    calls = {"n": 0}
    real = engines_mod.tabulate_groups

    def boom(*a, **k):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt("simulated Ctrl-C")
        return real(*a, **k)

    monkeypatch.setattr(engines_mod, "tabulate_groups", boom)
    with pytest.raises(KeyboardInterrupt):
        run_release(config, data, tmp_path / "out", EXACT)
    assert list(tmp_path.iterdir()) == []


def test_nonnegative_and_zero_suppression(synth_small, tmp_path: Path) -> None:
    config, data = synth_small
    opts = RunOptions(
        source=SeededSource(4),
        allow_insecure=True,
        nonnegative=True,
        report=False,
        pld_grid=1e-2,
    )
    res = run_release(config, data, tmp_path / "o", opts)
    t1, t2 = release_tables(tmp_path / "o")
    marg = release_marginals(tmp_path / "o")
    assert t1["COUNT"].min() >= 0
    assert t2["COUNT"].min() >= 0
    assert marg["COUNT"].min() >= 0
    post = res.release["postprocessing"]
    assert post["nonnegative"]
    removed = post["zero_suppression"]["suppressed_rows"]
    assert post["zero_suppression"]["applied"]
    assert removed > 0
    # zero suppression only drops sub-state totals of groups without T2 cells
    full = sum(lv.get("groups", 0) for run in res.release["runs"].values() for lv in run["levels"])
    assert t1.height == full - removed
    levels = [lv for run in res.release["runs"].values() for lv in run["levels"]]
    assert sum(lv.get("t1_rows_published", 0) for lv in levels) == t1.height
    assert removed == sum(
        lv["zero_suppression"]["suppressed_rows"] for lv in levels if "zero_suppression" in lv
    )
    # groups with cells: T1 = sum of the (clamped) cells
    sums = t2.group_by("REGION_TYPE", "REGION_ID", "ITERATION_CODE").agg(pl.col("COUNT").sum())
    joined = t1.join(sums, on=["REGION_TYPE", "REGION_ID", "ITERATION_CODE"], suffix="_T2")
    assert (joined["COUNT"] == joined["COUNT_T2"]).all()
    assert (joined["COUNT_SOURCE"] == "sum_of_t2").all()


def test_state_chunks_give_the_same_release(synth_small, exact_release, tmp_path: Path) -> None:
    """Out-of-core mode: tabulating county/tract/place levels state by state (here forced
    to one state per chunk) releases exactly the same tables as whole levels."""
    from privtab.tabulate.engines.polars import PolarsEngine

    config, data = synth_small
    whole, whole_release = exact_release
    # one state per chunk: by the groups bound, then by the cells bound
    for name, small in (
        ("chunked", PolarsEngine(max_chunk_groups=1)),
        ("by_cells", PolarsEngine(max_chunk_cells=1)),
    ):
        opts = RunOptions(
            noise=False, allow_insecure=True, report=False, pld_grid=1e-2, engine=small
        )
        chunked = run_release(config, data, tmp_path / name, opts)
        for a, b in zip(release_tables(whole), release_tables(tmp_path / name), strict=True):
            assert a.height == b.height
            assert a.sort(a.columns).equals(b.sort(b.columns))
        assert whole_release["runs"] == chunked.release["runs"]
    assert "chunk" not in json.dumps(whole_release["runs"])


def test_state_chunks_split_on_state_boundaries() -> None:
    from privtab.tabulate.domain import Domain, state_chunks

    regions = ("01001", "01003", "02010", "04001", "04003", "04005")
    dom = Domain(GeoLevel.COUNTY, regions, ("a", "b"), np.zeros(2, dtype=bool))
    assert state_chunks(dom, 4) == [(0, 2, ["01"]), (2, 3, ["02"]), (3, 6, ["04"])]
    assert state_chunks(dom, 6) == [(0, 3, ["01", "02"]), (3, 6, ["04"])]
    assert state_chunks(dom, 100) == [(0, 6, ["01", "02", "04"])]


def test_combined_totals_on_a_real_release(synth_small, tmp_path: Path) -> None:
    """Issue 8 on the engine's output: combining each group's stage-1 and stage-2 totals
    (privtab.analysis.combine_totals) has a smaller empirical error than the stage-2 totals
    alone, and the error matches the stated combined variance (groups far below θ1, where
    the choice of statistic level does not select on the stage-1 noise)."""
    from privtab.analysis import combine_totals

    config, data = synth_small
    # every group published: zero suppression would select small totals on their noise
    config = without_suppression(config, tmp_path / "params")
    run_release(config, data, tmp_path / "truth", EXACT)
    keys = ["REGION_TYPE", "REGION_ID", "ITERATION_CODE"]
    truth = release_tables(tmp_path / "truth")[0].select(*keys, pl.col("COUNT").alias("TRUE"))
    errs_c, errs_s, var_c = [], [], []
    for seed in (21, 22):
        out = tmp_path / f"noisy{seed}"
        opts = RunOptions(
            source=SeededSource(seed), allow_insecure=True, report=False, pld_grid=1e-2
        )
        run_release(config, data, out, opts)
        t1 = combine_totals(release_tables(out)[0]).join(truth, on=keys)
        far = t1.filter((pl.col("COUNT_SOURCE") == "stage2_total") & (pl.col("TRUE") < 100))
        errs_c.append((far["COMBINED_COUNT"] - far["TRUE"]).to_numpy())
        errs_s.append((far["COUNT"] - far["TRUE"]).to_numpy())
        var_c.append(far["COMBINED_VARIANCE"].to_numpy())
    ec, es, vc = np.concatenate(errs_c), np.concatenate(errs_s), np.concatenate(var_c)
    assert ec.size > 100_000
    mse_c, mse_s = float(np.mean(ec**2)), float(np.mean(es**2))
    assert mse_c < 0.95 * mse_s
    # the empirical MSE matches the stated variance: relative s.e. of an MSE ≈ sqrt(2/n)
    assert mse_c == pytest.approx(float(np.mean(vc)), rel=6 * np.sqrt(2 / ec.size) + 0.01)
    assert abs(float(np.mean(ec))) < 6 * np.sqrt(float(np.mean(vc)) / ec.size) + 0.05


def test_state_chunks_are_bounded_by_cells_too() -> None:
    from privtab.tabulate.domain import Domain, state_chunks

    regions = ("01001", "01003", "02010", "04001", "04003", "04005")
    dom = Domain(GeoLevel.COUNTY, regions, ("a", "b"), np.zeros(2, dtype=bool))
    cells = {"01": 10, "02": 5, "04": 30}
    assert state_chunks(dom, 100, cells, 15) == [(0, 3, ["01", "02"]), (3, 6, ["04"])]
    assert state_chunks(dom, 100, cells, 9) == [(0, 2, ["01"]), (2, 3, ["02"]), (3, 6, ["04"])]
    assert state_chunks(dom, 100, cells, 100) == [(0, 6, ["01", "02", "04"])]
