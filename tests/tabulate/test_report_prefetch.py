"""The report's ε(δ) curves are computed while the levels run: the run prefetches them in
the background and hands them to the report (issue 20: the report was ~2 s of the release
at 10⁷ persons, most of it re-solving the PLD at ~100 δ). No process-wide cache: a curve
is reused only where the run passes it on."""

from __future__ import annotations

import numpy as np
import pytest

from privtab.data import Scope, production_config_dir, read_config, read_reference
from privtab.tabulate import ReleasePlan
from privtab.tabulate import privacy as privacy_module
from privtab.tabulate.report_privacy import NO_CURVES, curve_deltas, prefetch_pld_curves

GRID = 1e-2  # coarse: the test is about reuse, not about the bound's tightness


def _plan() -> ReleasePlan:
    d = production_config_dir()
    return ReleasePlan.from_config(read_config(d / "config.json"), read_reference(d), Scope.PR)


def _count_plan_pld(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = privacy_module.plan_pld

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(privacy_module, "plan_pld", counting)
    return calls


def test_prefetched_curve_is_reused_and_equals_a_fresh_solve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan = _plan()
    deltas = curve_deltas(1e-10)
    fresh = privacy_module.plan_pld(plan, grid=GRID).epsilon_curve(deltas)
    calls = _count_plan_pld(monkeypatch)
    known = prefetch_pld_curves([plan], 1e-10, GRID)
    assert len(calls) == 1
    # the report rebuilds the plan from release.json: an equal plan gets the known curve
    again = known.get(ReleasePlan.from_dict(plan.to_dict()), GRID, deltas)
    assert len(calls) == 1
    np.testing.assert_array_equal(again, fresh)
    # other δs or another grid: solved, not taken from the prefetch
    known.get(plan, GRID, deltas[:5])
    known.get(plan, GRID * 2, deltas)
    assert len(calls) == 3
    # without prefetched curves every call solves
    NO_CURVES.get(plan, GRID, deltas)
    assert len(calls) == 4


def test_a_failed_prefetch_is_left_to_the_report(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan()

    def failing(*args: object, **kwargs: object) -> object:
        raise RuntimeError("no PLD")

    monkeypatch.setattr(privacy_module, "plan_pld", failing)
    known = prefetch_pld_curves([plan], 1e-10, GRID)  # swallowed: the run goes on
    assert not known.curves
    with pytest.raises(RuntimeError, match="no PLD"):  # … and the report raises it itself
        known.get(plan, GRID, curve_deltas(1e-10))


@pytest.mark.filterwarnings("ignore::privtab.mechanisms.InsecureReleaseWarning")
def test_figures_drawn_ahead_are_the_reports_own(
    synth_small, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run draws the plan-only figures (ε(δ) curve, margins of error) while the levels
    run and the report reuses them: each is drawn once, and the report is byte-identical
    to one written afterwards from release.json with every figure drawn then."""
    import json

    from privtab.random import SeededSource
    from privtab.tabulate import report_privacy
    from privtab.tabulate.report import write_report
    from privtab.tabulate.run import RunOptions, run_release

    drawn: list[int] = []
    real = report_privacy.png

    def counting(fig: object) -> bytes:
        drawn.append(1)
        return real(fig)  # type: ignore[arg-type]

    monkeypatch.setattr(report_privacy, "png", counting)
    config, data = synth_small
    opts = RunOptions(source=SeededSource(5), allow_insecure=True, use_ledger=False)
    run_release(config, data, tmp_path / "rel", opts, progress=None)
    assert len(drawn) == 2  # drawn ahead, reused by the report
    release = json.loads((tmp_path / "rel" / "release.json").read_text())
    again = write_report(tmp_path / "rel" / "again.html", release, [])
    assert len(drawn) == 4  # nothing ahead: both drawn again
    assert again.read_bytes() == (tmp_path / "rel" / "report.html").read_bytes()
