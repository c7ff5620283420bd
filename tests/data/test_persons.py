"""Person records: the toy dataset, the canonical form, and every kind of bad row."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from privtab.data import (
    InputValidationError,
    ReferenceData,
    load_inputs,
    read_geography,
    read_persons,
    read_reference,
    toy_dataset_dir,
)
from privtab.data.errors import ProblemLog
from privtab.data.membership import unpack_race_codes
from privtab.data.persons import (
    PERSON_COLUMNS,
    PersonReader,
    person_parts,
    scan_persons,
    validate_persons,
)

from .conftest import HEADER, RejectFn, assert_problem, person_line, write_persons

TOY = toy_dataset_dir()
PERSONS = "person-records.txt"


def _add(data_dir: Path, *lines: str) -> None:
    path = data_dir / PERSONS
    path.write_text(path.read_text() + "".join(line + "\n" for line in lines))


def test_toy_raw_scan() -> None:
    raw = scan_persons(TOY / PERSONS).collect()
    assert raw.height == 10
    assert raw.columns == ["ROW", "_NF", *PERSON_COLUMNS]
    assert raw["ROW"].to_list() == list(range(2, 12))  # line numbers: the header is line 1
    assert raw.row(0) == (
        2, 17, "028", "1", "True", "01", "001", "000001", "0001", "01", "1000",
        *(["Null"] * 7), "1010",
    )  # fmt: skip


def test_toy_against_production_codes(ref: ReferenceData) -> None:
    """The Census toy was made for the toy iteration files: four of its codes are unknown
    to the production code list (race 1011, 1012, 1021; ethnicity 2021)."""
    geo = read_geography(TOY / "GRF-C.txt")
    with pytest.raises(InputValidationError) as info:
        read_persons(TOY / PERSONS, ref, geo)
    err = info.value
    assert err.kinds() == {"unknown_race_code", "unknown_ethnicity_code"}
    assert err.total == 8
    assert_problem(err, "unknown_race_code", file=PERSONS, row=3, column="QRACE1", value="1011")
    assert_problem(err, "unknown_race_code", file=PERSONS, row=4, column="QRACE2", value="1021")
    assert_problem(err, "unknown_ethnicity_code", row=5, column="QSPAN", value="2021")


def test_toy_canonical_with_toy_codes(params: Path) -> None:
    codes = params / "race-and-ethnicity-codes.txt"
    codes.write_text(codes.read_text() + "1011|t\r\n1012|t\r\n1021|t\r\n2021|t\r\n")
    ref = read_reference(params)
    geo = read_geography(TOY / "GRF-C.txt")
    df = read_persons(TOY / PERSONS, ref, geo)
    assert df.height == 10
    assert df["QAGE"].to_list() == [28, 42, 12, 102, 52, 52, 79, 73, 25, 25]
    assert df["QSEX"].to_list() == [1, 1, 1, 2, 1, 2, 1, 1, 1, 1]
    assert df["QSPAN"].to_list()[:4] == [1010, 1010, 1010, 2021]
    assert df["BLOCK"].to_list()[6] == 720310509012040
    races = unpack_race_codes(df["RACE_KEY1"].to_numpy(), df["RACE_KEY2"].to_numpy())
    assert sorted(races[1][races[1] > 0].tolist()) == [1011, 1012, 1031]
    assert sorted(races[7][races[7] > 0].tolist()) == [2322, 3310, 5454]
    # persons 9 and 10 differ only in their block: same combination key
    assert df["RACE_KEY1"][8] == df["RACE_KEY1"][9]


BAD_ROWS = [
    # (fields, kind, column, value)
    ({"TABBLKST": "1"}, "malformed_id", "TABBLKST", "1"),
    ({"TABBLKCOU": "01"}, "malformed_id", "TABBLKCOU", "01"),
    ({"TABTRACTCE": "0000001"}, "malformed_id", "TABTRACTCE", "0000001"),
    ({"TABBLK": "1"}, "malformed_id", "TABBLK", "1"),
    ({"TABBLK": "0009"}, "block_not_in_grfc", "TABBLK", "010010000010009"),
    ({"QAGE": "116"}, "age_out_of_range", "QAGE", "116"),
    ({"QAGE": "-1"}, "invalid_age", "QAGE", "-1"),
    ({"QAGE": "0115"}, "invalid_age", "QAGE", "0115"),
    ({"QAGE": "2x"}, "invalid_age", "QAGE", "2x"),
    ({"QSEX": "3"}, "invalid_sex", "QSEX", "3"),
    ({"QSEX": ""}, "invalid_sex", "QSEX", ""),
    ({"HOUSEHOLDER": "yes"}, "invalid_householder", "HOUSEHOLDER", "yes"),
    ({"CENRACE": "64"}, "invalid_cenrace", "CENRACE", "64"),
    ({"QRACE1": "Null"}, "missing_race_code", "QRACE1", "Null"),
    ({"QRACE2": "12"}, "invalid_race_code", "QRACE2", "12"),
    ({"QRACE3": "0999", "QRACE2": "1000"}, "invalid_race_code", "QRACE3", "0999"),
    ({"QRACE2": "1234"}, "unknown_race_code", "QRACE2", "1234"),
    ({"QRACE3": "1001"}, "race_code_after_null", "QRACE3", "1001"),
    ({"QRACE2": "3000", "QRACE3": "1000"}, "duplicate_race_code", "QRACE3", "1000"),
    ({"QSPAN": "Null"}, "invalid_ethnicity_code", "QSPAN", "Null"),
    ({"QSPAN": "1234"}, "unknown_ethnicity_code", "QSPAN", "1234"),
]


@pytest.mark.parametrize(("fields", "kind", "column", "value"), BAD_ROWS)
def test_bad_person_row(
    data_dir: Path, reject: RejectFn, fields: dict[str, str], kind: str, column: str, value: str
) -> None:
    _add(data_dir, person_line(**fields))
    err = reject(None, data_dir)
    assert_problem(err, kind, file=PERSONS, row=7, column=column, value=value)
    assert {p.row for p in err.problems} == {7}


def test_too_many_race_codes(params: Path, data_dir: Path, reject: RejectFn) -> None:
    cfg = params / "config.json"
    cfg.write_text(cfg.read_text().replace('"max_race_codes": 8', '"max_race_codes": 3'))
    four = {"QRACE1": "1000", "QRACE2": "3000", "QRACE3": "4000", "QRACE4": "5000"}
    _add(data_dir, person_line(**four))
    err = reject(cfg, data_dir)
    p = assert_problem(err, "too_many_race_codes", file=PERSONS, row=7, column="QRACE4", value="4")
    assert "max_race_codes = 3" in p.message
    # with the production maximum (8) the same record is fine
    load_inputs(None, data_dir)


def test_wrong_header(data_dir: Path, reject: RejectFn) -> None:
    path = data_dir / PERSONS
    body = path.read_text().split("\n", 1)[1]
    path.write_text(HEADER.replace("QSEX|HOUSEHOLDER", "HOUSEHOLDER|QSEX") + "\n" + body)
    p = assert_problem(reject(None, data_dir), "wrong_header", file=PERSONS)
    assert "order" in p.message
    path.write_text(HEADER + "|EXTRA\n" + body)
    assert_problem(reject(None, data_dir), "wrong_header", file=PERSONS, column="EXTRA")
    path.write_text(HEADER.replace("|QSPAN", "") + "\n" + body)
    assert_problem(reject(None, data_dir), "wrong_header", file=PERSONS, column="QSPAN")


def test_wrong_field_count(data_dir: Path, reject: RejectFn) -> None:
    _add(data_dir, person_line() + "|1000", person_line(), person_line() + "|1|2")
    err = reject(None, data_dir)
    assert_problem(err, "wrong_field_count", file=PERSONS, row=7)
    assert_problem(err, "wrong_field_count", file=PERSONS, row=9)
    assert err.counts[(str(data_dir / PERSONS), "wrong_field_count")] == 2


def test_short_line_reports_missing_fields(data_dir: Path, reject: RejectFn) -> None:
    """A line two fields short is reported as missing QRACE8..QSPAN, nothing else."""
    _add(data_dir, "|".join(person_line().split("|")[:-2]))
    err = reject(None, data_dir)
    p = assert_problem(err, "wrong_field_count", row=7, column="QRACE8")
    assert "missing field(s) QRACE8..QSPAN" in p.message
    assert err.kinds() == {"wrong_field_count"}


def test_crlf_and_blank_lines_are_fine(data_dir: Path) -> None:
    path = data_dir / PERSONS
    text = path.read_text().replace("\n", "\r\n") + "\r\n\r\n"
    path.write_text(text)
    assert load_inputs(None, data_dir).person_rows == 5


def test_first_ten_rows_and_exact_counts(data_dir: Path, reject: RejectFn) -> None:
    _add(data_dir, *[person_line(QSEX="0")] * 25, person_line(QAGE="200"))
    err = reject(None, data_dir)
    bad_sex = [p for p in err.problems if p.kind == "invalid_sex"]
    assert [p.row for p in bad_sex] == list(range(7, 17))
    assert err.counts[(str(data_dir / PERSONS), "invalid_sex")] == 25
    assert_problem(err, "age_out_of_range", row=32, value="200")
    assert "15 more" in str(err)


def test_batches_keep_row_numbers(data_dir: Path, ref: ReferenceData) -> None:
    lines = [person_line(QAGE=f"{i % 100:03d}") for i in range(95)]
    lines[40] = person_line(QSEX="9")
    lines[77] = person_line(QRACE2="1000")
    write_persons(data_dir / PERSONS, lines)
    geo = read_geography(data_dir / "GRF-C.txt")
    for batch_rows in (7, 1000):
        log = ProblemLog()
        reader = PersonReader(data_dir / PERSONS, ref, geo, 8, batch_rows=batch_rows, log=log)
        got = pl.concat(list(reader.batches()))
        assert reader.rows_read == 95
        assert got.height == 93
        assert [(p.kind, p.row) for p in log] == [
            ("invalid_sex", 42),
            ("duplicate_race_code", 79),
        ]


def test_state_filter_on_reader(data_dir: Path, ref: ReferenceData) -> None:
    geo = read_geography(data_dir / "GRF-C.txt")
    reader = PersonReader(data_dir / PERSONS, ref, geo, 8, states=["72"])
    rows = pl.concat(list(reader.batches()))
    assert rows["BLOCK"].to_list() == [720310509012040]
    assert reader.rows_read == 5


def test_parquet_persons_same_problems(
    data_dir: Path, reject: RejectFn, ref: ReferenceData
) -> None:
    _add(data_dir, person_line(QRACE2="1234"), person_line(QAGE="116"))
    txt = data_dir / PERSONS
    raw = pl.read_csv(txt, separator="|", infer_schema=False)
    # Parquet with real nulls for absent race codes and integer ages
    raw = raw.with_columns(
        *(pl.when(pl.col(c) == "Null").then(None).otherwise(pl.col(c)).alias(c)
          for c in PERSON_COLUMNS if c.startswith("QRACE")),
        pl.col("QAGE").cast(pl.Int64),
    )  # fmt: skip
    raw.write_parquet(data_dir / "person-records.parquet")
    txt.unlink()
    err = reject(None, data_dir)
    assert_problem(err, "unknown_race_code", file="person-records.parquet", row=6, value="1234")
    assert_problem(err, "age_out_of_range", file="person-records.parquet", row=7, value="116")
    assert err.total == 2


def test_parquet_null_in_a_column_of_valid_values(
    data_dir: Path, reject: RejectFn, ref: ReferenceData
) -> None:
    """A Parquet null where a value is required is reported even when every value of the
    column is valid (the reader's checks of a column's distinct values include the null)."""
    raw = pl.read_csv(data_dir / PERSONS, separator="|", infer_schema=False)
    raw = raw.with_columns(
        pl.when(pl.int_range(pl.len()) == 2).then(None).otherwise(pl.col("QSEX")).alias("QSEX")
    )
    raw.write_parquet(data_dir / "person-records.parquet")
    (data_dir / PERSONS).unlink()
    err = reject(None, data_dir)
    assert_problem(err, "missing_value", file="person-records.parquet", row=3, column="QSEX")
    assert err.total == 1


def test_validate_persons_counts_rows(data_dir: Path, ref: ReferenceData) -> None:
    log = ProblemLog()
    assert validate_persons(data_dir / PERSONS, ref, None, 8, log) == 5
    assert not log


def test_many_rows_vectorised(tmp_path: Path, ref: ReferenceData) -> None:
    """A few hundred thousand rows with sparse defects: exact counts, first rows kept."""
    d = tmp_path / "big"
    d.mkdir()
    shutil.copy(TOY / "GRF-C.txt", d / "GRF-C.txt")
    n = 200_000
    good = person_line()
    lines = np.full(n, good, dtype=object)
    bad_idx = np.arange(1234, n, 9973)
    lines[bad_idx] = person_line(QRACE2="1000")
    write_persons(d / PERSONS, lines.tolist())
    with pytest.raises(InputValidationError) as info:
        load_inputs(None, d, batch_rows=50_000)
    err = info.value
    assert err.kinds() == {"duplicate_race_code"}
    assert err.total == bad_idx.size
    assert [p.row for p in err.problems] == (bad_idx[:10] + 2).tolist()  # lines


def test_reader_canonical_columns(data_dir: Path, ref: ReferenceData) -> None:
    _add(data_dir, person_line(QSEX="5"), person_line(QRACE1="2011", QRACE2="1000"))
    geo = read_geography(data_dir / "GRF-C.txt")
    log = ProblemLog()
    good = pl.concat(list(PersonReader(data_dir / PERSONS, ref, geo, 8, log=log).batches()))
    assert [(p.kind, p.row) for p in log] == [("invalid_sex", 7)]
    # the unit column joins straight to every level's region id
    assert set(good.columns) == {"BLOCK", "UNIT", "QAGE", "QSEX", "QSPAN", "RACE_KEY1", "RACE_KEY2"}


def _read_by_parts(path: Path, ref: ReferenceData, geo: object, n_parts: int) -> tuple:
    """Every part of ``path`` read alone (as the Spark engine's tasks do): the problems
    numbered in the file and merged in order, the rows read, the valid rows."""
    log = ProblemLog()
    before = 1 if path.suffix == ".txt" else 0  # the header line
    read, valid = 0, []
    parts = person_parts(path, n_parts)
    for part in parts:
        reader = PersonReader(path, ref, geo, 8, batch_rows=3, part=part)  # type: ignore[arg-type]
        valid += list(reader.batches())
        log.extend(reader.log.shifted(before))
        before += reader.part_rows
        read += reader.rows_read
    return log, read, pl.concat(valid), len(parts)


@pytest.mark.parametrize("fmt", ["txt", "crlf", "parquet"])
def test_parts_read_alone_give_the_whole_files_problems(
    data_dir: Path, ref: ReferenceData, fmt: str
) -> None:
    """The Spark engine's tasks read parts of the file alone (text: byte ranges cut at line
    starts; Parquet: row groups): with the rows of the parts before added, their problems
    are the whole-file reader's — same rows, examples and counts — and every row is read
    once (blank lines, CRLF, a last line without newline, cuts inside lines)."""
    lines = [person_line(QAGE=f"{i % 100:03d}") for i in range(60)]
    for i in (3, 17, 18, 40, 59):
        lines[i] = person_line(QSEX="9")
    lines[25] = person_line(QRACE2="1000")
    lines[30] = ""  # a blank line keeps its number
    lines[31] = "1|2|3"
    for i in range(44, 56):
        lines[i] = person_line(TABBLK="9999")  # more than ten of a kind: counts, first ten
    path = write_persons(data_dir / PERSONS, lines)
    if fmt == "crlf":
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n").rstrip(b"\r\n"))
    geo = read_geography(data_dir / "GRF-C.txt")
    if fmt == "parquet":
        frame = pl.read_csv(path, separator="|", infer_schema=False)  # no blank/short line
        path.unlink()
        path = data_dir / "person-records.parquet"
        frame.write_parquet(path, row_group_size=7)
    whole = ProblemLog()
    rows = validate_persons(path, ref, geo, 8, whole)
    want = read_persons_valid(path, ref, geo)
    for n_parts in (20, 6, 1):
        log, read, valid, n = _read_by_parts(path, ref, geo, n_parts)
        assert log.counts == whole.counts
        assert log.problems == whole.problems
        assert read == rows
        assert valid.equals(want)
        assert n <= n_parts
        assert n > 1 or n_parts == 1
    assert {p.kind for p in whole} >= {"invalid_sex", "block_not_in_grfc", "duplicate_race_code"}


def read_persons_valid(path: Path, ref: ReferenceData, geo: object) -> pl.DataFrame:
    reader = PersonReader(path, ref, geo, 8)  # type: ignore[arg-type]
    return pl.concat(list(reader.batches()))


def test_invalid_utf8_names_what_the_column_must_hold(
    params: Path, data_dir: Path, reject: RejectFn
) -> None:
    """Issue 31: binary bytes in QRACE1 were reported as "not valid UTF-8" and '��' only;
    the message now says what the bytes are and what QRACE1 must hold."""
    with (data_dir / "person-records.txt").open("ab") as fh:
        fh.write(person_line(QRACE1="@@").encode().replace(b"@@", b"\xff\xfe") + b"\n")
    p = assert_problem(
        reject(params / "config.json", data_dir),
        "invalid_utf8",
        file="person-records.txt",
        row=7,
        column="QRACE1",
    )
    assert "not UTF-8" in p.message
    assert "QRACE1 must be Null or a four-digit race code" in p.message
