"""A whole TopDown release (issue 28, acceptance) on a small population in the C1 layout.

- noise off: the person MDF equals the records' block histograms (every block, every
  cell), the unit MDF the records' units, and every P1–P5/H1 cell of every geography
  (nation, states, counties, tracts, block groups, blocks, places, AIANNH areas) an
  independent tabulation of the records — written here from the C1 files and the 2020
  P.L. 94-171 cell definitions, not with privtab's tables;
- a seeded release: ``release.json`` states ρ = 293764/114921 per person and
  11417641/152349649 per housing unit exactly; output validation passes; nothing
  confidential in the folder (no timings, input sizes or hashes of confidential files);
  the confidential run record beside it holds them;
- tampered folders are rejected, naming the file, the row and the rule;
- the Python API returns the microdata and tables as polars frames.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from itertools import combinations
from pathlib import Path

import polars as pl
import pytest

from privtab.topdown.run import TopDownOptions, TopDownResult, run_release
from privtab.topdown.validate import OutputValidationError, validate_release

STATES = ("01", "09", "72")
GEO = ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK")


@pytest.fixture(scope="module")
def data(pinned_data: Path) -> Path:
    return pinned_data


def _run(data: Path, out: Path, **kw: object) -> TopDownResult:
    opts = TopDownOptions(allow_insecure=True, **{"report": True, **kw})  # type: ignore[arg-type]
    from privtab.mechanisms import InsecureReleaseWarning

    with pytest.warns(InsecureReleaseWarning):
        return run_release(data, out, opts, progress=lambda _m: None)


@pytest.fixture(scope="module")
def exact(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("td-exact") / "release"
    _run(data, out, noise=False)
    return out


@pytest.fixture(scope="module")
def seeded(pinned_seeded_release: tuple[Path, TopDownResult]) -> tuple[Path, TopDownResult]:
    return pinned_seeded_release  # seed 2026, report: made once a session (conftest.py)


# ----------------------------------------------------------------- the independent tabulation


def _read(path: Path) -> pl.DataFrame:
    return pl.read_csv(path, separator="|", infer_schema=False, null_values=["Null"])


def _race_cells() -> list[tuple[str, list[int]]]:
    """P1's cells 2–71 as sets of CENRACE codes (the technical documentation's order)."""
    codes: dict[int, list[int]] = {}
    n = 1
    for k in range(1, 7):
        for _ in combinations(range(6), k):
            codes.setdefault(k, []).append(n)
            n += 1
    out = [("one race", codes[1])] + [(f"{c:02d}", [c]) for c in codes[1]]
    out.append(("two or more", [c for k in range(2, 7) for c in codes[k]]))
    for k in range(2, 7):
        out.append((f"{k} races", codes[k]))
        out += [(f"{c:02d}", [c]) for c in codes[k]]
    return out


def _cells() -> dict[str, list[pl.Expr]]:
    """Every table's cells as conditions on a person (or unit) row, in publication order."""
    race = pl.col("CENRACE").cast(pl.Int64)
    hisp = pl.col("CENHISP") == "2"
    adult = pl.col("QAGE").cast(pl.Int64) >= 18
    gq = pl.col("_GQ")
    true = pl.col("CENRACE").is_not_null()  # every person (a literal would not broadcast)

    def p1(base: pl.Expr) -> list[pl.Expr]:
        return [base] + [base & race.is_in(c) for _, c in _race_cells()]

    def p2(base: pl.Expr) -> list[pl.Expr]:
        return [base, base & hisp, base & ~hisp] + [base & ~hisp & race.is_in(c)
                                                    for _, c in _race_cells()]  # fmt: skip

    types = [[1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4], [1], [2], [3], [4], [5, 6, 7], [5], [6], [7]]
    occupied = pl.col("HH_STATUS") == "1"
    vacant = pl.col("HH_STATUS") == "2"
    hu = pl.col("RTYPE") == "2"
    return {
        "P1": p1(true), "P2": p2(true), "P3": p1(adult), "P4": p2(adult),
        "P5": [gq.is_in(t) for t in types],
        "H1": [hu, hu & occupied, hu & vacant],
    }  # fmt: skip


def _geoids(grfc: pl.DataFrame) -> dict[str, pl.Expr]:
    st = pl.col("TABBLKST")
    return {
        "NATION": pl.when(st != "72").then(pl.lit("US")),
        "STATE": st,
        "COUNTY": pl.concat_str(st, "TABBLKCOU"),
        "TRACT": pl.concat_str(st, "TABBLKCOU", "TABTRACTCE"),
        "BLOCK_GROUP": pl.concat_str(st, "TABBLKCOU", "TABTRACTCE", "TABBLKGRPCE"),
        "BLOCK": pl.concat_str(st, "TABBLKCOU", "TABTRACTCE", "TABBLK"),
        "PLACE": pl.when(pl.col("PLACEFP") != "99999").then(pl.concat_str(st, "PLACEFP")),
        "AIANNH": pl.when(pl.col("AIANNHCE") != "9999").then(pl.col("AIANNHCE")),
    }


def expected_tables(data: Path) -> dict[str, pl.DataFrame]:
    """P1–P5 and H1 tabulated from cef-persons / cef-units and the GRF-C."""
    grfc = _read(data / "GRF-C.txt")
    persons = _read(data / "cef-persons.txt").with_columns(
        pl.when(pl.col("QGQTYP").is_null()).then(0)
        .otherwise(pl.min_horizontal(pl.col("QGQTYP").cast(pl.Int64) // 100, 7)).alias("_GQ")
    )  # fmt: skip
    units = _read(data / "cef-units.txt")
    geo = grfc.select(*GEO, "TABBLKGRPCE", "PLACEFP", "AIANNHCE")
    out: dict[str, pl.DataFrame] = {}
    for table, conds in _cells().items():
        rows = units if table == "H1" else persons
        prefix = "H001" if table == "H1" else f"P00{table[1]}"
        names = [f"{prefix}{i + 1:04d}" for i in range(len(conds))]
        per_block = rows.group_by(GEO).agg(
            [c.cast(pl.Int64).sum().alias(n) for c, n in zip(conds, names, strict=True)]
        )
        blocks = geo.join(per_block, on=list(GEO), how="left").with_columns(
            pl.col(names).fill_null(0)
        )
        parts = []
        for level, key in _geoids(grfc).items():
            g = blocks.with_columns(key.alias("GEOID")).filter(pl.col("GEOID").is_not_null())
            agg = g.group_by("GEOID").agg(pl.col(names).sum())
            long = agg.unpivot(index="GEOID", on=names, variable_name="CELL", value_name="COUNT")
            parts.append(long.with_columns(pl.lit(level).alias("GEOLEVEL")))
        out[table] = (
            pl.concat(parts)
            .select("GEOID", "GEOLEVEL", "CELL", pl.col("COUNT").cast(pl.Int64))
            .sort("GEOLEVEL", "GEOID", "CELL")
        )
    return out


# ----------------------------------------------------------------- noise off


def test_noise_off_the_person_mdf_is_the_records(exact: Path, data: Path) -> None:
    mdf = pl.read_parquet(exact / "mdf" / "persons.parquet")
    persons = _read(data / "cef-persons.txt")
    rec = persons.select(
        *GEO,
        pl.when(pl.col("QGQTYP").is_null()).then(pl.lit("0"))
        .otherwise(pl.min_horizontal(pl.col("QGQTYP").cast(pl.Int64) // 100, 7)
                   .cast(pl.String)).alias("GQTYPE_PL"),
        pl.when(pl.col("QAGE").cast(pl.Int64) >= 18).then(pl.lit("2")).otherwise(pl.lit("1"))
        .alias("VOTING_AGE"),
        "CENHISP",
        "CENRACE",
    )  # fmt: skip
    keys = [*GEO, "GQTYPE_PL", "VOTING_AGE", "CENHISP", "CENRACE"]
    got = mdf.group_by(keys).len().sort(keys)
    want = rec.group_by(keys).len().sort(keys)
    assert got.equals(want)  # every block, every cell
    assert mdf.get_column("EPNUM").to_list() == list(range(mdf.height))
    assert set(mdf.get_column("RTYPE")) <= {"3", "5"}


def test_noise_off_the_unit_mdf_is_the_records(exact: Path, data: Path) -> None:
    mdf = pl.read_parquet(exact / "mdf" / "units.parquet")
    units = _read(data / "cef-units.txt")
    keys = [*GEO, "RTYPE", "HH_STATUS"]
    assert mdf.group_by(keys).len().sort(keys).equals(units.group_by(keys).len().sort(keys))


@pytest.mark.parametrize("table", ["P1", "P2", "P3", "P4", "P5", "H1"])
def test_noise_off_every_table_cell_is_an_independent_tabulation(
    exact: Path, data: Path, table: str
) -> None:
    want = expected_tables(data)[table]
    got = pl.read_parquet(exact / "pl94" / f"{table}.parquet").sort("GEOLEVEL", "GEOID", "CELL")
    assert got.height == want.height
    assert got.equals(want)
    assert set(got.get_column("GEOLEVEL")) == {
        "NATION", "STATE", "COUNTY", "TRACT", "BLOCK_GROUP", "BLOCK", "PLACE", "AIANNH",
    }  # fmt: skip


def test_noise_off_is_marked_not_private(exact: Path) -> None:
    doc = json.loads((exact / "release.json").read_text())
    assert doc["private"] is False
    assert (exact / "NOT_PRIVATE").exists()
    assert "noise off" in doc["noise"]
    validate_release(exact)


# ----------------------------------------------------------------- a seeded release


def test_the_guarantee_is_stated_exactly(seeded: tuple[Path, TopDownResult]) -> None:
    out, res = seeded
    doc = json.loads((out / "release.json").read_text())
    g = doc["guarantee"]
    assert g["persons"]["rho"]["exact"] == "293764/114921"
    assert g["housing_units"]["rho"]["exact"] == "11417641/152349649"
    assert g["persons"]["rho"]["value"] >= 293764 / 114921
    assert set(doc["runs"]) == {"US", "PR"}
    for scope in ("US", "PR"):
        assert doc["runs"][scope]["persons"]["guarantee"]["rho"]["exact"] == "293764/114921"
        assert doc["runs"][scope]["units"]["guarantee"]["rho"]["exact"] == "11417641/152349649"
    assert res.document == doc


def test_release_json_names_the_engine_that_ran(seeded: tuple[Path, TopDownResult]) -> None:
    """The engine and its worker count (run settings: public, the output does not depend
    on them); a Spark run says ``spark`` (test_spark.py compares the rest)."""
    from privtab.topdown.streaming import engine_document

    out, _ = seeded
    doc = json.loads((out / "release.json").read_text())
    assert doc["engine"] == {"name": "polars", "workers": 1}
    assert engine_document("polars", 2) == {"name": "polars", "workers": 2}
    assert engine_document("spark", 1) == {"name": "spark"}


def test_nothing_confidential_in_the_folder(seeded: tuple[Path, TopDownResult], data: Path) -> None:
    out, res = seeded
    text = (out / "release.json").read_text()
    from privtab.data.inputs import sha256_file

    for name in ("cef-persons.txt", "cef-units.txt"):
        assert sha256_file(data / name) not in text  # no hash of a confidential file
        assert str(data / name) not in text  # nor its path
    assert sha256_file(data / "GRF-C.txt") in text  # the public reference file is named
    doc = json.loads(text)

    def keys(node: object) -> set[str]:
        if isinstance(node, dict):
            return set(node) | {k for v in node.values() for k in keys(v)}
        if isinstance(node, list):
            return {k for v in node for k in keys(v)}
        return set()

    assert "seconds" not in keys(doc)
    assert "bytes" not in keys(doc)
    assert "noise_draws" not in keys(doc)
    # the confidential run record (outside the folder) has what the folder must not
    record = json.loads(Path(res.record_path or "").read_text())
    assert record["confidential"]
    assert record["persons"] == _read(data / "cef-persons.txt").height
    assert any(lv["seconds"] for lv in record["levels"])
    assert out not in Path(res.record_path or "").parents  # outside the folder


def test_the_written_release_validates(seeded: tuple[Path, TopDownResult], data: Path) -> None:
    out, _ = seeded
    summary = validate_release(out, grfc=data)
    assert "tabulation" in summary.checks
    assert not summary.skipped
    assert summary.files["mdf/persons.txt"] == _read(data / "cef-persons.txt").height


def _tamper(src: Path, dst: Path, edit: Callable[[Path], None]) -> Path:
    shutil.copytree(src, dst)
    edit(dst)
    return dst


def _replace_line(path: Path, line: int, old: str, new: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    assert old in lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    path.write_text("".join(lines))


def _count_plus_one(folder: Path) -> None:
    p = folder / "pl94" / "P1.txt"
    lines = p.read_text().splitlines(keepends=True)
    head, *rest = lines[1].rstrip("\n").split("|")
    rest[-1] = str(int(rest[-1]) + 1)
    lines[1] = "|".join([head, *rest]) + "\n"
    p.write_text("".join(lines))


def _drop_person(folder: Path) -> None:
    p = folder / "mdf" / "persons.txt"
    lines = p.read_text().splitlines(keepends=True)
    p.write_text("".join(lines[:5] + lines[6:]))


def _edit_table_lines(folder: Path, edit: Callable[[list[str]], list[str]]) -> None:
    p = folder / "pl94" / "P1.txt"
    p.write_text("".join(edit(p.read_text().splitlines(keepends=True))))


def _swap_rows(lines: list[str]) -> list[str]:
    return [lines[0], lines[2], lines[1], *lines[3:]]


def _rho_down(folder: Path) -> None:
    p = folder / "release.json"
    doc = json.loads(p.read_text())
    doc["guarantee"]["persons"]["rho"]["value"] = 2.5
    p.write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("edit", "file", "kind"),
    [
        (_count_plus_one, "pl94/P1.txt", "manifest"),
        (_count_plus_one, "pl94/P1.txt", "tabulation"),
        # the tables are validated one at a time: the nation's sum and the P1 = P2 total
        # identity (across tables) must still be caught, and the Parquet copy (compared
        # column by column) located at its row
        (_count_plus_one, "pl94/P1.txt", "children_sum"),
        (_count_plus_one, "pl94/P1.txt", "identity"),
        (_count_plus_one, "pl94/P1.parquet", "parquet_copy"),
        (lambda f: _edit_table_lines(f, _swap_rows), "pl94/P1.txt", "sort_order"),
        (lambda f: _edit_table_lines(f, lambda ls: [*ls[:3], ls[2], *ls[3:]]), "pl94/P1.txt",
         "duplicate"),
        (_drop_person, "mdf/persons.txt", "sort_order"),
        (_rho_down, "release.json", "document"),
        (lambda f: (f / "NOT_PRIVATE").unlink(), "NOT_PRIVATE", "private_marker"),
        (lambda f: (f / "pl94" / "H1.parquet").unlink(), "pl94/H1.parquet", "layout"),
        (lambda f: _replace_line(f / "mdf" / "units.txt", 2, "|2|", "|7|"), "mdf/units.txt",
         "pattern"),
        (lambda f: (f / "mdf" / "extra.txt").write_text("x"), "mdf/extra.txt", "manifest"),
    ],
)  # fmt: skip
def test_a_tampered_release_is_rejected_naming_file_and_rule(
    seeded: tuple[Path, TopDownResult],
    tmp_path: Path,
    edit: Callable[[Path], None],
    file: str,
    kind: str,
) -> None:
    out, _ = seeded
    bad = _tamper(out, tmp_path / "bad", edit)
    with pytest.raises(OutputValidationError) as err:
        validate_release(bad)
    hits = [p for p in err.value.problems if p.kind == kind and p.file.endswith(file)]
    assert hits, str(err.value)
    if kind in ("pattern", "sort_order"):
        assert hits[0].row is not None
    if kind == "parquet_copy":
        assert hits[0].row == 1  # the first data row, the one edited


def _block_cell_plus_one(folder: Path) -> None:
    """+1 on a non-zero BLOCK row of P1 in the middle of the file (past many batches)."""
    p = folder / "pl94" / "P1.txt"
    lines = p.read_text().splitlines(keepends=True)
    at = [i for i, ln in enumerate(lines) if "|BLOCK|P0010001|" in ln and not ln.endswith("|0\n")]
    i = at[len(at) // 2]
    head, count = lines[i].rstrip("\n").rsplit("|", 1)
    lines[i] = f"{head}|{int(count) + 1}\n"
    p.write_text("".join(lines))


def _duplicate_late_row(folder: Path) -> None:
    p = folder / "pl94" / "P2.txt"
    lines = p.read_text().splitlines(keepends=True)
    i = len(lines) * 2 // 3
    p.write_text("".join([*lines[: i + 1], lines[i], *lines[i + 1 :]]))


@pytest.mark.parametrize(
    ("edit", "file", "kinds"),
    [
        (_block_cell_plus_one, "pl94/P1.txt", ("tabulation", "children_sum", "identity")),
        # slow (≈ 5 s each idle: four validations of a whole release in 8 KiB batches);
        # the block-cell case above covers the batch boundaries by default, and the
        # tampering tests of this file find each of these rules in one batch
        pytest.param(
            _count_plus_one,
            "pl94/P1.txt",
            ("tabulation", "children_sum", "identity"),
            marks=pytest.mark.slow,
        ),
        pytest.param(_duplicate_late_row, "pl94/P2.txt", ("duplicate",), marks=pytest.mark.slow),
        pytest.param(_drop_person, "mdf/persons.txt", ("sort_order",), marks=pytest.mark.slow),
    ],
)
def test_validation_in_small_batches_finds_what_one_batch_finds(
    seeded: tuple[Path, TopDownResult],
    data: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    edit: Callable[[Path], None],
    file: str,
    kinds: tuple[str, ...],
) -> None:
    """The validation streams the files in row batches: with batches of a few hundred rows
    (8 KiB of text: geographies, every state and parent straddling batch boundaries) the
    intact release still validates and a tampered one is rejected with the same located
    rules as in one batch."""
    import privtab.topdown.validate_read as validate

    out, _ = seeded
    bad = _tamper(out, tmp_path / "bad", edit)
    found: dict[int, set[str]] = {}
    for block in (validate.BLOCK_BYTES, 1 << 13):
        monkeypatch.setattr(validate, "BLOCK_BYTES", block)
        assert "tabulation" in validate_release(out, grfc=data).checks
        with pytest.raises(OutputValidationError) as err:
            validate_release(bad, grfc=data)
        found[block] = {p.kind for p in err.value.problems if p.file.endswith(file)}
        assert set(kinds) <= found[block], str(err.value)
    assert found[validate.BLOCK_BYTES] == found[1 << 13]


# ----------------------------------------------------------------- the Python API


def test_release_returns_typed_tables(data: Path) -> None:
    from privtab.topdown import release

    with pytest.warns(Warning, match="NOT private"):
        r = release(data, runs=("pr",), seed=5, progress=False)
    with r:
        assert not r.private
        assert str(r.rho["persons"]) == "293764/114921"
        p1 = r.table("P1")
        assert p1.schema["COUNT"] == pl.Int64
        assert p1.columns == ["GEOID", "GEOLEVEL", "CELL", "COUNT"]
        assert set(p1.get_column("GEOID").str.slice(0, 2)) == {"72"}  # the PR run only
        assert (
            r.persons.height
            == p1.filter((pl.col("GEOLEVEL") == "STATE") & (pl.col("CELL") == "P0010001"))
            .get_column("COUNT")
            .sum()
        )
        assert "NOT PRIVATE" in repr(r)
        path = r.path
    assert not path.exists()  # a temporary folder, owned and removed


# ----------------------------------------------------------------- noisy measurements


def test_the_noisy_measurements_alone_give_the_same_release_again(
    small_seeded_release: Path, tmp_path: Path
) -> None:
    """``--nmf``: the measurements (and the public structure each run carries) are in the
    folder; post-processing them alone gives back the same microdata and tables. (The
    session's seeded ``--nmf`` release of three states, tests/topdown/conftest.py: only
    read here.)"""
    from privtab.topdown.nmf import read_nmf
    from privtab.topdown.run import postprocess_release

    first = small_seeded_release
    for name in ("US-persons", "US-units", "PR-persons", "PR-units"):
        nmf = read_nmf(first / "nmf" / name)
        assert not nmf.private
        assert nmf.table.height > 0
        # the public block facts hold the invariant unit counts only: the occupied /
        # vacant split of a block is the units run's protected histogram
        facts = pl.read_parquet(first / "nmf" / name / "blocks.parquet")
        assert not {"OCCUPIED", "VACANT"} & set(facts.columns), name
        assert {"HU", "GQ1", "GQ7"} <= set(facts.columns)
    validate_release(first)  # the nmf files are listed in release.json's outputs too
    again = tmp_path / "again"
    res = postprocess_release(first / "nmf", again, TopDownOptions(report=False),
                              progress=lambda _m: None)  # fmt: skip
    assert not res.private
    assert (again / "NOT_PRIVATE").exists()
    doc = json.loads((again / "release.json").read_text())
    assert "none drawn" in doc["noise"]
    assert set(doc["derived_from"]["measurements"]) == {
        "US-persons/dpqueries.parquet", "US-units/dpqueries.parquet",
        "PR-persons/dpqueries.parquet", "PR-units/dpqueries.parquet",
    }  # fmt: skip
    for path in (tmp_path, first):
        assert str(path) not in json.dumps(doc)  # no operator path
    for rel in ("mdf/persons.parquet", "mdf/units.parquet", "pl94/P1.parquet", "pl94/H1.parquet"):
        assert pl.read_parquet(first / rel).equals(pl.read_parquet(again / rel)), rel
    validate_release(again)


def test_the_report_states_the_guarantee_and_the_banner(seeded: tuple[Path, TopDownResult]) -> None:
    out, _ = seeded
    page = (out / "report.html").read_text()
    assert "293764/114921" in page
    assert "11417641/152349649" in page
    assert "NOT PRIVATE" in page  # a seeded release says so on the first screen
    assert "Semi-DP" in page
    assert "per geography" in page.lower()
    assert "How to read the tables" in page
    assert page.count("<table>") >= 4


def test_an_intact_table_is_validated_from_its_parquet_copy(
    seeded: tuple[Path, TopDownResult], tmp_path: Path
) -> None:
    """The fast way (the Parquet copy checked, the text compared with it byte for byte)
    passes every table of an intact release and gives the text's SHA-256; a table whose
    text differs in one count, or whose copy is not the text's, is handed to the full
    text validation (False) — which then locates the problem (the tampering tests)."""
    import hashlib

    from privtab.topdown.pl94 import TABLES

    # private on purpose: the fast way must be taken on an intact table (else validation
    # silently falls back to the slow text path and only the speed would tell)
    from privtab.topdown.validate_read import _Check
    from privtab.topdown.validate_tables import _Table

    out, _ = seeded
    for t in TABLES:
        table = _Table(_Check(out), out, t, False, None)
        assert table.run_from_copy()
        text = (out / "pl94" / f"{t}.txt").read_bytes()
        assert table.sha256 == hashlib.sha256(text).hexdigest(), t
        assert table.rows > 0
        assert not table.check.log
    bad = _tamper(out, tmp_path / "bad", _count_plus_one)
    assert not _Table(_Check(bad), bad, "P1", False, None).run_from_copy()
    swapped = _tamper(out, tmp_path / "swapped", lambda f: _edit_table_lines(f, _swap_rows))
    assert not _Table(_Check(swapped), swapped, "P1", False, None).run_from_copy()
