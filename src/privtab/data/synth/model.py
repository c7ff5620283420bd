"""The synthetic nation's model: geography and the distributions persons are drawn from.

Synthetic data is not privacy noise: a seeded ``numpy`` Generator is used throughout, and
every output is marked synthetic. Everything here is a deterministic function of
(seed, number of persons, states, reference data).

Geography (per selected state, FIPS ids as in the Census files). The hierarchy rule, the
same at every size (issue 26):

- counties: the state's real number of counties, odd FIPS codes 001, 003, ...; populations
  log-normal (σ = 1.6), so a state has both near-empty and very large counties;
- tracts: ``max(1, round(n_c / 3,700))`` per county, ``n_c`` the county's expected persons
  (at most 9,999 per county, codes 000100, 000200, ...). 3,700 persons per tract gives
  about the real tract counts at the real population (2020 Census tallies: 85,395 tracts for
  the 50 states, DC and PR, 3,920 persons each on average; rural states have smaller tracts —
  Vermont ≈ 3,300, Delaware ≈ 3,800), and several tracts in every county of ≥ 10,000
  persons whatever the size of the nation; tract populations vary ±30 %;
- block groups: ``1 + min(Poisson(1.84), 8)`` per tract (1–9, mean 2.84 as the 2020 tallies'
  242,335 block groups per 85,395 tracts);
- blocks: ``clip(round(LogNormal(ln 29, 0.4)), 1, 80)`` per block group (mean ≈ 31, most
  20–40; 2020: 33.7 per block group). A block's code is ``gnnn``: its block group's digit
  ``g`` (1–9, TABBLKGRPCE) and its number in the block group (001, 002, ...). Block sizes are
  log-normal, ~20 % of blocks have no household population;
- county subdivisions (COUSUBFP): runs of consecutive block groups within a county — minor
  civil divisions of about 3 block groups in the strong-MCD states (CT, ME, MA, MI, MN, NH,
  NJ, NY, PA, RI, VT, WI: towns and townships cover the state), county subdivisions of about
  10 block groups elsewhere; codes unique within the state (99999 is never drawn);
- places: runs of consecutive "urban" tracts form cities (which may straddle counties);
  some rural tracts hold a small town over part of their blocks; the rest is outside any
  place (PLACEFP 99999); codes unique within the state;
- AIANNH areas: in each state a share of tracts (Oklahoma 55 %, Alaska 35 %, New Mexico
  15 %, ...) lies in runs of AIANNH areas, some covering only part of a tract; one area
  crosses the Arizona / New Mexico / Utah borders when those states are selected (as the
  Navajo Nation does); codes 0001..9998 (9999 = none).

Households, housing units and group quarters: :mod:`privtab.data.synth.population`.

Persons (drawn independently given their block):

- Hispanic origin with a county share around the state's 2020 share (logit-normal, σ 0.7);
  Hispanic persons get a detailed origin code (Mexican, Puerto Rican, Cuban, ... weighted by
  national shares, tilted by state: Puerto Rican in PR, Cuban in Florida, ...), others the
  "Not Hispanic" code;
- race: the first code's major group (the maximal level-0 "alone" iterations of the
  reference files: White, Black, AIAN, Asian, NHPI, Some Other Race) from a county mixture
  around the state's 2020 shares (log-normal county deviations, σ 0.7), with AIAN the
  majority inside AIANNH areas and Some Other Race the most common group of Hispanic
  persons (who often report their origin as their race); the detailed code from a Zipf
  distribution over the group's codes (checkbox codes most common), tilted by state (a
  few diaspora codes ×25) and, for AIAN persons in an AIANNH area, dominated by the area's
  own one or two tribes — so detailed groups range from empty to very large;
- number of race codes: 1 (80 %), 2 (14 %), 3 (4 %), 4..8 (2 %, decreasing); additional
  codes come from the same major group with probability 0.55 (e.g. German + Irish), else
  from the county mixture; codes within a person are distinct;
- age 0..115 from a 2020-like age pyramid with a county age profile (young to old) and
  younger Hispanic populations; sex with a female share rising with age; householder for
  about half of adults. CENRACE is derived from the set of major groups (01..63).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from privtab.data.iterations import IterationKind, ReferenceData
from privtab.data.synth.states import StateModel

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
Ints = npt.NDArray[np.signedinteger[Any]]
"""Compact block columns (int16/int32: a nation has ~8 M blocks)."""

PERSONS_PER_TRACT = 3_700
MAX_TRACTS_PER_COUNTY = 9_999
BLOCK_GROUPS_EXTRA_MEAN = 1.84
BLOCKS_PER_GROUP_MEDIAN = 29.0
BLOCKS_PER_GROUP_SIGMA = 0.4
MAX_BLOCKS_PER_GROUP = 80
STRONG_MCD_STATES = ("09", "23", "25", "26", "27", "33", "34", "36", "42", "44", "50", "55")
"""States whose minor civil divisions cover the state (TopDown's spine uses them)."""
COUSUB_GROUPS = {True: 3.0, False: 10.0}
"""Mean block groups per county subdivision: strong-MCD states, other states."""
NO_COUSUB = 99_999
MULTIPLICITY = np.array([0.80, 0.14, 0.04, 0.012, 0.005, 0.0015, 0.0008, 0.0007])
SAME_GROUP_EXTRA = 0.55
HISPANIC_RACE_AS_ORIGIN = 0.6
"""Share of Hispanic persons in Some Other Race whose (first) race code is their origin code."""

# shares of the first race code's major group for Hispanic persons (W, B, AIAN, A, NHPI, SOR)
HISPANIC_MAJOR = np.array([0.38, 0.025, 0.02, 0.004, 0.001, 0.57])
ORIGIN_SHARES: dict[str, float] = {
    "Mexican": 0.597,
    "Puerto Rican": 0.093,
    "Salvadoran": 0.038,
    "Cuban": 0.039,
    "Dominican": 0.035,
    "Guatemalan": 0.025,
    "Colombian": 0.024,
    "Honduran": 0.018,
    "Spaniard": 0.012,
    "Spanish": 0.010,
    "Ecuadorian": 0.013,
    "Peruvian": 0.012,
    "Venezuelan": 0.009,
    "Nicaraguan": 0.007,
    "Argentinean": 0.005,
    "Panamanian": 0.004,
    "Costa Rican": 0.003,
    "Chilean": 0.0025,
    "Bolivian": 0.002,
    "Uruguayan": 0.001,
    "Paraguayan": 0.0005,
}
"""2020-like national shares of detailed Hispanic origins (matched by iteration name)."""
STATE_ORIGIN_BOOST: dict[str, dict[str, float]] = {
    "72": {"Puerto Rican": 80.0},
    "12": {"Cuban": 6.0, "Puerto Rican": 2.0, "Venezuelan": 4.0, "Colombian": 3.0},
    "36": {"Dominican": 5.0, "Puerto Rican": 3.0, "Ecuadorian": 3.0},
    "34": {"Dominican": 4.0, "Puerto Rican": 3.0, "Colombian": 2.0},
    "25": {"Dominican": 5.0, "Puerto Rican": 4.0, "Salvadoran": 2.0},
    "44": {"Dominican": 6.0, "Guatemalan": 3.0},
    "11": {"Salvadoran": 5.0},
    "24": {"Salvadoran": 5.0},
    "51": {"Salvadoran": 4.0},
}


class FlatCategorical:
    """Many categorical distributions sampled at once, vectorised (inverse CDF + guide table).

    Distribution ``d`` occupies the interval [d, d + 1] of a single increasing array of
    cumulative probabilities; sampling person i from distribution ``ids[i]`` with a uniform
    ``u[i]`` returns the first outcome whose cumulative value exceeds ``ids[i] + u[i]``. A
    guide table (one entry per outcome: the answer for u = k / n_d) gives a starting point
    at most one or two steps before the answer, so sampling costs a few gathers per draw
    instead of a binary search over all distributions.
    """

    def __init__(self, probs: Sequence[F64], values: Sequence[npt.NDArray[np.int64]]) -> None:
        if len(probs) != len(values) or not probs:
            raise ValueError("need one value array per distribution")
        cdfs: list[F64] = []
        for d, p in enumerate(probs):
            p = np.asarray(p, dtype=np.float64)
            s = p.sum()
            if not np.isfinite(s) or s <= 0 or (p < 0).any():
                raise ValueError(f"distribution {d} has no positive mass")
            if len(values[d]) != p.size:
                raise ValueError(
                    f"distribution {d}: {p.size} probabilities, {len(values[d])} values"
                )
            c = np.cumsum(p / s)
            c[-1] = 1.0
            cdfs.append(d + c)
        self.cdf = np.concatenate(cdfs)
        self.values = np.concatenate([np.asarray(v, dtype=np.int64) for v in values])
        self.sizes = np.array([len(p) for p in probs], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        self.n = len(probs)
        dist = np.repeat(np.arange(self.n), self.sizes)
        k = np.arange(self.cdf.size) - self.starts[dist]
        grid = dist + k / self.sizes[dist]
        self.guide = np.searchsorted(self.cdf, grid, side="right").astype(np.int64)

    def sample(self, ids: npt.ArrayLike, u: F64) -> npt.NDArray[np.int64]:
        ids = np.asarray(ids, dtype=np.int64)
        x = ids + u
        k = (u * self.sizes[ids]).astype(np.int64)
        np.minimum(k, self.sizes[ids] - 1, out=k)
        i = self.guide[self.starts[ids] + k]
        # d + u may round up to d + 1 when u is within 2^-53 (d + 1) of 1: never step out
        # of the distribution (its last outcome is then the answer)
        last = self.starts[ids] + self.sizes[ids] - 1
        np.minimum(i, last, out=i)
        step = np.flatnonzero((self.cdf[i] <= x) & (i < last))
        while step.size:
            i[step] += 1
            step = step[(self.cdf[i[step]] <= x[step]) & (i[step] < last[step])]
        out: npt.NDArray[np.int64] = self.values[i]
        return out


@dataclass
class SynthGeography:
    """Every block of the synthetic nation and its place in the hierarchy."""

    states: tuple[StateModel, ...]
    county_state: I64
    county_code: I64
    county_weight: F64
    """Expected persons of every county."""
    tract_county: I64
    tract_code: I64
    block_tract: Ints
    block_code: Ints
    """``gnnn``: block group digit ``g`` (TABBLKGRPCE) and the block's number in its group."""
    block_place: Ints
    block_cousub: Ints
    block_aiannh: Ints
    block_area: Ints
    """Index of the block's AIANNH area record (-1: none); per state, for the race model."""
    block_weight: npt.NDArray[np.float32]
    """Relative household population of every block (0: none), summing to 1 per tract × the
    tract's expected persons."""
    n_places: int
    n_aiannh: int
    area_aian_share: F64

    @property
    def n_blocks(self) -> int:
        return len(self.block_tract)

    @property
    def block_state(self) -> I64:
        out: I64 = self.county_state[self.tract_county[self.block_tract]]
        return out

    @property
    def block_county(self) -> I64:
        out: I64 = self.tract_county[self.block_tract]
        return out

    @property
    def block_group(self) -> I64:
        """TABBLKGRPCE of every block: the first digit of its code (1–9)."""
        out: I64 = self.block_code.astype(np.int64) // 1000
        return out


def largest_remainder(weights: F64, total: int) -> I64:
    """``total`` split in proportion to ``weights`` (largest remainders get the rest)."""
    q = weights / weights.sum() * total
    base: I64 = np.floor(q).astype(np.int64)
    rest = total - int(base.sum())
    if rest > 0:
        order = np.argsort(-(q - base), kind="stable")
        base[order[:rest]] += 1
    return base


def tracts_per_county(expected_persons: F64) -> I64:
    """Tracts of every county from its expected persons (see the module docstring)."""
    n = np.rint(np.asarray(expected_persons, dtype=np.float64) / PERSONS_PER_TRACT)
    return np.clip(n, 1, MAX_TRACTS_PER_COUNTY).astype(np.int64)


def build_geography(
    rng: np.random.Generator, states: Sequence[StateModel], persons: int
) -> SynthGeography:
    """Counties, tracts, block groups, blocks, county subdivisions, places and AIANNH areas
    of the selected states, for ``persons`` persons."""
    states = tuple(states)
    n_c = np.array([s.counties for s in states])
    county_state = np.repeat(np.arange(len(states)), n_c)
    county_code = np.concatenate([2 * np.arange(k) + 1 for k in n_c]).astype(np.int64)
    w = rng.lognormal(0.0, 1.6, size=county_state.size)
    pops = np.array([s.population for s in states])
    w = w / np.bincount(county_state, weights=w)[county_state] * pops[county_state]
    w = w / w.sum() * persons  # expected persons of every county
    n_t = tracts_per_county(w)
    tract_county = np.repeat(np.arange(len(w)), n_t)
    tract_code = np.concatenate([100 * (np.arange(k) + 1) for k in n_t]).astype(np.int64)
    tract_w = (w / n_t)[tract_county] * rng.lognormal(0.0, 0.3, size=tract_county.size)
    # block groups per tract, blocks per block group
    n_g = 1 + np.minimum(rng.poisson(BLOCK_GROUPS_EXTRA_MEAN, size=tract_county.size), 8)
    group_tract = np.repeat(np.arange(tract_county.size), n_g)
    group_first = np.concatenate([[0], np.cumsum(n_g)[:-1]])
    group_digit = np.arange(group_tract.size) - group_first[group_tract] + 1
    size = rng.lognormal(np.log(BLOCKS_PER_GROUP_MEDIAN), BLOCKS_PER_GROUP_SIGMA, group_tract.size)
    per_group = np.clip(np.rint(size), 1, MAX_BLOCKS_PER_GROUP).astype(np.int64)
    # block columns as compact integers from the start (a nation has ~8 M blocks)
    i32 = np.int32
    block_group_ix = np.repeat(np.arange(group_tract.size, dtype=i32), per_group)
    block_tract = group_tract.astype(i32)[block_group_ix]
    g_first = np.concatenate([[0], np.cumsum(per_group)[:-1]]).astype(i32)
    in_group = np.arange(block_tract.size, dtype=i32) - g_first[block_group_ix] + 1
    block_code = (group_digit.astype(np.int16)[block_group_ix] * 1000 + in_group).astype(np.int16)
    del in_group
    n_b = np.bincount(block_tract, minlength=tract_county.size)
    first = np.concatenate([[0], np.cumsum(n_b)[:-1]])
    j = np.arange(block_tract.size, dtype=i32) - first.astype(i32)[block_tract]
    bw = rng.lognormal(0.0, 1.0, size=block_tract.size)
    bw *= rng.random(block_tract.size) > 0.2
    bw[first] = np.maximum(bw[first], 0.05)  # at least one populated block per tract
    bw *= (tract_w / np.bincount(block_tract, weights=bw, minlength=tract_w.size))[block_tract]
    block_weight = (bw / bw.sum()).astype(np.float32)
    del bw
    tract_state = county_state[tract_county]
    block_place, n_places = _places(rng, tract_state, n_b, block_tract, j)
    block_aiannh, block_area, area_share = _aiannh(rng, states, tract_state, n_b, block_tract, j)
    del j
    group_county = tract_county[group_tract]
    block_cousub = _cousubs(rng, states, county_state, group_county).astype(i32)[block_group_ix]
    del block_group_ix
    return SynthGeography(
        states=states,
        county_state=county_state,
        county_code=county_code,
        county_weight=w,
        tract_county=tract_county,
        tract_code=tract_code,
        block_tract=block_tract,
        block_code=block_code,
        block_place=block_place,
        block_cousub=block_cousub,
        block_aiannh=block_aiannh,
        block_area=block_area,
        block_weight=block_weight,
        n_places=n_places,
        n_aiannh=len(np.unique(block_aiannh[block_aiannh != 9999])),
        area_aian_share=area_share,
    )


def _cousubs(
    rng: np.random.Generator,
    states: tuple[StateModel, ...],
    county_state: I64,
    group_county: I64,
) -> I64:
    """COUSUBFP of every block group: runs of consecutive block groups of one county (see
    the module docstring), numbered in order within the state."""
    n = group_county.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    strong = np.array([s.fips in STRONG_MCD_STATES for s in states])[county_state[group_county]]
    mean = np.where(strong, COUSUB_GROUPS[True], COUSUB_GROUPS[False])
    new_county = np.concatenate([[True], group_county[1:] != group_county[:-1]])
    starts = new_county | (rng.random(n) < 1.0 / mean)
    state = county_state[group_county]
    ordinal = np.cumsum(starts) - 1
    new_state = np.concatenate([[True], state[1:] != state[:-1]])
    first_in_state = np.maximum.accumulate(np.where(new_state, np.arange(n), 0))
    local = ordinal - ordinal[first_in_state]
    per_state = np.bincount(state, weights=starts, minlength=len(states)).astype(np.int64)
    step = np.maximum(1, (99_000 - 100) // np.maximum(per_state, 1))[state]
    out: I64 = (100 + local * step).astype(np.int64)
    return out


def _places(
    rng: np.random.Generator, tract_state: I64, n_b: I64, block_tract: Ints, j: Ints
) -> tuple[Ints, int]:
    """PLACEFP of every block (99999 outside places)."""
    n = tract_state.size
    urban = rng.random(n) < 0.5
    prev_urban = np.concatenate([[False], urban[:-1]])
    new_state = np.concatenate([[True], tract_state[1:] != tract_state[:-1]])
    starts_city = urban & (~prev_urban | new_state | (rng.random(n) < 0.2))
    town = ~urban & (rng.random(n) < 0.3)
    # place ordinal within the state: cities and towns in order of appearance
    new_place = starts_city | town
    ordinal = np.cumsum(new_place) - 1  # global ordinal
    first_in_state = np.maximum.accumulate(np.where(new_state, np.arange(n), 0))
    base = np.concatenate([[0], np.cumsum(new_place)])[first_in_state]
    local = ordinal - base  # 0-based within state (valid where the tract has a place)
    per_state = np.bincount(tract_state, weights=new_place).astype(np.int64)
    step = np.maximum(1, (98_000 - 100) // np.maximum(per_state, 1))[tract_state]
    code = 100 + local * step
    tract_place = np.where(urban | town, code, 99_999)
    # a town covers the first half of its tract's blocks only
    half = np.ceil(n_b / 2).astype(np.int32)
    outside_town = town[block_tract] & (j >= half[block_tract])
    block_place = tract_place.astype(np.int32)[block_tract]
    block_place[outside_town] = 99_999
    return block_place, int(new_place.sum())


def _aiannh(
    rng: np.random.Generator,
    states: tuple[StateModel, ...],
    tract_state: I64,
    n_b: I64,
    block_tract: Ints,
    j: Ints,
) -> tuple[Ints, Ints, F64]:
    """AIANNHCE (9999 = none) and the AIANNH area record index of every block."""
    tract_area = np.full(tract_state.size, -1, dtype=np.int64)
    partial = np.zeros(tract_state.size, dtype=bool)
    area_state: list[int] = []
    for si, s in enumerate(states):
        if s.aiannh <= 0:
            continue
        idx = np.flatnonzero(tract_state == si)
        lo, hi = int(idx[0]), int(idx[-1]) + 1
        n_ts = hi - lo
        n_areas = min(n_ts, int(rng.poisson(max(s.aiannh * n_ts / 2.5, s.aiannh * 40))))
        if n_areas == 0:
            continue
        starts = np.sort(rng.choice(n_ts, size=n_areas, replace=False)) + lo
        sizes = rng.geometric(1 / 2.5, size=n_areas)
        ends = np.minimum(np.append(starts[1:], hi), starts + sizes)
        for a, (b, e) in enumerate(zip(starts, ends, strict=True)):
            tract_area[b:e] = len(area_state) + a
            if e - b == 1 and rng.random() < 0.4:
                partial[b] = True
        area_state.extend([si] * n_areas)
    n_areas_total = len(area_state)
    # codes spread over 0001..9998 (every area type of AIANNHCE_ranges), skipping
    # 4990..4999, which no area type holds (production's spine refuses them)
    step = max(1, 9_987 // max(n_areas_total, 1))
    raw = 1 + step * np.arange(n_areas_total, dtype=np.int64)
    codes = raw + 10 * (raw >= 4_990)
    # one area crosses the AZ / NM / UT borders (as the Navajo Nation does)
    fips = [s.fips for s in states]
    if all(f in fips for f in ("04", "35", "49")):
        first: dict[str, int] = {}
        for a, si in enumerate(area_state):
            first.setdefault(states[si].fips, a)
        if all(f in first for f in ("04", "35", "49")):
            codes[first["35"]] = codes[first["04"]]
            codes[first["49"]] = codes[first["04"]]
    block_area = tract_area.astype(np.int32)[block_tract]
    half = np.ceil(n_b / 2).astype(np.int32)
    block_area[partial[block_tract] & (j >= half[block_tract])] = -1
    code_of = np.append(codes, 9_999).astype(np.int16)  # area -1: none (9999)
    block_code = code_of[block_area]
    share = rng.uniform(0.2, 0.9, size=n_areas_total)
    return block_code, block_area, share


@dataclass
class RaceModel:
    """Distributions of the race and ethnicity codes (see the module docstring)."""

    groups: list[npt.NDArray[np.int64]]
    """Codes of each major group (maximal level-0 alone race iterations), in code order."""
    group_of_code: dict[int, int]
    hispanic_codes: npt.NDArray[np.int64]
    not_hispanic_code: int
    county_hispanic: F64
    major: FlatCategorical
    """Major group of a code: dists = counties, then AIANNH areas, then Hispanic persons."""
    n_counties: int
    detailed: FlatCategorical
    """Detailed code: dists = (state, group) pairs, then AIANNH areas (AIAN codes)."""
    origin: FlatCategorical
    """Hispanic origin code per state."""
    multiplicity_cdf: F64
    """Cumulative probabilities of 1..8 race codes (k = 1 + searchsorted(cdf, u))."""
    age: FlatCategorical
    county_age_profile: I64
    cenrace_of_mask: I64
    aian_group: int
    sor_group: int


def major_groups(reference: ReferenceData) -> list[npt.NDArray[np.int64]]:
    """Codes of the maximal level-0 race-alone iterations (the OMB major race groups)."""
    cands = [i for i in reference.race_iterations() if i.level == 0 and i.alone and i.codes]
    maximal = [i for i in cands if not any(i.codes < o.codes for o in cands)]
    seen: set[frozenset[int]] = set()
    groups = []
    for it in sorted(maximal, key=lambda i: i.code):
        if it.codes in seen:
            continue
        seen.add(it.codes)
        groups.append(np.array(sorted(it.codes), dtype=np.int64))
    if not groups:
        raise ValueError("the reference files have no level-0 race-alone iterations")
    return groups


def _zipf_weights(rng: np.random.Generator, n: int, s: float = 1.1) -> F64:
    ranks = rng.permutation(n) + 1
    w: F64 = ranks.astype(np.float64) ** -s
    return w


def _checkbox_boost(reference: ReferenceData, codes: npt.NDArray[np.int64], w: F64) -> F64:
    top = w.max()
    out = w.copy()
    for k, c in enumerate(codes):
        name = reference.codes.get(int(c), "").lower()
        if "by checkbox" in name:
            continue
        if "detailed checkbox" in name:
            out[k] = 3.0 * top
        elif "(checkbox)" in name:
            out[k] = 6.0 * top
    return out


def _age_table() -> F64:
    a = np.arange(116, dtype=np.float64)
    base = np.exp(-((np.maximum(a - 55.0, 0.0) / 25.0) ** 2)) * np.exp(-np.maximum(a - 90.0, 0) / 3)
    tilts = (np.arange(8) - 3.5) * 0.25
    out: F64 = base[None, :] * np.exp(tilts[:, None] * (a[None, :] - 40.0) / 40.0)
    return out


def cenrace_table(n_groups: int) -> I64:
    """CENRACE code (1..) of every bitmask of major groups, in Census order (by size, then
    lexicographically: 01 White alone ... 06 SOR alone, 07 White + Black, ...)."""
    table = np.zeros(1 << n_groups, dtype=np.int64)
    code = 1
    for size in range(1, n_groups + 1):
        for combo in itertools.combinations(range(n_groups), size):
            table[sum(1 << g for g in combo)] = code
            code += 1
    return table


def build_race_model(
    rng: np.random.Generator, reference: ReferenceData, geo: SynthGeography
) -> RaceModel:
    groups = major_groups(reference)
    g_n = len(groups)
    group_of_code = {int(c): gi for gi, codes in enumerate(groups) for c in codes}
    six = g_n == 6
    aian_g, sor_g = (2, 5) if six else (0, g_n - 1)
    eth_lv = [i for i in reference.ethnicity_iterations() if i.level in (1, 2)]
    hisp = np.array(sorted(set().union(*(i.codes for i in eth_lv))), dtype=np.int64)
    if hisp.size == 0:
        raise ValueError("the reference files have no level-1/2 ethnicity iterations")
    eth0 = set().union(*(i.codes for i in reference.ethnicity_iterations() if i.level == 0))
    not_hisp = sorted(set(eth0) - set(hisp.tolist())) or sorted(set(reference.codes) - set(hisp))
    named = [c for c in not_hisp if "not hispanic" in reference.codes[c].lower()]
    not_hisp_code = int((named or not_hisp)[0])
    states = geo.states
    n_s = len(states)
    # Hispanic share per county (logit-normal around the state share)
    sh = np.array([min(max(s.hispanic, 0.002), 0.995) for s in states])
    logit = np.log(sh / (1 - sh))[geo.county_state] + rng.normal(0.0, 0.7, geo.county_state.size)
    county_hisp = 1 / (1 + np.exp(-logit))
    # major-group mixtures of non-Hispanic persons, per county
    if six:
        base = []
        for s in states:
            h = min(s.hispanic, 0.95)
            b, a, ai, nh = (x / (1 - h) for x in (s.black, s.asian, s.aian, s.nhpi))
            sor = 0.012
            white = max(0.05, 1.0 - b - a - ai - nh - sor)
            base.append([white, b, ai, a, nh, sor])
        state_mix = np.array(base)
    else:
        state_mix = np.full((n_s, g_n), 1.0 / g_n)
    county_mix = state_mix[geo.county_state] * rng.lognormal(0.0, 0.7, (geo.county_state.size, g_n))
    n_areas = len(geo.area_aian_share)
    area_mix = []
    for a in range(n_areas):
        m = np.full(g_n, 0.0)
        m[aian_g] = geo.area_aian_share[a]
        rest = np.ones(g_n)
        rest[aian_g] = 0.0
        m += (1 - geo.area_aian_share[a]) * rest / rest.sum()
        area_mix.append(m)
    hisp_major = HISPANIC_MAJOR if six else np.full(g_n, 1.0 / g_n)
    gvals = np.arange(g_n, dtype=np.int64)
    major = FlatCategorical(
        [*county_mix, *area_mix, hisp_major], [gvals] * (len(county_mix) + n_areas + 1)
    )
    # detailed codes per (state, group) and AIAN codes per AIANNH area
    group_w = [
        _checkbox_boost(reference, codes, _zipf_weights(rng, codes.size)) for codes in groups
    ]
    det_p: list[F64] = []
    det_v: list[npt.NDArray[np.int64]] = []
    for _s in range(n_s):
        for gi, codes in enumerate(groups):
            w = group_w[gi].copy()
            hot = rng.choice(codes.size, size=min(3, codes.size), replace=False)
            w[hot] *= 25.0
            det_p.append(w)
            det_v.append(codes)
    aian_codes = groups[aian_g]
    for _a in range(n_areas):
        w = group_w[aian_g].copy()
        tribes = rng.choice(
            aian_codes.size, size=min(int(rng.integers(1, 3)), aian_codes.size), replace=False
        )
        w[tribes] += 3.0 * w.sum()
        det_p.append(w)
        det_v.append(aian_codes)
    detailed = FlatCategorical(det_p, det_v)
    # Hispanic origin per state
    origin_w = _origin_weights(rng, reference, hisp)
    or_p = []
    for s in states:
        w = origin_w.copy()
        for name, factor in STATE_ORIGIN_BOOST.get(s.fips, {}).items():
            w[_origin_mask(reference, hisp, name)] *= factor
        or_p.append(w)
    origin = FlatCategorical(or_p, [hisp] * n_s)
    mult = np.cumsum(MULTIPLICITY / MULTIPLICITY.sum())[:-1]
    age = FlatCategorical(list(_age_table()), [np.arange(116, dtype=np.int64)] * 8)
    profile = rng.binomial(7, 0.5, size=geo.county_state.size).astype(np.int64)
    return RaceModel(
        groups=groups,
        group_of_code=group_of_code,
        hispanic_codes=hisp,
        not_hispanic_code=not_hisp_code,
        county_hispanic=county_hisp,
        major=major,
        n_counties=int(geo.county_state.size),
        detailed=detailed,
        origin=origin,
        multiplicity_cdf=mult,
        age=age,
        county_age_profile=profile,
        cenrace_of_mask=cenrace_table(g_n),
        aian_group=aian_g,
        sor_group=sor_g,
    )


def _origin_mask(
    reference: ReferenceData, hisp: npt.NDArray[np.int64], name: str
) -> npt.NDArray[np.bool_]:
    members: set[int] = set()
    for it in reference.ethnicity_iterations():
        if it.kind is IterationKind.ETHNICITY and it.level == 2 and it.name.strip() == name:
            members |= it.codes
    return np.isin(hisp, np.array(sorted(members), dtype=np.int64))


def _origin_weights(
    rng: np.random.Generator, reference: ReferenceData, hisp: npt.NDArray[np.int64]
) -> F64:
    """National weights of Hispanic origin codes: origin shares × within-origin Zipf."""
    w = _checkbox_boost(reference, hisp, _zipf_weights(rng, hisp.size, 1.3))
    w = w / w.sum()
    covered = np.zeros(hisp.size, dtype=bool)
    out = np.zeros(hisp.size)
    for name, share in ORIGIN_SHARES.items():
        m = _origin_mask(reference, hisp, name) & ~covered
        if m.any():
            out[m] = share * w[m] / w[m].sum()
            covered |= m
    rest = ~covered
    if rest.any():
        out[rest] = max(0.0, 1.0 - out.sum()) * w[rest] / w[rest].sum()
    if out.sum() <= 0:
        out = w
    return out


__all__ = [
    "FlatCategorical",
    "RaceModel",
    "SynthGeography",
    "build_geography",
    "build_race_model",
    "cenrace_table",
    "largest_remainder",
    "major_groups",
    "tracts_per_county",
]
