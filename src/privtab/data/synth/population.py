"""Households, housing units and group quarters of the synthetic nation (issue 26).

One population serves every product: the persons of :mod:`privtab.data.synth.model` are
grouped into households (occupied housing units) and group-quarters (GQ) facilities; every
block also gets vacant housing units. Synthetic data, not privacy noise: seeded ``numpy``
generators throughout.

**Group quarters.** For each of the 7 major GQ types (TopDown's hhgq 1–7) the nation holds
``share × persons`` residents (rounded) in facilities of a typical size (log-normal, σ 0.8,
sizes summing exactly to the type's residents; at least one facility when the type has a
resident). 2020 Census national figures (P.L. 94-171 / DHC, 331.4 M persons; Census Bureau
release of 12 August 2021 and the 2021 "2020 Census Group Quarters" blog): 8,239,016 persons
in GQ (2.5 %), of which 2,792,097 in college/university housing and 1,967,297 in adult
correctional facilities (exact); nursing facilities ≈ 1.24 M, other noninstitutional
≈ 1.80 M (the remainder), military quarters ≈ 0.30 M, other institutional ≈ 0.10 M and
juvenile facilities ≈ 0.04 M are *approximate* (rounded from the DHC group-quarters table).
Facilities are placed in blocks with household population, weighted by it: college housing
in places (cities) of populous counties, correctional facilities twice as likely outside
places, military quarters in a few counties (3 % of counties, by population). A facility's
residents are the first persons of its block; their age and sex are redrawn from the type's
profile (nursing: 65+ mostly, never under 18 — 30–64 otherwise; correctional: adult men
(91 %), 18–75; juvenile: 10–20, 80 % minors; college: 17–30, peak at 19–20; military:
18–45, 85 % men; other institutional: all ages; other noninstitutional: mostly adults).
Detailed types (QGQTYP) follow typical splits within the major type (e.g. state prisons
55 % and local jails 30 % of correctional facilities).

**Households.** The householder rule (the ``HOUSEHOLDER`` flag of person-records is
*redrawn* to match the households, one rule): every person outside GQ aged 15+ is a
householder with an age-dependent probability (0.01 at 15–17, 0.05 at 18–19, 0.23 at
20–24, rising to 0.71 at 85+); a block with household population but no householder
drawn makes its oldest household person the householder (whose age, if under 15, is
redrawn from the adult ages 18–85). Each householder draws a household type — married
couple, other family, living alone, nonfamily not alone — from a table by age (7 groups:
15–24, …, 75+), sex, race/ethnicity of the householder (White non-Hispanic, Black,
Hispanic, Asian, other) and place (in a place or not): married couples most common at
35–64, living alone most common at 75+, other family households mostly with a female
householder. The block's other household persons then join households: a married
householder gets the opposite-sex adult (16+) of the block nearest in age rank as spouse
(quantile matching within the block; none left: the household becomes "other family");
every other non-alone household gets one member (adults first); the rest join non-alone
households at random (weights: married 1, other family 0.8, nonfamily 0.35; minors only
family households where the block has one). Where a block has fewer other persons than
non-alone households, nonfamily, then other-family, then married households become
one-person households; where it has persons but no non-alone household, its first
householder's household becomes "other family". HOUSEHOLD_TYPE: 1 married couple,
2 other family with a male householder, 3 with a female householder, 4 living alone,
5 nonfamily not alone. Relationships (RELSHIP, 2020 CEF codes): 20 householder,
21 opposite-sex spouse, 22/24 opposite/same-sex unmarried partner (nonfamily households),
25–27 children (by age gap ≥ 15), 28 sibling, 29 parent, 30 grandchild, 31 parent-in-law,
32 child-in-law, 33 other relative, 34 roommate, 35 foster child, 36 other nonrelative;
37/38 institutional/noninstitutional GQ residents. Same-sex spouses (23) are not drawn.

**Tenure** (TEN 1 owned with a mortgage, 2 owned free and clear, 3 rented, 4 occupied
without payment of rent): the probability of owning rises with the householder's age
(0.18 at 15–24 to 0.80 at 65–74), is higher for married couples and outside places, lower
for Black and Hispanic householders; the share of owners with a mortgage falls with age
(0.84 under 35 to 0.28 at 75+); 3 % of non-owners (6 % outside places) pay no rent.

**Targets** (2020 Census DHC, national, 126.8 M households; Census Bureau "2020 Census
DHC" release of 25 May 2023 and its America Counts stories): married-couple households
46.2 % (45.7 % opposite-sex + 0.5 % same-sex), other family with a male householder ≈ 6 %,
with a female householder ≈ 13 %, one-person households ≈ 28 %, nonfamily not alone ≈ 7 %;
owner-occupied 63.1 % and renter-occupied 36.9 % (exact); the split of owners into with a
mortgage (≈ 39 %) and free and clear (≈ 24 %) and of renters into rented (≈ 35.5 %) and no
cash rent (≈ 1.4 %) is *approximate* (from the ACS shares of the period, not the DHC).
Housing units: 140,498,736 of which 126,817,580 occupied (vacancy 9.7 %, exact): the
county vacancy rate is logit-normal around 8.8 % (σ 0.6, so some counties have 25 %+ of
their units vacant), and a block's vacant units are Poisson with mean its expected occupied
units × the county's vacancy odds (× a log-normal block factor; a block without household
population gets 5 % of its tract's mean, so most of them have no unit). The calibration is
checked by ``tests/data/test_synth_population.py`` (shares at 10⁷ persons in the slow
suite, looser bounds at 2·10⁵ by default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from privtab.data.synth.model import FlatCategorical, SynthGeography, largest_remainder

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

NO_PLACE = 99_999
MAFID_BASE = 100_000_001
"""MAFIDs are 9 digits: the k-th unit of the nation (0-based, in file order) is MAFID_BASE + k."""
MAX_UNITS = 999_999_999 - MAFID_BASE + 1

# -------------------------------------------------------------------- group quarters
MAJOR_TYPES = 7
INSTITUTIONAL = 4
"""Major types 1–4 are institutional (RELSHIP 37), 5–7 noninstitutional (38)."""
US_PERSONS_2020 = 331_449_281
GQ_PERSONS = np.array(
    [1_967_297, 40_000, 1_240_000, 100_000, 2_792_097, 300_000, 1_799_622], dtype=np.float64
)
"""Persons in GQ by major type 1..7 (see the module docstring; totals 8,239,016)."""
GQ_SHARE = GQ_PERSONS / US_PERSONS_2020
GQ_MEAN_SIZE = np.array([390.0, 25.0, 80.0, 70.0, 110.0, 300.0, 30.0])
GQ_FEMALE = np.array([0.09, 0.15, 0.67, 0.40, 0.55, 0.15, 0.40])
GQ_DETAILED: tuple[tuple[tuple[int, float], ...], ...] = (
    ((101, 0.04), (102, 0.08), (103, 0.55), (104, 0.30), (105, 0.025), (106, 0.005)),
    ((201, 0.40), (202, 0.25), (203, 0.35)),
    ((301, 1.0),),
    ((401, 0.45), (402, 0.15), (403, 0.10), (404, 0.05), (405, 0.25)),
    ((501, 1.0),),
    ((601, 0.90), (602, 0.10)),
    (
        (701, 0.25),
        (702, 0.03),
        (704, 0.01),
        (706, 0.03),
        (801, 0.35),
        (802, 0.12),
        (900, 0.01),
        (901, 0.12),
        (903, 0.03),
        (904, 0.05),
    ),
)
"""Detailed GQ types (QGQTYP) of every major type with their shares of its facilities."""
GQ_CODES: tuple[int, ...] = tuple(c for group in GQ_DETAILED for c, _ in group)
MILITARY_COUNTIES = 0.03


def major_of(qgqtyp: npt.ArrayLike) -> I64:
    """TopDown's hhgq of a detailed GQ type: min(first digit, 7); 0 for none (0)."""
    q = np.asarray(qgqtyp, dtype=np.int64)
    return np.where(q > 0, np.minimum(q // 100, MAJOR_TYPES), 0)


def _bump(a: F64, centre: float, width: float) -> F64:
    out: F64 = np.exp(-(((a - centre) / width) ** 2))
    return out


def _gq_age_tables() -> list[F64]:
    a = np.arange(116, dtype=np.float64)
    adult = a >= 18
    nursing = np.where(a >= 65, _bump(a, 85.0, 10.0) + 0.05, 0.0) + np.where(
        (a >= 30) & (a < 65), 0.02, 0.0
    )
    tables = [
        np.where(adult & (a <= 80), _bump(a, 33.0, 13.0), 0.0),  # correctional (adults)
        np.where((a >= 10) & (a <= 20), _bump(a, 16.0, 2.0), 0.0),  # juvenile
        nursing,  # nursing: never under 18 (TopDown's structural zero)
        0.3 + _bump(a, 75.0, 15.0),  # other institutional
        np.where((a >= 17) & (a <= 30), _bump(a, 19.5, 2.0) + 0.02, 0.0),  # college
        np.where(adult & (a <= 45), _bump(a, 23.0, 5.0), 0.0),  # military
        np.where(adult, _bump(a, 40.0, 18.0), 0.05),  # other noninstitutional
    ]
    return [np.where(a <= 100, t, 0.0) for t in tables]


# -------------------------------------------------------------------- households
MARRIED, OTHER_FAMILY, ALONE, NONFAMILY = 0, 1, 2, 3
HEAD_AGES = np.array([15, 18, 20, 25, 30, 35, 45, 55, 65, 75, 85, 116])
HEAD_P = np.array([0.010, 0.052, 0.230, 0.397, 0.481, 0.522, 0.564, 0.606, 0.658, 0.700, 0.711])
"""P(householder | age in [HEAD_AGES[i], HEAD_AGES[i+1])) for persons outside GQ."""
TYPE_BY_AGE = np.array(
    [  # married, other family, alone, nonfamily not alone; ages 15-24, ..., 75+
        [0.122, 0.293, 0.279, 0.306],
        [0.425, 0.189, 0.246, 0.140],
        [0.587, 0.190, 0.166, 0.056],
        [0.595, 0.170, 0.185, 0.049],
        [0.555, 0.124, 0.265, 0.056],
        [0.512, 0.086, 0.353, 0.049],
        [0.366, 0.096, 0.503, 0.036],
    ]
)
TYPE_BY_SEX = np.array([[1.15, 0.55, 0.95, 1.05], [0.85, 1.45, 1.05, 0.95]])
TYPE_BY_RACE = np.array(  # White non-Hispanic, Black, Hispanic, Asian, other
    [
        [1.02, 0.80, 1.05, 1.00],
        [0.60, 1.70, 1.10, 0.95],
        [1.05, 1.55, 0.70, 0.95],
        [1.20, 0.85, 0.75, 1.10],
        [0.90, 1.30, 0.95, 1.05],
    ]
)
TYPE_BY_PLACE = np.array([[1.10, 0.95, 0.92, 0.90], [0.94, 1.03, 1.06, 1.07]])
"""Row 0: outside places, row 1: in a place."""
OWN_BY_AGE = np.array([0.18, 0.43, 0.61, 0.69, 0.75, 0.82, 0.81])
OWN_BY_TYPE = np.array([1.22, 0.88, 0.86, 0.62])
OWN_BY_RACE = np.array([1.10, 0.66, 0.78, 0.95, 0.85])
OWN_BY_PLACE = np.array([1.12, 0.93])
MORTGAGE_BY_AGE = np.array([0.84, 0.84, 0.80, 0.73, 0.60, 0.42, 0.28])
NO_CASH_RENT = np.array([0.06, 0.03])
"""Share of non-owners paying no rent: outside places, in a place."""
JOIN_WEIGHT = np.array([1.0, 0.8, 0.0, 0.35])
SPOUSE_MIN_AGE = 16
VACANCY_MEAN = 0.088
VACANCY_SIGMA = 0.6
PERSONS_PER_HOUSEHOLD = 2.55

# uniforms drawn per person (rows of ``u``)
U_HEAD, U_TYPE, U_TENURE, U_ORDER, U_REL, U_AGE, U_SEX, U_JOIN = range(8)
UNIFORMS = 8


def _type_table() -> FlatCategorical:
    probs = []
    for age in range(7):
        for sex in range(2):
            for race in range(5):
                for place in range(2):
                    w = (
                        TYPE_BY_AGE[age]
                        * TYPE_BY_SEX[sex]
                        * TYPE_BY_RACE[race]
                        * TYPE_BY_PLACE[place]
                    )
                    probs.append(w)
    return FlatCategorical(probs, [np.arange(4, dtype=np.int64)] * len(probs))


def _adult_ages() -> FlatCategorical:
    a = np.arange(116, dtype=np.float64)
    w = np.where((a >= 18) & (a <= 85), np.exp(-((np.maximum(a - 55.0, 0.0) / 25.0) ** 2)), 0.0)
    return FlatCategorical([w], [np.arange(116, dtype=np.int64)])


@dataclass
class UnitPlan:
    """Where the nation's group quarters are and how many vacant units each block has.

    Facilities are sorted by block; a block's GQ residents are its first persons, facility
    by facility.
    """

    fac_block: I64
    fac_code: I64
    """QGQTYP (detailed type) of every facility."""
    fac_size: I64
    block_gq: npt.NDArray[np.int32]
    """GQ residents of every block."""
    block_vacant: npt.NDArray[np.int32]
    """Vacant housing units of every block."""

    @property
    def gq_total(self) -> int:
        return int(self.fac_size.sum())

    @property
    def fac_major(self) -> I64:
        return major_of(self.fac_code)


def plan_units(rng: np.random.Generator, geo: SynthGeography, persons: int) -> UnitPlan:
    """Facilities (blocks, types, sizes) and vacant units of every block."""
    n_blocks = geo.n_blocks
    county = geo.block_county
    military = rng.random(geo.county_state.size) < MILITARY_COUNTIES * np.minimum(
        1.0, geo.county_weight / max(float(np.median(geo.county_weight)), 1e-9)
    )
    military |= np.arange(geo.county_state.size) == int(np.argmax(geo.county_weight))

    def placement(t: int) -> F64:
        """Weights of the blocks for a facility of major type ``t + 1`` (one at a time:
        8 M blocks)."""
        w = geo.block_weight.astype(np.float64)
        in_place = geo.block_place != NO_PLACE
        if t == 0:
            w *= np.where(in_place, 1.0, 2.0)
        elif t in (3, 6):
            w *= np.where(in_place, 1.5, 1.0)
        elif t == 4:
            w *= in_place * np.sqrt(geo.county_weight)[county]
        elif t == 5:
            w *= military[county]
        if w.sum() <= 0:
            w = geo.block_weight.astype(np.float64)
        out: F64 = w / w.sum()
        return out

    blocks, codes, sizes = [], [], []
    for t in range(MAJOR_TYPES):
        residents = int(round(persons * GQ_SHARE[t]))
        if residents == 0:
            continue
        n_fac = max(1, int(round(residents / GQ_MEAN_SIZE[t])))
        where = rng.choice(n_blocks, size=n_fac, p=placement(t))
        raw = rng.lognormal(np.log(GQ_MEAN_SIZE[t]) - 0.32, 0.8, size=n_fac)
        size = 1 + _split(raw, residents - n_fac)
        detail = np.array([c for c, _ in GQ_DETAILED[t]], dtype=np.int64)
        share = np.array([s for _, s in GQ_DETAILED[t]])
        blocks.append(where)
        codes.append(detail[rng.choice(detail.size, size=n_fac, p=share / share.sum())])
        sizes.append(size)
    if blocks:
        fb, fc, fs = np.concatenate(blocks), np.concatenate(codes), np.concatenate(sizes)
        order = np.lexsort((fc, fb))
        fb, fc, fs = fb[order], fc[order], fs[order]
    else:
        fb = fc = fs = np.zeros(0, dtype=np.int64)
    block_gq = np.bincount(fb, weights=fs, minlength=n_blocks).astype(np.int32)
    hh_persons = max(persons - int(fs.sum()), 0)
    return UnitPlan(fb, fc, fs, block_gq, _vacant(rng, geo, hh_persons))


def _split(weights: F64, total: int) -> I64:
    """``total`` split in proportion to ``weights`` (largest remainder)."""
    if total <= 0 or weights.size == 0:
        return np.zeros(weights.size, dtype=np.int64)
    return largest_remainder(weights, total)


def _vacant(
    rng: np.random.Generator, geo: SynthGeography, hh_persons: int
) -> npt.NDArray[np.int32]:
    """Vacant units of every block (see the module docstring)."""
    logit = np.log(VACANCY_MEAN / (1 - VACANCY_MEAN)) + rng.normal(
        0.0, VACANCY_SIGMA, geo.county_state.size
    )
    odds = np.exp(logit)[geo.tract_county]  # per tract
    lam = geo.block_weight.astype(np.float64)
    lam *= hh_persons / PERSONS_PER_HOUSEHOLD  # expected occupied units
    tract_mean = np.bincount(geo.block_tract, weights=lam, minlength=odds.size) / np.maximum(
        np.bincount(geo.block_tract, minlength=odds.size), 1
    )
    empty = np.flatnonzero(lam == 0)
    lam[empty] = 0.05 * tract_mean[geo.block_tract[empty]]
    del empty
    lam *= (odds)[geo.block_tract]
    lam *= rng.lognormal(-0.125, 0.5, geo.n_blocks)
    out: npt.NDArray[np.int32] = rng.poisson(lam).astype(np.int32)
    return out


# -------------------------------------------------------------------- assembly
@dataclass
class Assembled:
    """The persons of a run of whole blocks, grouped into units, in file order.

    ``persons``: the person columns (reordered: by unit, householder first) plus ``mafid``,
    ``epnum``, ``relship``, ``qgqtyp`` (0: none); ``units``: ``block``, ``mafid``,
    ``qgqtyp``, ``status`` (0 GQ, 1 occupied, 2 vacant), ``pop``; ``households`` (the
    occupied units in unit order): ``block``, ``cenrace``, ``codes``, ``qspan``, ``type``
    (HOUSEHOLD_TYPE 1–5), ``tenure`` (TEN 1–4).
    """

    persons: dict[str, npt.NDArray[Any]]
    units: dict[str, npt.NDArray[Any]]
    households: dict[str, npt.NDArray[Any]]

    def renumber(self, first_unit: int) -> None:
        """Number the units from ``first_unit`` (assembled from 0), in place."""
        self.persons["mafid"] += first_unit
        self.units["mafid"] += first_unit


class Assembler:
    """Groups the persons of runs of whole blocks into households and GQ facilities."""

    def __init__(self, geo: SynthGeography, plan: UnitPlan) -> None:
        self.geo = geo
        self.plan = plan
        self.gq_age = FlatCategorical(_gq_age_tables(), [np.arange(116, dtype=np.int64)] * 7)
        self.adult_age = _adult_ages()
        self.types = _type_table()
        head_p = np.zeros(116)
        for i in range(HEAD_P.size):
            head_p[HEAD_AGES[i] : HEAD_AGES[i + 1]] = HEAD_P[i]
        self.head_p = head_p
        self.in_place = geo.block_place != NO_PLACE

    def assemble(
        self, p: dict[str, npt.NDArray[Any]], block_lo: int, block_hi: int, first_unit: int
    ) -> Assembled:
        """Group persons ``p`` (every person of blocks ``[block_lo, block_hi)``, in block
        order, with their uniforms ``u``); units are numbered from ``first_unit``."""
        nb = block_hi - block_lo
        lb = p["block"].astype(np.int64) - block_lo
        n = lb.size
        counts = np.bincount(lb, minlength=nb)
        bstart = _starts(counts)
        pos = np.arange(n) - bstart[lb]
        u = p["u"]
        age = p["age"].astype(np.int64)
        sex = p["sex"].astype(np.int64)
        plan = self.plan
        is_gq = pos < plan.block_gq[block_lo:block_hi][lb]
        f_lo, f_hi = np.searchsorted(plan.fac_block, [block_lo, block_hi])
        fac_ids = np.arange(f_lo, f_hi)
        gq = np.flatnonzero(is_gq)
        fac_of = np.repeat(fac_ids, plan.fac_size[f_lo:f_hi])
        major = plan.fac_major[fac_of] - 1
        age[gq] = self.gq_age.sample(major, u[U_AGE, gq])
        sex[gq] = np.where(u[U_SEX, gq] < GQ_FEMALE[major], 2, 1)
        hh = ~is_gq
        head = hh & (u[U_HEAD] < self.head_p[age])
        self._force_heads(lb, nb, hh, head, age, u)
        heads = np.flatnonzero(head)
        hb = lb[heads]
        members = np.flatnonzero(hh & ~head)
        mb = lb[members]
        t = self._types(p, heads, hb, age, sex, block_lo, u)
        _fit_types(t, hb, np.bincount(mb, minlength=nb), nb)
        spouse, married_of = _spouses(t, heads, hb, members, mb, age, sex, nb)
        rest = np.setdiff1d(members, spouse, assume_unique=True)
        first, first_of = _first_members(t, hb, rest, lb, age, u, nb)
        extra = np.setdiff1d(rest, first, assume_unique=True)
        extra_of = _join(t, hb, extra, lb[extra], age[extra] < 18, u[U_JOIN, extra], nb)
        household = np.full(n, -1, dtype=np.int64)
        household[heads] = np.arange(heads.size)
        household[spouse] = married_of
        household[first] = first_of
        household[extra] = extra_of
        relship = np.zeros(n, dtype=np.int64)
        relship[gq] = np.where(major < INSTITUTIONAL, 37, 38)
        relship[heads] = 20
        relship[spouse] = 21
        others = np.concatenate([first, extra])
        is_first = np.zeros(others.size, dtype=bool)
        is_first[: first.size] = True
        relship[others] = _relationships(
            t, heads, household[others], others, is_first, age, sex, u[U_REL, others]
        )
        hsize = np.bincount(household[hh], minlength=heads.size)
        sex_h = sex[heads]
        hh_type = np.choose(t, [1, np.where(sex_h == 1, 2, 3), 4, 5])
        tenure = self._tenure(t, p, heads, hb, age, block_lo, u)
        # units: per block the occupied units (householder order), the vacant ones, the GQ
        vacant = plan.block_vacant[block_lo:block_hi]
        n_heads = np.bincount(hb, minlength=nb)
        n_fac = np.bincount(plan.fac_block[f_lo:f_hi] - block_lo, minlength=nb)
        per_block = n_heads + vacant + n_fac
        ustart = _starts(per_block)
        head_unit = ustart[hb] + np.arange(heads.size) - _starts(n_heads)[hb]
        fb = plan.fac_block[f_lo:f_hi] - block_lo
        fac_unit = ustart[fb] + n_heads[fb] + vacant[fb] + np.arange(fb.size) - _starts(n_fac)[fb]
        n_units = int(per_block.sum())
        unit_block = np.repeat(np.arange(block_lo, block_hi), per_block)
        status = np.full(n_units, 2, dtype=np.int64)
        status[head_unit] = 1
        status[fac_unit] = 0
        unit_pop = np.zeros(n_units, dtype=np.int64)
        unit_pop[head_unit] = hsize
        unit_pop[fac_unit] = plan.fac_size[f_lo:f_hi]
        unit_code = np.zeros(n_units, dtype=np.int64)
        unit_code[fac_unit] = plan.fac_code[f_lo:f_hi]
        person_unit = np.empty(n, dtype=np.int64)
        person_unit[hh] = head_unit[household[hh]]
        person_unit[gq] = fac_unit[fac_of - f_lo]
        # file order: by unit, the householder first, then in draw order
        key = person_unit * (n + 1) + np.where(head, 0, np.arange(n) + 1)
        order = np.argsort(key, kind="stable")
        sorted_unit = person_unit[order]
        epnum = np.arange(n) - _starts(np.bincount(sorted_unit, minlength=n_units))[sorted_unit]
        mafid = MAFID_BASE + first_unit + np.arange(n_units, dtype=np.int64)
        qgq = np.zeros(n, dtype=np.int64)
        qgq[gq] = plan.fac_code[fac_of]
        householder = np.zeros(n, dtype=bool)
        householder[heads] = True
        out = {k: v[order] for k, v in p.items() if k not in ("u", "age", "sex", "householder")}
        out.update(
            age=age[order].astype(np.uint8),
            sex=sex[order].astype(np.uint8),
            householder=householder[order],
            mafid=mafid[sorted_unit],
            epnum=(epnum + 1).astype(np.uint32),
            relship=relship[order].astype(np.uint8),
            qgqtyp=qgq[order].astype(np.uint16),
        )
        units = {
            "block": unit_block,
            "mafid": mafid,
            "qgqtyp": unit_code,
            "status": status,
            "pop": unit_pop,
        }
        households = {
            "block": block_lo + hb,
            "cenrace": p["cenrace"][heads],
            "codes": p["codes"][heads],
            "qspan": p["qspan"][heads],
            "type": hh_type,
            "tenure": tenure,
        }
        return Assembled(out, units, households)

    def _force_heads(
        self,
        lb: I64,
        nb: int,
        hh: npt.NDArray[np.bool_],
        head: npt.NDArray[np.bool_],
        age: I64,
        u: F64,
    ) -> None:
        """A block with household persons and no householder: its oldest one becomes the
        householder (aged 18–85 if under 15)."""
        need = (np.bincount(lb[hh], minlength=nb) > 0) & (np.bincount(lb[head], minlength=nb) == 0)
        if not need.any():
            return
        cand = np.flatnonzero(hh & need[lb])
        cand = cand[np.argsort(lb[cand] * 256 + age[cand], kind="stable")]
        last = cand[np.append(lb[cand][1:] != lb[cand][:-1], True)]
        young = last[age[last] < 15]
        age[young] = self.adult_age.sample(np.zeros(young.size, dtype=np.int64), u[U_AGE, young])
        head[last] = True

    def _types(
        self,
        p: dict[str, npt.NDArray[Any]],
        heads: I64,
        hb: I64,
        age: I64,
        sex: I64,
        block_lo: int,
        u: F64,
    ) -> I64:
        bucket = _age_bucket(age[heads])
        race = _race_class(p, heads)
        place = self.in_place[block_lo + hb].astype(np.int64)
        key = ((bucket * 2 + sex[heads] - 1) * 5 + race) * 2 + place
        return self.types.sample(key, u[U_TYPE, heads])

    def _tenure(
        self,
        t: I64,
        p: dict[str, npt.NDArray[Any]],
        heads: I64,
        hb: I64,
        age: I64,
        block_lo: int,
        u: F64,
    ) -> I64:
        bucket = _age_bucket(age[heads])
        race = _race_class(p, heads)
        place = self.in_place[block_lo + hb].astype(np.int64)
        own = OWN_BY_AGE[bucket] * OWN_BY_TYPE[t] * OWN_BY_RACE[race] * OWN_BY_PLACE[place]
        own = np.clip(own, 0.02, 0.97)
        mortgage = own * MORTGAGE_BY_AGE[bucket]
        no_rent = 1.0 - (1.0 - own) * NO_CASH_RENT[place]
        x = u[U_TENURE, heads]
        out: I64 = np.where(
            x < mortgage, 1, np.where(x < own, 2, np.where(x < no_rent, 3, 4))
        ).astype(np.int64)
        return out


def _starts(counts: npt.NDArray[Any]) -> I64:
    out: I64 = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return out


def _age_bucket(age: I64) -> I64:
    out: I64 = np.clip((age - 15) // 10, 0, 6)
    return out


def _race_class(p: dict[str, npt.NDArray[Any]], idx: I64) -> I64:
    """0 White non-Hispanic, 1 Black, 2 Hispanic, 3 Asian, 4 other (CENRACE 01, 02, 04)."""
    cen = p["cenrace"][idx].astype(np.int64)
    hisp = p["hispanic"][idx]
    out = np.full(idx.size, 4, dtype=np.int64)
    out[cen == 1] = 0
    out[cen == 2] = 1
    out[cen == 4] = 3
    out[hisp] = 2
    return out


def _rank_in_groups(keys: I64) -> I64:
    """Rank of every element within its run of equal (sorted) keys."""
    n = keys.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    new = np.empty(n, dtype=bool)
    new[0] = True
    new[1:] = keys[1:] != keys[:-1]
    first = np.maximum.accumulate(np.where(new, np.arange(n), 0))
    out: I64 = np.arange(n) - first
    return out


def _fit_types(t: I64, hb: I64, m_b: I64, nb: int) -> None:
    """Make the types fit the block's other persons (see the module docstring), in place."""
    nonalone = t != ALONE
    k_b = np.bincount(hb[nonalone], minlength=nb)
    fix = (m_b > 0) & (k_b == 0)
    if fix.any():
        firsts = np.searchsorted(hb, np.flatnonzero(fix))
        t[firsts] = OTHER_FAMILY
        k_b[fix] = 1
    excess = k_b - m_b
    if (excess > 0).any():
        na = np.flatnonzero((t != ALONE) & (excess[hb] > 0))
        prio = np.array([2, 1, 3, 0])[t[na]]
        na = na[np.argsort(hb[na] * 4 + prio, kind="stable")]
        rank = _rank_in_groups(hb[na])
        t[na[rank < excess[hb[na]]]] = ALONE


def _spouses(
    t: I64, heads: I64, hb: I64, members: I64, mb: I64, age: I64, sex: I64, nb: int
) -> tuple[I64, I64]:
    """Spouses of the married householders (quantile matching by age within block and sex
    pair); unmatched married households become "other family" (``t`` in place). Returns
    the spouses (person indices) and their households (indices into ``heads``)."""
    married = np.flatnonzero(t == MARRIED)
    if married.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    hs = sex[heads[married]]
    gkey = hb[married] * 2 + (hs - 1)
    o = np.argsort(gkey * 256 + age[heads[married]], kind="stable")
    married, gkey, hs = married[o], gkey[o], hs[o]
    rank = _rank_in_groups(gkey)
    group_size = np.bincount(gkey, minlength=2 * nb)[gkey]
    adults = members[age[members] >= SPOUSE_MIN_AGE]
    ckey = mb[age[members] >= SPOUSE_MIN_AGE] * 2 + (sex[adults] - 1)
    oc = np.argsort(ckey * 256 + age[adults], kind="stable")
    adults, ckey = adults[oc], ckey[oc]
    target = hb[married] * 2 + (2 - hs)
    sizes = np.bincount(ckey, minlength=2 * nb)
    lo = _starts(sizes)[target]
    avail = sizes[target]
    j = ((rank + 0.5) * avail / group_size).astype(np.int64)
    ok = avail > 0
    dup = np.zeros(married.size, dtype=bool)
    dup[1:] = (gkey[1:] == gkey[:-1]) & (j[1:] == j[:-1])
    ok &= ~dup
    t[married[~ok]] = OTHER_FAMILY
    return adults[lo[ok] + j[ok]], married[ok]


def _first_members(
    t: I64, hb: I64, rest: I64, lb: I64, age: I64, u: F64, nb: int
) -> tuple[I64, I64]:
    """One member for every non-alone household without a spouse, adults first (nonfamily
    households first); returns the members and their households."""
    needs = np.flatnonzero((t == OTHER_FAMILY) | (t == NONFAMILY))
    if needs.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    needs = needs[np.argsort(hb[needs] * 2 + (t[needs] == OTHER_FAMILY), kind="stable")]
    rank = _rank_in_groups(hb[needs])
    rb = lb[rest]
    key = rb * 4.0 + 2.0 * (age[rest] < 18) + u[U_ORDER, rest]
    rest = rest[np.argsort(key, kind="stable")]
    start = _starts(np.bincount(rb, minlength=nb))[hb[needs]]
    return rest[start + rank], needs


def _join(
    t: I64, hb: I64, extra: I64, eb: I64, minor: npt.NDArray[np.bool_], u: F64, nb: int
) -> I64:
    """The household each extra member joins: at random among the block's non-alone
    households, weighted by type (minors: family households where the block has one)."""
    if extra.size == 0:
        return np.zeros(0, dtype=np.int64)
    na = np.flatnonzero(t != ALONE)
    out = np.empty(extra.size, dtype=np.int64)
    family = JOIN_WEIGHT[t[na]] * (t[na] != NONFAMILY)
    fam_total = np.bincount(hb[na], weights=family, minlength=nb)
    use_family = minor & (fam_total[eb] > 0)
    per_block = np.bincount(hb[na], minlength=nb)
    first = _starts(per_block)
    for weights, rows in ((family, use_family), (JOIN_WEIGHT[t[na]], ~use_family)):
        sel = np.flatnonzero(rows)
        if sel.size == 0:
            continue
        cw = np.concatenate([[0.0], np.cumsum(weights)])
        lo = first[eb[sel]]
        hi = lo + per_block[eb[sel]]
        target = cw[lo] + u[sel] * (cw[hi] - cw[lo])
        k = np.searchsorted(cw, target, side="right") - 1
        k = np.clip(k, lo, hi - 1)  # a zero-weight household is never picked
        out[sel] = na[k]
    return out


def _code_table() -> npt.NDArray[np.uint8]:
    """RELSHIP by member class (rows, see :func:`_relationships`) and ``floor(100 r)``."""
    r = (np.arange(100) + 0.5) / 100
    rows = [
        np.where(r < 0.90, 25, np.where(r < 0.93, 26, 27)),  # 0 child (gap ≥ 15)
        np.where(r < 0.5, 30, np.where(r < 0.90, 25, 27)),  # 1 gap ≥ 40: grandchild or child
        np.where(r < 0.6, 29, np.where(r < 0.85, 31, 33)),  # 2 parent (older by ≥ 15)
        np.where(r < 0.55, 28, 33),  # 3 minor, small gap
        np.where(
            r < 0.35, 28, np.where(r < 0.5, 32, np.where(r < 0.85, 33, 34))
        ),  # 4 adult, younger
        np.where(r < 0.35, 28, np.where(r < 0.85, 33, 34)),  # 5 adult, older
        np.full(100, 35),  # 6 nonfamily: minor (foster child)
        np.where(r < 0.6, 22, 34),  # 7 nonfamily first member: partner or roommate
        np.where(r < 0.6, 34, 36),  # 8 nonfamily other adults
    ]
    return np.array(rows, dtype=np.uint8)


_CODES = _code_table()


def _relationships(
    t: I64,
    heads: I64,
    household: I64,
    persons: I64,
    is_first: npt.NDArray[np.bool_],
    age: I64,
    sex: I64,
    r: F64,
) -> I64:
    """RELSHIP of members other than spouses (see the module docstring): a member's class
    (by household type, age gap to the householder, minor or not, first member or not)
    and its uniform pick the code from :data:`_CODES`."""
    head = heads[household]
    a = age[persons]
    d = a - age[head]
    minor = a < 18
    family = np.where(
        d <= -15,
        np.where(d <= -40, 1, 0),
        np.where(d >= 15, 2, np.where(minor, 3, np.where(d < 0, 4, 5))),
    )
    nonfamily = np.where(minor, 6, np.where(is_first, 7, 8))
    cls = np.where(t[household] == NONFAMILY, nonfamily, family)
    out = _CODES[cls, np.minimum((r * 100).astype(np.int64), 99)].astype(np.int64)
    out[(out == 34) & is_first & (cls < 6)] = 33  # a family's first member is a relative
    out[(out == 22) & (sex[persons] == sex[head])] = 24
    return out


__all__ = [
    "GQ_CODES",
    "GQ_SHARE",
    "MAFID_BASE",
    "UNIFORMS",
    "Assembled",
    "Assembler",
    "UnitPlan",
    "major_of",
    "plan_units",
]
