"""A synthetic county measured like production TopDown, for the tree GLS's coverage tests.

County → tracts → block groups → blocks; each block's persons drawn at random (a few GQ
facilities); every geounit measures the 11 production queries with the 2020 US run's
exact σ² (``global_scale`` 339/542, the geolevel and query shares of the README's table,
County…Block columns) and privtab's exact discrete Gaussian noise from a seeded source.
Constraints as :mod:`privtab.topdown.gls` takes them from a release: the root's total exact
(the county stands in for the state), no minors in nursing facilities at every block, and
persons of GQ type t = 0 at each block without a type-t facility.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from privtab.random import SeededSource, discrete_gaussian
from privtab.topdown.gls import (
    Constraints,
    GeounitTree,
    Measurements,
    noise_variance,
)
from privtab.topdown.histogram import CELLS, MEASURED_QUERIES, SHAPE, cell_index, query
from privtab.topdown.kron import KronQuery

GLOBAL_SCALE = Fraction(339, 542)
GEOLEVEL = {"County": 447, "Tract": 687, "Block_Group": 1256, "Block": 165}  # / 4099
# query shares in MEASURED_QUERIES order (total … detailed), US run
QUERY_SHARES = {
    "County": [Fraction(x, 4097) for x in (3126, 10, 10, 10, 10, 10, 28, 28, 10, 101, 754)],
    "Tract": [Fraction(x, 4102) for x in (1567, 8, 5, 5, 5, 5, 1933, 20, 5, 67, 482)],
    "Block_Group": [Fraction(x, 4099) for x in (1705, 3, 3, 3, 3, 3, 1055, 9, 3, 24, 1288)],
    "Block": [Fraction(x, 4097) for x in (5, 9, 5, 5, 5, 5, 21, 21, 5, 71, 3945)],
}
LEVELS = tuple(GEOLEVEL)


def sigma2(level: str, q: int) -> Fraction:
    return GLOBAL_SCALE**2 / (Fraction(GEOLEVEL[level], 4099) * QUERY_SHARES[level][q])


@dataclass
class County:
    hierarchy: GeounitTree
    levels: list[list[str]]
    truth: dict[str, np.ndarray]  # geounit -> (CELLS,) int histogram
    constraints: list[Constraints]
    queries: list[KronQuery]


def synthetic_county(fanout: tuple[int, int, int], seed: int = 0) -> County:
    rng = np.random.default_rng(seed)
    parents: dict[str, str] = {}
    levels = [["c"]]
    for f in fanout:
        nxt = []
        for p in levels[-1]:
            for k in range(f):
                g = f"{p}{k}"
                parents[g] = p
                nxt.append(g)
        levels.append(nxt)
    race_w = rng.dirichlet(np.full(63, 0.3))
    truth: dict[str, np.ndarray] = {}
    gq_types: dict[str, set[int]] = {}
    for b in levels[-1]:
        h = np.zeros(CELLS, dtype=np.int64)
        types = {int(t) for t in rng.integers(1, 8, size=int(rng.integers(0, 3)))}
        gq_types[b] = types
        for _ in range(int(rng.poisson(25))):
            adult = int(rng.random() < 0.75)
            h[cell_index(0, adult, int(rng.random() < 0.2), int(rng.choice(63, p=race_w)))] += 1
        for t in types:
            for _ in range(int(rng.integers(1, 12))):
                adult = 1 if t == 3 else int(rng.random() < 0.8)
                h[cell_index(t, adult, int(rng.random() < 0.2), int(rng.choice(63, p=race_w)))] += 1
        truth[b] = h
    for lvl in range(len(levels) - 2, -1, -1):
        for g in levels[lvl]:
            truth[g] = sum(
                (truth[c] for c in levels[lvl + 1] if parents[c] == g),
                np.zeros(CELLS, dtype=np.int64),
            )
    qs = [KronQuery.of(query(n)) for n in MEASURED_QUERIES]
    total = KronQuery.of(query("total"))
    cons = [Constraints(total, ("c",), truth["c"][None, :].sum(axis=1, keepdims=True))]
    blocks = tuple(levels[-1])
    nurse = KronQuery("nurse_minors", (np.eye(8)[3:4], np.eye(2)[:1], np.eye(2), np.eye(63)))
    cons.append(Constraints(nurse, blocks, np.zeros((len(blocks), nurse.size))))
    for t in range(1, 8):
        zero = tuple(b for b in blocks if t not in gq_types[b])
        if zero:
            zq = KronQuery(f"gq{t}_zero", (np.eye(8)[t : t + 1], np.eye(2), np.eye(2), np.eye(63)))
            cons.append(Constraints(zq, zero, np.zeros((len(zero), zq.size))))
    return County(GeounitTree("c", parents, LEVELS), levels, truth, cons, qs)


def measure(county: County, reps: int, source: SeededSource) -> list[Measurements]:
    """``reps`` independent noisy measurement sets (answers ``(geounits, reps, size)``)."""
    out = []
    for lvl, ids in enumerate(county.levels):
        level = LEVELS[lvl]
        for j, q in enumerate(county.queries):
            s2 = sigma2(level, j)
            exact = np.stack([q.answer(county.truth[g].astype(np.float64)) for g in ids])
            noise = discrete_gaussian(s2, (len(ids), reps, q.size), source=source)
            answers = exact[:, None, :] + noise
            var = np.full(len(ids), noise_variance(s2))
            out.append(Measurements(q, tuple(ids), answers, var))
    return out


def replicate_chunks(
    county: County, reps: int, chunk: int, seed: int
) -> Iterator[list[Measurements]]:
    source = SeededSource(seed)
    done = 0
    while done < reps:
        r = min(chunk, reps - done)
        yield measure(county, r, source)
        done += r


assert SHAPE == (8, 2, 2, 63)
