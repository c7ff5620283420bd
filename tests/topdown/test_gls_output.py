"""The derived GLS folder: layout, values, release.json, privacy marking, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from privtab.atomic import OutputRefusedError
from privtab.data.inputs import sha256_file
from privtab.random import SeededSource
from privtab.topdown.gls import tree_gls
from privtab.topdown.gls_output import GLS_COLUMNS, estimates_frame, gls_method, write_gls_folder
from privtab.topdown.tables import pl94_person_cells
from tests.topdown._gls_county import LEVELS, measure, synthetic_county


@pytest.fixture(scope="module")
def solved():  # type: ignore[no-untyped-def]
    county = synthetic_county((2, 1, 2), seed=3)
    ms = measure(county, 1, SeededSource(4))
    return county, tree_gls(county.hierarchy, ms, county.constraints)


def test_folder_layout_and_values(solved, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    county, res = solved
    cells = pl94_person_cells()
    frames = {lv: estimates_frame(res, cells, lv) for lv in LEVELS[:3]}
    source = tmp_path / "release"
    source.mkdir()
    doc = {"kind": "privtab.topdown.release", "private": False, "guarantee": {"rho": 1}}
    out = tmp_path / "gls"
    paths = write_gls_folder(
        out,
        frames,
        document=doc,
        command="topdown gls",
        source=source,
        method=gls_method(LEVELS[:3], cells, ["total (root)"]),
    )
    assert sorted(Path(p).name for p in paths) == sorted(
        f"gls-{lv}.{ext}" for lv in LEVELS[:3] for ext in ("txt", "parquet")
    )
    assert (out / "NOT_PRIVATE").exists()
    meta = json.loads((out / "release.json").read_text())
    assert meta["derived_from"]["release"] == str(source.resolve())
    assert meta["private"] is False
    assert meta["gls"]["cells"] == 298
    for name, info in meta["outputs"]["files"].items():
        assert info["sha256"] == sha256_file(out / name)
    county_txt = pl.read_csv(out / "gls-County.txt", separator="|")
    assert tuple(county_txt.columns) == GLS_COLUMNS
    assert county_txt.height == 298
    back = pl.read_parquet(out / "gls-Tract.parquet")
    assert back.height == 2 * 298
    assert back.equals(frames["Tract"])
    txt = pl.read_csv(out / "gls-Tract.txt", separator="|")
    assert np.abs(txt["ESTIMATE"].to_numpy() - back["ESTIMATE"].to_numpy()).max() <= 5e-7
    # the invariant root total: exact, standard deviation exactly 0
    total = county_txt.filter(pl.col("CELL") == "P0010001")
    assert total["ESTIMATE"][0] == pytest.approx(float(county.truth["c"].sum()), abs=1e-6)
    assert total["STD_DEV"][0] == 0.0
    assert (county_txt["STD_DEV"] >= 0).all()


def test_refuses_to_write_inside_the_release(solved, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, res = solved
    frames = {"County": estimates_frame(res, pl94_person_cells(), "County")}
    source = tmp_path / "release"
    source.mkdir()
    with pytest.raises(OutputRefusedError):
        write_gls_folder(
            source / "gls", frames, document={"private": True}, command="x", source=source
        )
    assert list(source.iterdir()) == []
