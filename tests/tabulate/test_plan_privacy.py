"""Release plans and their privacy analyses: the SafeTab paper's tables and the 2020 config.

Expected values: safetab-detailed-dhc-race-ethnicity.txt Tables 1, 2, 4 and App. F, as
recomputed independently in shared/seed-checks (ids 002.table4.*, 002.table2.*).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from privtab.accounting import ZCDP, PureDP, zcdp_epsilon
from privtab.data import Scope, production_config_dir, read_config, read_reference
from privtab.data.resources import production_config_path
from privtab.tabulate import LevelPlan, ReleasePlan, analyse
from privtab.tabulate.privacy import plan_rdp

MOES = [6, 6, 11, 11, 50, 50, 50]


@pytest.fixture(scope="module")
def paper_plans() -> tuple[ReleasePlan, ReleasePlan]:
    kw = {"stability": 9, "gamma": Fraction(1, 10), "calibration": "paper"}
    return (
        ReleasePlan.from_moe_targets(MOES, privacy_defn="puredp", **kw),  # type: ignore[arg-type]
        ReleasePlan.from_moe_targets(MOES, privacy_defn="zcdp", **kw),  # type: ignore[arg-type]
    )


def test_paper_table4_level_budgets(paper_plans) -> None:
    geo, dg = paper_plans
    expect_geo = {
        6: (4.279617533648558, 3.8516557802837026),
        11: (2.4964435612949925, 2.2467992051654933),
        50: (0.5873984850105864, 0.5286586365095278),
    }
    expect_dg = {
        6: (0.5333333333333333, 0.48),
        11: (0.15867768595041323, 0.1428099173553719),
        50: (0.00768, 0.006912),
    }
    for m, g, d in zip(MOES, geo.levels, dg.levels, strict=True):
        assert float(g.budget) == pytest.approx(expect_geo[m][0], rel=1e-12)
        assert float(g.stage2.parameter) * g.stability == pytest.approx(expect_geo[m][1], rel=1e-12)
        assert float(d.budget) == pytest.approx(expect_dg[m][0], rel=1e-12)
        assert float(d.stage2.parameter) * d.stability == pytest.approx(expect_dg[m][1], rel=1e-12)
    assert float(dg.total_budget) == pytest.approx(1.407062038567493, rel=1e-12)
    g = dg.guarantee()
    assert isinstance(g, ZCDP)
    assert g.rho == pytest.approx(1.407062038567493)
    assert isinstance(geo.guarantee(), PureDP)


def test_paper_table2_every_analysis(paper_plans) -> None:
    geo, dg = paper_plans
    a, b = analyse(geo, 1e-10), analyse(dg, 1e-10)
    assert a["pure"]["epsilon"] == pytest.approx(15.314317644918862, rel=1e-12)
    assert round(a["pure"]["epsilon"], 1) == 15.3
    # RDP with the exact divergence: 14.194 (the paper's printed 13.2 rests on its invalid Cor. 1)
    assert a["rdp"]["epsilon"] == pytest.approx(14.194, abs=5e-4)
    assert a["rdp_paper"]["epsilon"] == pytest.approx(13.574158124650571, abs=1e-8)
    assert a["rdp_paper"]["valid"] is False
    assert b["zcdp_analytic"]["epsilon"] == pytest.approx(12.791050926340219, abs=1e-9)
    assert b["zcdp_grid"]["epsilon"] == pytest.approx(12.162913471569961, abs=1e-9)
    assert b["zcdp_optimal"]["epsilon"] <= b["zcdp_grid"]["epsilon"]
    # the PLD analyses are tighter than every other valid one and bracket the exact value
    assert b["pld"]["lower"] <= b["pld"]["epsilon"] < b["zcdp_optimal"]["epsilon"]
    assert a["pld"]["lower"] <= a["pld"]["epsilon"] + 1e-6
    assert a["pld"]["epsilon"] < a["rdp"]["epsilon"] < a["pure"]["epsilon"]
    # the bracket [worst homogeneous configuration, either-of bound] is narrow
    assert b["pld"]["epsilon"] - b["pld"]["lower"] < 0.15
    assert a["pld"]["epsilon"] - a["pld"]["lower"] < 0.15


def test_exact_calibration_meets_targets_exactly() -> None:
    for defn in ("puredp", "zcdp"):
        plan = ReleasePlan.from_moe_targets(MOES, stability=9, gamma=0.1, privacy_defn=defn)  # type: ignore[arg-type]
        for m, lv in zip(MOES, plan.levels, strict=True):
            assert lv.stage2.moe95 <= m
            # and the smallest parameter: a slightly smaller one misses the target
            smaller = LevelPlan.build(
                geo="x",
                iteration_level=0,
                privacy_defn=defn,  # type: ignore[arg-type]
                budget=lv.budget * Fraction(999, 1000),
                gamma=lv.gamma,
                thresholds=(1, 2, 3),
                stability=9,
            )
            assert smaller.stage2.moe95 > m
    # the paper's geometric calibration misses MOE 6 by one (seed-checks README item 3)
    paper = ReleasePlan.from_moe_targets(
        [6], stability=9, gamma=0.1, privacy_defn="puredp", calibration="paper"
    )
    assert paper.levels[0].stage2.moe95 == 7


def test_production_config_plan() -> None:
    config = read_config(production_config_path())
    ref = read_reference(production_config_dir())
    plan = ReleasePlan.from_config(config, ref, Scope.US)
    assert plan.total_budget == Fraction(4944, 1000)
    assert plan.privacy_defn == "zcdp"
    # (AIANNH, 1) has a zero budget and is not tabulated, as in production
    assert [lv.key for lv in plan.levels].count("(AIANNH, 1)") == 0
    assert len(plan.levels) == 11
    assert {lv.stability for lv in plan.levels} == {9}
    usa2 = plan.level("(USA, 2)")
    assert usa2.has_detailed_only
    assert not plan.level("(COUNTY, 2)").has_detailed_only
    assert usa2.stage1.parameter == Fraction(2134, 1000) / 9 / 10
    assert usa2.stage2.noise_scale == pytest.approx(1 / (2 * 0.9 * 2.134 / 9))
    pr = ReleasePlan.from_config(config, ref, Scope.PR)
    assert pr.total_budget == Fraction(2643, 1000)


def test_stat_levels_follow_thresholds() -> None:
    lv = LevelPlan.build(
        geo="COUNTY",
        iteration_level=2,
        privacy_defn="zcdp",
        budget=Fraction(159, 1000),
        gamma=Fraction(1, 10),
        thresholds=(971, 4971, 19971),
        stability=9,
    )
    counts = np.array([-5, 0, 970, 971, 4970, 4971, 19970, 19971, 10**7])
    assert lv.stat_level(counts).tolist() == [0, 0, 0, 1, 1, 2, 2, 3, 3]


def test_rdp_curve_requires_geometric_and_validation() -> None:
    dg = ReleasePlan.from_moe_targets([6], stability=9, gamma=0.1, privacy_defn="zcdp")
    with pytest.raises(ValueError, match="geometric"):
        plan_rdp(dg)
    with pytest.raises(ValueError, match="thresholds"):
        LevelPlan.build(
            geo="x",
            iteration_level=1,
            privacy_defn="zcdp",
            budget=Fraction(1),
            gamma=Fraction(1, 10),
            thresholds=(5, 5, 6),
            stability=9,
        )
    with pytest.raises(ValueError, match="gamma"):
        LevelPlan.build(
            geo="x",
            iteration_level=1,
            privacy_defn="zcdp",
            budget=Fraction(1),
            gamma=Fraction(1),
            thresholds=(1, 2, 3),
            stability=9,
        )
    with pytest.raises(ValueError, match="delta"):
        analyse(dg, 0.0)


def test_production_analyses_are_ordered() -> None:
    config = read_config(production_config_path())
    plan = ReleasePlan.from_config(config, read_reference(production_config_dir()), Scope.US)
    res = analyse(plan, 1e-10)
    assert res["zcdp_analytic"]["epsilon"] == pytest.approx(zcdp_epsilon(4.944, 1e-10, "analytic"))
    assert res["pld"]["epsilon"] < res["zcdp_optimal"]["epsilon"] <= res["zcdp_grid"]["epsilon"]


def test_plan_round_trips_through_dict(paper_plans) -> None:
    import json

    for plan in paper_plans:
        again = ReleasePlan.from_dict(json.loads(json.dumps(plan.to_dict())))
        assert again.levels == plan.levels
        assert again.total_budget == plan.total_budget
    with pytest.raises(ValueError, match="levels"):
        ReleasePlan.from_dict({"privacy_defn": "zcdp"})


def test_release_power_from_pld_matches_seed_dgm_column() -> None:
    # 16 discrete Gaussian queries sharing rho = 2.63: the semantics seed's Table 2
    # "Power (DGM)" column (0.49 / 0.74 / 0.84); the exact Gaussian is 0.4869 / 0.7417 / 0.8442
    from privtab.accounting.pld import compose_plds, discrete_gaussian_loss

    prof = compose_plds([(discrete_gaussian_loss(16 / (2 * 2.63)), 16)], grid=1e-3)
    power = prof.power([0.01, 0.05, 0.10])
    np.testing.assert_allclose(power, [0.4869, 0.7417, 0.8442], atol=3e-3)
    assert np.all(np.diff(prof.power(np.linspace(0, 1, 50))) >= -1e-12)


def test_semantics_cli_reads_a_release_plan(tmp_path, paper_plans) -> None:
    import json

    from typer.testing import CliRunner

    from privtab.cli import app

    _, dg = paper_plans
    path = tmp_path / "release.json"
    path.write_text(
        json.dumps({"guarantee": {"zcdp": {"rho": float(dg.total_budget)}}, "plan": dg.to_dict()})
    )
    res = CliRunner().invoke(app, ["semantics", "--release", str(path), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    pld = out["power"]["release_pld"]
    # the release's own composition is never above the bound for any rho-zCDP mechanism
    assert all(p <= z + 1e-9 for p, z in zip(pld, out["power"]["zcdp_bound"], strict=True))
    assert all(p >= a for p, a in zip(pld, out["power"]["levels"], strict=True))
