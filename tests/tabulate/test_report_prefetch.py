"""The report's ε(δ) curves are computed once per run: the run starts them in the
background while it tabulates and the report reads them (issue 20: the report was ~2 s of
the release at 10⁷ persons, most of it re-solving the PLD at ~100 δ)."""

from __future__ import annotations

import numpy as np
import pytest

from privtab.data import Scope, production_config_dir, read_config, read_reference
from privtab.tabulate import ReleasePlan, report_privacy
from privtab.tabulate import privacy as privacy_module
from privtab.tabulate.report_privacy import (
    curve_deltas,
    pld_epsilon_curve,
    prefetch_pld_curves,
)

GRID = 1e-2  # coarse: the test is about reuse, not about the bound's tightness


@pytest.fixture(autouse=True)
def _empty_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    # private on purpose: each test starts from an empty cache of curves
    monkeypatch.setattr(report_privacy, "_CURVES", {})


def _plan() -> ReleasePlan:
    d = production_config_dir()
    return ReleasePlan.from_config(read_config(d / "config.json"), read_reference(d), Scope.PR)


def test_prefetched_curve_is_reused_and_equals_a_fresh_solve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan = _plan()
    deltas = curve_deltas(1e-10)
    fresh = privacy_module.plan_pld(plan, grid=GRID).epsilon_curve(deltas)
    calls: list[float] = []
    real = privacy_module.plan_pld

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1.0)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(privacy_module, "plan_pld", counting)
    prefetch_pld_curves([plan], 1e-10, GRID)
    assert len(calls) == 1
    # the report rebuilds the plan from release.json: an equal plan hits the same curve
    again = pld_epsilon_curve(ReleasePlan.from_dict(plan.to_dict()), GRID, deltas)
    assert len(calls) == 1
    np.testing.assert_array_equal(again, fresh)
    # another δ range or grid is another curve
    pld_epsilon_curve(plan, GRID, deltas[:5])
    assert len(calls) == 2


def test_a_failed_prefetch_is_left_to_the_report(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan()

    def failing(*args: object, **kwargs: object) -> object:
        raise RuntimeError("no PLD")

    monkeypatch.setattr(privacy_module, "plan_pld", failing)
    prefetch_pld_curves([plan], 1e-10, GRID * 2)  # swallowed: the run goes on
    with pytest.raises(RuntimeError, match="no PLD"):  # … and the report raises it itself
        pld_epsilon_curve(plan, GRID * 2, curve_deltas(1e-10))
