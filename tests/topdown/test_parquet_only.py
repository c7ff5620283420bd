"""A Parquet-only TopDown release (``--no-text``, :mod:`privtab.topdown.formats`).

The same seeded run as the pinned release (test_release.py) with ``text=False`` must
write byte-identical Parquet files and no text files, state ``formats: ["parquet"]`` in
``release.json``, and validate with every rule that does not need a text file — while a
tampered Parquet file is still rejected naming the file, the 1-based row, the column and
the rule (the checks that a text-ful release runs on its text run on the Parquet rows).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privtab.mechanisms import InsecureReleaseWarning
from privtab.random import SeededSource
from privtab.topdown.run import TopDownOptions, TopDownResult, run_release
from privtab.topdown.validate import OutputValidationError, validate_release


@pytest.fixture(scope="module")
def parquet_only(pinned_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pinned seeded release (seed 2026, report) written without text files."""
    out = tmp_path_factory.mktemp("td-parquet-only") / "release"
    opts = TopDownOptions(allow_insecure=True, report=True, source=SeededSource(2026), text=False)
    with pytest.warns(InsecureReleaseWarning):
        run_release(pinned_data, out, opts, progress=lambda _m: None)
    return out


def _data_files(folder: Path, ext: str) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob(f"*.{ext}"))


def test_the_parquet_files_are_those_of_the_release_with_text(
    parquet_only: Path, pinned_seeded_release: tuple[Path, TopDownResult]
) -> None:
    full, _ = pinned_seeded_release
    assert _data_files(parquet_only, "txt") == []
    names = _data_files(full, "parquet")
    assert len(names) == 8  # the two MDF files, P1–P5 and H1
    assert _data_files(parquet_only, "parquet") == names
    for rel in names:  # the same noise, the same rows, the same bytes
        assert (parquet_only / rel).read_bytes() == (full / rel).read_bytes(), rel
    doc = json.loads((parquet_only / "release.json").read_text())
    assert doc["formats"] == ["parquet"]
    assert sorted(doc["outputs"]["files"]) == names
    assert json.loads((full / "release.json").read_text())["formats"] == ["txt", "parquet"]
    report = (parquet_only / "report.html").read_text()
    assert "mdf/persons.parquet" in report
    assert "mdf/persons.txt" not in report


def test_a_parquet_only_release_validates(parquet_only: Path, pinned_data: Path) -> None:
    summary = validate_release(parquet_only, grfc=pinned_data)
    assert {"tabulation", "children_sum", "identity", "constraint", "sort_order"} <= set(
        summary.checks
    )
    assert "header" not in summary.checks
    assert "parquet_copy" not in summary.checks
    assert summary.skipped == {"header, parquet_copy": "no text files (formats: parquet)"}
    persons = pl.read_parquet(parquet_only / "mdf" / "persons.parquet").height
    assert summary.files["mdf/persons.parquet"] == persons > 0


def _rewrite(path: Path, edit: Callable[[pl.DataFrame], pl.DataFrame]) -> None:
    """Rewrite a Parquet file of the release with ``edit`` applied, keeping its schema
    (types and privacy metadata)."""
    table = pq.read_table(path)
    new = edit(pl.DataFrame(pl.from_arrow(table))).to_arrow()
    pq.write_table(pa.Table.from_arrays(new.columns, schema=table.schema), path)


def _plus_one(row: int) -> Callable[[pl.DataFrame], pl.DataFrame]:
    def edit(df: pl.DataFrame) -> pl.DataFrame:
        bump = pl.int_range(pl.len()) == row
        return df.with_columns(pl.when(bump).then(pl.col("COUNT") + 1).otherwise("COUNT"))

    return edit


def _null_at(column: str, row: int) -> Callable[[pl.DataFrame], pl.DataFrame]:
    def edit(df: pl.DataFrame) -> pl.DataFrame:
        hole = pl.int_range(pl.len()) == row
        return df.with_columns(pl.when(~hole).then(pl.col(column)).alias(column))

    return edit


def _swap_first_rows(df: pl.DataFrame) -> pl.DataFrame:
    return pl.concat([df.slice(1, 1), df.slice(0, 1), df.slice(2)])


def _drop_row(row: int) -> Callable[[pl.DataFrame], pl.DataFrame]:
    return lambda df: pl.concat([df.slice(0, row), df.slice(row + 1)])


def _formats(folder: Path, value: object) -> None:
    p = folder / "release.json"
    doc = json.loads(p.read_text())
    doc["formats"] = value
    p.write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("edit", "file", "kind", "row", "column"),
    [
        (lambda f: _rewrite(f / "pl94/P1.parquet", _plus_one(0)), "pl94/P1.parquet",
         "children_sum", None, None),
        (lambda f: _rewrite(f / "pl94/P1.parquet", _plus_one(0)), "pl94/P1.parquet",
         "manifest", None, None),
        (lambda f: _rewrite(f / "pl94/P1.parquet", _plus_one(0)), "pl94/P1.parquet",
         "identity", 1, "COUNT"),
        (lambda f: _rewrite(f / "pl94/P2.parquet", _null_at("CELL", 6)), "pl94/P2.parquet",
         "pattern", 7, "CELL"),
        (lambda f: _rewrite(f / "mdf/units.parquet", _null_at("HH_STATUS", 3)),
         "mdf/units.parquet", "pattern", 4, "HH_STATUS"),
        (lambda f: _rewrite(f / "pl94/H1.parquet", _swap_first_rows), "pl94/H1.parquet",
         "sort_order", 2, None),
        (lambda f: _rewrite(f / "mdf/persons.parquet", _drop_row(4)), "mdf/persons.parquet",
         "sort_order", 5, "EPNUM"),
        (lambda f: (f / "pl94/P5.parquet").unlink(), "pl94/P5.parquet", "layout", None, None),
        (lambda f: (f / "pl94/P5.txt").write_text("x"), "pl94/P5.txt", "manifest", None, None),
        (lambda f: _formats(f, ["txt"]), "release.json", "document", None, "formats"),
    ],
)  # fmt: skip
def test_a_tampered_parquet_only_release_is_rejected_naming_file_row_and_rule(
    parquet_only: Path,
    tmp_path: Path,
    edit: Callable[[Path], None],
    file: str,
    kind: str,
    row: int | None,
    column: str | None,
) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(parquet_only, bad)
    edit(bad)
    with pytest.raises(OutputValidationError) as err:
        validate_release(bad)
    hits = [p for p in err.value.problems if p.kind == kind and p.file.endswith(file)]
    assert hits, str(err.value)
    if row is not None:
        assert hits[0].row == row, str(err.value)
    if column is not None:
        assert hits[0].column == column, str(err.value)


def test_small_batches_find_what_one_batch_finds(
    parquet_only: Path, pinned_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slices of 128 rows (geographies straddling slice boundaries): the intact release
    validates; a block cell +1 in the middle of P1 is located by the same rules."""
    import privtab.topdown.validate_read as validate

    p1 = pl.read_parquet(parquet_only / "pl94" / "P1.parquet")
    blocks = p1.with_row_index().filter(
        (pl.col("GEOLEVEL") == "BLOCK") & (pl.col("CELL") == "P0010001") & (pl.col("COUNT") > 0)
    )
    row = int(blocks.get_column("index")[blocks.height // 2])
    bad = tmp_path / "bad"
    shutil.copytree(parquet_only, bad)
    _rewrite(bad / "pl94" / "P1.parquet", _plus_one(row))
    found: dict[int, set[tuple[str, int | None]]] = {}
    for block in (validate.BLOCK_BYTES, 1 << 13):
        monkeypatch.setattr(validate, "BLOCK_BYTES", block)
        assert "tabulation" in validate_release(parquet_only, grfc=pinned_data).checks
        with pytest.raises(OutputValidationError) as err:
            validate_release(bad, grfc=pinned_data)
        problems = err.value.problems
        found[block] = {(p.kind, p.row) for p in problems if p.file.endswith("P1.parquet")}
        assert {"tabulation", "children_sum", "identity"} <= {k for k, _ in found[block]}
        assert ("identity", row + 1) in found[block], str(err.value)  # its 1-based row
    assert found[validate.BLOCK_BYTES] == found[1 << 13]
