"""Record → iterations: alone vs alone-or-in-combination semantics, and the vectorised
expansion over distinct code combinations against the per-record definition."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privtab.data import ReferenceData
from privtab.data.iterations import IterationKind
from privtab.data.levels import Granularity
from privtab.data.membership import (
    expand_iterations,
    iteration_table,
    iterations_of,
    pack_race_codes,
    unpack_race_codes,
    with_race_keys,
)

codes_st = st.lists(st.integers(1000, 9999), min_size=1, max_size=8, unique=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(codes_st, min_size=1, max_size=20))
def test_pack_unpack_roundtrip(rows: list[list[int]]) -> None:
    arr = np.zeros((len(rows), 8), dtype=np.int64)
    for i, r in enumerate(rows):
        arr[i, : len(r)] = r
    k1, k2 = pack_race_codes(arr)
    back = unpack_race_codes(k1, k2)
    for i, r in enumerate(rows):
        assert sorted(back[i][back[i] > 0].tolist()) == sorted(r)
        assert back[i].tolist() == sorted(back[i].tolist(), reverse=True)
    # order of the codes in a record does not matter
    perm = arr[:, ::-1].copy()
    p1, p2 = pack_race_codes(perm)
    assert (p1 == k1).all()
    assert (p2 == k2).all()
    # the polars expressions pack identically
    df = pl.DataFrame(
        {f"Q{j}": [int(x) if x else None for x in arr[:, j]] for j in range(8)},
        schema={f"Q{j}": pl.UInt16 for j in range(8)},
    )
    df = with_race_keys(df, [f"Q{j}" for j in range(8)]).collect()
    assert df["RACE_KEY1"].to_list() == k1.tolist()
    assert df["RACE_KEY2"].to_list() == k2.tolist()


def _group(ref: ReferenceData, code: str) -> list[int]:
    return sorted(ref.iterations[code].codes)


def test_alone_and_combination_semantics(ref: ReferenceData) -> None:
    europe = _group(ref, "1002")  # European alone (level 1)
    other = next(
        i
        for i in ref.select(1, Granularity.DETAILED)
        if i.kind is IterationKind.RACE and i.alone and i.code != "1002" and i.codes
    )
    europe_combo = next(
        i.code
        for i in ref.select(1, Granularity.DETAILED)
        if i.kind is IterationKind.RACE and not i.alone and set(europe) <= i.codes
    )
    other_combo = next(
        i.code
        for i in ref.select(1, Granularity.DETAILED)
        if i.kind is IterationKind.RACE and not i.alone and other.codes <= i.codes
    )
    not_hisp = 9950
    only_europe = iterations_of(ref, europe[:2], not_hisp, 1, Granularity.DETAILED)
    assert only_europe == {"1002", europe_combo}
    mixed = iterations_of(ref, [europe[0], min(other.codes)], not_hisp, 1, Granularity.DETAILED)
    # not "alone" any more, but in both alone-or-in-combination groups
    assert mixed == {europe_combo, other_combo}
    with pytest.raises(ValueError, match="at least one race code"):
        iterations_of(ref, [], not_hisp, 1, Granularity.DETAILED)


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("granularity", list(Granularity))
def test_expand_matches_definition(
    ref: ReferenceData, level: int, granularity: Granularity
) -> None:
    rng = np.random.default_rng(level * 10 + (granularity is Granularity.COARSE))
    all_codes = np.array(sorted(ref.codes))
    # draw codes from few groups so that alone iterations are hit often
    grp = sorted(ref.iterations["1002"].codes) + sorted(ref.iterations["4015"].codes)
    n = 600
    arr = np.zeros((n, 8), dtype=np.int64)
    for i in range(n):
        k = int(rng.choice([1, 1, 1, 2, 2, 3, 8]))
        pool = np.array(grp) if rng.random() < 0.5 else all_codes
        arr[i, :k] = rng.choice(pool, size=k, replace=False)
    eth = rng.choice(all_codes, size=n)
    k1, k2 = pack_race_codes(arr)
    combos = pl.DataFrame({"RACE_KEY1": k1, "RACE_KEY2": k2, "QSPAN": eth.astype(np.uint16)})
    out = expand_iterations(combos.lazy(), ref, level, granularity)
    got: dict[tuple[int, int, int], set[str]] = {}
    for a, b, e, it in out.iter_rows():
        got.setdefault((a, b, e), set()).add(it)
    alone_hits = 0
    for i in range(n):
        want = iterations_of(ref, arr[i][arr[i] > 0].tolist(), int(eth[i]), level, granularity)
        assert got.get((int(k1[i]), int(k2[i]), int(eth[i])), set()) == want
        alone_hits += any(ref.iterations[c].alone for c in want)
    assert alone_hits > n // 10
    # duplicates in the input are collapsed; no row is repeated
    assert out.height == out.unique().height
    assert max(len(v) for v in got.values()) <= 9


def test_iteration_table(ref: ReferenceData) -> None:
    t = iteration_table(ref, 2, Granularity.DETAILED)
    assert t.height == 2944
    assert t["DETAILED_ONLY"].sum() == 437 + 354 + 3
    assert t.filter(pl.col("KIND") == "ethnicity").height == 30
    assert isinstance(t.schema["ITERATION_CODE"], pl.Enum)
