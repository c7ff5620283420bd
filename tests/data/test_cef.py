"""TopDown's CEF files and the rules between files: every class of bad file gets a located
error (file, row, column, value) and nothing is written; the readers stream."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from privtab.cli import app
from privtab.data import InputValidationError
from privtab.data.cef import CEF_PERSON_COLUMNS, UNIT_COLUMNS, load_units
from privtab.data.errors import Problem, ProblemLog
from privtab.data.folder import validate_folder
from privtab.data.synth import synthesize

from .conftest import snapshot

Frame = pl.DataFrame
Mutation = Callable[[Frame], Frame]


@pytest.fixture(scope="module")
def valid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cef") / "dc"
    synthesize(out, 5_000, states="DC", seed=2)
    return out


def _read(path: Path) -> Frame:
    return pl.read_csv(path, separator="|", infer_schema=False)


def _first(df: Frame, cond: pl.Expr) -> int:
    """0-based index of the first row where ``cond`` holds."""
    return int(df.with_row_index("_i").filter(cond)["_i"][0])


def _set(df: Frame, i: int, **values: str) -> Frame:
    return df.with_columns(
        pl.when(pl.int_range(pl.len()) == i).then(pl.lit(v)).otherwise(pl.col(c)).alias(c)
        for c, v in values.items()
    )


def _broken(valid: Path, tmp: Path, stem: str, change: Callable[[Frame], tuple[Frame, int]]
            ) -> tuple[Path, int]:  # fmt: skip
    """A copy of the valid folder with ``stem`` changed; returns it and the line changed."""
    d = tmp / "broken"
    shutil.copytree(valid, d)
    df, i = change(_read(d / f"{stem}.txt"))
    (d / f"{stem}.txt").write_text(df.write_csv(separator="|", quote_style="never"))
    return d, i + 2  # the header is line 1


def _problem(folder: Path, kind: str) -> Problem:
    with pytest.raises(InputValidationError) as info:
        validate_folder(folder)
    found = [p for p in info.value.problems if p.kind == kind]
    assert found, (kind, info.value.kinds())
    return found[0]


def _at(where: pl.Expr | int, **values: str) -> Callable[[Frame], tuple[Frame, int]]:
    """A change: ``values`` written into the first row where ``where`` holds (or row
    ``where``)."""

    def change(df: Frame) -> tuple[Frame, int]:
        i = where if isinstance(where, int) else _first(df, where)
        return _set(df, i, **values), i

    return change


NURSING = pl.col("QGQTYP") == "301"
SPOUSE = pl.col("RELSHIP") == "21"
HEAD = pl.col("RELSHIP") == "20"
FACILITY = pl.col("RTYPE") == "4"


def _other_block(df: Frame) -> tuple[Frame, int]:
    i = _first(df, HEAD)
    other = df.filter(pl.col("TABBLK") != df["TABBLK"][i])["TABBLK"][0]
    tract = df.filter(pl.col("TABBLK") == other)["TABTRACTCE"][0]
    return _set(df, i, TABBLK=other, TABTRACTCE=tract), i


def _dup_unit(df: Frame) -> tuple[Frame, int]:
    return pl.concat([df.head(4), df.slice(3)]), 4


def _empty_facility(df: Frame) -> tuple[Frame, int]:
    i = _first(df, FACILITY)
    extra = _set(df.slice(i, 1), 0, MAFID="999999999", FINAL_POP="4")
    return pl.concat([df, extra]), df.height


def _vacant_household(df: Frame) -> tuple[Frame, int]:
    """A household record for a block whose units are all vacant or GQ: one record more."""
    return pl.concat([df, df.tail(1)]), df.height


def _hhrace(df: Frame) -> tuple[Frame, int]:
    new = "02" if df["HHRACE"][4] != "02" else "03"
    return _set(df, 4, HHRACE=new), 4


def _person_record(df: Frame) -> tuple[Frame, int]:
    new = "050" if df["QAGE"][6] != "050" else "051"
    return _set(df, 6, QAGE=new), 6


CASES: list[tuple[str, Callable[[Frame], tuple[Frame, int]], str, str | None, str | None]] = [
    # an institutional type the block has no facility of
    ("cef-persons", _at(NURSING, QGQTYP="401"), "gq_person_without_facility", "QGQTYP", "401"),
    ("cef-persons", _at(NURSING, QAGE="016"), "minor_in_nursing", "QAGE", "016"),
    ("cef-persons", _at(SPOUSE, RELSHIP="20"), "householder_count", None, None),
    ("cef-persons", _at(3, MAFID="999999998"), "unknown_mafid", "MAFID", "999999998"),
    ("cef-persons", _at(5, RELSHIP="19"), "invalid_relship", "RELSHIP", "19"),
    ("cef-persons", _at(pl.col("QGQTYP") == "501", RELSHIP="25"), "relship_gq_mismatch",
     "RELSHIP", "25"),
    ("cef-persons", _at(7, CENHISP="3"), "invalid_cenhisp", "CENHISP", "3"),
    ("cef-persons", _at(8, QAGE="116"), "age_out_of_range", "QAGE", "116"),
    ("cef-persons", _at(HEAD, EPNUM="99"), "epnum_out_of_range", "EPNUM", "99"),
    # a spouse numbered 1, as the householder
    ("cef-persons", _at(SPOUSE, EPNUM="1"), "duplicate_person", "EPNUM", "1"),
    ("cef-persons", _other_block, "block_mismatch", "TABBLK", None),
    ("cef-units", _dup_unit, "duplicate_mafid", "MAFID", None),
    ("cef-units", _at(pl.col("HH_STATUS") == "2", FINAL_POP="2"), "vacant_unit_with_persons",
     "FINAL_POP", "2"),
    ("cef-units", _at((pl.col("HH_STATUS") == "1") & (pl.col("FINAL_POP") == "2"),
                      FINAL_POP="3"), "final_pop_mismatch", "FINAL_POP", "3"),
    ("cef-units", _at(pl.col("HH_STATUS") == "1", QGQTYP="301"), "rtype_gq_mismatch", "QGQTYP",
     "301"),
    ("cef-units", _at(FACILITY, HH_STATUS="1"), "rtype_status_mismatch", "HH_STATUS", "1"),
    ("cef-units", _at(FACILITY, QGQTYP="999"), "invalid_gq_type", "QGQTYP", "999"),
    ("cef-units", _at(2, MAFID="12345"), "invalid_mafid", "MAFID", "12345"),
    ("cef-units", _at(1, TABBLK="9999"), "block_not_in_grfc", "TABBLK", None),
    ("cef-units", _empty_facility, "empty_facility", "FINAL_POP", "4"),
    ("household-records", _vacant_household, "households_per_block", "TABBLK", None),
    ("household-records", _hhrace, "household_mismatch", "HHRACE", None),
    # the household file is read by its one reader (privtab.data.households): production's
    # rules, located, before any cross-file check
    ("household-records", _at(3, HOUSEHOLD_TYPE="7"), "invalid_household_type",
     "HOUSEHOLD_TYPE", "7"),
    ("household-records", _at(5, QRACE1="Null"), "missing_race_code", "QRACE1", None),
    ("household-records", _at(2, TABBLK="9998"), "block_not_in_grfc", "TABBLK", None),
    ("person-records", _person_record, "person_records_mismatch", "QAGE", None),
]  # fmt: skip
LOCATED_ELSEWHERE = {"householder_count", "households_per_block", "empty_facility"}
"""Kinds named at another file's row (the unit's row of cef-units, the block's first record)."""


@pytest.mark.parametrize(("stem", "change", "kind", "column", "value"), CASES,
                         ids=[c[2] for c in CASES])  # fmt: skip
def test_bad_file_gets_a_located_error(
    valid: Path,
    tmp_path: Path,
    stem: str,
    change: Callable[[Frame], tuple[Frame, int]],
    kind: str,
    column: str | None,
    value: str | None,
) -> None:
    folder, line = _broken(valid, tmp_path, stem, change)
    before = snapshot(tmp_path)
    p = _problem(folder, kind)
    assert snapshot(tmp_path) == before  # validation writes nothing
    assert p.row is not None
    if kind not in LOCATED_ELSEWHERE:
        assert Path(p.file).name == f"{stem}.txt"
        assert p.row == line
    if column is not None:
        assert p.column == column
    if value is not None:
        assert p.value == value
    assert kind in str(p)


def test_at_least_fifteen_classes() -> None:
    assert len({c[2] for c in CASES}) >= 15


def test_header_field_count_and_missing_file(valid: Path, tmp_path: Path) -> None:
    d = tmp_path / "h"
    shutil.copytree(valid, d)
    text = (d / "cef-persons.txt").read_text().splitlines()
    text[0] = text[0].replace("|CENHISP", "")
    (d / "cef-persons.txt").write_text("\n".join(text) + "\n")
    lines = (d / "cef-units.txt").read_text().splitlines()
    lines[3] = lines[3].rsplit("|", 1)[0]
    (d / "cef-units.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputValidationError) as info:
        validate_folder(d, inputs=["population"])
    kinds = {(Path(p.file).name, p.kind) for p in info.value.problems}
    assert ("cef-persons.txt", "wrong_header") in kinds
    assert ("cef-units.txt", "wrong_field_count") in kinds
    short = next(p for p in info.value.problems if p.kind == "wrong_field_count")
    assert short.row == 4
    assert short.column == "FINAL_POP"
    (d / "cef-units.txt").unlink()
    with pytest.raises(InputValidationError, match="missing_file"):
        validate_folder(d, inputs=["population"])


def test_parquet_files_validate_and_name_rows(tmp_path: Path) -> None:
    out = tmp_path / "pq"
    synthesize(out, 3_000, states="DC", seed=4, fmt="parquet")
    summary = validate_folder(out)
    assert summary["population"]["persons"] == 3_000
    units = pl.read_parquet(out / "cef-units.parquet")
    units = units.with_columns(
        pl.when(pl.int_range(pl.len()) == 9).then(pl.lit("7")).otherwise(pl.col("RTYPE"))
        .alias("RTYPE")
    )  # fmt: skip
    units.write_parquet(out / "cef-units.parquet")
    p = _problem(out, "invalid_rtype")
    assert (p.row, p.column, p.value) == (10, "RTYPE", "7")
    assert "row 10" in str(p)


def test_units_reader_streams_in_batches(valid: Path) -> None:
    log = ProblemLog()
    whole = load_units(valid / "cef-units.txt", log)
    small = load_units(valid / "cef-units.txt", log, batch_rows=97)
    assert not log
    assert whole is not None
    assert small is not None
    assert (whole.mafid == small.mafid).all()
    assert (whole.rows == small.rows).all()
    assert UNIT_COLUMNS[0] == CEF_PERSON_COLUMNS[0] == "MAFID"


def test_population_parquet_never_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The validation's memory is bounded by a row group, not the file: every frame polars
    collects holds at most one row group and no Parquet file goes through polars'
    streaming batches (which prefetch the whole file: person-records did, ≈ 1 GiB at 10⁷
    persons, docs/topdown.md §14)."""
    out = tmp_path / "pq"
    synthesize(out, 3_000, states="DC", seed=4, fmt="parquet")
    group = 400
    for f in out.glob("*.parquet"):
        pl.read_parquet(f).write_parquet(f, row_group_size=group)
    heights: list[int] = []
    streamed: list[object] = []
    collect, batches = pl.LazyFrame.collect, pl.LazyFrame.collect_batches

    def spy_collect(self: pl.LazyFrame, *a: Any, **k: Any) -> Any:
        got = collect(self, *a, **k)
        heights.append(got.height)
        return got

    def spy_batches(self: pl.LazyFrame, *a: Any, **k: Any) -> Any:
        streamed.append(self)
        return batches(self, *a, **k)

    monkeypatch.setattr(pl.LazyFrame, "collect", spy_collect)
    monkeypatch.setattr(pl.LazyFrame, "collect_batches", spy_batches)
    summary = validate_folder(out, inputs=["population"], batch_rows=150)
    assert summary["population"]["persons"] == 3_000
    assert summary["population"]["person_records_checked"]
    assert not streamed
    assert heights
    assert max(heights) <= group


def test_cli_validate_products(valid: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["validate", "--data", str(valid), "--product", "topdown", "--json"])
    assert res.exit_code == 0, res.output
    assert '"gq_facilities"' in res.stdout
    folder, line = _broken(valid, tmp_path, "cef-persons", _at(NURSING, QAGE="016"))
    res = runner.invoke(app, ["validate", "--data", str(folder), "--product", "topdown"])
    assert res.exit_code == 1
    assert f"cef-persons.txt, line {line}, column QAGE, value '016'" in res.stderr
    assert "[minor_in_nursing]" in res.stderr
    res = runner.invoke(app, ["validate", "--data", str(valid), "--product", "nope"])
    assert res.exit_code == 2


def test_units_in_any_order(valid: Path, tmp_path: Path) -> None:
    """A units file not sorted by MAFID is looked up through its sort order (the synth
    writes it sorted: no copy); a repeated MAFID is still found."""
    d = tmp_path / "shuffled"
    shutil.copytree(valid, d)
    (d / "household-records.txt").unlink()  # its order is that of the occupied units
    units = _read(d / "cef-units.txt").reverse()
    (d / "cef-units.txt").write_text(units.write_csv(separator="|", quote_style="never"))
    summary = validate_folder(d, inputs=["population"])
    assert summary["population"]["units"] == units.height
    log = ProblemLog()
    loaded = load_units(d / "cef-units.txt", log)
    assert loaded is not None
    assert loaded.order is not None
    again = pl.concat([units, units.slice(7, 1)])
    (d / "cef-units.txt").write_text(again.write_csv(separator="|", quote_style="never"))
    p = _problem(d, "duplicate_mafid")
    assert p.row == units.height + 2
    assert p.value == units["MAFID"][7]
