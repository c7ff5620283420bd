"""What a noisy measurement file needs beside the measurements to be post-processed alone.

A release run with ``--nmf`` writes, next to each run's ``nmf.json`` and
``dpqueries.parquet`` (:mod:`privtab.topdown.nmf`), the public structure of the run — as
the Census Bureau's noisy measurement file carries its ``Constraint`` table:

``structure.json``
    the spine's declaration (levels, their id columns, the chunk level, the groups of
    ``total_by_group``, its description), and per level the constraints that are not per
    geounit: the exact totals of the groups (``group_totals``) and the structurally zero
    cells (``structural_zeros``);
``spine.parquet``
    the spine's block table (the GRF-C columns of its blocks and the columns the spine
    derived: the AIAN flag, the optimized block group), one row per leaf;
``constraints.parquet``
    per level and geounit: ``lower`` and ``upper`` (the bounds on the persons by
    group-quarters type; null where none), ``total`` (exact, where in force), ``group``
    (the geounit's ``total_by_group`` group);
``blocks.parquet``
    the release's public block facts: every GRF-C block's tabulation columns and its
    invariant unit counts (``HU``, ``GQ1`` … ``GQ7``).

Everything here is a function of the GRF-C and the invariants of the run (the constraints'
right-hand sides: the unit counts by block, the state totals; production's State-level
bounds also use each AIAN / non-AIAN part's total — see ``release.json``'s invariants):
no noise, nothing else from the records. :func:`read_structure` rebuilds the spine (the
same hierarchy, checked) and the :class:`~privtab.topdown.constraints.LevelConstraints`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from privtab.atomic import atomic_write
from privtab.data.hierarchy import HierarchySpec
from privtab.errors import InputError
from privtab.topdown.constraints import LevelConstraints
from privtab.topdown.spine import Spine, spine_table

__all__ = ["RunStructure", "read_structure", "write_structure"]

STRUCTURE = "structure.json"
SPINE = "spine.parquet"
CONSTRAINTS = "constraints.parquet"
BLOCKS = "blocks.parquet"


def _as_list(a: np.ndarray | None) -> list[Any] | None:
    return None if a is None else a.tolist()


def write_structure(
    folder: Path,
    spine: Spine,
    constraints: Sequence[LevelConstraints],
    blocks: pl.DataFrame,
    cells: int,
) -> None:
    """Write the run's structure (histogram of ``cells`` cells) into its noisy measurement
    folder ``folder``."""
    h = spine.hierarchy
    doc = {
        "cells": cells,
        "levels": [[lv.name, list(lv.columns)] for lv in h.spec.levels],
        "chunk_level": h.chunk_level,
        "groups": {k: list(v) for k, v in spine.groups.items()},
        "description": spine.description,
        "group_totals": {c.level: _as_list(c.group_total) for c in constraints},
        "structural_zeros": {
            c.level: None
            if c.structural_zeros is None
            else np.flatnonzero(c.structural_zeros).tolist()
            for c in constraints
        },
    }
    spine_table(spine).write_parquet(folder / SPINE)
    rows = []
    for k, c in enumerate(constraints):
        ids = h.ids(k)
        n = len(ids)
        rows.append(
            pl.DataFrame(
                {
                    "geolevel": [c.level] * n,
                    "geocode": ids,
                    "lower": _as_list(c.lower) or [None] * n,
                    "upper": _as_list(c.upper) or [None] * n,
                    "total": _as_list(c.total) or [None] * n,
                    "group": _as_list(c.group_index) or [None] * n,
                },
                schema={
                    "geolevel": pl.String,
                    "geocode": pl.String,
                    "lower": pl.List(pl.Int64),
                    "upper": pl.List(pl.Int64),
                    "total": pl.Int64,
                    "group": pl.Int64,
                },
            )
        )
    pl.concat(rows).write_parquet(folder / CONSTRAINTS)
    blocks.write_parquet(folder / BLOCKS)
    atomic_write(folder / STRUCTURE, json.dumps(doc, indent=1) + "\n")


@dataclass(frozen=True, eq=False)
class RunStructure:
    """A run's structure read back: the spine, the constraints of every level (root
    first) and the public block facts."""

    spine: Spine
    constraints: list[LevelConstraints]
    blocks: pl.DataFrame


def _fail(folder: Path, name: str, message: str) -> InputError:
    return InputError(message, file=str(folder / name))


def read_structure(folder: str | Path) -> RunStructure:
    """Read and rebuild a run's structure (module docstring)."""
    d = Path(folder)
    try:
        doc = json.loads((d / STRUCTURE).read_text(encoding="utf-8"))
        blocks = pl.read_parquet(d / SPINE)
        table = pl.read_parquet(d / CONSTRAINTS)
        facts = pl.read_parquet(d / BLOCKS)
    except FileNotFoundError as exc:
        raise _fail(
            d,
            Path(str(exc.filename)).name,
            "missing: the noisy measurement file was written without its structure",
        ) from None
    except (OSError, ValueError, pl.exceptions.PolarsError) as exc:
        raise _fail(d, STRUCTURE, f"cannot read the structure: {exc}") from None
    spec = HierarchySpec.declare([(n, tuple(c)) for n, c in doc["levels"]], doc["chunk_level"])
    h = spec.build(blocks, source=str(d / SPINE), first_row=1)
    spine = Spine(
        h,
        blocks[h.leaf_rows.tolist()],
        {k: tuple(v) for k, v in doc["groups"].items()},
        doc["description"],
    )
    constraints = []
    for k, level in enumerate(h.levels):
        rows = table.filter(pl.col("geolevel") == level)
        if rows.get_column("geocode").to_list() != h.ids(k):
            raise _fail(d, CONSTRAINTS, f"the {level} rows are not the spine's geounits")

        def col(name: str, rows: pl.DataFrame = rows) -> np.ndarray | None:
            s = rows.get_column(name)
            if s.null_count() == s.len():
                return None
            if isinstance(s.dtype, pl.List):
                return np.asarray(s.to_list(), dtype=np.int64)
            return s.to_numpy().astype(np.int64)

        zeros = doc["structural_zeros"].get(level)
        sz = None
        if zeros is not None:
            sz = np.zeros(int(doc["cells"]), dtype=bool)
            sz[np.asarray(zeros, dtype=np.int64)] = True
        gt = doc["group_totals"].get(level)
        constraints.append(
            LevelConstraints(
                level,
                col("lower"),
                col("upper"),
                col("total"),
                col("group"),
                None if gt is None else np.asarray(gt, dtype=np.int64),
                sz,
                {},
            )
        )
    return RunStructure(spine, constraints, facts)
