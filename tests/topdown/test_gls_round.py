"""``--postprocess gls-round``: the tree GLS first, then production's per-parent projection
and controlled rounding — the truth when there is no noise, every constraint and invariant
on every problem, deterministic, the same release files and checks as production.

(Its accuracy against production TopDown is a benchmark: ``privtab bench
topdown-gls-round``, docs/benchmarks.md.)"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from privtab.cli import app
from privtab.data.inputs import sha256_file
from privtab.errors import UsageError
from privtab.topdown import gls_round
from privtab.topdown.run import TopDownOptions, postprocess_release, run_release
from privtab.topdown.solve import ChildrenProblem, ChildrenSolution
from privtab.topdown.validate import validate_release
from tests.conftest import shared_folder

OUTPUTS = ("mdf/persons.parquet", "mdf/units.parquet", "pl94/P1.parquet", "pl94/P2.parquet",
           "pl94/P5.parquet", "pl94/H1.parquet")  # fmt: skip


# the session's small population and its noise-off and seeded (404) releases with their noisy
# measurements (tests/topdown/conftest.py), shared read-only with the other modules that
# post-process a release: nothing here writes into them


@pytest.fixture(scope="module")
def data(small_data: Path) -> Path:
    return small_data


@pytest.fixture(scope="module")
def exact(small_exact_release: Path) -> Path:
    return small_exact_release


@pytest.fixture(scope="module")
def seeded(small_seeded_release: Path) -> Path:
    return small_seeded_release


def _gls_round(nmf: Path, out: Path) -> Path:
    postprocess_release(nmf, out, TopDownOptions(report=False, postprocess="gls-round"),
                        progress=lambda _m: None)  # fmt: skip
    return out


Solved = tuple[ChildrenProblem, ChildrenSolution]


@pytest.fixture(scope="module")
def gls_seeded_problems(
    seeded: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[Solved]]:
    """The gls-round release of the seeded measurements, made once for the session (and
    shared by the xdist workers, who both run this module's tests: tests/conftest.py), with
    every children problem it solved and its solution (recorded on the way: the solver
    itself is called unchanged; kept in the folder, pickled). Read only by the tests."""
    import pickle

    from privtab.topdown.solve import solve_children

    def build(folder: Path) -> None:
        seen: list[Solved] = []

        def recording(problem: ChildrenProblem) -> ChildrenSolution:
            sol = solve_children(problem)
            seen.append((problem, sol))
            return sol

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(gls_round, "solve_children", recording)
            _gls_round(seeded / "nmf", folder / "release")
        (folder / "solved.pickle").write_bytes(pickle.dumps(seen))

    folder = shared_folder(tmp_path_factory, "gls-round-seeded", build)
    seen: list[Solved] = pickle.loads((folder / "solved.pickle").read_bytes())
    return folder / "release", seen


@pytest.fixture(scope="module")
def gls_seeded(gls_seeded_problems: tuple[Path, list[Solved]]) -> Path:
    return gls_seeded_problems[0]


@pytest.mark.parametrize("whole", [True, False], ids=["whole tree", "state by state"])
def test_noise_off_gives_the_truth(
    exact: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whole: bool
) -> None:
    """Exact measurements: the GLS is the truth, so is its projection and rounding — the
    MDF and every table equal the noise-off release (itself checked against an independent
    tabulation of the records in test_release.py). A child estimate given to the wrong
    child, or a wrong conditioning, fails here; the GLS solved as one tree and state by
    state."""
    if not whole:
        monkeypatch.setattr(gls_round, "WHOLE_TREE_GEOUNITS", 0)
    out = _gls_round(exact / "nmf", tmp_path / "gls")
    for rel in OUTPUTS:
        assert pl.read_parquet(exact / rel).equals(pl.read_parquet(out / rel)), rel


def test_every_problem_is_integral_and_meets_its_constraints(
    seeded: Path, gls_seeded_problems: tuple[Path, list[Solved]]
) -> None:
    """On every problem the GLS estimate given the parent sums to the parent (the
    conditioning), and the solution is integral, non-negative, sums to the parent and meets
    the hhgq bounds and exact totals; the written release validates (invariants exact,
    tables = the MDF's tabulation, children sum to parents)."""
    out, seen = gls_seeded_problems
    assert len(seen) > 20
    roots = 0
    for problem, sol in seen:
        est = problem.measurements.answers["detailed"]
        counts = sol.counts
        assert counts.dtype == np.int64
        assert counts.min() >= 0
        if problem.parent is None:
            roots += 1
        else:
            parent = np.asarray(problem.parent)
            np.testing.assert_allclose(est.sum(axis=0), parent, atol=1e-6)
            assert np.array_equal(counts.sum(axis=0), parent), problem.geounit
        c = problem.constraints
        if c.gq_lower is not None and problem.histogram == "persons":
            by_gq = counts.reshape(len(problem.children), 8, -1).sum(axis=2)
            assert np.all(by_gq >= c.gq_lower), problem.geounit
            ub = np.asarray(c.gq_upper)
            assert np.all((ub < 0) | (by_gq <= ub)), problem.geounit
        if c.total is not None:
            group = np.arange(len(problem.children)) if c.total_group is None else c.total_group
            sums = np.bincount(group, weights=counts.sum(axis=1), minlength=len(c.total))
            assert np.array_equal(sums.astype(np.int64), c.total), problem.geounit
    assert roots == 4  # US and PR, persons and units
    validate_release(out)
    # the invariant state totals: as in the release the measurements came with
    p1 = pl.read_parquet(out / "pl94/P1.parquet")
    first = pl.read_parquet(seeded / "pl94/P1.parquet")
    key = (pl.col("GEOLEVEL") == "STATE") & (pl.col("CELL") == "P0010001")
    assert p1.filter(key).sort("GEOID").equals(first.filter(key).sort("GEOID"))


def test_it_says_what_it_is(seeded: Path, gls_seeded: Path) -> None:
    a = gls_seeded
    doc = json.loads((a / "release.json").read_text())
    assert doc["postprocessing"]["algorithm"].startswith("gls-round")
    assert doc["derived_from"]["postprocess"] == "gls-round"
    assert doc["private"] is False
    assert (a / "NOT_PRIVATE").exists()
    # not production's: the same measurements give different (better estimated) counts
    assert not pl.read_parquet(a / "mdf/persons.parquet").equals(
        pl.read_parquet(seeded / "mdf/persons.parquet")
    )


def test_an_unknown_postprocessor_is_refused(seeded: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--postprocess 'gls'"):
        postprocess_release(seeded / "nmf", tmp_path / "x", TopDownOptions(postprocess="gls"))
    assert not (tmp_path / "x").exists()


def test_the_command_takes_the_option_and_runs_are_deterministic(
    seeded: Path, gls_seeded: Path, tmp_path: Path
) -> None:
    out = tmp_path / "cli"
    res = CliRunner().invoke(app, ["topdown", "postprocess", "--nmf", str(seeded / "nmf"),
                                   "--out", str(out), "--postprocess", "gls-round",
                                   "--no-report", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["derived_from"]["postprocess"] == "gls-round"
    for rel in (*OUTPUTS, "mdf/persons.txt", "pl94/P1.txt"):  # the same measurements, same bytes
        assert sha256_file(gls_seeded / rel) == sha256_file(out / rel), rel
    nmf = str(seeded / "nmf")
    bad = CliRunner().invoke(
        app, ["topdown", "postprocess", "--nmf", nmf, "--out", str(tmp_path / "x"),
              "--postprocess", "l1"],
    )  # fmt: skip
    assert bad.exit_code == 2
    assert "gls-round" in bad.output


def test_a_run_draws_what_production_draws_then_post_processes(
    data: Path, gls_seeded: Path, tmp_path: Path
) -> None:
    """``run --postprocess gls-round`` draws every measurement first, in production's
    order: with the seed of the production run (``seeded``, 404) it publishes exactly what
    post-processing that run's measurements gives — and without ``--nmf`` the
    measurements it needed are not in the folder."""
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["topdown", "run", "--data", str(data), "--out", str(out),
                                   "--seed", "404", "--postprocess", "gls-round", "--no-report",
                                   "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    for rel in OUTPUTS:
        assert pl.read_parquet(gls_seeded / rel).equals(pl.read_parquet(out / rel)), rel
    assert not (out / "nmf").exists()
    doc = json.loads((out / "release.json").read_text())
    assert doc["postprocessing"]["algorithm"].startswith("gls-round")
    assert "derived_from" not in doc
    assert doc["guarantee"]["persons"]["rho"]["exact"] == "293764/114921"


def test_state_by_state_gives_the_same_release(
    seeded: Path, gls_seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GLS solved state by state (a nation: one state in memory at a time) gives the
    release the whole-tree GLS gives (two US states: the nation's children through both)."""
    monkeypatch.setattr(gls_round, "WHOLE_TREE_GEOUNITS", 0)
    out = _gls_round(seeded / "nmf", tmp_path / "split")
    for rel in OUTPUTS:
        assert pl.read_parquet(gls_seeded / rel).equals(pl.read_parquet(out / rel)), rel


def test_post_processing_private_measurements_is_private(data: Path, tmp_path: Path) -> None:
    """A release re-made from private measurements (secure noise) is private (no
    ``NOT_PRIVATE``; post-processing costs nothing) — with either post-processor."""
    first = tmp_path / "private"
    opts = TopDownOptions(runs=("pr",), nmf=True, report=False, use_ledger=False)
    assert run_release(data, first, opts, progress=lambda _m: None).private
    for name in ("production", "gls-round"):
        out = tmp_path / name
        res = postprocess_release(first / "nmf", out, TopDownOptions(report=False,
                                  postprocess=name), progress=lambda _m: None)  # fmt: skip
        assert res.private, name
        assert not (out / "NOT_PRIVATE").exists()
        assert json.loads((out / "release.json").read_text())["private"] is True


def _release_tables(root: Path, frames: dict[str, pl.DataFrame]) -> Path:
    (root / "pl94").mkdir(parents=True)
    for t, f in frames.items():
        f.write_parquet(root / "pl94" / f"{t}.parquet")
    return root


def test_the_benchmark_pairs_geographies_and_averages_over_draws(tmp_path: Path) -> None:
    """``privtab bench topdown-gls-round``'s statistics against a direct computation: each
    release's rows are matched to the truth by geography and cell, not by position (its
    tables are shuffled), the per-draw MAEs, the paired difference and its mean ± s.e.
    over draws (``statistics``), the pooled per-geography difference and the time ratios."""
    import statistics

    from privtab.bench import topdown_gls_round as bench

    rng = np.random.default_rng(5)
    cells = {"P1": ["P0010001", "P0010002"], "P2": ["P0020001", "P0020002"]}
    geos = {"STATE": ["10"], "COUNTY": ["10001", "10003", "10005", "10007"]}

    def frame(t: str, count: np.ndarray) -> pl.DataFrame:
        rows = [(g, lv, c) for lv, gs in geos.items() for g in gs for c in cells[t]]
        return pl.DataFrame(
            {"GEOID": [r[0] for r in rows], "GEOLEVEL": [r[1] for r in rows],
             "CELL": [r[2] for r in rows], "COUNT": count.astype(np.int64)}
        )  # fmt: skip

    n = len(geos["STATE"] + geos["COUNTY"]) * 2
    truth = {t: frame(t, rng.integers(50, 100, n)) for t in cells}
    runs, pooled = [], []
    for draw in range(3):
        errs = {name: {t: rng.integers(-3, 4, n) for t in cells} for name in bench.POSTPROCESSORS}
        got = {}
        for name, e in errs.items():
            tabs = {t: frame(t, truth[t]["COUNT"].to_numpy() + e[t]).sample(fraction=1.0,
                    shuffle=True, seed=draw) for t in cells}  # fmt: skip
            got[name] = bench._errors(_release_tables(tmp_path / f"{draw}-{name}", tabs), truth)
        acc = bench._draw_accuracy(got["production"], got["gls-round"])
        county = slice(2, n)  # rows of the counties (the state's two cells first)
        for name in bench.POSTPROCESSORS:
            p1 = errs[name]["P1"][county]
            assert acc["COUNTY"]["P1"][name] == pytest.approx(np.abs(p1).mean())
            assert acc["COUNTY"]["total"][name] == pytest.approx(np.abs(p1[::2]).mean())
        d = np.abs(errs["gls-round"]["P1"][county][::2]) - np.abs(
            errs["production"]["P1"][county][::2]
        )
        pooled += d.tolist()
        runs.append({"seed": draw, "accuracy": acc, **{
            name: {"wall_seconds": 2.0 + k, "cpu_seconds": 1.0 + k, "peak_rss_mb": 10.0,
                   "seconds": {}, "load_average_before": [1.0, 1.0, 1.0]}
            for k, name in enumerate(bench.POSTPROCESSORS)}})  # fmt: skip
    summ = bench.summarise(runs)
    county_p2 = summ["levels"]["COUNTY"]["P2"]
    per_draw = [r["accuracy"]["COUNTY"]["P2"] for r in runs]
    diffs = [a["gls-round"] - a["production"] for a in per_draw]
    assert county_p2["difference"]["mean"] == pytest.approx(statistics.mean(diffs))
    assert county_p2["difference"]["se"] == pytest.approx(statistics.stdev(diffs) / 3**0.5)
    prod = [a["production"] for a in per_draw]
    assert county_p2["production"]["se"] == pytest.approx(statistics.stdev(prod) / 3**0.5)
    p = summ["levels"]["COUNTY"]["total_pooled_difference"]
    assert p["n"] == 12
    assert p["mean"] == pytest.approx(statistics.mean(pooled))
    assert p["se"] == pytest.approx(statistics.stdev(pooled) / 12**0.5)
    assert summ["ratio"] == {"wall_seconds": pytest.approx(9 / 6), "cpu_seconds": 2.0}
    titles = [t.title for t in bench.tables({"input": {"persons": 1, "blocks": 1, "seed": 0,
                                                        "draws": 3}, "summary": summ,
                                             "draws": runs})]  # fmt: skip
    assert len(titles) == 3
