"""The noisy measurement file: written as the measurements are drawn, read back exactly,
marked private or not, usable as the measurement source, malformed files refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privtab.random import SeededSource
from privtab.release.marking import PRIVATE_KEY
from privtab.topdown.histogram import CELLS
from privtab.topdown.inputs import SparseHistograms, block_histograms, block_units
from privtab.topdown.measure import MeasurementBatch, Measurer
from privtab.topdown.nmf import NMFError, NMFSource, NMFWriter, read_nmf
from privtab.topdown.spine import Spine, budget_shares, us_spine
from privtab.topdown.strategy import production_strategy
from tests.topdown._support import population


def _write(folder: Path, seed: int = 1) -> tuple[Spine, dict[tuple[str, int], MeasurementBatch]]:
    pop = population(31)
    units = block_units(pop.units)
    sp = us_spine(pop.grfc, units)
    s = production_strategy("us")
    levels = SparseHistograms.from_blocks(block_histograms(pop.persons), sp, CELLS).levels(sp)
    h = sp.hierarchy
    m = Measurer(s, budget_shares(h, s.geolevel_shares), source=SeededSource(seed))
    batches = {}
    with NMFWriter(folder, s, sp, private=m.private) as w:
        for k, lv in enumerate(h.levels):
            # two batches per level, as a run draws them parent by parent
            cut = h.size(k) // 2
            for part in (range(0, cut), range(cut, h.size(k))):
                if len(part):
                    b = m.measure(lv, part, levels[k].dense(part))
                    w.add(b)
                    batches[(lv, part.start)] = b
    return sp, batches


def test_written_and_read_back_exactly(tmp_path: Path) -> None:
    sp, batches = _write(tmp_path / "nmf")
    nmf = read_nmf(tmp_path / "nmf")
    assert nmf.strategy == production_strategy("us")
    assert nmf.private is False
    meta = pq.read_schema(tmp_path / "nmf" / "dpqueries.parquet").metadata
    assert meta[PRIVATE_KEY.encode()] == b"false"
    h = sp.hierarchy
    source = NMFSource(nmf, h)
    for (lv, _start), b in batches.items():
        back = source.measure(lv, b.units)
        for q, m in b.queries.items():
            assert np.array_equal(back.queries[q].values, m.values), (lv, q)
            assert back.queries[q].variances == m.variances
    ids = set(nmf.table.get_column("geocode"))
    measured = {
        str(h.unit_ids[k][i])
        for k, lv in enumerate(h.levels)
        for i in range(h.size(k))
        if budget_shares(h, production_strategy("us").geolevel_shares).share(lv, i) > 0
    }
    assert ids == measured  # bypassed geounits have no rows
    doc = json.loads((tmp_path / "nmf" / "nmf.json").read_text())
    assert doc["rows"] == nmf.table.height
    assert doc["format"] == "privtab-topdown-nmf"


def test_a_partial_draw_cannot_be_published_and_a_failed_write_leaves_nothing(
    tmp_path: Path,
) -> None:
    pop = population(32)
    sp = us_spine(pop.grfc)
    s = production_strategy("us")
    m = Measurer(s, source=SeededSource(1))
    hists = np.zeros((1, CELLS), dtype=np.int64)
    b = m.measure("US", range(1), hists, needed={"detailed": np.zeros(CELLS, dtype=bool)})
    with (
        pytest.raises(ValueError, match="every cell drawn"),
        NMFWriter(tmp_path / "n", s, sp, private=False) as w,
    ):
        w.add(b)
    assert not (tmp_path / "n" / "dpqueries.parquet").exists()
    assert not (tmp_path / "n" / "nmf.json").exists()
    assert [p.name for p in (tmp_path / "n").iterdir()] == []


def _corrupt(folder: Path, change: Callable[[pl.DataFrame], pl.DataFrame]) -> None:
    path = folder / "dpqueries.parquet"
    t = change(pl.read_parquet(path))
    pq.write_table(t.to_arrow().cast(pa.schema(t.to_arrow().schema)), path)


def _set_row2(column: str, value: pl.Expr) -> Callable[[pl.DataFrame], pl.DataFrame]:
    """Replace ``column`` in the third row of the table by ``value``."""
    row2 = pl.int_range(pl.len()) == 2
    return lambda t: t.with_columns(
        pl.when(row2).then(value).otherwise(pl.col(column)).alias(column)
    )


@pytest.mark.parametrize(
    ("change", "column", "message"),
    [
        (_set_row2("query", pl.lit("sex")), "query", "not measured"),
        (_set_row2("geolevel", pl.lit("Place")), "geolevel", "not measured"),
        (_set_row2("variance", pl.lit("-3/2")), "variance", "positive fraction"),
        (_set_row2("value", pl.col("value").list.head(1)), "value", "cells"),
        (lambda t: pl.concat([t, t.slice(2, 1)]), "geocode", "measured twice"),
        (lambda t: t.drop("variance"), "variance", "missing column"),
    ],
)
def test_malformed_files_are_refused_with_their_location(
    tmp_path: Path, change: Callable[[pl.DataFrame], pl.DataFrame], column: str, message: str
) -> None:
    _write(tmp_path / "nmf")
    _corrupt(tmp_path / "nmf", change)
    with pytest.raises(NMFError) as err:
        read_nmf(tmp_path / "nmf")
    assert err.value.column == column
    assert message in err.value.message
    assert err.value.file is not None
    assert err.value.file.endswith("dpqueries.parquet")
    if column not in ("variance",) or "missing" not in message:
        assert err.value.row is not None


def test_bad_metadata_is_refused(tmp_path: Path) -> None:
    _write(tmp_path / "nmf")
    meta = tmp_path / "nmf" / "nmf.json"
    doc = json.loads(meta.read_text())
    meta.write_text(json.dumps({**doc, "format": "census"}))
    with pytest.raises(NMFError, match="not a privtab-topdown-nmf"):
        read_nmf(tmp_path / "nmf")
    meta.write_text(json.dumps({**doc, "version": 9}))
    with pytest.raises(NMFError, match="version"):
        read_nmf(tmp_path / "nmf")
    doc["strategy"]["geolevel_shares"]["US"] = "1/2"
    meta.write_text(json.dumps(doc))
    with pytest.raises(NMFError.__mro__[1], match="geolevel_shares"):
        read_nmf(tmp_path / "nmf")
    meta.write_text("{")
    with pytest.raises(NMFError, match="not valid JSON"):
        read_nmf(tmp_path / "nmf")
    with pytest.raises(NMFError, match="cannot read"):
        read_nmf(tmp_path / "elsewhere")
