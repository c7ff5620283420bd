"""The noisy measurement file (``--nmf``): TopDown's measurements as Parquet, and back.

Layout (a folder, close to the Census Bureau's 2020 noisy measurement file, whose
``DPQuery`` table holds per geounit and query the noisy values and their variance):

``nmf.json``
    ``{"format": "privtab-topdown-nmf", "version": 1, "private": bool, "histogram":
    "persons"|"units", "levels": [...], "strategy": {the strategy JSON}}``
``dpqueries.parquet``
    one row per measured (geounit, query): ``geocode`` (the spine id), ``geolevel``,
    ``query`` (production name), ``value`` (list of int64: the noisy answer of every cell,
    in the query's cell order — the histogram's C order), ``variance`` (the exact σ² as a
    fraction string ``"n/d"``) and ``variance_float`` (the same as float64, for reading).

Rows are appended level by level, batch by batch, as the measurements are drawn
(:class:`NMFWriter`); a geounit measured with its single-child parent has no rows. Every
Parquet file carries privtab's ``private`` key-value metadata (``false`` for seeded or
noise-off runs, :mod:`privtab.release.marking`). The measurements are differentially
private outputs: publishing them costs no further budget (post-processing).

:func:`read_nmf` reads a folder back with validation (a located error for every bad field)
into a :class:`NoisyMeasurementFile`, which is also a measurement source for
:class:`privtab.topdown.problems.ProblemBuilder` — the post-processing can be rerun from
the file alone.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from numpy.typing import NDArray

from privtab.atomic import atomic_file, atomic_write
from privtab.data.hierarchy import Hierarchy
from privtab.errors import InputError
from privtab.release.marking import parquet_metadata
from privtab.topdown.measure import Measurement, MeasurementBatch
from privtab.topdown.spine import Spine
from privtab.topdown.strategy import Strategy, parse_strategy

__all__ = ["NMF_FORMAT", "NMFError", "NMFSource", "NMFWriter", "NoisyMeasurementFile", "read_nmf"]

NMF_FORMAT = "privtab-topdown-nmf"
NMF_VERSION = 1
META = "nmf.json"
DPQUERIES = "dpqueries.parquet"

_SCHEMA = pa.schema(
    [
        ("geocode", pa.string()),
        ("geolevel", pa.string()),
        ("query", pa.string()),
        ("value", pa.list_(pa.int64())),
        ("variance", pa.string()),
        ("variance_float", pa.float64()),
    ]
)


class NMFError(InputError):
    """A noisy measurement file is malformed (file, row, column, value named)."""


class NMFWriter:
    """Streams measurement batches into ``folder`` (module docstring). Use as a context
    manager; ``add`` every :class:`~privtab.topdown.measure.MeasurementBatch` (all cells
    drawn: an NMF publishes every measured cell)."""

    def __init__(
        self, folder: str | Path, strategy: Strategy, spine: Spine, *, private: bool
    ) -> None:
        self.folder = Path(folder)
        self.strategy = strategy
        self.spine = spine
        self.private = private
        self.rows = 0
        self.folder.mkdir(parents=True, exist_ok=True)
        self._stack = contextlib.ExitStack()
        self._tmp = self._stack.enter_context(atomic_file(self.folder / DPQUERIES))
        meta = {key.encode(): val.encode() for key, val in parquet_metadata(private).items()}
        self._writer = pq.ParquetWriter(self._tmp, _SCHEMA.with_metadata(meta))

    def add(self, batch: MeasurementBatch) -> None:
        """Append the measured geounits of ``batch``."""
        h = self.spine.hierarchy
        ids = h.unit_ids[h.level(batch.level)]
        for q, m in batch.queries.items():
            if m.drawn is not None and not m.drawn.all():
                raise ValueError(
                    f"{batch.level} {q}: a noisy measurement file needs every cell drawn"
                )
            rows = [r for r, v in enumerate(m.variances) if v is not None]
            if not rows:
                continue
            values = np.ascontiguousarray(m.values[rows], dtype=np.int64)
            size = values.shape[1]
            offsets = pa.array(np.arange(len(rows) + 1, dtype=np.int32) * size)
            var = [m.variances[r] for r in rows]
            table = pa.Table.from_arrays(
                [
                    pa.array(ids.gather(batch.units[rows]).to_list(), pa.string()),
                    pa.array([batch.level] * len(rows), pa.string()),
                    pa.array([q] * len(rows), pa.string()),
                    pa.ListArray.from_arrays(offsets, pa.array(values.ravel())),
                    pa.array([str(v) for v in var], pa.string()),
                    pa.array(np.array([float(v) for v in var if v is not None])),
                ],
                schema=self._writer.schema,
            )
            self._writer.write_table(table)
            self.rows += len(rows)

    def close(self) -> None:
        """Finish the Parquet file (moved into place) and write ``nmf.json``."""
        self._writer.close()
        self._stack.close()
        doc = {
            "format": NMF_FORMAT,
            "version": NMF_VERSION,
            "private": self.private,
            "histogram": self.strategy.histogram,
            "levels": list(self.strategy.levels),
            "rows": self.rows,
            "spine": self.spine.description,
            "strategy": self.strategy.to_dict(),
        }
        atomic_write(self.folder / META, json.dumps(doc, indent=1) + "\n")

    def abort(self) -> None:
        """Drop what was written (nothing is published)."""
        self._writer.close()
        with contextlib.suppress(_AbortError):
            self._stack.__exit__(_AbortError, _AbortError(), None)

    def __enter__(self) -> NMFWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()


class _AbortError(Exception):
    """Raised into the temporary file's context to discard it."""


@dataclass(frozen=True, eq=False)
class NoisyMeasurementFile:
    """A noisy measurement file read back (:func:`read_nmf`); a measurement source."""

    folder: Path
    strategy: Strategy
    private: bool
    table: pl.DataFrame
    _levels: dict[str, dict[str, int]] = field(default_factory=dict, repr=False)
    _by_level: dict[str, pl.DataFrame] = field(default_factory=dict, repr=False)

    def geocodes(self, level: str) -> list[str]:
        """The measured geounits of ``level``, in file order."""
        return list(self._index(level))

    def _index(self, level: str) -> dict[str, int]:
        if level not in self._levels:
            codes = (
                self.table.filter(pl.col("geolevel") == level)
                .get_column("geocode")
                .unique(maintain_order=True)
            )
            self._levels[level] = {c: i for i, c in enumerate(codes.to_list())}
        return self._levels[level]

    def lookup(self, level: str, geocodes: list[str]) -> dict[str, Measurement]:
        """The measurements of ``geocodes`` of ``level`` (a geounit without rows —
        measured with its parent — has variance ``None`` and zeros)."""
        sch = self.strategy.schema
        if level not in self._by_level:
            self._by_level[level] = self.table.filter(pl.col("geolevel") == level)
        pos = pl.DataFrame({"geocode": geocodes, "_pos": np.arange(len(geocodes))})
        rows = self._by_level[level].join(pos, on="geocode", how="inner")
        out: dict[str, Measurement] = {}
        exact: dict[str, Fraction] = {}
        for q in self.strategy.queries(level):
            size = sch.query(q).size
            values = np.zeros((len(geocodes), size), dtype=np.int64)
            var: list[Fraction | None] = [None] * len(geocodes)
            sub = rows.filter(pl.col("query") == q)
            if sub.height:
                where = sub.get_column("_pos").to_numpy()
                values[where] = sub.get_column("value").list.to_array(size).to_numpy()
                for i, v in zip(where.tolist(), sub.get_column("variance").to_list(), strict=True):
                    var[i] = exact.setdefault(v, Fraction(v))
            out[q] = Measurement(q, values, tuple(var))
        return out

    def measure_geocodes(self, level: str, geocodes: list[str]) -> MeasurementBatch:
        """The batch of ``geocodes`` (units numbered 0.. in the order given)."""
        return MeasurementBatch(
            level, np.arange(len(geocodes), dtype=np.int64), self.lookup(level, geocodes)
        )


@dataclass(frozen=True, eq=False)
class NMFSource:
    """A noisy measurement file as the measurement source of a hierarchy's geounits (for
    :class:`privtab.topdown.problems.ProblemBuilder`: post-processing from the file).
    The histograms passed to :meth:`measure` are ignored — the file holds the noise."""

    nmf: NoisyMeasurementFile
    hierarchy: Hierarchy

    def measure(
        self,
        level: str,
        units: NDArray[np.int64] | range,
        hists: NDArray[np.int64] | None = None,
        needed: Mapping[str, NDArray[np.bool_]] | None = None,
    ) -> MeasurementBatch:
        idx = np.asarray(units, dtype=np.int64)
        ids = self.hierarchy.unit_ids[self.hierarchy.level(level)]
        batch = self.nmf.measure_geocodes(level, [str(ids[int(i)]) for i in idx])
        return MeasurementBatch(level, idx, batch.queries)


def _fail(folder: Path, name: str, message: str, **where: Any) -> NMFError:
    return NMFError(message, file=str(folder / name), **where)


def read_nmf(folder: str | Path) -> NoisyMeasurementFile:
    """Read and validate a noisy measurement folder: ``nmf.json`` (format, version, the
    strategy — validated as a strategy file) and ``dpqueries.parquet`` (columns, levels and
    queries of the strategy, one value per cell of the query, exact positive variances).
    Raises :class:`NMFError` naming the file, row, column and value."""
    d = Path(folder)
    try:
        meta = json.loads((d / META).read_text(encoding="utf-8"))
    except OSError as exc:
        raise _fail(d, META, f"cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise _fail(d, META, f"not valid JSON: {exc.msg}", row=exc.lineno) from None
    if not isinstance(meta, dict) or meta.get("format") != NMF_FORMAT:
        raise _fail(
            d,
            META,
            f"not a {NMF_FORMAT} file",
            column="format",
            value=str(meta.get("format") if isinstance(meta, dict) else meta),
        )
    if meta.get("version") != NMF_VERSION:
        raise _fail(
            d,
            META,
            f"version {NMF_VERSION} expected",
            column="version",
            value=str(meta.get("version")),
        )
    strategy = parse_strategy(meta.get("strategy"), str(d / META))
    path = d / DPQUERIES
    try:
        table = pl.read_parquet(path)
    except (OSError, pl.exceptions.ComputeError) as exc:
        raise _fail(d, DPQUERIES, f"cannot read: {exc}") from None
    missing = [c for c in _SCHEMA.names if c not in table.columns]
    if missing:
        raise _fail(d, DPQUERIES, "missing column", column=missing[0])
    _check_rows(d, table, strategy)
    return NoisyMeasurementFile(d, strategy, bool(meta.get("private")), table)


def _check_rows(d: Path, table: pl.DataFrame, strategy: Strategy) -> None:
    sch = strategy.schema
    sizes = pl.DataFrame(
        [(lv, q, sch.query(q).size) for lv in strategy.levels for q in strategy.queries(lv)],
        schema={"geolevel": pl.Utf8, "query": pl.Utf8, "_size": pl.Int64},
        orient="row",
    )
    t = (
        table.with_row_index("_r", offset=1)
        .with_columns(pl.col("value").list.len().cast(pl.Int64).alias("_n"))
        .join(sizes, on=["geolevel", "query"], how="left")
    )
    unknown = t.filter(pl.col("_size").is_null())
    if unknown.height:
        r, lv, q = unknown.select("_r", "geolevel", "query").row(0)
        col, val = ("geolevel", lv) if lv not in strategy.levels else ("query", q)
        raise _fail(
            d, DPQUERIES, f"not measured by the strategy at {lv}", row=r, column=col, value=val
        )
    wrong = t.filter(pl.col("_n") != pl.col("_size"))
    if wrong.height:
        r, q, n, size = wrong.select("_r", "query", "_n", "_size").row(0)
        raise _fail(
            d, DPQUERIES, f"{q} has {size} cells", row=r, column="value", value=f"{n} values"
        )
    for r, var in t.select("_r", "variance").iter_rows():
        try:
            ok = Fraction(var) > 0
        except (ValueError, ZeroDivisionError, TypeError):
            ok = False
        if not ok:
            raise _fail(
                d,
                DPQUERIES,
                "not an exact positive fraction",
                row=r,
                column="variance",
                value=str(var),
            )
    dup = t.filter(pl.struct("geocode", "geolevel", "query").is_duplicated())
    if dup.height:
        r, g, q = dup.select("_r", "geocode", "query").row(0)
        raise _fail(d, DPQUERIES, f"{g} {q} measured twice", row=r, column="geocode", value=g)


def measurements_by_level(nmf: NoisyMeasurementFile) -> Mapping[str, int]:
    """Rows per level (for reports)."""
    counts = nmf.table.group_by("geolevel").len()
    return dict(counts.iter_rows())
