"""Progress through ``logging``, rendered on stderr by the command line (issue 19).

The library logs to loggers ``privtab.*``; a command prints the records as
``privtab: ...`` lines on stderr while it runs, ``privtab --quiet`` (or ``-q`` after a
command) keeps warnings and errors only, and nothing stays attached to the logger
afterwards (a notebook keeps its own logging).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privtab.cli import app

runner = CliRunner()


def _synth(tmp_path: Path, *flags: str, before: tuple[str, ...] = ()) -> str:
    args = [*before, "synth", "--persons", "1500", "--states", "DE", "--out", str(tmp_path / "s")]
    res = runner.invoke(app, [*args, *flags])
    assert res.exit_code == 0, res.output
    return res.stderr


def test_progress_is_on_stderr_and_quiet_hides_it(tmp_path: Path) -> None:
    assert "privtab: synth: 1,500/1,500 persons" in _synth(tmp_path)
    assert _synth(tmp_path, "--overwrite", before=("--quiet",)) == ""
    assert _synth(tmp_path, "--overwrite", "-q") == ""


def test_warnings_survive_quiet() -> None:
    res = runner.invoke(app, ["-q", "invariants", "table", "--counts", "3,1;1,3", "--mu", "1",
                              "--seed", "1"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "privtab: warning: --seed 1" in res.stderr


def test_no_handler_is_left_behind(tmp_path: Path) -> None:
    log = logging.getLogger("privtab")
    before = (list(log.handlers), log.level, log.propagate)
    _synth(tmp_path)
    assert (list(log.handlers), log.level, log.propagate) == before


def test_a_run_logs_its_steps(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``run_release`` without a progress callback reports each step to the log."""
    from privtab.mechanisms import InsecureReleaseWarning
    from privtab.tabulate.demo import run_demo

    with caplog.at_level(logging.INFO, logger="privtab"), pytest.warns(InsecureReleaseWarning):
        run_demo(tmp_path / "d", 1500, "DE", seed=1)
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("privtab")]
    assert any(m.startswith("demo: synthesising") for m in messages)
    assert any("reading config" in m for m in messages)
    assert any(m.startswith("[") and "noisy counts" in m for m in messages)
