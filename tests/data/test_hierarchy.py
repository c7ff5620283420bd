"""A declared hierarchy: a synthetic three-level country (REGION / PROVINCIA / COMUNA), the
parent map against brute force, and every bad block table refused with its location."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from privtab.data.errors import InputValidationError
from privtab.data.hierarchy import HierarchySpec

COUNTRY = HierarchySpec.declare(
    [("PAIS", ()), ("REGION", ("REGION",)), ("PROVINCIA", ("PROVINCIA",)), ("COMUNA", ("COMUNA",))],
    chunk_level="REGION",
)


def _country(seed: int = 3) -> pl.DataFrame:
    """Regions 01..04, 1–3 provinces each (1 digit), 1–5 communes each (3 digits),
    rows shuffled, with an extra column the hierarchy ignores."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(1, 5):
        for p in range(1, int(rng.integers(1, 4)) + 1):
            for c in range(1, int(rng.integers(1, 6)) + 1):
                rows.append((f"{r:02d}", str(p), f"{c * 7:03d}", f"x{r}{p}{c}"))
    rng.shuffle(rows)
    return pl.DataFrame(rows, schema=["REGION", "PROVINCIA", "COMUNA", "NOMBRE"], orient="row")


def test_a_declared_three_level_country_builds() -> None:
    table = _country()
    h = COUNTRY.build(table, source="comunas.txt")
    assert h.levels == ("PAIS", "REGION", "PROVINCIA", "COMUNA")
    assert h.size("PAIS") == 1
    assert h.size("REGION") == 4
    assert h.size("COMUNA") == table.height
    # ids nest and are sorted
    assert h.ids("REGION") == ["01", "02", "03", "04"]
    communes = h.ids("COMUNA")
    assert communes == sorted(communes)
    provinces = h.ids("PROVINCIA")
    for i, c in enumerate(communes):
        assert provinces[h.parent("COMUNA")[i]] == c[:3]
    # leaf_rows maps back to the table
    for leaf, row in enumerate(h.leaf_rows):
        r = table.row(int(row), named=True)
        assert communes[leaf] == r["REGION"] + r["PROVINCIA"] + r["COMUNA"]
    assert h.chunk_level == "REGION"
    assert [u for u, _ in h.chunks()] == [0, 1, 2, 3]


def test_children_ranges_ancestors_and_sums_agree_with_brute_force() -> None:
    h = COUNTRY.build(_country(11))
    for k in range(len(h.levels) - 1):
        parents = h.parent(k + 1)
        for unit in range(h.size(k)):
            kids = [i for i, p in enumerate(parents) if p == unit]
            assert list(h.children(k, unit)) == kids
    leaf_region = h.ancestors("REGION", "COMUNA")
    ids = h.ids("COMUNA")
    assert [h.ids("REGION")[a] for a in leaf_region] == [c[:2] for c in ids]
    values = np.arange(h.size("COMUNA"), dtype=np.int64) ** 2
    prov = h.aggregate(values, "COMUNA")
    brute = np.zeros(h.size("PROVINCIA"), dtype=np.int64)
    np.add.at(brute, h.parent("COMUNA"), values)
    assert np.array_equal(prov, brute)
    for unit in range(h.size("REGION")):
        leaves = h.leaf_range("REGION", unit)
        assert all(ids[i].startswith(h.ids("REGION")[unit]) for i in leaves)
        assert h.leaf_starts("REGION")[unit] == leaves.start
    assert sum(len(r) for _, r in h.chunks()) == h.size("COMUNA")


@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 9)),
        min_size=1,
        max_size=40,
        unique=True,
    )
)
def test_any_table_gives_a_consistent_tree(rows: list[tuple[int, int, int]]) -> None:
    table = pl.DataFrame(
        [(f"R{a}", f"P{b}", f"C{c}") for a, b, c in rows],
        schema=["REGION", "PROVINCIA", "COMUNA"],
        orient="row",
    )
    h = COUNTRY.build(table)
    assert h.size("COMUNA") == len(rows)
    for k in range(1, len(h.levels)):
        par = h.parent(k)
        assert np.all(np.diff(par) >= 0)  # children contiguous
        up, here = h.ids(k - 1), h.ids(k)
        assert all(here[i].startswith(up[par[i]]) for i in range(len(here)))
        assert np.array_equal(np.unique(par), np.arange(h.size(k - 1)))  # no childless unit
    assert h.child_counts("PAIS").tolist() == [len({a for a, _, _ in rows})]


def _problem(table: pl.DataFrame) -> tuple[str, int | None, str | None, str | None]:
    with pytest.raises(InputValidationError) as err:
        COUNTRY.build(table, source="comunas.txt")
    p = err.value.problems[0]
    return p.kind, p.row, p.column, p.value


def test_bad_block_tables_are_refused_with_their_location() -> None:
    good = {
        "REGION": ["01", "01", "02"],
        "PROVINCIA": ["1", "2", "1"],
        "COMUNA": ["001", "002", "003"],
    }
    assert _problem(pl.DataFrame(good).drop("PROVINCIA")) == (
        "missing_column",
        None,
        "PROVINCIA",
        None,
    )
    ragged = dict(good, COMUNA=["001", "02", "003"])
    assert _problem(pl.DataFrame(ragged)) == ("ragged_code", 3, "COMUNA", "02")
    empty = dict(good, REGION=["01", None, "02"])
    assert _problem(pl.DataFrame(empty)) == ("empty_code", 3, "REGION", None)
    blank = dict(good, PROVINCIA=["1", "", "1"])
    assert _problem(pl.DataFrame(blank)) == ("empty_code", 3, "PROVINCIA", "")
    dup = {
        "REGION": ["01", "02", "01"],
        "PROVINCIA": ["1", "1", "1"],
        "COMUNA": ["001", "003", "001"],
    }
    kind, row, _column, value = _problem(pl.DataFrame(dup))
    assert (kind, row, value) == ("duplicate_unit", 4, "011001")
    with pytest.raises(InputValidationError, match="already given in row 2"):
        COUNTRY.build(pl.DataFrame(dup), source="comunas.txt")


def test_declarations_are_checked() -> None:
    with pytest.raises(ValueError, match="takes no columns"):
        HierarchySpec.declare([("PAIS", ("X",)), ("REGION", ("REGION",))])
    with pytest.raises(ValueError, match="distinct"):
        HierarchySpec.declare([("PAIS", ()), ("PAIS", ("REGION",))])
    with pytest.raises(ValueError, match="adds no id column"):
        HierarchySpec.declare([("PAIS", ()), ("REGION", ())])
    with pytest.raises(ValueError, match="one level only"):
        HierarchySpec.declare([("PAIS", ()), ("A", ("X",)), ("B", ("X",))])
    with pytest.raises(ValueError, match="chunk level"):
        HierarchySpec.declare([("PAIS", ()), ("REGION", ("REGION",))], chunk_level="COMUNA")
    with pytest.raises(ValueError, match="root level and at least one"):
        HierarchySpec.declare([("PAIS", ())])
    h = COUNTRY.build(_country())
    with pytest.raises(KeyError, match="unknown level"):
        h.size("DISTRITO")
    with pytest.raises(ValueError, match="no children"):
        h.offsets("COMUNA")


def test_every_pair_of_levels_maps_consistently() -> None:
    h = COUNTRY.build(_country(5))
    for a, b in itertools.combinations(range(len(h.levels)), 2):
        via = h.ancestors(a, b)
        step = h.ancestors(a, b - 1)[h.parent(b)] if b - 1 >= a else None
        if step is not None:
            assert np.array_equal(via, step)
