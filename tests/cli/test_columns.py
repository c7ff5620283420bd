"""The command line reads well in an 80-column terminal (issue 19, "A CLI that reads well").

With ``COLUMNS=80``, for the ``--help`` of every command and the human output of every
command (on small inputs; the heavy benchmarks excepted, each with its reason):

- no line of stdout is wider than 80 terminal cells;
- no table cell is cut to "…" (rich folds or wraps; a truncated value would lose digits);
- **no word is broken**: every word of every table title, header, cell and note the
  command printed appears whole on one line of its output (issue 31: the plan's
  thresholds folded as ``4971,19`` / ``971,149``, headers as ``stabili ty``); tables that
  cannot fit are printed as lists (:func:`privtab.cli._render.show`);
- a group's ``--help`` lists every command with its whole description (no "…");
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


def broken_words(shown: list[Any], text: str) -> list[str]:
    """The words of the tables (titles, headers, cells, notes) and lines a command
    showed that are not whole on one line of its output ``text``."""
    from privtab.report.text import Table

    lines = text.splitlines()
    words: set[str] = set()
    for item in shown:
        if isinstance(item, Table):
            texts = [item.title, *item.columns, *(c for r in item.rows for c in r), *item.notes]
        else:
            texts = [str(item)]
        # long paths (the test's own temporary folders) may fold; words may not
        words |= {w for t in texts for w in t.split() if cell_len(w) <= WIDTH - 8 and "/" not in w}
    return sorted(w for w in words if not any(w in line for line in lines))


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
    listed = res.stdout.split("Commands:", 1)[1] if "Commands:" in res.stdout else ""
    assert "…" not in listed, f"a command's description cut short:\n{res.stdout}"


def test_the_command_list_shows_whole_descriptions() -> None:
    """Issue 31: ``privtab --help`` cut every description with "…"."""
    # private on purpose: the description the command list must show in full
    from privtab.cli._render import describe_command

    root = typer.main.get_command(app)
    out = runner.invoke(app, ["--help"]).stdout
    flat = " ".join(out.split())
    for name, cmd in root.commands.items():  # type: ignore[attr-defined]
        assert describe_command(cmd) in flat, name


def run_at_80_columns(line: str) -> str:
    """Run a command; its human output must fit 80 columns without a broken word."""
    import privtab.cli._render as render

    shown: list[Any] = []
    real = render.show

    def record(tables: Any, lines: Any = (), head: Any = ()) -> None:
        tables = list(tables)
        shown.extend([*tables, *lines, *head])
        real(tables, lines, head)

    render.show = record  # type: ignore[assignment]
    try:
        res = runner.invoke(app, shlex.split(line))
    finally:
        render.show = real  # type: ignore[assignment]
    assert res.exit_code == 0, (line, res.output)
    assert broken_words(shown, res.stdout) == [], line
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
    assert problems(run_at_80_columns(line)) == []


def test_analyze_test_ends_with_a_conclusion() -> None:
    out = run_at_80_columns(README_FAST[10]).strip().splitlines()
    last = " ".join(out[-3:])
    assert "does not reject H0" in last
    assert "naive test" in last


@pytest.fixture(scope="module")
def demo(demo_de_pr: Path) -> Path:
    """The session's ``privtab demo`` (conftest.py), run through :func:`run_at_80_columns`."""
    assert problems((demo_de_pr / "demo.stdout").read_text(encoding="utf-8")) == []
    return demo_de_pr / "demo"


def release_lines(demo: Path, tmp: Path) -> list[str]:
    release, data, params = demo / "release", demo / "input", demo / "parameters"
    ledger = tmp / "ledger.json"
    return [
        f"synth --persons 2000 --states DE --out {tmp / 'synth'}",
        f"validate --data {data} --config {params}",
        f"validate-output {release}",
        f"safetab run --data {data} --config {params} --out {tmp / 'rel'} --ledger {ledger} "
        "--no-report --pld-grid 0.01 --dataset-id columns",
        f"ledger show --ledger {ledger}",
        f"ledger set-lifetime --rho 10 --ledger {ledger}",
        f"semantics --release {release / 'release.json'}",
        f"analyze combine --release {release} --out {tmp / 'combined'}",
        f"analyze ci --release {release}",
        f"analyze postprocess --release {release}",
        f"safetab plan --config {params} --pld-grid 0.01",
        f"safetab plan --config {params} --scope PR --pld-grid 0.01",
        "safetab accuracy --level '(COUNTY, 2)' --n 0,10,971,1000,5000",
        "safetab-h plan",
        "safetab-h accuracy --n 0,500,1000,5000",
        f"safetab-h run --data {data} --t1 {release} --out {tmp / 'h'} --seed 1 "
        "--no-report --pld-grid 0.01",
        f"safetab-h validate-output {tmp / 'h'}",
        "topdown plan",
        f"topdown run --data {data} --out {tmp / 'td'} --run us --seed 1 --nmf --no-report",
        f"topdown validate-output {tmp / 'td'} --grfc {data}",
        f"topdown postprocess --nmf {tmp / 'td' / 'nmf'} --out {tmp / 'td2'} --no-report",
        f"topdown gls --release {tmp / 'td'} --out {tmp / 'gls'} --to TRACT",
        f"analyze ci --release {tmp / 'gls'}",
        f"topdown accuracy --release {tmp / 'td'} --truth {data}",
        f"topdown replicates --release {tmp / 'td'} --n 2 --seed 1 --out {tmp / 'reps'}",
    ]


def test_release_commands_fit_80_columns(demo: Path, tmp_path: Path) -> None:
    for line in release_lines(demo, tmp_path):
        assert problems(run_at_80_columns(line)) == [], line


NOT_RUN = {
    "bench accounting": "a benchmark with peer libraries (minutes; make bench)",
    "bench invariants": "a benchmark (minutes; make bench)",
    "bench synth": "a benchmark (minutes; make bench)",
    "bench safetab": "a benchmark with Tumult in its own venv (make bench)",
    "bench floor": "a benchmark (minutes; make bench)",
    "bench scale": "a benchmark at 10^7+ persons",
    "bench all": "every benchmark",
    "bench render": "rewrites docs/benchmarks.md in the checkout",
    "bench safetab_h": "a benchmark (minutes at 10^6 households; make bench)",
    "bench topdown-state": "a benchmark on a whole synthetic state (minutes; make bench)",
    "bench topdown": "a benchmark of a synthetic nation with the generic-solver baseline (minutes)",
    "bench topdown-gls-round": "a benchmark on a whole synthetic state, twice (minutes)",
    "ledger settle": "needs a pending entry (a crashed run); tests/cli/test_ledger.py prints it",
}


def test_every_command_is_rendered_at_80_columns(tmp_path: Path) -> None:
    """Every command's human output is checked here (or in the slow list), but for the
    heavy ones listed with their reasons."""
    lines = README_FAST + SLOW + release_lines(tmp_path, tmp_path) + ["demo"]
    covered = {
        " ".join(p)
        for p in COMMANDS
        if p and any(" ".join(shlex.split(x)[: len(p)]) == " ".join(p) for x in lines)
    }
    leaves = {" ".join(p) for p in COMMANDS if p and not hasattr(_command(p), "commands")}
    assert leaves - covered - set(NOT_RUN) == set()


def _command(path: tuple[str, ...]) -> Any:
    cmd: Any = typer.main.get_command(app)
    for name in path:
        cmd = cmd.commands[name]
    return cmd


SLOW = ["safetab plan", "semantics --zcdp 2.63", "bench samplers --n 3000 --repeat 1"]


@pytest.mark.slow
@pytest.mark.parametrize("line", SLOW)
def test_slow_readme_commands_fit_80_columns(line: str) -> None:
    assert problems(run_at_80_columns(line)) == []


def test_the_checks_catch_the_old_output() -> None:
    """The bugs this file targets, as the old commands printed them."""
    assert problems("│ US  │ (COUNTY, 1) │ regions × iterati… │")
    assert problems("mechanism: {'mechanism': 'geometric', 'epsilon': 0.5}")
    assert problems("reps: None")
    assert problems("x" * 81)
    assert not problems("│ US  │ (COUNTY, 1) │ 3,221 × 1,163 │")
