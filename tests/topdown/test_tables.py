"""P1–P5 as cells of the histogram: counts, names, the CENRACE order, and tabulations
checked by hand and against a loop over persons with the Census's definitions."""

from __future__ import annotations

import numpy as np
import pytest

from privtab.data.synth import cenrace_table
from privtab.topdown.histogram import CELLS, cell_index
from privtab.topdown.tables import (
    CENRACE_COMBINATIONS,
    TABLE_NAMES,
    pl94_person_cells,
    table,
)


def test_cell_counts_and_names() -> None:
    sizes = {n: len(table(n).cells.names) for n in TABLE_NAMES}
    assert sizes == {"P1": 71, "P2": 73, "P3": 71, "P4": 73, "P5": 10}
    assert table("P1").cells.names[0] == "P0010001"
    assert table("P4").cells.names[-1] == "P0040073"
    assert table("P5").cells.names == tuple(f"P00500{i:02d}" for i in range(1, 11))
    assert len(pl94_person_cells().names) == 298
    assert table("P1").labels[10] == "White; Black or African American"
    assert table("P1").labels[69] == "Population of six races:"
    assert table("P2").labels[:4] == (
        "Total:",
        "Hispanic or Latino",
        "Not Hispanic or Latino:",
        "Population of one race:",
    )
    with pytest.raises(ValueError, match="P6"):
        table("P6")


def test_cenrace_order() -> None:
    sizes = [len(c) for c in CENRACE_COMBINATIONS]
    assert [sizes.count(k) for k in range(1, 7)] == [6, 15, 20, 15, 6, 1]
    assert CENRACE_COMBINATIONS[6] == (0, 1)  # 07 White; Black
    assert CENRACE_COMBINATIONS[20] == (4, 5)  # 21 NHPI; SOR
    assert CENRACE_COMBINATIONS[21] == (0, 1, 2)  # 22 White; Black; AIAN
    assert CENRACE_COMBINATIONS[56] == (0, 1, 2, 3, 4)  # 57
    assert CENRACE_COMBINATIONS[62] == (0, 1, 2, 3, 4, 5)  # 63
    table6 = cenrace_table(6)  # the synthetic population's CENRACE of each race bitmask
    for i, combo in enumerate(CENRACE_COMBINATIONS):
        assert table6[sum(1 << g for g in combo)] == i + 1


# (hhgq, votingage, hispanic, CENRACE 1..63)
PERSONS = [
    (0, 1, 0, 1),  # household adult, not Hispanic, White alone
    (0, 0, 1, 2),  # household minor, Hispanic, Black alone
    (3, 1, 0, 7),  # nursing adult, not Hispanic, White; Black
    (5, 1, 1, 22),  # college adult, Hispanic, White; Black; AIAN
    (1, 1, 0, 63),  # correctional adult, not Hispanic, six races
    (0, 0, 0, 6),  # household minor, not Hispanic, SOR alone
]


def _hist(persons: list[tuple[int, int, int, int]]) -> np.ndarray:
    h = np.zeros(CELLS)
    for g, v, s, c in persons:
        h[cell_index(g, v, s, c - 1)] += 1
    return h


def test_hand_checked_tabulation() -> None:
    h = _hist(PERSONS)
    got = {}
    for name in TABLE_NAMES:
        t = table(name)
        got.update(zip(t.cells.names, t.cells.answer(h).tolist(), strict=True))
    expected_nonzero = {
        # P1
        "P0010001": 6, "P0010002": 3, "P0010003": 1, "P0010004": 1, "P0010008": 1,
        "P0010009": 3, "P0010010": 1, "P0010011": 1, "P0010026": 1, "P0010027": 1,
        "P0010070": 1, "P0010071": 1,
        # P2
        "P0020001": 6, "P0020002": 2, "P0020003": 4, "P0020004": 2, "P0020005": 1,
        "P0020010": 1, "P0020011": 2, "P0020012": 1, "P0020013": 1, "P0020072": 1,
        "P0020073": 1,
        # P3 (18+)
        "P0030001": 4, "P0030002": 1, "P0030003": 1, "P0030009": 3, "P0030010": 1,
        "P0030011": 1, "P0030026": 1, "P0030027": 1, "P0030070": 1, "P0030071": 1,
        # P4
        "P0040001": 4, "P0040002": 1, "P0040003": 3, "P0040004": 1, "P0040005": 1,
        "P0040011": 2, "P0040012": 1, "P0040013": 1, "P0040072": 1, "P0040073": 1,
        # P5
        "P0050001": 3, "P0050002": 2, "P0050003": 1, "P0050005": 1, "P0050007": 1,
        "P0050008": 1,
    }  # fmt: skip
    for cell, value in got.items():
        assert value == expected_nonzero.get(cell, 0), cell


def _by_loop(persons: list[tuple[int, int, int, int]]) -> dict[str, int]:
    """The Census definitions (CENRACE ranges of the P.L. 94-171 documentation), per person."""
    sizes = {1: (1, 6), 2: (7, 21), 3: (22, 41), 4: (42, 56), 5: (57, 62), 6: (63, 63)}

    def race_cells(c: int) -> list[int]:  # P1 cell numbers (2..71) a CENRACE falls in
        out = []
        if c <= 6:
            out += [2, 2 + c]
        else:
            out.append(9)
            pos = 10
            for k in range(2, 7):
                lo, hi = sizes[k]
                if lo <= c <= hi:
                    out += [pos, pos + 1 + (c - lo)]
                pos += 1 + hi - lo + 1
        return out

    counts: dict[str, int] = {}

    def add(cell: str) -> None:
        counts[cell] = counts.get(cell, 0) + 1

    for g, v, s, c in persons:
        for tab, adult_only in (("1", False), ("3", True)):
            if adult_only and v == 0:
                continue
            add(f"P00{tab}0001")
            for k in race_cells(c):
                add(f"P00{tab}{k:04d}")
        for tab, adult_only in (("2", False), ("4", True)):
            if adult_only and v == 0:
                continue
            add(f"P00{tab}0001")
            if s == 1:
                add(f"P00{tab}0002")
            else:
                add(f"P00{tab}0003")
                for k in race_cells(c):
                    add(f"P00{tab}{k + 2:04d}")
        if g >= 1:
            add("P0050001")
            add("P0050002" if g <= 4 else "P0050007")
            add(f"P00500{g + 2 if g <= 4 else g + 3:02d}")
    return counts


def test_tables_equal_a_loop_over_random_persons() -> None:
    rng = np.random.default_rng(3)
    persons = [
        (int(rng.integers(8)), int(rng.integers(2)), int(rng.integers(2)), int(rng.integers(1, 64)))
        for _ in range(3000)
    ]
    cells = pl94_person_cells()
    got = dict(zip(cells.names, cells.answer(_hist(persons)).tolist(), strict=True))
    ref = _by_loop(persons)
    assert {k: v for k, v in got.items() if v} == ref
