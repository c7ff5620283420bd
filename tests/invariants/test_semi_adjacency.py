"""Semi-adjacent parameter: seed Examples 2, 3, 5, Theorem 16, Remark 17 and cross-checks.

Oracle values: ``semi-dp-invariant-statistics.txt`` (Examples 2–5, Thm 16, §6.1) and the
independent recomputation in seed-checks (ids ``003.thm16.upper.k*``, ``003.census.a``,
``003.ex5.a_2x2``).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from privtab.invariants import CountInvariant, Schema, semi_adjacent_parameter
from privtab.invariants.schema import histogram_from_records
from privtab.invariants.semi_adjacency import (
    TooManyDatasetsError,
    conforming_datasets,
    semi_adjacent_exact,
    theorem16_bound,
)


def literal_definition_13(inv: CountInvariant) -> int:
    """Definition 13 over *ordered* datasets: sup_x sup_i sup_x̃ inf_{x': x'_i = x̃} d_H(x, x').

    Independent of the histogram/ℓ1 reduction used by the library.
    """
    d, n = inv.schema.n_cells, inv.n
    datasets = [
        x
        for x in itertools.product(range(d), repeat=n)
        if inv.conforms(np.bincount(x, minlength=d))
    ]
    possible = {v for x in datasets for v in x}
    a = 0
    for x in datasets:
        for i in range(n):
            for v in possible:
                best = min(
                    sum(p != q for p, q in zip(x, y, strict=True)) for y in datasets if y[i] == v
                )
                a = max(a, best)
    return a


# ------------------------------------------------------------------- oracle examples
def test_example2_conforming_datasets_are_pairwise_two_apart() -> None:
    # Example 2: X = {0, 1}, n = 3, invariant Σx = 1: (1,0,0), (0,1,0), (0,0,1)
    schema = Schema({"x": ["0", "1"]})
    inv = CountInvariant.from_queries(schema, [{"x": ["1"]}], values=[1], n=3)
    hs = conforming_datasets(inv)
    assert hs.tolist() == [[2, 1]]  # one histogram: two 0s and one 1
    ordered = [x for x in itertools.product((0, 1), repeat=3) if sum(x) == 1]
    assert sorted(ordered) == [(0, 0, 1), (0, 1, 0), (1, 0, 0)]
    for x, y in itertools.combinations(ordered, 2):
        assert sum(p != q for p, q in zip(x, y, strict=True)) == 2


def test_example3_semi_adjacent_two_and_zero() -> None:
    schema = Schema({"x": ["0", "1"]})
    one = CountInvariant.from_queries(schema, [{"x": ["1"]}], values=[1], n=3)
    assert semi_adjacent_exact(one).value == 2
    assert literal_definition_13(one) == 2
    # T(x) = 3: the single dataset (1, 1, 1) — nothing left to protect, a = 0
    three = CountInvariant.from_queries(schema, [{"x": ["1"]}], values=[3], n=3)
    assert semi_adjacent_exact(three).value == 0
    assert literal_definition_13(three) == 0


def test_example4_one_way_margins_of_records() -> None:
    schema = Schema({"X1": ["1", "2"], "X2": ["1", "2"]})
    records = [("1", "1"), ("1", "2"), ("2", "2"), ("2", "2"), ("1", "1")]
    h = histogram_from_records(schema, records)
    assert h.tolist() == [[2, 1], [0, 2]]
    inv = CountInvariant.one_way_margins(schema, h)
    assert inv.values.tolist() == [3, 2, 2, 3]
    assert inv.labels == ("X1=1", "X1=2", "X2=1", "X2=2")


@pytest.mark.parametrize(("k", "expected"), [(1, 2), (2, 3), (3, 4), (5, 6), (10, 11)])
def test_theorem16_bound(k: int, expected: int) -> None:
    # seed-checks 003.thm16.upper.k{1,2,3,5,10}
    assert theorem16_bound(k) == expected


def test_example5_two_by_two_reaches_three() -> None:
    # seed-checks 003.ex5.a_2x2: a = 3 for a 2 × 2 table with one-way margins; the worst
    # case needs n22 = 0 with n11 > 0 (the seed's construction)
    inv = CountInvariant.one_way_margins(Schema.grid(2, 2), np.array([[2, 1], [1, 0]]))
    res = semi_adjacent_exact(inv)
    assert res.value == 3
    assert res.witness is not None
    assert res.witness["replacements_needed"] == 3
    assert literal_definition_13(inv) == 3
    assert semi_adjacent_parameter(inv).value == 3


def test_census_state_totals_one_feature() -> None:
    # seed-checks 003.census.a: state totals are a one-way margin of one feature: a = 2
    schema = Schema({"state": ["AL", "AK", "AZ"]})
    inv = CountInvariant.one_way_margins(schema, margins=[[3, 1, 2]])
    assert semi_adjacent_parameter(inv).value == 2
    assert semi_adjacent_exact(inv).value == 2
    assert literal_definition_13(inv) == 2


def test_theorem16_bound_is_attained_with_three_features() -> None:
    # 2×2×2, margins allowing u = (1,1,1) and no record sharing two of v = (2,2,2)'s levels
    schema = Schema.grid(2, 2, 2)
    h = np.zeros((2, 2, 2), dtype=np.int64)
    h[0, 0, 0] = 1
    h[1, 0, 0] = h[0, 1, 0] = h[0, 0, 1] = 1
    inv = CountInvariant.one_way_margins(schema, h)
    assert semi_adjacent_exact(inv).value == 4
    auto = semi_adjacent_parameter(inv)
    assert auto.exact
    assert auto.value == 4


def test_remark17_full_table_is_two() -> None:
    schema = Schema.grid(2, 3)
    h = np.array([[1, 0, 2], [0, 0, 1]])
    inv = CountInvariant.full_table(schema, h)
    assert semi_adjacent_parameter(inv).value == 2
    assert semi_adjacent_exact(inv).value == 2
    single = CountInvariant.full_table(schema, np.array([[0, 0, 3], [0, 0, 0]]))
    assert semi_adjacent_parameter(single).value == 0


def test_margins_sometimes_below_bound() -> None:
    # all margins 1 in a 2 × 2 table: only two tables conform and a = 2 < k + 1 = 3
    inv = CountInvariant.one_way_margins(Schema.grid(2, 2), np.array([[1, 0], [0, 1]]))
    assert semi_adjacent_exact(inv).value == 2
    assert literal_definition_13(inv) == 2
    assert semi_adjacent_parameter(inv).value == 2


# ------------------------------------------------------------------- cross-checks
def test_closed_form_matches_exhaustive_search_random_tables() -> None:
    rng = np.random.default_rng(20240601)
    checked = 0
    for _ in range(250):
        r, c = (int(v) for v in rng.integers(1, 4, 2))
        n = int(rng.integers(0, 8))
        probs = rng.dirichlet(np.full(r * c, 0.6))
        h = rng.multinomial(n, probs).reshape(r, c)
        inv = CountInvariant.one_way_margins(Schema.grid(r, c), h)
        closed = semi_adjacent_parameter(inv)
        exact = semi_adjacent_exact(inv, max_datasets=200_000)
        assert closed.value == exact.value, (h.tolist(), closed, exact)
        checked += 1
    assert checked == 250


def test_exhaustive_search_matches_literal_definition() -> None:
    rng = np.random.default_rng(7)
    cases = 0
    for shape in [(2,), (3,), (2, 2), (2, 3), (2, 2, 2)]:
        schema = Schema.grid(*shape)
        for n in range(1, 5):
            if schema.n_cells**n > 4096:
                continue
            h = rng.multinomial(n, np.full(schema.n_cells, 1 / schema.n_cells)).reshape(shape)
            for inv in (
                CountInvariant.one_way_margins(schema, h),
                CountInvariant.full_table(schema, h),
            ):
                assert semi_adjacent_exact(inv).value == literal_definition_13(inv)
                cases += 1
    assert cases >= 20


def test_general_count_queries() -> None:
    # a published total of records with X1 = 1 only: a record may move freely inside
    # X1 = 1 or inside X1 = 2 without changing it, so a = 2 (a move across needs a swap)
    schema = Schema.grid(2, 2)
    inv = CountInvariant.from_queries(schema, [{"X1": ["1"]}], np.array([[1, 1], [1, 0]]))
    assert semi_adjacent_exact(inv).value == 2
    assert literal_definition_13(inv) == 2
    # no constraint beyond n: any replacement is allowed, a = 1
    free = CountInvariant.from_queries(schema, [], values=[], n=2)
    assert semi_adjacent_exact(free).value == 1


def test_bound_used_when_enumeration_too_large() -> None:
    schema = Schema.grid(3, 3, 3)
    rng = np.random.default_rng(3)
    h = rng.multinomial(60, np.full(27, 1 / 27)).reshape(3, 3, 3)
    inv = CountInvariant.one_way_margins(schema, h)
    res = semi_adjacent_parameter(inv, max_datasets=50)
    assert not res.exact
    assert (res.lower, res.upper, res.value) == (2, 4, 4)
    with pytest.raises(TooManyDatasetsError):
        semi_adjacent_exact(inv, max_datasets=50)


def test_inconsistent_counts_rejected() -> None:
    schema = Schema.grid(2, 2)
    with pytest.raises(ValueError, match="disagree on the total"):
        CountInvariant.one_way_margins(schema, margins=[[1, 2], [2, 2]])
    inv = CountInvariant.from_queries(schema, [{"X1": ["1"]}, {"X2": ["1"]}], values=[0, 2], n=2)
    inv_bad = CountInvariant.from_queries(
        schema, [{"X1": ["1"]}, {"X1": ["1"], "X2": ["1"]}], values=[0, 1], n=2
    )
    # consistent: both records must be (X1=2, X2=1) — one dataset, nothing to protect
    assert semi_adjacent_exact(inv).value == 0
    assert conforming_datasets(inv).tolist() == [[0, 0, 2, 0]]
    with pytest.raises(ValueError, match="no dataset conforms"):
        semi_adjacent_exact(inv_bad)


def test_bad_records_name_the_row_and_value() -> None:
    schema = Schema({"sex": ["F", "M"], "age": ["child", "adult"]})
    with pytest.raises(ValueError, match=r"record 2: feature 'age' has value 'old'"):
        histogram_from_records(schema, [("F", "child"), ("M", "old")])
    with pytest.raises(ValueError, match="record 1: expected 2 fields"):
        histogram_from_records(schema, [("F",)])
    with pytest.raises(ValueError, match="negative"):
        CountInvariant.one_way_margins(schema, np.array([[1, -1], [0, 0]]))
