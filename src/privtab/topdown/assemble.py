"""A TopDown release's outputs, state by state: the MDF, the P.L. 94-171 tables, the checks.

The engines hand over each chunk's solved block histograms (persons run and units run of
one scope); :class:`Assembler` gathers the chunks of one **state** (a US state's AIAN and
non-AIAN parts; Puerto Rico's counties), lays them on the state's GRF-C blocks in
geographic order (blocks without units get nothing), and

1. appends the state's rows to the Microdata Detail Files (:class:`~privtab.topdown.mdf.
   MdfWriter`) and its in-state geographies to the tables (:class:`~privtab.topdown.pl94.
   Pl94Writer`), adding its blocks to the nation and AIANNH sums written at the end;
2. checks, before anything is published, what the release must satisfy against the
   confidential data and the invariants (:func:`check_state`): the state's persons total
   exact (a US state: its two parts together), every block's housing units exact (units
   run), every block's persons by group-quarters type within the bounds its units imply
   (≥ one person per facility, none of a type without a unit of that type, households
   only where there are housing units), no persons under 18 in nursing facilities, and
   non-negative integers. A failure is a bug: :class:`ReleaseCheckError`, nothing is
   published.

Nothing confidential leaves this module except through those checks' pass/fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import scipy.sparse as sp
from numpy.typing import NDArray

from privtab.topdown.constraints import HHGQ_CAP, nurse_minor_cells
from privtab.topdown.engine import ChunkResult
from privtab.topdown.histogram import CELLS, SHAPE
from privtab.topdown.mdf import MdfWriter
from privtab.topdown.pl94 import IN_STATE, Pl94Writer, Tabulation, geoid_exprs, tabulate

__all__ = ["Assembler", "ReleaseCheckError", "StateBlocks", "check_state"]

IntArray = NDArray[np.int64]
GQ_COLUMNS = tuple(f"GQ{t}" for t in range(1, 8))


class ReleaseCheckError(RuntimeError):
    """The release breaks a rule it must satisfy (an invariant, a constraint): a bug —
    nothing is published. Names the state or block and the rule."""


@dataclass(frozen=True, eq=False)
class StateBlocks:
    """One state's blocks (``blocks``: GRF-C rows in geographic order) with the released
    ``persons`` (sparse ``(blocks, 2016)``) and ``units`` ``(blocks, 2)`` ([vacant,
    occupied]) histograms, and the invariant unit counts ``unit_counts`` ``(blocks, 8)``
    (housing units, then group-quarters facilities of types 1..7)."""

    state: str
    blocks: pl.DataFrame
    persons: sp.csr_matrix
    units: IntArray
    unit_counts: IntArray

    @property
    def facilities(self) -> IntArray:
        out: IntArray = self.unit_counts[:, 1:].sum(axis=1)
        return out


def _rows(state_blocks: NDArray[np.str_], leaf_blocks: Sequence[str]) -> IntArray:
    ids = np.asarray(leaf_blocks, dtype=str)
    pos = np.searchsorted(state_blocks, ids)
    if ids.size and (pos.max() >= state_blocks.size or np.any(state_blocks[pos] != ids)):
        raise ReleaseCheckError("a solved block is not a GRF-C block of its state")
    return pos.astype(np.int64)


def _lay(
    n: int, cells: int, chunks: Sequence[ChunkResult], leaf_ids: pl.Series, grid: NDArray[np.str_]
) -> sp.csr_matrix:
    """The chunks' block histograms on the state's block rows (sparse)."""
    rows, cols, vals = [], [], []
    for ch in chunks:
        ids = leaf_ids.slice(ch.blocks.start, len(ch.blocks)).to_list()
        r = _rows(grid, ids)
        h = ch.hists
        rows.append(r[h.unit])
        cols.append(h.cell)
        vals.append(h.count)
    if not rows:
        rows, cols, vals = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    m = sp.coo_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(n, cells),
        dtype=np.int64,
    )
    return sp.csr_matrix(m)


@dataclass
class Assembler:
    """Streams a release's states into ``folder`` (module docstring)."""

    folder: Path
    private: bool
    grfc: pl.DataFrame
    unit_counts: pl.DataFrame
    #: also the Census pipe-delimited text files (:mod:`privtab.topdown.formats`)
    text: bool = True
    mdf: MdfWriter = field(init=False)
    tables: Pl94Writer = field(init=False)
    _across: dict[str, Tabulation] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.mdf = MdfWriter(self.folder, self.private, self.text)
        self.tables = Pl94Writer(self.folder, self.private, self.text)
        self._geoids = geoid_exprs()

    def state_blocks(
        self,
        state: str,
        persons: tuple[pl.Series, Sequence[ChunkResult]],
        units: tuple[pl.Series, Sequence[ChunkResult]],
    ) -> StateBlocks:
        """The state's blocks with the chunks' histograms laid on them (``persons``,
        ``units``: the run's leaf BLOCK ids and its chunks of this state)."""
        blocks = self.grfc.filter(pl.col("TABBLKST") == state)
        grid = blocks.get_column("BLOCK").to_numpy().astype(str)
        n = blocks.height
        p = _lay(n, CELLS, persons[1], persons[0], grid)
        u = np.asarray(_lay(n, 2, units[1], units[0], grid).toarray(), dtype=np.int64)
        counts = (
            blocks.select("BLOCK")
            .join(self.unit_counts, on="BLOCK", how="left")
            .select(pl.col("HU", *GQ_COLUMNS).fill_null(0))
            .to_numpy()
            .astype(np.int64)
        )
        return StateBlocks(state, blocks, p, u, counts)

    def add(self, sb: StateBlocks) -> None:
        """Write one state's rows and in-state geographies; add to the nation and AIANNH."""
        self.mdf.add(sb.blocks, sb.persons, sb.units, sb.facilities)
        keys = sb.blocks.select(**self._geoids)
        for geolevel in (*IN_STATE, "NATION", "AIANNH"):
            for tab in tabulate(
                geolevel, keys.get_column(geolevel).to_list(), sb.persons, sb.units
            ):
                if geolevel in IN_STATE:
                    self.tables.add(tab)
                else:
                    before = self._across.get(geolevel)
                    self._across[geolevel] = tab if before is None else before + tab

    def finish(self) -> list[Path]:
        """The nation and the AIANNH areas, then close every file; returns the files."""
        for geolevel in ("NATION", "AIANNH"):
            if geolevel in self._across:
                self.tables.add(self._across[geolevel])
        return self.mdf.close() + self.tables.close()

    def abort(self) -> None:
        self.mdf.abort()
        self.tables.abort()


def check_state(sb: StateBlocks, persons_total: int, housing_units: IntArray) -> None:
    """The checks of one state before publication (module docstring): ``persons_total``
    the state's true persons, ``housing_units`` its blocks' true housing units (the
    invariants). Raises :class:`ReleaseCheckError`."""
    p = sb.persons
    ids = sb.blocks.get_column("BLOCK")
    if (p.nnz and p.data.min() < 0) or np.any(sb.units < 0):
        raise ReleaseCheckError(f"state {sb.state}: a released count is negative")
    if int(p.sum()) != persons_total:
        raise ReleaseCheckError(
            f"state {sb.state}: the released persons ({int(p.sum())}) differ from the "
            "invariant state total"
        )
    bad = np.flatnonzero(sb.units.sum(axis=1) != housing_units)
    if bad.size:
        raise ReleaseCheckError(
            f"block {ids[int(bad[0])]}: released housing units differ from the invariant "
            f"count ({bad.size} blocks)"
        )
    per_type = SHAPE[1] * SHAPE[2] * SHAPE[3]
    coo = p.tocoo()
    by_type = np.zeros((p.shape[0], SHAPE[0]), dtype=np.int64)
    np.add.at(by_type, (coo.row, coo.col // per_type), coo.data)
    n_t = sb.unit_counts
    lower = n_t * np.array([0, 1, 1, 1, 1, 1, 1, 1])
    upper = n_t * HHGQ_CAP
    for rule, broken in (
        ("persons of a group-quarters type ≥ its facilities", by_type < lower),
        ("no persons of a type without a unit of that type", by_type > upper),
    ):
        rows, types = np.nonzero(broken)
        if rows.size:
            raise ReleaseCheckError(
                f"block {ids[int(rows[0])]}: hhgq {int(types[0])} breaks '{rule}' "
                f"({rows.size} blocks)"
            )
    minors = nurse_minor_cells()
    if np.any(minors[coo.col] & (coo.data > 0)):
        b = int(coo.row[np.flatnonzero(minors[coo.col] & (coo.data > 0))[0]])
        raise ReleaseCheckError(f"block {ids[b]}: persons under 18 in a nursing facility")
