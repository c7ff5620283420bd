"""Stability per population-group level: production values, an independent recount from the
raw files, a brute-force check of the exact maximum, and the Census rule's assumption."""

from __future__ import annotations

import csv
import itertools
import random
from collections import defaultdict
from pathlib import Path

import pytest

from privtab.data import GeoLevel, ReferenceData, Scope, production_config_dir
from privtab.data.iterations import Iteration, IterationKind
from privtab.data.levels import Granularity
from privtab.data.membership import iterations_of
from privtab.data.stability import level_stability, stabilities


def _raw_heights(directory: Path, level: str, granularity: str) -> tuple[int, int]:
    """h_r and h_e straight from the text files (csv module; independent of privtab readers)."""

    def rows(name: str) -> list[dict[str, str]]:
        with (directory / name).open(newline="") as fh:
            return [r for r in csv.DictReader(fh, delimiter="|") if r.get("ITERATION_CODE")]

    race = rows("race-characteristic-iterations.txt")
    eth = rows("ethnicity-characteristic-iterations.txt")

    def keep(r: dict[str, str]) -> bool:
        if r["LEVEL"] != level:
            return False
        flag = "COARSE_ONLY" if granularity == "detailed" else "DETAILED_ONLY"
        return r[flag] == "False"

    alone = {r["ITERATION_CODE"] for r in race if keep(r) and r["ALONE"] == "True"}
    ethn = {r["ITERATION_CODE"] for r in eth if keep(r)}
    per_code_r: dict[str, int] = defaultdict(int)
    per_code_e: dict[str, int] = defaultdict(int)
    for r in rows("race-and-ethnicity-code-to-iteration.txt"):
        if r["ITERATION_CODE"] in alone:
            per_code_r[r["RACE_ETH_CODE"]] += 1
        if r["ITERATION_CODE"] in ethn:
            per_code_e[r["RACE_ETH_CODE"]] += 1
    return max(per_code_r.values(), default=0), max(per_code_e.values(), default=0)


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("granularity", list(Granularity))
def test_production_stability_is_nine(
    ref: ReferenceData, level: int, granularity: Granularity
) -> None:
    s = level_stability(ref, 8, level, granularity)
    h_r, h_e = _raw_heights(production_config_dir(), str(level), granularity.value)
    assert (s.h_race, s.h_ethnicity) == (h_r, h_e) == (1, 1)
    assert s.h_race_combination == 1
    # Census rule h_r * max(2, r) + h_e with r = max_race_codes = 8 (census README)
    assert s.census_rule == h_r * max(2, 8) + h_e == 9
    assert s.exact == 9
    assert s.value == 9
    assert s.census_rule_holds
    # the SafeTab paper's App. F.1 also uses stability 9 for every level


def test_all_production_levels(ref: ReferenceData) -> None:
    us = stabilities(ref, 8, Scope.US)
    pr = stabilities(ref, 8, Scope.PR)
    assert len(us) == 12
    assert len(pr) == 8
    assert {s.value for s in (*us.values(), *pr.values())} == {9}
    assert us[(GeoLevel.COUNTY, 2)].granularity is Granularity.COARSE
    assert pr[(GeoLevel.PR_STATE, 2)].granularity is Granularity.DETAILED


@pytest.mark.parametrize(("r", "expected"), [(1, 3), (2, 3), (3, 4), (5, 6), (8, 9)])
def test_stability_depends_on_max_race_codes(ref: ReferenceData, r: int, expected: int) -> None:
    s = level_stability(ref, r, 2, Granularity.COARSE)
    assert s.census_rule == max(2, r) + 1 == expected
    assert s.exact == expected


def test_a_record_reaches_the_bound(ref: ReferenceData) -> None:
    """Eight codes from eight different level-2 groups + a Hispanic origin: 9 iterations."""
    its = ref.select(2, Granularity.COARSE)
    combo = [i for i in its if i.kind is IterationKind.RACE and not i.alone and i.codes]
    codes = [min(i.codes) for i in combo[:8]]
    mexican = min(ref.iterations["4015"].codes)
    got = iterations_of(ref, codes, mexican, 2, Granularity.COARSE)
    assert len(got) == 9
    # one code: its alone and alone-or-in-combination groups + the origin = 3
    assert len(iterations_of(ref, codes[:1], mexican, 2, Granularity.COARSE)) == 3


def _iteration(code: str, kind: IterationKind, alone: bool | None, codes: set[int]) -> Iteration:
    return Iteration(code, code, kind, 2, alone, False, False, frozenset(codes))


def _random_partition(rng: random.Random, codes: list[int], n_groups: int) -> list[set[int]]:
    groups: list[set[int]] = [set() for _ in range(n_groups)]
    for c in codes:
        g = rng.randrange(n_groups + 1)  # n_groups: the code is in no group
        if g < n_groups:
            groups[g].add(c)
    return [g for g in groups if g]


def _random_reference(rng: random.Random) -> ReferenceData:
    codes = list(range(1000, 1000 + rng.randint(2, 7)))
    its: dict[str, Iteration] = {}
    k = 0
    for kind, alone in (
        (IterationKind.RACE, True),
        (IterationKind.RACE, False),
        (IterationKind.ETHNICITY, None),
    ):
        for g in _random_partition(rng, codes, rng.randint(1, 4)):
            k += 1
            its[f"{k:04d}"] = _iteration(f"{k:04d}", kind, alone, g)
    return ReferenceData(codes={c: str(c) for c in codes}, iterations=its, source="random")


def _brute_force(ref: ReferenceData, r: int) -> int:
    codes = sorted(ref.codes)
    best = 0
    for size in range(1, r + 1):
        for combo in itertools.combinations(codes, size):
            for e in codes:
                best = max(best, len(iterations_of(ref, combo, e, 2, Granularity.COARSE)))
    return best


def test_exact_matches_brute_force_on_random_references() -> None:
    rng = random.Random(20240611)
    rule_failed = 0
    for _ in range(150):
        ref = _random_reference(rng)
        r = rng.randint(1, 4)
        s = level_stability(ref, r, 2, Granularity.COARSE)
        assert s.exact == _brute_force(ref, r)
        assert s.value >= s.exact
        rule_failed += not s.census_rule_holds
    # random hierarchies where alone and combination groups differ do break the rule
    assert rule_failed > 0


def test_census_rule_assumption_can_fail() -> None:
    """Alone group {a, b} but combination groups {a}, {b}: the record {a, b} is in 3 groups,
    while h_r * max(2, r) + h_e = 1 * 2 + 0 = 2. The exact value is used then."""
    its = {
        "0001": _iteration("0001", IterationKind.RACE, True, {1000, 1001}),
        "0002": _iteration("0002", IterationKind.RACE, False, {1000}),
        "0003": _iteration("0003", IterationKind.RACE, False, {1001}),
    }
    ref = ReferenceData(codes={1000: "a", 1001: "b"}, iterations=its, source="test")
    s = level_stability(ref, 2, 2, Granularity.COARSE)
    assert (s.census_rule, s.exact, s.value) == (2, 3, 3)
    assert not s.census_rule_holds
    assert len(iterations_of(ref, [1000, 1001], 1000, 2, Granularity.COARSE)) == 3


def test_invalid_arguments(ref: ReferenceData) -> None:
    with pytest.raises(ValueError, match="max_race_codes"):
        level_stability(ref, 0, 2, Granularity.COARSE)
