"""``privtab bench safetab``: registration, parsing, the ratio logic; a slow end-to-end run.

The default suite never needs tmlt.analytics or Spark: the end-to-end test is ``slow`` and is
skipped when no Python with tmlt.analytics is found (``$PRIVTAB_TUMULT_PYTHON``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import privtab.bench as bench
from privtab.cli import app

runner = CliRunner()


def _mod() -> Any:
    return bench.BENCHMARKS["safetab"].module()


def test_safetab_is_registered_and_heavy() -> None:
    assert bench.BENCHMARKS["safetab"].heavy
    res = runner.invoke(app, ["bench", "--help"])
    assert res.exit_code == 0
    assert "safetab" in res.stdout


def test_tumult_is_found_in_the_peers_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = _mod()
    monkeypatch.delenv("PRIVTAB_TUMULT_PYTHON", raising=False)
    monkeypatch.setenv("PRIVTAB_BENCH_PEERS", str(tmp_path))
    assert mod.tumult_python() is None  # nothing there yet
    py = tmp_path / "tumult" / "bin" / "python"
    py.parent.mkdir(parents=True)
    py.symlink_to(Path(__import__("sys").executable))
    # a Python without tmlt.analytics is not taken for Tumult
    assert mod.tumult_python() is None
    monkeypatch.delenv("PRIVTAB_BENCH_PEERS")
    monkeypatch.chdir(tmp_path)
    assert mod.peers_dir() == Path(".bench-peers")


def test_level_lines_of_the_progress_are_parsed() -> None:
    text = (
        "safetab: [1/19] US (USA, 1): 1 regions × 52 iterations, 100 noisy counts (0.4 s)\n"
        "safetab: [15/19] PR (PR-COUNTY, 2): 78 regions × 2,150 iterations, 335,414 noisy "
        "counts, 2 chunk(s) (12.5 s)\n"
    )
    got = [(m["scope"], m["geo"], m["it"], m["sec"]) for m in _mod().LEVEL_LINE.finditer(text)]
    assert got == [("US", "USA", "1", "0.4"), ("PR", "PR-COUNTY", "2", "12.5")]


def test_compare_ratio_and_extrapolation() -> None:
    mod = _mod()
    ours = {
        "wall_seconds": 10.0,
        "level_seconds": {"US (USA, 1)": 0.5, "US (TRACT, 2)": 5.0},
        "levels": [
            {"level": "US (USA, 1)", "noise_draws": 100},
            {"level": "US (TRACT, 2)", "noise_draws": 1000},
        ],
    }
    peer = {
        "levels": [{"level": "US (USA, 1)"}],
        "levels_seconds": 50.0,
        "total_seconds": 60.0,
        "wall_seconds": 70.0,
        "noise_draws": 100,
    }
    c = mod.compare(ours, peer, {}, [{"level": "US (TRACT, 2)", "groups": 500}])
    assert c["ratio_levels"] == 100.0
    assert c["tumult_whole_release_seconds_extrapolated"] == 70 + 500
    assert c["ratio_whole_release_extrapolated"] == 57.0
    full = mod.compare(ours, peer, {}, [])
    assert full["ratio_whole_release"] == 7.0
    assert mod.compare(ours, None, {}, []) is None


@pytest.mark.slow
def test_bench_safetab_end_to_end(tmp_path: Path) -> None:
    if _mod().tumult_python() is None:
        pytest.skip("no Python with tmlt.analytics (set PRIVTAB_TUMULT_PYTHON)")
    args = ["bench", "safetab", "--persons", "3000", "--states", "DE", "--seed", "3"]
    args += ["--data", str(tmp_path / "in"), "--tumult-max-groups", "60", "--no-stage2"]
    res = runner.invoke(app, [*args, "--lock", "", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)["result"]
    assert out["privtab"]["persons"] == 3000
    assert out["privtab"]["cells_released"] > 0
    levels = out["comparison"]["levels_compared"]
    assert "US (USA, 1)" in levels
    t = {lv["level"]: lv for lv in out["tumult"]["levels"]}
    # Tumult's noise is calibrated to privtab's per-group ρ: σ² = 1/(2ρ)
    q = {x["what"]: x for x in t["US (USA, 1)"]["queries"]}
    assert q["stage1"]["sigma2"] == pytest.approx(5625.0)


def test_spark_engine_gets_the_settings_of_tumults_session(tmp_path: Path) -> None:
    mod = _mod()
    cmd = mod.privtab_command(tmp_path / "in", tmp_path / "out", "spark", 2, "6g")
    assert cmd[cmd.index("--engine") + 1] == "spark"
    assert cmd[cmd.index("--spark-master") + 1] == "local[2]"
    confs = dict(cmd[i + 1].split("=", 1) for i, a in enumerate(cmd) if a == "--spark-conf")
    assert confs == mod.spark_settings(2, "6g")
    assert confs["spark.driver.memory"] == "6g"
    assert "--engine" not in mod.privtab_command(tmp_path, tmp_path, "polars")
    # a benchmark on synthetic data never charges the user's release ledger
    assert cmd[cmd.index("--ledger") + 1] == str(tmp_path / "ledger.json")
    with pytest.raises(ValueError, match="engine"):
        mod.privtab_command(tmp_path, tmp_path, "dask")


def _previous(tmp_path: Path, **tumult: Any) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    facts = {"persons": 10, "seed": 1, "states": ["10"], "geography": {"blocks": 3}}
    w = {
        "levels": [
            {
                "scope": "US",
                "geo": "USA",
                "iteration_level": 1,
                "regions": ["1"],
                "iterations": ["a", "b"],
                "rho_stage1": 0.5,
                "rho_stage2": 0.25,
                "rho_total": 1.0,
            }
        ]
    }
    level = {
        "level": "US (USA, 1)",
        "regions": 1,
        "iterations": 2,
        "queries": [
            {"what": "total_only", "sigma2": 0.5},
            {"what": "stage1", "sigma2": 1.0},
            {"what": "stage2_total", "sigma2": 2.0},
        ],
    }
    peer = {"levels": [level], "spark_master": "local[2]", "wall_seconds": 9.0, **tumult}
    old = {
        "machine": {"load_average": [1.0, 2.0, 3.0]},
        "input": facts,
        "tumult": peer,
        "tumult_skipped_levels": [{"level": "US (TRACT, 2)", "groups": 5}],
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    return path, facts, w


def test_a_previous_tumult_result_is_reused_only_when_it_measured_the_same(
    tmp_path: Path,
) -> None:
    mod = _mod()
    path, facts, w = _previous(tmp_path)
    peer, skipped = mod.reuse_tumult(path, facts, w, 2, "6g")
    assert peer["reused"] is True
    assert peer["reused_from"] == str(path)
    assert peer["measured_load_average"] == [1.0, 2.0, 3.0]
    assert peer["spark_settings_assumed"] is True  # written before settings were recorded
    assert skipped == [{"level": "US (TRACT, 2)", "groups": 5}]
    with pytest.raises(ValueError, match="another input"):
        mod.reuse_tumult(path, {**facts, "persons": 11}, w, 2, "6g")
    with pytest.raises(ValueError, match="Spark settings"):
        mod.reuse_tumult(path, facts, w, 4, "6g")
    with pytest.raises(ValueError, match="Spark settings"):
        mod.reuse_tumult(path, facts, w, 2, "8g")
    other = {"levels": [{**w["levels"][0], "rho_stage1": 0.1}]}
    with pytest.raises(ValueError, match="σ²"):
        mod.reuse_tumult(path, facts, other, 2, "6g")
    with pytest.raises(ValueError, match="stage 2"):
        mod.reuse_tumult(path, facts, w, 2, "6g", stage2=False)
    recorded = {"master": "local[2]", **mod.spark_settings(2, "8g")}
    path, facts, w = _previous(tmp_path, spark_settings=recorded, started_at="T")
    peer, _ = mod.reuse_tumult(path, facts, w, 2, "8g")
    assert peer["measured_at"] == "T"
    assert peer["spark_settings_assumed"] is False


def test_cli_forwards_engine_and_tumult_result(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}

    def fake(**kw: Any) -> dict[str, Any]:
        seen.update(kw)
        (kw["work"] / "privtab.stderr").write_text("log")
        return {"tumult": {"reused": True}}

    monkeypatch.setattr(_mod(), "run", fake)
    args = ["bench", "safetab", "--engine", "spark", "--cores", "2", "--driver-memory", "4g"]
    args += ["--tumult-max-seconds", "60", "--tumult-result", "old.json", "--json"]
    args += ["--keep", "--work", str(tmp_path / "w")]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert (tmp_path / "w" / "privtab.stderr").read_text() == "log"  # --keep keeps the logs
    assert json.loads(res.stdout)["work"] == str(tmp_path / "w")
    assert seen["engine"] == "spark"
    assert seen["cores"] == 2
    assert seen["driver_memory"] == "4g"
    assert seen["tumult_result"] == "old.json"
    assert seen["tumult_max_seconds"] == 60
    res = runner.invoke(app, ["bench", "safetab", "--engine", "dask"])
    assert res.exit_code != 0


def test_privtab_side_takes_the_person_count_from_the_synthetic_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``safetab run --json`` names no person count (confidential since the signable
    release), so the benchmark reads it from its synthetic input's ``synth.json`` — before,
    the record read ``summary["persons"]`` and every ``privtab bench safetab`` crashed with
    exit 3 (KeyError) after the privtab run. A level skipped for its empty public domain
    (no groups, no noise) is left out of the measured levels (it crashed the record too)."""
    import subprocess

    mod = _mod()
    data = tmp_path / "in"
    data.mkdir()
    (data / "synth.json").write_text(json.dumps({"persons": 1234, "seed": 1}))
    summary = {  # the keys of privtab.tabulate.summary.release_summary: no "persons"
        "out": "x",
        "private": True,
        "run_record": None,
        "t1_rows": 7,
        "t2_rows": 3,
        "guarantee": {},
        "epsilon": {},
        "delta": 1e-10,
        "levels": [{"scope": "US", "level": "(USA, 1)", "status": "tabulated", "groups": 52,
                    "noise_draws": 60, "stat_levels": {}},
                   {"scope": "US", "level": "(AIANNH, 2)", "status": "skipped",
                    "budget": 0.1}],
        "seconds": {"aggregate": 1.0},
    }  # fmt: skip

    def fake_run(cmd: list[str], lock: str | None, log: Path | None = None) -> Any:
        done = subprocess.CompletedProcess(cmd, 0, json.dumps(summary), "")
        return done, 2.0, 10.0

    monkeypatch.setattr(mod, "run_measured", fake_run)
    monkeypatch.setattr(mod, "time_v", list)
    got = mod.run_privtab(data, tmp_path / "out", None)
    assert got["persons"] == 1234
    assert got["persons_per_second"] == 617
    assert got["cells_released"] == 10
    assert got["noise_draws"] == 60
    assert [lv["level"] for lv in got["levels"]] == [mod._key("US", "USA", 1)]
