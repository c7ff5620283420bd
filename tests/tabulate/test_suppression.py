"""Production's zero suppression: exact thresholds and exactly the right rows dropped.

Independent references: the thresholds from an mpmath summation of the discrete Gaussian
pmf (σ² computed from the config's numbers here, not by privtab's plan) and from scipy's
discrete Laplace CDF; the rule re-implemented in plain Python from the production code's
description (``safetab_p_analytics.py``: stage-2 totals and TotalOnly totals at every
REGION_TYPE but USA, STATE and PR-STATE, dropped when COUNT ≤ threshold).
"""

from __future__ import annotations

import json
from fractions import Fraction
from functools import cache

import numpy as np
import polars as pl
import pytest
from mpmath import mp, mpf

from privtab.data import Scope, load_inputs, production_config_dir, read_config, read_reference
from privtab.mechanisms import DiscreteGaussian, Geometric
from privtab.tabulate import ReleasePlan
from privtab.tabulate.suppression import (
    SuppressionRule,
    suppress,
    suppression_mask,
    suppression_rule,
    suppression_threshold,
)
from tests.tabulate._census import engine_levels, write_census_release


@cache
def dg_threshold(sigma2: Fraction, chance: Fraction) -> int:
    """Smallest t with Σ_{x ≤ t} e^{−x²/2σ²} / Z ≥ chance, by direct mpmath summation."""
    with mp.workdps(60):
        s2 = mpf(sigma2.numerator) / sigma2.denominator
        bound = int(60 * float(s2) ** 0.5) + 60
        w = [mp.exp(-mpf(x * x) / (2 * s2)) for x in range(-bound, bound + 1)]
        z = mp.fsum(w)
        c = mpf(chance.numerator) / chance.denominator
        acc = mpf(0)
        for i, wx in enumerate(w):
            acc += wx
            if acc / z >= c:
                return i - bound
    raise AssertionError("not reached")


def production_sigma2(key: str) -> Fraction:
    """σ² of a stage-2 count of a level, from config.json's own numbers: ρ = b·(1−γ)/s."""
    raw = json.loads((production_config_dir() / "config.json").read_text())
    cfg = read_config(production_config_dir() / "config.json")
    plan = ReleasePlan.from_config(cfg, read_reference(production_config_dir()), Scope.US)
    geo, lv = key.strip("()").split(", ")
    budget = Fraction(str(raw[f"privacy_budget_p_level_{lv}_{geo.lower()}"]))
    gamma = Fraction(str(raw["privacy_budget_p_stage_1_fraction"]))
    rho = budget * (1 - gamma) / plan.level(key).stability
    return 1 / (2 * rho)


def test_production_thresholds_are_21_and_93() -> None:
    cfg = read_config(production_config_dir() / "config.json")
    assert cfg.zero_suppression_chance == Fraction(9999, 10000)
    ref = read_reference(production_config_dir())
    expected = {1: 93, 2: 21}
    checked = 0
    for scope in cfg.scopes:
        for lv in ReleasePlan.from_config(cfg, ref, scope).levels:
            rule = suppression_rule(lv, cfg.zero_suppression_chance)
            if lv.geo in ("USA", "STATE", "PR-STATE"):
                assert not rule.active
                continue
            assert rule.stage2_total == expected[lv.iteration_level], lv.key
            assert rule.total_only is None  # coarse geographies hold no TotalOnly groups
            checked += 1
    assert checked == 13  # 7 US + 6 PR sub-state levels ((AIANNH, 1) has no budget)
    # the independent computation
    for key, t in (("(COUNTY, 2)", 21), ("(TRACT, 1)", 93)):
        assert dg_threshold(production_sigma2(key), Fraction(9999, 10000)) == t


@pytest.mark.parametrize(
    ("sigma2", "chance"),
    [
        (Fraction(1, 2), Fraction(9, 10)),
        (Fraction(7, 3), Fraction(9999, 10000)),
        (Fraction(625), Fraction(1, 2)),
        (Fraction(625), Fraction(999, 1000)),
        (Fraction(3000, 7), Fraction(99999, 100000)),
        (Fraction(10), Fraction(1, 10)),  # below the median: a negative threshold
    ],
)
def test_discrete_gaussian_threshold_matches_mpmath(sigma2: Fraction, chance: Fraction) -> None:
    mech = DiscreteGaussian.from_sigma2(sigma2)
    assert suppression_threshold(mech, chance) == dg_threshold(sigma2, chance)


NINES_20 = 1 - Fraction(1, 10**20)
"""``0.99999999999999999999``: a documented-exact chance that no float can hold (issue 31:
``float(chance)`` is 1.0, whose quantile does not exist — the run was a traceback)."""


@pytest.mark.parametrize(
    ("sigma2", "chance"),
    [
        (Fraction(7, 3), NINES_20),
        (Fraction(283), NINES_20),
        (Fraction(3000, 7), 1 - Fraction(1, 10**39)),
        (Fraction(10), Fraction(1, 10**20)),  # far below the median
    ],
)
def test_threshold_of_a_chance_no_float_holds(sigma2: Fraction, chance: Fraction) -> None:
    mech = DiscreteGaussian.from_sigma2(sigma2)
    assert suppression_threshold(mech, chance) == dg_threshold(sigma2, chance)


@pytest.mark.parametrize("scale", [Fraction(7, 2), Fraction(10**6)])
def test_geometric_threshold_of_a_chance_no_float_holds(scale: Fraction) -> None:
    """DLap(t): P(X ≤ x) = 1 − r^{x+1}/(1+r) for x ≥ 0 (r = e^{−1/t}): the smallest such x
    with 1 − c ≥ r^{x+1}/(1+r), solved with mpmath at 60 digits."""
    mech = Geometric(1 / scale)
    with mp.workdps(60):
        r = mp.exp(-1 / (mpf(scale.numerator) / scale.denominator))
        expected = int(mp.ceil(mp.log((mpf(1) / 10**20) * (1 + r)) / mp.log(r))) - 1
    assert suppression_threshold(mech, NINES_20) == expected


@pytest.mark.parametrize("epsilon", [0.05, 0.3, 1.0, 2.5])
@pytest.mark.parametrize("chance", [0.5, 0.9, 0.9999, 0.2])
def test_geometric_threshold_matches_scipy(epsilon: float, chance: float) -> None:
    from scipy.stats import dlaplace

    mech = Geometric(epsilon)
    t = suppression_threshold(mech, chance)
    assert t is not None
    a = float(mech.epsilon_exact)
    # smallest t with CDF(t) ≥ chance (scipy's float CDF far from the boundary here)
    assert dlaplace.cdf(t, a) >= chance - 1e-12
    assert dlaplace.cdf(t - 1, a) < chance + 1e-12
    assert abs(dlaplace.cdf(t, a) - chance) > 1e-9 or abs(dlaplace.cdf(t - 1, a) - chance) > 1e-9


def test_threshold_off_and_noise_off() -> None:
    mech = DiscreteGaussian.from_sigma2(Fraction(625))
    assert suppression_threshold(mech, 0) is None
    assert suppression_threshold(mech, None) is None
    assert suppression_threshold(mech, 0.9999, noise_on=False) == 0  # production: noise off
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        suppression_threshold(mech, 1)
    # a float chance is read as its decimal: 0.9999 is 9999/10000
    assert suppression_threshold(mech, 0.9999) == suppression_threshold(mech, Fraction(9999, 10000))


def test_mask_and_suppress_on_a_frame() -> None:
    rule = SuppressionRule("(COUNTY, 2)", "COUNTY", Fraction(9999, 10000), 21, 20)
    counts = np.array([21, 22, -5, 21, 20, 21, 100])
    stat = np.array([0, 0, 0, 1, -1, -1, 0])
    assert suppression_mask(counts, stat, rule).tolist() == [
        True, False, True, False, True, False, False,
    ]  # fmt: skip
    t1 = pl.DataFrame(
        {"REGION_TYPE": ["COUNTY"] * 7, "COUNT": counts, "STAT_LEVEL": stat.astype(np.int8)}
    )
    res = suppress(t1, rule)
    assert res.removed == 3
    assert res.t1["COUNT"].to_list() == [22, 21, 21, 100]
    with pytest.raises(ValueError, match="REGION_TYPE"):
        suppress(t1.with_columns(pl.lit("TRACT").alias("REGION_TYPE")), rule)
    off = SuppressionRule("(STATE, 2)", "STATE", Fraction(9999, 10000), None, None)
    assert suppress(t1, off).removed == 0


# ----------------------------------------------------------------------------- the rule
def plain_production_rule(config_json: dict, rows: list[dict], sigma2: dict) -> set[tuple]:
    """The rows production keeps, written from its description (plain Python)."""
    kept = set()
    given = "zero_suppression_chance" in config_json
    chance = Fraction(str(config_json["zero_suppression_chance"])) if given else Fraction(0)
    threshold: dict[str, int] = {}  # one per kind of row: every row of a kind has its σ²
    for r in rows:
        key = (r["REGION_ID"], r["REGION_TYPE"], r["ITERATION_CODE"])
        drop = False
        below_state = r["REGION_TYPE"] not in ("USA", "STATE", "PR-STATE")
        if given and below_state and chance != 0 and r["STAT_LEVEL"] in (0, -1):
            kind = "stage2" if r["STAT_LEVEL"] == 0 else "total"
            if kind not in threshold:
                threshold[kind] = dg_threshold(sigma2[kind], chance)
            drop = r["COUNT"] <= threshold[kind]
        if not drop:
            kept.add(key)
    return kept


def _published_t1(out) -> dict[tuple, int]:
    from privtab.tabulate.output import read_census_table

    t1 = read_census_table(out, "t1")
    assert t1 is not None
    return {(a, b, c): n for a, b, c, n in t1.iter_rows()}


@pytest.fixture(scope="module")
def raw_levels_17(synth_small) -> list:
    """The engine's raw levels of seed 17 (chance and clamping apply after the engine: one
    tabulation serves both cases of the test below)."""
    config, data = synth_small
    return list(engine_levels(load_inputs(config, data), seed=17))


@pytest.mark.parametrize(("chance", "clamp"), [("config", None), (0.3, True)])
def test_release_drops_exactly_the_production_rows(
    synth_small, raw_levels_17, tmp_path, chance, clamp
) -> None:
    """A seeded release (the real run) of 20,000 synthetic persons: its published T1 rows
    are exactly those the plain-Python rule keeps on the raw draws of the same seed, with
    the raw count (clamped at 0 when asked: production clamps after suppressing). Chance
    0.3 with clamping gives negative thresholds: rows are dropped that clamping alone would
    have shown as 0."""
    import shutil

    config, data = synth_small
    params = tmp_path / "params"
    shutil.copytree(config.parent, params)
    config = params / "config.json"
    out = tmp_path / "release"
    _, removed = write_census_release(config, data, out, seed=17, chance=chance, nonnegative=clamp)
    raw = json.loads(config.read_text())
    assert raw["allow_negative_counts"] is True  # the production config: clamp only if asked
    want: dict[tuple, int] = {}
    dropped = kept_small = 0
    for lv in raw_levels_17:
        sigma2 = {
            "stage2": Fraction(1) / (2 * lv.plan.stage2.parameter),
            "total": Fraction(1) / (2 * lv.plan.total.parameter),
        }
        rows = lv.t1.to_dicts()
        kept = plain_production_rule(raw, rows, sigma2)
        dropped += len(rows) - len(kept)
        for r in rows:
            key = (r["REGION_ID"], r["REGION_TYPE"], r["ITERATION_CODE"])
            if key in kept:
                want[key] = max(r["COUNT"], 0) if clamp else r["COUNT"]
                kept_small += r["STAT_LEVEL"] == 0 and 0 < r["COUNT"] <= 40
    got = _published_t1(out)
    assert got.keys() == want.keys()
    assert got == want
    assert removed == dropped
    assert dropped > 1000
    assert kept_small > 0
    doc = json.loads((out / "release.json").read_text())
    levels = [lv for run in doc["runs"].values() for lv in run["levels"] if "t1_rows" in lv]
    assert sum(lv["zero_suppression"]["suppressed_rows"] for lv in levels) == removed
    if chance == 0.3:
        negative = [
            lv for lv in levels if (lv["zero_suppression"]["threshold_stage2_total"] or 0) < 0
        ]
        assert negative
        assert all(n >= 0 for n in got.values())


def test_disabled_by_zero_chance_or_absent_key(synth_small) -> None:
    config, data = synth_small
    inputs = load_inputs(config, data)
    for lv in engine_levels(inputs, seed=3, levels=["(COUNTY, 2)"]):
        assert suppress(lv.t1, suppression_rule(lv.plan, 0)).removed == 0
        assert suppress(lv.t1, suppression_rule(lv.plan, None)).removed == 0
        assert suppress(lv.t1, suppression_rule(lv.plan, Fraction(9999, 10000))).removed > 0
