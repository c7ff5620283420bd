"""Every production validation rule of SafeTab-H's inputs gets a located error through
``privtab safetab-h run``: exit 1, the file, line, column, value and rule named, no
traceback, nothing written (no folder, no run record)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privtab.cli import app

from .conftest import H_COLUMNS, TOY

runner = CliRunner()
HH = "household-records.txt"
T1 = "pop-group-totals.txt"
GOOD = "01|001|000001|0002|06|1001|1020|Null|Null|Null|Null|Null|Null|2020|1|2"


def _base(root: Path) -> tuple[Path, Path]:
    params, data = root / "params", root / "data"
    shutil.copytree(TOY / "input_dir_zcdp", params)
    data.mkdir()
    shutil.copy(TOY / "GRF-C.txt", data / "GRF-C.txt")
    shutil.copy(TOY / T1, data / T1)
    (data / HH).write_text(f"{H_COLUMNS}\n{GOOD}\n")
    return params, data


def _hh(line: str) -> Callable[[Path, Path], None]:
    def edit(_: Path, data: Path) -> None:
        with (data / HH).open("a") as fh:
            fh.write(line + "\n")

    return edit


def _field(**values: str) -> str:
    names = H_COLUMNS.split("|")
    fields = dict(zip(names, GOOD.split("|"), strict=True))
    fields.update(values)
    return "|".join(fields[n] for n in names)


def _t1(line: str) -> Callable[[Path, Path], None]:
    def edit(_: Path, data: Path) -> None:
        with (data / T1).open("a") as fh:
            fh.write(line + "\n")

    return edit


def _config(**kv: object) -> Callable[[Path, Path], None]:
    def edit(params: Path, _: Path) -> None:
        cfg = json.loads((params / "config.json").read_text())
        for k, v in kv.items():
            if v is None:
                del cfg[k]
            else:
                cfg[k] = v
        (params / "config.json").write_text(json.dumps(cfg))

    return edit


def _config_text(edit: Callable[[str], str | bytes]) -> Callable[[Path, Path], None]:
    """The config file's text (or bytes) replaced by ``edit`` of the production text."""

    def write(params: Path, _: Path) -> None:
        new = edit((params / "config.json").read_text())
        target = params / "config.json"
        target.write_bytes(new) if isinstance(new, bytes) else target.write_text(new)

    return write


def _budget_written_as(text: str) -> Callable[[str], str]:
    """The production text with the first budget's value written as ``text``."""

    def edit(config: str) -> str:
        key = '"privacy_budget_h_t3_level_1_usa":'
        start = config.index(key) + len(key)
        end = min(config.index(c, start) for c in ",}" if c in config[start:])
        return config[:start] + " " + text + config[end:]

    return edit


def _fifo(params: Path, _: Path) -> None:
    (params / "config.json").unlink()
    os.mkfifo(params / "config.json")


@dataclass(frozen=True)
class Bad:
    name: str
    edit: Callable[[Path, Path], None]
    kind: str
    file: str
    line: int | None
    column: str | None
    value: str | None


NEW = 3  # an appended household row (header = line 1, GOOD = line 2)
T1_NEW = 604  # an appended T1 row (the toy T1 has 602 rows)
CASES = [
    Bad("short id", _hh(_field(TABBLKCOU="01")), "malformed_id", HH, NEW, "TABBLKCOU", "01"),
    Bad("block", _hh(_field(TABBLK="0099")), "block_not_in_grfc", HH, NEW, "TABBLK",
        "010010000010099"),
    Bad("hhrace", _hh(_field(HHRACE="64")), "invalid_hhrace", HH, NEW, "HHRACE", "64"),
    Bad("hhrace 0", _hh(_field(HHRACE="00")), "invalid_hhrace", HH, NEW, "HHRACE", "00"),
    Bad("no race", _hh(_field(QRACE1="Null", QRACE2="Null")), "missing_race_code", HH, NEW,
        "QRACE1", "Null"),
    Bad("after null", _hh(_field(QRACE2="Null", QRACE3="1000")), "race_code_after_null", HH,
        NEW, "QRACE3", "1000"),
    Bad("race code", _hh(_field(QRACE1="10x1")), "invalid_race_code", HH, NEW, "QRACE1", "10x1"),
    Bad("unknown race", _hh(_field(QRACE1="9999")), "unknown_race_code", HH, NEW, "QRACE1",
        "9999"),
    Bad("repeat", _hh(_field(QRACE2="1001")), "duplicate_race_code", HH, NEW, "QRACE2", "1001"),
    Bad("qspan", _hh(_field(QSPAN="12")), "invalid_ethnicity_code", HH, NEW, "QSPAN", "12"),
    Bad("unknown qspan", _hh(_field(QSPAN="9999")), "unknown_ethnicity_code", HH, NEW, "QSPAN",
        "9999"),
    Bad("type", _hh(_field(HOUSEHOLD_TYPE="6")), "invalid_household_type", HH, NEW,
        "HOUSEHOLD_TYPE", "6"),
    Bad("tenure", _hh(_field(TEN="0")), "invalid_tenure", HH, NEW, "TEN", "0"),
    Bad("fields", _hh(GOOD + "|1"), "wrong_field_count", HH, NEW, None, None),
    # a malformed row is not "of another state" (left out unread): it is reported
    Bad("one field", _hh("x"), "wrong_field_count", HH, NEW, None, None),
    Bad("no state", _hh(_field(TABBLKST="0x")), "malformed_id", HH, NEW, "TABBLKST", "0x"),
    Bad("state 99", _hh(_field(TABBLKST="99")), "block_not_in_grfc", HH, NEW, "TABBLK", None),
    Bad("header", lambda _, d: (d / HH).write_text(H_COLUMNS.replace("TEN", "TENURE") + "\n"),
        "wrong_header", HH, None, "TEN", None),
    Bad("empty", lambda _, d: (d / HH).write_text(H_COLUMNS + "\n"), "no_households", HH, None,
        None, None),
    Bad("no run household", lambda _, d: (d / HH).write_text(
        H_COLUMNS + "\n" + _field(TABBLKST="72", TABBLKCOU="031", TABTRACTCE="050901",
                                  TABBLK="2040") + "\n"),
        "no_households_in_run", HH, None, None, None),
    Bad("t1 region", _t1("01x|STATE|0002|3"), "invalid_region_id", T1, T1_NEW, "REGION_ID",
        "01x"),
    Bad("t1 type", _t1("01|STATES|0002|3"), "invalid_region_type", T1, T1_NEW, "REGION_TYPE",
        "STATES"),
    Bad("t1 iteration", _t1("01|STATE|02|3"), "invalid_iteration_code", T1, T1_NEW,
        "ITERATION_CODE", "02"),
    Bad("t1 count", _t1("01|STATE|0002|3.5"), "invalid_count", T1, T1_NEW, "COUNT", "3.5"),
    Bad("t1 unique", _t1("1|USA|3080|9"), "duplicate_group", T1, T1_NEW, "REGION_ID",
        "also at"),
    Bad("t1 unknown", _t1("01|STATE|0999|3"), "unknown_iteration", T1, T1_NEW,
        "ITERATION_CODE", "0999"),
    Bad("t1 length", _t1("0100|COUNTY|0002|3"), "region_id_length", T1, T1_NEW, "REGION_ID",
        "0100 (COUNTY)"),
    Bad("t1 of another run", lambda _, d: (d / T1).write_text(
        "REGION_ID|REGION_TYPE|ITERATION_CODE|COUNT\n72|PR-STATE|0002|5\n"),
        "no_t1_groups", T1, None, None, None),
    Bad("no overlap", lambda _, d: (d / T1).write_text(
        "REGION_ID|REGION_TYPE|ITERATION_CODE|COUNT\n11|STATE|0071|5\n"),
        "no_overlap", T1, None, None, None),
    Bad("config key", _config(thresholds_h_t4=None), "missing_key", "config.json", None,
        "thresholds_h_t4", None),
    Bad("config t3", _config(thresholds_h_t3={"(USA, 1)": [5, 1, 9]}), "thresholds_not_increasing",
        "config.json", None, "thresholds_h_t3.(USA, 1)", "[5, 1, 9]"),
    Bad("config budget", _config(privacy_budget_h_t3_level_1_usa=-1), "negative_budget",
        "config.json", None, "privacy_budget_h_t3_level_1_usa", "-1"),
    Bad("config extra", _config(zero_suppression_chance=0.9), "unknown_key", "config.json",
        None, "zero_suppression_chance", "0.9"),
    # the config file read as every product's is (privtab.data.json_config): a number exact
    # arithmetic cannot finish on, deep nesting, a byte that is not UTF-8, a FIFO
    Bad("config 5000 digits", _config_text(_budget_written_as("1" * 5000)), "invalid_number",
        "config.json", None, "privacy_budget_h_t3_level_1_usa", "(5,000 characters)"),
    Bad("config exponent", _config_text(_budget_written_as("1e999999999")), "invalid_number",
        "config.json", None, "privacy_budget_h_t3_level_1_usa", "1e999999999"),
    Bad("config depth", _config_text(lambda _: "[" * 100_000 + "]" * 100_000), "invalid_json",
        "config.json", None, None, None),
    Bad("config latin-1", _config_text(lambda t: t.replace('"zcdp"', '"zcdp\xe9"').encode(
        "latin-1")), "invalid_utf8", "config.json", None, None, None),
    Bad("config fifo", _fifo, "not_a_file", "config.json", None, None, None),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_located_and_nothing_is_written(case: Bad, tmp_path: Path) -> None:
    params, data = _base(tmp_path)
    case.edit(params, data)
    out = tmp_path / "out"
    args = ["safetab-h", "run", "--config", str(params), "--data", str(data), "--out", str(out)]
    res = runner.invoke(app, [*args, "--insecure-no-noise", "--json"])
    assert res.exit_code == 1, res.output
    text = res.stderr if hasattr(res, "stderr") else res.output
    assert f"[{case.kind}]" in text, text
    assert case.file in text
    if case.line is not None:
        assert f"line {case.line}" in text, text
    if case.column is not None:
        label = "key" if case.file == "config.json" else "column"
        assert f"{label} {case.column}" in text, text
    if case.value is not None:
        assert case.value in text, text
    assert "Traceback" not in text
    assert not out.exists()
    assert not list(tmp_path.glob("*run-record*"))


def test_the_base_is_valid(tmp_path: Path) -> None:
    params, data = _base(tmp_path)
    out = tmp_path / "out"
    args = ["safetab-h", "run", "--config", str(params), "--data", str(data), "--out", str(out)]
    res = runner.invoke(app, [*args, "--insecure-no-noise", "--json"])
    assert res.exit_code == 0, res.output
    assert (out / "release.json").is_file()


def test_rows_of_other_states_are_left_out_as_production_s_readers_do(tmp_path: Path) -> None:
    """A household of state 08 (not in the GRF-C, not a state of the run) and a T1 place of
    state 22 are not errors: production's readers drop them before validating (the Census
    toy data holds both); the T1 rows are named in a warning."""
    params, data = _base(tmp_path)
    _hh("08|500|000300|0060|01|1000|Null|Null|Null|Null|Null|Null|Null|1000|1|4")(params, data)
    out = tmp_path / "out"
    args = ["safetab-h", "run", "--config", str(params), "--data", str(data), "--out", str(out)]
    record = tmp_path / "record.json"
    res = runner.invoke(app, [*args, "--insecure-no-noise", "--run-record", str(record)])
    assert res.exit_code == 0, res.output
    assert "lie outside the run's states" in res.output
    assert "PLACE 22833" in res.output
    # the household left out is said to the operator and counted in the run record only
    assert "1 household row(s) of household-records.txt lie in states outside" in res.output
    assert json.loads(record.read_text())["left_out"] == {HH: 1}
    assert "left_out" not in (out / "release.json").read_text()
