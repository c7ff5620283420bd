"""The synthetic nation: determinism, validity, skew, multiplicity, geography correlation,
atomic output and memory-bounded streaming."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from privtab.atomic import OutputExistsError, OutputRefusedError
from privtab.data import (
    GRFC_COLUMNS,
    GeoLevel,
    InputValidationError,
    ReferenceData,
    load_inputs,
    read_persons,
)
from privtab.data.convert import convert_file
from privtab.data.levels import Granularity
from privtab.data.membership import expand_iterations
from privtab.data.persons import scan_persons
from privtab.data.synth import STATES, FlatCategorical, cenrace_table, resolve_states, synthesize

from .conftest import snapshot

N = 120_000


@pytest.fixture(scope="module")
def nation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "nation"
    synthesize(out, N, seed=11)
    return out


@pytest.fixture(scope="module")
def persons(nation: Path) -> pl.DataFrame:
    return scan_persons(nation / "person-records.txt").collect()


def test_summary_and_validity(nation: Path) -> None:
    meta = json.loads((nation / "synth.json").read_text())
    assert meta["synthetic"] is True
    assert meta["private"] is False
    assert meta["persons"] == N
    assert len(meta["states"]) == 52
    assert sum(meta["persons_by_state"].values()) == N
    inputs = load_inputs(None, nation)  # the output passes our own validation
    assert inputs.person_rows == N
    geo = inputs.geography
    assert len(geo.domain(GeoLevel.STATE)) == 51
    assert len(geo.domain(GeoLevel.COUNTY)) == 3143
    assert len(geo.domain(GeoLevel.PR_COUNTY)) == 78
    assert len(geo.domain(GeoLevel.PLACE)) > 100
    assert len(geo.domain(GeoLevel.AIANNH)) > 10
    assert len(geo.domain(GeoLevel.PR_PLACE)) > 5


def test_fips_style_ids(persons: pl.DataFrame) -> None:
    states = set(persons["TABBLKST"].unique().to_list())
    assert states == {s.fips for s in STATES}
    # county FIPS codes are odd, as real ones
    assert (persons["TABBLKCOU"].cast(pl.Int32) % 2 == 1).all()
    assert persons["TABTRACTCE"].str.len_chars().eq(6).all()
    assert persons["TABBLK"].str.contains(r"^[1-9]0\d\d$").all()


def test_population_is_skewed(persons: pl.DataFrame) -> None:
    by_state = persons.group_by("TABBLKST").len()
    ca = by_state.filter(pl.col("TABBLKST") == "06")["len"].item()
    wy = by_state.filter(pl.col("TABBLKST") == "56")["len"].item()
    assert 40 < ca / wy < 95  # 2020: 39.5 M vs 0.58 M
    counties = persons.group_by("TABBLKST", "TABBLKCOU").len()["len"]
    assert counties.max() > 200 * max(counties.min(), 1)
    assert (counties <= 5).sum() > 50  # many tiny counties ...
    assert counties.max() > 2_000  # ... and some huge ones


def test_multiplicity(persons: pl.DataFrame) -> None:
    race = [f"QRACE{i}" for i in range(1, 9)]
    k = persons.select(pl.sum_horizontal([pl.col(c) != "Null" for c in race]).alias("k"))["k"]
    share = (k.value_counts().sort("k")["count"] / N).to_list()
    assert share[0] == pytest.approx(0.80, abs=0.01)
    assert share[1] == pytest.approx(0.14, abs=0.01)
    assert k.max() == 8
    assert k.min() == 1


def test_detailed_groups_range_from_empty_to_large(nation: Path, ref: ReferenceData) -> None:
    df = read_persons(nation / "person-records.txt", ref, None)
    cells = df.group_by("RACE_KEY1", "RACE_KEY2", "QSPAN").len()
    pairs = expand_iterations(cells, ref, 2, Granularity.DETAILED)
    counts = (
        pairs.join(cells, on=["RACE_KEY1", "RACE_KEY2", "QSPAN"])
        .group_by("ITERATION_CODE")
        .agg(pl.col("len").sum())
    )
    domain = len(ref.select(2, Granularity.DETAILED))
    populated = counts.height
    assert populated < 0.8 * domain  # many detailed groups are empty nationally
    assert populated > 300
    assert counts["len"].max() > 0.05 * N  # and some are very large


def test_geography_correlation(persons: pl.DataFrame, nation: Path) -> None:
    grfc = pl.read_csv(nation / "GRF-C.txt", separator="|", infer_schema=False)
    p = persons.join(grfc, on=["TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK"])
    aian = pl.col("QRACE1").cast(pl.Int32).is_between(5000, 6999)
    inside = p.filter(pl.col("AIANNHCE") != "9999").select(aian.mean()).item()
    outside = p.filter(pl.col("AIANNHCE") == "9999").select(aian.mean()).item()
    assert inside > 10 * outside
    hisp = pl.col("QSPAN") != "9950"
    share = p.group_by("TABBLKST").agg(hisp.mean().alias("h"))
    h = dict(zip(share["TABBLKST"], share["h"], strict=True))
    assert h["72"] > 0.9
    assert h["35"] > 0.3 > h["54"]  # New Mexico vs West Virginia
    age = persons["QAGE"].cast(pl.Int32)
    assert 30 <= age.median() <= 45
    assert age.max() <= 115
    assert (persons["QSEX"] == "2").mean() == pytest.approx(0.5, abs=0.02)


def test_deterministic_and_chunk_invariant(tmp_path: Path, nation: Path) -> None:
    a = synthesize(tmp_path / "a", 70_000, seed=5, states="AL,AK,PR", chunk_rows=1 << 16)
    b = synthesize(tmp_path / "b", 70_000, seed=5, states="AL,AK,PR", chunk_rows=1 << 20)
    c = synthesize(tmp_path / "c", 70_000, seed=6, states="AL,AK,PR")
    for f in ("person-records", "GRF-C", "household-records", "cef-units", "cef-persons"):
        assert (a.out / f"{f}.txt").read_bytes() == (b.out / f"{f}.txt").read_bytes()
    assert (a.out / "person-records.txt").read_bytes() != (
        c.out / "person-records.txt"
    ).read_bytes()
    assert a.persons_by_state == b.persons_by_state


def test_parquet_output_and_round_trip(tmp_path: Path) -> None:
    t = synthesize(tmp_path / "t", 30_000, seed=3, states="HI,72")
    p = synthesize(tmp_path / "p", 30_000, seed=3, states="HI,72", fmt="parquet")
    nulls = {
        "person-records": [f"QRACE{i}" for i in range(1, 9)],
        "household-records": [f"QRACE{i}" for i in range(1, 9)],
        "cef-units": ["QGQTYP"],
        "cef-persons": ["QGQTYP"],
        "GRF-C": [],
    }
    for stem, null in nulls.items():
        a = pl.read_csv(t.out / f"{stem}.txt", separator="|", infer_schema=False)
        b = pl.read_parquet(p.out / f"{stem}.parquet")
        b = b.with_columns(pl.col(c).cast(pl.String) for c in b.columns)
        b = b.with_columns(pl.col(c).fill_null("Null") for c in null)
        assert a.equals(b), stem
    load_inputs(None, p.out)
    # txt -> parquet -> txt is byte-identical
    convert_file(t.out / "person-records.txt", tmp_path / "x.parquet")
    convert_file(tmp_path / "x.parquet", tmp_path / "x.txt")
    assert (tmp_path / "x.txt").read_bytes() == (t.out / "person-records.txt").read_bytes()
    convert_file(t.out / "GRF-C.txt", tmp_path / "g.parquet")
    convert_file(tmp_path / "g.parquet", tmp_path / "g.txt")
    # the conversion keeps SafeTab-P's columns (TABBLKGRPCE and COUSUBFP are not carried)
    grfc = pl.read_csv(t.out / "GRF-C.txt", separator="|", infer_schema=False)
    kept = grfc.select(GRFC_COLUMNS).write_csv(separator="|", quote_style="never")
    assert (tmp_path / "g.txt").read_text() == kept
    with pytest.raises(FileExistsError):
        convert_file(t.out / "GRF-C.txt", tmp_path / "g.parquet")


def test_atomic_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    before = snapshot(tmp_path)
    with pytest.raises(OutputExistsError):
        synthesize(out, 1000, states="DC")
    assert snapshot(tmp_path) == before

    def boom(done: int, total: int, seconds: float) -> None:
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        synthesize(tmp_path / "new", 200_000, states="DC", chunk_rows=1 << 16, progress=boom)
    assert snapshot(tmp_path) == before  # no partial output, no temporary directory left
    # --overwrite never deletes a folder privtab did not write ...
    with pytest.raises(OutputRefusedError, match="not written by privtab"):
        synthesize(out, 1000, states="DC", overwrite=True)
    assert snapshot(tmp_path) == before
    # ... but replaces one it wrote
    (out / "keep.txt").unlink()
    synthesize(out, 500, states="DC")
    r = synthesize(out, 1000, states="DC", overwrite=True)
    assert r.persons_by_state == {"11": 1000}


def test_zero_persons_and_bad_arguments(tmp_path: Path) -> None:
    r = synthesize(tmp_path / "z", 0, states="VT")
    assert (r.out / "person-records.txt").read_text().count("\n") == 1
    load_inputs(None, r.out, allow_empty=True)
    with pytest.raises(InputValidationError, match="no_persons"):
        load_inputs(None, r.out)
    with pytest.raises(ValueError, match="unknown state"):
        resolve_states("XX")
    with pytest.raises(ValueError, match="format"):
        synthesize(tmp_path / "f", 10, fmt="csv")  # type: ignore[arg-type]
    assert [s.fips for s in resolve_states("us")][-1] == "56"
    assert [s.fips for s in resolve_states("PR,1")] == ["01", "72"]


def test_flat_categorical_matches_probabilities() -> None:
    rng = np.random.default_rng(0)
    probs = [np.array([0.5, 0.0, 0.5]), np.array([0.1, 0.2, 0.3, 0.4]), np.array([1.0])]
    vals = [np.array([1, 2, 3]), np.array([10, 20, 30, 40]), np.array([7])]
    fc = FlatCategorical(probs, vals)
    n = 200_000
    ids = rng.integers(0, 3, n)
    got = fc.sample(ids, rng.random(n))
    for d, (p, v) in enumerate(zip(probs, vals, strict=True)):
        sel = got[ids == d]
        freq = np.array([(sel == x).mean() for x in v])
        # 5 standard errors: false failure probability far below 1e-5
        assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / sel.size) + 1e-12)
    # edge uniforms
    assert fc.sample(np.array([0, 1, 1]), np.array([0.0, 0.0, 1 - 1e-16])).tolist() == [1, 10, 40]


def test_cenrace_order() -> None:
    t = cenrace_table(6)
    assert t[0b000001] == 1  # White alone
    assert t[0b100000] == 6  # Some Other Race alone
    assert t[0b000011] == 7  # White and Black
    assert t[0b111111] == 63


def _peak_rss_mb(persons: int, out: Path) -> float:
    code = (
        "import resource, sys\n"
        "from privtab.data.synth import synthesize\n"
        f"synthesize({str(out)!r}, {persons}, seed=1, states='CA,TX,NY', chunk_rows=1 << 16)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(res.stdout.strip())


def _memory_check(tmp_path: Path, small: int, large: int, slack_mb: float) -> None:
    a = _peak_rss_mb(small, tmp_path / "small")
    b = _peak_rss_mb(large, tmp_path / "large")
    # holding the rows would need ~100 bytes per person; streaming needs one chunk
    assert b - a < slack_mb, (a, b)


def test_memory_bounded_streaming(tmp_path: Path) -> None:
    _memory_check(tmp_path, 200_000, 2_000_000, slack_mb=60)


@pytest.mark.slow
def test_memory_bounded_streaming_10m(tmp_path: Path) -> None:
    _memory_check(tmp_path, 1_000_000, 10_000_000, slack_mb=80)


def test_aiannh_codes_lie_in_a_production_area_type(tmp_path: Path) -> None:
    """Every AIANNHCE the generator writes falls in one of production's area-type ranges
    (``AIANNHCE_ranges.csv``): 4990..4999 belong to none, and TopDown's spine refuses them
    (a nation's areas spread over 0001..9998 used to hit them)."""
    import polars as pl

    from privtab.data.synth import synthesize
    from privtab.topdown.spine import AIANNHCE_RANGES

    synthesize(tmp_path / "d", 30_000, states=["40", "02", "04", "35", "06"], seed=11)
    codes = pl.read_csv(tmp_path / "d" / "GRF-C.txt", separator="|", infer_schema=False)[
        "AIANNHCE"
    ].unique()
    used = [int(c) for c in codes if c != "9999"]
    assert len(used) > 40  # here 46 areas: the old spread (step 217) wrote 4992
    assert any(c > 4999 for c in used)
    for c in used:
        assert any(lo <= c <= hi for lo, hi in AIANNHCE_RANGES.values()), c
