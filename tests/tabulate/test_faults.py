"""Faults end with a clear message, the documented exit code, no partial release and no
leftover staging folder: disk full, read-only output, a person file that changes while it
is read, an empty person file, and levels whose public domain is empty."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privtab.cli import app
from privtab.errors import InputError
from privtab.random import SeededSource
from privtab.tabulate.run import RunOptions, run_release

from .conftest import demo_params

pytestmark = pytest.mark.filterwarnings("ignore::privtab.mechanisms.InsecureReleaseWarning")
runner = CliRunner()


@pytest.fixture(scope="module")
def vt(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """VT only (no PR in the GRF-C) under the production config (run_pr: true)."""
    from privtab.data.synth import synthesize

    root = tmp_path_factory.mktemp("vt")
    synthesize(root / "data", 2_000, states=["50"], seed=8)
    from privtab.data import production_config_dir

    return production_config_dir() / "config.json", root / "data"


@contextlib.contextmanager
def _tmpfs(path: Path, options: str) -> Iterator[Path]:
    """A small tmpfs at ``path`` (root only); skips the test where mounting is impossible."""
    path.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=False)
    if res.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _run(config: Path, data: Path, out: Path, *extra: str) -> tuple[int, str]:
    args = ["safetab", "run", "--config", str(config), "--data", str(data), "--out", str(out)]
    res = runner.invoke(app, [*args, "--seed", "1", "--no-report", *extra])
    return res.exit_code, res.output


def test_disk_full_while_writing(vt: tuple[Path, Path], tmp_path: Path) -> None:
    config, data = vt
    # big enough for the free-space check (T1 rows x 24 bytes), too small for the tables
    with _tmpfs(tmp_path / "small", "size=3m") as mnt:
        code, text = _run(config, data, mnt / "release")
        assert code == 2, text
        assert "disk is full while writing the release" in text
        assert "no release was written" in text
        assert "Traceback" not in text
        assert sorted(p.name for p in mnt.iterdir()) == []


def test_too_little_space_is_refused_before_the_person_file_is_read(
    vt: tuple[Path, Path], tmp_path: Path
) -> None:
    config, data = vt
    with _tmpfs(tmp_path / "tiny", "size=64k") as mnt:
        code, text = _run(config, data, mnt / "release")
        assert code == 2, text
        assert "not enough free space" in text
        assert "validating and aggregating" not in text
        assert sorted(p.name for p in mnt.iterdir()) == []


def test_read_only_output_is_refused_before_aggregation(
    vt: tuple[Path, Path], tmp_path: Path
) -> None:
    config, data = vt
    with _tmpfs(tmp_path / "ro", "ro,size=1m") as mnt:
        code, text = _run(config, data, mnt / "release")
        assert code == 2, text
        assert "cannot write the output folder" in text
        assert "Read-only file system" in text
        assert "validating and aggregating" not in text


def test_a_person_file_that_changes_while_read(
    vt: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    import privtab.tabulate.engines.polars as engines

    config, data0 = vt
    data = tmp_path / "data"
    shutil.copytree(data0, data)
    original = engines.aggregate_persons

    def growing(*a: object, **k: object) -> object:
        with (data / "person-records.txt").open("a") as fh:
            fh.write("")  # the writer is still at work: the file is touched
        os.utime(data / "person-records.txt", ns=(1, 1))
        return original(*a, **k)

    monkeypatch.setattr(engines, "aggregate_persons", growing)
    opts = RunOptions(source=SeededSource(1), allow_insecure=True, report=False)
    with pytest.raises(InputError, match="changed while it was read"):
        run_release(config, data, tmp_path / "out", opts)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_an_empty_person_file_is_refused_unless_allowed(
    vt: tuple[Path, Path], tmp_path: Path
) -> None:
    import shutil

    config, data0 = vt
    data = tmp_path / "data"
    shutil.copytree(data0, data)
    lines = (data / "person-records.txt").read_text().splitlines(keepends=True)
    (data / "person-records.txt").write_text(lines[0])
    code, text = _run(config, data, tmp_path / "out")
    assert code == 1, text
    assert "header but no rows" in text
    assert "--allow-empty" in text
    assert not (tmp_path / "out").exists()
    code, text = _run(config, data, tmp_path / "out", "--allow-empty")
    assert code == 0, text


def test_vt_only_releases_with_the_pr_levels_listed_as_empty(
    vt: tuple[Path, Path], tmp_path: Path
) -> None:
    """Issue: any input without Puerto Rico under the production config (run_pr: true)
    crashed after the whole US run. Empty domains are normal: skipped, listed, not charged."""
    config, data = vt
    code, text = _run(config, data, tmp_path / "out", "--json", "-q")
    assert code == 0, text
    doc = json.loads((tmp_path / "out" / "release.json").read_text())
    pr = doc["runs"]["PR"]
    assert {lv["status"] for lv in pr["levels"]} == {"empty domain"}
    assert pr["guarantee"]["zcdp"]["rho_exact"] == "0"
    us = doc["runs"]["US"]["levels"]
    aiannh = [lv for lv in us if lv["level"] == "(AIANNH, 2)"]
    assert aiannh[0]["status"] == "empty domain"  # VT has no AIANNH area
    charged = sum(
        __import__("fractions").Fraction(lv["charged"]["zcdp"]["rho_exact"])
        for lv in us
        if lv["status"] == "tabulated"
    )
    assert str(charged) == doc["guarantee"]["zcdp"]["rho_exact"]
    assert "empty domain" in text or "empty domain" in json.dumps(doc)


def test_a_state_filter_matching_nothing_is_an_empty_us_run(tmp_path: Path) -> None:
    from privtab.data.synth import synthesize

    synthesize(tmp_path / "data", 1_500, states=["10", "72"], seed=4)
    config = demo_params(tmp_path / "params", ["01", "72"])  # Alabama: not in the GRF-C
    code, text = _run(config, tmp_path / "data", tmp_path / "out", "-q")
    assert code == 0, text
    doc = json.loads((tmp_path / "out" / "release.json").read_text())
    assert {lv["status"] for lv in doc["runs"]["US"]["levels"]} == {"empty domain"}
    assert doc["guarantee"] == doc["runs"]["PR"]["guarantee"]


def test_nothing_to_release_is_a_located_input_error(vt: tuple[Path, Path], tmp_path: Path) -> None:
    _, data = vt
    config = demo_params(tmp_path / "params", ["01"])  # no PR run, no US state in the data
    code, text = _run(config, data, tmp_path / "out", "-q")
    assert code == 1, text
    assert "no level of the config has any public population group" in text
    assert "config.json" in text
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_dead_spark_worker_is_one_clear_message(vt: tuple[Path, Path], tmp_path: Path) -> None:
    """Spark local mode whose Python workers die at start (their interpreter is a script
    that exits at once): the run ends with one line, exit code 4, nothing written."""
    import stat
    import sys

    pytest.importorskip("pyspark")
    config, data = vt
    fake = tmp_path / "dying-python"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$*" in *pyspark.daemon*|*pyspark.worker*) exit 1;; esac\n'
        f'exec {sys.executable} "$@"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PYSPARK_PYTHON": str(fake), "PRIVTAB_SPARK_MASTER": "local[1]"}
    args = ["safetab", "run", "--config", str(config), "--data", str(data)]
    args += ["--out", str(tmp_path / "out"), "--engine", "spark", "--seed", "1", "--no-report"]
    proc = subprocess.run(
        [sys.executable, "-m", "privtab.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    errors = [x for x in proc.stderr.splitlines() if x.startswith("privtab: error:")]
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert len(errors) == 1
    assert "job failed" in errors[0]
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dying-python"]


ENGINES = [
    pytest.param("polars", id="polars"),
    pytest.param("spark", id="spark", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("states", [["50"], ["10"], ["72"]], ids=["VT", "DE", "PR"])
def test_one_state_inputs_release_under_the_production_config(
    tmp_path: Path, states: list[str], engine: str
) -> None:
    """VT-only, DE-only and PR-only inputs under the production config (run_us and run_pr
    both on): the levels without public groups are skipped and listed, the rest released."""
    if engine == "spark":
        pytest.importorskip("pyspark")
    from privtab.data import production_config_dir
    from privtab.data.synth import synthesize

    synthesize(tmp_path / "data", 1_200, states=states, seed=6)
    config = production_config_dir() / "config.json"
    out = tmp_path / "out"
    code, text = _run(config, tmp_path / "data", out, "-q", "--engine", engine)
    assert code == 0, text
    doc = json.loads((out / "release.json").read_text())
    statuses = {s: {lv["status"] for lv in r["levels"]} for s, r in doc["runs"].items()}
    if states == ["72"]:
        assert statuses == {"US": {"empty domain"}, "PR": {"tabulated"}}
    else:
        assert statuses["PR"] == {"empty domain"}
        assert "tabulated" in statuses["US"]
