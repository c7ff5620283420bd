"""Invariants and constraints by the production rules: block bounds from the unit counts,
right-hand sides added up the spine, the stricter bound kept where a level adds its own,
the national total, the state totals over AIAN parts, and infeasible data refused."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from privtab.errors import InputError
from privtab.topdown.constraints import (
    HHGQ_CAP,
    build_constraints,
    check_feasible,
    nurse_minor_cells,
)
from privtab.topdown.histogram import CELLS, SHAPE, cell_index
from privtab.topdown.inputs import SparseHistograms, block_histograms, block_units, units_histograms
from privtab.topdown.spine import Spine, us_spine
from privtab.topdown.strategy import production_strategy
from tests.topdown._support import Population, population


def _setup(pop: Population) -> tuple[Spine, pl.DataFrame, list[SparseHistograms]]:
    units = block_units(pop.units)
    sp = us_spine(pop.grfc, units)
    leaves = SparseHistograms.from_blocks(block_histograms(pop.persons), sp, CELLS)
    return sp, units, leaves.levels(sp)


def _hhgq(levels: SparseHistograms, n: int) -> np.ndarray:
    d = levels.dense(range(n))
    return d.reshape(n, SHAPE[0], -1).sum(axis=2)


def test_block_bounds_are_the_unit_counts() -> None:
    pop = population(11)
    sp, units, levels = _setup(pop)
    cons = build_constraints(production_strategy("us"), sp, units, [lv.totals() for lv in levels])
    block = cons[-1]
    counts = sp.blocks.select("BLOCK").join(units, on="BLOCK", how="left")
    n = counts.select("HU", *(f"GQ{t}" for t in range(1, 8))).to_numpy()
    assert np.array_equal(block.lower, n * np.array([0, 1, 1, 1, 1, 1, 1, 1]))
    assert np.array_equal(block.upper, n * HHGQ_CAP)
    assert block.total is None
    assert block.group_index is None
    assert block.structural_zeros is not None
    assert block.structural_zeros.sum() == 2 * 63
    assert block.structural_zeros[cell_index(3, 0, 1, 5)]
    assert not block.structural_zeros[cell_index(3, 1, 1, 5)]
    assert "tot" not in block.invariants


def test_bounds_add_up_and_the_state_keeps_the_stricter() -> None:
    pop = population(12)
    sp, units, levels = _setup(pop)
    h = sp.hierarchy
    cons = build_constraints(production_strategy("us"), sp, units, [lv.totals() for lv in levels])
    k_state = h.level("State")
    for k in range(k_state + 1, len(h.levels) - 1):  # County .. Block_Group: plain sums
        lo = np.zeros((h.size(k), 8), dtype=np.int64)
        np.add.at(lo, h.parent(k + 1), cons[k + 1].lower)
        assert np.array_equal(cons[k].lower, lo)
        up = np.zeros_like(lo)
        np.add.at(up, h.parent(k + 1), cons[k + 1].upper)
        assert np.array_equal(cons[k].upper, up)
    st = cons[k_state]
    n = st.invariants["gqhh_vect"]
    tot = levels[k_state].totals()
    lb_unit = n * np.array([0, 1, 1, 1, 1, 1, 1, 1])
    for i in range(h.size(k_state)):
        for t in range(8):
            others = n[i].sum() - n[i, t]
            own_lo = lb_unit[i, t] if others > 0 else tot[i]
            own_up = min(
                tot[i] - (lb_unit[i].sum() - lb_unit[i, t]) if n[i, t] > 0 else 0,
                n[i, t] * HHGQ_CAP,
            )
            kids = list(h.children(k_state, i))
            assert st.lower[i, t] == max(own_lo, cons[k_state + 1].lower[kids, t].sum())
            assert st.upper[i, t] == min(own_up, cons[k_state + 1].upper[kids, t].sum())
    root = cons[0]
    assert root.total is not None
    assert root.total.tolist() == [pop.persons.height]
    assert st.group_total is not None
    assert st.group_index is not None
    states = sp.hierarchy.ids("State")
    by_state: dict[str, int] = {}
    for s, t in zip(states, tot, strict=True):
        by_state[s[1:]] = by_state.get(s[1:], 0) + int(t)
    assert st.group_total.tolist() == [by_state[k] for k in sorted(by_state)]


def test_the_true_data_satisfy_every_constraint_at_every_level() -> None:
    for seed in (13, 14, 15):
        pop = population(seed)
        sp, units, levels = _setup(pop)
        h = sp.hierarchy
        cons = build_constraints(
            production_strategy("us"), sp, units, [lv.totals() for lv in levels]
        )
        for k in range(len(h.levels)):
            c = cons[k]
            hh = _hhgq(levels[k], h.size(k))
            assert np.all(hh >= c.lower), h.levels[k]
            assert np.all(hh <= c.upper), h.levels[k]
            dense = levels[k].dense(range(h.size(k)))
            assert not dense[:, nurse_minor_cells()].any()
            if c.total is not None:
                assert np.array_equal(c.total, dense.sum(axis=1))
        check_feasible(levels[-1], cons[-1], sp)


def test_a_constraint_without_its_invariant_is_a_config_error() -> None:
    pop = population(16)
    sp, units, levels = _setup(pop)
    doc = production_strategy("us").to_dict()
    doc["invariants"] = {"Block": ["gqhh_vect", "gqhh_tot"]}
    from privtab.topdown.strategy import parse_strategy

    with pytest.raises(ValueError, match="needs the invariant"):
        build_constraints(parse_strategy(doc), sp, units, [lv.totals() for lv in levels])


def test_units_run_totals_are_exact_everywhere() -> None:
    pop = population(17)
    units = block_units(pop.units)
    sp = us_spine(pop.grfc, units, gq_types_in_block_groups=False)
    leaves = SparseHistograms.from_blocks(units_histograms(units), sp, 2, source="units")
    levels = leaves.levels(sp)
    cons = build_constraints(
        production_strategy("units"), sp, units, [lv.totals() for lv in levels]
    )
    for k, c in enumerate(cons):
        assert c.lower is None
        assert c.upper is None
        assert c.structural_zeros is None
        assert c.total is not None
        assert np.array_equal(c.total, levels[k].totals())
    assert cons[0].total.tolist() == [int(units.get_column("HU").sum())]


def test_infeasible_data_are_refused_naming_the_block() -> None:
    pop = population(18)
    units = block_units(pop.units)
    no_gq5 = units.filter(pl.col("GQ5") == 0).get_column("BLOCK")[0]
    person = pop.persons.filter(pl.col("QGQTYP").is_null()).head(1)
    stray = person.with_columns(
        pl.lit(no_gq5[:2]).alias("TABBLKST"), pl.lit(no_gq5[2:5]).alias("TABBLKCOU"),
        pl.lit(no_gq5[5:11]).alias("TABTRACTCE"), pl.lit(no_gq5[11:]).alias("TABBLK"),
        pl.lit("501").alias("QGQTYP"),
    )  # fmt: skip
    bad = population(18)
    bad.persons = pl.concat([pop.persons, stray])
    sp, _, levels = _setup(bad)
    cons = build_constraints(production_strategy("us"), sp, units, [lv.totals() for lv in levels])
    with pytest.raises(InputError, match="hhgq_total_ub") as err:
        check_feasible(levels[-1], cons[-1], sp)
    assert no_gq5 in err.value.message
    assert "hhgq 5" in err.value.message
    minor = (
        pop.persons.filter(pl.col("QGQTYP") == "301")
        .head(1)
        .with_columns(pl.lit("010").alias("QAGE"))
    )
    assert minor.height == 1  # population 18 has nursing facilities
    bad.persons = pl.concat([pop.persons, minor])
    sp, _, levels = _setup(bad)
    cons = build_constraints(production_strategy("us"), sp, units, [lv.totals() for lv in levels])
    with pytest.raises(InputError, match="under 18 in a nursing"):
        check_feasible(levels[-1], cons[-1], sp)


@pytest.mark.parametrize("chunk", [1, 5, 1 << 22])
def test_hhgq_totals_in_chunks_equal_the_dense_sums(chunk: int) -> None:
    """The feasibility check's persons by block and hhgq, summed a few entries at a time
    (a unit's entries split across chunks), equal the dense histograms' sums."""
    # private on purpose: the chunk size is a memory knob of check_feasible, which uses
    # one chunk at test sizes; the split across chunks is only reachable here
    from privtab.topdown.constraints import _hhgq_totals

    pop = population(12)
    sp, _, levels = _setup(pop)
    n = sp.hierarchy.size("Block")
    got = _hhgq_totals(levels[-1], chunk)
    assert got.dtype == np.int64
    assert np.array_equal(got, _hhgq(levels[-1], n))
