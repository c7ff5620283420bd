"""``privtab bench``: the samplers benchmark's JSON and the ``all`` group command."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from privtab.cli import app
from privtab.cli import bench as bench_cli

runner = CliRunner()


def test_bench_samplers_json_schema() -> None:
    res = runner.invoke(
        app, ["bench", "samplers", "--n", "3000", "--repeat", "1", "--opendp-n", "300", "--json"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    rows = out["results"]
    assert [(r["sampler"], r["scale"]) for r in rows] == [
        ("discrete_gaussian", 1),
        ("discrete_gaussian", 10),
        ("discrete_gaussian", 1000),
        ("discrete_laplace", 1),
        ("discrete_laplace", 10),
        ("discrete_laplace", 1000),
    ]
    for r in rows:
        assert r["ours_per_s"] > 0
        if r["opendp_per_s"] is None:
            assert r["ratio"] is None
        else:
            assert r["ratio"] == pytest.approx(r["ours_per_s"] / r["opendp_per_s"])
    assert out["machine"]["cores"] >= 1
    assert set(out["targets_met"]) >= {"discrete_gaussian", "discrete_laplace"}


def test_bench_samplers_without_opendp(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = bench_cli._bench_module("bench_samplers")
    monkeypatch.setattr(mod, "_opendp_factory", lambda: None)
    res = runner.invoke(app, ["bench", "samplers", "--n", "2000", "--repeat", "1", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert all(r["opendp_per_s"] is None and r["ratio"] is None for r in out["results"])
    assert "not installed" in res.stderr


def test_bench_samplers_table() -> None:
    res = runner.invoke(
        app, ["bench", "samplers", "--n", "2000", "--repeat", "1", "--opendp-n", "100"]
    )
    assert res.exit_code == 0, res.output
    assert "discrete_gaussian" in res.stdout


def test_bench_all_runs_every_registered_benchmark(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def fake(module: str) -> Any:
        def run() -> dict[str, Any]:
            calls.append(module)
            return {"value": 1}

        return SimpleNamespace(run=run)

    monkeypatch.setattr(bench_cli, "_bench_module", fake)
    monkeypatch.setattr(bench_cli, "BENCHMARKS", {"a": ("mod_a", ""), "b": ("mod_b", "")})
    res = runner.invoke(app, ["bench", "all", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == {"a": {"value": 1}, "b": {"value": 1}}
    assert calls == ["mod_a", "mod_b"]


def test_bench_help_lists_commands() -> None:
    res = runner.invoke(app, ["bench", "--help"])
    assert res.exit_code == 0
    assert "samplers" in res.stdout
    assert "all" in res.stdout
