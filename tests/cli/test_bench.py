"""``privtab bench``: every registered benchmark has a command, one output format, records.

The light benchmarks run for real with tiny sizes; the heavy ones (``safetab``, ``scale``)
are covered by ``tests/cli/test_bench_safetab.py`` and by fakes here.
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


def test_every_registered_benchmark_has_a_command() -> None:
    res = runner.invoke(app, ["bench", "--help"])
    assert res.exit_code == 0
    for name in bench.BENCHMARKS:
        assert name in res.stdout
        sub = runner.invoke(app, ["bench", name, "--help"])
        assert sub.exit_code == 0, (name, sub.output)
        for flag in ("--json", "--keep", "--work", "--record"):
            assert flag in sub.stdout, (name, flag)
    listed = json.loads(runner.invoke(app, ["bench", "list", "--json"]).stdout)
    assert set(listed) == set(bench.BENCHMARKS)
    heavy = {n for n, b in listed.items() if b["heavy"]}
    assert heavy == {
        "floor",
        "safetab",
        "safetab_h",
        "scale",
        "topdown",
        "topdown-state",
        "topdown-gls-round",
    }


def test_floor_pass_counts_every_person_into_its_cell(tmp_path: Path) -> None:
    """The floor of ``privtab bench floor``: persons and distinct cell keys of a file, as
    counted independently in Python (text input; Parquet goes through the same select)."""
    import csv

    from privtab.bench.floor import floor_pass
    from privtab.data import toy_dataset_dir

    lines = (toy_dataset_dir() / "person-records.txt").read_text().splitlines(keepends=True)
    # every toy row 1-3 times, one with another age: repeated and distinct cells
    body = [line for i, line in enumerate(lines[1:]) for _ in range(i % 3 + 1)]
    body.append(body[0].replace(body[0].split("|")[0], "077", 1))
    path = tmp_path / "person-records.txt"
    path.write_text(lines[0] + "".join(body))
    with path.open() as f:
        rows = list(csv.DictReader(f, delimiter="|"))
    key = ["TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK"]
    key += [f"QRACE{i}" for i in range(1, 9)] + ["QSPAN", "QSEX", "QAGE"]

    def norm(v: str) -> int | None:  # the typed read: integers, absent codes null
        return int(v) if v.strip().isdigit() else None

    cells = {tuple(norm(r[k]) for k in key) for r in rows}
    assert 1 < len(cells) < len(rows)
    assert floor_pass(path) == {"persons": len(rows), "cells": len(cells)}


def test_bench_samplers_json_is_one_record() -> None:
    args = ["bench", "samplers", "--n", "3000", "--repeat", "1", "--opendp-n", "300", "--json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    rec = json.loads(res.stdout)  # exactly one JSON object on stdout
    assert rec["benchmark"] == "samplers"
    assert rec["command"] == "privtab bench samplers --n 3000 --repeat 1 --opendp-n 300"
    assert len(rec["load_average_before"]) == 3
    assert rec["machine"]["cores"] >= 1
    rows = rec["result"]["results"]
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
    assert set(rec["result"]["targets_met"]) >= {"discrete_gaussian", "discrete_laplace"}


def test_bench_samplers_without_opendp(monkeypatch: pytest.MonkeyPatch) -> None:
    from privtab.bench import samplers

    monkeypatch.setattr(samplers, "_opendp_factory", lambda: None)
    res = runner.invoke(app, ["bench", "samplers", "--n", "2000", "--repeat", "1", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)["result"]
    assert all(r["opendp_per_s"] is None and r["ratio"] is None for r in out["results"])
    assert "not installed" in res.stderr


def test_bench_accounting_table_and_json(tmp_path: Path) -> None:
    res = runner.invoke(app, ["bench", "accounting", "--n", "50"])
    assert res.exit_code == 0, res.output
    assert "zcdp_epsilon" in res.stdout
    assert "17.4305" in res.stdout
    res = runner.invoke(
        app, ["bench", "accounting", "--n", "50", "--json", "--record", str(tmp_path)]
    )
    assert res.exit_code == 0, res.output
    rec = json.loads(res.stdout)
    assert rec["result"]["ours_epsilon"] == pytest.approx(17.430584, abs=1e-6)
    saved = list(tmp_path.glob("accounting-*.json"))
    assert len(saved) == 1
    assert json.loads(saved[0].read_text())["result"] == rec["result"]


def test_keep_keeps_the_work_directory_and_default_removes_it(tmp_path: Path) -> None:
    work = tmp_path / "w"
    res = runner.invoke(app, ["bench", "accounting", "--n", "20", "--keep", "--work", str(work)])
    assert res.exit_code == 0, res.output
    assert json.loads((work / "record.json").read_text())["benchmark"] == "accounting"
    seen: list[Path] = []
    real = bench.BENCHMARKS["accounting"].module().run

    def spy(**kw: Any) -> dict[str, Any]:
        seen.append(kw["work"])
        return dict(real(**kw))

    mod = bench.BENCHMARKS["accounting"].module()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mod, "run", spy)
        assert runner.invoke(app, ["bench", "accounting", "--n", "20", "--json"]).exit_code == 0
    assert seen
    assert not seen[0].exists()  # the temporary work directory is gone


def test_bench_all_runs_every_light_benchmark(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    class Fake:
        def __init__(self, name: str) -> None:
            self.name = name

        def run(self, work: Path) -> dict[str, Any]:
            calls.append(self.name)
            return {"value": 1}

    fakes = {
        "a": bench.Benchmark("a", "light one", heavy=False),
        "b": bench.Benchmark("b", "heavy one", heavy=True),
    }
    monkeypatch.setattr(bench, "BENCHMARKS", fakes)
    monkeypatch.setattr(bench.Benchmark, "module", lambda self: Fake(self.name))
    res = runner.invoke(app, ["bench", "all", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert list(out) == ["a"]
    assert out["a"]["result"] == {"value": 1}
    assert calls == ["a"]
    assert "skipping b" in res.stderr


def test_a_failing_benchmark_is_one_line_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = bench.BENCHMARKS["accounting"].module()

    def boom(**kw: Any) -> dict[str, Any]:
        raise RuntimeError("privtab synth failed (1)\nlong stderr…")

    monkeypatch.setattr(mod, "run", boom)
    res = runner.invoke(app, ["bench", "accounting"])
    assert res.exit_code == 3
    assert "privtab synth failed (1)" in res.stderr
    assert "long stderr" not in res.stderr
    assert "Traceback" not in res.output


def test_render_writes_the_page_from_records(tmp_path: Path) -> None:
    records = tmp_path / "records"
    res = runner.invoke(app, ["bench", "accounting", "--n", "20", "--record", str(records)])
    assert res.exit_code == 0, res.output
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "benchmarks.md"
    res = runner.invoke(app, ["bench", "render", "--records", str(records), "--out", str(page)])
    assert res.exit_code == 0, res.output
    text = page.read_text()
    assert "Command: `privtab bench accounting --n 20`" in text
    assert "load average before" in text
    assert "| ε | 17.430584 |" in text
    assert "No record yet: run `privtab bench samplers" in text
    # outside a checkout, without --records/--out: a one-line explanation, exit 2
    res = runner.invoke(app, ["bench", "render", "--records", str(tmp_path / "nope")])
    assert res.exit_code == 2
    assert "needs a checkout" in res.stderr


def test_the_checkouts_page_is_the_rendering_of_its_records() -> None:
    from privtab.bench.render import load_records, render

    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "benchmarks.md").read_text()
    figures = {"scale": "img/scale.png", "topdown": "img/topdown.png"}
    assert page == render(load_records(root / "bench" / "records"), figures)


def test_no_machine_specific_paths_in_the_benchmarks() -> None:
    src = Path(bench.__file__).parent
    for path in src.glob("*.py"):
        text = path.read_text()
        assert "/work/" not in text, path
        assert "/home/" not in text, path


def test_the_recorded_command_uses_the_commands_own_flags() -> None:
    got = bench.command_line("synth", {"persons": [10, 20], "fmt": "txt", "validate": True})
    assert got == "privtab bench synth --persons 10,20 --format txt --validate"
    got = bench.command_line("safetab", {"tumult": "/py", "stage2": False, "lock": None})
    assert got == "privtab bench safetab --tumult-python /py --no-stage2"
    assert bench.command_line("safetab", {"stage2": True}) == "privtab bench safetab"


def test_every_benchmark_command_runs_with_its_declared_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each ``privtab bench NAME`` reaches the runner with its declared options, parsed —
    and without the replay-only ones (``scale --from-log``), which crashed ``bench scale``."""
    seen: dict[str, dict[str, Any]] = {}

    def fake_execute(name: str, options: dict[str, Any], **kw: Any) -> dict[str, Any]:
        seen[name] = options
        return {
            "benchmark": name,
            "result": {},
            "machine": {"cpu": "test", "cores": 2},
            "load_average_before": [0.0] * 3,
            "load_average_after": [0.0] * 3,
            "command": f"privtab bench {name}",
        }

    monkeypatch.setattr(bench, "execute", fake_execute)
    for name, b in bench.BENCHMARKS.items():
        res = runner.invoke(app, ["bench", name, "--json"])
        assert res.exit_code == 0, (name, res.output)
        assert json.loads(res.stdout)["benchmark"] == name
        assert set(seen[name]) == {o.name for o in b.options if not o.replay}, name


def test_the_heavy_benchmarks_make_their_input_once_and_never_replace_one(
    tmp_path: Path,
) -> None:
    """``synthetic_input`` (floor, scale, safetab): made when absent, reused when its
    synth.json records the persons (and the seed when asked), an error otherwise."""
    # private on purpose: what the heavy benchmarks share, tested without a long run
    from privtab.bench._common import synthetic_input

    data = tmp_path / "synth-40"
    made, seconds = synthetic_input(data, 40, 3, "--states", "DC")
    assert seconds is not None
    assert seconds > 0
    assert (made["persons"], made["seed"], made["states"]) == (40, 3, ["11"])
    assert json.loads((data / "synth.json").read_text())["persons"] == 40
    again, seconds = synthetic_input(data, 40, 9)  # the seed is checked only when asked
    assert seconds is None
    assert again["seed"] == 3
    with pytest.raises(RuntimeError, match="different synthetic input"):
        synthetic_input(data, 40, 9, same_seed=True)
    with pytest.raises(RuntimeError, match=r"different synthetic input \(40\)"):
        synthetic_input(data, 41, 3)
    assert json.loads((data / "synth.json").read_text())["seed"] == 3


def test_a_benchmark_release_keeps_its_own_ledger(tmp_path: Path) -> None:
    # private on purpose: what the heavy benchmarks share, tested without a long run
    from privtab.bench._common import release_command

    cmd = release_command(tmp_path / "in", tmp_path / "work" / "rel", "--format", "parquet")
    assert cmd[1:4] == ["safetab", "run", "--data"]
    assert cmd[cmd.index("--ledger") + 1] == str(tmp_path / "work" / "ledger.json")
    assert cmd[-2:] == ["--format", "parquet"]
    assert "--json" in cmd


def test_a_timed_run_keeps_its_stderr_and_reads_time_v(tmp_path: Path) -> None:
    import sys

    # private on purpose: what the heavy benchmarks share, tested without a long run
    from privtab.bench._common import run_timed, time_v, time_v_cpu, time_v_rss_kb

    log = tmp_path / "ok.stderr"
    figures, proc = run_timed([sys.executable, "-c", "print(42)"], log)
    assert proc.stdout == "42\n"
    assert log.read_text() == proc.stderr
    assert figures["wall_seconds"] > 0
    assert figures["load_average_before"]
    if time_v():
        assert figures["cpu_seconds"] is not None
        assert figures["peak_rss_mb"] > 0
    bad = [sys.executable, "-c", "import sys; sys.exit('went wrong')"]
    with pytest.raises(RuntimeError, match=r"failed \(1\)"):
        run_timed(bad, tmp_path / "bad.stderr")
    assert "went wrong" in (tmp_path / "bad.stderr").read_text()
    text = "\tUser time (seconds): 1.25\n\tSystem time (seconds): 0.50\n"
    text += "\tMaximum resident set size (kbytes): 3609716\n"
    assert (time_v_cpu(text), time_v_rss_kb(text)) == (1.75, 3609716)
    assert time_v_cpu("") is None
    assert time_v_rss_kb("") is None


def test_the_topdown_figure_draws_every_size_and_nothing_without_records(tmp_path: Path) -> None:
    # private on purpose: which run of each size the figure draws is the renderer's choice
    from privtab.bench.render import _topdown_runs, topdown_figure

    def rec(day: str, sizes: list[int]) -> dict[str, object]:
        runs = [{"persons": n, "wall_seconds": n / 1e3, "peak_rss_gb": n / 1e5} for n in sizes]
        extrapolation = {"from_persons": sizes[-1], "wall_hours": 9.0, "peak_rss_gb": 40.0}
        result = {"runs": runs, "nation_persons": 334_735_155, "extrapolation": extrapolation}
        return {"benchmark": "topdown", "started_at": day, "result": result}

    records = [rec("2026-11-30T00:00:00Z", [10**6]), rec("2026-11-29T00:00:00Z", [10**5, 10**6])]
    runs = _topdown_runs(records)
    # the newest run of each size: 10⁶ from the 30th, 10⁵ from the 29th
    assert [(r["persons"], r["day"]) for r in runs] == [
        (10**5, "2026-11-29"),
        (10**6, "2026-11-30"),
    ]
    drawn = topdown_figure(records, tmp_path / "img" / "topdown.png")
    assert drawn is not None
    assert drawn.stat().st_size > 10_000
    assert topdown_figure([{"benchmark": "scale", "result": {}}], tmp_path / "x.png") is None
