"""Exact counts by sparse algebra (issue 20): the products of incidence matrices of
:mod:`privtab.tabulate.counts` equal a plain join of cells, regions and iterations, chunk by
chunk and for a whole level, whatever the order of the cells."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl
import pytest

from privtab.data import GeoLevel, Scope, load_inputs
from privtab.data.ages import AGE4, AGE9, AGE23
from privtab.data.membership import expand_iterations, iteration_matrix
from privtab.tabulate import ReleasePlan
from privtab.tabulate.aggregate import aggregate_persons
from privtab.tabulate.algorithm import ExactCounts, sex_age
from privtab.tabulate.counts import (
    CellMatrix,
    RegionProducts,
    coarsening,
    exact_counts,
    finest_age_bins,
    product,
    region_counts,
    region_rows,
    row_blocks,
    unit_regions,
)
from privtab.tabulate.domain import Domain, level_domain
from privtab.tabulate.engines.polars import PolarsEngine


@pytest.fixture(scope="module")
def prepared(synth_small):
    config, data = synth_small
    inputs = load_inputs(config, data, validate_persons=False)
    return inputs, aggregate_persons(inputs)


def _levels(inputs):
    for scope in (Scope.US, Scope.PR):
        yield from ReleasePlan.from_config(inputs.config, inputs.reference, scope).levels


def _bin_start(age: pl.Series) -> np.ndarray:
    """The first age of each age's Age23 bin: exact counts are kept per (sex, Age23 bin),
    the finest bins (Age4's and Age9's cut points are Age23's)."""
    assert set(AGE4.cuts) | set(AGE9.cuts) <= set(AGE23.cuts)
    return np.r_[0, AGE23.cuts][AGE23.lookup()[age.to_numpy()]]


def _joined(cells, inputs, plan, dom) -> pl.DataFrame:
    """Persons per (G, sex × Age23 bin) by joins: cells → regions → iterations (the old
    way)."""
    region = unit_regions(inputs.geography, dom.geo)
    its = expand_iterations(
        cells.combos, inputs.reference, plan.iteration_level, dom.geo.granularity
    )
    index = {c: i for i, c in enumerate(dom.codes)}
    combo_it = its.join(cells.combos, on=["RACE_KEY1", "RACE_KEY2", "QSPAN"]).select(
        "C", pl.col("ITERATION_CODE").cast(pl.String).replace_strict(index).alias("I")
    )
    frame = cells.cells.with_columns(
        pl.Series("R", region[cells.cells["UNIT"].to_numpy()]),
        pl.Series("SA", sex_age(cells.cells["QSEX"].to_numpy(), _bin_start(cells.cells["QAGE"]))),
    ).filter(pl.col("R") >= 0)
    return (
        frame.join(combo_it, on="C")
        .group_by(G=pl.col("R") * len(dom.codes) + pl.col("I"), SA=pl.col("SA"))
        .agg(pl.col("N").sum().cast(pl.Int64))
        .sort("G", "SA")
    )


def _entries(exact: ExactCounts, offset: int = 0) -> pl.DataFrame:
    return pl.DataFrame(
        {"G": exact.group + offset, "SA": exact.sex_age, "N": exact.n},
        schema={"G": pl.Int64, "SA": pl.Int64, "N": pl.Int64},
    ).sort("G", "SA")


def test_sparse_products_equal_the_joins_for_every_level(prepared) -> None:
    inputs, cells = prepared
    cm = CellMatrix.from_cells(cells)
    products = RegionProducts(cm, inputs.geography)
    seen = set()
    for plan in _levels(inputs):
        dom = level_domain(plan, inputs.geography, inputs.reference)
        if dom.size == 0:
            continue
        b = iteration_matrix(
            cells.combos, inputs.reference, plan.iteration_level, dom.geo.granularity
        )
        region = unit_regions(inputs.geography, dom.geo)
        exact = exact_counts(region_counts(cm, (0, cm.unit.size), region, dom), b, dom)
        want = _joined(cells, inputs, plan, dom)
        assert want.height > 0
        assert _entries(exact).equals(want), plan.key
        # the same from the run's products (a coarse level's derived from a finer one's)
        kept = exact_counts(products.get(dom.geo), b, dom)
        assert _entries(kept).equals(want), plan.key
        total = want.group_by("G").agg(pl.col("N").sum())
        dense = np.zeros(dom.size, dtype=np.int64)
        dense[total["G"].to_numpy()] = total["N"].to_numpy()
        assert np.array_equal(exact.total, dense)
        seen.add(dom.geo)
    assert seen == set(GeoLevel) - {GeoLevel.AIANNH}  # synth_small holds no AIANNH area


def test_state_chunks_partition_a_level(prepared) -> None:
    """A level tabulated one state per chunk (its rows of the level's product, which are
    ``S X`` of that state's cells only — :meth:`StateRows.chunks`, as both engines cut
    levels) has exactly the entries of the whole level."""
    inputs, _ = prepared
    engine = PolarsEngine(max_chunk_groups=1)
    engine.prepare(inputs, lambda _m: None)
    cm, products = engine.matrix, engine.products
    assert cm is not None
    assert products is not None
    for plan in _levels(inputs):
        dom = level_domain(plan, inputs.geography, inputs.reference)
        if dom.geo not in (GeoLevel.COUNTY, GeoLevel.TRACT, GeoLevel.PLACE):
            continue
        b = engine._iteration_matrix(plan, dom)
        region = unit_regions(inputs.geography, dom.geo)
        whole = exact_counts(products.get(dom.geo), b, dom)
        assert engine._states is not None
        chunks = engine._states.chunks(dom, 1, engine.max_chunk_cells)
        assert len(chunks) == len({r[:2] for r in dom.regions}) > 1
        parts = []
        for part, rows in chunks:
            assert rows[1] - rows[0] < cm.unit.size
            alone = region_counts(cm, rows, region, part)
            sliced = region_rows(products.get(dom.geo), part)
            assert (alone != sliced).nnz == 0
            parts.append(
                _entries(exact_counts(sliced, b, part), part.first_region * len(dom.codes))
            )
        assert pl.concat(parts).sort("G", "SA").equals(_entries(whole)), plan.key


def test_nested_levels_are_derived_from_finer_products(prepared) -> None:
    """The first level of a nest builds the finest level under it from the cells and each
    coarser one from the next finer one; every product equals ``S X`` of its whole level;
    :meth:`RegionProducts.retain` keeps only a level's own and finer products."""
    inputs, cells = prepared
    cm = CellMatrix.from_cells(cells)
    products = RegionProducts(cm, inputs.geography)
    products.get(GeoLevel.USA)
    assert products.built == [
        (GeoLevel.TRACT, None),
        (GeoLevel.COUNTY, GeoLevel.TRACT),
        (GeoLevel.STATE, GeoLevel.COUNTY),
        (GeoLevel.USA, GeoLevel.STATE),
    ]
    for geo in (GeoLevel.STATE, GeoLevel.COUNTY, GeoLevel.TRACT, GeoLevel.PLACE):
        products.retain(geo)
        got = products.get(geo)
        region = unit_regions(inputs.geography, geo)
        whole = Domain(geo, inputs.geography.domain(geo), (), np.zeros(0, dtype=np.bool_))
        assert (got != region_counts(cm, (0, cm.unit.size), region, whole)).nnz == 0, geo
        assert geo in products._products
        assert all(g is geo or products.nesting.nested(g, geo) for g in products._products)
    # nothing was built twice, and only from the cells or from a nested level's product
    assert len({geo for geo, _ in products.built}) == len(products.built) == 5
    assert all(src is None or products.nesting.nested(src, geo) for geo, src in products.built)
    assert got.dtype == np.uint32


def test_coarsening_needs_whole_regions(prepared) -> None:
    """A coarse level is derived from a finer one only when each of its regions is a union
    of whole finer regions: a place does not cover its state, and a region split between
    two coarser ones (a hand-made tract in two counties) is refused."""
    inputs, _ = prepared
    geo = inputs.geography
    to_county = coarsening(geo, GeoLevel.TRACT, GeoLevel.COUNTY)
    assert to_county is not None
    tracts, counties = geo.domain(GeoLevel.TRACT), geo.domain(GeoLevel.COUNTY)
    assert all(counties[c] == t[:5] for t, c in zip(tracts, to_county, strict=True))
    assert coarsening(geo, GeoLevel.PLACE, GeoLevel.STATE) is None
    assert coarsening(geo, GeoLevel.STATE, GeoLevel.PLACE) is None
    assert coarsening(geo, GeoLevel.TRACT, GeoLevel.PR_COUNTY) is None
    # a unit of another county given the first unit's tract: that tract is in two counties
    units = geo.units.with_row_index("_i")
    us = units.filter(pl.col(GeoLevel.COUNTY.value).is_not_null())
    a = us.row(0, named=True)
    b = us.filter(pl.col(GeoLevel.COUNTY.value) != a[GeoLevel.COUNTY.value]).row(0, named=True)
    tract = units[GeoLevel.TRACT.value].scatter(b["_i"], a[GeoLevel.TRACT.value])
    broken = replace(geo, units=units.drop("_i").with_columns(tract))
    assert coarsening(broken, GeoLevel.TRACT, GeoLevel.COUNTY) is None


def test_cell_matrix_does_not_depend_on_the_order_of_the_cells(prepared) -> None:
    from privtab.tabulate.aggregate import Cells

    _, cells = prepared
    shuffled = Cells(cells.cells.sample(fraction=1.0, shuffle=True, seed=3), cells.combos, 0)
    a, b = CellMatrix.from_cells(cells), CellMatrix.from_cells(shuffled)
    assert np.array_equal(a.unit, b.unit)
    assert np.array_equal(a.sex_age, b.sex_age)
    assert (a.matrix != b.matrix).nnz == 0
    assert a.cells == cells.cells.height
    # rows are distinct (unit, sex × age) pairs, sorted
    key = a.unit * 256 + a.sex_age
    assert np.all(np.diff(key) > 0)


def test_cells_of_groups_bin_sex_and_age() -> None:
    """``ExactCounts.cells``: the entries of the chosen groups summed into (sex, age bin)."""
    group = np.array([0, 0, 0, 2, 2, 3])
    sa = sex_age(np.array([1, 1, 2, 1, 2, 2]), np.array([0, 17, 115, 40, 4, 30]))
    n = np.array([1, 2, 3, 4, 5, 6])
    exact = ExactCounts.from_entries(group, sa, n, 5)
    assert exact.total.tolist() == [6, 0, 9, 6, 0]
    got = exact.cells(np.array([2, 0]), AGE4)  # AGE4: <18, 18-44, 45-64, 65+
    assert got.tolist() == [[0, 4, 0, 0, 5, 0, 0, 0], [3, 0, 0, 0, 0, 0, 0, 3]]
    fine = exact.cells(np.array([3]), AGE23)
    assert fine.shape == (1, 46)
    assert fine.sum() == 6
    assert fine[0, 23 + AGE23.lookup()[30]] == 6


def test_products_in_threads_are_the_same_matrices(prepared) -> None:
    """Row blocks of about equal work computed in threads give, row by row, the matrices and
    exact entries of one product (same entries in the same order)."""
    inputs, cells = prepared
    cm = CellMatrix.from_cells(cells)
    plan = next(p for p in _levels(inputs) if p.geo == "TRACT" and p.iteration_level == 2)
    dom = level_domain(plan, inputs.geography, inputs.reference)
    region = unit_regions(inputs.geography, dom.geo)
    one = region_counts(cm, (0, cm.unit.size), region, dom)
    b = iteration_matrix(cells.combos, inputs.reference, 2, dom.geo.granularity)
    for workers in (2, 3, 7):
        blocks = row_blocks(one, b, workers)
        assert len(blocks) == workers
        assert blocks[0][0] == 0
        assert blocks[-1][1] == one.shape[0]
        many = region_counts(cm, (0, cm.unit.size), region, dom, workers)
        for got, want in ((many, one), (product(one, b, workers), one @ b)):
            assert np.array_equal(got.indptr, want.indptr)
            assert np.array_equal(got.indices, want.indices)
            assert np.array_equal(got.data, want.data)
        serial, threaded = exact_counts(one, b, dom), exact_counts(one, b, dom, workers)
        for field in ("total", "group", "sex_age", "n"):
            assert np.array_equal(getattr(serial, field), getattr(threaded, field)), field


def test_finest_age_bins_keep_every_table_cell() -> None:
    """Counting per (sex, first age of the finest bin) instead of per (sex, age) gives the
    same Sex × Age4 / Age9 / Age23 cells; the finest bins are Age23's."""
    rng = np.random.default_rng(4)
    group = rng.integers(0, 7, 2000)
    sa = sex_age(rng.integers(1, 3, 2000), rng.integers(0, 116, 2000))
    n = rng.integers(1, 5, 2000)
    fine = finest_age_bins()
    assert len({int(v) for v in fine[:116]}) == AGE23.n_bins
    raw, binned = (
        ExactCounts.from_entries(group, sa, n, 7),
        ExactCounts.from_entries(group, fine[sa], n, 7),
    )
    groups = np.arange(7)
    for bins in (AGE4, AGE9, AGE23):
        assert np.array_equal(raw.cells(groups, bins), binned.cells(groups, bins)), bins.name


def test_nesting_reads_the_nests_from_the_geography(prepared) -> None:
    """The nests the Spark engine builds products for (finest first, each level derivable
    from an earlier one) come from the public GRF-C: tracts make counties make states
    make the nation (on the toy GRF-C places are unions of tracts too: they join the
    nest); a nest's first level is nested in no other."""
    from privtab.tabulate.counts import Nesting

    inputs, _ = prepared
    nesting = Nesting(inputs.geography)
    usa = nesting.nest(GeoLevel.USA)
    assert usa[0] is GeoLevel.TRACT
    assert set(usa) >= {GeoLevel.TRACT, GeoLevel.COUNTY, GeoLevel.STATE, GeoLevel.USA}
    assert nesting.nest(GeoLevel.COUNTY) == usa  # one nest, whichever member asks
    for i, geo in enumerate(usa[1:], 1):
        source = nesting.source(geo, usa[:i])
        assert source is not None
        assert nesting.map(source, geo) is not None
    assert nesting.source(GeoLevel.TRACT, usa) is None
    for geo in nesting.levels:
        nest = nesting.nest(geo)
        assert geo in nest
        assert not any(nesting.nested(g, nest[0]) for g in nesting.levels), geo
