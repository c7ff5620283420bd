"""C1 files → block histograms and unit counts → geounit histograms, against loops over the
records (text and Parquet files, frames and lazy scans)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from privtab.errors import InputError
from privtab.topdown.histogram import CELLS, cell_index
from privtab.topdown.inputs import (
    PERSON_COLUMNS,
    UNIT_COLUMNS,
    SparseHistograms,
    block_histograms,
    block_units,
    person_cells,
    scan_table,
    state_runs,
    units_histograms,
)
from privtab.topdown.spine import us_spine
from tests.topdown._support import population, write_c1

BLOCK_COLUMNS = ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK")


def _block(r: dict[str, str]) -> str:
    return r["TABBLKST"] + r["TABBLKCOU"] + r["TABTRACTCE"] + r["TABBLK"]


def _loop_cells(persons: pl.DataFrame) -> Counter[tuple[str, int]]:
    out: Counter[tuple[str, int]] = Counter()
    for r in persons.iter_rows(named=True):
        hhgq = 0 if r["QGQTYP"] is None else min(int(r["QGQTYP"]) // 100, 7)
        cell = cell_index(
            hhgq, int(int(r["QAGE"]) >= 18), int(r["CENHISP"]) - 1, int(r["CENRACE"]) - 1
        )
        out[(_block(r), cell)] += 1
    return out


def test_block_histograms_equal_a_loop_over_persons(tmp_path: Path) -> None:
    pop = population(1)
    expected = _loop_cells(pop.persons)
    text = write_c1(pop.persons, tmp_path / "cef-persons.txt")
    parquet = tmp_path / "cef-persons.parquet"
    pop.persons.write_parquet(parquet)
    for source in (
        pop.persons,
        pop.persons.lazy(),
        scan_table(text, PERSON_COLUMNS),
        scan_table(parquet, PERSON_COLUMNS),
    ):
        h = block_histograms(source)
        got = {(b, c): n for b, c, n in h.iter_rows()}
        assert got == dict(expected)
        assert h.get_column("BLOCK").is_sorted()
    assert sum(expected.values()) == pop.persons.height


def _string_keyed(persons: pl.DataFrame) -> pl.DataFrame:
    """The aggregation as it was before the numeric key: grouped on the block strings."""
    cells = person_cells(persons).group_by("BLOCK", "CELL")
    return cells.agg(pl.len().cast(pl.Int64).alias("COUNT")).collect().sort("BLOCK", "CELL")


@pytest.mark.parametrize(
    "ids",
    [
        [("13", "121", "000100", "1001"), ("13", "121", "000100", "0999"), ("01", "", "", "0")],
        [("1", "2", "", "")] * 2 + [("9", "9", "9", "9"), ("0", "0", "0", "0")],  # width 4
        [("", "", "", ""), ("0", "", "", ""), ("00", "7", "", ""), ("1", "", "", "")],  # mixed
        [("99", "999", "999999", "9999"), ("00", "000", "000000", "0000")],  # 15 digits, edges
        [("0", "0", "0000000", "123456789"), ("1", "2", "3", "4")],  # 16 digits: the strings
        [("06", "037", "2a", "1"), ("06", "037", "21", "+1")],  # not digits: the strings
        [("06", "037", "201100", "1001"), ("06", None, "201100", "1001")],  # a null part
    ],
)
def test_block_histograms_equal_the_string_keyed_group_by(
    ids: list[tuple[str | None, ...]],
) -> None:
    pop = population(6)
    rng = np.random.default_rng(6)
    pick = rng.integers(0, len(ids), pop.persons.height)
    parts = {c: [ids[i][k] for i in pick] for k, c in enumerate(BLOCK_COLUMNS)}
    persons = pop.persons.with_columns(pl.Series(c, v, pl.Utf8) for c, v in parts.items())
    got = block_histograms(persons)
    expected = _string_keyed(persons)
    assert got.schema == expected.schema
    assert got.equals(expected)
    assert got.get_column("COUNT").sum() == persons.height


def _loop_runs(states: list[str | None]) -> list[tuple[str | None, int, int]]:
    runs: list[tuple[str | None, int, int]] = []
    for i, state in enumerate(states):
        if runs and runs[-1][0] == state:
            runs[-1] = (state, runs[-1][1], i + 1)
        else:
            runs.append((state, i, i + 1))
    return runs


@pytest.mark.parametrize(
    "order",
    [
        "by state",
        "file order",
        "a state in two runs",
        "mixed widths",
        "a null state",
        "null counties",
        "one",
    ],
)
def test_block_histograms_state_by_state_equal_one_pass(tmp_path: Path, order: str) -> None:
    pop = population(7, states=("01", "09", "13", "06"))
    persons = pop.persons
    if order == "by state":
        persons = persons.sort("TABBLKST", maintain_order=True)
    elif order == "a state in two runs":
        persons = persons.sort("TABBLKST", descending=True, maintain_order=True)
        persons = pl.concat([persons.tail(40), persons.head(persons.height - 40)])
    elif order == "mixed widths":  # states "1" and "11" with counties "1…" and "…": the same blocks
        persons = pl.concat(
            [
                persons.with_columns(
                    pl.lit("1").alias("TABBLKST"),
                    (pl.lit("1") + pl.col("TABBLKCOU")).alias("TABBLKCOU"),
                ),
                persons.with_columns(pl.lit("11").alias("TABBLKST")),
            ]
        )
    elif order == "a null state":
        first = pl.int_range(pl.len()) < 30
        persons = persons.sort("TABBLKST").with_columns(
            pl.when(first).then(None).otherwise(pl.col("TABBLKST")).alias("TABBLKST")
        )
    elif order == "null counties":  # null blocks in two states: one group, not two
        head = pl.int_range(pl.len()).over("TABBLKST") < 3
        persons = persons.sort("TABBLKST").with_columns(
            pl.when(head).then(None).otherwise(pl.col("TABBLKCOU")).alias("TABBLKCOU")
        )
    elif order == "one":
        persons = persons.with_columns(pl.lit("13").alias("TABBLKST"))
    path = tmp_path / "cef-persons.parquet"
    persons.write_parquet(path, row_group_size=50)
    runs = state_runs(path, batch=37)
    assert runs == _loop_runs(persons.get_column("TABBLKST").to_list())
    expected = _string_keyed(persons)
    for source in (persons, scan_table(path, PERSON_COLUMNS)):
        got = block_histograms(source, runs)
        assert got.schema == expected.schema
        assert got.equals(expected), order
    if order == "by state":
        assert len(runs) == 4


def test_block_units_equal_a_loop_over_units(tmp_path: Path) -> None:
    pop = population(2)
    text = write_c1(pop.units, tmp_path / "cef-units.txt")
    got = block_units(scan_table(text, UNIT_COLUMNS))
    expected: dict[str, Counter[str]] = {}
    for r in pop.units.iter_rows(named=True):
        c = expected.setdefault(_block(r), Counter())
        if r["RTYPE"] == "2":
            c["HU"] += 1
            c["OCCUPIED" if r["HH_STATUS"] == "1" else "VACANT"] += 1
        else:
            c[f"GQ{min(int(r['QGQTYP']) // 100, 7)}"] += 1
    cols = ["HU", *(f"GQ{t}" for t in range(1, 8)), "OCCUPIED", "VACANT"]
    assert got.columns == ["BLOCK", *cols]
    assert {r[0]: dict(zip(cols, r[1:], strict=True)) for r in got.iter_rows()} == {
        b: {k: c[k] for k in cols} for b, c in expected.items()
    }
    hist = units_histograms(got)
    for b, cell, n in hist.iter_rows():
        assert n == expected[b]["OCCUPIED" if cell == 1 else "VACANT"] > 0


def test_sparse_histograms_aggregate_to_every_level() -> None:
    pop = population(3)
    units = block_units(pop.units)
    sp = us_spine(pop.grfc, units)
    leaves = SparseHistograms.from_blocks(block_histograms(pop.persons), sp, CELLS)
    levels = leaves.levels(sp)
    h = sp.hierarchy
    dense_leaves = leaves.dense(range(h.size("Block")))
    assert dense_leaves.sum() == pop.persons.height
    for k in range(len(h.levels)):
        expected = np.zeros((h.size(k), CELLS), dtype=np.int64)
        np.add.at(expected, h.ancestors(k, len(h.levels) - 1), dense_leaves)
        assert np.array_equal(levels[k].dense(range(h.size(k))), expected), h.levels[k]
        assert np.array_equal(levels[k].totals(), expected.sum(axis=1))
    some = np.array([3, 0, 7])
    assert np.array_equal(levels[-1].dense(some), dense_leaves[some])


@pytest.mark.parametrize("chunk", [1, 2, 7, 64, 1 << 22])
def test_aggregate_in_runs_equals_a_loop_over_entries(chunk: int) -> None:
    """Summing parents in runs of ``chunk`` entries (a parent never split, empty parents
    and runs skipped) gives the loop's histograms, exactly and in (unit, cell) order."""
    rng = np.random.default_rng(5)
    n_units, n_parents, cells = 60, 17, 9
    # parents 0 and 16 have no child, parent 5 one child
    parent = np.sort(np.append(rng.choice([1, 2, 3, 4, 6, 7, 8, 9, 10, 12], n_units - 1), 5))
    entries = sorted({(int(u), int(c)) for u, c in rng.integers(0, [n_units, cells], (150, 2))})
    unit = np.array([u for u, _ in entries], dtype=np.int64)
    cell = np.array([c for _, c in entries], dtype=np.int64)
    count = rng.integers(1, 2**40, unit.size).astype(np.int64)
    leaves = SparseHistograms(cells, n_units, unit, cell, count)
    expected: Counter[tuple[int, int]] = Counter()
    for u, c, n in zip(unit.tolist(), cell.tolist(), count.tolist(), strict=True):
        expected[(int(parent[u]), c)] += n
    got = leaves.aggregate(parent, n_parents, chunk=chunk)
    keys = sorted(expected)
    assert got.n_units == n_parents
    assert got.cells == cells
    assert got.unit.tolist() == [p for p, _ in keys]
    assert got.cell.tolist() == [c for _, c in keys]
    assert got.count.tolist() == [expected[k] for k in keys]
    assert got.unit.dtype == got.cell.dtype == got.count.dtype == np.int64


def test_aggregate_refuses_parents_out_of_order() -> None:
    leaves = SparseHistograms(2, 3, np.array([0, 2]), np.array([1, 0]), np.array([4, 5]))
    with pytest.raises(ValueError, match="non-decreasing"):
        leaves.aggregate(np.array([1, 0, 1]), 2)
    with pytest.raises(ValueError, match="non-decreasing"):
        leaves.aggregate(np.array([0, 1, 2]), 2)
    with pytest.raises(ValueError, match="3 units"):
        leaves.aggregate(np.array([0, 1]), 2)


def test_persons_in_a_block_off_the_spine_are_refused() -> None:
    pop = population(4)
    units = block_units(pop.units)
    sp = us_spine(pop.grfc, units)
    ghost = pop.persons.head(1).with_columns(pl.lit("9999").alias("TABBLK"))
    with pytest.raises(InputError, match="not on the spine") as err:
        SparseHistograms.from_blocks(block_histograms(pl.concat([pop.persons, ghost])), sp, CELLS)
    assert err.value.value is not None
    assert err.value.value.endswith("9999")


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("CENRACE", "64"),
        ("CENRACE", "00"),
        ("CENHISP", "3"),
        ("QAGE", "116"),
        ("QAGE", "x"),
        ("QGQTYP", "099"),
    ],
)
def test_codes_outside_their_ranges_are_refused(column: str, value: str) -> None:
    pop = population(5)
    first = pl.int_range(pl.len()) == 0
    bad = pop.persons.with_columns(
        pl.when(first).then(pl.lit(value)).otherwise(pl.col(column)).alias(column)
    )
    with pytest.raises(InputError, match="outside its codes") as err:
        block_histograms(bad)
    assert err.value.value == _block(pop.persons.row(0, named=True))
