"""The privacy part of ``report.html``: the headline sentence and the ε(δ) curve's data.

The curve is checked on the arrays :func:`privacy_curves` returns (what the figure
draws): it never exceeds the zero-concentrated DP bound with the optimal conversion (CKS
2020) at any δ — also when one analysis misbehaves, as the PLD did in issue 19 (ε ≈ 300
below δ = 10⁻¹¹ from its truncated tail) — it agrees with the headline at the release's
δ, and it is not below the PLD's lower bound there (a curve that is too optimistic fails).
"""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from privtab.accounting import zcdp_epsilon
from privtab.data import Scope, read_config, read_reference
from privtab.data.resources import production_config_path
from privtab.report import power_of_ten, round_up, round_up_sig
from privtab.report.references import Citations
from privtab.tabulate import ReleasePlan, analyse
from privtab.tabulate.report_privacy import (
    DEFAULT_DELTAS,
    headline,
    privacy_curves,
    privacy_table,
)

DELTA = 1e-10


def _release(plans: dict[str, ReleasePlan], *, private: bool = True) -> dict[str, Any]:
    """A ``release.json``-shaped object: what the report reads (plans and analyses)."""
    runs = {
        s: {"plan": p.to_dict(), "privacy": analyse(p, DELTA, pld_grid=1e-2), "levels": []}
        for s, p in plans.items()
    }
    worst = max(plans.values(), key=lambda p: p.total_budget)
    key, name = ("zcdp", "rho") if worst.privacy_defn == "zcdp" else ("pure", "epsilon")
    return {
        "private": private,
        "guarantee": {key: {name: float(worst.total_budget)}},
        "runs": runs,
        "config": {},
    }


@pytest.fixture(scope="module")
def production() -> dict[str, Any]:
    path = production_config_path()
    cfg, ref = read_config(path), read_reference(path.parent)
    return _release({s.value: ReleasePlan.from_config(cfg, ref, s) for s in (Scope.US, Scope.PR)})


def test_curve_never_exceeds_the_zcdp_optimal_bound(production: dict[str, Any]) -> None:
    curves = privacy_curves(production)
    rho = float(Fraction(4944, 1000))
    zc = np.asarray(zcdp_epsilon(rho, curves.deltas, "optimal"))
    assert np.all(curves.tightest <= zc * (1 + 1e-12))
    assert curves.deltas.min() <= 1e-15
    assert curves.deltas.max() >= 1e-2
    assert DELTA in curves.deltas
    # every valid analysis of both runs is drawn as a thin line
    assert set(curves.bounds) == {
        (s, k) for s in ("US", "PR") for k in ("zcdp_analytic", "zcdp_grid", "zcdp_optimal", "pld")
    }
    # the release's curve is the larger of the runs' (persons are in one run only)
    assert np.array_equal(curves.tightest, curves.run_tightest["US"])
    assert np.all(curves.run_tightest["PR"] < curves.run_tightest["US"])


def test_curve_agrees_with_the_headline_and_is_not_optimistic(production: dict[str, Any]) -> None:
    curves = privacy_curves(production, np.geomspace(1e-12, 1e-8, 3))
    top = headline(production, Citations())
    at = float(curves.tightest[np.flatnonzero(curves.deltas == DELTA)[0]])
    assert at == pytest.approx(top.epsilon, rel=1e-9)
    us = production["runs"]["US"]["privacy"]["pld"]
    assert us["lower"] <= at <= us["epsilon"] * (1 + 1e-9)
    assert top.analysis == "pld"
    assert top.scope == "US"


def test_curve_takes_the_minimum_when_one_bound_blows_up(
    production: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 19: the PLD's truncated tail gave ε ≈ 300 below δ = 10⁻¹¹ and the figure drew
    it. Any analysis may be loose somewhere; the plotted curve must stay the minimum."""
    import privtab.tabulate.privacy as privacy

    real = privacy.plan_pld

    class Broken:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def epsilon_curve(self, deltas: Any) -> Any:
            d = np.asarray(deltas, dtype=np.float64)
            return np.where(d < 1e-11, 300.0, self.inner.epsilon_curve(d))

    monkeypatch.setattr(privacy, "plan_pld", lambda *a, **k: Broken(real(*a, **k)))
    curves = privacy_curves(production)
    small = curves.deltas < 1e-11
    assert np.all(curves.bounds[("US", "pld")][small] == 300.0)  # the bad line is drawn thin
    zc = np.asarray(zcdp_epsilon(4.944, curves.deltas, "optimal"))
    assert np.all(curves.tightest <= zc * (1 + 1e-12))
    assert np.all(curves.tightest[small] < 40)


def test_pure_plan_curve_is_below_pure_epsilon_and_skips_the_invalid_rdp() -> None:
    plan = ReleasePlan.from_moe_targets(
        [6, 11, 50], stability=9, gamma=Fraction(1, 10), privacy_defn="puredp"
    )
    rel = _release({"US": plan})
    assert rel["runs"]["US"]["privacy"]["rdp_paper"]["valid"] is False
    curves = privacy_curves(rel, np.geomspace(1e-14, 1e-3, 6))
    eps = float(plan.total_budget)
    assert np.all(curves.tightest <= eps * (1 + 1e-12))
    assert ("US", "rdp_paper") not in curves.bounds
    assert {k for _, k in curves.bounds} == {"pure", "rdp", "rdp_grid", "pld"}
    for key in ("rdp", "pld"):
        assert np.all(curves.tightest <= curves.bounds[("US", key)])
    table = privacy_table(rel)
    assert "NOT a valid guarantee" in table
    assert "understates the loss" in table


def test_headline_sentence(production: dict[str, Any]) -> None:
    top = headline(production, cite := Citations())
    us = production["runs"]["US"]["privacy"]
    pr = production["runs"]["PR"]["privacy"]
    assert top.sentence == (
        "This release satisfies ρ = 4.944 zero-concentrated differential privacy; for "
        f"δ = 10⁻¹⁰ that means ε ≤ {round_up_sig(us['pld']['epsilon'], 4)} (the tightest valid "
        "bound privtab can prove, from the worst-case person&#x27;s privacy-loss "
        "distribution)."
    )
    for k in ("zcdp_optimal", "zcdp_grid", "zcdp_analytic"):
        assert round_up_sig(us[k]["epsilon"], 4) in top.others
    assert f"Puerto Rico run: ε ≤ {round_up_sig(pr['pld']['epsilon'], 4)}" in top.others
    assert "zcdp_" not in top.others
    assert "pld" not in top.others
    assert {"bun-steinke", "cks", "doroshenko", "safetab"} <= set(cite.keys)
    test = headline({**production, "private": False}, Citations())
    assert test.sentence.startswith("This test release is NOT private")


def test_round_up_never_understates() -> None:
    rng = random.Random(19)
    values = [24.4, 24.40000000000001, 23.922194, 0.1 + 0.2, 1e-9, 123456.7890123]
    values += [rng.uniform(0, 60) for _ in range(5000)]
    for x in values:
        for d in (0, 2, 4):
            shown = float(round_up(x, d))
            assert x <= shown < x + 10.0**-d + 1e-12, (x, d)
    assert round_up(24.4) == "24.40"
    assert round_up(24.401) == "24.41"
    assert round_up(math.inf) == "∞"


def test_round_up_sig_never_understates_beyond_float_accuracy() -> None:
    """Issue 31: ``ε ≤ 24.4`` was printed for 24.40195. Every shown value is ≥ the float
    (or within two units in its last place: floating point is no more accurate)."""
    from decimal import Decimal

    rng = random.Random(31)
    values = [24.40195, 23.92219, 4.944000000000001, 2.56 * 4, 0.1 + 0.2, 1e-9, 3.9]
    values += [rng.uniform(0, 60) for _ in range(3000)] + [
        10 ** rng.uniform(-8, 8) for _ in range(2000)
    ]
    for x in values:
        for d in (3, 4, 6):
            shown = Decimal(round_up_sig(x, d))
            assert shown >= Decimal(x) - 2 * Decimal(math.ulp(x)), (x, d, shown)
            assert len(shown.normalize().as_tuple().digits) <= d
    assert round_up_sig(24.40195, 4) == "24.41"
    assert round_up_sig(23.92219, 4) == "23.93"
    assert round_up_sig(4 * 2.56) == "10.24"


def test_power_of_ten() -> None:
    assert power_of_ten(1e-10) == "10⁻¹⁰"
    assert power_of_ten(2.5e-9) == "2.5 × 10⁻⁹"
    assert power_of_ten(0.0) == "0"


def test_default_deltas_span_the_figure() -> None:
    assert DEFAULT_DELTAS[0] == pytest.approx(1e-15)
    assert DEFAULT_DELTAS[-1] == pytest.approx(1e-2)
