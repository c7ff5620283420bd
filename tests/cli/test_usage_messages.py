"""Bad usage ends with the same one-line message and exit code 2 wherever the check lives.

Issue 18 moved the option checks of ``safetab run|plan|accuracy``, ``semantics``,
``invariants``, ``analyze test``, ``account``, ``ledger set-lifetime``, ``synth`` and
``bench`` out of the command line into the library (``RunOptions.from_flags``,
``config_accuracy``, ``chosen_guarantee``, ``lifetime_budget``, ``privtab.bench.options``,
…). Each message below is the one the commands printed before the move (compared run by
run against the old code): a check lost on the way, or one that now raises a
``ValueError`` (a traceback, exit 3) instead of a usage error, fails here. Every case
stops before any input is read or any noise is drawn.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from privtab.cli import app

runner = CliRunner(env={"PRIVTAB_DEBUG": "0"})
RUN = ["safetab", "run", "--data", "no-such-input", "--out", "no-such-release"]
TEST = ["analyze", "test", "--observed", "3", "--n", "10", "--p0", "0.5", "--mechanism"]
TEST += ["laplace", "--epsilon", "1"]

CASES = [
    ([*RUN, "--format", "csv"], "--format must be txt, parquet or txt,parquet, got 'csv'"),
    ([*RUN, "--engine", "dask"], "--engine must be polars or spark, got 'dask'"),
    ([*RUN, "--spark-conf", "foo"], "--spark-conf needs KEY=VALUE, got 'foo'"),
    ([*RUN, "--spark-master", "local[1]"], "--spark-master / --spark-conf need --engine spark"),
    (
        [*RUN, "--lifetime-rho", "1", "--lifetime-epsilon", "1"],
        "give --lifetime-rho or --lifetime-epsilon, not both",
    ),
    ([*RUN, "--lifetime-rho", "abc"], "lifetime budget: rho must be a finite real number"),
    ([*RUN, "--delta", "2"], "--delta must lie strictly between 0 and 1, got 2.0"),
    (["safetab", "plan", "--calibration", "foo"], "--calibration must be exact or paper"),
    (["safetab", "plan", "--moe", "6,x"], "--moe must be comma-separated numbers: 'x' is not"),
    (["safetab", "plan", "--scope", "XX"], "--scope must be US or PR, got 'XX'"),
    (["safetab", "accuracy", "--trials", "2"], "--trials needs --data"),
    (["safetab", "accuracy", "--n", "1,x"], "--n must be comma-separated integers, got '1,x'"),
    (["safetab", "accuracy", "--n", "-1"], "--n needs non-negative integers, got '-1'"),
    (["safetab", "accuracy", "--scope", "XX"], "--scope must be US or PR, got 'XX'"),
    (["semantics", "--zcdp", "1", "--pure", "1"], "give exactly one of --pure E"),
    (["semantics", "--approx", "1"], "--approx: expects 'EPSILON,DELTA', got '1'"),
    (
        ["semantics", "--zcdp", "1", "--posterior-bound", "foo"],
        "--posterior-bound must be one of coherent, raw, odds, got 'foo'",
    ),
    (["semantics", "--release", "/no/such/release"], "cannot read '/no/such/release'"),
    (["semantics", "topdown", "--scenario", "Z"], "--scenario: unknown scenario 'Z'"),
    (["invariants", "table", "--counts", "1,2;3,4", "--mu", "1", "--output", "."], "is a folder"),
    ([*TEST, "--method", "foo"], "--method is exact or monte-carlo; --alternative two-sided"),
    ([*TEST, "--alpha", "2"], "--alpha must lie strictly between 0 and 1, got 2.0"),
    (["account"], "give exactly one of --zcdp, --pure, --gdp, --rdp-geometric"),
    (["account", "--zcdp", "1", "--delta", "2"], "--delta must lie strictly between 0 and 1"),
    (["synth", "--persons", "10", "--out", "s", "--format", "csv"], "--format must be txt or"),
    (["bench", "synth", "--format", "csv"], "--format must be txt or parquet, got 'csv'"),
    (["bench", "synth", "--persons", "x"], "--persons must be comma-separated numbers"),
    (["bench", "safetab", "--engine", "dask"], "--engine must be polars or spark, not 'dask'"),
    (["bench", "scale", "--from-log", "/no/such/log"], "cannot read /no/such/log"),
]


@pytest.mark.parametrize(("args", "message"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_usage_is_one_message_and_exit_2(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith("privtab: error: "), res.stderr
    assert message in res.stderr
    assert "Traceback" not in res.output
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_ledger_set_lifetime_checks_before_opening_the_ledger(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.json"
    for args, message in (
        ([], "give exactly one of --rho, --epsilon, --clear"),
        (["--rho", "0"], "a lifetime budget must be positive (use --clear to remove one)"),
    ):
        res = runner.invoke(app, ["ledger", "set-lifetime", "--ledger", str(ledger), *args])
        assert res.exit_code == 2
        assert message in res.stderr
    assert not ledger.exists()


def test_seeded_runs_warn_that_the_output_is_not_private() -> None:
    res = runner.invoke(
        app, ["invariants", "table", "--counts", "1,2;3,4", "--mu", "1", "--seed", "3"]
    )
    assert res.exit_code == 0, res.output
    assert "--seed 3: using a reproducible TEST source; the output is NOT private" in res.stderr
    res = runner.invoke(app, [*TEST, "--method", "monte-carlo", "--seed", "3", "--reps", "100"])
    assert res.exit_code == 0, res.output
    assert "seeded (insecure) source" in res.stderr
