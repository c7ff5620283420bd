"""Inputs that hung, filled memory or crashed a run are refused early and cleanly (issue 31).

Each case failed on the code before issue 31: a person file that is a named pipe hung
forever, ``/dev/zero`` grew memory at ~320 MB/s, ``--lifetime-rho 1e999999999`` never
finished, a stage-1 fraction of 1e-20 took 63 s and 6.95 GB for 300 persons (then aborted
under an 8 GiB limit, leaving a staging folder and a pending ledger entry), a 300-character
name was an internal error, ``--config`` naming nothing listed five unrelated problems.
Now each is one located message with the documented exit code, within seconds, and nothing
is written — no release, no staging folder, no ledger entry.

The commands that could hang or exhaust memory on a regression run in one subprocess under
a 4 GiB address-space limit and a 60 s alarm per command (``tests/cli/_guarded.py``), so a
regression fails here instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from privtab.cli import app
from privtab.data import production_config_dir
from tests.data.conftest import snapshot

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
CONFIG = "config.json"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """300 synthetic persons (``privtab synth``) and the production parameters."""
    root = tmp_path_factory.mktemp("refusals")
    res = runner.invoke(app, ["synth", "-n", "300", "-o", str(root / "data"), "--seed", "3", "-q"])
    assert res.exit_code == 0, res.output
    params = root / "params"
    shutil.copytree(production_config_dir(), params)
    for f in params.iterdir():
        f.chmod(0o644)
    return root


def _copy(world: Path, where: Path) -> tuple[Path, Path]:
    shutil.copytree(world / "data", where / "data")
    shutil.copytree(world / "params", where / "params")
    return where / "params", where / "data"


def _set_config(params: Path, old: str, new: str) -> None:
    text = (params / CONFIG).read_text()
    assert old in text
    (params / CONFIG).write_text(text.replace(old, new, 1))


def _run_argv(params: Path, data: Path, root: Path, *extra: str) -> list[str]:
    return ["safetab", "run", "--data", str(data), "--config", str(params / CONFIG),
            "--out", str(root / "release"), "--no-report", "--quiet",
            "--ledger", str(root / "ledger.json"), *extra]  # fmt: skip


def _guarded(cases: dict[str, dict[str, Any]], tmp: Path) -> dict[str, dict[str, Any]]:
    spec = tmp / "cases.json"
    spec.write_text(json.dumps(cases))
    import privtab  # the privtab under test (this checkout's, or PYTHONPATH's)

    src = Path(privtab.__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(src) + os.pathsep + str(ROOT)}
    res = subprocess.run(
        [sys.executable, "-m", "tests.cli._guarded", str(spec)],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=60 * (len(cases) + 2),
        check=False,
    )  # fmt: skip
    lines = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
    out = {x["name"]: x for x in lines}
    assert set(out) == set(cases), res.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def guarded(world: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every hang- or memory-prone case, run once in the guarded subprocess. Returns
    ``{name: (result, root of the case, snapshot before)}``."""
    cases: dict[str, dict[str, Any]] = {}
    roots: dict[str, tuple[Path, dict[str, tuple[int, int]]]] = {}

    def add(name: str, argv_of: Any, prepare: Any) -> None:
        root = tmp_path_factory.mktemp(name)
        params, data = _copy(world, root)
        prepare(params, data, root)
        cases[name] = {"argv": argv_of(params, data, root)}
        roots[name] = (root, snapshot(root))

    def replace(where: str, name: str, target: str) -> Any:
        def go(params: Path, data: Path, root: Path) -> None:
            f = (data if where == "data" else params) / name
            f.unlink()
            if target == "fifo":
                os.mkfifo(f)
            else:
                f.symlink_to(target)

        return go

    inputs = (("data", "person-records.txt"), ("data", "GRF-C.txt"), ("params", CONFIG),
              ("params", "race-and-ethnicity-codes.txt"))  # fmt: skip
    for where, name in inputs:
        for target in ("fifo", "/dev/zero"):
            key = f"{name}-{'fifo' if target == 'fifo' else 'devzero'}"
            add(f"run-{key}", _run_argv, replace(where, name, target))
    add(
        "validate-person-fifo",
        lambda p, d, r: ["validate", "--data", str(d), "--config", str(p / CONFIG), "--quiet"],
        replace("data", "person-records.txt", "fifo"),
    )
    add(
        "stage1-1e-20",
        _run_argv,
        lambda p, d, r: _set_config(
            p,
            '"privacy_budget_p_stage_1_fraction": 0.1',
            '"privacy_budget_p_stage_1_fraction": 1e-20',
        ),
    )
    for key, old, new in EXPONENTS:
        add(
            f"exponent-{key}",
            _run_argv,
            lambda p, d, r, old=old, new=new: _set_config(p, old, new),
        )
    add(
        "lifetime-rho-1e999999999",
        lambda p, d, r: _run_argv(p, d, r, "--lifetime-rho", "1e999999999"),
        lambda p, d, r: None,
    )
    add(
        "semantics-release-fifo",
        lambda p, d, r: ["semantics", "--release", str(r / "pipe")],
        lambda p, d, r: os.mkfifo(r / "pipe"),
    )
    add(
        "semantics-rdp-file-devzero",
        lambda p, d, r: ["semantics", "--rdp-file", str(r / "curve.json")],
        lambda p, d, r: (r / "curve.json").symlink_to("/dev/zero"),
    )
    results = _guarded(cases, tmp_path_factory.mktemp("guarded"))
    return {k: (results[k], *roots[k]) for k in cases}


EXPONENTS = [
    ("privacy_budget_p_level_2_usa", '"privacy_budget_p_level_2_usa": 2.134',
     '"privacy_budget_p_level_2_usa": 1e-999999999'),
    ("privacy_budget_p_level_1_usa", '"privacy_budget_p_level_1_usa": 0.008',
     '"privacy_budget_p_level_1_usa": 1E+999999999'),
    ("thresholds_p.(USA, 2)", '"(USA, 2)": [471, 971, 6971]',
     '"(USA, 2)": [471, 971, 1e999999999]'),
]  # fmt: skip
"""Numbers whose exact value has a billion digits: the config read never finished."""


@pytest.mark.parametrize("key", [k for k, _, _ in EXPONENTS])
def test_a_number_no_exact_arithmetic_finishes_is_refused(
    guarded: dict[str, Any], key: str
) -> None:
    res, root, before = guarded[f"exponent-{key}"]
    assert "cut" not in res, f"{res.get('cut')} after {res['seconds']:.0f} s"
    assert res["exit"] == 1, res["stderr"]
    line = next(x for x in res["stderr"].splitlines() if "[invalid_number]" in x)
    assert f"key {key}" in line
    assert snapshot(root) == before


NOT_FILES = [
    (f"run-{name}-{t}", name)
    for name in ("person-records.txt", "GRF-C.txt", CONFIG, "race-and-ethnicity-codes.txt")
    for t in ("fifo", "devzero")
] + [("validate-person-fifo", "person-records.txt")]


@pytest.mark.parametrize(("case", "file"), NOT_FILES, ids=[c for c, _ in NOT_FILES])
def test_a_pipe_or_device_is_refused_unread(guarded: dict[str, Any], case: str, file: str) -> None:
    res, root, before = guarded[case]
    assert "cut" not in res, f"{case}: {res.get('cut')} after {res['seconds']:.0f} s"
    assert res["exit"] == 1, res["stderr"]
    line = next(x for x in res["stderr"].splitlines() if "[not_a_file]" in x)
    assert file in line
    assert ("named pipe" if "fifo" in case else "character device") in line
    assert "Traceback" not in res["stderr"]
    assert snapshot(root) == before, "nothing may be written (no release, no ledger entry)"


def test_a_noise_volume_no_machine_holds_is_refused_before_any_reservation(
    guarded: dict[str, Any],
) -> None:
    """Stage-1 fraction 1e-20 (legal: strictly between 0 and 1) on 300 persons: the noise
    alone would open ~4·10⁸ T2 cells. Refused from the public plan, with the limit stated,
    before the ledger is touched or a staging folder made."""
    res, root, before = guarded["stage1-1e-20"]
    assert "cut" not in res, f"{res.get('cut')} after {res['seconds']:.0f} s"
    assert res["exit"] == 1, res["stderr"]
    line = next(x for x in res["stderr"].splitlines() if "[noise_too_large]" in x)
    assert "key privacy_budget_p_stage_1_fraction" in line
    assert "limit of 10,000,000" in line
    assert snapshot(root) == before
    assert not (root / "ledger.json").exists()


def test_an_absurd_lifetime_budget_is_refused_at_once(guarded: dict[str, Any]) -> None:
    res, root, before = guarded["lifetime-rho-1e999999999"]
    assert "cut" not in res, f"{res.get('cut')} after {res['seconds']:.0f} s"
    assert res["exit"] == 2, res["stderr"]
    assert "lifetime budget" in res["stderr"]
    assert "exponent" in res["stderr"]
    assert snapshot(root) == before


@pytest.mark.parametrize("case", ["semantics-release-fifo", "semantics-rdp-file-devzero"])
def test_semantics_files_that_are_not_files(guarded: dict[str, Any], case: str) -> None:
    res, _, _ = guarded[case]
    assert "cut" not in res, f"{res.get('cut')} after {res['seconds']:.0f} s"
    assert res["exit"] == 2, res["stderr"]
    assert "not a regular file" in res["stderr"]


# ---------------------------------------------------------------------------- in-process
LONG = "n" * 300


@pytest.mark.parametrize("option", ["--data", "--config", "--out", "--ledger", "--run-record"])
def test_a_name_too_long_is_a_located_error(world: Path, tmp_path: Path, option: str) -> None:
    params, data = _copy(world, tmp_path)
    argv = _run_argv(params, data, tmp_path)
    if option not in argv:
        argv += [option, "placeholder"]
    argv[argv.index(option) + 1] = str(tmp_path / LONG)
    before = snapshot(tmp_path)
    res = runner.invoke(app, argv)
    assert res.exit_code in (1, 2), res.output
    assert "Traceback" not in res.stderr
    assert "internal error" not in res.stderr
    error = res.stderr[res.stderr.index("privtab: error:") :]
    assert LONG in error
    assert "too long" in error
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_config_that_names_nothing_is_one_problem(
    world: Path, tmp_path: Path, command: str
) -> None:
    params, data = _copy(world, tmp_path)
    nothing = tmp_path / "no-such-config"
    argv = (
        ["validate", "--data", str(data), "--config", str(nothing), "--quiet", "--json"]
        if command == "validate"
        else [*_run_argv(params, data, tmp_path / "elsewhere"), "--json"]
    )
    if command == "run":
        argv[argv.index("--config") + 1] = str(nothing)
    res = runner.invoke(app, argv)
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert [(p["file"], p["kind"]) for p in doc["problems"]] == [(str(nothing), "missing_file")]
    assert "names nothing" in doc["problems"][0]["message"]


@pytest.mark.parametrize("option", ["--data", "--config"])
def test_an_empty_path_is_not_the_current_folder(world: Path, tmp_path: Path, option: str) -> None:
    params, data = _copy(world, tmp_path)
    argv = _run_argv(params, data, tmp_path)
    argv[argv.index(option) + 1] = ""
    res = runner.invoke(app, argv)
    assert res.exit_code == 2, res.output
    assert f"{option} is empty" in res.stderr


def test_a_chance_no_float_holds_stays_exact_through_a_run(world: Path, tmp_path: Path) -> None:
    """``zero_suppression_chance`` 0.99999999999999999999 (the float is 1.0): the run
    publishes, and release.json states the chance exactly and the thresholds of that exact
    chance (checked against the mpmath summation of tests/tabulate/test_suppression.py)."""
    from fractions import Fraction

    from tests.tabulate.test_suppression import NINES_20, dg_threshold

    params, data = _copy(world, tmp_path)
    _set_config(
        params,
        '"zero_suppression_chance": 0.9999',
        '"zero_suppression_chance": 0.99999999999999999999',
    )
    res = runner.invoke(app, [*_run_argv(params, data, tmp_path), "--seed", "5", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "release" / "release.json").read_text())
    assert doc["config"]["zero_suppression_chance_exact"] == str(NINES_20)
    checked = 0
    for run in doc["runs"].values():
        stage2 = {lv["level"]: lv["stage2"] for lv in run["plan"]["levels"]}
        for lv in run["levels"]:
            sup = lv.get("zero_suppression") or {}
            if sup.get("threshold_stage2_total") is None:
                continue
            assert sup["zero_suppression_chance_exact"] == str(NINES_20)
            rho = Fraction(stage2[lv["level"]]["parameter_exact"])
            expected = dg_threshold(1 / (2 * rho), NINES_20)
            assert sup["threshold_stage2_total"] == expected, lv["level"]
            checked += 1
    assert checked >= 10
