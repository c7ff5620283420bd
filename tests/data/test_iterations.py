"""The four reference files: the production files read unchanged, and every kind of defect."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from privtab.data import ReferenceData
from privtab.data.iterations import (
    CODE_TO_ITERATION_FILE,
    CODES_FILE,
    ETHNICITY_ITERATIONS_FILE,
    RACE_ITERATIONS_FILE,
    IterationKind,
)
from privtab.data.levels import Granularity

from .conftest import RejectFn, assert_problem


def test_production_counts(ref: ReferenceData) -> None:
    # census README: 1,755 codes, 14,088 code-to-iteration rows, 38 ethnicity iterations;
    # the race file has 3,016 iterations (the README's 3,017 counts its trailing blank line)
    assert len(ref.codes) == 1755
    assert len(ref.race_iterations()) == 3016
    assert len(ref.ethnicity_iterations()) == 38
    assert sum(len(i.codes) for i in ref.iterations.values()) == 14088
    assert ref.codes[9950] == "Not Hispanic (checkbox)"
    c2i = ref.code_to_iterations
    assert sum(len(v) for v in c2i.values()) == 14088
    assert "4015" in c2i[2011]  # Mexican
    assert all(2011 in ref.iterations[i].codes for i in c2i[2011])


def test_production_iteration_attributes(ref: ReferenceData) -> None:
    white = ref.iterations["1001"]
    assert (white.name, white.level, white.alone, white.detailed_only) == (
        "White alone",
        0,
        True,
        None,
    )
    european = ref.iterations["1002"]
    assert european.kind is IterationKind.RACE
    assert (european.level, european.alone, european.detailed_only, european.coarse_only) == (
        1,
        True,
        False,
        False,
    )
    mexican = ref.iterations["4015"]
    assert (mexican.kind, mexican.level, mexican.alone) == (IterationKind.ETHNICITY, 2, None)
    assert 2011 in mexican.codes
    assert not white.tabulated_at(Granularity.DETAILED)
    # domains of the four (level, granularity) combinations
    sizes = {(lv, g): len(ref.select(lv, g)) for lv in (1, 2) for g in Granularity}
    assert sizes == {
        (1, Granularity.DETAILED): 52,
        (1, Granularity.COARSE): 48,
        (2, Granularity.DETAILED): 2944,
        (2, Granularity.COARSE): 2150,
    }
    detailed_only = [i for i in ref.select(2, Granularity.DETAILED) if i.detailed_only]
    assert detailed_only
    assert not set(detailed_only) & set(ref.select(2, Granularity.COARSE))


def _append(path: Path, line: str) -> None:
    text = path.read_text().rstrip("\r\n")
    path.write_text(text + "\r\n" + line + "\r\n")


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_code_mapped_to_two_iterations_of_one_level(
    params: Path, data_dir: Path, reject: RejectFn
) -> None:
    # 1003 "Albanian alone" (LEVEL 2, ALONE) already holds code 1010; add it to 1004
    # "Alsatian alone" too: code 1010 would then be in two level-2 alone iterations
    mapping = params / CODE_TO_ITERATION_FILE
    rows = mapping.read_text().splitlines()
    _append(mapping, "1004|1010")
    err = reject(params / "config.json", data_dir)
    p = assert_problem(
        err,
        "code_in_two_iterations",
        file=CODE_TO_ITERATION_FILE,
        row=len(rows) + 1,  # the appended line (the header is line 1)
        column="RACE_ETH_CODE",
        value="1010",
    )
    assert "1003" in p.message
    assert "1004" in p.message
    assert "LEVEL=2" in p.message


@pytest.mark.parametrize(
    ("file", "old", "new", "kind", "column", "value"),
    [
        (
            RACE_ITERATIONS_FILE,
            "1002|European alone|1|True|False|False",
            "1002|European alone|1|Yes|False|False",
            "invalid_flag",
            "ALONE",
            "Yes",
        ),
        (
            RACE_ITERATIONS_FILE,
            "1002|European alone|1|True|False|False",
            "1002|European alone|7|True|False|False",
            "invalid_level",
            "LEVEL",
            "7",
        ),
        (
            RACE_ITERATIONS_FILE,
            "1002|European alone|1|True|False|False",
            "1002|European alone|1|True|Null|False",
            "inconsistent_flags",
            "DETAILED_ONLY",
            "Null",
        ),
        (
            RACE_ITERATIONS_FILE,
            "1001|White alone|0|True|Null|Null",
            "1001|White alone|0|True|False|Null",
            "inconsistent_flags",
            "DETAILED_ONLY",
            "False",
        ),
        (
            RACE_ITERATIONS_FILE,
            "1002|European alone|1|True|False|False",
            "1002|European alone|1|True|True|True",
            "inconsistent_flags",
            "COARSE_ONLY",
            "True",
        ),
        (
            RACE_ITERATIONS_FILE,
            "1002|European alone|1|True|False|False",
            "102|European alone|1|True|False|False",
            "invalid_iteration_code",
            "ITERATION_CODE",
            "102",
        ),
        (
            ETHNICITY_ITERATIONS_FILE,
            "4016|Central American|1|False|False",
            "1002|Central American|1|False|False",
            "duplicate_iteration",
            "ITERATION_CODE",
            "1002",
        ),
        (CODES_FILE, "1001|White", "0999|White", "invalid_code", "RACE_ETH_CODE", "0999"),
        (CODES_FILE, "1001|White", "1000|White", "duplicate_code", "RACE_ETH_CODE", "1000"),
    ],
)
def test_bad_iteration_rows(
    params: Path,
    data_dir: Path,
    reject: RejectFn,
    file: str,
    old: str,
    new: str,
    kind: str,
    column: str,
    value: str,
) -> None:
    path = params / file
    row = next(i for i, line in enumerate(path.read_text().splitlines()) if line == old)
    _replace(path, old, new)
    err = reject(params / "config.json", data_dir)
    p = assert_problem(err, kind, file=file, row=row + 1, column=column, value=value)
    assert "; rule: " in p.message, p.message  # every reference-file error names its rule


@pytest.mark.parametrize(
    ("line", "kind", "column", "value"),
    [
        ("9999|1000", "unknown_iteration", "ITERATION_CODE", "9999"),
        ("1003|1234", "unknown_code", "RACE_ETH_CODE", "1234"),
        ("1003|1010", "duplicate_mapping", "RACE_ETH_CODE", "1010"),
        ("1003|abc", "invalid_code", "RACE_ETH_CODE", "abc"),
    ],
)
def test_bad_mapping_rows(
    params: Path, data_dir: Path, reject: RejectFn, line: str, kind: str, column: str, value: str
) -> None:
    mapping = params / CODE_TO_ITERATION_FILE
    row = len(mapping.read_text().splitlines())
    _append(mapping, line)
    err = reject(params / "config.json", data_dir)
    p = assert_problem(
        err, kind, file=CODE_TO_ITERATION_FILE, row=row + 1, column=column, value=value
    )
    assert "; rule: " in p.message, p.message


def test_messages_say_what_is_wrong_and_the_rule(
    params: Path, data_dir: Path, reject: RejectFn
) -> None:
    """Issue 31: "an iteration cannot be both …" and "the same pair appears more than
    once" did not say which pair, where it was first, or what the rule is for."""
    _replace(
        params / RACE_ITERATIONS_FILE,
        "1002|European alone|1|True|False|False",
        "1002|European alone|1|True|True|True",
    )
    mapping = params / CODE_TO_ITERATION_FILE
    first = next(
        i for i, x in enumerate(mapping.read_text().splitlines(), start=1) if x == "1003|1010"
    )
    _append(mapping, "1003|1010")
    err = reject(params / "config.json", data_dir)
    flags = assert_problem(err, "inconsistent_flags", file=RACE_ITERATIONS_FILE, row=3)
    assert "DETAILED_ONLY and COARSE_ONLY are both True" in flags.message
    assert "rule: at most one of them is True" in flags.message
    dup = assert_problem(err, "duplicate_mapping", file=CODE_TO_ITERATION_FILE)
    assert "ITERATION_CODE 1003, RACE_ETH_CODE 1010" in dup.message
    assert f"(first on line {first})" in dup.message


@pytest.mark.parametrize(
    ("file", "edit", "kind"),
    [
        (CODE_TO_ITERATION_FILE, lambda lines: lines[:1], "no_rows"),
        (CODES_FILE, lambda lines: lines[:1], "no_rows"),
        (
            RACE_ITERATIONS_FILE,
            lambda lines: [lines[0], "1001|White\x00 alone|0|True|Null|Null"],
            "control_character",
        ),
        (
            CODE_TO_ITERATION_FILE,
            lambda lines: [x for x in lines if not x.startswith("1002|")],
            "empty_iteration",
        ),
    ],
)
def test_new_reference_rules(
    params: Path, data_dir: Path, reject: RejectFn, file: str, edit: Any, kind: str
) -> None:
    """No rows, a control character (a NUL in a name was accepted), a tabulated iteration
    no code maps to (a mapping file of only its header crashed the plan: stability 0)."""
    path = params / file
    path.write_text("\n".join(edit(path.read_text().splitlines())) + "\n")
    p = assert_problem(reject(params / "config.json", data_dir), kind)
    assert "; rule: " in p.message, p.message


def test_wrong_header_and_field_count(params: Path, data_dir: Path, reject: RejectFn) -> None:
    codes = params / CODES_FILE
    _replace(codes, "RACE_ETH_CODE|RACE_ETH_NAME", "CODE|RACE_ETH_NAME")
    _append(params / ETHNICITY_ITERATIONS_FILE, "4051|Extra|2|False")
    err = reject(params / "config.json", data_dir)
    p = assert_problem(err, "wrong_header", file=CODES_FILE, column="RACE_ETH_CODE")
    assert p.value == "CODE|RACE_ETH_NAME"
    assert_problem(err, "wrong_field_count", file=ETHNICITY_ITERATIONS_FILE, row=40)


def test_missing_reference_file(params: Path, data_dir: Path, reject: RejectFn) -> None:
    (params / RACE_ITERATIONS_FILE).unlink()
    assert_problem(
        reject(params / "config.json", data_dir), "missing_file", file=RACE_ITERATIONS_FILE
    )
