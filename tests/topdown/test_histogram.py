"""The persons histogram and its queries, against explicit loops over the cells."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from privtab.topdown.histogram import (
    CELLS,
    MEASURED_QUERIES,
    ROUNDER_QUERIES,
    SHAPE,
    cell_index,
    query,
)


def _loop_answer(name: str, hist: np.ndarray) -> dict[tuple[int, ...], int]:
    """The query's answer by a loop over cells: a dict from kept levels to counts."""
    out: dict[tuple[int, ...], int] = {}
    for h, v, s, c in itertools.product(*(range(n) for n in SHAPE)):
        levels = {"hhgq": h, "votingage": v, "hispanic": s, "cenrace": c}
        levels["hhinstlevels"] = 0 if h == 0 else (1 if h <= 4 else 2)
        if name == "total":
            key: tuple[int, ...] = ()
        elif name == "detailed":
            key = (h, v, s, c)
        else:
            parts = [p.strip() for p in name.split("*")]
            order = ["hhgq", "hhinstlevels", "votingage", "hispanic", "cenrace"]
            key = tuple(levels[p] for p in sorted(parts, key=order.index))
        out[key] = out.get(key, 0) + int(hist[cell_index(h, v, s, c)])
    return out


def test_shape_and_cell_order() -> None:
    assert CELLS == 2016
    assert cell_index(0, 0, 0, 0) == 0
    assert cell_index(0, 0, 0, 62) == 62
    assert cell_index(0, 0, 1, 0) == 63
    assert cell_index(7, 1, 1, 62) == 2015


@pytest.mark.parametrize("name", sorted(set(MEASURED_QUERIES) | set(ROUNDER_QUERIES)))
def test_answers_equal_a_loop_over_cells(name: str) -> None:
    rng = np.random.default_rng(3)
    hist = rng.integers(0, 5, CELLS)
    q = query(name)
    ans = q.answer(hist)
    expected = _loop_answer(name, hist)
    assert ans.dtype.kind == "i"
    assert ans.size == q.size == len(expected)
    # the answer is in C order of the kept levels
    keys = sorted(expected)
    assert [expected[k] for k in keys] == ans.tolist()
    np.testing.assert_array_equal(q.matrix() @ hist, ans)


def test_batches_and_sizes() -> None:
    rng = np.random.default_rng(4)
    hists = rng.integers(0, 3, (5, 7, CELLS))
    q = query("votingage * hispanic * cenrace")
    assert q.size == 252
    out = q.answer(hists)
    assert out.shape == (5, 7, 252)
    np.testing.assert_array_equal(out[2, 3], q.answer(hists[2, 3]))
    assert query("hhinstlevels").size == 3
    assert query("detailed").size == CELLS
    assert query("total").answer(hists).sum() == hists.sum()


@pytest.mark.parametrize("bad", ["race", "hhgq * hhgq", "hhgq * hhinstlevels", ""])
def test_unknown_queries_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="unknown TopDown query"):
        query(bad)
