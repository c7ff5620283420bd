"""Streaming generation of the synthetic nation: every product's inputs, written atomically.

One folder holds the same persons in every product's layout (CONTRACTS.md C1, docs/data.md):
``person-records`` and ``GRF-C`` (SafeTab-P; GRF-C with TABBLKGRPCE and COUSUBFP too),
``household-records`` (SafeTab-H: one row per occupied housing unit), ``cef-units`` and
``cef-persons`` (TopDown: housing units and GQ facilities; persons with their unit, in the
order of ``person-records``).

Persons are generated in *units* of :data:`UNIT_PERSONS` consecutive persons (persons are
ordered by block, as in Census files); unit ``k`` draws from its own generators
``SeedSequence(seed, spawn_key=(1, k))`` (the persons) and ``(4, k)`` (the uniforms that
group them into households and facilities, :mod:`privtab.data.synth.population`); blocks
are grouped as whole blocks, each by itself, and units are numbered in block order, so the
output depends only on (seed, persons, states, reference files) — not on the chunk size,
which only bounds memory: a chunk of about ``chunk_rows`` persons is generated, its whole
blocks grouped into units, converted to the output columns, appended to the output files
and dropped (the persons of a block cut by the chunk's end wait for the next chunk). The
block tables (a few million blocks at national scale) and one chunk are all that is ever
in memory: 10⁸ persons never need 10⁸ rows at once.

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
from privtab.data.cef import (
    CEF_PERSON_COLUMNS,
    CEF_PERSONS_STEM,
    CEF_UNITS_STEM,
    HOUSEHOLD_COLUMNS,
    HOUSEHOLDS_STEM,
    UNIT_COLUMNS,
)
from privtab.data.geography import GRFC_STEM
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
from privtab.data.synth.population import (
    MAX_UNITS,
    UNIFORMS,
    Assembled,
    Assembler,
    UnitPlan,
    major_of,
    plan_units,
)
from privtab.data.synth.states import StateModel, resolve_states

UNIT_PERSONS = 1 << 16
DEFAULT_CHUNK_ROWS = 1 << 18
SYNTH_GRFC_COLUMNS = (
    "TABBLKST",
    "TABBLKCOU",
    "TABTRACTCE",
    "TABBLKGRPCE",
    "TABBLK",
    "COUSUBFP",
    "PLACEFP",
    "AIANNHCE",
)
"""The GRF-C columns written: SafeTab-P's six (in their order) plus TABBLKGRPCE and COUSUBFP."""
OutputFormat = Literal["txt", "parquet"]
if TYPE_CHECKING:
    from privtab.report.text import Table

Progress = Callable[[int, int, float], None]
I64 = npt.NDArray[np.int64]
Arrays = dict[str, npt.NDArray[Any]]


@dataclass
class SynthResult:
    """What was written, with summary statistics of the synthetic nation."""

    out: Path
    persons: int
    seed: int
    format: OutputFormat
    states: list[str]
    blocks: int
    block_groups: int
    tracts: int
    counties: int
    county_subdivisions: int
    places: int
    aiannh_areas: int
    seconds: float
    files: dict[str, int] = field(default_factory=dict)
    persons_by_state: dict[str, int] = field(default_factory=dict)
    multiplicity: dict[int, int] = field(default_factory=dict)
    hispanic: int = 0
    units: dict[str, int] = field(default_factory=dict)
    gq_persons: dict[str, int] = field(default_factory=dict)
    gq_facilities: dict[str, int] = field(default_factory=dict)
    household_types: dict[str, int] = field(default_factory=dict)
    tenure: dict[str, int] = field(default_factory=dict)

    def table(self) -> Table:
        """The human summary (``privtab synth``): sizes, files and speed."""
        from privtab.report.text import table

        rows = [("persons", f"{self.persons:,}"), ("seed", str(self.seed))]
        rows.append(("states", f"{len(self.states)}"))
        rows += [(k, f"{v:,}") for k, v in self.to_dict()["geography"].items()]
        rows += [(f"units: {k}", f"{v:,}") for k, v in self.units.items()]
        gq = sum(self.gq_persons.values())
        rows.append(("persons in group quarters", f"{gq:,}"))
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
                "block_groups": self.block_groups,
                "blocks": self.blocks,
                "county_subdivisions": self.county_subdivisions,
                "places": self.places,
                "aiannh_areas": self.aiannh_areas,
            },
            "persons_by_state": self.persons_by_state,
            "race_code_multiplicity": {str(k): v for k, v in sorted(self.multiplicity.items())},
            "hispanic": self.hispanic,
            "units": self.units,
            "gq_persons": self.gq_persons,
            "gq_facilities": self.gq_facilities,
            "household_types": self.household_types,
            "tenure": self.tenure,
            "files": self.files,
            "seconds": self.seconds,
            "persons_per_second": self.persons / self.seconds if self.seconds > 0 else None,
            "privtab_version": __version__,
        }


def _seq(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


@dataclass
class Nation:
    """The geography, units, person allocation and race model of one synthetic nation."""

    geo: SynthGeography
    race: RaceModel
    plan: UnitPlan
    block_start: I64
    """Index of the first person of each block (persons are ordered by block), and the
    number of persons at the end (``n_blocks + 1`` entries)."""
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
        plan = plan_units(_seq(seed, 5), geo, persons)
        in_households = persons - plan.gq_total
        counts = plan.block_gq.astype(np.int64)
        if in_households:
            w = geo.block_weight.astype(np.float64)
            counts += _seq(seed, 2).multinomial(in_households, w / w.sum())
            del w
        start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        units = int(counts.size and (start[-1] > 0)) + int(plan.block_vacant.sum())
        if units + int(persons) // 2 > MAX_UNITS:
            raise ValueError(f"{persons:,} persons need more than {MAX_UNITS:,} 9-digit MAFIDs")
        race = build_race_model(_seq(seed, 3), reference, geo)
        return cls(geo=geo, race=race, plan=plan, block_start=start, persons=persons, seed=seed)

    def unit(self, k: int) -> Arrays:
        """The persons of unit ``k`` as integer columns (see :func:`_draw_persons`), with
        ``u``: the uniforms that group them (:data:`~privtab.data.synth.population.UNIFORMS`
        rows)."""
        lo = k * UNIT_PERSONS
        hi = min(self.persons, lo + UNIT_PERSONS)
        starts_ = self.block_start[:-1]
        b0 = int(np.searchsorted(starts_, lo, side="right")) - 1
        b1 = int(np.searchsorted(starts_, hi - 1, side="right"))
        starts = np.clip(starts_[b0:b1], lo, hi)
        ends = np.clip(np.append(starts_[b0 + 1 : b1], hi), lo, hi)
        block = np.repeat(np.arange(b0, b1, dtype=np.int64), ends - starts)
        p = _draw_persons(_seq(self.seed, 1, k), self.geo, self.race, block)
        p["u"] = _seq(self.seed, 4, k).random((UNIFORMS, hi - lo), dtype=np.float32)
        return p


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
    sex = np.where(rng.random(n) < female_p, 2, 1)
    # compact dtypes: a chunk of persons costs ~30 bytes each until it is written
    return {
        "block": block.astype(np.uint32),
        "age": age.astype(np.uint8),
        "sex": sex.astype(np.uint8),
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
    """Converts integer columns to the Census string columns (polars Enums).

    Every output column is a gather from a small table of strings by a precomputed index,
    so building a chunk costs a few vectorised gathers per column; plain numbers (MAFID,
    EPNUM, RELSHIP, ...) are written as integers.
    """

    def __init__(self, geo: SynthGeography, reference: ReferenceData) -> None:
        self.geo = geo
        self.state_enum = _enum([s.fips for s in geo.states])
        county_vals, self.county_enum = _fixed(geo.county_code, 3)
        tract_vals, self.tract_enum = _fixed(geo.tract_code, 6)
        block_vals, self.block_enum = _fixed(geo.block_code, 4)
        place_vals, self.place_enum = _fixed(geo.block_place, 5)
        cousub_vals, self.cousub_enum = _fixed(geo.block_cousub, 5)
        aiannh_vals, self.aiannh_enum = _fixed(geo.block_aiannh, 4)
        tract = geo.block_tract
        # per-block indices into the enums above (each has at most ~10,000 values)
        u16 = np.uint16
        county_of_tract = np.searchsorted(county_vals, geo.county_code[geo.tract_county])
        self.b_state = geo.county_state[geo.tract_county].astype(u16)[tract]
        self.b_county = county_of_tract.astype(u16)[tract]
        self.b_tract = np.searchsorted(tract_vals, geo.tract_code).astype(u16)[tract]
        self.b_block = np.searchsorted(block_vals, geo.block_code).astype(u16)
        self.age = _enum([f"{a:03d}" for a in range(116)])
        self.sex = _enum(["1", "2"])
        self.bool = _enum(["False", "True"])
        self.cenrace = _enum([f"{c:02d}" for c in range(100)])
        self.digit = _enum([str(d) for d in range(10)])
        self.qgqtyp = _enum(["Null", *(f"{c:03d}" for c in range(1, 1000))])
        self._place_vals, self._cousub_vals, self._aiannh_vals = (
            place_vals,
            cousub_vals,
            aiannh_vals,
        )
        codes = sorted(reference.codes)
        self.code_index = np.zeros(10_000, dtype=np.uint32)  # code → position in self.race
        self.code_index[np.array(codes, dtype=np.int64)] = np.arange(1, len(codes) + 1)
        self.race = _enum(["Null", *(f"{c:04d}" for c in codes)])

    def geo_columns(self, block: npt.NDArray[Any]) -> dict[str, pl.Series]:
        return {
            "TABBLKST": _take(self.state_enum, self.b_state[block]),
            "TABBLKCOU": _take(self.county_enum, self.b_county[block]),
            "TABTRACTCE": _take(self.tract_enum, self.b_tract[block]),
            "TABBLK": _take(self.block_enum, self.b_block[block]),
        }

    def _race(self, cols: dict[str, pl.Series], codes: npt.NDArray[Any], qspan: Any) -> None:
        code_idx = self.code_index[codes]
        for j, c in enumerate(RACE_COLUMNS):
            cols[c] = _take(self.race, code_idx[:, j])
        cols["QSPAN"] = _take(self.race, self.code_index[qspan])

    def persons(self, p: Arrays) -> pl.DataFrame:
        cols: dict[str, pl.Series] = {
            "QAGE": _take(self.age, p["age"]),
            "QSEX": _take(self.sex, p["sex"] - 1),
            "HOUSEHOLDER": _take(self.bool, p["householder"].astype(np.uint8)),
            **self.geo_columns(p["block"]),
            "CENRACE": _take(self.cenrace, p["cenrace"]),
        }
        self._race(cols, p["codes"], p["qspan"])
        return pl.DataFrame([cols[c].alias(c) for c in PERSON_COLUMNS])

    def cef_persons(self, p: Arrays) -> pl.DataFrame:
        cols: dict[str, pl.Series] = {
            "MAFID": pl.Series(p["mafid"], dtype=pl.UInt32),
            "EPNUM": pl.Series(p["epnum"], dtype=pl.UInt32),
            **self.geo_columns(p["block"]),
            "RELSHIP": pl.Series(p["relship"], dtype=pl.UInt8),
            "QGQTYP": _take(self.qgqtyp, p["qgqtyp"]),
            "QSEX": pl.Series(p["sex"], dtype=pl.UInt8),
            "QAGE": _take(self.age, p["age"]),
            "CENHISP": pl.Series(p["hispanic"].astype(np.uint8) + 1, dtype=pl.UInt8),
            "CENRACE": _take(self.cenrace, p["cenrace"]),
        }
        return pl.DataFrame([cols[c].alias(c) for c in CEF_PERSON_COLUMNS])

    def units(self, u: Arrays) -> pl.DataFrame:
        gq = u["status"] == 0
        cols: dict[str, pl.Series] = {
            "MAFID": pl.Series(u["mafid"], dtype=pl.UInt32),
            **self.geo_columns(u["block"]),
            "RTYPE": pl.Series(np.where(gq, 4, 2), dtype=pl.UInt8),
            "QGQTYP": _take(self.qgqtyp, u["qgqtyp"]),
            "HH_STATUS": pl.Series(u["status"], dtype=pl.UInt8),
            "FINAL_POP": pl.Series(u["pop"], dtype=pl.UInt32),
        }
        return pl.DataFrame([cols[c].alias(c) for c in UNIT_COLUMNS])

    def households(self, h: Arrays) -> pl.DataFrame:
        cols: dict[str, pl.Series] = {
            **self.geo_columns(h["block"]),
            "HHRACE": _take(self.cenrace, h["cenrace"]),
            "HOUSEHOLD_TYPE": pl.Series(h["type"], dtype=pl.UInt8),
            "TEN": pl.Series(h["tenure"], dtype=pl.UInt8),
        }
        self._race(cols, h["codes"], h["qspan"])
        return pl.DataFrame([cols[c].alias(c) for c in HOUSEHOLD_COLUMNS])

    def grfc(self, lo: int, hi: int) -> pl.DataFrame:
        geo = self.geo
        block = np.arange(lo, hi, dtype=np.int64)
        cols = self.geo_columns(block)
        cols["TABBLKGRPCE"] = _take(self.digit, geo.block_code[lo:hi] // 1000)
        index = np.searchsorted
        cols["PLACEFP"] = _take(self.place_enum, index(self._place_vals, geo.block_place[lo:hi]))
        cols["COUSUBFP"] = _take(
            self.cousub_enum, index(self._cousub_vals, geo.block_cousub[lo:hi])
        )
        cols["AIANNHCE"] = _take(
            self.aiannh_enum, index(self._aiannh_vals, geo.block_aiannh[lo:hi])
        )
        return pl.DataFrame([cols[c].alias(c) for c in SYNTH_GRFC_COLUMNS])


def _enum(values: list[str]) -> pl.Series:
    return pl.Series(values, dtype=pl.Enum(values))


def _fixed(values: I64, width: int) -> tuple[I64, pl.Series]:
    u = np.unique(values)
    return u, _enum([f"{int(v):0{width}d}" for v in u])


def _take(table: pl.Series, idx: npt.NDArray[Any]) -> pl.Series:
    return table.gather(pl.Series(idx, dtype=pl.UInt32))


NULL_COLUMNS: dict[str, tuple[str, ...]] = {
    PERSON_STEM: RACE_COLUMNS,
    HOUSEHOLDS_STEM: RACE_COLUMNS,
    CEF_PERSONS_STEM: ("QGQTYP",),
    CEF_UNITS_STEM: ("QGQTYP",),
}
"""Columns whose ``Null`` is a real null in Parquet files."""


class _Writer:
    """Appends DataFrames to one text (pipe-delimited) or Parquet file."""

    def __init__(self, path: Path, fmt: OutputFormat, nulls: tuple[str, ...]) -> None:
        self.path = path
        self.fmt = fmt
        self.nulls = nulls
        self.rows = 0
        self._fh: Any = None
        self._pq: Any = None

    def write(self, df: pl.DataFrame, *, empty: bool = False) -> None:
        """Append ``df`` (a frame without rows only with ``empty``: the header alone)."""
        if df.height == 0 and not empty:
            return
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

            out = df.with_columns(
                pl.when(pl.col(c) == "Null").then(None).otherwise(pl.col(c)).alias(c)
                for c in self.nulls
            )
            # Enum columns become Arrow dictionaries: written as dictionary-encoded Parquet
            # strings without converting every value; no Arrow schema is stored, so readers
            # see plain string columns
            table = out.to_arrow(compat_level=pl.CompatLevel.oldest())
            if self._pq is None:
                # strings (Enums) stay dictionaries; integers (MAFID, EPNUM, ...) are written
                # plainly, MAFID delta-encoded (it increases along the file)
                strings = [c for c, dt in out.schema.items() if dt != pl.UInt8()]
                strings = [c for c in strings if isinstance(out.schema[c], pl.Enum)]
                deltas = {c: "DELTA_BINARY_PACKED" for c in out.columns if c == "MAFID"}
                self._pq = pq.ParquetWriter(
                    self.path,
                    table.schema,
                    compression="zstd",
                    store_schema=False,
                    use_dictionary=strings,
                    column_encoding=deltas or None,
                    write_statistics=False,  # min/max of every page: half the writing time
                )
            self._pq.write_table(table)
        self.rows += df.height

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
        if self._pq is not None:
            self._pq.close()


class _Outputs:
    """The four streamed files of a synthetic nation (GRF-C is written at the end)."""

    def __init__(self, tmp: Path, fmt: OutputFormat, columns: _Columns) -> None:
        ext = "txt" if fmt == "txt" else "parquet"
        stems = (PERSON_STEM, CEF_PERSONS_STEM, CEF_UNITS_STEM, HOUSEHOLDS_STEM)
        self.writers = {s: _Writer(tmp / f"{s}.{ext}", fmt, NULL_COLUMNS[s]) for s in stems}
        self.columns = columns

    def write(self, a: Assembled) -> None:
        c, w = self.columns, self.writers
        w[PERSON_STEM].write(c.persons(a.persons))
        w[CEF_PERSONS_STEM].write(c.cef_persons(a.persons))
        w[CEF_UNITS_STEM].write(c.units(a.units))
        w[HOUSEHOLDS_STEM].write(c.households(a.households))

    def finish(self) -> None:
        """Headers of files that got no row (a nation without persons or units)."""
        frames = {
            PERSON_STEM: PERSON_COLUMNS,
            CEF_PERSONS_STEM: CEF_PERSON_COLUMNS,
            CEF_UNITS_STEM: UNIT_COLUMNS,
            HOUSEHOLDS_STEM: HOUSEHOLD_COLUMNS,
        }
        for stem, cols in frames.items():
            if self.writers[stem].rows == 0:
                frame = pl.DataFrame(schema=dict.fromkeys(cols, pl.String))
                self.writers[stem].write(frame, empty=True)

    def close(self) -> None:
        for w in self.writers.values():
            w.close()


@dataclass
class _Tally:
    """Summary counts of the chunks written."""

    n_states: int
    by_state: I64 = field(init=False)
    mult: I64 = field(default_factory=lambda: np.zeros(9, dtype=np.int64))
    hispanic: int = 0
    status: I64 = field(default_factory=lambda: np.zeros(3, dtype=np.int64))
    gq: I64 = field(default_factory=lambda: np.zeros(8, dtype=np.int64))
    facilities: I64 = field(default_factory=lambda: np.zeros(8, dtype=np.int64))
    types: I64 = field(default_factory=lambda: np.zeros(6, dtype=np.int64))
    tenure: I64 = field(default_factory=lambda: np.zeros(5, dtype=np.int64))

    def __post_init__(self) -> None:
        self.by_state = np.zeros(self.n_states, dtype=np.int64)

    def add(self, a: Assembled, geo: SynthGeography) -> None:
        p, u, h = a.persons, a.units, a.households
        state = geo.county_state[geo.tract_county[geo.block_tract[p["block"]]]]
        self.by_state += np.bincount(state, minlength=self.n_states)
        self.mult += np.bincount((p["codes"] != 0).sum(axis=1), minlength=9)
        self.hispanic += int(p["hispanic"].sum())
        self.status += np.bincount(u["status"], minlength=3)
        self.gq += np.bincount(major_of(p["qgqtyp"]), minlength=8)
        self.facilities += np.bincount(major_of(u["qgqtyp"]), minlength=8)
        self.types += np.bincount(h["type"], minlength=6)
        self.tenure += np.bincount(h["tenure"], minlength=5)


MAX_PERSONS = 10**10
"""The largest population ``synthesize`` makes: 30 times the 2020 United States."""

_BYTES_PER_PERSON = {"txt": 150, "parquet": 20}
"""Lower bounds of the output's size per person (measured: ≈ 187 bytes per person in the
pipe-delimited files, persons + units + households; Parquet compresses ≈ 5×)."""


def _check_size(out: Path, persons: int, fmt: str) -> None:
    """Refuse, before any work, a population larger than :data:`MAX_PERSONS` or one whose
    files cannot fit in the free space of ``out``'s file system."""
    if persons > MAX_PERSONS:
        raise ValueError(
            f"--persons {persons:,} is more than privtab synth makes ({MAX_PERSONS:,}, 30 "
            "times the 2020 United States)"
        )
    import shutil

    parent = out.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    need = persons * _BYTES_PER_PERSON[fmt]
    free = shutil.disk_usage(parent).free
    if need > free:
        raise ValueError(
            f"{persons:,} persons need at least {need / 2**30:,.1f} GiB in {fmt} files; "
            f"{parent} has {free / 2**30:,.1f} GiB free"
        )


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
    """Write ``persons`` synthetic persons, their households, housing units and group
    quarters into directory ``out``: every product's inputs for the same persons.

    ``states``: FIPS codes / USPS abbreviations (default: 50 states + DC + PR). The
    reference files (default: the packaged 2020 production files) provide the race and
    ethnicity codes. ``progress(done, total, seconds)`` is called after every chunk.
    """
    if fmt not in ("txt", "parquet"):
        raise ValueError(f"format must be 'txt' or 'parquet', got {fmt!r}")
    if chunk_rows < 1:
        raise ValueError("chunk_rows must be positive")
    check_output(out, overwrite=overwrite, kind="synth")
    _check_size(Path(out), persons, fmt)
    started = time.monotonic()
    chosen = resolve_states(states)
    ref = reference if reference is not None else read_reference(production_config_dir())
    nation = Nation.build(persons, chosen, seed, ref)
    columns = _Columns(nation.geo, ref)
    tally = _Tally(len(chosen))
    with atomic_directory(out, kind="synth", overwrite=overwrite) as tmp:
        outputs = _Outputs(tmp, fmt, columns)
        try:
            _stream(nation, outputs, tally, chunk_rows, progress, started)
            outputs.finish()
        finally:
            outputs.close()
        _write_grfc(tmp, fmt, columns, nation.geo.n_blocks)
        result = _result(out, nation, chosen, fmt, tally)
        result.files = {f.name: f.stat().st_size for f in sorted(tmp.iterdir()) if f.name != MARKER}
        result.seconds = time.monotonic() - started
        (tmp / "synth.json").write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    result.seconds = time.monotonic() - started
    return result


def _stream(
    nation: Nation,
    outputs: _Outputs,
    tally: _Tally,
    chunk_rows: int,
    progress: Progress | None,
    started: float,
) -> None:
    """Draw, group and write the persons chunk by chunk, in a pipeline of three threads
    (numpy and polars release the GIL): the main thread draws chunk k + 2 while a worker
    groups chunk k + 1 into units and another numbers (MAFIDs follow the units written
    before), converts and writes chunk k. Each chunk's units are numbered from 0 by the
    grouping and renumbered by the writer, so the output does not depend on the chunks."""
    persons = nation.persons
    assembler = Assembler(nation.geo, nation.plan)
    units = (persons + UNIT_PERSONS - 1) // UNIT_PERSONS
    per_chunk = max(1, chunk_rows // UNIT_PERSONS)
    ends = nation.block_start[1:]
    n_blocks = nation.geo.n_blocks
    carry: Arrays | None = None
    next_block = 0
    state = {"units": 0, "done": 0}

    def write(assembled: Future[Assembled]) -> None:
        a = assembled.result()
        a.renumber(state["units"])
        state["units"] += a.units["mafid"].size
        tally.add(a, nation.geo)
        outputs.write(a)
        state["done"] += a.persons["block"].size

    with ThreadPoolExecutor(max_workers=1) as group, ThreadPoolExecutor(max_workers=1) as out:
        written: list[Future[None]] = []
        try:
            for first in range(0, max(units, 1), per_chunk):
                last = min(units, first + per_chunk)
                parts = ([carry] if carry is not None else []) + [
                    nation.unit(k) for k in range(first, last)
                ]
                drawn = min(persons, last * UNIT_PERSONS)
                hi = n_blocks if last >= units else int(np.searchsorted(ends, drawn, "right"))
                p = _concat(parts)
                del parts
                cut = int(nation.block_start[hi]) - int(nation.block_start[next_block])
                chunk, carry = _split(p, cut)
                del p
                grouped = group.submit(assembler.assemble, chunk, next_block, hi, 0)
                del chunk
                next_block = hi
                written.append(out.submit(write, grouped))
                while len(written) > 2:  # at most 3 chunks in flight
                    written.pop(0).result()
                    if progress is not None:
                        progress(state["done"], persons, time.monotonic() - started)
            while written:
                written.pop(0).result()
            if progress is not None:
                progress(state["done"], persons, time.monotonic() - started)
        finally:
            for f in written:
                f.cancel()
            for f in written:
                with contextlib.suppress(Exception):
                    f.result()


def _concat(parts: list[Arrays]) -> Arrays:
    if not parts:
        return {}
    if len(parts) == 1:
        return parts[0]
    out = {k: np.concatenate([q[k] for q in parts]) for k in parts[0] if k != "u"}
    out["u"] = np.concatenate([q["u"] for q in parts], axis=1)
    return out


def _split(p: Arrays, cut: int) -> tuple[Arrays, Arrays | None]:
    """The first ``cut`` persons and the rest (``None`` if none)."""
    if not p:
        return _empty_persons(), None
    n = p["block"].size
    if cut >= n:
        return p, None
    head = {k: (v[:, :cut] if k == "u" else v[:cut]) for k, v in p.items()}
    rest = {k: (v[:, cut:] if k == "u" else v[cut:]) for k, v in p.items()}
    return head, rest


def _empty_persons() -> Arrays:
    return {
        "block": np.zeros(0, np.uint32),
        "age": np.zeros(0, np.uint8),
        "sex": np.zeros(0, np.uint8),
        "cenrace": np.zeros(0, np.uint8),
        "codes": np.zeros((0, 8), np.uint16),
        "qspan": np.zeros(0, np.uint16),
        "hispanic": np.zeros(0, bool),
        "u": np.zeros((UNIFORMS, 0), np.float32),
    }


def _write_grfc(tmp: Path, fmt: OutputFormat, columns: _Columns, n_blocks: int) -> None:
    ext = "txt" if fmt == "txt" else "parquet"
    gw = _Writer(tmp / f"{GRFC_STEM}.{ext}", fmt, ())
    try:
        step = 1 << 20
        for lo in range(0, n_blocks, step):
            gw.write(columns.grfc(lo, min(n_blocks, lo + step)))
    finally:
        gw.close()


def _result(
    out: str | Path, nation: Nation, chosen: tuple[StateModel, ...], fmt: OutputFormat, t: _Tally
) -> SynthResult:
    geo = nation.geo
    majors = ("", "correctional", "juvenile", "nursing", "other_institutional", "college",
              "military", "other_noninstitutional")  # fmt: skip
    types = ("", "married_couple", "other_family_male", "other_family_female", "alone",
             "nonfamily_not_alone")  # fmt: skip
    tenure = ("", "owned_mortgage", "owned_free_clear", "rented", "no_rent")
    groups = np.unique(geo.block_tract.astype(np.int64) * 10 + geo.block_group).size
    cousubs = np.unique(geo.block_state * 100_000 + geo.block_cousub).size
    return SynthResult(
        out=Path(out),
        persons=nation.persons,
        seed=nation.seed,
        format=fmt,
        states=[s.fips for s in chosen],
        blocks=geo.n_blocks,
        block_groups=groups,
        tracts=int(geo.tract_county.size),
        counties=int(geo.county_state.size),
        county_subdivisions=cousubs,
        places=geo.n_places,
        aiannh_areas=geo.n_aiannh,
        seconds=0.0,
        persons_by_state={s.fips: int(c) for s, c in zip(chosen, t.by_state, strict=True)},
        multiplicity={k: int(t.mult[k]) for k in range(1, 9)},
        hispanic=t.hispanic,
        units={
            "housing_units": int(t.status[1] + t.status[2]),
            "occupied": int(t.status[1]),
            "vacant": int(t.status[2]),
            "gq_facilities": int(t.status[0]),
        },
        gq_persons={majors[k]: int(t.gq[k]) for k in range(1, 8)},
        gq_facilities={majors[k]: int(t.facilities[k]) for k in range(1, 8)},
        household_types={types[k]: int(t.types[k]) for k in range(1, 6)},
        tenure={tenure[k]: int(t.tenure[k]) for k in range(1, 5)},
    )


__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "SYNTH_GRFC_COLUMNS",
    "UNIT_PERSONS",
    "Nation",
    "SynthResult",
    "synthesize",
]
