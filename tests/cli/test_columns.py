"""The command line reads well in an 80-column terminal (issue 19, "A CLI that reads well").

With ``COLUMNS=80``, for the ``--help`` of every command and the human output of every
README command (on small inputs):

- no line of stdout is wider than 80 terminal cells;
- no table cell is cut to "…" (rich folds or wraps; a truncated value would lose digits);
- help texts render without artefacts (``%%``, ``<bool>``, Python types such as
  ``list[str]``);
- no raw Python reprs (a dict ``{'…``, ``None``) in human output.

The checks fail on the bugs they target: the old summary tables truncated
"regions × iterati…", ``safetab run --help`` cut option names, ``analyze ci`` printed
``mechanism: {'mechanism': ...}`` and ``reps: None`` (see the mutation check at the end).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
from rich.cells import cell_len
from typer.testing import CliRunner

from privtab.cli import app

WIDTH = 80
runner = CliRunner(env={"COLUMNS": str(WIDTH), "PRIVTAB_DEBUG": "0"})
REPR = re.compile(r"\{'|'\w+'\s*:\s|\bNone\b|\bnan\b|array\(|Fraction\(")


def problems(text: str) -> list[str]:
    """What is wrong with a command's human output at 80 columns (empty: nothing)."""
    bad = []
    for line in text.splitlines():
        if cell_len(line) > WIDTH:
            bad.append(f"wider than {WIDTH}: {line!r}")
        if "…" in line and any(c in line for c in "│┃|"):
            bad.append(f"truncated cell: {line!r}")
        if REPR.search(line):
            bad.append(f"Python repr: {line!r}")
    return bad


def _paths(cmd: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix]
    if hasattr(cmd, "commands"):
        for name, sub in cmd.commands.items():
            out += _paths(sub, (*prefix, name))
    return out


COMMANDS = _paths(typer.main.get_command(app))


def test_every_command_is_visited() -> None:
    names = {" ".join(p) for p in COMMANDS}
    for expected in ("safetab run", "analyze combine", "bench samplers", "ledger show"):
        assert expected in names


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "privtab")
def test_help_fits_80_columns_without_artefacts(path: tuple[str, ...]) -> None:
    res = runner.invoke(app, [*path, "--help"])
    assert res.exit_code == 0, res.output
    assert problems(res.stdout) == []
    for artefact in ("%%", "<bool>", "list["):
        assert artefact not in res.stdout, (path, artefact)


def _run(line: str) -> str:
    res = runner.invoke(app, shlex.split(line))
    assert res.exit_code == 0, (line, res.output)
    return res.stdout


README_FAST = [
    "account --zcdp 2.63 --delta 1e-10",
    "account --rdp-geometric 0.5 --compose 9",
    "account --pure 1 --group 2",
    "semantics topdown --scenario A",
    "invariants census",
    "invariants table --counts '30,12;10,25' --mu 1 --integer",
    "invariants test --counts '25,25;25,25' --epsilon 1",
    "analyze ci --mechanism laplace --epsilon 1 --value 4 --level 0.9",
    "analyze ci --mechanism geometric --epsilon 0.5 --value 10 --level 0.9",
    "analyze ci --mechanism geometric --epsilon 0.5 --values 3,9 --level 0.9",
    "analyze test --observed 34.21 --n 100 --p0 0.255 --mechanism laplace --epsilon 0.5",
    "analyze combine --values 2,7 --variances 17.834,35.669",
    "analyze postprocess --values 5,-2,7 --total 12 --variance 2 --total-variance 2",
    "safetab plan --moe 6,6,11,11,50,50,50 --stability 9 --gamma 0.1 --calibration paper",
    "bench list",
]


@pytest.mark.parametrize("line", README_FAST)
def test_readme_commands_fit_80_columns(line: str) -> None:
    assert problems(_run(line)) == []


def test_analyze_test_ends_with_a_conclusion() -> None:
    out = _run(README_FAST[10]).strip().splitlines()
    last = " ".join(out[-3:])
    assert "does not reject H0" in last
    assert "naive test" in last


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("columns") / "demo"
    out = _run(f"demo --persons 3000 --states DE,PR --seed 1 --out {root}")
    assert problems(out) == []
    return root


def test_release_commands_fit_80_columns(demo: Path, tmp_path: Path) -> None:
    release, data = demo / "release", demo / "input"
    for line in (
        f"synth --persons 2000 --states DE --out {tmp_path / 'synth'}",
        f"validate --data {data} --config {demo / 'parameters'}",
        f"semantics --release {release / 'release.json'}",
        f"analyze combine --release {release} --out {tmp_path / 'combined'}",
        f"analyze ci --release {release}",
        f"analyze postprocess --release {release}",
        f"ledger show --ledger {tmp_path / 'ledger.json'}",
    ):
        assert problems(_run(line)) == [], line


@pytest.mark.slow
@pytest.mark.parametrize(
    "line", ["safetab plan", "semantics --zcdp 2.63", "bench samplers --n 3000 --repeat 1"]
)
def test_slow_readme_commands_fit_80_columns(line: str) -> None:
    assert problems(_run(line)) == []


def test_the_checks_catch_the_old_output() -> None:
    """The bugs this file targets, as the old commands printed them."""
    assert problems("│ US  │ (COUNTY, 1) │ regions × iterati… │")
    assert problems("mechanism: {'mechanism': 'geometric', 'epsilon': 0.5}")
    assert problems("reps: None")
    assert problems("x" * 81)
    assert not problems("│ US  │ (COUNTY, 1) │ 3,221 × 1,163 │")
