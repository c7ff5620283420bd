"""``analyze … --release``: the release's own thresholds, and folders that keep its metadata.

Issue 19: ``analyze combine --release R --thresholds 20,60,150`` on a release with other
thresholds exits 2 naming both; without ``--thresholds`` it uses the release's (per level,
from ``release.json``); folders written by ``analyze`` carry a ``release.json`` pointing
to the source release and keeping its privacy status; files are 0644 whatever the umask.
The release is a small seeded (NOT private) run of the production configuration, whose
levels have three different threshold sets.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from privtab.cli import app
from privtab.data import production_config_dir, read_reference
from privtab.release import read_release_document

runner = CliRunner()


@pytest.fixture(scope="module")
def release(demo_de_pr: Path) -> Path:
    """The session's ``privtab demo --persons 3000 --states DE,PR --seed 1`` (conftest.py),
    shared with tests/cli/test_columns.py: only read here (outputs go to ``tmp_path``)."""
    return demo_de_pr / "demo" / "release"


@pytest.fixture
def umask_077() -> Iterator[None]:
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def test_thresholds_that_are_not_the_releases_are_refused(release: Path, tmp_path: Path) -> None:
    out = tmp_path / "combined"
    args = ["analyze", "combine", "--release", str(release), "--thresholds", "20,60,150"]
    res = runner.invoke(app, [*args, "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert "--thresholds 20,60,150" in res.stderr
    assert "4971,19971,149971" in res.stderr  # the release's (COUNTY, 1) thresholds
    assert "971,4971,19971" in res.stderr  # and (COUNTY, 2)
    assert not out.exists()


def test_without_thresholds_each_group_gets_its_levels(release: Path, tmp_path: Path) -> None:
    out = tmp_path / "combined"
    res = runner.invoke(
        app, ["analyze", "combine", "--release", str(release), "--out", str(out), "--json"]
    )
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout)
    doc = read_release_document(release)
    assert payload["thresholds"] == {k: list(v) for k, v in doc.thresholds().items()}
    t1 = pl.read_parquet(out / "t1.parquet")
    # independent: the level of a group is (REGION_TYPE, LEVEL of its iteration)
    levels = {c: it.level for c, it in read_reference(production_config_dir()).iterations.items()}
    ths = {k.split(" ", 1)[1]: v for k, v in doc.thresholds().items()}
    checked = 0
    for row in t1.filter(pl.col("STAGE1_COUNT").is_not_null()).head(400).iter_rows(named=True):
        th = ths[f"({row['REGION_TYPE']}, {levels[row['ITERATION_CODE']]})"]
        sd = math.sqrt(row["STAGE1_VARIANCE"])
        expected = min(abs(row["STAGE1_COUNT"] - t) / sd for t in th)
        assert row["STAGE1_THRESHOLD_SD"] == pytest.approx(expected, rel=1e-12)
        checked += 1
    assert checked > 50
    assert len({tuple(v) for v in ths.values()}) == 3  # the check can tell the levels apart


@pytest.mark.usefixtures("umask_077")
def test_analyze_folders_carry_the_source_release_json(release: Path, tmp_path: Path) -> None:
    out = tmp_path / "intervals"
    res = runner.invoke(app, ["analyze", "ci", "--release", str(release), "--out", str(out)])
    assert res.exit_code == 0, res.output
    derived = read_release_document(out)
    source = read_release_document(release)
    assert derived.private is False
    assert source.private is False
    assert derived.guarantee == source.guarantee
    assert derived.thresholds() == source.thresholds()
    assert derived.extra["derived_from"] == {
        "release": str(release.resolve()),
        "command": "analyze ci",
    }
    assert set(derived.extra["outputs"]["files"]) == {"t1.parquet", "t2.parquet"}
    assert (out / "NOT_PRIVATE").is_file()
    for name in ("t1.parquet", "t2.parquet"):
        meta = pq.read_metadata(out / name).metadata
        assert meta[b"privtab.private"] == b"false"
    for f in out.iterdir():
        if f.is_file() and not f.name.startswith("."):
            assert f.stat().st_mode & 0o777 == 0o644, f
