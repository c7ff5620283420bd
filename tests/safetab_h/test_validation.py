"""Output validation rejects tampered SafeTab-H folders, every table, naming file, line
and rule — production validated only T03004 and T04002, after writing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from privtab.publish.validation import OutputValidationError
from privtab.random import SeededSource
from privtab.safetab_h.inputs import load_domain
from privtab.safetab_h.run import run_release
from privtab.safetab_h.validation import OutputRulesH, validate_output, validate_paths
from privtab.tabulate.context import RunOptions

TABLES = ["t3/T03001", "t3/T03002", "t3/T03003", "t3/T03004", "t4/T04001", "t4/T04002"]
PART = "part-00000-us-c000.csv"

pytestmark = pytest.mark.filterwarnings("ignore::privtab.mechanisms.InsecureReleaseWarning")


@pytest.fixture(scope="module")
def release(generated: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    params, data = generated
    out = tmp_path_factory.mktemp("val") / "rel"
    opts = RunOptions(source=SeededSource(5), allow_insecure=True, report=False)
    run_release(params, data, out, opts)
    return out


def _copy(release: Path, tmp: Path) -> Path:
    dst = tmp / "rel"
    shutil.copytree(release, dst)
    return dst


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(lines) + "\n")


def _problems(folder: Path, **kw: object) -> list[tuple[str, str, int | None]]:
    with pytest.raises(OutputValidationError) as err:
        validate_output(folder, **kw)  # type: ignore[arg-type]
    return [(p.kind, Path(p.file).name, p.row) for p in err.value.problems]


def test_the_release_is_valid_with_every_check(release: Path, generated: tuple[Path, Path]) -> None:
    params, data = generated
    cfg, groups, plans = load_domain(params, data)
    res = validate_output(release, rules=OutputRulesH.from_config(cfg), groups=groups, plans=plans)
    assert {"domain", "stat_level", "missing_group", "marginal_sum", "cell_table"} <= set(
        res.checks
    )
    assert validate_paths(release, config=params, data=data).checks


@pytest.mark.parametrize("table", TABLES)
def test_every_table_a_bad_value_is_named(release: Path, tmp_path: Path, table: str) -> None:
    d = _copy(release, tmp_path)
    lines = _lines(d / table / PART)
    fields = lines[1].split("|")
    fields[1] = "COUNTRY"
    lines[1] = "|".join(fields)
    _write(d / table / PART, lines)
    assert ("pattern", PART, 2) in _problems(d)


@pytest.mark.parametrize("table", TABLES)
def test_every_table_a_changed_count_or_row_is_named(
    release: Path, tmp_path: Path, table: str
) -> None:
    """A marginal table: change a count (``marginal_sum``); a one-row table: drop a
    group's row into another cell (``cell_table``) — and either way the companion no
    longer matches when a key changes."""
    d = _copy(release, tmp_path)
    lines = _lines(d / table / PART)
    fields = lines[1].split("|")
    multi = table.endswith(("T03002", "T03003", "T03004", "T04002"))
    if multi:
        fields[4] = str(int(fields[4]) + 1)  # the first row of a group is its total (cell 0)
        kind = "marginal_sum"
    else:
        fields[3] = "1"
        kind = "cell_table"
    lines[1] = "|".join(fields)
    _write(d / table / PART, lines)
    got = _problems(d)
    assert any(k == kind and f == PART for k, f, _ in got), got


@pytest.mark.parametrize("table", TABLES)
def test_every_table_structure_is_checked(release: Path, tmp_path: Path, table: str) -> None:
    d = _copy(release, tmp_path)
    lines = _lines(d / table / PART)
    _write(d / table / PART, [*lines, lines[1], lines[2] + "|7"])  # a repeat, a long line
    got = _problems(d)
    n = len(lines)
    assert ("duplicate", PART, n + 1) in got
    assert ("field_count", PART, n + 2) in got


def test_a_group_in_two_tables_and_a_wrong_header(release: Path, tmp_path: Path) -> None:
    d = _copy(release, tmp_path)
    one = _lines(d / "t3/T03001" / PART)
    four = _lines(d / "t3/T03004" / PART)
    key = "|".join(four[1].split("|")[:3])
    _write(d / "t3/T03001" / PART, [*one, f"{key}|0|5"])
    two = _lines(d / "t4/T04002" / PART)
    _write(d / "t4/T04002" / PART, ["REGION_ID|REGION_TYPE|ITERATION_CODE|CELL|COUNT", *two[1:]])
    got = _problems(d)
    assert any(k == "one_table" for k, _, _ in got)
    assert ("header", PART, 1) in got


def test_negative_counts_and_the_state_filter(release: Path, tmp_path: Path) -> None:
    d = _copy(release, tmp_path)
    lines = _lines(d / "t3/T03002" / PART)
    for i, line in enumerate(lines[1:], start=1):
        f = line.split("|")
        if f[1] == "COUNTY":
            lines[i] = "|".join(["44001", *f[1:4], "-1"])
            break
    _write(d / "t3/T03002" / PART, lines)
    rules = OutputRulesH(("01", "02", "11", "72"), allow_negative_counts=False)
    kinds = {k for k, _, _ in _problems(d, rules=rules)}
    assert {"negative_count", "state_filter"} <= kinds


def test_the_domain_checks_need_the_t1(
    release: Path, tmp_path: Path, generated: tuple[Path, Path]
) -> None:
    """A group not in T1, a group in the table its T1 count does not select, a missing
    group: each named."""
    params, data = generated
    d = _copy(release, tmp_path)
    lines = _lines(d / "t4/T04001" / PART)
    moved = lines.pop(1)  # T04001 → missing; and put into T04002 as a whole table
    _write(d / "t4/T04001" / PART, [*lines, "01|STATE|0914|0|3"])
    key = "|".join(moved.split("|")[:3])
    t2 = _lines(d / "t4/T04002" / PART)
    _write(d / "t4/T04002" / PART, [*t2, f"{key}|0|3", f"{key}|1|1", f"{key}|2|1", f"{key}|3|1"])
    _, groups, plans = load_domain(params, data)
    got = _problems(d, groups=groups, plans=plans)
    kinds = {k for k, _, _ in got}
    assert {"domain", "stat_level", "companion"} <= kinds, got
    shutil.rmtree(d)
    d = _copy(release, tmp_path)
    lines = _lines(d / "t3/T03001" / PART)
    _write(d / "t3/T03001" / PART, lines[:1] + lines[2:])
    got = _problems(d, groups=groups, plans=plans)
    assert any(k == "missing_group" for k, _, _ in got)


def test_companion_and_layout(release: Path, tmp_path: Path) -> None:
    d = _copy(release, tmp_path)
    (d / "t4-error.parquet").unlink()
    shutil.rmtree(d / "t3" / "T03003")
    got = _problems(d)
    assert ("companion", "t4-error.parquet", None) in got
    assert ("layout", "T03003", None) in got
