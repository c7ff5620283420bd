"""Fixtures for the data-layer tests: packaged reference files, small valid inputs, helpers."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from privtab.data import (
    InputValidationError,
    ReferenceData,
    production_config_dir,
    read_reference,
    toy_dataset_dir,
)
from privtab.data.errors import Problem
from privtab.data.persons import PERSON_COLUMNS

HEADER = "|".join(PERSON_COLUMNS)
DEFAULT_PERSON: dict[str, str] = {
    "QAGE": "028",
    "QSEX": "1",
    "HOUSEHOLDER": "True",
    "TABBLKST": "01",
    "TABBLKCOU": "001",
    "TABTRACTCE": "000001",
    "TABBLK": "0001",
    "CENRACE": "01",
    "QRACE1": "1000",
    **{f"QRACE{i}": "Null" for i in range(2, 9)},
    "QSPAN": "9950",
}


def person_line(**fields: str) -> str:
    """One person-records line: a valid default person with some fields replaced."""
    row = {**DEFAULT_PERSON, **fields}
    return "|".join(row[c] for c in PERSON_COLUMNS)


def write_persons(path: Path, lines: Iterable[str], header: str = HEADER) -> Path:
    path.write_text(header + "\n" + "".join(line + "\n" for line in lines))
    return path


@pytest.fixture(scope="session")
def ref() -> ReferenceData:
    return read_reference(production_config_dir())


@pytest.fixture
def params(tmp_path: Path) -> Path:
    """A writable copy of the production parameters directory."""
    d = tmp_path / "params"
    shutil.copytree(production_config_dir(), d)
    for f in d.iterdir():
        f.chmod(0o644)
    return d


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A valid data directory: the toy GRF-C and five valid persons (production codes)."""
    d = tmp_path / "data"
    d.mkdir()
    shutil.copy(toy_dataset_dir() / "GRF-C.txt", d / "GRF-C.txt")
    write_persons(
        d / "person-records.txt",
        [
            person_line(),
            person_line(QAGE="000", QSEX="2", HOUSEHOLDER="False", TABBLK="0002"),
            person_line(QAGE="115", QRACE1="3000", QRACE2="1000", CENRACE="07", QSPAN="2011"),
            person_line(TABBLKST="72", TABBLKCOU="031", TABTRACTCE="050901", TABBLK="2040"),
            person_line(TABBLKST="11", TABBLKCOU="001", TABTRACTCE="000100", TABBLK="3004"),
        ],
    )
    return d


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and modification time (to detect writes)."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def find(err: InputValidationError, kind: str) -> list[Problem]:
    found = [p for p in err.problems if p.kind == kind]
    assert found, f"no problem of kind {kind!r} in:\n{err}"
    return found


def assert_problem(
    err: InputValidationError,
    kind: str,
    *,
    file: str | None = None,
    row: int | None = None,
    column: str | None = None,
    value: str | None = None,
) -> Problem:
    """The error has a problem of ``kind`` with these fields, and its message shows them."""
    for p in find(err, kind):
        if file is not None and not p.file.endswith(file):
            continue
        if row is not None and p.row != row:
            continue
        if column is not None and p.column != column:
            continue
        if value is not None and p.value != value:
            continue
        text = str(err)
        assert str(p) in text
        if row is not None:
            assert f"{p.row_label} {row}" in str(p)
        if column is not None:
            label = "key" if p.file.endswith(".json") else "column"
            assert f"{label} {column}" in str(p)
        if value is not None:
            assert repr(value) in str(p)
        if file is not None:
            assert file in str(p)
        return p
    raise AssertionError(
        f"no {kind} problem with file={file} row={row} column={column} value={value}:\n{err}"
    )


RejectFn = Callable[..., InputValidationError]


@pytest.fixture
def reject(tmp_path: Path) -> RejectFn:
    """Run :func:`load_inputs`, expect InputValidationError, and check nothing was written."""
    from privtab.data import load_inputs

    def run(config: Path | None, data: Path, **kw: object) -> InputValidationError:
        before = snapshot(tmp_path)
        with pytest.raises(InputValidationError) as info:
            load_inputs(config, data, **kw)  # type: ignore[arg-type]
        assert snapshot(tmp_path) == before, "a failed validation must not write anything"
        return info.value

    return run
