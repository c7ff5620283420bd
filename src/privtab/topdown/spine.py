"""TopDown's geographic spines (the 2020 US and Puerto Rico presets) and the budget bypass.

A spine is a :class:`privtab.data.hierarchy.Hierarchy` over the blocks, built from a
GRF-C-like table (C1 columns ``TABBLKST TABBLKCOU TABTRACTCE TABBLKGRPCE TABBLK PLACEFP
COUSUBFP AIANNHCE``). The presets follow the production spine (``spine = opt_spine``,
``programs/geographic_spines/define_spines.py`` and ``optimize_spine.py`` of
``uscensusbureau/DAS_2020_Redistricting_Production_Code``):

* **AIAN split** (``target_das_aian_areas``): every state is cut into the part inside the
  American Indian / Alaska Native / Native Hawaiian areas of the production list
  (:data:`PRODUCTION_AIAN_AREAS`, AIANNHCE ranges :data:`AIANNHCE_RANGES`) and the rest;
  below the state every unit is intersected with its part (``redefine_counties =
  nowhere``: counties are not replaced by AIAN areas). Level ``State`` holds the parts
  (id = AIAN flag + state FIPS); ``total_by_group`` constrains the sum of a state's parts.
* **Optimized block groups** (default; ``optimized_block_groups=False`` uses the tabulation
  block groups ``TABBLKGRPCE``): in each tract the blocks are grouped by their *off-spine
  entity* — the place (or, in the strong-MCD states :data:`STRONG_MCD_STATES` outside AIAN
  areas, the county subdivision), the AIAN area, and (persons run) which of the seven
  group-quarters types the block has facilities of — and each group, blocks in geocode
  order, is cut into block groups of at most ``⌊√n⌋ + 12 + 1`` blocks (n: blocks of the
  tract; production ``fanout_cutoff = 12``). Block groups are numbered in the order
  (entity, piece) within their tract. The production tract-group step is idle in 2020
  (no Tract_Group level), and with the discrete Gaussian (``epsilon_delta``) only
  single-child geounits are bypassed — both as here.
* **Blocks**: as production (the spine is built from the blocks that have units), only the
  blocks with at least one housing unit or group-quarters facility when ``units`` is given;
  the unit counts are invariants, public to the algorithm. Blocks without units have no
  persons (every persons cell is bounded by 0) and no housing units.

**Bypass** (:func:`budget_shares`): a geounit with exactly one child has the same histogram
as that child, so production measures the pair once: the child's share of the budget moves
to the parent (recursively, a chain of single children is measured once, at its top, with
the sum of their shares and the top level's query shares) and the child is not measured.
Every block's ρ stays exactly the strategy's; :meth:`BudgetShares.check` proves it in
exact integer arithmetic for every block.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import NDArray

from privtab.data.errors import Problem, ProblemLog
from privtab.data.hierarchy import Hierarchy, HierarchySpec

__all__ = [
    "AIANNHCE_RANGES",
    "GRFC_SPINE_COLUMNS",
    "PRODUCTION_AIAN_AREAS",
    "STRONG_MCD_STATES",
    "BudgetShares",
    "Spine",
    "budget_shares",
    "pr_spine",
    "production_spine",
    "spine_from_hierarchy",
    "spine_table",
    "us_spine",
]

#: GRF-C columns a preset spine reads (C1 layout).
GRFC_SPINE_COLUMNS = (
    "TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLKGRPCE", "TABBLK", "PLACEFP", "COUSUBFP",
    "AIANNHCE",
)  # fmt: skip

#: AIANNHCE code ranges by area type (production ``AIANNHCE_ranges.csv``; 9999 = none).
AIANNHCE_RANGES: dict[str, tuple[int, int]] = {
    "Legal_Federally_Recognized_American_Indian_Area": (1, 4799),
    "American_Indian_Joint_Use_Area": (4800, 4989),
    "Hawaiian_Home_Land": (5000, 5499),
    "Oklahoma_Tribal_Statistical_Area": (5500, 5899),
    "Joint_Use_Oklahoma_Tribal_Statistical_Area": (5900, 5999),
    "Alaska_Native_Village_Statistical_Area": (6000, 7999),
    "Tribal_Designated_Statistical_Area": (8000, 8999),
    "State_Recognized_Legal_American_Indian_Area": (9000, 9499),
    "State_Designated_Tribal_Statistical_Area": (9500, 9998),
}

#: The AIAN area types of the production spine (``aian_areas`` of ``prod_default.ini``).
PRODUCTION_AIAN_AREAS = (
    "Legal_Federally_Recognized_American_Indian_Area",
    "American_Indian_Joint_Use_Area",
    "Hawaiian_Home_Land",
    "Alaska_Native_Village_Statistical_Area",
    "State_Recognized_Legal_American_Indian_Area",
    "Oklahoma_Tribal_Statistical_Area",
    "Joint_Use_Oklahoma_Tribal_Statistical_Area",
)

#: States whose minor civil divisions are targeted instead of places (production default).
STRONG_MCD_STATES = ("09", "23", "25", "26", "27", "33", "34", "36", "42", "44", "50", "55")

PR_STATE = "72"
FANOUT_CUTOFF = 12
GQ_TYPES = 7


@dataclass(frozen=True)
class Spine:
    """A TopDown spine: the hierarchy, its blocks in leaf order, and the grouping used by
    ``total_by_group`` (level → the block-table columns whose value names a unit's group:
    the AIAN and non-AIAN parts of one state form a group).

    ``blocks`` holds ``BLOCK`` as text and the code columns as text or (the production
    spines) categoricals, which read the same; :func:`spine_table` gives it all as text."""

    hierarchy: Hierarchy
    blocks: pl.DataFrame
    groups: Mapping[str, tuple[str, ...]]
    description: str

    def unit_groups(self, level: str) -> tuple[NDArray[np.int64], list[str]]:
        """For each unit of ``level``, the index of its group, and the group names."""
        cols = self.groups.get(level)
        h = self.hierarchy
        if cols is None:
            return np.arange(h.size(level), dtype=np.int64), h.ids(level)
        keys = self.blocks[h.leaf_starts(level).tolist()].select(
            pl.concat_str(list(cols)).alias("g")
        )
        names, index = np.unique(keys.get_column("g").to_numpy().astype(str), return_inverse=True)
        return index.astype(np.int64), [str(n) for n in names]


def _aian_flags(
    table: pl.DataFrame, aian_areas: Sequence[str], source: str, first_row: int, log: ProblemLog
) -> pl.Expr:
    unknown = [a for a in aian_areas if a not in AIANNHCE_RANGES]
    if unknown:
        raise ValueError(f"unknown AIAN area type {unknown[0]!r}; known: {list(AIANNHCE_RANGES)}")
    code = pl.col("AIANNHCE").cast(pl.Utf8)
    bad = table.with_row_index("_r").filter(
        ~code.str.contains(r"^[0-9]{4}$").fill_null(False)
        | code.cast(pl.Int32, strict=False).is_between(4990, 4999)
    )
    if bad.height:
        log.add_many(
            bad.height,
            (
                Problem(source, "bad_aiannhce", "AIANNHCE must be 4 digits, not 4990-4999",
                        first_row + int(r), "AIANNHCE", None if v is None else str(v))
                for r, v in bad.select("_r", "AIANNHCE").head(log.examples).iter_rows()
            ),
        )  # fmt: skip
    num = code.cast(pl.Int32, strict=False)
    inside = pl.lit(False)
    for a in aian_areas:
        lo, hi = AIANNHCE_RANGES[a]
        inside = inside | num.is_between(lo, hi)
    return pl.when(inside).then(pl.lit("1")).otherwise(pl.lit("0"))


def _checked_grfc(grfc: pl.DataFrame, source: str, log: ProblemLog) -> None:
    for c in GRFC_SPINE_COLUMNS:
        if c not in grfc.columns:
            log.add(Problem(source, "missing_column", f"a spine needs column {c!r}", column=c))


def _gq_flags(blocks: pl.DataFrame, units: pl.DataFrame | None, use_gq: bool) -> pl.DataFrame:
    if units is None:
        return blocks.with_columns(pl.lit("0" * GQ_TYPES).alias("_GQ"))
    gq = [f"GQ{t}" for t in range(1, GQ_TYPES + 1)]
    flags = (
        pl.concat_str([pl.when(pl.col(c) > 0).then(pl.lit("1")).otherwise(pl.lit("0")) for c in gq])
        if use_gq
        else pl.lit("0" * GQ_TYPES)
    )
    has_units = pl.sum_horizontal("HU", *gq) > 0
    joined = blocks.join(units.select("BLOCK", "HU", *gq), on="BLOCK", how="left").with_columns(
        pl.col("HU", *gq).fill_null(0)
    )
    return joined.filter(has_units).with_columns(flags.alias("_GQ")).drop("HU", *gq)


def _optimized_block_groups(blocks: pl.DataFrame, tract_cols: Sequence[str]) -> pl.DataFrame:
    tract = pl.concat_str(list(tract_cols))
    strong = pl.col("TABBLKST").is_in(list(STRONG_MCD_STATES)) & (pl.col("_AIAN") == "0")
    entity = pl.concat_str(
        pl.when(strong).then(pl.col("COUSUBFP")).otherwise(pl.col("PLACEFP")),
        pl.when(pl.col("_AIAN") == "1").then(pl.col("AIANNHCE")).otherwise(pl.lit("9999")),
        pl.col("_GQ"),
    )
    b = blocks.with_columns(tract.alias("_TRACT"), entity.alias("_ENTITY")).sort("_TRACT", "BLOCK")
    n = b.group_by("_TRACT").agg(pl.len().alias("_N"))
    cut = {t: math.isqrt(int(k)) + FANOUT_CUTOFF + 1 for t, k in n.iter_rows()}
    b = b.with_columns(
        pl.col("_TRACT").replace_strict(cut, return_dtype=pl.Int64).alias("_CUT"),
        pl.int_range(pl.len()).over("_TRACT", "_ENTITY").alias("_RANK"),
    ).with_columns((pl.col("_RANK") // pl.col("_CUT")).alias("_PIECE"))
    b = b.with_columns(
        pl.struct("_ENTITY", "_PIECE").rank("dense").over("_TRACT").cast(pl.Int64).alias("_BGN")
    )
    width = len(str(b.get_column("_BGN").cast(pl.Int64).max() or 1))
    return b.with_columns(pl.col("_BGN").cast(pl.Utf8).str.zfill(width).alias("_BG")).drop(
        "_TRACT", "_ENTITY", "_CUT", "_RANK", "_PIECE", "_BGN"
    )


def _compact(table: pl.DataFrame) -> pl.DataFrame:
    """The spine's block table with its code columns as categoricals: 4 bytes a block
    instead of a 16-byte string view, ≈ 0.8 GiB less a spine at the nation's 6.5 × 10⁶
    blocks with units. ``BLOCK`` stays text (the key the records join on); the values
    read the same (``to_list``, comparisons, ``concat_str``), and a spine written to a
    file is written as text (:func:`spine_table`)."""
    return table.with_columns(pl.exclude("BLOCK").cast(pl.Categorical))


def spine_table(spine: Spine) -> pl.DataFrame:
    """The spine's block table with every column as text (as written to files)."""
    return spine.blocks.with_columns(pl.col(pl.Categorical).cast(pl.Utf8))


def production_spine(
    grfc: pl.DataFrame,
    units: pl.DataFrame | None = None,
    *,
    puerto_rico: bool = False,
    gq_types_in_block_groups: bool = True,
    optimized_block_groups: bool = True,
    aian_areas: Sequence[str] = PRODUCTION_AIAN_AREAS,
    source: str = "GRF-C",
    first_row: int = 2,
) -> Spine:
    """The 2020 production spine from a GRF-C frame (module docstring): the US one (US →
    State (AIAN / non-AIAN part) → County → Tract → Block_Group → Block, Puerto Rico's
    blocks left out) or, with ``puerto_rico``, Puerto Rico's (State root → County → Tract
    → Block_Group → Block, the blocks of state 72; no AIAN split: it has no AIAN areas).

    ``units`` — one row per block with ``BLOCK`` and the unit counts ``HU``, ``GQ1`` …
    ``GQ7`` (:func:`privtab.topdown.inputs.block_units`) — restricts the spine to blocks
    with units and gives the group-quarters types of the optimized block groups
    (``gq_types_in_block_groups``: True for the persons run, False for the units run —
    production ``ignore_gqs_in_block_groups``). Errors name ``source`` and the row.
    """
    pr = puerto_rico
    log = ProblemLog()
    _checked_grfc(grfc, source, log)
    log.raise_if_any()
    table = grfc.select(*(pl.col(c).cast(pl.Utf8) for c in GRFC_SPINE_COLUMNS))
    aian = _aian_flags(table, aian_areas, source, first_row, log)
    log.raise_if_any()
    st = pl.col("TABBLKST")
    table = table.filter(st == PR_STATE if pr else st != PR_STATE).with_columns(
        aian.alias("_AIAN"),
        pl.concat_str("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK").alias("BLOCK"),
    )
    table = _gq_flags(table, units, gq_types_in_block_groups)
    if pr:
        state_cols: tuple[str, ...] = ()
        tract_cols: tuple[str, ...] = ("TABBLKCOU", "TABTRACTCE")
    else:
        state_cols = ("_AIAN", "TABBLKST")
        tract_cols = (*state_cols, "TABBLKCOU", "TABTRACTCE")
    if optimized_block_groups:
        table = _optimized_block_groups(table, tract_cols)
    else:
        table = table.with_columns(pl.col("TABBLKGRPCE").alias("_BG"))
    below = [("County", ("TABBLKCOU",)), ("Tract", ("TABTRACTCE",)), ("Block_Group", ("_BG",)),
             ("Block", ("TABBLK",))]  # fmt: skip
    if pr:
        spec = HierarchySpec.declare([("State", ()), *below], chunk_level="County")
        groups: dict[str, tuple[str, ...]] = {}
    else:
        spec = HierarchySpec.declare([("US", ()), ("State", state_cols), *below], "State")
        groups = {"State": ("TABBLKST",)}
    h = spec.build(table, source=source, first_row=first_row)
    blocks = _compact(table)[h.leaf_rows.tolist()]
    bg = "optimized" if optimized_block_groups else "tabulation"
    what = "Puerto Rico (State root)" if pr else "US (AIAN / non-AIAN parts of states)"
    return Spine(h, blocks, groups, f"{what}; {bg} block groups")


def us_spine(grfc: pl.DataFrame, units: pl.DataFrame | None = None, **options: Any) -> Spine:
    """The 2020 US spine (:func:`production_spine`)."""
    return production_spine(grfc, units, puerto_rico=False, **options)


def pr_spine(grfc: pl.DataFrame, units: pl.DataFrame | None = None, **options: Any) -> Spine:
    """The 2020 Puerto Rico spine (:func:`production_spine` with ``puerto_rico``)."""
    return production_spine(grfc, units, puerto_rico=True, **options)


def spine_from_hierarchy(
    hierarchy: Hierarchy, blocks: pl.DataFrame, description: str = ""
) -> Spine:
    """A spine of any declared hierarchy (an office's own levels): ``blocks`` is the table
    it was built from; the leaves' rows are taken in leaf order."""
    return Spine(
        hierarchy, blocks[hierarchy.leaf_rows.tolist()], {}, description or "declared hierarchy"
    )


# ----------------------------------------------------------------------------- bypass


@dataclass(frozen=True, eq=False)
class BudgetShares:
    """Every geounit's share of the budget after the bypass, exactly: the share of unit
    ``i`` of level ``k`` is ``numerators[k][i] / denominator`` (0: measured with its
    single-child parent, not alone)."""

    hierarchy: Hierarchy
    levels: tuple[str, ...]
    nominal: tuple[Fraction, ...]
    denominator: int
    numerators: tuple[NDArray[np.int64], ...]

    def share(self, level: str, unit: int) -> Fraction:
        k = self.levels.index(level)
        return Fraction(int(self.numerators[k][unit]), self.denominator)

    def distinct(self, level: str) -> dict[int, Fraction]:
        """``{numerator: share}`` of the positive shares at ``level``."""
        k = self.levels.index(level)
        vals = np.unique(self.numerators[k])
        return {int(v): Fraction(int(v), self.denominator) for v in vals if v > 0}

    def per_block(self) -> NDArray[np.int64]:
        """For every block, the sum over its geounits (itself and its ancestors) of their
        shares' numerators — exactly ``denominator`` when nothing was lost or doubled."""
        h = self.hierarchy
        last = len(self.levels) - 1
        total = self.numerators[last].copy()
        for k in range(last):
            total += self.numerators[k][h.ancestors(k, last)]
        return total

    def check(self) -> None:
        """Raise ``AssertionError`` unless every block's shares sum to exactly the
        strategy's total (1): the bypass moved budget, it never lost or added any."""
        total = self.per_block()
        bad = np.flatnonzero(total != self.denominator)
        if bad.size:
            b = int(bad[0])
            block = self.hierarchy.ids(len(self.levels) - 1)[b]
            raise AssertionError(
                f"block {block}: geounit shares sum to "
                f"{Fraction(int(total[b]), self.denominator)}, not 1 ({bad.size} blocks)"
            )

    def signatures(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """The distinct per-level share patterns of the blocks' geounit chains:
        ``(patterns (m, levels), count of blocks per pattern)``."""
        h = self.hierarchy
        last = len(self.levels) - 1
        cols = [self.numerators[k][h.ancestors(k, last)] for k in range(last)]
        cols.append(self.numerators[last])
        pats, counts = np.unique(np.stack(cols, axis=1), axis=0, return_counts=True)
        return pats.astype(np.int64), counts.astype(np.int64)


def budget_shares(hierarchy: Hierarchy, geolevel_shares: Mapping[str, Fraction]) -> BudgetShares:
    """The per-geounit shares of ``geolevel_shares`` (level → share) on ``hierarchy`` after
    the production bypass of single-child geounits (module docstring), checked exactly."""
    levels = hierarchy.levels
    if tuple(geolevel_shares) != levels:
        raise ValueError(
            f"the strategy's levels {list(geolevel_shares)} are not the spine's {list(levels)}"
        )
    nominal = tuple(Fraction(geolevel_shares[lv]) for lv in levels)
    den = math.lcm(*(s.denominator for s in nominal))
    nums = [np.full(hierarchy.size(k), int(s * den), dtype=np.int64) for k, s in enumerate(nominal)]
    for k in range(len(levels) - 2, -1, -1):
        off = hierarchy.offsets(k)
        single = np.flatnonzero(np.diff(off) == 1)
        child = off[single]
        nums[k][single] += nums[k + 1][child]
        nums[k + 1][child] = 0
    out = BudgetShares(hierarchy, levels, nominal, den, tuple(nums))
    out.check()
    return out
