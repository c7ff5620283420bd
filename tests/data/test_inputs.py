"""load_inputs, the single-pass reader path, packaged files, errors and atomic output."""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl
import pytest

from privtab.data import (
    InputValidationError,
    Scope,
    load_inputs,
    production_config_dir,
    toy_dataset_dir,
)
from privtab.data.errors import Problem, ProblemLog
from privtab.data.resources import schemas_dir

from .conftest import person_line

# SHA-256 of the packaged Census files: they must stay byte-identical to the release
PACKAGED = {
    "nmfv7-2020/config.json": "8b1c2d8eb023d54c6178da2b5329cb4ca7f45cdd2aa100b3afe099f9345603c7",
    "nmfv7-2020/ethnicity-characteristic-iterations.txt": (
        "ec1d89aa91705306b477dbe59e43b25d5e5856f2287f7fa6747026683b6e3474"
    ),
    "nmfv7-2020/race-and-ethnicity-code-to-iteration.txt": (
        "458fc57c76fddee4a0923eadba26cdc79fb926a490d54df91028f3fb0b9df641"
    ),
    "nmfv7-2020/race-and-ethnicity-codes.txt": (
        "d281d415204d773defdaae9493dc260939736e4de0bea97b5c3c684307b57085"
    ),
    "nmfv7-2020/race-characteristic-iterations.txt": (
        "3887e252d36b75102e3803362ec80c684c6427df5e6d935e6eca96c9f956a64f"
    ),
    "toy-dataset/GRF-C.txt": "862d4d25df49b3ae8ea7cf50703d4dff5c127facd7c5c25708b9c0c8e9cf0fb3",
    "toy-dataset/GRF-C-test.txt": (
        "1fe668217bde42ef6865ebdf3ce3189e9cfdc0041986d7e105c216f5345bee6e"
    ),
    "toy-dataset/person-records.txt": (
        "e02d405d405486f5e0431bf1fa65841c80f03c4da2a3ceba21081d62a806eb00"
    ),
}


def test_packaged_reference_files_unchanged() -> None:
    root = production_config_dir().parent
    for rel, digest in PACKAGED.items():
        assert hashlib.sha256((root / rel).read_bytes()).hexdigest() == digest, rel
    assert (schemas_dir() / "person-records.json").exists()
    assert (toy_dataset_dir() / "GRF-C.txt").exists()


def test_load_inputs_summary_and_checksums(data_dir: Path) -> None:
    inputs = load_inputs(None, data_dir)
    assert inputs.config_path == production_config_dir() / "config.json"
    s = inputs.summary()
    assert s["person_rows"] == 5
    assert s["runs"]["US"]["total_budget"] == pytest.approx(4.944)
    assert len(s["runs"]["US"]["levels"]) == 12
    sums = inputs.checksums()
    assert len(sums) == 7
    assert (
        sums[str(data_dir / "person-records.txt")]
        == hashlib.sha256((data_dir / "person-records.txt").read_bytes()).hexdigest()
    )
    assert inputs.stabilities(Scope.PR)


def test_single_pass_reader(data_dir: Path) -> None:
    """An engine validates while it aggregates: header-only check first, then one pass."""
    path = data_dir / "person-records.txt"
    path.write_text(path.read_text() + person_line(QSEX="7") + "\n")
    inputs = load_inputs(None, data_dir, validate_persons=False)
    assert inputs.person_rows is None
    reader = inputs.person_reader(batch_rows=2)
    total = sum(b.height for b in reader.batches())
    assert total == 5
    assert reader.rows_read == 6
    with pytest.raises(InputValidationError) as info:
        reader.raise_if_invalid()
    assert info.value.problems[0].row == 7  # line 7: the header is line 1
    # units: persons join GRF-C blocks → geo units → region ids of every level
    batch = pl.concat(list(inputs.person_reader().batches()))
    joined = batch.join(inputs.geography.blocks, on="BLOCK").join(inputs.geography.units, on="UNIT")
    assert joined.height == 5
    assert sorted(joined["STATE"].drop_nulls().cast(pl.String).to_list()) == [
        "01",
        "01",
        "01",
        "11",
    ]


def test_problem_log_and_error_rendering() -> None:
    log = ProblemLog(examples=2)
    for r in range(1, 6):
        log.add(Problem("f.txt", "k", "bad", row=r, column="C", value=str(r)))
    other = ProblemLog()
    other.add(Problem("g.txt", "j", "worse"))
    log.extend(other)
    assert len(log.problems) == 3
    assert log.counts == {("f.txt", "k"): 5, ("g.txt", "j"): 1}
    with pytest.raises(InputValidationError) as info:
        log.raise_if_any()
    err = info.value
    assert err.total == 6
    text = str(err)
    assert "f.txt, line 1, column C, value '1': bad [k]" in text
    assert "and 3 more row(s) with [k]" in text
    assert err.to_dict()["counts"][0] == {"file": "f.txt", "kind": "k", "count": 5}
