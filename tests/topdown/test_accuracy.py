"""``privtab topdown accuracy``: a release's errors against its synthetic truth.

* The truth tabulation equals an independent one (``test_release.expected_tables``:
  polars group-bys of the C1 records, no histogram, no sparse matrices) cell for cell.
* Noise off: every error, the noisy measurements' included, is exactly 0 and every
  geography passes the reliability criterion.
* Seeded noise: the summary's MAE, RMSE and ME by geolevel and table equal a direct
  computation from the published and the independent true tables; the reliability
  shares equal a plain-Python recomputation; the noisy measurements' RMSE agrees with
  the RMSE their exact variances predict (a wrong geounit ↔ truth mapping or a wrong cell
  would add the true counts' spread to the error, far outside the bound).
* The command: one JSON object; a truth that is not the release's data is refused,
  naming the geography.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from privtab.errors import InputError
from privtab.topdown.accuracy import GROUP_CELLS, Accuracy, accuracy, truth_tables
from tests.topdown.conftest import write_small_population
from tests.topdown.test_release import expected_tables


@pytest.fixture(scope="module")
def independent(small_data: Path) -> pl.DataFrame:
    tabs = expected_tables(small_data)
    return pl.concat([tabs[t] for t in ("P1", "P2", "P3", "P4", "P5")])


@pytest.fixture(scope="module")
def result(small_seeded_release: Path, small_data: Path) -> Accuracy:
    return accuracy(small_seeded_release, small_data)


def test_truth_equals_an_independent_tabulation(
    small_data: Path, independent: pl.DataFrame
) -> None:
    mine = truth_tables(small_data)
    keys = ["GEOLEVEL", "GEOID", "CELL"]
    j = independent.join(mine, on=keys, how="full", suffix="_MINE", coalesce=True)
    assert j.height == independent.height == mine.height
    assert (j.get_column("COUNT") == j.get_column("COUNT_MINE")).all()


def test_noise_off_every_error_is_zero(small_exact_release: Path, small_data: Path) -> None:
    acc = accuracy(small_exact_release, small_data)
    assert acc.private is False
    for c in ("MAE", "RMSE", "ME"):
        assert (acc.errors.get_column(c) == 0).all(), c
    assert set(acc.errors.get_column("TABLE")) == {"TOTAL", "P1", "P2", "P3", "P4", "P5"}
    assert (acc.reliability.get_column("PASS_SHARE") == 1).all()
    assert acc.measurements is not None
    m = acc.measurements
    assert set(m.get_column("QUERY")) == {"total", "hispanic", "cenrace"}
    assert (m.get_column("NOISY_MAE") == 0).all()
    assert (m.get_column("TOPDOWN_MAE") == 0).all()


def _published(release: Path) -> pl.DataFrame:
    return pl.concat(
        pl.read_parquet(release / "pl94" / f"{t}.parquet") for t in ("P1", "P2", "P3", "P4", "P5")
    )


def test_errors_equal_a_direct_computation(
    result: Accuracy, small_seeded_release: Path, independent: pl.DataFrame
) -> None:
    pub = _published(small_seeded_release)
    j = pub.join(independent, on=["GEOLEVEL", "GEOID", "CELL"], suffix="_T")
    err = (j["COUNT"] - j["COUNT_T"]).cast(pl.Float64).alias("E")
    j = j.with_columns(err, pl.col("CELL").str.slice(0, 4).alias("T"))
    allbins = result.errors.filter(pl.col("SIZE_BIN") == "all")
    checked = 0
    for (level, t), sub in j.group_by("GEOLEVEL", "T"):
        table = f"P{str(t)[3]}"
        row = allbins.filter((pl.col("GEOLEVEL") == level) & (pl.col("TABLE") == table))
        e = sub["E"].to_numpy()
        assert row["CELLS"][0] == e.size
        assert row["MAE"][0] == pytest.approx(np.abs(e).mean(), abs=1e-12)
        assert row["RMSE"][0] == pytest.approx(np.sqrt((e**2).mean()), abs=1e-12)
        assert row["ME"][0] == pytest.approx(e.mean(), abs=1e-12)
        checked += 1
    assert checked == 8 * 5
    # the size bins partition the geographies
    tot = result.errors.filter(pl.col("TABLE") == "TOTAL")
    for level, sub in tot.group_by("GEOLEVEL"):
        bins = sub.filter(pl.col("SIZE_BIN") != "all")["GEOGRAPHIES"].sum()
        assert bins == sub.filter(pl.col("SIZE_BIN") == "all")["GEOGRAPHIES"][0], level
    assert (result.errors.get_column("MAE") > 0).any()


def test_reliability_equals_a_plain_recomputation(
    result: Accuracy, small_seeded_release: Path, independent: pl.DataFrame
) -> None:
    pub = _published(small_seeded_release)
    for level in ("BLOCK_GROUP", "PLACE"):
        t = independent.filter(pl.col("GEOLEVEL") == level)
        p = pub.filter(pl.col("GEOLEVEL") == level)
        true = {(g, c): n for g, c, n in t.select("GEOID", "CELL", "COUNT").iter_rows()}
        publ = {(g, c): n for g, c, n in p.select("GEOID", "CELL", "COUNT").iter_rows()}
        bins: dict[int, list[bool]] = {}
        for g in sorted({g for g, _ in true}):
            total = true[g, "P0010001"]
            if total == 0:
                continue
            counts = [true[g, c] for c in GROUP_CELLS]
            top = GROUP_CELLS[counts.index(max(counts))]
            ptot = publ[g, "P0010001"]
            share_p = 100 * publ[g, top] / ptot if ptot else 0.0
            ok = abs(share_p - 100 * true[g, top] / total) <= 5
            bins.setdefault(min(total // 50 * 50, 1000), []).append(ok)
        got = result.reliability.filter(pl.col("GEOLEVEL") == level)
        assert got.height == len(bins), level
        for (lo, oks), row in zip(sorted(bins.items()), got.iter_rows(named=True), strict=True):
            assert row["BIN"].startswith(f"{lo}"), (level, row)
            assert row["GEOGRAPHIES"] == len(oks)
            assert row["PASS_SHARE"] == pytest.approx(sum(oks) / len(oks))


def test_noisy_measurements_have_their_stated_error(result: Accuracy) -> None:
    """Per spine level and query with ≥ 150 measured cells: the noisy RMSE over its
    cells within 25 % of the RMSE of the exact noise law. With n ≥ 150 independent
    draws the relative sd of the RMSE is ≈ 1/√(2n) ≤ 5.8 %, so a false failure needs a
    4-sd deviation (< 10⁻⁴ per check); a cell compared with the wrong truth (a shifted
    geounit, another cell) adds the spread of the true counts (tens to hundreds)."""
    m = result.measurements
    assert m is not None
    sizes = {"total": 1, "hispanic": 2, "cenrace": 63}
    checked = 0
    for row in m.iter_rows(named=True):
        if row["GEOUNITS"] * sizes[row["QUERY"]] < 150:
            continue
        assert 0.75 < row["NOISY_RMSE"] / row["STATED_RMSE"] < 1.25, row
        checked += 1
    assert checked >= 3


def test_the_command(small_seeded_release: Path, small_data: Path, tmp_path: Path) -> None:
    from privtab.cli import app

    rel, truth = str(small_seeded_release), str(small_data)
    base = ["topdown", "accuracy", "--release", rel, "--truth", truth]
    res = CliRunner().invoke(app, [*base, "--json", "--html", str(tmp_path / "acc.html")])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["release_private"] is False
    page = (tmp_path / "acc.html").read_text()
    assert "Largest group" in page
    assert "for synthetic or public data only" in page
    inside = CliRunner().invoke(app, [*base, "--html", str(small_seeded_release / "acc.html")])
    assert inside.exit_code == 2
    assert not (small_seeded_release / "acc.html").exists()
    assert {"errors", "reliability", "measurements"} <= set(doc)
    text = CliRunner().invoke(app, base)
    assert text.exit_code == 0, text.output
    assert "Mean absolute error" in text.output
    other = write_small_population(tmp_path, 6)
    with pytest.raises(InputError, match="not the data the release was made from"):
        accuracy(small_seeded_release, other)
    bad = CliRunner().invoke(app, [*base[:-1], str(other)])
    assert bad.exit_code == 1
    assert "GEOID" in bad.output


def test_size_bins_and_an_empty_reliability() -> None:
    from privtab.topdown.accuracy import reliability, size_bin

    totals = pl.DataFrame({"N": [0, 1, 9, 10, 99, 100, 249, 250, 999, 1000, 99_999, 100_000]})
    got = totals.select(size_bin(pl.col("N"))).to_series().to_list()
    assert got == ["0", "1-9", "1-9", "10-99", "10-99", "100-249", "100-249", "250-499",
                   "500-999", "1,000-9,999", "10,000-99,999", "100,000+"]  # fmt: skip
    empty = pl.DataFrame(
        schema={"GEOLEVEL": pl.String, "GEOID": pl.String, "CELL": pl.String,
                "PUBLISHED": pl.Int64, "TRUE": pl.Int64}
    )  # fmt: skip
    table, thresholds = reliability(empty)
    assert table.is_empty()
    assert thresholds == {"BLOCK_GROUP": None, "PLACE": None}
