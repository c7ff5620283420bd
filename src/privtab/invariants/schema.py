"""Categorical data schemas and count invariants (published exact counts).

A *schema* lists categorical features and their levels; a record is one level per feature,
so the data universe is the finite set of *cells* (the cross product of the levels) and a
dataset of ``n`` records is summarised, for every count query, by its *histogram*
``h ∈ ℤ^d_{≥0}`` over the ``d`` cells (``Σ h = n``).

An *invariant* is a set of count queries published without noise: query ``j`` counts the
records whose cell lies in a set ``C_j``; stacked, the queries are a 0/1 matrix ``A``
(``q × d``) and the published values are ``t = A h``. The invariant-conforming datasets are
``D_t = {h ≥ 0 integer : A h = t, Σ h = n}`` (bounded DP: ``n`` is public).
Seed: ``semi-dp-invariant-statistics.txt`` §3.3–3.4 (Definitions 12–13, Example 4).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

IntArray: TypeAlias = NDArray[np.int64]

__all__ = ["CountInvariant", "IntArray", "Schema", "histogram_from_records"]


@dataclass(frozen=True)
class Schema:
    """Categorical features, each with an ordered tuple of level names.

    ``Schema({"sex": ["F", "M"], "age": ["0-17", "18+"]})``. Cells are ordered row-major
    (the last feature varies fastest), matching ``numpy.ravel`` of a table whose axes are
    the features in order.
    """

    features: tuple[tuple[str, tuple[str, ...]], ...]

    def __init__(self, features: Mapping[str, Sequence[str]] | Iterable[tuple[str, Sequence[str]]]):
        items = list(features.items()) if isinstance(features, Mapping) else list(features)
        if not items:
            raise ValueError("a schema needs at least one feature")
        out: list[tuple[str, tuple[str, ...]]] = []
        seen: set[str] = set()
        for name, levels in items:
            name = str(name)
            if name in seen:
                raise ValueError(f"feature {name!r} is listed twice")
            seen.add(name)
            lv = tuple(str(x) for x in levels)
            if not lv:
                raise ValueError(f"feature {name!r} has no levels")
            if len(set(lv)) != len(lv):
                raise ValueError(f"feature {name!r} has repeated levels: {list(lv)}")
            out.append((name, lv))
        object.__setattr__(self, "features", tuple(out))

    @classmethod
    def grid(cls, *levels: int) -> Schema:
        """A schema with features ``X1, X2, …`` having ``levels[i]`` levels named ``1..L``."""
        if not levels:
            raise ValueError("grid needs at least one feature")
        for i, k in enumerate(levels):
            if int(k) != k or k < 1:
                raise ValueError(f"feature X{i + 1} must have a positive number of levels, got {k}")
        return cls({f"X{i + 1}": [str(j + 1) for j in range(int(k))] for i, k in enumerate(levels)})

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.features)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(lv) for _, lv in self.features)

    @property
    def k(self) -> int:
        """Number of features."""
        return len(self.features)

    @property
    def n_cells(self) -> int:
        return int(np.prod(self.shape))

    def cells(self) -> IntArray:
        """All cells as a ``(d, k)`` array of level indices, row-major."""
        grids = itertools.product(*(range(s) for s in self.shape))
        return np.array(list(grids), dtype=np.int64).reshape(self.n_cells, self.k)

    def cell_label(self, index: int) -> str:
        idx = np.unravel_index(int(index), self.shape)
        return (
            "("
            + ", ".join(f"{n}={lv[int(i)]}" for (n, lv), i in zip(self.features, idx, strict=True))
            + ")"
        )

    def level_index(self, feature: str, level: str) -> int:
        for name, lv in self.features:
            if name == feature:
                if level not in lv:
                    raise ValueError(
                        f"feature {feature!r} has no level {level!r}; levels: {list(lv)}"
                    )
                return lv.index(level)
        raise ValueError(f"no feature {feature!r}; features: {list(self.names)}")


def histogram_from_records(schema: Schema, records: Iterable[Sequence[str]]) -> IntArray:
    """Histogram (shape ``schema.shape``) of records given as level names, one per feature.

    A record with the wrong number of fields or an unknown level is a :class:`ValueError`
    naming the record's row number (1-based), the feature and the value.
    """
    lookup = [{lv: i for i, lv in enumerate(levels)} for _, levels in schema.features]
    hist = np.zeros(schema.shape, dtype=np.int64)
    for row, rec in enumerate(records, start=1):
        fields = list(rec)
        if len(fields) != schema.k:
            raise ValueError(
                f"record {row}: expected {schema.k} fields {list(schema.names)}, got {fields!r}"
            )
        idx = []
        for (name, levels), table, value in zip(schema.features, lookup, fields, strict=True):
            pos = table.get(str(value))
            if pos is None:
                raise ValueError(
                    f"record {row}: feature {name!r} has value {value!r}, not one of {list(levels)}"
                )
            idx.append(pos)
        hist[tuple(idx)] += 1
    return hist


def _as_histogram(schema: Schema, histogram: ArrayLike) -> IntArray:
    h = np.asarray(histogram)
    if h.shape != schema.shape:
        if h.size == schema.n_cells:
            h = h.reshape(schema.shape)
        else:
            raise ValueError(f"histogram has shape {h.shape}, schema needs {schema.shape}")
    if not np.issubdtype(h.dtype, np.integer) and (
        not np.all(np.isfinite(h)) or np.any(h != np.round(h))
    ):
        bad = np.argwhere(~np.isfinite(h) | (h != np.round(h)))[0]
        raise ValueError(
            f"histogram cell {tuple(int(i) for i in bad)} is not an integer: {h[tuple(bad)]!r}"
        )
    hi = h.astype(np.int64)
    if np.any(hi < 0):
        bad = np.argwhere(hi < 0)[0]
        raise ValueError(
            f"histogram cell {tuple(int(i) for i in bad)} is negative: {int(hi[tuple(bad)])}"
        )
    return hi


@dataclass(frozen=True)
class CountInvariant:
    """Exact (noise-free) published counts: ``A h = t`` for the confidential histogram ``h``.

    ``matrix`` is the 0/1 query matrix ``A`` (``q × d``, cells row-major), ``values`` is
    ``t`` and ``n`` the (public) number of records. ``labels`` name the queries and
    ``kind`` records how the invariant was built (``"one-way margins"``, ``"full table"``,
    ``"queries"``) so that closed forms can be used where the seed gives them.
    """

    schema: Schema
    matrix: IntArray
    values: IntArray
    n: int
    labels: tuple[str, ...]
    kind: str = "queries"
    margin_features: tuple[int, ...] = field(default=())

    def __post_init__(self) -> None:
        a = np.asarray(self.matrix, dtype=np.int64)
        t = np.asarray(self.values, dtype=np.int64).reshape(-1)
        if a.ndim != 2 or a.shape[1] != self.schema.n_cells:
            raise ValueError(
                f"query matrix must have {self.schema.n_cells} columns, got shape {a.shape}"
            )
        if a.shape[0] != t.size or len(self.labels) != t.size:
            raise ValueError("one value and one label are needed per query")
        if np.any((a != 0) & (a != 1)):
            raise ValueError("count queries must be 0/1 rows (a record is counted or not)")
        if int(self.n) != self.n or self.n < 0:
            raise ValueError(f"n must be a non-negative integer, got {self.n!r}")
        for lab, row, v in zip(self.labels, a, t, strict=True):
            if v < 0:
                raise ValueError(f"query {lab!r}: published count {int(v)} is negative")
            if v > self.n:
                raise ValueError(f"query {lab!r}: published count {int(v)} exceeds n = {self.n}")
            if not row.any() and v != 0:
                raise ValueError(f"query {lab!r} counts no cell but is published as {int(v)}")
        object.__setattr__(self, "matrix", a)
        object.__setattr__(self, "values", t)
        object.__setattr__(self, "n", int(self.n))

    # ------------------------------------------------------------------ constructors
    @classmethod
    def one_way_margins(
        cls,
        schema: Schema,
        histogram: ArrayLike | None = None,
        *,
        margins: Sequence[Sequence[int]] | None = None,
    ) -> CountInvariant:
        """The one-way margins ``N(x) = (N_1(x), …, N_k(x))`` of every feature (seed Ex. 4).

        Give the confidential ``histogram`` or the published ``margins`` (one count
        sequence per feature; all must sum to the same ``n``).
        """
        if (histogram is None) == (margins is None):
            raise ValueError("give exactly one of histogram= or margins=")
        cells = schema.cells()
        rows: list[NDArray[np.int64]] = []
        labels: list[str] = []
        vals: list[int] = []
        if histogram is not None:
            h = _as_histogram(schema, histogram)
            n = int(h.sum())
            ms = [
                h.sum(axis=tuple(a for a in range(schema.k) if a != f)).tolist()
                for f in range(schema.k)
            ]
        else:
            assert margins is not None
            if len(margins) != schema.k:
                raise ValueError(f"need one margin per feature ({schema.k}), got {len(margins)}")
            ms = [list(m) for m in margins]
            totals = {int(sum(m)) for m in ms}
            for (name, lv), m in zip(schema.features, ms, strict=True):
                if len(m) != len(lv):
                    raise ValueError(
                        f"margin of {name!r} has {len(m)} counts, feature has {len(lv)} levels"
                    )
                for level, v in zip(lv, m, strict=True):
                    if int(v) != v or v < 0:
                        raise ValueError(
                            f"margin of {name!r} at level {level!r} is {v!r}: need a count ≥ 0"
                        )
            if len(totals) != 1:
                raise ValueError(f"the margins disagree on the total: {sorted(totals)}")
            n = totals.pop()
        for f, (name, lv) in enumerate(schema.features):
            for j, level in enumerate(lv):
                rows.append((cells[:, f] == j).astype(np.int64))
                labels.append(f"{name}={level}")
                vals.append(int(ms[f][j]))
        return cls(
            schema,
            np.array(rows, dtype=np.int64),
            np.array(vals, dtype=np.int64),
            n,
            tuple(labels),
            kind="one-way margins",
            margin_features=tuple(range(schema.k)),
        )

    @classmethod
    def full_table(cls, schema: Schema, histogram: ArrayLike) -> CountInvariant:
        """Every cell count published (Remark 17: the full cross-classification)."""
        h = _as_histogram(schema, histogram).reshape(-1)
        d = schema.n_cells
        return cls(
            schema,
            np.eye(d, dtype=np.int64),
            h,
            int(h.sum()),
            tuple(schema.cell_label(i) for i in range(d)),
            kind="full table",
        )

    @classmethod
    def from_queries(
        cls,
        schema: Schema,
        queries: Sequence[Mapping[str, Sequence[str]]],
        histogram: ArrayLike | None = None,
        *,
        values: Sequence[int] | None = None,
        n: int | None = None,
        labels: Sequence[str] | None = None,
    ) -> CountInvariant:
        """Arbitrary count queries, each ``{feature: [levels counted]}`` (features absent
        from a query are unrestricted). Give the ``histogram`` or the ``values`` and ``n``.
        """
        cells = schema.cells()
        rows = []
        for qi, q in enumerate(queries):
            mask = np.ones(schema.n_cells, dtype=bool)
            for feat, levels in q.items():
                f = schema.names.index(feat) if feat in schema.names else -1
                if f < 0:
                    raise ValueError(
                        f"query {qi + 1}: no feature {feat!r}; features: {list(schema.names)}"
                    )
                idx = [schema.level_index(feat, str(lv)) for lv in levels]
                mask &= np.isin(cells[:, f], idx)
            rows.append(mask.astype(np.int64))
        a = np.array(rows, dtype=np.int64).reshape(len(rows), schema.n_cells)
        if histogram is not None:
            if values is not None or n is not None:
                raise ValueError("give histogram= or values= and n=, not both")
            h = _as_histogram(schema, histogram).reshape(-1)
            t = a @ h
            total = int(h.sum())
        else:
            if values is None or n is None:
                raise ValueError("without a histogram both values= and n= are needed")
            t = np.asarray(values, dtype=np.int64)
            total = int(n)
        labs = tuple(labels) if labels is not None else tuple(f"q{i + 1}" for i in range(len(rows)))
        return cls(schema, a, t, total, labs, kind="queries")

    # ------------------------------------------------------------------ helpers
    def conforms(self, histogram: ArrayLike) -> bool:
        """Whether a histogram has ``n`` records and the published counts."""
        h = np.asarray(histogram, dtype=np.int64).reshape(-1)
        return bool(
            h.sum() == self.n and np.all(h >= 0) and np.array_equal(self.matrix @ h, self.values)
        )

    def describe(self) -> str:
        if self.kind == "one-way margins":
            names = list(self.schema.names)
            return f"one-way margins of {self.schema.k} feature(s) {names}, n = {self.n}"
        if self.kind == "full table":
            return f"all {self.schema.n_cells} cells of the full table, n = {self.n}"
        return f"{len(self.labels)} count queries over {self.schema.n_cells} cells, n = {self.n}"
