"""The exact accuracy report: probabilities against Monte Carlo (10⁵ draws per n) and the
simulation against the exact figures, both within Bernstein's bound (false failure ≤ 10⁻⁶
per comparison; for large counts about 5.4 standard errors, i.e. the 4-s.e. criterion with
a guarantee that also holds for rare events); against an independent scipy computation of
the CDFs to 10⁻⁹; the MOEs against ``privtab analyze ci``'s exact laws."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.special import logsumexp
from scipy.stats import dlaplace
from typer.testing import CliRunner

from privtab.cli import app
from privtab.data import Scope, load_inputs, production_config_dir, read_config, read_reference
from privtab.random import SeededSource
from privtab.tabulate import ReleasePlan
from privtab.tabulate.accuracy import (
    WORKLOADS,
    LevelAccuracy,
    bucket_label,
    level_accuracy,
    size_bucket,
)
from privtab.tabulate.accuracy_report import build_accuracy, write_accuracy

# private on purpose: the accumulator of the simulation (its streaming 95th percentile) is
# tested directly; it has no public use of its own
from privtab.tabulate.accuracy_sim import _Accumulator
from privtab.tabulate.plan import LevelPlan

DRAWS = 100_000
CHANCE = Fraction(9999, 10000)


def production(key: str, scope: Scope = Scope.US) -> LevelPlan:
    d = production_config_dir()
    cfg = read_config(d / "config.json")
    return ReleasePlan.from_config(cfg, read_reference(d), scope).level(key)


def geometric_plan() -> LevelPlan:
    return LevelPlan.build(
        geo="COUNTY",
        iteration_level=2,
        privacy_defn="puredp",
        budget=Fraction(3, 2),
        gamma=Fraction(1, 10),
        thresholds=(30, 60, 120),
        stability=3,
        has_detailed_only=False,
    )


PLANS = {
    "dg-county-2": lambda: production("(COUNTY, 2)"),
    "dg-tract-1": lambda: production("(TRACT, 1)"),
    "geometric": geometric_plan,
}


def _grid(plan: LevelPlan) -> list[int]:
    t1, t2, t3 = plan.thresholds
    return sorted({0, 3, 15, 21, 30, t1 - 40, t1 - 1, t1, t1 + 25, t2 - 10, t2 + 10, t3, t3 + 50})


# ----------------------------------------------------------------------------- independent
def _scipy_cdf(plan: LevelPlan, stage: str):
    """An independent CDF of a stage's noise: scipy's dlaplace, or the discrete Gaussian
    normalised with scipy's logsumexp over ±60σ."""
    sp = getattr(plan, stage)
    if plan.privacy_defn == "puredp":
        a = float(sp.parameter)  # pmf ∝ e^{−ε|x|}
        return lambda x: dlaplace.cdf(np.asarray(x), a)
    s2 = 1.0 / (2.0 * float(sp.parameter))
    k = int(60 * np.sqrt(s2)) + 60
    xs = np.arange(-k, k + 1)
    logw = -(xs.astype(float) ** 2) / (2 * s2)
    cdf = np.cumsum(np.exp(logw - logsumexp(logw)))

    def f(x):
        i = np.asarray(x) + k
        return np.where(i < 0, 0.0, cdf[np.clip(i, 0, 2 * k)])

    return f


@pytest.mark.parametrize("name", list(PLANS))
def test_probabilities_match_scipy(name: str) -> None:
    plan = PLANS[name]()
    acc = level_accuracy(plan, CHANCE)
    f1, f2 = _scipy_cdf(plan, "stage1"), _scipy_cdf(plan, "stage2")
    n = np.array(_grid(plan))
    th = plan.thresholds
    below = np.stack([f1(t - n - 1) for t in th], axis=1)
    want = np.diff(np.concatenate([np.zeros((n.size, 1)), below, np.ones((n.size, 1))], 1), axis=1)
    assert np.abs(acc.p_workload(n) - want).max() < 1e-9
    t = acc.rule.stage2_total
    assert t is not None
    assert np.abs(acc.p_suppressed(n) - want[:, 0] * f2(t - n)).max() < 1e-9
    # the rows sum to one; the threshold is where scipy's CDF first reaches the chance
    assert np.allclose(acc.p_workload(n).sum(axis=1), 1.0, atol=1e-12)
    assert f2(t) >= float(CHANCE) > f2(t - 1)


@pytest.mark.parametrize("name", list(PLANS))
def test_probabilities_match_monte_carlo(name: str) -> None:
    plan = PLANS[name]()
    acc = level_accuracy(plan, CHANCE)
    src = SeededSource(f"accuracy-mc-{name}")
    e1 = plan.stage1.mechanism.sample_noise(DRAWS, source=src)
    e2 = plan.stage2.mechanism.sample_noise(DRAWS, source=src)
    t = acc.rule.stage2_total
    assert t is not None
    checked = 0
    for n in _grid(plan):
        level = np.digitize(n + e1, plan.thresholds)  # production's np.digitize
        p = acc.p_workload([n])[0]
        for k in range(4):
            got = float(np.mean(level == k))
            tol = bernstein(DRAWS * p[k] * (1 - p[k])) / DRAWS
            assert abs(got - p[k]) <= tol, (n, WORKLOADS[k], got, p[k])
            checked += 1e-3 < p[k] < 1 - 1e-3
        sup = float(np.mean((level == 0) & (n + e2 <= t)))
        ps = float(acc.p_suppressed([n])[0])
        assert abs(sup - ps) <= bernstein(DRAWS * ps * (1 - ps)) / DRAWS, (n, sup, ps)
    assert checked >= 10  # the comparisons that can fail: probabilities not at 0 or 1


def test_moes_agree_with_analyze_ci() -> None:
    """MOE of T1 per workload, of a cell and of a sex marginal = the exact MOE that
    ``privtab analyze ci`` computes for a row with that noise (add_intervals)."""
    from privtab.analysis import add_intervals

    for name, make in PLANS.items():
        plan = make()
        acc = level_accuracy(plan, CHANCE)
        sp = plan.stage2
        var = sp.mechanism.variance
        rows = [("total", 1)] + [(w, c) for w, c in zip(WORKLOADS[1:], (8, 18, 46), strict=True)]
        rows += [(f"marginal-{w}", c // 2) for w, c in zip(WORKLOADS[1:], (8, 18, 46), strict=True)]
        df = pl.DataFrame(
            {
                "COUNT": [0] * len(rows),
                "NOISE": [sp.noise] * len(rows),
                "NOISE_SCALE": [sp.noise_scale] * len(rows),
                "VARIANCE": [var * k for _, k in rows],
            }
        )
        ci = add_intervals(df, 0.95)["MOE95"].to_list()
        want = [acc.moe95["t1"][w] for w in WORKLOADS]
        want += [acc.moe95["t2_marginal"][w] for w in WORKLOADS[1:]]
        assert ci == want, name
        assert acc.moe95["t2_cell"] == ci[0]
        # every outcome's MOE is reported with its probability; no average of MOEs
        n = np.array(_grid(plan))
        for r, pw in zip(acc.rows(n), acc.p_workload(n), strict=True):
            assert [r["moe95_t1"][w]["moe95"] for w in WORKLOADS] == want[:4]
            assert [r["moe95_t1"][w]["p"] for w in WORKLOADS] == pytest.approx(pw.tolist())


def _mixture_quantile_by_convolution(sigma2: float, p: np.ndarray) -> int:
    """The 0.95-quantile of |E| for E a mixture (weights ``p``) of the sums of 1, 8, 18
    and 46 i.i.d. discrete Gaussians N_Z(σ²): pmfs by direct summation and repeated
    numpy convolution (independent of privtab's laws and FFT)."""
    half = int(12 * np.sqrt(sigma2)) + 12
    x = np.arange(-half, half + 1)
    one = np.exp(-(x * x) / (2 * sigma2))
    one /= one.sum()
    covers = []
    for k in (1, 8, 18, 46):
        pmf = one
        for _ in range(k - 1):
            pmf = np.convolve(pmf, one)
        c = (pmf.size - 1) // 2
        covers.append(np.array([pmf[c - m : c + m + 1].sum() for m in range(0, 12 * c // k + 40)]))
    top = min(c.size for c in covers)
    mix = sum(w * c[:top] for w, c in zip(p, covers, strict=True))
    return int(np.flatnonzero(mix >= 0.95)[0])


def test_the_t1_moe_of_an_unknown_outcome_is_the_mixture_quantile() -> None:
    """Issue 31: ``moe95_t1`` was Σ_w P(w | n)·MOE(w) — 21.2 at the first threshold of
    (COUNTY, 2), the margin of error of nothing. The one number is now the 0.95-quantile
    of the mixture (named ``moe95_t1_mixture``), checked here against an independent
    convolution; where one outcome is certain it is that outcome's MOE."""
    plan = production("(COUNTY, 2)")
    acc = level_accuracy(plan, CHANCE)
    sigma2 = float(plan.stage2.noise_scale)
    n = np.array([0, 960, 971, 985, 1000, 4971, 100_000])
    got = acc.moe95_t1_mixture(n)
    pw = acc.p_workload(n)
    for i, nv in enumerate(n.tolist()):
        assert got[i] == _mixture_quantile_by_convolution(sigma2, pw[i]), nv
    at = int(np.flatnonzero(n == 971)[0])
    average = float(pw[at] @ np.array([acc.moe95["t1"][w] for w in WORKLOADS]))
    assert 0.4 < pw[at][0] < 0.6
    assert got[at] != round(average)
    assert got[0] == acc.moe95["t1"]["total"]
    assert got[-1] == acc.moe95["t1"]["sex_age23"]


def test_expected_rows_and_total_only() -> None:
    acc = level_accuracy(production("(STATE, 2)"), CHANCE)
    assert not acc.rule.active  # states are never suppressed
    assert acc.total_only
    r1, r2 = acc.expected_rows([0, 100_000])
    assert r1.tolist() == [1.0, 1.0]
    assert r2[0] == 0.0
    assert r2[1] == pytest.approx(48.0)  # Sex × Age23: 46 cells + 2 marginals
    row = acc.rows([5])[0]
    assert row["total_only"] == {"moe95_t1": acc.moe95["total_only"], "p_suppressed": 0.0}
    assert row["moe95_t1_mixture"] == acc.moe95["t1"]["total"]
    county = level_accuracy(production("(COUNTY, 2)"), CHANCE)
    assert "total_only" not in county.rows([5])[0]


def test_size_buckets_and_quantile() -> None:
    assert size_bucket([0, 1, 2, 10, 11, 100, 101, 10**6]).tolist() == [0, 0, 1, 1, 2, 2, 3, 6]
    assert [bucket_label(j) for j in range(3)] == ["[0, 1]", "(1, 10]", "(10, 100]"]
    rng = np.random.default_rng(1)
    for size in (1, 2, 7, 1000):
        x = rng.integers(0, 40, size=size)
        a = _Accumulator()
        a.add_errors(x[: size // 2], 10)
        a.add_errors(x[size // 2 :], 10)
        assert a.quantile(0.95) == pytest.approx(float(np.quantile(x, 0.95)))
        assert a.within == int((x <= 10).sum())


# ----------------------------------------------------------------------------- CLI
def test_cli_contract() -> None:
    res = CliRunner().invoke(
        app,
        ["safetab", "accuracy", "--level", "(COUNTY, 2)", "--n", "0,10,100,1000,10000", "--json"],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    (lv,) = doc["levels"]
    assert lv["level"] == "(COUNTY, 2)"
    assert [r["n"] for r in lv["rows"]] == [0, 10, 100, 1000, 10000]
    for r in lv["rows"]:
        assert set(r["p_workload"]) == {"total", "sex_age4", "sex_age9", "sex_age23"}
        assert 0 <= r["p_suppressed"] <= 1
        assert set(r["moe95_t1"]) == set(r["p_workload"])
        assert all(v["moe95"] > 0 for v in r["moe95_t1"].values())
        assert r["moe95_t1_mixture"] > 0
    assert lv["rows"][0]["p_suppressed"] > 0.9999  # a group of size 0: dropped at 0.9999+
    assert lv["suppression"]["threshold_stage2_total"] == 21
    assert doc["private"] is True
    bad = CliRunner().invoke(app, ["safetab", "accuracy", "--level", "(MARS, 2)"])
    assert bad.exit_code == 2
    assert "no level" in bad.output


# ----------------------------------------------------------------------------- simulation
ALPHA = 1e-6
"""False-failure probability of one simulated-vs-exact comparison (Bernstein's bound)."""


def bernstein(variance: float, alpha: float = ALPHA) -> float:
    """t with P(|X − E X| ≥ t) ≤ alpha for a sum X of independent variables in [0, 1] with
    the given variance (Bernstein: exp(−t²/(2(v + t/3))) per side). Unlike 4 normal
    standard errors it holds for rare events too (an expected 0.01 observed once)."""
    lg = np.log(2 / alpha)
    return float((2 * lg / 3 + np.sqrt(4 * lg * lg / 9 + 8 * lg * variance)) / 2)


def _check_sim_against_exact(sims: list, min_checked: int) -> None:
    """Every simulated count (selections, suppressions, statistics within the exact MOE)
    within Bernstein's bound of its exact expectation; with a few hundred comparisons the
    false-failure rate is below 10⁻³. Power: a shift of ~5.4 standard errors fails."""
    checked = 0
    for sim in sims:
        assert sim.rows, sim.level
        for r in sim.rows:
            for what in ("selected", "suppressed", "within"):
                got, exp, se = r[f"{what}_simulated"], r[f"{what}_exact"], r[f"{what}_se"]
                tol = bernstein(se * se)
                assert abs(got - exp) <= tol, (sim.level, r["bucket"], what, got, exp, se)
                checked += se > 3
            # the Bureau's empirical MOE95 is a 95th percentile: its agreement with the
            # exact MOE is what "within" tests with a known variance
            assert r["moe95_exact"] > 0
    assert checked >= min_checked


def test_simulation_agrees_with_exact(synth_small, tmp_path: Path) -> None:
    """A fast variant: 4 trials on 20,000 persons, a few levels with low thresholds (every
    workload occurs) and production's suppression."""
    config, data = synth_small
    raw = json.loads(config.read_text())
    raw["thresholds_p"] = {k: [5, 20, 60] for k in raw["thresholds_p"]}
    params = config.parent
    (params / "config-low.json").write_text(json.dumps(raw))
    inputs = load_inputs(params / "config-low.json", data)
    plans = {s.value: ReleasePlan.from_config(inputs.config, inputs.reference, s)
             for s in inputs.config.scopes}  # fmt: skip
    rep = build_accuracy(
        plans,
        inputs.config.zero_suppression_chance,
        levels=["(COUNTY, 2)", "(STATE, 1)", "(PR-TRACT, 2)"],
        inputs=inputs,
        trials=4,
        seed=3,
    )
    _check_sim_against_exact(rep.simulations, 8)
    workloads = {r["workload"] for s in rep.simulations for r in s.rows if r["selected_simulated"]}
    assert workloads == {"total_only", "total", "sex_age4", "sex_age9", "sex_age23"}
    assert any(r["suppressed_simulated"] > 0 for s in rep.simulations for r in s.rows)
    # the exact figures on the input's sizes: one row per distinct size, with its groups
    lv = rep.levels[0]
    assert sum(r["groups"] for r in lv["rows"]) == lv["input"]["groups"]
    files = write_accuracy(rep, tmp_path / "acc")
    names = {p.name for p in files}
    assert {"accuracy.json", "accuracy.html", "NOT_PRIVATE"} <= names
    assert "simulation-us-county-2.csv" in names
    assert "exact-pr-pr-tract-2.csv" in names
    html = (tmp_path / "acc" / "accuracy.html").read_text()
    assert html.count("<img") >= 3
    assert "NOT PRIVATE" in html
    doc = json.loads((tmp_path / "acc" / "accuracy.json").read_text())
    assert doc["private"] is False
    assert doc["simulation"][0]["buckets"][0]["selected_exact"] >= 0


@pytest.mark.slow
def test_simulation_agrees_with_exact_100k(tmp_path: Path) -> None:
    """The acceptance run: 20 trials on 10⁵ synthetic persons, every level (Oklahoma for
    its AIANNH areas: the synthetic DE, RI and VT have none), production parameters
    (thresholds lowered so that every workload occurs at this scale)."""
    from privtab.data.synth import synthesize
    from tests.tabulate.conftest import demo_params

    states = ["10", "40", "50", "72"]
    synthesize(tmp_path / "data", 100_000, states=states, seed=5)
    config = demo_params(tmp_path / "params", states)
    raw = json.loads(config.read_text())
    raw["thresholds_p"] = {k: [20, 100, 400] for k in raw["thresholds_p"]}
    config.write_text(json.dumps(raw))
    inputs = load_inputs(config, tmp_path / "data")
    plans = {s.value: ReleasePlan.from_config(inputs.config, inputs.reference, s)
             for s in inputs.config.scopes}  # fmt: skip
    rep = build_accuracy(
        plans, inputs.config.zero_suppression_chance, inputs=inputs, trials=20, seed=1
    )
    _check_sim_against_exact(rep.simulations, 100)


def test_level_accuracy_is_public(tmp_path: Path) -> None:
    """Without data the report reads nothing confidential: private, no marker."""
    d = production_config_dir()
    cfg = read_config(d / "config.json")
    plans = {"US": ReleasePlan.from_config(cfg, read_reference(d), Scope.US)}
    rep = build_accuracy(plans, cfg.zero_suppression_chance, levels=["(TRACT, 1)"])
    assert rep.private
    files = write_accuracy(rep, tmp_path / "acc")
    assert "NOT_PRIVATE" not in {p.name for p in files}
    assert isinstance(rep.accuracies[0], LevelAccuracy)
