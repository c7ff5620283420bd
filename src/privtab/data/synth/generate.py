"""Streaming generation of the synthetic nation: person records + GRF-C, written atomically.

Persons are generated in *units* of :data:`UNIT_PERSONS` consecutive persons (persons are
ordered by block, as in Census files); unit ``k`` draws from its own generator
``SeedSequence(seed, spawn_key=(1, k))``, so the output depends only on (seed, persons,
states, reference files) — not on the chunk size, which only bounds memory: a chunk of
about ``chunk_rows`` persons is generated, converted to the output columns, appended to the
output file and dropped. The whole block table (a few million blocks at national scale)
and one chunk are all that is ever in memory: 10⁸ persons never need 10⁸ rows at once.

Everything is written into a temporary directory next to ``out`` and renamed onto it at the
end (:func:`privtab.atomic.atomic_directory`); an error or an interrupt leaves no
partial output. ``synth.json`` records the parameters and summary counts, and marks the
data as synthetic (it is not a privacy output; the seeded generator is fine here).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from privtab import __version__
from privtab.atomic import MARKER, atomic_directory, check_output
from privtab.data.geography import GRFC_COLUMNS, GRFC_STEM
from privtab.data.iterations import ReferenceData, read_reference
from privtab.data.persons import PERSON_COLUMNS, PERSON_STEM, RACE_COLUMNS
from privtab.data.resources import production_config_dir
from privtab.data.synth.model import (
    HISPANIC_RACE_AS_ORIGIN,
    SAME_GROUP_EXTRA,
    RaceModel,
    SynthGeography,
    build_geography,
    build_race_model,
)
from privtab.data.synth.states import StateModel, resolve_states

UNIT_PERSONS = 1 << 16
DEFAULT_CHUNK_ROWS = 1 << 19
OutputFormat = Literal["txt", "parquet"]
if TYPE_CHECKING:
    from privtab.report.text import Table

Progress = Callable[[int, int, float], None]
I64 = npt.NDArray[np.int64]


@dataclass
class SynthResult:
    """What was written, with summary statistics of the synthetic nation."""

    out: Path
    persons: int
    seed: int
    format: OutputFormat
    states: list[str]
    blocks: int
    tracts: int
    counties: int
    places: int
    aiannh_areas: int
    seconds: float
    files: dict[str, int] = field(default_factory=dict)
    persons_by_state: dict[str, int] = field(default_factory=dict)
    multiplicity: dict[int, int] = field(default_factory=dict)
    hispanic: int = 0

    def table(self) -> Table:
        """The human summary (``privtab synth``): sizes, files and speed."""
        from privtab.report.text import table

        rows = [("persons", f"{self.persons:,}"), ("seed", str(self.seed))]
        rows.append(("states", f"{len(self.states)}"))
        rows += [(k, f"{v:,}") for k, v in self.to_dict()["geography"].items()]
        rows.append(("Hispanic", f"{self.hispanic:,}"))
        multi = sorted(self.multiplicity.items())
        rows += [(f"persons with {k} race code(s)", f"{v:,}") for k, v in multi]
        rows += [(name, f"{size / 1e6:,.1f} MB") for name, size in self.files.items()]
        rows.append(("seconds", f"{self.seconds:.2f}"))
        if self.seconds > 0:
            rows.append(("persons / s", f"{self.persons / self.seconds:,.0f}"))
        title = f"synthetic nation written to {self.out} (synthetic data, not private)"
        return table(title, ("item", "value"), rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "synthetic": True,
            "private": False,
            "persons": self.persons,
            "seed": self.seed,
            "format": self.format,
            "states": self.states,
            "geography": {
                "counties": self.counties,
                "tracts": self.tracts,
                "blocks": self.blocks,
                "places": self.places,
                "aiannh_areas": self.aiannh_areas,
            },
            "persons_by_state": self.persons_by_state,
            "race_code_multiplicity": {str(k): v for k, v in sorted(self.multiplicity.items())},
            "hispanic": self.hispanic,
            "files": self.files,
            "seconds": self.seconds,
            "persons_per_second": self.persons / self.seconds if self.seconds > 0 else None,
            "privtab_version": __version__,
        }


def _seq(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


@dataclass
class Nation:
    """The geography, person allocation and race model of one synthetic nation."""

    geo: SynthGeography
    race: RaceModel
    block_start: I64
    """Index of the first person of each block (persons are ordered by block)."""
    persons: int
    seed: int

    @classmethod
    def build(
        cls,
        persons: int,
        states: tuple[StateModel, ...],
        seed: int,
        reference: ReferenceData,
    ) -> Nation:
        if persons < 0:
            raise ValueError("persons must be non-negative")
        geo = build_geography(_seq(seed, 0), states, max(persons, 1))
        counts = (
            _seq(seed, 2).multinomial(persons, geo.block_prob)
            if persons
            else np.zeros(geo.n_blocks, dtype=np.int64)
        )
        start = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        race = build_race_model(_seq(seed, 3), reference, geo)
        return cls(geo=geo, race=race, block_start=start, persons=persons, seed=seed)

    def unit(self, k: int) -> dict[str, npt.NDArray[Any]]:
        """The persons of unit ``k`` as integer columns (see :func:`_person_columns`)."""
        lo = k * UNIT_PERSONS
        hi = min(self.persons, lo + UNIT_PERSONS)
        b0 = int(np.searchsorted(self.block_start, lo, side="right")) - 1
        b1 = int(np.searchsorted(self.block_start, hi - 1, side="right"))
        starts = np.clip(self.block_start[b0:b1], lo, hi)
        ends = np.clip(np.append(self.block_start[b0 + 1 : b1], hi), lo, hi)
        block = np.repeat(np.arange(b0, b1, dtype=np.int64), ends - starts)
        return _draw_persons(_seq(self.seed, 1, k), self.geo, self.race, block)


def _draw_persons(
    rng: np.random.Generator, geo: SynthGeography, m: RaceModel, block: I64
) -> dict[str, npt.NDArray[Any]]:
    n = block.size
    tract = geo.block_tract[block]
    county = geo.tract_county[tract]
    state = geo.county_state[county]
    area = geo.block_area[block]
    u = rng.random((6, n))
    hisp = u[0] < m.county_hispanic[county]
    qspan = np.full(n, m.not_hispanic_code, dtype=np.int64)
    h = np.flatnonzero(hisp)
    qspan[h] = m.origin.sample(state[h], u[1, h])
    n_groups = len(m.groups)
    # which mixture each person's codes come from: county, AIANNH area, or Hispanic persons
    mix = np.where(area >= 0, m.n_counties + area, county)
    mix[h] = m.major.n - 1
    k = 1 + np.searchsorted(m.multiplicity_cdf, u[2], side="right")
    codes = np.zeros((n, 8), dtype=np.int64)
    mask = np.zeros(n, dtype=np.int64)
    first_group = m.major.sample(mix, u[3])
    det_base = state * n_groups
    gaps = False
    for j in range(8):
        rows = np.flatnonzero(k > j) if j else np.arange(n)
        if rows.size == 0:
            break
        if j == 0:
            g = first_group
        else:
            same = rng.random(rows.size) < SAME_GROUP_EXTRA
            other = m.major.sample(mix[rows], rng.random(rows.size))
            g = np.where(same, first_group[rows], other)
        code = _detailed(rng, geo, m, det_base[rows], g, area[rows])
        if j == 0:
            as_origin = hisp & (g == m.sor_group) & (u[4] < HISPANIC_RACE_AS_ORIGIN)
            code = np.where(as_origin, qspan, code)
            codes[:, 0] = code
            mask |= 1 << g
            continue
        held = codes[rows, :j]
        for _ in range(8):  # redraw codes already held by the person
            d = np.flatnonzero((held == code[:, None]).any(axis=1))
            if d.size == 0:
                break
            code[d] = _detailed(rng, geo, m, det_base[rows[d]], g[d], area[rows[d]])
        ok = ~(held == code[:, None]).any(axis=1)
        keep = rows[ok]
        codes[keep, j] = code[ok]
        mask[keep] |= 1 << g[ok]
        gaps = gaps or not ok.all()
    if gaps:
        codes = _compact(codes)
    profile = np.clip(m.county_age_profile[county] - 2 * hisp, 0, 7)
    age = m.age.sample(profile, u[5])
    female_p = (
        0.488 + 0.112 * np.clip((age - 30) / 55, 0, 1) + 0.15 * np.clip((age - 85) / 15, 0, 1)
    )
    r = rng.random((2, n))
    sex = np.where(r[0] < female_p, 2, 1)
    hh_p = np.where(age >= 18, 0.48, np.where(age >= 15, 0.002, 0.0))
    householder = r[1] < hh_p
    # compact dtypes: a chunk of persons costs ~30 bytes each until it is written
    return {
        "block": block.astype(np.uint32),
        "age": age.astype(np.uint8),
        "sex": sex.astype(np.uint8),
        "householder": householder,
        "cenrace": m.cenrace_of_mask[mask].astype(np.uint8),
        "codes": codes.astype(np.uint16),
        "qspan": qspan.astype(np.uint16),
        "hispanic": hisp,
    }


def _detailed(
    rng: np.random.Generator,
    geo: SynthGeography,
    m: RaceModel,
    det_base: I64,
    group: I64,
    area: I64,
) -> I64:
    n_sg = len(geo.states) * len(m.groups)
    ids = det_base + group
    ids = np.where((group == m.aian_group) & (area >= 0), n_sg + area, ids)
    return m.detailed.sample(ids, rng.random(group.size))


def _compact(codes: I64) -> I64:
    """Move codes left so that Null (0) only follows codes (a dropped duplicate leaves a gap)."""
    present = codes != 0
    gap = (present[:, 1:] > present[:, :-1]).any(axis=1)
    if not gap.any():
        return codes
    rows = np.flatnonzero(gap)
    order = np.argsort(~present[rows], axis=1, kind="stable")
    codes[rows] = np.take_along_axis(codes[rows], order, axis=1)
    return codes


class _Columns:
    """Converts integer person columns to the Census string columns (polars Enums).

    Every output column is a gather from a small table of strings by a precomputed index,
    so building a chunk costs a few vectorised gathers per column.
    """

    def __init__(self, geo: SynthGeography, reference: ReferenceData) -> None:
        self.geo = geo
        self.state_enum = _enum([s.fips for s in geo.states])
        county_vals, self.county_enum = _fixed(geo.county_code, 3)
        tract_vals, self.tract_enum = _fixed(geo.tract_code, 6)
        block_vals, self.block_enum = _fixed(geo.block_code, 4)
        place_vals, self.place_enum = _fixed(geo.block_place, 5)
        aiannh_vals, self.aiannh_enum = _fixed(geo.block_aiannh, 4)
        tract = geo.block_tract
        county = geo.tract_county[tract]
        # per-block indices into the enums above
        u32 = np.uint32
        self.b_state = geo.county_state[county].astype(u32)
        self.b_county = np.searchsorted(county_vals, geo.county_code[county]).astype(u32)
        self.b_tract = np.searchsorted(tract_vals, geo.tract_code[tract]).astype(u32)
        self.b_block = np.searchsorted(block_vals, geo.block_code).astype(u32)
        self.b_place = np.searchsorted(place_vals, geo.block_place).astype(u32)
        self.b_aiannh = np.searchsorted(aiannh_vals, geo.block_aiannh).astype(u32)
        self.age = _enum([f"{a:03d}" for a in range(116)])
        self.sex = _enum(["1", "2"])
        self.bool = _enum(["False", "True"])
        self.cenrace = _enum([f"{c:02d}" for c in range(100)])
        codes = sorted(reference.codes)
        self.code_index = np.zeros(10_000, dtype=np.uint32)  # code → position in self.race
        self.code_index[np.array(codes, dtype=np.int64)] = np.arange(1, len(codes) + 1)
        self.race = _enum(["Null", *(f"{c:04d}" for c in codes)])

    def geo_columns(self, block: I64) -> dict[str, pl.Series]:
        return {
            "TABBLKST": _take(self.state_enum, self.b_state[block]),
            "TABBLKCOU": _take(self.county_enum, self.b_county[block]),
            "TABTRACTCE": _take(self.tract_enum, self.b_tract[block]),
            "TABBLK": _take(self.block_enum, self.b_block[block]),
        }

    def persons(self, p: dict[str, npt.NDArray[Any]]) -> pl.DataFrame:
        cols: dict[str, pl.Series] = {
            "QAGE": _take(self.age, p["age"]),
            "QSEX": _take(self.sex, p["sex"] - 1),
            "HOUSEHOLDER": _take(self.bool, p["householder"].astype(np.uint8)),
            **self.geo_columns(p["block"]),
            "CENRACE": _take(self.cenrace, p["cenrace"]),
        }
        code_idx = self.code_index[p["codes"]]
        for j, c in enumerate(RACE_COLUMNS):
            cols[c] = _take(self.race, code_idx[:, j])
        cols["QSPAN"] = _take(self.race, self.code_index[p["qspan"]])
        return pl.DataFrame([cols[c].alias(c) for c in PERSON_COLUMNS])

    def grfc(self, lo: int, hi: int) -> pl.DataFrame:
        block = np.arange(lo, hi, dtype=np.int64)
        cols = self.geo_columns(block)
        cols["PLACEFP"] = _take(self.place_enum, self.b_place[block])
        cols["AIANNHCE"] = _take(self.aiannh_enum, self.b_aiannh[block])
        return pl.DataFrame([cols[c].alias(c) for c in GRFC_COLUMNS])


def _enum(values: list[str]) -> pl.Series:
    return pl.Series(values, dtype=pl.Enum(values))


def _fixed(values: I64, width: int) -> tuple[I64, pl.Series]:
    u = np.unique(values)
    return u, _enum([f"{int(v):0{width}d}" for v in u])


def _take(table: pl.Series, idx: npt.NDArray[Any]) -> pl.Series:
    return table.gather(pl.Series(idx, dtype=pl.UInt32))


class _Writer:
    """Appends DataFrames to one text (pipe-delimited) or Parquet file."""

    def __init__(self, path: Path, fmt: OutputFormat, null_race: bool) -> None:
        self.path = path
        self.fmt = fmt
        self.null_race = null_race
        self.rows = 0
        self._fh: Any = None
        self._pq: Any = None

    def write(self, df: pl.DataFrame) -> None:
        if self.fmt == "txt":
            if self._fh is None:
                self._fh = self.path.open("wb")
            df.write_csv(
                self._fh,
                separator="|",
                include_header=self.rows == 0,
                quote_style="never",
            )
        else:
            import pyarrow.parquet as pq

            out = df
            if self.null_race:
                out = out.with_columns(
                    pl.when(pl.col(c) == "Null").then(None).otherwise(pl.col(c)).alias(c)
                    for c in RACE_COLUMNS
                )
            # Enum columns become Arrow dictionaries: written as dictionary-encoded Parquet
            # strings without converting every value; no Arrow schema is stored, so readers
            # see plain string columns
            table = out.to_arrow(compat_level=pl.CompatLevel.oldest())
            if self._pq is None:
                self._pq = pq.ParquetWriter(
                    self.path, table.schema, compression="zstd", store_schema=False
                )
            self._pq.write_table(table)
        self.rows += df.height

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
        if self._pq is not None:
            self._pq.close()


def _write_persons(w: _Writer, columns: _Columns, p: dict[str, npt.NDArray[Any]]) -> None:
    w.write(columns.persons(p))


def synthesize(
    out: str | Path,
    persons: int,
    *,
    states: str | list[str] | None = None,
    seed: int = 0,
    fmt: OutputFormat = "txt",
    reference: ReferenceData | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> SynthResult:
    """Write ``persons`` synthetic person records and their GRF-C into directory ``out``.

    ``states``: FIPS codes / USPS abbreviations (default: 50 states + DC + PR). The
    reference files (default: the packaged 2020 production files) provide the race and
    ethnicity codes. ``progress(done, total, seconds)`` is called after every chunk.
    """
    if fmt not in ("txt", "parquet"):
        raise ValueError(f"format must be 'txt' or 'parquet', got {fmt!r}")
    if chunk_rows < 1:
        raise ValueError("chunk_rows must be positive")
    check_output(out, overwrite=overwrite, kind="synth")
    started = time.monotonic()
    chosen = resolve_states(states)
    ref = reference if reference is not None else read_reference(production_config_dir())
    nation = Nation.build(persons, chosen, seed, ref)
    columns = _Columns(nation.geo, ref)
    ext = "txt" if fmt == "txt" else "parquet"
    units = (persons + UNIT_PERSONS - 1) // UNIT_PERSONS
    per_chunk = max(1, chunk_rows // UNIT_PERSONS)
    by_state = np.zeros(len(chosen), dtype=np.int64)
    mult = np.zeros(9, dtype=np.int64)
    hispanic = 0
    with atomic_directory(out, kind="synth", overwrite=overwrite) as tmp:
        pw = _Writer(tmp / f"{PERSON_STEM}.{ext}", fmt, null_race=True)
        # double buffering: chunk k is converted and written by a worker thread (polars
        # releases the GIL) while the main thread draws chunk k + 1
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending: Future[None] | None = None
            try:
                done = 0
                for first in range(0, units, per_chunk):
                    parts = [nation.unit(k) for k in range(first, min(units, first + per_chunk))]
                    p = {key: np.concatenate([q[key] for q in parts]) for key in parts[0]}
                    del parts
                    by_state += np.bincount(
                        nation.geo.block_state[p["block"]], minlength=len(chosen)
                    )
                    mult += np.bincount((p["codes"] != 0).sum(axis=1), minlength=9)
                    hispanic += int(p["hispanic"].sum())
                    if pending is not None:
                        pending.result()
                        if progress is not None:
                            progress(done, persons, time.monotonic() - started)
                    pending = pool.submit(_write_persons, pw, columns, p)
                    done += p["block"].size
                if pending is not None:
                    pending.result()
                    pending = None
                if progress is not None:
                    progress(done, persons, time.monotonic() - started)
                if persons == 0:
                    pw.write(pl.DataFrame(schema=dict.fromkeys(PERSON_COLUMNS, pl.String)))
            finally:
                if pending is not None:
                    pending.cancel()
                    with contextlib.suppress(Exception):
                        pending.result()
                pw.close()
        gw = _Writer(tmp / f"{GRFC_STEM}.{ext}", fmt, null_race=False)
        try:
            step = 1 << 20
            for lo in range(0, nation.geo.n_blocks, step):
                gw.write(columns.grfc(lo, min(nation.geo.n_blocks, lo + step)))
        finally:
            gw.close()
        geo = nation.geo
        result = SynthResult(
            out=Path(out),
            persons=persons,
            seed=seed,
            format=fmt,
            states=[s.fips for s in chosen],
            blocks=geo.n_blocks,
            tracts=int(geo.tract_county.size),
            counties=int(geo.county_state.size),
            places=geo.n_places,
            aiannh_areas=geo.n_aiannh,
            seconds=0.0,
            persons_by_state={s.fips: int(c) for s, c in zip(chosen, by_state, strict=True)},
            multiplicity={k: int(mult[k]) for k in range(1, 9)},
            hispanic=hispanic,
        )
        result.files = {f.name: f.stat().st_size for f in sorted(tmp.iterdir()) if f.name != MARKER}
        result.seconds = time.monotonic() - started
        (tmp / "synth.json").write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    result.seconds = time.monotonic() - started
    return result


__all__ = ["DEFAULT_CHUNK_ROWS", "UNIT_PERSONS", "Nation", "SynthResult", "synthesize"]
