"""GRF-C: region ids and public domains per geography level, and every kind of defect."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from privtab.data import GeoLevel, load_inputs, read_geography, toy_dataset_dir
from privtab.data.errors import InputValidationError

from .conftest import RejectFn, assert_problem

GRFC_HEADER = "TABBLKST|TABBLKCOU|TABTRACTCE|TABBLK|PLACEFP|AIANNHCE"


def test_toy_grfc_domains() -> None:
    geo = read_geography(toy_dataset_dir() / "GRF-C.txt")
    assert geo.blocks.height == 19
    assert geo.domain(GeoLevel.USA) == ("1",)
    assert geo.domain(GeoLevel.STATE) == ("01", "02", "11")
    assert geo.domain(GeoLevel.COUNTY) == ("01001", "01002", "02001", "02002", "11001")
    assert "01001000001" in geo.domain(GeoLevel.TRACT)
    assert len(geo.domain(GeoLevel.TRACT)) == 9
    # PLACEFP 99999 and AIANNHCE 9999 mean "none": no region
    assert geo.domain(GeoLevel.PLACE) == ("0122800", "0222800")
    assert geo.domain(GeoLevel.AIANNH) == ("0001", "0002", "0003")
    assert geo.domain(GeoLevel.PR_STATE) == ("72",)
    assert geo.domain(GeoLevel.PR_COUNTY) == ("72031",)
    assert geo.domain(GeoLevel.PR_TRACT) == ("72031050901", "72031050902")
    assert geo.domain(GeoLevel.PR_PLACE) == ("7210001",)
    for lv, dom in geo.domains.items():
        assert all(len(r) == lv.region_id_length for r in dom)
    units = geo.units
    pr = units.filter(pl.col("TABBLKST") == "72")
    assert pr["USA"].is_null().all()
    assert pr["PR-STATE"].cast(pl.String).to_list() == ["72", "72"]
    assert units.filter(pl.col("TABBLKST") != "72")["PR-COUNTY"].is_null().all()
    # the AIANNH area 0002 crosses states 01 and 02
    states = units.filter(pl.col("AIANNH") == "0002")["TABBLKST"].unique().sort().to_list()
    assert states == ["01", "02"]


def test_state_filter_limits_us_domains() -> None:
    geo = read_geography(toy_dataset_dir() / "GRF-C.txt", state_filter_us=["02"])
    assert geo.domain(GeoLevel.STATE) == ("02",)
    assert geo.domain(GeoLevel.COUNTY) == ("02001", "02002")
    assert geo.domain(GeoLevel.AIANNH) == ("0002", "0003")
    assert geo.domain(GeoLevel.PR_STATE) == ("72",)


def test_domains_never_come_from_person_data(data_dir: Path) -> None:
    # the toy GRF-C has 19 blocks; persons live in 5 of them; domains are GRF-C's
    inputs = load_inputs(None, data_dir)
    assert len(inputs.geography.domain(GeoLevel.TRACT)) == 9
    assert inputs.person_rows == 5


def _grfc(data_dir: Path, *lines: str) -> None:
    path = data_dir / "GRF-C.txt"
    path.write_text(path.read_text() + "".join(line + "\n" for line in lines))


@pytest.mark.parametrize(
    ("line", "column", "value"),
    [
        ("1|001|000001|0009|99999|9999", "TABBLKST", "1"),
        ("01|1|000001|0009|99999|9999", "TABBLKCOU", "1"),
        ("01|001|00001|0009|99999|9999", "TABTRACTCE", "00001"),
        ("01|001|000001|009|99999|9999", "TABBLK", "009"),
        ("01|001|000001|0009|9999|9999", "PLACEFP", "9999"),
        ("01|001|000001|0009|99999|99A9", "AIANNHCE", "99A9"),
    ],
)
def test_malformed_ids(
    data_dir: Path, reject: RejectFn, line: str, column: str, value: str
) -> None:
    _grfc(data_dir, line)
    err = reject(None, data_dir)
    assert_problem(err, "malformed_id", file="GRF-C.txt", row=21, column=column, value=value)


def test_unknown_state_and_duplicate_block(data_dir: Path, reject: RejectFn) -> None:
    _grfc(data_dir, "03|001|000001|0001|99999|9999", "01|001|000001|0001|99999|9999")
    err = reject(None, data_dir)
    assert_problem(err, "unknown_state", file="GRF-C.txt", row=21, column="TABBLKST", value="03")
    assert_problem(
        err, "duplicate_block", file="GRF-C.txt", row=22, column="TABBLK", value="010010000010001"
    )


def test_wrong_header_and_extra_columns(data_dir: Path, reject: RejectFn) -> None:
    path = data_dir / "GRF-C.txt"
    text = path.read_text()
    # extra columns are allowed (the real GRF-C has dozens) ...
    lines = text.splitlines()
    path.write_text("\n".join([lines[0] + "|OIDTABBLK"] + [x + "|7" for x in lines[1:]]) + "\n")
    load_inputs(None, data_dir)
    # ... but the six used ones must be there
    path.write_text(text.replace("AIANNHCE", "AIANNH"))
    err = reject(None, data_dir)
    assert_problem(err, "wrong_header", file="GRF-C.txt", column="AIANNHCE")


def test_wrong_field_count(data_dir: Path, reject: RejectFn) -> None:
    _grfc(data_dir, "01|001|000001|0009|99999|9999|extra")
    err = reject(None, data_dir)
    assert_problem(err, "wrong_field_count", file="GRF-C.txt", row=21)


def test_missing_and_ambiguous_files(data_dir: Path, reject: RejectFn) -> None:
    shutil.copy(data_dir / "GRF-C.txt", data_dir / "GRF-C.parquet")
    assert_problem(reject(None, data_dir), "ambiguous_input")
    (data_dir / "GRF-C.parquet").unlink()
    (data_dir / "GRF-C.txt").unlink()
    assert_problem(reject(None, data_dir), "missing_file", file="GRF-C.txt")


def test_parquet_grfc(data_dir: Path) -> None:
    txt = data_dir / "GRF-C.txt"
    pl.read_csv(txt, separator="|", infer_schema=False).write_parquet(data_dir / "GRF-C.parquet")
    a = read_geography(txt)
    b = read_geography(data_dir / "GRF-C.parquet")
    assert a.domains == b.domains
    assert a.blocks.equals(b.blocks)
    txt.unlink()
    load_inputs(None, data_dir)
    # a Parquet file with a bad value: rows are numbered from 1 in file order
    df = pl.read_parquet(data_dir / "GRF-C.parquet")
    df = df.with_columns(
        pl.when(pl.int_range(pl.len()) == 4)
        .then(pl.lit("1X"))
        .otherwise("TABBLKST")
        .alias("TABBLKST")
    )
    df.write_parquet(data_dir / "GRF-C.parquet")
    with pytest.raises(InputValidationError) as info:
        load_inputs(None, data_dir)
    assert_problem(info.value, "malformed_id", file="GRF-C.parquet", row=5, value="1X")


def test_not_a_parquet_file(data_dir: Path, reject: RejectFn) -> None:
    (data_dir / "GRF-C.txt").rename(data_dir / "GRF-C.parquet")
    assert_problem(reject(None, data_dir), "unreadable", file="GRF-C.parquet")
