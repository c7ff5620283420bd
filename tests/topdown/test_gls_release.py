"""``privtab topdown gls``: the tree GLS of a release's noisy measurements.

* Noise off: the measurements are the truth, so every estimate — spine geounits and every
  tabulation geography (sums of geounits included) — equals an independent tabulation of
  the input records (``test_release.expected_tables``): the adapter's ids, levels, groups
  and tabulation keys are right.
* Seeded noise: the standardized errors ``(estimate − truth)/STD_DEV`` of every cell with
  ``STD_DEV > 0`` have mean ≈ 0 and mean square ≈ 1 per geolevel (a wrong variance, a
  dropped constraint or a mis-mapped geounit moves them far); the invariant totals are
  exact with standard deviation exactly 0.
* The derived folder: layout, ``release.json`` (``derived_from``, the method, what is not
  computed), the test release's marking kept, refusals (inside the release, no ``--nmf``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from privtab.atomic import OutputRefusedError
from privtab.errors import InputError
from privtab.mechanisms import InsecureReleaseWarning
from privtab.random import SeededSource
from privtab.topdown.gls_release import TABULATION_LEVELS, release_gls
from privtab.topdown.run import TopDownOptions, run_release
from tests.conftest import shared_folder
from tests.topdown.conftest import SMALL_STATES
from tests.topdown.test_release import expected_tables

STATES = SMALL_STATES


@pytest.fixture(scope="module")
def data(small_data: Path) -> Path:
    return small_data


@pytest.fixture(scope="module")
def truth(data: Path) -> pl.DataFrame:
    tabs = expected_tables(data)
    return pl.concat([tabs[t] for t in ("P1", "P2", "P3", "P4", "P5")])


# the GLS folders: built once per session, shared read-only by the xdist workers (both run
# this module's tests; tests/conftest.py)
@pytest.fixture(scope="module")
def exact_gls(small_exact_release: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    def build(folder: Path) -> None:
        release_gls(small_exact_release, folder / "gls", to="BLOCK")

    return shared_folder(tmp_path_factory, "gls-exact", build) / "gls"


@pytest.fixture(scope="module")
def seeded_gls(small_seeded_release: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    def build(folder: Path) -> None:
        release_gls(small_seeded_release, folder / "gls", to="BLOCK")

    return shared_folder(tmp_path_factory, "gls-seeded", build) / "gls"


def _joined(folder: Path, level: str, truth: pl.DataFrame) -> pl.DataFrame:
    got = pl.read_parquet(folder / f"gls-{level}.parquet")
    want = truth.filter(pl.col("GEOLEVEL") == level)
    j = want.join(got, on=["GEOID", "CELL"], how="left")
    # a geography none of whose blocks has a unit holds no persons: exactly 0, not listed
    absent = j.filter(pl.col("ESTIMATE").is_null())
    assert (absent.get_column("COUNT") == 0).all(), level
    assert absent.height < j.height, level
    return j.drop_nulls("ESTIMATE")


@pytest.mark.parametrize("level", TABULATION_LEVELS)
def test_noise_off_every_estimate_is_the_truth(
    exact_gls: Path, truth: pl.DataFrame, level: str
) -> None:
    j = _joined(exact_gls, level, truth)
    assert j.height > 0
    err = (j.get_column("ESTIMATE") - j.get_column("COUNT")).abs().max()
    assert err is not None
    assert float(err) < 1e-6 * max(1.0, float(j.get_column("COUNT").max() or 1)), level


@pytest.mark.parametrize("level", ["COUNTY", "TRACT", "BLOCK_GROUP", "BLOCK", "PLACE", "AIANNH"])
def test_seeded_errors_have_the_stated_standard_deviations(
    seeded_gls: Path, truth: pl.DataFrame, level: str
) -> None:
    """Mean and mean square of the standardized errors of one seeded release: hundreds to
    thousands of cells per level (correlated within a geography); the bounds are wide
    enough for one fixed seed and far narrower than a factor-2 variance error."""
    j = _joined(seeded_gls, level, truth).filter(pl.col("STD_DEV") > 0)
    z = ((j.get_column("ESTIMATE") - j.get_column("COUNT")) / j.get_column("STD_DEV")).to_numpy()
    assert z.size > 200, level
    assert abs(float(z.mean())) < 0.15, level
    assert 0.8 < float((z**2).mean()) < 1.25, level


def test_invariant_totals_are_exact(seeded_gls: Path, truth: pl.DataFrame) -> None:
    for level in ("NATION", "STATE"):
        j = _joined(seeded_gls, level, truth).filter(pl.col("CELL") == "P0010001")
        assert j.height == (1 if level == "NATION" else len(STATES))
        assert (j.get_column("ESTIMATE") - j.get_column("COUNT")).abs().max() < 1e-6
        assert (j.get_column("STD_DEV") == 0).all()


def test_the_derived_folder(seeded_gls: Path) -> None:
    doc = json.loads((seeded_gls / "release.json").read_text())
    assert doc["derived_from"]["command"] == "privtab topdown gls"
    assert doc["kind"] == "privtab.topdown.gls"
    assert doc["derived_from"]["kind"] == "privtab.topdown.release"
    assert doc["private"] is False
    assert (seeded_gls / "NOT_PRIVATE").exists()
    assert doc["gls"]["cells"] == 298
    assert set(doc["gls"]["levels"]) >= set(TABULATION_LEVELS)
    assert "not_computed" in doc["gls"]
    for name, info in doc["outputs"]["files"].items():
        path = seeded_gls / name
        assert path.exists(), name
        if name.endswith(".parquet"):
            meta = pl.read_parquet_schema(path)
            assert meta
            assert pl.read_parquet(path).height == info["rows"], name
    head = (seeded_gls / "gls-COUNTY.txt").read_text().splitlines()[0]
    assert head == "GEOID|CELL|ESTIMATE|STD_DEV"


def test_refusals(data: Path, small_seeded_release: Path, tmp_path: Path) -> None:
    rel = small_seeded_release
    with pytest.raises(OutputRefusedError):
        release_gls(rel, rel / "gls")
    no_nmf = tmp_path / "plain"
    # Puerto Rico's run only: what is refused is a release without measurements, whatever
    # its runs (one state to draw instead of three)
    opts = TopDownOptions(allow_insecure=True, report=False, source=SeededSource(1), runs=("pr",))
    with pytest.warns(InsecureReleaseWarning):
        run_release(data, no_nmf, opts, progress=lambda _m: None)
    with pytest.raises(InputError, match="--nmf"):
        release_gls(no_nmf, tmp_path / "g")
    assert not (tmp_path / "g").exists()


def test_the_command(seeded_gls: Path, small_seeded_release: Path, tmp_path: Path) -> None:
    from privtab.cli import app

    rel = small_seeded_release
    res = CliRunner().invoke(
        app, ["topdown", "gls", "--release", str(rel), "--out", str(tmp_path / "g"),
              "--to", "TRACT", "--json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["runs"] == ["US-persons", "PR-persons"]
    assert "gls-TRACT.txt" in doc["files"]
    assert "gls-BLOCK_GROUP.txt" not in doc["files"]
    bad = CliRunner().invoke(app, ["topdown", "gls", "--release", str(tmp_path / "none"),
                                   "--out", str(tmp_path / "h")])  # fmt: skip
    assert bad.exit_code == 1
    assert "release.json" in bad.output
    assert np.isfinite(
        pl.read_parquet(tmp_path / "g" / "gls-TRACT.parquet")["STD_DEV"].to_numpy()
    ).all()


def test_analyze_ci_reads_the_gls_folder(seeded_gls: Path, tmp_path: Path) -> None:
    """``privtab analyze ci --release G``: per level, ``ESTIMATE ∓ z·STD_DEV`` (z of the
    level), written as a derived folder that stays marked not private."""
    from statistics import NormalDist

    from privtab.cli import app

    out = tmp_path / "ci"
    res = CliRunner().invoke(
        app, ["analyze", "ci", "--release", str(seeded_gls), "--level", "0.9",
              "--out", str(out), "--json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    z = NormalDist().inv_cdf(0.95)
    assert doc["z"] == pytest.approx(z, rel=1e-12)
    assert doc["gls-COUNTY_rows"] == pl.read_parquet(seeded_gls / "gls-COUNTY.parquet").height
    county = pl.read_parquet(out / "gls-COUNTY.parquet")
    assert county.columns == ["GEOID", "CELL", "ESTIMATE", "STD_DEV", "MOE90", "LOWER90",
                              "UPPER90"]  # fmt: skip
    sd, est = county["STD_DEV"].to_numpy(), county["ESTIMATE"].to_numpy()
    np.testing.assert_allclose(county["UPPER90"].to_numpy(), est + z * sd, rtol=1e-12)
    np.testing.assert_allclose(county["LOWER90"].to_numpy(), est - z * sd, rtol=1e-12)
    assert (out / "NOT_PRIVATE").exists()
    meta = json.loads((out / "release.json").read_text())
    assert meta["derived_from"]["kind"] == "privtab.topdown.gls"
    assert meta["private"] is False
    assert set(meta["outputs"]["files"]) == {p.name for p in out.glob("*.parquet")}


def test_analyze_refusals(seeded_gls: Path, small_seeded_release: Path, tmp_path: Path) -> None:
    from privtab.cli import app

    rel = small_seeded_release
    res = CliRunner().invoke(app, ["analyze", "ci", "--release", str(rel)])
    assert res.exit_code == 2
    assert "topdown gls" in res.output
    res = CliRunner().invoke(app, ["analyze", "combine", "--release", str(seeded_gls)])
    assert res.exit_code == 2
    assert "analyze ci" in res.output
    # a changed file is named, nothing written
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(seeded_gls, copy)
    pl.read_parquet(copy / "gls-TRACT.parquet").head(3).write_parquet(copy / "gls-TRACT.parquet")
    res = CliRunner().invoke(
        app, ["analyze", "ci", "--release", str(copy), "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 1
    assert "gls-TRACT.parquet" in res.output
    assert not (tmp_path / "o").exists()
