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

from privtab.cli import app
from privtab.cli import bench as bench_cli

runner = CliRunner()


def _mod() -> Any:
    return bench_cli._bench_module("bench_safetab")


def test_safetab_is_registered_and_skipped_by_all(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "safetab" in bench_cli.BENCHMARKS
    assert "safetab" in bench_cli.HEAVY
    res = runner.invoke(app, ["bench", "--help"])
    assert res.exit_code == 0
    assert "safetab" in res.stdout
    calls: list[str] = []

    class Fake:
        @staticmethod
        def run() -> dict[str, Any]:
            calls.append("x")
            return {"value": 1}

    monkeypatch.setattr(bench_cli, "_bench_module", lambda module: Fake)
    monkeypatch.setattr(bench_cli, "BENCHMARKS", {"a": ("m", ""), "safetab": ("s", "")})
    res = runner.invoke(app, ["bench", "all", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == {"a": {"value": 1}}
    assert "skipping safetab" in res.stderr


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
    out = json.loads(res.stdout)
    assert out["privtab"]["persons"] == 3000
    assert out["privtab"]["cells_released"] > 0
    levels = out["comparison"]["levels_compared"]
    assert "US (USA, 1)" in levels
    t = {lv["level"]: lv for lv in out["tumult"]["levels"]}
    # Tumult's noise is calibrated to privtab's per-group ρ: σ² = 1/(2ρ)
    q = {x["what"]: x for x in t["US (USA, 1)"]["queries"]}
    assert q["stage1"]["sigma2"] == pytest.approx(5625.0)
