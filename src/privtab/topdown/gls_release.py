"""The tree GLS of a release's noisy measurements: estimates and exact standard deviations
of every P1–P5 cell of every spine geounit and tabulation geography.

A release run with ``--nmf`` carries, per run (``nmf/US-persons`` …), the noisy
measurements and the run's public structure (:mod:`privtab.topdown.nmf`,
:mod:`privtab.topdown.nmf_structure`). :func:`gls_run` turns one persons run into the
inputs of :mod:`privtab.topdown.gls` and solves it:

* **the tree** — the spine's geounits; where the run has ``total_by_group`` (the US run:
  each state's AIAN and non-AIAN parts sum to the state's exact total) a level of
  *group geounits* (the tabulation states) is put between the root and the parts, so
  that the invariant is an exact constraint of one geounit;
* **measurements** — one :class:`~privtab.topdown.gls.Measurements` per (level, query) of
  the file's rows, each row's variance the exact variance of the discrete Gaussian of its
  σ² (:func:`~privtab.topdown.gls.noise_variance`); geounits measured with their single
  parent (the bypass) have no rows and take their parent's estimate;
* **constraints** — the exact totals (the root's; each group's), and every bound ``≤ 0``
  as a selection query equal to 0 at every geounit where it holds (a group-quarters type
  without a facility; households where there is no housing unit; no minors in nursing
  facilities). The ``≥`` bounds and positive upper bounds are never used: a linear
  unbiased estimator cannot use inequalities (the Census's estimator does the same, with
  its equalities as measurements of variance 2⁻¹⁴; privtab imposes them exactly,
  :mod:`privtab.topdown.gls`).

**State by state.** With group geounits the tree is solved by
:func:`~privtab.topdown.gls.tree_gls_split`: one state's subtree in memory at a time
(its bottom-up pass, then the nation's two passes over the states' subtree estimates,
then each state top-down). Without (Puerto Rico) the tree is solved whole.

**Outputs** (:class:`GLSLevel`), per geolevel:

* the spine's geounits (``spine-<Level>``, GEOID the spine id: a state part's county is
  not the tabulation county);
* the tabulation geographies of the GRF-C (the P.L. 94-171 GEOIDs): ``NATION`` (the US
  root), ``STATE`` (the group geounits; Puerto Rico's root), ``COUNTY`` and ``TRACT``
  (sums of the spine geounits of the county or tract in each state part),
  ``BLOCK_GROUP``, ``PLACE`` and ``AIANNH`` (sums of blocks), ``BLOCK`` (the spine's
  blocks; a block without housing units or facilities has no persons — exactly 0 — and
  is not listed). A sum of geounits has its exact variance, cross-covariances included
  (:meth:`~privtab.topdown.gls.TreeGLS.aggregate`), when its geounits lie in one state's
  subtree; an AIANNH area crossing states is not computed (listed in ``missing``).

Privacy: everything is computed from the noisy measurements and the run's public
structure (the invariants and the GRF-C): post-processing, no privacy cost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import NDArray

from privtab.errors import InputError
from privtab.topdown.constraints import LevelConstraints
from privtab.topdown.gls import (
    Constraints,
    GeounitTree,
    Measurements,
    Part,
    TreeGLS,
    noise_variance,
    tree_gls,
    tree_gls_split,
)
from privtab.topdown.kron import KronCells, KronQuery
from privtab.topdown.nmf import NoisyMeasurementFile, read_nmf
from privtab.topdown.nmf_structure import RunStructure, read_structure
from privtab.topdown.schema import Schema

__all__ = [
    "CONSTRAINTS_USED",
    "GROUP_LEVEL",
    "TABULATION_LEVELS",
    "GLSLevel",
    "GLSRun",
    "gls_run",
    "persons_runs",
    "read_gls_run",
    "release_gls",
]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: The name of the level of group geounits (the tabulation states of the US run).
GROUP_LEVEL = "STATE"
#: The tabulation geolevels, in output order, and the depth each needs.
TABULATION_LEVELS: tuple[str, ...] = (
    "NATION", "STATE", "COUNTY", "TRACT", "BLOCK_GROUP", "BLOCK", "PLACE", "AIANNH",
)  # fmt: skip
#: ``--to``: the deepest tabulation level wanted → the tabulation levels computed.
DEPTHS: dict[str, tuple[str, ...]] = {
    "STATE": ("NATION", "STATE"),
    "COUNTY": ("NATION", "STATE", "COUNTY"),
    "TRACT": ("NATION", "STATE", "COUNTY", "TRACT"),
    "BLOCK_GROUP": ("NATION", "STATE", "COUNTY", "TRACT", "BLOCK_GROUP", "PLACE", "AIANNH"),
    "BLOCK": TABULATION_LEVELS,
}
_SEP = "|"
#: The GRF-C columns the tabulation GEOIDs are made of.
GRFC_COLUMNS = ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLKGRPCE", "TABBLK", "PLACEFP",
                "AIANNHCE")  # fmt: skip


def _kron(sch: Schema, name: str) -> KronQuery:
    q = sch.query(name)
    if hasattr(q, "factors"):
        return KronQuery.of(q)
    return KronQuery.from_matrix(name, q.matrix().toarray())


def _shape(sch: Schema) -> tuple[int, ...]:
    q = _kron(sch, "detailed")
    return q.domain


def _selection(shape: tuple[int, ...], name: str, levels: Sequence[Sequence[int]]) -> KronQuery:
    """Cells whose level of attribute ``a`` is in ``levels[a]``, one answer per cell."""
    return KronQuery(name, tuple(np.eye(n)[list(lv)] for n, lv in zip(shape, levels, strict=True)))


def _structural_zero_query(shape: tuple[int, ...], mask: NDArray[np.bool_]) -> KronQuery:
    """The structurally zero cells as one selection (they must be a product set: the
    2020 schema's minors in nursing facilities)."""
    m = mask.reshape(shape)
    per = []
    for a in range(len(shape)):
        other = tuple(i for i in range(len(shape)) if i != a)
        per.append(np.flatnonzero(m.any(axis=other)).tolist())
    grid = np.zeros(shape, dtype=bool)
    grid[np.ix_(*per)] = True
    if not np.array_equal(grid, m):
        raise InputError("the structural zeros are not a product of attribute levels")
    return _selection(shape, "structural_zeros", per)


@lru_cache(maxsize=64)
def _variance(sigma2: str) -> float:
    from fractions import Fraction

    return noise_variance(Fraction(sigma2))


def _gid(k: int, ident: str) -> str:
    return f"{k}{_SEP}{ident}"


def _group_id(name: str) -> str:
    return f"G{_SEP}{name}"


@dataclass(frozen=True, eq=False)
class GLSRun:
    """One run's noisy measurements and structure as tree-GLS inputs (module docstring)."""

    name: str
    nmf: NoisyMeasurementFile
    structure: RunStructure
    shape: tuple[int, ...]
    queries: dict[str, KronQuery]
    total: KronQuery
    zero_queries: dict[int, KronQuery]
    structural: KronQuery | None
    group_level: int | None  # the spine level whose units sum to the groups (None: none)
    group_names: list[str]
    group_of: I64  # per unit of the group level: its group
    rows: dict[str, pl.DataFrame] = field(default_factory=dict, repr=False)

    @property
    def hierarchy(self) -> Any:
        return self.structure.spine.hierarchy

    @property
    def levels(self) -> tuple[str, ...]:
        return tuple(self.hierarchy.levels)

    @property
    def constraint_queries(self) -> list[KronQuery]:
        out = [self.total, *self.zero_queries.values()]
        return out if self.structural is None else [*out, self.structural]

    # -------------------------------------------------------------------- the tree
    def _level_rows(self, level: str) -> pl.DataFrame:
        if level not in self.rows:
            self.rows[level] = self.nmf.table.filter(pl.col("geolevel") == level)
        return self.rows[level]

    def measurements(self, k: int, units: I64 | None = None) -> list[Measurements]:
        """The measurements of the units ``units`` (all: ``None``) of spine level ``k``."""
        h = self.hierarchy
        level = h.levels[k]
        rows = self._level_rows(level)
        if units is not None:
            ids = h.unit_ids[k].gather(units.tolist())
            rows = rows.filter(pl.col("geocode").is_in(ids.implode()))
        out = []
        for (q,), sub in rows.group_by("query", maintain_order=True):
            kq = self.queries[str(q)]
            answers = sub.get_column("value").list.to_array(kq.size).to_numpy()
            var = np.array([_variance(v) for v in sub.get_column("variance").to_list()])
            geos = tuple(_gid(k, g) for g in sub.get_column("geocode").to_list())
            out.append(Measurements(kq, geos, answers.astype(np.float64), var))
        return out

    def constraints(self, k: int, units: I64 | None = None) -> list[Constraints]:
        """The exact constraints of the units ``units`` of spine level ``k``."""
        c: LevelConstraints = self.structure.constraints[k]
        h = self.hierarchy
        sel = np.arange(h.size(k), dtype=np.int64) if units is None else units
        ids = np.asarray(h.ids(k), dtype=object)[sel]
        geos = tuple(_gid(k, str(g)) for g in ids)
        out: list[Constraints] = []
        if not geos:
            return out
        if c.total is not None:
            out.append(Constraints(self.total, geos, c.total[sel][:, None].astype(np.float64)))
        if c.upper is not None:
            for t, q in self.zero_queries.items():
                zero = np.flatnonzero(c.upper[sel, t] == 0)
                if zero.size:
                    out.append(
                        Constraints(q, tuple(geos[i] for i in zero), np.zeros((zero.size, q.size)))
                    )
        if c.structural_zeros is not None and self.structural is not None:
            q = self.structural
            out.append(Constraints(q, geos, np.zeros((len(geos), q.size))))
        return out

    def group_constraints(self, groups: Sequence[int]) -> list[Constraints]:
        assert self.group_level is not None
        c = self.structure.constraints[self.group_level]
        assert c.group_total is not None
        geos = tuple(_group_id(self.group_names[g]) for g in groups)
        vals = c.group_total[np.asarray(groups, dtype=np.int64)][:, None].astype(np.float64)
        return [Constraints(self.total, geos, vals)]

    def _below(self, k: int, units: I64) -> list[I64]:
        """``units`` of level ``k`` and all their descendants, level by level."""
        h = self.hierarchy
        out = [units]
        for m in range(k, len(h.levels) - 1):
            off = h.offsets(m)
            cur = out[-1]
            out.append(
                np.concatenate([np.arange(off[u], off[u + 1]) for u in cur.tolist()]
                               or [np.zeros(0, dtype=np.int64)]).astype(np.int64)
            )  # fmt: skip
        return out

    def subtree(self, k: int, units: I64, root: str | None) -> tuple[dict[str, str], list[I64]]:
        """Parent map of ``units`` of level ``k`` and their descendants (``root``: the
        parent of ``units``, or none) and the units per level from ``k`` down."""
        h = self.hierarchy
        levels = self._below(k, units)
        parents: dict[str, str] = {}
        ids = [np.asarray(h.ids(m), dtype=object) for m in range(len(h.levels))]
        if root is not None:
            for u in units.tolist():
                parents[_gid(k, str(ids[k][u]))] = root
        for j, m in enumerate(range(k + 1, len(h.levels)), start=1):
            par = h.parent(m)[levels[j]]
            for u, p in zip(levels[j].tolist(), par.tolist(), strict=True):
                parents[_gid(m, str(ids[m][u]))] = _gid(m - 1, str(ids[m - 1][p]))
        return parents, levels

    def part(self, group: int) -> Part:
        """The subtree of one group geounit (a tabulation state)."""
        assert self.group_level is not None
        k = self.group_level
        units = np.flatnonzero(self.group_of == group).astype(np.int64)
        root = _group_id(self.group_names[group])
        parents, levels = self.subtree(k, units, root)
        ms: list[Measurements] = []
        cs: list[Constraints] = list(self.group_constraints([group]))
        for j, m in enumerate(range(k, len(self.levels))):
            ms += self.measurements(m, levels[j])
            cs += self.constraints(m, levels[j])
        names = (GROUP_LEVEL, *self.levels[k:])
        return Part(GeounitTree(root, parents, names), ms, cs)

    def index(self, k: int) -> dict[str, int]:
        """Spine level ``k``'s ids → unit index."""
        key = f"_index{k}"
        cached = self.__dict__.get(key)
        if cached is None:
            cached = {g: i for i, g in enumerate(self.hierarchy.ids(k))}
            object.__setattr__(self, key, cached)
        return cached

    def min_variance(self) -> float:
        return min(_variance(v) for v in self.nmf.table.get_column("variance").unique().to_list())


def read_gls_run(folder: str | Path) -> GLSRun:
    """A run's noisy measurement folder (``nmf/<SCOPE>-<histogram>``) as tree-GLS inputs."""
    d = Path(folder)
    nmf = read_nmf(d)
    st = read_structure(d)
    sch = nmf.strategy.schema
    shape = _shape(sch)
    queries = {q: _kron(sch, q) for lv in nmf.strategy.levels for q in nmf.strategy.queries(lv)}
    total = _kron(sch, "total")
    zero_q: dict[int, KronQuery] = {}
    structural = None
    if len(shape) > 1:  # persons: bounds per hhgq level and structural zeros
        for t in range(shape[0]):
            levels = [[t], *(range(n) for n in shape[1:])]
            zero_q[t] = _selection(shape, f"hhgq{t}_zero", levels)
        masks = [c.structural_zeros for c in st.constraints if c.structural_zeros is not None]
        if masks and any(m.any() for m in masks):
            structural = _structural_zero_query(shape, masks[0])
    group_level = None
    names: list[str] = []
    of = np.zeros(0, dtype=np.int64)
    for k, c in enumerate(st.constraints):
        if c.group_index is not None and c.group_total is not None:
            if k != 1:
                raise InputError(
                    f"total_by_group at level {c.level}: only the root's children can be "
                    "grouped for the tree GLS",
                    file=str(d / "structure.json"),
                )
            of, names = st.spine.unit_groups(c.level)
            if not np.array_equal(of, c.group_index):
                raise InputError("the groups of the structure disagree with its spine",
                                 file=str(d / "constraints.parquet"))  # fmt: skip
            group_level = k
    return GLSRun(d.name, nmf, st, shape, queries, total, zero_q, structural, group_level,
                  names, of)  # fmt: skip


# ----------------------------------------------------------------------------- outputs
@dataclass(frozen=True)
class GLSLevel:
    """Estimates of one geolevel's geographies: ``geoids``, ``estimate`` and ``std``
    ``(geographies, cells)``."""

    geolevel: str
    geoids: tuple[str, ...]
    estimate: F64
    std: F64


def _tab_keys(run: GLSRun, k: int, ids: Sequence[str]) -> dict[str, NDArray[np.object_]]:
    """The tabulation GEOIDs of the geounits ``ids`` (tree ids) of spine level ``k``, from
    each one's first leaf's GRF-C columns (empty when the spine has no GRF-C columns: a
    declared hierarchy)."""
    from privtab.topdown.pl94 import geoid_exprs

    h = run.hierarchy
    blocks = run.structure.spine.blocks
    if not set(GRFC_COLUMNS) <= set(blocks.columns):
        return {}
    index = run.index(k)
    units = [index[g.split(_SEP, 1)[1]] for g in ids]
    first = h.leaf_starts(k)[np.asarray(units, dtype=np.int64)].tolist()
    keys = blocks[first].select(**geoid_exprs())
    return {c: keys.get_column(c).to_numpy().astype(object) for c in keys.columns}


def _grouped(
    result: TreeGLS, cells: KronCells, level: int, keys: NDArray[np.object_], geolevel: str
) -> GLSLevel:
    valid = np.array([k is not None for k in keys])
    names, inv = np.unique(keys[valid].astype(str), return_inverse=True)
    groups = np.full(keys.size, -1, dtype=np.int64)
    groups[valid] = inv
    est, std = result.aggregate(cells, level, groups, names.size)
    return GLSLevel(geolevel, tuple(str(n) for n in names), est, std)


def _spine(result: TreeGLS, cells: KronCells, level: int, strip: int) -> GLSLevel:
    e = result.estimates(cells, level)
    ids = tuple(g.split(_SEP, 1)[1] if strip else g for g in e.geounits)
    name = result.level_names[level] if result.level_names else str(level)
    return GLSLevel(f"spine-{name}", ids, e.estimate, e.std)


def _part_levels(
    run: GLSRun,
    result: TreeGLS,
    cells: KronCells,
    first: int,
    wanted: Sequence[str],
    skip_aiannh: set[str],
) -> Iterator[GLSLevel]:
    """The levels of one solved subtree whose level ``j`` is spine level ``first + j − 1``
    (``first``: the spine level of the subtree's second level; a group subtree) — or the
    whole tree (``first`` 0: level ``j`` is spine level ``j``)."""
    offset = 1 if first else 0
    depth = len(result.levels)
    for j in range(depth):
        k = first + j - offset
        if offset and j == 0:
            e = result.estimates(cells, 0)
            ids = tuple(g.split(_SEP, 1)[1] for g in e.geounits)
            yield GLSLevel("STATE", ids, e.estimate, e.std)
            continue
        yield _spine(result, cells, j, 1)
        spine_level = run.levels[k]
        keys = _tab_keys(run, k, result.levels[j])
        if not keys:
            continue
        if k == 0 and not offset:
            st = keys["STATE"]
            if "NATION" in wanted and keys["NATION"][0] is not None:
                yield _grouped(result, cells, j, keys["NATION"], "NATION")
            if "STATE" in wanted and run.group_level is None:
                yield _grouped(result, cells, j, st, "STATE")
        if spine_level == "County" and "COUNTY" in wanted:
            yield _grouped(result, cells, j, keys["COUNTY"], "COUNTY")
        if spine_level == "Tract" and "TRACT" in wanted:
            yield _grouped(result, cells, j, keys["TRACT"], "TRACT")
        if j == depth - 1 and k == len(run.levels) - 1:  # blocks
            for geolevel in ("BLOCK_GROUP", "BLOCK", "PLACE", "AIANNH"):
                if geolevel not in wanted:
                    continue
                key = keys[geolevel].copy()
                if geolevel == "AIANNH":
                    key = np.array([None if x in skip_aiannh else x for x in key], dtype=object)
                yield _grouped(result, cells, j, key, geolevel)


def _depth_for(run: GLSRun, wanted: Sequence[str]) -> int:
    """The deepest spine level the wanted tabulation levels need."""
    levels = list(run.levels)
    need = 0
    spine_of = {"NATION": 0, "STATE": 0}
    for tab, spine in (("COUNTY", "County"), ("TRACT", "Tract")):
        spine_of[tab] = levels.index(spine) if spine in levels else 0
    for lv in wanted:
        need = max(need, spine_of.get(lv, len(levels) - 1))
    return need


def gls_run(
    run: GLSRun,
    cells: KronCells,
    *,
    to: str = "BLOCK_GROUP",
    say: Callable[[str], None] | None = None,
) -> Iterator[GLSLevel]:
    """Solve one run's tree GLS (state by state where the run has group geounits) and
    yield its estimates, level by level and state by state (module docstring). ``to``:
    the deepest tabulation level (``STATE`` … ``BLOCK``)."""
    if to not in DEPTHS:
        raise ValueError(f"--to must be one of {', '.join(DEPTHS)}, got {to!r}")
    wanted = DEPTHS[to]
    tell = say or (lambda _m: None)
    depth = _depth_for(run, wanted)
    h = run.hierarchy
    skip = _crossing_aiannh(run)
    if run.group_level is None:
        tell(f"{run.name}: solving the tree ({sum(h.describe().values()):,} geounits)")
        parents, levels = run.subtree(0, np.zeros(1, dtype=np.int64), None)
        ms = [m for k in range(len(run.levels)) for m in run.measurements(k, levels[k])]
        cs = [c for k in range(len(run.levels)) for c in run.constraints(k, levels[k])]
        root = _gid(0, h.ids(0)[0])
        result = tree_gls(GeounitTree(root, parents, run.levels), ms, cs, depth=depth,
                          keep_bottom_up=True)  # fmt: skip
        yield from _part_levels(run, result, cells, 0, wanted, skip)
        return
    k = run.group_level
    root = _gid(0, h.ids(0)[0])
    top_parents = {_group_id(n): root for n in run.group_names}
    top = GeounitTree(root, top_parents, (run.levels[0], GROUP_LEVEL))
    top_ms = run.measurements(0)
    top_cs = run.constraints(0)
    tell(f"{run.name}: {len(run.group_names)} states, bottom-up")
    solved = tree_gls_split(
        top,
        top_ms,
        top_cs,
        lambda name: run.part(run.group_names.index(name.split(_SEP, 1)[1])),
        measured_queries=list(run.queries.values()),
        constraint_queries=run.constraint_queries,
        min_variance=run.min_variance(),
        depth=max(0, depth - k + 1),
        keep_bottom_up=True,
    )
    t = solved.top
    if "NATION" in wanted:
        e = t.estimates(cells, 0)
        yield GLSLevel("NATION", ("US",), e.estimate, e.std)
    yield _spine(t, cells, 0, 1)
    for name, part in solved.parts():
        tell(f"{run.name}: state {name.split(_SEP, 1)[1]}, top-down")
        yield from _part_levels(run, part, cells, k, wanted, skip)


def _crossing_aiannh(run: GLSRun) -> set[str]:
    """AIANNH areas whose blocks lie in more than one state (not computed)."""
    if run.group_level is None:
        return set()
    blocks = run.structure.spine.blocks
    crossing = (
        blocks.filter(pl.col("AIANNHCE") != "9999")
        .group_by("AIANNHCE")
        .agg(pl.col("TABBLKST").n_unique().alias("n"))
        .filter(pl.col("n") > 1)
    )
    return set(crossing.get_column("AIANNHCE").to_list())


# ----------------------------------------------------------------------------- the command
def _frame(level: GLSLevel, cells: KronCells) -> pl.DataFrame:
    from privtab.topdown.gls_output import gls_frame

    return gls_frame(level.geoids, cells.names, level.estimate, level.std)


def persons_runs(release: Path) -> list[Path]:
    """The persons runs' noisy measurement folders of a release (``nmf/US-persons``,
    ``nmf/PR-persons``); a release made without ``--nmf`` is refused."""
    found = [release / "nmf" / f"{scope}-persons" for scope in ("US", "PR")]
    found = [f for f in found if (f / "dpqueries.parquet").is_file()]
    if not found:
        raise InputError(
            "the release has no noisy measurements (nmf/US-persons or nmf/PR-persons)",
            file=str(release),
            hint="the tree GLS needs a release made with privtab topdown run --nmf",
        )
    return found


def release_gls(
    release: str | Path,
    out: str | Path,
    *,
    to: str = "BLOCK_GROUP",
    overwrite: bool = False,
    say: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """``privtab topdown gls``: the tree GLS of every persons run of ``release``'s noisy
    measurements, written to the new derived folder ``out``
    (:class:`~privtab.topdown.gls_output.GLSFolderWriter`: ``gls-<GEOLEVEL>`` for the
    tabulation geographies, ``gls-spine-<Level>`` for the spine's geounits). Returns a
    JSON-ready summary."""
    import json

    from privtab.atomic import atomic_directory
    from privtab.topdown.gls_output import FOLDER_KIND, GLSFolderWriter, gls_method
    from privtab.topdown.tables import pl94_person_cells

    src = Path(release)
    if to not in DEPTHS:
        raise InputError(f"--to must be one of {', '.join(DEPTHS)}", column="--to", value=to)
    try:
        document = json.loads((src / "release.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"not a TopDown release: {exc}", file=str(src / "release.json")) from None
    runs = persons_runs(src)
    cells = pl94_person_cells()
    private = document.get("private") is not False
    missing: dict[str, list[str]] = {}
    levels_written: list[str] = []
    with atomic_directory(Path(out), kind=FOLDER_KIND, overwrite=overwrite,
                          protect=[src]) as tmp:  # fmt: skip
        writer = GLSFolderWriter(tmp, private=private)
        try:
            for folder in runs:
                run = read_gls_run(folder)
                crossing = sorted(_crossing_aiannh(run))
                if crossing:
                    missing[f"{run.name} AIANNH"] = crossing
                for level in gls_run(run, cells, to=to, say=say):
                    writer.add(level.geolevel, _frame(level, cells))
                    if level.geolevel not in levels_written:
                        levels_written.append(level.geolevel)
        finally:
            writer.close()
        method = gls_method(levels_written, cells, CONSTRAINTS_USED)
        method["not_computed"] = {
            "AIANNH areas crossing states (cross-covariances between states' subtrees)": missing,
            "blocks without housing units or facilities": "no persons: exactly 0",
        }
        writer.finish(document=document, command="privtab topdown gls", source=src,
                      method=method)  # fmt: skip
    return {
        "release": str(src),
        "out": str(out),
        "private": private,
        "runs": [r.name for r in runs],
        "levels": levels_written,
        "files": {k: v for k, v in writer.rows.items() if k.endswith(".txt")},
        "not_computed": missing,
    }


#: The constraints the estimator imposes (``release.json``'s ``gls.constraints``).
CONSTRAINTS_USED: tuple[str, ...] = (
    "exact totals: the root (the nation; Puerto Rico), each state (its AIAN and non-AIAN "
    "parts together)",
    "zero where a bound is ≤ 0, at every geounit: persons of a group-quarters type without "
    "a facility, household persons without a housing unit, minors in nursing facilities",
    "never: the ≥ bounds and positive upper bounds (inequalities)",
)
