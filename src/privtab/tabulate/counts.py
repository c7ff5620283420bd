"""Exact counts of a level's groups from the aggregated cells (the Polars joins).

Cells (persons per geo unit × race-code combination × sex × age, from
:mod:`privtab.tabulate.aggregate`) → regions of the level (an array lookup from the GRF-C)
→ iterations of the level (a join with the expansion of the *distinct* code combinations,
:func:`privtab.data.expand_iterations`) → persons per (group, sex, age). Exact counts; no
privacy cost by themselves (only noisy outputs are published).
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numpy.typing import NDArray

from privtab.data import Geography, GeoLevel, ReferenceData
from privtab.data.geography import UNIT
from privtab.data.membership import RACE_KEYS, expand_iterations
from privtab.tabulate.aggregate import COMBO, Cells
from privtab.tabulate.domain import Domain

__all__ = ["combo_iterations", "true_counts", "unit_regions"]


def unit_regions(geography: Geography, geo: GeoLevel) -> NDArray[np.int64]:
    """Region index (in the level's sorted domain) of every UNIT, −1 outside the level."""
    units = geography.units.select(UNIT, pl.col(geo.value).to_physical().alias("_R"))
    top = units[UNIT].max()
    out = np.full(int(top) + 1 if isinstance(top, int) else 1, -1, dtype=np.int64)
    reg = units["_R"].fill_null(-1).to_numpy()
    out[units[UNIT].to_numpy()] = reg
    return out


def combo_iterations(
    cells: Cells, dom: Domain, reference: ReferenceData, level: int
) -> pl.DataFrame:
    """``COMBO`` → ``_I`` (iteration index in ``dom.codes``) for every combination and
    every iteration of the level it belongs to (:func:`privtab.data.expand_iterations`)."""
    expansion = expand_iterations(cells.combos, reference, level, dom.geo.granularity)
    index = {c: i for i, c in enumerate(dom.codes)}
    return (
        expansion.join(cells.combos, on=[*RACE_KEYS, "QSPAN"], how="inner")
        .select(
            COMBO,
            pl.col("ITERATION_CODE")
            .cast(pl.String)
            .replace_strict(index, default=None, return_dtype=pl.Int64)
            .alias("_I"),
        )
        .drop_nulls()
    )


def true_counts(
    cells: Cells,
    dom: Domain,
    geography: Geography,
    combo_it: pl.DataFrame,
) -> pl.DataFrame:
    """Exact person counts per (``G``, ``QSEX``, ``QAGE``) of the groups of ``dom``
    (``G`` indexes ``dom`` region-major from 0). Groups with no persons have no rows.
    ``combo_it`` is :func:`combo_iterations` of the level."""
    n_it = len(dom.codes)
    empty = pl.DataFrame(schema={"G": pl.Int64, "QSEX": pl.UInt8, "QAGE": pl.UInt8, "N": pl.Int64})
    if cells.cells.height == 0 or n_it == 0 or not dom.regions:
        return empty
    # int32 region per cell, then only the cells inside the slice: a few bytes per cell
    # of transient memory (levels like AIANNH see every cell of the nation)
    unit_region = unit_regions(geography, dom.geo).astype(np.int32)
    units = cells.cells[UNIT].to_numpy()
    if int(units.max()) >= len(unit_region):
        unit_region = np.concatenate(
            [unit_region, np.full(int(units.max()) + 1 - len(unit_region), -1, np.int32)]
        )
    region = unit_region[units]
    region -= np.int32(dom.first_region)
    keep = (region >= 0) & (region < len(dom.regions))
    if not keep.any():
        return empty
    sel: slice | NDArray[np.intp] = slice(None) if keep.all() else np.flatnonzero(keep)
    del keep
    # one UInt64 key per (region, combination, sex, age): single-key group-bys are fast
    key = region[sel].astype(np.uint64) << np.uint64(32)
    del region
    key |= cells.cells[COMBO].to_numpy()[sel].astype(np.uint64) << np.uint64(8)
    key |= (cells.cells["QSEX"].to_numpy()[sel].astype(np.uint64) - np.uint64(1)) << np.uint64(7)
    key |= cells.cells["QAGE"].to_numpy()[sel].astype(np.uint64)
    counts = cells.cells["N"].to_numpy()[sel]
    by_region = (
        pl.DataFrame({"K": key, "N": counts})
        .group_by("K")
        .agg(pl.col("N").sum().cast(pl.Int64))
        .with_columns(
            (pl.col("K") // (1 << 32)).cast(pl.Int64).alias("_R"),
            ((pl.col("K") // 256) % (1 << 24)).cast(pl.UInt32).alias(COMBO),
            (pl.col("K") % 256).cast(pl.UInt16).alias("_SA"),
        )
    )
    fine = (
        by_region.join(combo_it, on=COMBO, how="inner")
        .select(((pl.col("_R") * n_it + pl.col("_I")) * 256 + pl.col("_SA")).alias("K2"), "N")
        .group_by("K2")
        .agg(pl.col("N").sum())
    )
    return fine.select(
        (pl.col("K2") // 256).cast(pl.Int64).alias("G"),
        ((pl.col("K2") // 128) % 2 + 1).cast(pl.UInt8).alias("QSEX"),
        (pl.col("K2") % 128).cast(pl.UInt8).alias("QAGE"),
        "N",
    )
