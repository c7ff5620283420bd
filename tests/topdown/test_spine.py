"""The 2020 spines: AIAN split, optimized block groups against a direct transcription of the
production loop, blocks with units, Puerto Rico, and the exact bypass of single children."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

from privtab.data.errors import InputValidationError
from privtab.data.hierarchy import Hierarchy, HierarchySpec
from privtab.topdown.inputs import block_units
from privtab.topdown.spine import (
    STRONG_MCD_STATES,
    budget_shares,
    pr_spine,
    spine_from_hierarchy,
    us_spine,
)
from privtab.topdown.strategy import production_strategy
from tests.topdown._support import population


def _production_block_groups(blocks: pl.DataFrame) -> dict[str, list[list[str]]]:
    """Per tract, the block groups as lists of blocks — the production loop of
    ``call_optimize_spine`` written out (entities sorted, blocks in geocode order, a new
    block group once more than ⌊√n + 12⌋ blocks are in one)."""
    out: dict[str, list[list[str]]] = {}
    rows = list(blocks.sort("BLOCK").iter_rows(named=True))
    tracts = sorted({r["_AIAN"] + r["TABBLKST"] + r["TABBLKCOU"] + r["TABTRACTCE"] for r in rows})
    for t in tracts:
        in_tract = [
            r for r in rows if r["_AIAN"] + r["TABBLKST"] + r["TABBLKCOU"] + r["TABTRACTCE"] == t
        ]

        def entity(r: dict[str, str]) -> str:
            strong = r["TABBLKST"] in STRONG_MCD_STATES and r["_AIAN"] == "0"
            place = r["COUSUBFP"] if strong else r["PLACEFP"]
            aian = r["AIANNHCE"] if r["_AIAN"] == "1" else "9999"
            return place + aian + r["_GQ"]

        cutoff = int(np.sqrt(len(in_tract)) + 12)
        groups: list[list[str]] = []
        for e in sorted({entity(r) for r in in_tract}):
            n = 0
            groups.append([])
            for r in (r for r in in_tract if entity(r) == e):
                if n > cutoff:
                    groups.append([])
                    n = 0
                groups[-1].append(r["BLOCK"])
                n += 1
        out[t] = groups
    return out


def test_optimized_block_groups_follow_the_production_loop() -> None:
    pop = population(4)
    units = block_units(pop.units)
    sp = us_spine(pop.grfc, units)
    h = sp.hierarchy
    blocks = sp.blocks
    expected = _production_block_groups(blocks)
    bg_of_leaf = h.ancestors("Block_Group", "Block")
    tract_of_bg = h.parent("Block_Group")
    got: dict[str, list[list[str]]] = {}
    tract_ids = h.ids("Tract")
    for bg in range(h.size("Block_Group")):
        leaves = [i for i in range(len(bg_of_leaf)) if bg_of_leaf[i] == bg]
        got.setdefault(tract_ids[tract_of_bg[bg]], []).append(
            [blocks.get_column("BLOCK")[i] for i in leaves]
        )
    assert got == expected


def test_big_tracts_are_cut_into_pieces_of_isqrt_plus_13_blocks() -> None:
    rows = [
        {
            "TABBLKST": "01",
            "TABBLKCOU": "001",
            "TABTRACTCE": "000100",
            "TABBLKGRPCE": str(1 + b // 1000),
            "TABBLK": f"{1 + b // 1000}{b % 1000:03d}",
            "PLACEFP": "00100",
            "COUSUBFP": "00010",
            "AIANNHCE": "9999",
        }
        for b in range(400)
    ]
    sp = us_spine(pl.DataFrame(rows))
    sizes = sp.hierarchy.child_counts("Block_Group").tolist()
    piece = math.isqrt(400) + 12 + 1  # 33
    assert sizes == [piece] * (400 // piece) + [400 % piece]
    groups = _production_block_groups(sp.blocks)["001001000100"]
    assert [len(g) for g in groups] == sizes


def test_aian_parts_states_and_groups() -> None:
    pop = population(2)
    sp = us_spine(pop.grfc)
    h = sp.hierarchy
    assert h.levels == ("US", "State", "County", "Tract", "Block_Group", "Block")
    assert h.ids("State") == ["001", "009", "101"]  # AIAN flag, then state FIPS
    index, names = sp.unit_groups("State")
    assert names == ["01", "09"]
    assert index.tolist() == [0, 1, 0]
    aian = sp.blocks.filter(pl.col("_AIAN") == "1")
    assert set(aian.get_column("AIANNHCE")) == {"0150"}  # 8100: not a production area type
    assert sp.blocks.height == pop.grfc.height  # no units given: every block
    st_of_leaf = h.ancestors("State", "Block")
    for i, part in enumerate(sp.blocks.get_column("_AIAN")):
        assert h.ids("State")[st_of_leaf[i]][0] == part


def test_blocks_without_units_leave_the_spine_and_tabulation_groups_are_an_option() -> None:
    pop = population(5)
    units = block_units(pop.units)
    sp = us_spine(pop.grfc, units, optimized_block_groups=False)
    assert sp.blocks.height == units.height < pop.grfc.height
    bg = sp.hierarchy.ids("Block_Group")
    tract = sp.hierarchy.ids("Tract")
    par = sp.hierarchy.parent("Block_Group")
    assert all(b[len(tract[par[i]]) :] in "123456789" for i, b in enumerate(bg))
    assert "tabulation" in sp.description


def test_puerto_rico_spine_has_the_state_as_root() -> None:
    pop = population(6, states=("72", "01"))
    sp = pr_spine(pop.grfc)
    assert sp.hierarchy.levels == ("State", "County", "Tract", "Block_Group", "Block")
    assert set(sp.blocks.get_column("TABBLKST")) == {"72"}
    assert sp.hierarchy.chunk_level == "County"
    us = us_spine(pop.grfc)
    assert "72" not in set(us.blocks.get_column("TABBLKST"))


def test_bad_grfc_rows_are_located() -> None:
    pop = population(7)
    bad = pop.grfc.with_columns(
        pl.when(pl.int_range(pl.len()) == 4)
        .then(pl.lit("4995"))
        .otherwise(pl.col("AIANNHCE"))
        .alias("AIANNHCE")
    )
    with pytest.raises(InputValidationError) as err:
        us_spine(bad, source="GRF-C.txt")
    p = err.value.problems[0]
    assert (p.file, p.row, p.column, p.value) == ("GRF-C.txt", 6, "AIANNHCE", "4995")
    with pytest.raises(InputValidationError, match="COUSUBFP"):
        us_spine(pop.grfc.drop("COUSUBFP"))


def _expected_shares(h: Hierarchy, shares: list[Fraction]) -> list[list[Fraction]]:
    """Bypass by definition: a unit whose parent has one child is measured with it (0);
    any other unit carries its own share plus those of its chain of single children."""
    last = len(h.levels) - 1
    out: list[list[Fraction]] = []
    for k in range(len(h.levels)):
        row = []
        for u in range(h.size(k)):
            if k > 0 and len(h.children(k - 1, int(h.parent(k)[u]))) == 1:
                row.append(Fraction(0))
                continue
            s, kk, c = shares[k], k, u
            while kk < last and len(h.children(kk, c)) == 1:
                c, kk = h.children(kk, c)[0], kk + 1
                s += shares[kk]
            row.append(s)
        out.append(row)
    return out


def test_bypass_moves_single_children_shares_up_exactly() -> None:
    pop = population(8)
    sp = us_spine(pop.grfc, block_units(pop.units))
    h = sp.hierarchy
    strat = production_strategy("us")
    bs = budget_shares(h, strat.geolevel_shares)
    expected = _expected_shares(h, [strat.geolevel_shares[lv] for lv in h.levels])
    for k, lv in enumerate(h.levels):
        got = [bs.share(lv, i) for i in range(h.size(k))]
        assert got == expected[k], lv
    assert np.all(bs.per_block() == bs.denominator)
    assert any((n == 0).any() for n in bs.numerators)  # the population has single children
    pats, counts = bs.signatures()
    assert counts.sum() == h.size("Block")
    assert np.all(pats.sum(axis=1) == bs.denominator)


def test_a_lost_share_is_caught() -> None:
    pop = population(9)
    sp = us_spine(pop.grfc)
    bs = budget_shares(sp.hierarchy, production_strategy("us").geolevel_shares)
    bs.numerators[3][0] -= 1
    with pytest.raises(AssertionError, match="not 1"):
        bs.check()
    with pytest.raises(ValueError, match="not the spine's"):
        budget_shares(sp.hierarchy, production_strategy("pr").geolevel_shares)


def test_a_declared_hierarchy_is_a_spine() -> None:
    spec = HierarchySpec.declare(
        [
            ("PAIS", ()),
            ("REGION", ("REGION",)),
            ("PROVINCIA", ("PROVINCIA",)),
            ("COMUNA", ("COMUNA",)),
        ]
    )
    table = pl.DataFrame({"REGION": ["02", "01", "01"], "PROVINCIA": ["1", "1", "2"],
                          "COMUNA": ["01", "01", "01"], "BLOCK": ["a", "b", "c"]})  # fmt: skip
    sp = spine_from_hierarchy(spec.build(table), table)
    assert sp.blocks.get_column("BLOCK").to_list() == ["b", "c", "a"]
    shares = {
        "PAIS": Fraction(1, 4),
        "REGION": Fraction(1, 4),
        "PROVINCIA": Fraction(1, 4),
        "COMUNA": Fraction(1, 4),
    }
    bs = budget_shares(sp.hierarchy, shares)
    # region 02 has one province with one commune: its chain is measured once, at the region
    assert bs.share("REGION", 1) == Fraction(3, 4)
    assert bs.share("PROVINCIA", 2) == 0
