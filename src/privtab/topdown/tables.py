"""The P.L. 94-171 person tables P1–P5 as linear cells of TopDown's histogram.

Every published person cell is a sum of histogram cells of the form
``r_hhgq ⊗ r_votingage ⊗ r_hispanic ⊗ r_cenrace`` (0/1 rows), so the tables are
:class:`~privtab.topdown.gls.KronCells` over :mod:`privtab.topdown.histogram`'s 2,016 cells:

* **P1 Race** (71 cells): total; population of one race, then the six races alone; two or
  more races; then for k = 2…6 races the population of k races followed by each of its
  combinations (15, 20, 15, 6, 1) in CENRACE order.
* **P2 Hispanic or Latino, and not Hispanic or Latino by race** (73): total, Hispanic or
  Latino, not Hispanic or Latino, then P1's cells 2–71 for the not Hispanic.
* **P3** and **P4**: P1 and P2 for the population 18 years and over.
* **P5 Group quarters population by major group quarters type** (10): total GQ (hhgq 1–7),
  institutionalized (1–4), its four types, noninstitutionalized (5–7), its three types.

Cell names ``P0010001`` … ``P0050010`` and labels follow the 2020 Census P.L. 94-171
technical documentation. **CENRACE order** (01…63): the six OMB race groups alone (White,
Black or African American, American Indian and Alaska Native, Asian, Native Hawaiian and
Other Pacific Islander, Some Other Race), then the 15 two-race combinations, 20 of three,
15 of four, 6 of five and the one of six, each size in lexicographic order of the groups
(07 = White; Black, …, 21 = NHPI; SOR, 22 = White; Black; AIAN, …) — the production
``cenrace`` attribute's levels (``uscensusbureau/DAS_2020_GLS_Uncertainty_Evaluation``,
``programs/schema/attributes/cenrace.py``) and :func:`privtab.data.synth.cenrace_table`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from itertools import combinations

import numpy as np
import numpy.typing as npt

from privtab.topdown.histogram import SHAPE
from privtab.topdown.kron import KronCells

__all__ = [
    "CENRACE_COMBINATIONS",
    "RACE_GROUPS",
    "TABLE_NAMES",
    "Table",
    "pl94_person_cells",
    "table",
]

#: The six OMB race groups, in Census order.
RACE_GROUPS: tuple[str, ...] = (
    "White",
    "Black or African American",
    "American Indian and Alaska Native",
    "Asian",
    "Native Hawaiian and Other Pacific Islander",
    "Some Other Race",
)

#: CENRACE 01..63 (index 0..62) as tuples of race-group indices.
CENRACE_COMBINATIONS: tuple[tuple[int, ...], ...] = tuple(
    combo for k in range(1, 7) for combo in combinations(range(6), k)
)

#: The person tables, in publication order.
TABLE_NAMES: tuple[str, ...] = ("P1", "P2", "P3", "P4", "P5")

_TITLES = {
    "P1": "Race",
    "P2": "Hispanic or Latino, and Not Hispanic or Latino by Race",
    "P3": "Race for the Population 18 Years and Over",
    "P4": "Hispanic or Latino, and Not Hispanic or Latino by Race for the Population 18 Years "
    "and Over",
    "P5": "Group Quarters Population by Major Group Quarters Type",
}
_NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Table:
    """One published table: ``cells`` (names ``P00T0001``…) and their ``labels``."""

    name: str
    title: str
    cells: KronCells
    labels: tuple[str, ...]


def _row(n: int, levels: Sequence[int] | None = None) -> F64:
    r = np.zeros(n) if levels is not None else np.ones(n)
    if levels is not None:
        r[list(levels)] = 1.0
    return r


def _race_rows() -> list[tuple[str, F64]]:
    """P1's cells 2–71 as (label, cenrace row)."""
    by_size = {k: [i for i, c in enumerate(CENRACE_COMBINATIONS) if len(c) == k] for k in range(7)}
    out = [("Population of one race:", _row(63, by_size[1]))]
    out += [(f"{RACE_GROUPS[i]} alone", _row(63, [i])) for i in by_size[1]]
    several = [i for k in range(2, 7) for i in by_size[k]]
    out.append(("Population of two or more races:", _row(63, several)))
    for k in range(2, 7):
        out.append((f"Population of {_NUMBER_WORDS[k]} races:", _row(63, by_size[k])))
        for i in by_size[k]:
            label = "; ".join(RACE_GROUPS[g] for g in CENRACE_COMBINATIONS[i])
            out.append((label, _row(63, [i])))
    return out


def _cells(
    prefix: str, rows: Sequence[tuple[str, F64, F64, F64, F64]]
) -> tuple[KronCells, tuple[str, ...]]:
    names = tuple(f"{prefix}{i + 1:04d}" for i in range(len(rows)))
    factors = tuple(np.stack([r[1 + a] for r in rows]) for a in range(4))
    return KronCells(names, factors), tuple(r[0] for r in rows)


@cache
def table(name: str) -> Table:
    """The table ``"P1"`` … ``"P5"`` (cells over the 2,016-cell histogram)."""
    if name not in TABLE_NAMES:
        raise ValueError(f"unknown P.L. 94-171 person table {name!r} (known: {TABLE_NAMES})")
    hh, va, hi, cr = SHAPE
    all_hh, all_va, all_hi, all_cr = _row(hh), _row(va), _row(hi), _row(cr)
    adult = _row(va, [1]) if name in ("P3", "P4") else all_va
    rows: list[tuple[str, F64, F64, F64, F64]]
    if name in ("P1", "P3"):
        rows = [("Total:", all_hh, adult, all_hi, all_cr)]
        rows += [(lab, all_hh, adult, all_hi, r) for lab, r in _race_rows()]
    elif name in ("P2", "P4"):
        not_hisp = _row(hi, [0])
        rows = [
            ("Total:", all_hh, adult, all_hi, all_cr),
            ("Hispanic or Latino", all_hh, adult, _row(hi, [1]), all_cr),
            ("Not Hispanic or Latino:", all_hh, adult, not_hisp, all_cr),
        ]
        rows += [(lab, all_hh, adult, not_hisp, r) for lab, r in _race_rows()]
    else:
        gq = [
            ("Total:", range(1, 8)),
            ("Institutionalized population:", range(1, 5)),
            ("Correctional facilities for adults", [1]),
            ("Juvenile facilities", [2]),
            ("Nursing facilities/Skilled-nursing facilities", [3]),
            ("Other institutional facilities", [4]),
            ("Noninstitutionalized population:", range(5, 8)),
            ("College/University student housing", [5]),
            ("Military quarters", [6]),
            ("Other noninstitutional facilities", [7]),
        ]
        rows = [(lab, _row(hh, list(lv)), all_va, all_hi, all_cr) for lab, lv in gq]
    cells, labels = _cells(f"P00{name[1]}", rows)
    return Table(name, _TITLES[name], cells, labels)


@cache
def pl94_person_cells() -> KronCells:
    """All 298 person cells of P1–P5, in publication order."""
    parts = [table(n).cells for n in TABLE_NAMES]
    names = tuple(n for p in parts for n in p.names)
    factors = tuple(np.concatenate([p.factors[a] for p in parts]) for a in range(4))
    return KronCells(names, factors)
