"""Every bad input gets one located error, the documented exit code, no traceback, nothing
written — through ``privtab safetab run`` and, with the same message, ``privtab validate``
(issue 16, acceptance). And the opposite direction: what ``validate`` accepts, ``run`` runs.

Each class below is a small mutation of a valid base (the production parameters, the toy
GRF-C and five valid persons); the table states the problem kind, the file, the line (the
header is line 1), the column (or config key) and the value the message must name. The
commands run in-process (typer's CliRunner); a few subprocess cases check the real
process (exit code, stderr) end to end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from privtab.cli import app
from privtab.data import production_config_dir, toy_dataset_dir
from privtab.data.iterations import REFERENCE_FILES
from tests.data.conftest import HEADER, person_line, snapshot

runner = CliRunner()
PERSONS = "person-records.txt"
GRFC = "GRF-C.txt"
CONFIG = "config.json"
BASE_PERSONS = [
    person_line(),
    person_line(QAGE="000", QSEX="2", HOUSEHOLDER="False", TABBLK="0002"),
    person_line(QAGE="115", QRACE1="3000", QRACE2="1000", CENRACE="07", QSPAN="2011"),
    person_line(TABBLKST="72", TABBLKCOU="031", TABTRACTCE="050901", TABBLK="2040"),
    person_line(TABBLKST="11", TABBLKCOU="001", TABTRACTCE="000100", TABBLK="3004"),
]
NEW_PERSON_LINE = len(BASE_PERSONS) + 2  # an appended person row (the header is line 1)
GRFC_ROWS = (toy_dataset_dir() / GRFC).read_text().splitlines()
NEW_GRFC_LINE = len(GRFC_ROWS) + 1
GOOD_GRFC = "01|001|000001|0099|22800|0001"


KEPT_BUDGETS = ("privacy_budget_p_level_2_usa", "privacy_budget_p_level_1_pr_state")
"""The base config keeps these production budgets and sets the others to 0 (levels off), so
that a run plans two levels, not twenty (the plans are not what this test is about)."""


def _base(root: Path) -> tuple[Path, Path]:
    params, data = root / "params", root / "data"
    params.mkdir()
    data.mkdir()
    for f in production_config_dir().iterdir():
        if f.is_file():
            shutil.copy(f, params / f.name)
            (params / f.name).chmod(0o644)
    cfg = json.loads((params / CONFIG).read_text())
    for k in cfg:
        if k.startswith("privacy_budget_p_level") and k not in KEPT_BUDGETS:
            cfg[k] = 0
    (params / CONFIG).write_text(json.dumps(cfg))
    shutil.copy(toy_dataset_dir() / GRFC, data / GRFC)
    (data / PERSONS).write_text(HEADER + "\n" + "".join(x + "\n" for x in BASE_PERSONS))
    return params, data


@pytest.fixture(autouse=True)
def _reference_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Read each distinct set of reference files once per test process (by content): the
    1,755 codes and 14,088 mappings take a second per read on a loaded machine, and the
    reference checks have their own tests (tests/data/test_iterations.py)."""
    import hashlib

    import privtab.data.inputs as inputs
    from privtab.data.errors import ProblemLog

    real = inputs.load_reference

    def cached(directory: str | Path, log: ProblemLog) -> Any:
        d = Path(directory)
        h = hashlib.sha256()
        for name in sorted(REFERENCE_FILES):
            h.update(name.encode())
            h.update((d / name).read_bytes() if (d / name).is_file() else b"<not a file>")
        key = h.hexdigest()
        if key not in _REFERENCE_CACHE:
            own = ProblemLog()
            _REFERENCE_CACHE[key] = (real(d, own), own)
        ref, problems = _REFERENCE_CACHE[key]
        log.extend(problems)
        return ref

    monkeypatch.setattr(inputs, "load_reference", cached)


_REFERENCE_CACHE: dict[str, Any] = {}
Mutate = Callable[[Path, Path], None]


def add_person(**fields: str) -> Mutate:
    def go(params: Path, data: Path) -> None:
        with (data / PERSONS).open("a") as fh:
            fh.write(person_line(**fields) + "\n")

    return go


def append_bytes(name: str, raw: bytes, where: str = "data") -> Mutate:
    def go(params: Path, data: Path) -> None:
        with ((data if where == "data" else params) / name).open("ab") as fh:
            fh.write(raw)

    return go


def write_bytes(name: str, raw: bytes) -> Mutate:
    def go(params: Path, data: Path) -> None:
        (data / name).write_bytes(raw)

    return go


def persons_header(header: str) -> Mutate:
    def go(params: Path, data: Path) -> None:
        lines = (data / PERSONS).read_text().splitlines()
        (data / PERSONS).write_text("\n".join([header, *lines[1:]]) + "\n")

    return go


def config(**changes: Any) -> Mutate:
    """Set (or, with the value ``DROP``, remove) keys of config.json."""

    def go(params: Path, data: Path) -> None:
        cfg = json.loads((params / CONFIG).read_text())
        for k, v in changes.items():
            if v is DROP:
                cfg.pop(k)
            else:
                cfg[k] = v
        (params / CONFIG).write_text(json.dumps(cfg))

    return go


def config_text(old: str, new: str) -> Mutate:
    def go(params: Path, data: Path) -> None:
        text = (params / CONFIG).read_text()
        assert old in text
        (params / CONFIG).write_text(text.replace(old, new, 1))

    return go


def thresholds(key: str, value: Any) -> Mutate:
    def go(params: Path, data: Path) -> None:
        cfg = json.loads((params / CONFIG).read_text())
        if value is DROP:
            cfg["thresholds_p"].pop(key)
        else:
            cfg["thresholds_p"][key] = value
        (params / CONFIG).write_text(json.dumps(cfg))

    return go


def all_budgets(value: Any) -> Mutate:
    def go(params: Path, data: Path) -> None:
        cfg = json.loads((params / CONFIG).read_text())
        for k in cfg:
            if k.startswith("privacy_budget_p_level"):
                cfg[k] = value
        (params / CONFIG).write_text(json.dumps(cfg))

    return go


def remove(name: str, where: str = "data") -> Mutate:
    def go(params: Path, data: Path) -> None:
        ((data if where == "data" else params) / name).unlink()

    return go


def both(*fs: Mutate) -> Mutate:
    def go(params: Path, data: Path) -> None:
        for f in fs:
            f(params, data)

    return go


DROP = object()


def replace_file(name: str, kind: str, where: str = "data") -> Mutate:
    """Replace an input by something that is not a regular file (or a broken link)."""

    def go(params: Path, data: Path) -> None:
        f = (data if where == "data" else params) / name
        f.unlink()
        if kind == "dir":
            f.mkdir()
        elif kind == "loop":
            f.symlink_to(f)
        elif kind == "dangling":
            f.symlink_to(f.parent / "no-such-target")
        elif kind == "fifo":
            os.mkfifo(f)
        elif kind == "devzero":
            f.symlink_to("/dev/zero")

    return go


def edit_bytes(name: str, edit: Callable[[bytes], bytes], where: str = "data") -> Mutate:
    def go(params: Path, data: Path) -> None:
        f = (data if where == "data" else params) / name
        f.write_bytes(edit(f.read_bytes()))

    return go


def to_parquet(name: str, edit: Callable[[pl.DataFrame], pl.DataFrame]) -> Mutate:
    """The text file ``name`` as Parquet (with ``edit`` applied), the text file removed."""

    def go(params: Path, data: Path) -> None:
        txt = data / name
        edit(pl.read_csv(txt, separator="|", infer_schema=False)).write_parquet(
            txt.with_suffix(".parquet")
        )
        txt.unlink()

    return go


def reference_rows(name: str, keep: Callable[[str], bool]) -> Mutate:
    """Keep the header and the rows of reference file ``name`` for which ``keep`` holds."""

    def go(params: Path, data: Path) -> None:
        lines = (params / name).read_text().splitlines()
        (params / name).write_text("\n".join([lines[0], *filter(keep, lines[1:])]) + "\n")

    return go


B2 = '"privacy_budget_p_level_2_usa": 2.134'
MAPPING = "race-and-ethnicity-code-to-iteration.txt"
RACE_IT = "race-characteristic-iterations.txt"


@dataclass(frozen=True)
class Case:
    """A class of bad input and what its message must name (None: no such part)."""

    mutate: Mutate
    kind: str
    file: str
    line: int | None = None
    column: str | None = None
    value: str | None = None
    code: int = 1


P, L = PERSONS, NEW_PERSON_LINE
CASES: dict[str, Case] = {
    # --- person records: every column
    "age_not_integer": Case(add_person(QAGE="abc"), "invalid_age", P, L, "QAGE", "abc"),
    "age_negative": Case(add_person(QAGE="-1"), "invalid_age", P, L, "QAGE", "-1"),
    "age_empty": Case(add_person(QAGE=""), "invalid_age", P, L, "QAGE", ""),
    "age_4_digits": Case(add_person(QAGE="0115"), "invalid_age", P, L, "QAGE", "0115"),
    "age_116": Case(add_person(QAGE="116"), "age_out_of_range", P, L, "QAGE", "116"),
    "age_unicode_digits": Case(add_person(QAGE="٢٨"), "invalid_age", P, L, "QAGE", "٢٨"),
    "sex_3": Case(add_person(QSEX="3"), "invalid_sex", P, L, "QSEX", "3"),
    "sex_empty": Case(add_person(QSEX=""), "invalid_sex", P, L, "QSEX", ""),
    "householder": Case(
        add_person(HOUSEHOLDER="true"), "invalid_householder", P, L, "HOUSEHOLDER", "true"
    ),
    "state_1_digit": Case(add_person(TABBLKST="1"), "malformed_id", P, L, "TABBLKST", "1"),
    "state_letters": Case(add_person(TABBLKST="0A"), "malformed_id", P, L, "TABBLKST", "0A"),
    "county": Case(add_person(TABBLKCOU="01"), "malformed_id", P, L, "TABBLKCOU", "01"),
    "tract": Case(add_person(TABTRACTCE="12345"), "malformed_id", P, L, "TABTRACTCE", "12345"),
    "block": Case(add_person(TABBLK="001"), "malformed_id", P, L, "TABBLK", "001"),
    "block_not_in_grfc": Case(
        add_person(TABBLK="9999"), "block_not_in_grfc", P, L, "TABBLK", "010010000019999"
    ),
    "cenrace_64": Case(add_person(CENRACE="64"), "invalid_cenrace", P, L, "CENRACE", "64"),
    "cenrace_00": Case(add_person(CENRACE="00"), "invalid_cenrace", P, L, "CENRACE", "00"),
    "cenrace_1": Case(add_person(CENRACE="1"), "invalid_cenrace", P, L, "CENRACE", "1"),
    "race1_null": Case(add_person(QRACE1="Null"), "missing_race_code", P, L, "QRACE1", "Null"),
    "race1_leading_0": Case(add_person(QRACE1="0123"), "invalid_race_code", P, L, "QRACE1"),
    "race1_unknown": Case(add_person(QRACE1="1011"), "unknown_race_code", P, L, "QRACE1", "1011"),
    "race_after_null": Case(
        add_person(QRACE3="1010"), "race_code_after_null", P, L, "QRACE3", "1010"
    ),
    "race_duplicate": Case(
        add_person(QRACE2="1000"), "duplicate_race_code", P, L, "QRACE2", "1000"
    ),
    "race_lowercase_null": Case(
        add_person(QRACE2="null"), "invalid_race_code", P, L, "QRACE2", "null"
    ),
    **{
        f"race{i}_bad": Case(
            add_person(**{f"QRACE{j}": "1010" for j in range(2, i)}, **{f"QRACE{i}": "x"}),
            "invalid_race_code",
            P,
            L,
            f"QRACE{i}",
            "x",
        )
        for i in range(3, 9)
    },
    "too_many_races": Case(
        both(config(max_race_codes=2), add_person(QRACE2="1010", QRACE3="1020")),
        "too_many_race_codes",
        P,
        L,
        "QRACE3",
        "3",
    ),
    "qspan_short": Case(add_person(QSPAN="12"), "invalid_ethnicity_code", P, L, "QSPAN", "12"),
    "qspan_null": Case(add_person(QSPAN="Null"), "invalid_ethnicity_code", P, L, "QSPAN", "Null"),
    "qspan_unknown": Case(
        add_person(QSPAN="9999"), "unknown_ethnicity_code", P, L, "QSPAN", "9999"
    ),
    # --- person records: lines, encodings, headers, files
    "missing_fields": Case(
        append_bytes(P, "|".join(person_line().split("|")[:-2]).encode() + b"\n"),
        "wrong_field_count",
        P,
        L,
        "QRACE8",
    ),
    "extra_field": Case(
        append_bytes(P, (person_line() + "|1\n").encode()), "wrong_field_count", P, L
    ),
    "non_utf8_row": Case(
        append_bytes(P, person_line(QAGE="AGE").replace("AGE", "2\xff").encode("latin-1") + b"\n"),
        "invalid_utf8",
        P,
        L,
        "QAGE",
    ),
    "non_utf8_header": Case(
        write_bytes(P, HEADER.replace("QAGE", "QAG\xc9").encode("latin-1") + b"\n"),
        "invalid_utf8",
        P,
        1,
    ),
    "unit_separator": Case(
        append_bytes(P, person_line(QAGE="2\x1f8").encode() + b"\n"), "unreadable", P, L
    ),
    "header_missing_column": Case(
        persons_header(HEADER.replace("|QSPAN", "")), "wrong_header", P, column="QSPAN"
    ),
    "header_extra_column": Case(
        persons_header(HEADER + "|EXTRA"), "wrong_header", P, column="EXTRA"
    ),
    "header_repeated_column": Case(
        persons_header(HEADER.replace("QSEX", "QAGE")), "wrong_header", P, column="QSEX"
    ),
    "header_reordered": Case(
        persons_header(HEADER.replace("QAGE|QSEX", "QSEX|QAGE")), "wrong_header", P
    ),
    "header_lowercase": Case(persons_header(HEADER.lower()), "wrong_header", P, column="QAGE"),
    "empty_person_file": Case(write_bytes(P, b""), "empty_file", P, 1),
    "header_only": Case(write_bytes(P, (HEADER + "\n").encode()), "no_persons", P),
    "header_and_blank_lines": Case(write_bytes(P, (HEADER + "\n\n\r\n").encode()), "no_persons", P),
    "no_person_file": Case(remove(P), "missing_file", P),
    "txt_and_parquet": Case(
        lambda p, d: shutil.copy(d / P, d / "person-records.parquet"), "ambiguous_input", "data"
    ),
    "not_parquet": Case(
        both(remove(P), write_bytes("person-records.parquet", b"not parquet")),
        "unreadable",
        "person-records.parquet",
    ),
    "parquet_missing_column": Case(
        lambda p, d: (
            pl.read_csv(d / P, separator="|", infer_schema=False)
            .drop("QSPAN")
            .write_parquet(d / "person-records.parquet"),
            (d / P).unlink(),
        ),
        "wrong_header",
        "person-records.parquet",
        column="QSPAN",
    ),
    # --- GRF-C: every column, lines, files
    **{
        f"grfc_{col.lower()}": Case(
            append_bytes(GRFC, f"{GOOD_GRFC.replace(old, new, 1)}\n".encode()),
            "malformed_id",
            GRFC,
            NEW_GRFC_LINE,
            col,
            new.strip("|"),
        )
        for col, old, new in [
            ("TABBLKST", "01|", "1|"),
            ("TABBLKCOU", "|001|", "|01|"),
            ("TABTRACTCE", "|000001|", "|00001|"),
            ("TABBLK", "|0099|", "|099|"),
            ("PLACEFP", "|22800|", "|2280|"),
            ("AIANNHCE", "|0001", "|01"),
        ]
    },
    "grfc_unknown_state": Case(
        append_bytes(GRFC, b"03|001|000001|0099|22800|0001\n"),
        "unknown_state",
        GRFC,
        NEW_GRFC_LINE,
        "TABBLKST",
        "03",
    ),
    "grfc_duplicate_block": Case(
        append_bytes(GRFC, (GRFC_ROWS[1] + "\n").encode()),
        "duplicate_block",
        GRFC,
        NEW_GRFC_LINE,
        "TABBLK",
    ),
    "grfc_short_line": Case(
        append_bytes(GRFC, b"01|001|000001|0099|22800\n"),
        "wrong_field_count",
        GRFC,
        NEW_GRFC_LINE,
        "AIANNHCE",
    ),
    "grfc_non_utf8": Case(
        append_bytes(GRFC, b"01|001|000001|0099|2280\xe9|0001\n"),
        "invalid_utf8",
        GRFC,
        NEW_GRFC_LINE,
        "PLACEFP",
    ),
    "grfc_header": Case(
        write_bytes(GRFC, b"TABBLKST|TABBLKCOU|TABTRACTCE|TABBLK|PLACEFP\n"),
        "wrong_header",
        GRFC,
        column="AIANNHCE",
    ),
    "grfc_no_blocks": Case(write_bytes(GRFC, (GRFC_ROWS[0] + "\n").encode()), "empty_file", GRFC),
    "grfc_missing": Case(remove(GRFC), "missing_file", GRFC),
    # --- config.json: every key
    "config_not_json": Case(config_text('"run_us": true', '"run_us": tru'), "invalid_json", CONFIG),
    "config_not_object": Case(lambda p, d: (p / CONFIG).write_text("[]"), "invalid_json", CONFIG),
    "config_duplicate_key": Case(
        config_text('"run_us": true', '"run_us": true, "run_us": true'),
        "duplicate_key",
        CONFIG,
        column="run_us",
    ),
    "config_unknown_key": Case(config(extra=1), "unknown_key", CONFIG, column="extra", value="1"),
    "config_missing_key": Case(
        config(privacy_defn=DROP), "missing_key", CONFIG, column="privacy_defn"
    ),
    "config_missing_file": Case(remove(CONFIG, "params"), "missing_file", CONFIG),
    "privacy_defn": Case(
        config(privacy_defn="rdp"), "invalid_value", CONFIG, column="privacy_defn"
    ),
    "budget_negative": Case(
        config(privacy_budget_p_level_1_usa=-0.1),
        "negative_budget",
        CONFIG,
        column="privacy_budget_p_level_1_usa",
        value="-0.1",
    ),
    "budget_string": Case(
        config(privacy_budget_p_level_1_usa="0.1"),
        "invalid_type",
        CONFIG,
        column="privacy_budget_p_level_1_usa",
    ),
    "budget_bool": Case(
        config(privacy_budget_p_level_1_usa=True),
        "invalid_type",
        CONFIG,
        column="privacy_budget_p_level_1_usa",
    ),
    **{
        f"budget_{name}": Case(
            config_text(
                '"privacy_budget_p_level_2_usa": 2.134', f'"privacy_budget_p_level_2_usa": {v}'
            ),
            kind,
            CONFIG,
            column="privacy_budget_p_level_2_usa",
            value=shown,
        )
        for name, v, kind, shown in [
            ("1e400", "1e400", "out_of_range", "1E+400"),
            ("1e30", "1e30", "out_of_range", "1E+30"),
            ("1e-30", "1e-30", "out_of_range", "1E-30"),
            ("1e-13", "1e-13", "out_of_range", "1E-13"),
            ("infinity", "Infinity", "invalid_type", "Infinity"),
            ("nan", "NaN", "invalid_type", "NaN"),
        ]
    },
    "all_budgets_zero": Case(all_budgets(0), "no_budget", CONFIG, column="run_us"),
    "stage1_zero": Case(
        config(privacy_budget_p_stage_1_fraction=0),
        "out_of_range",
        CONFIG,
        column="privacy_budget_p_stage_1_fraction",
    ),
    "stage1_above_1": Case(
        config(privacy_budget_p_stage_1_fraction=1.5),
        "out_of_range",
        CONFIG,
        column="privacy_budget_p_stage_1_fraction",
    ),
    "stage1_string": Case(
        config(privacy_budget_p_stage_1_fraction="0.1"),
        "invalid_type",
        CONFIG,
        column="privacy_budget_p_stage_1_fraction",
    ),
    "thresholds_fractional": Case(
        thresholds("(USA, 1)", [0.1, 0.5, 0.9]),
        "invalid_type",
        CONFIG,
        column="thresholds_p.(USA, 1)",
        value="[0.1, 0.5, 0.9]",
    ),
    "thresholds_equal": Case(
        thresholds("(USA, 1)", [5, 5, 9]),
        "thresholds_not_increasing",
        CONFIG,
        column="thresholds_p.(USA, 1)",
    ),
    "thresholds_two": Case(
        thresholds("(USA, 1)", [5, 9]), "thresholds_count", CONFIG, column="thresholds_p.(USA, 1)"
    ),
    "thresholds_huge": Case(
        thresholds("(USA, 1)", [5, 9, 10**400]),
        "invalid_number",  # 401 digits: refused before any arithmetic on it
        CONFIG,
        column="thresholds_p.(USA, 1)",
    ),
    "thresholds_missing_level": Case(
        thresholds("(TRACT, 2)", DROP), "missing_key", CONFIG, column="thresholds_p.(TRACT, 2)"
    ),
    "thresholds_unknown_level": Case(
        thresholds("(BLOCK, 1)", [1, 2, 3]),
        "unknown_key",
        CONFIG,
        column="thresholds_p.(BLOCK, 1)",
    ),
    "thresholds_not_object": Case(
        config(thresholds_p=[1, 2, 3]), "invalid_type", CONFIG, column="thresholds_p"
    ),
    "max_race_codes_0": Case(
        config(max_race_codes=0), "out_of_range", CONFIG, column="max_race_codes", value="0"
    ),
    "max_race_codes_9": Case(
        config(max_race_codes=9), "out_of_range", CONFIG, column="max_race_codes", value="9"
    ),
    "max_race_codes_fraction": Case(
        config(max_race_codes=2.5), "invalid_type", CONFIG, column="max_race_codes"
    ),
    "zero_suppression_1": Case(
        config(zero_suppression_chance=1), "out_of_range", CONFIG, column="zero_suppression_chance"
    ),
    "allow_negative_string": Case(
        config(allow_negative_counts="yes"),
        "invalid_type",
        CONFIG,
        column="allow_negative_counts",
    ),
    "no_run": Case(config(run_us=False, run_pr=False), "no_run", CONFIG, column="run_us"),
    "state_filter_unknown": Case(
        config(state_filter_us=["01", "99"]),
        "invalid_value",
        CONFIG,
        column="state_filter_us",
        value="99",
    ),
    "state_filter_pr": Case(
        config(state_filter_us=["01", "72"]), "invalid_value", CONFIG, column="state_filter_us"
    ),
    "state_filter_duplicate": Case(
        config(state_filter_us=["01", "01"]), "duplicate_value", CONFIG, column="state_filter_us"
    ),
    "state_filter_empty": Case(
        config(state_filter_us=[]), "invalid_value", CONFIG, column="state_filter_us"
    ),
    "state_filter_not_list": Case(
        config(state_filter_us="01"), "invalid_type", CONFIG, column="state_filter_us"
    ),
    "reader": Case(config(reader="spark"), "invalid_value", CONFIG, column="reader"),
    # --- reference files
    "codes_bad_code": Case(
        append_bytes("race-and-ethnicity-codes.txt", b"0999|Bad\n", "params"),
        "invalid_code",
        "race-and-ethnicity-codes.txt",
        column="RACE_ETH_CODE",
        value="0999",
    ),
    "codes_non_utf8": Case(
        append_bytes("race-and-ethnicity-codes.txt", b"9998|Caf\xe9\n", "params"),
        "invalid_utf8",
        "race-and-ethnicity-codes.txt",
    ),
    "iteration_level": Case(
        append_bytes(
            "race-characteristic-iterations.txt", b"9901|X alone|7|True|False|False\n", "params"
        ),
        "invalid_level",
        "race-characteristic-iterations.txt",
        column="LEVEL",
        value="7",
    ),
    "mapping_unknown_code": Case(
        append_bytes("race-and-ethnicity-code-to-iteration.txt", b"1003|1234\n", "params"),
        "unknown_code",
        "race-and-ethnicity-code-to-iteration.txt",
        column="RACE_ETH_CODE",
        value="1234",
    ),
    "reference_missing": Case(
        remove("ethnicity-characteristic-iterations.txt", "params"),
        "missing_file",
        "ethnicity-characteristic-iterations.txt",
    ),
    # --- issue 31: inputs that gave a traceback, a hang or a silent acceptance
    "parquet_list_column": Case(
        to_parquet(P, lambda df: df.with_columns(pl.concat_list("QAGE").alias("QAGE"))),
        "wrong_type",
        "person-records.parquet",
        column="QAGE",
        value="List(String)",
    ),
    "parquet_struct_column": Case(
        to_parquet(P, lambda df: df.with_columns(pl.struct("QRACE1").alias("QRACE1"))),
        "wrong_type",
        "person-records.parquet",
        column="QRACE1",
    ),
    "grfc_parquet_list_column": Case(
        to_parquet(GRFC, lambda df: df.with_columns(pl.concat_list("TABBLK").alias("TABBLK"))),
        "wrong_type",
        "GRF-C.parquet",
        column="TABBLK",
    ),
    "budget_5000_digits": Case(
        config_text(B2, '"privacy_budget_p_level_2_usa": ' + "1" * 5000),
        "invalid_number",
        CONFIG,
        column="privacy_budget_p_level_2_usa",
    ),
    "budget_5000_decimals": Case(
        config_text(B2, '"privacy_budget_p_level_2_usa": 0.' + "1" * 5000),
        "invalid_number",
        CONFIG,
        column="privacy_budget_p_level_2_usa",
    ),
    "max_race_codes_5000_digits": Case(
        config_text('"max_race_codes": 8', '"max_race_codes": ' + "9" * 5000),
        "invalid_number",
        CONFIG,
        column="max_race_codes",
    ),
    "stage1_1e-30": Case(
        config(privacy_budget_p_stage_1_fraction=1e-30),
        "unsupported_noise",
        CONFIG,
        column="privacy_budget_p_stage_1_fraction",
    ),
    "zero_suppression_1e-41": Case(
        config_text('"zero_suppression_chance": 0.9999', '"zero_suppression_chance": 1e-41'),
        "out_of_range",
        CONFIG,
        column="zero_suppression_chance",
    ),
    "config_latin1": Case(
        edit_bytes(CONFIG, lambda b: b.replace(b'"cef"', b'"c\xe9f"'), "params"),
        "invalid_utf8",
        CONFIG,
        1,
    ),
    "config_utf16": Case(
        edit_bytes(CONFIG, lambda b: b.decode().encode("utf-16"), "params"),
        "invalid_utf8",
        CONFIG,
        1,
    ),
    "config_deep_json": Case(
        config_text('"run_us"', '"x": ' + "[" * 10_000 + "]" * 10_000 + ', "run_us"'),
        "invalid_json",
        CONFIG,
    ),
    "config_too_large": Case(
        edit_bytes(CONFIG, lambda b: b + b" " * (2 << 20), "params"), "too_large", CONFIG
    ),
    "config_is_folder": Case(replace_file(CONFIG, "loop", "params"), "broken_link", CONFIG),
    "persons_folder": Case(replace_file(P, "dir"), "not_a_file", P),
    "persons_symlink_loop": Case(replace_file(P, "loop"), "broken_link", P),
    "persons_dangling_symlink": Case(replace_file(P, "dangling"), "broken_link", P),
    "persons_cr_line_ends": Case(
        edit_bytes(P, lambda b: b.replace(b"\n", b"\r")), "wrong_line_ends", P, 1
    ),
    "grfc_folder": Case(replace_file(GRFC, "dir"), "not_a_file", GRFC),
    "reference_folder": Case(replace_file(MAPPING, "dir", "params"), "not_a_file", MAPPING),
    "reference_too_large": Case(
        edit_bytes(MAPPING, lambda b: b + (b"x" * (1 << 20) + b"\n") * 65, "params"),
        "too_large",
        MAPPING,
    ),
    "mapping_header_only": Case(reference_rows(MAPPING, lambda r: False), "no_rows", MAPPING),
    "codes_header_only": Case(
        reference_rows("race-and-ethnicity-codes.txt", lambda r: False),
        "no_rows",
        "race-and-ethnicity-codes.txt",
    ),
    "iteration_without_codes": Case(
        reference_rows(MAPPING, lambda r: not r.startswith("1002|")),  # European alone, LEVEL 1
        "empty_iteration",
        RACE_IT,
        3,
        "ITERATION_CODE",
        "1002",
    ),
    "iteration_name_nul": Case(
        edit_bytes(
            RACE_IT, lambda b: b.replace(b"|European alone|", b"|Europ\x00ean alone|"), "params"
        ),
        "control_character",
        RACE_IT,
        3,
        "ITERATION_NAME",
        "Europ\\x00ean alone",
    ),
    "code_name_tab": Case(
        edit_bytes(
            "race-and-ethnicity-codes.txt",
            lambda b: b.replace(b"1001|White", b"1001|Wh\tite"),
            "params",
        ),
        "control_character",
        "race-and-ethnicity-codes.txt",
        3,
        value="Wh\\tite",
        column="RACE_ETH_NAME",
    ),
}


def _location_parts(case: Case) -> list[str]:
    parts = [case.file, f"[{case.kind}]"]
    if case.line is not None:
        parts.append(f"line {case.line}")
    if case.column is not None:
        parts.append(f"{'key' if case.file == CONFIG else 'column'} {case.column}")
    if case.value is not None:
        parts.append(f"value {case.value!r}")
    return parts


def _error_text(stderr: str) -> str:
    """The error message block of stderr (from ``privtab: error:`` on)."""
    assert "privtab: error:" in stderr, stderr
    return stderr[stderr.index("privtab: error:") :]


def _invoke(args: list[str]) -> Any:
    return runner.invoke(app, args, catch_exceptions=False)


def test_at_least_80_classes() -> None:
    assert len(CASES) >= 80


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_class(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    params, data = _base(tmp_path)
    case.mutate(params, data)
    out = tmp_path / "release"
    before = snapshot(tmp_path)
    run = _invoke(
        ["safetab", "run", "--data", str(data), "--config", str(params / CONFIG),
         "--out", str(out), "--quiet"]
    )  # fmt: skip
    assert run.exit_code == case.code, run.output
    assert "Traceback" not in run.stderr
    error = _error_text(run.stderr)
    line = next(x for x in error.splitlines() if f"[{case.kind}]" in x)
    for part in _location_parts(case):
        assert part in line, (part, line)
    assert snapshot(tmp_path) == before, "a refused input must not write anything"
    assert not out.exists()
    # the same class through validate: the same message
    val = _invoke(["validate", "--data", str(data), "--config", str(params / CONFIG), "--quiet"])
    assert val.exit_code == case.code
    assert "Traceback" not in val.stderr
    assert line in _error_text(val.stderr).splitlines()
    # and with --json: one object on stdout naming the same problem
    js = _invoke(["validate", "--data", str(data), "--config", str(params / CONFIG), "--json"])
    doc = json.loads(js.stdout)
    assert doc["error"]["exit_code"] == case.code
    assert case.kind in {p["kind"] for p in doc["problems"]}
    assert snapshot(tmp_path) == before


# ---------------------------------------------------------------------------- usage errors
def test_usage_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    _params, data = _base(tmp_path)
    before = snapshot(tmp_path)
    base = ["safetab", "run", "--data", str(data), "--out", str(tmp_path / "r"), "--quiet"]
    for extra, needle in [
        (["--format", "csv"], "--format"),
        (["--engine", "dask"], "--engine"),
        (["--delta", "2"], "--delta"),
        (["--spark-master", "local[1]"], "--engine spark"),
    ]:
        res = _invoke(base + extra)
        assert res.exit_code == 2, (extra, res.output)
        assert res.stderr.count("privtab: error:") == 1
        assert needle in res.stderr
        assert "Traceback" not in res.stderr
    assert snapshot(tmp_path) == before


def test_missing_spark_extra_exits_2_with_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from privtab.tabulate import engines

    monkeypatch.setattr(engines, "_importable", lambda m: m != "pyspark")
    _params, data = _base(tmp_path)
    res = _invoke(
        ["safetab", "run", "--data", str(data), "--out", str(tmp_path / "r"), "--engine",
         "spark", "--quiet"]
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    lines = [x for x in res.stderr.splitlines() if x.startswith("privtab: error:")]
    assert len(lines) == 1
    assert "pip install 'privtab[spark]'" in lines[0]
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "r").exists()


def test_a_bug_is_one_line_with_a_traceback_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anything that is not a user error: one line saying it is a bug, exit 3; the
    traceback is in a file (and on stderr with --debug)."""
    import privtab.data.inputs as inputs

    def boom(*a: object, **k: object) -> None:
        raise ZeroDivisionError("simulated internal error")

    monkeypatch.setattr(inputs, "load_inputs", boom)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _params, data = _base(tmp_path)
    res = _invoke(["validate", "--data", str(data), "--quiet"])
    assert res.exit_code == 3
    assert "Traceback" not in res.stderr
    [line] = [x for x in res.stderr.splitlines() if x.strip()]
    assert "bug in privtab" in line
    assert "ZeroDivisionError: simulated internal error" in line
    path = Path(line.split("traceback written to ")[1].split(" ")[0])
    assert "ZeroDivisionError" in path.read_text()
    assert "Traceback" in path.read_text()
    res = _invoke(["--debug", "validate", "--data", str(data), "--quiet", "--json"])
    assert res.exit_code == 3
    assert "Traceback" in res.stderr
    doc = json.loads(res.stdout)
    assert doc["error"]["exit_code"] == 3
    assert doc["error"]["type"] == "ZeroDivisionError"


def test_real_process_exit_codes_and_stderr(tmp_path: Path) -> None:
    """End to end in a subprocess: bad input (1), bad usage (2), no traceback."""
    params, data = _base(tmp_path)
    add_person(QAGE="abc")(params, data)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    cmd = [sys.executable, "-c", "from privtab.cli import main; main()"]
    res = subprocess.run(
        [*cmd, "validate", "--data", str(data), "--quiet"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert res.returncode == 1
    assert f"line {NEW_PERSON_LINE}, column QAGE, value 'abc'" in res.stderr
    assert "Traceback" not in res.stderr
    res = subprocess.run(
        [*cmd, "safetab", "run", "--data", str(data), "--out", str(tmp_path / "r"),
         "--format", "csv"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert res.returncode == 2
    assert "Traceback" not in res.stderr


# ---------------------------------------------------------------------------- accepted
def _bom(params: Path, data: Path) -> None:
    (data / PERSONS).write_bytes(b"\xef\xbb\xbf" + (data / PERSONS).read_bytes())


def _crlf(params: Path, data: Path) -> None:
    for name in (PERSONS, GRFC):
        text = (data / name).read_text()
        (data / name).write_bytes(text.replace("\n", "\r\n").encode())


def _blank_lines(params: Path, data: Path) -> None:
    lines = (data / PERSONS).read_text().splitlines()
    (data / PERSONS).write_text("\n".join([*lines[:3], "", "|" * 16, *lines[3:]]) + "\n\n")


def _parquet(params: Path, data: Path) -> None:
    pl.read_csv(data / PERSONS, separator="|", infer_schema=False).write_parquet(
        data / "person-records.parquet"
    )
    (data / PERSONS).unlink()


def _reference_bom(params: Path, data: Path) -> None:
    f = params / "race-and-ethnicity-codes.txt"
    f.write_bytes(b"\xef\xbb\xbf" + f.read_bytes())


def _vt_only(params: Path, data: Path) -> None:
    lines = (data / PERSONS).read_text().splitlines()
    (data / PERSONS).write_text("\n".join([lines[0], *(x for x in lines[1:] if x[8:10] != "72")]))


ACCEPTED: dict[str, tuple[Mutate, str | None]] = {
    "utf8_bom": (_bom, "byte-order mark"),
    "crlf": (_crlf, None),
    "blank_lines": (_blank_lines, None),
    "parquet": (_parquet, None),
    "reference_bom": (_reference_bom, "byte-order mark"),
    "no_pr_persons": (_vt_only, None),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_inputs_run(name: str, tmp_path: Path) -> None:
    """What validate accepts, run runs (noise off: a test release, marked not private)."""
    mutate, warning = ACCEPTED[name]
    params, data = _base(tmp_path)
    config(state_filter_us=["01", "02", "11"])(params, data)
    mutate(params, data)
    val = _invoke(["validate", "--data", str(data), "--config", str(params / CONFIG), "--quiet"])
    assert val.exit_code == 0, val.output
    if warning is not None:
        assert "privtab: warning:" in val.stderr
        assert warning in val.stderr
    out = tmp_path / "release"
    run = _invoke(
        ["safetab", "run", "--data", str(data), "--config", str(params / CONFIG), "--out",
         str(out), "--insecure-no-noise", "--no-report", "--format", "parquet", "--quiet",
         "--pld-grid", "0.01", "--json"]
    )  # fmt: skip
    assert run.exit_code == 0, run.output
    assert "Traceback" not in run.stderr
    assert (out / "release.json").exists()
    record = json.loads(Path(json.loads(run.stdout)["run_record"]).read_text())
    assert record["persons"] >= 4  # the exact count: in the confidential run record only


def test_empty_persons_need_allow_empty(tmp_path: Path) -> None:
    _params, data = _base(tmp_path)
    (data / PERSONS).write_text(HEADER + "\n")
    val = _invoke(["validate", "--data", str(data), "--quiet", "--allow-empty"])
    assert val.exit_code == 0, val.output


def test_no_pr_in_grfc_runs(tmp_path: Path) -> None:
    """VT-like input: no Puerto Rico anywhere, production run_pr: validate accepts it, so
    run must release it (the PR levels skipped as empty domains)."""
    params, data = _base(tmp_path)
    lines = (data / PERSONS).read_text().splitlines()
    (data / PERSONS).write_text("\n".join(x for x in lines if "|72|" not in x) + "\n")
    grfc = (data / GRFC).read_text().splitlines()
    (data / GRFC).write_text("\n".join(x for x in grfc if not x.startswith("72|")) + "\n")
    val = _invoke(["validate", "--data", str(data), "--config", str(params / CONFIG), "--quiet"])
    assert val.exit_code == 0, val.output
    run = _invoke(
        ["safetab", "run", "--data", str(data), "--config", str(params / CONFIG), "--out",
         str(tmp_path / "r"), "--insecure-no-noise", "--no-report", "--quiet"]
    )  # fmt: skip
    assert run.exit_code == 0, run.output
