"""Sensitivity spaces of a table with invariant margins: Prop. 32, Examples 7–8, §5.2.

Oracle values from seed-checks (``semi-dp-invariant-statistics.txt``): 003.ex7.sens_space_2x2,
003.ex7.l1/l2/linf (4, 2, 1), 003.ex8.projection_2x2, 003.naive.sens.2x2.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privtab.invariants import CountInvariant, Schema, TableSpace
from privtab.invariants.semi_adjacency import conforming_datasets
from privtab.invariants.sensitivity import (
    naive_sensitivities,
    orthonormal_basis,
    projection_matrix,
    table_sensitivity_space,
    zero_margin_moves,
)


def differences_within(inv: CountInvariant, a: int) -> set[tuple[int, ...]]:
    """Second computation: {h − h' : h, h' ∈ D_t, ‖h − h'‖₁/2 ≤ a, h ≠ h'} by enumeration."""
    hs = conforming_datasets(inv, max_datasets=100_000)
    out = set()
    for h in hs:
        d = hs - h
        close = (np.abs(d).sum(axis=1) // 2 <= a) & (np.abs(d).sum(axis=1) > 0)
        out.update(tuple(int(v) for v in row) for row in d[close])
    return out


def test_example7_two_by_two_space() -> None:
    s = table_sensitivity_space(2, 2)
    assert sorted(map(tuple, s.tolist())) == sorted([(1, -1, -1, 1), (-1, 1, 1, -1)])
    sp = TableSpace(2, 2)
    assert (sp.sensitivity("l1"), sp.sensitivity("l2"), sp.sensitivity("linf")) == (4.0, 2.0, 1.0)


def test_example8_projection_and_basis() -> None:
    expected = [
        [0.25, -0.25, -0.25, 0.25],
        [-0.25, 0.25, 0.25, -0.25],
        [-0.25, 0.25, 0.25, -0.25],
        [0.25, -0.25, -0.25, 0.25],
    ]
    assert np.allclose(projection_matrix(2, 2), expected, atol=1e-15)
    b = orthonormal_basis(2, 2)
    assert np.allclose(np.abs(b.ravel()), 0.5)
    assert np.allclose(b @ b.T, expected, atol=1e-15)


def test_naive_sensitivities() -> None:
    # 003.naive.sens.2x2: (2, √2, 1) for replace-one neighbours, ×3 for a = 3
    assert naive_sensitivities(1) == {"l1": 2.0, "l2": math.sqrt(2), "linf": 1.0}
    s3 = naive_sensitivities(3)
    assert s3["l1"] == 6
    assert s3["l2"] == pytest.approx(4.242640687119286)
    assert s3["linf"] == 3


@pytest.mark.parametrize(("r", "c"), [(2, 2), (2, 3), (3, 3), (3, 4), (4, 4), (2, 5)])
def test_span_basis_projection(r: int, c: int) -> None:
    b = orthonormal_basis(r, c)
    p = projection_matrix(r, c)
    assert b.shape == (r * c, (r - 1) * (c - 1))
    assert np.allclose(b.T @ b, np.eye(b.shape[1]), atol=1e-12)
    assert np.allclose(b @ b.T, p, atol=1e-12)
    s = table_sensitivity_space(r, c).astype(float)
    # every element lies in the span and the elements span it
    assert np.allclose(s @ p, s, atol=1e-12)
    assert np.linalg.matrix_rank(s) == (r - 1) * (c - 1)
    # margins of every element are zero
    m = s.reshape(-1, r, c)
    assert np.all(m.sum(axis=1) == 0)
    assert np.all(m.sum(axis=2) == 0)


def test_counts_of_elements() -> None:
    # D matrices: r(r−1)c(c−1)/2; 3-cycles: 12·C(r,3)·C(c,3)
    for r, c in [(2, 2), (2, 4), (3, 3), (3, 4), (4, 4), (5, 5)]:
        n_d = r * (r - 1) * c * (c - 1) // 2
        n_cyc = 12 * math.comb(r, 3) * math.comb(c, 3)
        assert table_sensitivity_space(r, c, paper=True).shape[0] == n_d
        assert table_sensitivity_space(r, c).shape[0] == n_d + n_cyc


def test_prop32_incomplete_for_three_by_three() -> None:
    # Semi-DP space by brute force for margins (2,2,2)/(2,2,2): all differences of
    # conforming tables at most a = 3 replacements apart
    inv = CountInvariant.one_way_margins(Schema.grid(3, 3), margins=[[2, 2, 2], [2, 2, 2]])
    brute = differences_within(inv, 3)
    ours = {tuple(int(v) for v in row) for row in table_sensitivity_space(3, 3)}
    paper = {tuple(int(v) for v in row) for row in table_sensitivity_space(3, 3, paper=True)}
    assert brute == ours
    assert paper < brute
    cycles = brute - paper
    assert len(cycles) == 12
    assert all(sum(abs(v) for v in cyc) == 6 for cyc in cycles)
    assert TableSpace(3, 3).sensitivity("l2") == pytest.approx(math.sqrt(6))
    assert TableSpace(3, 3, paper=True).sensitivity("l2") == 2.0


@pytest.mark.parametrize("margins", [([3, 2], [1, 2, 2]), ([2, 2], [2, 2]), ([1, 3], [2, 1, 1])])
def test_two_row_tables_match_prop32(margins: tuple[list[int], list[int]]) -> None:
    rows, cols = margins
    inv = CountInvariant.one_way_margins(Schema.grid(len(rows), len(cols)), margins=[rows, cols])
    brute = differences_within(inv, 3)
    ours = {tuple(int(v) for v in row) for row in table_sensitivity_space(len(rows), len(cols))}
    assert brute <= ours
    assert (
        table_sensitivity_space(2, len(cols)).shape
        == table_sensitivity_space(2, len(cols), paper=True).shape
    )


def test_a_two_gives_d_matrices_only() -> None:
    assert table_sensitivity_space(3, 3, a=2).shape[0] == 18
    assert zero_margin_moves(3, 3, 1).shape == (0, 9)
    assert TableSpace(3, 3, a=1).dim == 0
    with pytest.raises(ValueError, match="max_mass"):
        zero_margin_moves(3, 3, 5)
