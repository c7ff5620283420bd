"""The two histograms TopDown protects: persons (2,016 cells) and housing units (2 cells).

* **persons** — :mod:`privtab.topdown.histogram` (hhgq × votingage × hispanic × cenrace);
  a record is a person; the unit tables (housing units, group-quarters facilities by type)
  only make invariants and constraints.
* **units** — the H1 histogram of the production units run (schema ``H1_2020``): one
  attribute ``h1`` with levels 0 *vacant* and 1 *occupied* (production
  ``programs/schema/attributes/h1.py``); a record is a housing unit (group-quarters
  facilities are not in it). Its one measured query is ``detailed`` (the two cells); the
  block totals of housing units are invariant.

A :class:`Schema` gives what the measurement side needs from either: the number of cells,
the queries by production name (each with ``size``, ``answer`` and ``matrix``, as
:class:`privtab.topdown.histogram.Query`) and every query's attributes (for the
per-attribute semantics). Both kinds of query partition the cells, so replacing one record
changes at most two answers of a query, by −1 and +1: Δ₂² = 2 (bounded neighbours).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Protocol

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from privtab.topdown import histogram

__all__ = ["PERSONS", "UNITS", "HistogramQuery", "Schema", "schema"]


class HistogramQuery(Protocol):
    """A linear query on a histogram whose rows partition the cells."""

    @property
    def name(self) -> str: ...

    @property
    def size(self) -> int: ...

    def answer(self, hist: npt.NDArray[np.generic]) -> npt.NDArray[np.generic]: ...

    def matrix(self) -> sp.csr_matrix: ...


@dataclass(frozen=True)
class FlatQuery:
    """A query given by its 0/1 matrix (every column holds exactly one 1)."""

    name: str
    rows: tuple[tuple[int, ...], ...]

    @cached_property
    def _dense(self) -> npt.NDArray[np.int64]:
        m = np.array(self.rows, dtype=np.int64)
        if m.ndim != 2 or not np.array_equal(m.sum(axis=0), np.ones(m.shape[1])):
            raise ValueError(f"query {self.name!r} is not a partition of the cells")
        return m

    @property
    def size(self) -> int:
        return int(self._dense.shape[0])

    def answer(self, hist: npt.NDArray[np.generic]) -> npt.NDArray[np.generic]:
        """Answers for histograms of shape ``(..., cells)`` (integers stay exact)."""
        out: npt.NDArray[np.generic] = np.asarray(hist) @ self._dense.T.astype(hist.dtype)
        return out

    def matrix(self) -> sp.csr_matrix:
        return sp.csr_matrix(self._dense.astype(np.float64))


@dataclass(frozen=True)
class Schema:
    """A protected histogram: ``cells``, the record it counts and its attributes."""

    name: str
    record: str
    cells: int
    attributes: tuple[str, ...]
    measured: tuple[str, ...]
    rounder: tuple[str, ...]

    def query(self, name: str) -> HistogramQuery:
        """The query of this histogram called ``name`` (production name); ``ValueError``
        naming the schema if there is none."""
        if self.name == "persons":
            return _persons_query(name)
        if name in _UNITS_QUERIES:
            return _UNITS_QUERIES[name]
        raise ValueError(f"unknown {self.name} query {name!r}; known: {sorted(_UNITS_QUERIES)}")

    def query_attributes(self, name: str) -> frozenset[str]:
        """The attributes whose change can change the query's answer."""
        q = self.query(name)
        if self.name == "units":
            return frozenset() if q.size == 1 else frozenset({"h1"})
        assert isinstance(q, histogram.Query)
        return frozenset(
            attr
            for (attr, n), f in zip(histogram.ATTRIBUTES, q.factors, strict=True)
            if f.shape[0] > 1
        )


@lru_cache(maxsize=256)
def _persons_query(name: str) -> histogram.Query:
    """:func:`privtab.topdown.histogram.query`, built once per name (its matrix is cached
    on the object)."""
    return histogram.query(name)


_UNITS_QUERIES: dict[str, FlatQuery] = {
    "detailed": FlatQuery("detailed", ((1, 0), (0, 1))),
    "total": FlatQuery("total", ((1, 1),)),
}

PERSONS = Schema(
    "persons",
    "person",
    histogram.CELLS,
    tuple(name for name, _ in histogram.ATTRIBUTES),
    histogram.MEASURED_QUERIES,
    histogram.ROUNDER_QUERIES,
)
UNITS = Schema("units", "housing unit", 2, ("h1",), ("detailed",), ("detailed",))

#: Cell names of the units histogram, in order.
UNITS_CELLS: tuple[str, ...] = ("vacant", "occupied")


def schema(name: str) -> Schema:
    """``"persons"`` or ``"units"``."""
    for s in (PERSONS, UNITS):
        if s.name == name:
            return s
    raise ValueError(f"unknown TopDown histogram {name!r}; expected 'persons' or 'units'")
