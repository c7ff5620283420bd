"""``privtab bench topdown`` (issue 29): the same-run baseline on a sample of problems, the
record's fields and its presentation.

The default test samples the per-parent problems of a small population's US persons run
and solves each by the structured solver and by OSQP + HiGHS: the two must give the same
rounded counts (a wrong sample — e.g. problems of another run, or a baseline that skipped
the rounder — would not). The slow test runs the whole benchmark on a tiny synthetic
nation (privtab synth, the release in a child process, the sample): it takes minutes, so
it runs in ``make test-all``; the default test covers the sampling and timing code.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from privtab.bench import topdown as bench
from tests.topdown._support import population, write_c1


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("td-bench-data")
    pop = population(5, states=("01", "09"))
    write_c1(pop.grfc, d / "GRF-C.txt")
    write_c1(pop.units, d / "cef-units.txt")
    write_c1(pop.persons, d / "cef-persons.txt")
    return d


def test_the_sample_is_optimised_problems_of_every_level_and_both_solvers_agree(
    data: Path,
) -> None:
    problems = bench.sample_problems(data, seed=3, per_level=2)
    assert "Block" in problems
    assert "Block_Group" in problems
    assert all(1 <= len(p) <= 2 for p in problems.values())
    timed = bench._time_sample(problems)
    for level, row in timed.items():
        assert row["same_l2_objective"] == row["problems"], level
        assert row["same_counts"] == row["problems"], level  # this small sample: no ties
        assert row["structured_s"] > 0
        assert row["osqp_highs_s"] > 0
        assert row["mean_variables"] > 0


def _fake_run(persons: int, wall: float) -> dict[str, object]:
    level = {"scope": "US", "histogram": "persons", "level": "Block", "parents": 10,
             "children": 300, "paths": {"optimised": 8, "single child": 2},
             "generic_path": {}, "seconds": {"measure": 1.0, "solve": 4.0}}  # fmt: skip
    return {
        "persons": persons, "workers": 2, "wall_seconds": wall, "cpu_seconds": 2 * wall,
        "peak_rss_gb": 1.5, "persons_per_s": persons / wall, "problems": 8,
        "problems_per_s": 8 / wall, "solve_seconds": 4.0, "measure_seconds": 1.0,
        "other_seconds": wall - 5.0, "load_average_before": [1.0, 2.0, 3.0],
        "levels": [level], "phases": {"inputs": 1.0},
        "sample": {"Block": {"problems": 2, "structured_s": 0.01, "osqp_highs_s": 0.2,
                             "ratio": 20.0, "same_counts": 2, "mean_variables": 500}},
        "generic_estimate": bench._generic_estimate(
            [level], {"Block": {"osqp_highs_s": 0.2, "structured_s": 0.0125}}
        ),
    }  # fmt: skip


def test_the_generic_estimate_is_parents_times_the_sampled_seconds() -> None:
    est = _fake_run(10**6, 100.0)["generic_estimate"]
    assert est == {
        "us_persons_solve_seconds": 4.0,
        "structured_cpu_seconds": 0.1,
        "generic_cpu_seconds": 1.6,
        "ratio": 16.0,
    }


def test_memory_is_extrapolated_by_blocks_and_time_by_persons() -> None:
    ex = bench.extrapolate(
        {"persons": 10**6, "blocks": 10**5, "wall_seconds": 3600.0, "peak_rss_gb": 1.0}
    )
    assert ex["wall_hours"] == round(bench.NATION / 10**6, 2)
    assert ex["peak_rss_gb"] == round(bench.NATION_BLOCKS / 10**5, 1)


def test_the_tables_state_the_target_and_the_extrapolation() -> None:
    res = {
        "runs": [_fake_run(10**6, 100.0)],
        "target_persons_per_s": bench.TARGET_PERSONS_PER_S,
        "nation_persons": bench.NATION,
        "extrapolation": {"from_persons": 10**6, "wall_hours": 9.2, "peak_rss_gb": 496.5,
                          "method": "linear"},
    }  # fmt: skip
    text = "\n".join(t.markdown() for t in bench.tables(res))
    assert "10,000 (0.29× target)" in text
    assert "9.2 h" in text
    assert "20.0×" in text
    assert "2/2" in text


@pytest.mark.slow  # minutes: synth + a release in a child process; the sampling and the
# tables are covered by the default tests above
def test_the_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    res = bench.run(persons=[3000], data=tmp_path, workers=2, sample=1, work=tmp_path)
    (r,) = res["runs"]
    assert r["persons"] == 3000
    assert r["peak_rss_gb"] > 0
    rate = 3000 / r["wall_seconds"]
    assert r["persons_per_s"] == pytest.approx(rate, rel=1e-3, abs=0.05)  # stored to 0.1
    assert {lv["histogram"] for lv in r["levels"]} == {"persons", "units"}
    # the two solvers reach the same L2 optimum (the rounded counts may differ on ties)
    assert all(s["same_l2_objective"] == s["problems"] for s in r["sample"].values())


def test_the_levels_are_extrapolated_by_geounits_and_the_rest_by_persons() -> None:
    run = _fake_run(10**6, 100.0)
    run["geography"] = {"blocks": 300}
    ex = bench.extrapolate_levels(run)["hours"]
    # the block level: its 5 s × (the 2020 blocks ÷ the run's 300)
    assert ex["Block"] == round(5.0 * bench.NATION_BLOCKS / 300 / 3600, 2)
    # outside the levels: (wall − solve − measure) × the nation's persons ÷ the run's
    assert ex["outside the levels (× persons)"] == round(95.0 * bench.NATION / 10**6 / 3600, 2)
    assert ex["levels above the counties (× persons)"] == 0.0
    run["geography"] = {}  # no geography: every level scales with persons
    assert bench.extrapolate_levels(run)["hours"]["levels above the counties (× persons)"] == (
        round(5.0 * bench.NATION / 10**6 / 3600, 2)
    )


def test_the_other_engine_is_tabled_with_its_ratio_to_the_first() -> None:
    run = _fake_run(10**6, 100.0)
    run["engines"] = {"spark": {"wall_seconds": 190.0, "peak_rss_gb": 2.0,
                                "peak_tree_rss_gb": 5.5, "persons_per_s": 10**6 / 190,
                                "wall_ratio": 1.9, "spark": {"master": "local[2]"}}}  # fmt: skip
    res = {"runs": [run], "target_persons_per_s": bench.TARGET_PERSONS_PER_S,
           "nation_persons": bench.NATION,
           "extrapolation": {"from_persons": 10**6, "wall_hours": 9.2, "peak_rss_gb": 1.0,
                             "method": "linear"}}  # fmt: skip
    text = "\n".join(t.markdown() for t in bench.tables(res))
    assert "spark local[2]" in text
    assert "1.90" in text
    assert "2.00 / 5.50" in text
    assert "polars ×2" in text


def test_the_engines_option_names_each_engine_once() -> None:
    # private on purpose: the option's parser, what `privtab bench topdown --engines` calls
    from privtab.bench.options import _engines
    from privtab.errors import UsageError

    assert _engines("polars,spark") == ("polars", "spark")
    assert _engines("spark") == ("spark",)
    for bad in ("", "polars,polars", "dask"):
        with pytest.raises(UsageError):
            _engines(bad)


def test_the_figure_leaves_out_runs_on_an_overloaded_machine() -> None:
    from privtab.bench.render import _topdown_runs

    def record(day: str, load: float, persons: int) -> dict[str, object]:
        run = {"persons": persons, "wall_seconds": 1.0, "load_average_before": [load, 0, 0]}
        return {"benchmark": "topdown", "started_at": day, "machine": {"cores": 2},
                "result": {"runs": [run]}}  # fmt: skip

    runs = _topdown_runs([record("2026-01-01", 1.0, 10), record("2026-01-02", 25.0, 10)])
    assert [r["day"] for r in runs] == ["2026-01-01"]  # the newer, loaded run is not drawn
