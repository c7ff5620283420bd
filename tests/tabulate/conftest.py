"""Fixtures for the SafeTab engine tests: a small synthetic nation and an independent
reference implementation of the exact tabulation (plain Python over person rows)."""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest

from privtab.data import GeoLevel, ReferenceData, Scope, production_config_dir, read_reference
from privtab.data.iterations import IterationKind
from privtab.data.levels import Granularity

SYNTH_STATES = ["10", "44", "72"]  # DE, RI, PR: every US and PR level, small domains


def demo_params(directory: Path, states: list[str], **overrides: object) -> Path:
    """A copy of the production parameters with ``state_filter_us`` = the US ``states``."""
    directory.mkdir(parents=True, exist_ok=True)
    for f in production_config_dir().iterdir():
        if f.is_file():
            shutil.copy(f, directory / f.name)
            (directory / f.name).chmod(0o644)
    cfg = json.loads((directory / "config.json").read_text())
    cfg["state_filter_us"] = [s for s in states if s != "72"]
    cfg["run_pr"] = "72" in states
    cfg.update(overrides)
    (directory / "config.json").write_text(json.dumps(cfg))
    return directory / "config.json"


@pytest.fixture(scope="session")
def ref() -> ReferenceData:
    return read_reference(production_config_dir())


@pytest.fixture(scope="session")
def synth_small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(config.json, data dir) of 20,000 synthetic persons in DE, RI and PR."""
    from privtab.data.synth import synthesize

    root = tmp_path_factory.mktemp("synth-small")
    synthesize(root / "data", 20_000, states=SYNTH_STATES, seed=11)
    # no AIANNH area, by construction (whether the generator draws one in RI is chance):
    # the AIANNH level's domain is empty, so the tests see a level skipped and not charged
    grfc = pl.read_csv(root / "data" / "GRF-C.txt", separator="|", infer_schema=False)
    grfc = grfc.with_columns(pl.lit("9999").alias("AIANNHCE"))
    grfc.write_csv(root / "data" / "GRF-C.txt", separator="|", quote_style="never")
    return demo_params(root / "params", SYNTH_STATES), root / "data"


# --------------------------------------------------------------------------------------
# the independent reference implementation


@dataclass
class Truth:
    t1: dict[tuple[str, str, str], int]
    """(REGION_TYPE, REGION_ID, ITERATION_CODE) → persons."""
    ages: dict[tuple[str, str, str, int, int], int]
    """(REGION_TYPE, REGION_ID, ITERATION_CODE, sex, age) → persons."""
    domains: dict[str, set[str]]


def _regions(row: dict[str, str], us_states: set[str]) -> Iterator[tuple[GeoLevel, str]]:
    st, cou, tr = row["TABBLKST"], row["TABBLKCOU"], row["TABTRACTCE"]
    place, aiannh = row["PLACEFP"], row["AIANNHCE"]
    if st in us_states:
        yield GeoLevel.USA, "1"
        yield GeoLevel.STATE, st
        yield GeoLevel.COUNTY, st + cou
        yield GeoLevel.TRACT, st + cou + tr
        if place != "99999":
            yield GeoLevel.PLACE, st + place
        if aiannh != "9999":
            yield GeoLevel.AIANNH, aiannh
    elif st == "72":
        yield GeoLevel.PR_STATE, st
        yield GeoLevel.PR_COUNTY, st + cou
        yield GeoLevel.PR_TRACT, st + cou + tr
        if place != "99999":
            yield GeoLevel.PR_PLACE, st + place


def reference_tabulation(
    data: Path, ref: ReferenceData, us_states: list[str], scopes: list[Scope]
) -> Truth:
    """Exact T1/T2 counts straight from the definitions (DESIGN.md §3), person by person."""
    levels = {Scope.US: (1, 2), Scope.PR: (1, 2)}
    blocks: dict[str, dict[str, str]] = {}
    domains: dict[str, set[str]] = defaultdict(set)
    us = {s for s in us_states if s != "72"}
    with (data / "GRF-C.txt").open() as fh:
        for row in csv.DictReader(fh, delimiter="|"):
            key = row["TABBLKST"] + row["TABBLKCOU"] + row["TABTRACTCE"] + row["TABBLK"]
            blocks[key] = row
            for geo, region in _regions(row, us):
                domains[geo.value].add(region)
    members: dict[tuple[frozenset[int], int, int, Granularity], list[str]] = {}
    # each level's iterations as plain tuples (code, ethnicity?, alone?, codes), read once
    selected: dict[tuple[int, Granularity], list[tuple[str, bool, bool, frozenset[int]]]] = {}

    def iterations(codes: frozenset[int], eth: int, lv: int, gran: Granularity) -> list[str]:
        key = (codes, eth, lv, gran)
        if key not in members:
            if (lv, gran) not in selected:
                selected[(lv, gran)] = [
                    (it.code, it.kind is IterationKind.ETHNICITY, bool(it.alone), it.codes)
                    for it in ref.select(lv, gran)
                ]
            out = []
            for code, ethnic, alone, it_codes in selected[(lv, gran)]:
                if ethnic:
                    ok = eth in it_codes
                elif alone:
                    ok = codes <= it_codes
                else:
                    ok = bool(codes & it_codes)
                if ok:
                    out.append(code)
            members[key] = out
        return members[key]

    # persons with the same block, codes, ethnicity, sex and age count alike: count them once
    people: Counter[tuple[str, frozenset[int], int, int, int]] = Counter()
    with (data / "person-records.txt").open() as fh:
        for row in csv.DictReader(fh, delimiter="|"):
            codes = frozenset(
                int(row[f"QRACE{i}"]) for i in range(1, 9) if row[f"QRACE{i}"] != "Null"
            )
            block = row["TABBLKST"] + row["TABBLKCOU"] + row["TABTRACTCE"] + row["TABBLK"]
            people[(block, codes, int(row["QSPAN"]), int(row["QSEX"]), int(row["QAGE"]))] += 1
    t1: dict[tuple[str, str, str], int] = defaultdict(int)
    ages: dict[tuple[str, str, str, int, int], int] = defaultdict(int)
    for (block, codes, eth, sex, age), n in people.items():
        for geo, region in _regions(blocks[block], us):
            if geo.scope not in scopes:
                continue
            for lv in levels[geo.scope]:
                for it in iterations(codes, eth, lv, geo.granularity):
                    t1[(geo.value, region, it)] += n
                    ages[(geo.value, region, it, sex, age)] += n
    return Truth(dict(t1), dict(ages), dict(domains))


class CoveragePool:
    """Pools the non-private evaluation of repeated seeded runs per (level, kind) and checks
    the error model: mean error ≈ 0 and coverage of the exact MOE95 at its exact rate,
    within 6 binomial standard errors (bounded false-failure rate)."""

    def __init__(self) -> None:
        self.pooled: dict[str, list[float]] = {}

    def add(self, levels: list) -> None:
        import math

        for lv in levels:
            for kind, ev in lv.evaluation.items():
                if ev.get("count", 0) == 0:
                    continue
                acc = self.pooled.setdefault(f"{lv.plan.key}:{kind}", [0.0, 0.0, 0.0])
                acc[0] += ev["within_moe95"] * ev["count"]
                acc[1] += ev["expected_within_moe95"] * ev["count"]
                acc[2] += ev["count"]
                assert abs(ev["mean_error"]) < 8 * ev["expected_rmse"] / math.sqrt(ev["count"])

    def check(self, min_checked: int) -> None:
        import math

        checked = 0
        for name, (got, exp, n) in self.pooled.items():
            p = exp / n
            assert p >= 0.95 - 1e-9, name
            if n >= 2000:
                se = math.sqrt(p * (1 - p) / n)
                assert abs(got / n - p) <= 6 * se, (name, got / n, p, n)
                checked += 1
        assert checked >= min_checked


# --------------------------------------------------------------------------------------
# reading a release (the Census layout joined with its companion error tables)


def release_tables(out: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A release's T1 and T2 *cells* with every companion column (``load_release``); the
    sex marginals (``AGESTART = AGEEND = *``) are left out of T2 (see
    :func:`release_marginals`)."""
    from privtab.analysis import load_release

    rel = load_release(out)
    return rel.t1, rel.t2.filter(pl.col("AGESTART") != "*")


def release_marginals(out: Path) -> pl.DataFrame:
    from privtab.analysis import load_release

    return load_release(out).t2.filter(pl.col("AGESTART") == "*")


def without_suppression(config: Path, directory: Path) -> Path:
    """A copy of ``config``'s parameters folder whose config has no
    ``zero_suppression_chance`` (every group of the public domain is published)."""
    shutil.copytree(config.parent, directory)
    path = directory / config.name
    raw = json.loads(path.read_text())
    raw.pop("zero_suppression_chance", None)
    path.write_text(json.dumps(raw))
    return path
