"""Bad TopDown inputs (issue 28, acceptance): each class refused by ``privtab topdown run``
with one located message — file, row, column and value (or the block and the constraint
for data whose own constraints are infeasible) — exit code 1, no traceback, and nothing
written (no release folder, no staging folder, no run record, no ledger entry).

Each class is a small mutation of a valid folder (``tests/topdown/_support.population``).
The classes marked ``cef`` are found by privtab's CEF readers (:mod:`privtab.data.cef`,
the synthetic-population branch); they are skipped where those readers are not installed.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from privtab.cli import app
from tests.topdown._support import Population, population, write_c1

runner = CliRunner()
HAVE_CEF = importlib.util.find_spec("privtab.data.cef") is not None
Mutation = Callable[[Population, Path], None]


def _write(pop: Population, d: Path) -> None:
    write_c1(pop.grfc, d / "GRF-C.txt")
    write_c1(pop.units, d / "cef-units.txt")
    write_c1(pop.persons, d / "cef-persons.txt")


def _set(frame: str, row: int, **values: str | None) -> Mutation:
    """Set ``values`` in data row ``row`` (0-based) of one frame, then write the folder."""

    def mutate(pop: Population, d: Path) -> None:
        df = getattr(pop, frame)
        cols = [
            pl.when(pl.int_range(pl.len()) == row).then(pl.lit(v, pl.String)).otherwise(pl.col(c))
            .alias(c)
            for c, v in values.items()
        ]  # fmt: skip
        setattr(pop, frame, df.with_columns(cols))
        _write(pop, d)

    return mutate


def _drop_column(frame: str, column: str) -> Mutation:
    def mutate(pop: Population, d: Path) -> None:
        setattr(pop, frame, getattr(pop, frame).drop(column))
        _write(pop, d)

    return mutate


def _remove(name: str) -> Mutation:
    def mutate(pop: Population, d: Path) -> None:
        _write(pop, d)
        (d / name).unlink()

    return mutate


def _both_formats(pop: Population, d: Path) -> None:
    _write(pop, d)
    pop.units.write_parquet(d / "cef-units.parquet")


def _duplicate_grfc_row(pop: Population, d: Path) -> None:
    pop.grfc = pl.concat([pop.grfc, pop.grfc.head(1)])
    _write(pop, d)


def _first_gq(pop: Population, t: str) -> int:
    """Index of the first household person of a block that has no GQ facility of type t."""
    facilities = pop.units.filter(pl.col("QGQTYP").str.starts_with(t)).select(
        pl.concat_str("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK").alias("B")
    )
    blocks = set(facilities.get_column("B").to_list())
    keys = pop.persons.select(
        pl.concat_str("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK").alias("B"),
        pl.col("QGQTYP").is_null().alias("HH"),
    ).with_row_index()
    row = keys.filter(pl.col("HH") & ~pl.col("B").is_in(list(blocks))).get_column("index")[0]
    return int(row)


def _gq_without_facility(pop: Population, d: Path) -> None:
    """A person of GQ type 5 (college) in a block without such a facility (C1 files kept
    otherwise consistent: the cross-file rule and TopDown's own constraint both name it)."""
    row = _first_gq(pop, "5")
    _set("persons", row, QGQTYP="501", RELSHIP="38")(pop, d)


def _minor_in_nursing(pop: Population, d: Path) -> None:
    nursing = pop.persons.with_row_index().filter(pl.col("QGQTYP") == "301")
    if nursing.height:
        _set("persons", int(nursing.get_column("index")[0]), QAGE="010")(pop, d)
        return
    raise AssertionError("the base population has no nursing facility resident")


@dataclass(frozen=True)
class Case:
    name: str
    mutate: Mutation
    expect: tuple[str, ...]  # every string must appear in the message
    cef: bool = False  # found by privtab.data.cef


CASES = [
    Case("no GRF-C", _remove("GRF-C.txt"), ("GRF-C.txt",)),
    Case("no cef-units", _remove("cef-units.txt"), ("cef-units.txt",)),
    Case("no cef-persons", _remove("cef-persons.txt"), ("cef-persons.txt",)),
    Case("two formats of one file", _both_formats, ("cef-units", "keep only one")),
    Case("GRF-C without AIANNHCE", _drop_column("grfc", "AIANNHCE"), ("GRF-C.txt", "AIANNHCE")),
    Case("bad AIANNHCE code", _set("grfc", 3, AIANNHCE="12A4"),
         ("GRF-C.txt", "line 5", "AIANNHCE", "12A4")),
    Case("a block twice in GRF-C", _duplicate_grfc_row, ("GRF-C.txt", "line")),
    Case("ragged tract code", _set("grfc", 2, TABTRACTCE="00010"),
         ("GRF-C.txt", "line 4", "TABTRACTCE", "00010")),
    Case("cef-persons without QAGE", _drop_column("persons", "QAGE"), ("cef-persons.txt", "QAGE")),
    Case("cef-units without RTYPE", _drop_column("units", "RTYPE"), ("cef-units.txt", "RTYPE")),
    Case("a person's block not in GRF-C", _set("persons", 0, TABBLK="9999"),
         ("cef-persons.txt", "9999")),
    Case("a GQ person without a facility of that type", _gq_without_facility,
         ("cef-persons.txt",)),
    Case("a minor in a nursing facility", _minor_in_nursing, ("cef-persons.txt",)),
    Case("MAFID not 9 digits", _set("units", 0, MAFID="12345"),
         ("cef-units.txt", "line 2", "MAFID", "12345"), cef=True),
    Case("unknown RTYPE", _set("units", 1, RTYPE="3"),
         ("cef-units.txt", "line 3", "RTYPE", "'3'"), cef=True),
    Case("unknown HH_STATUS", _set("units", 1, HH_STATUS="7"),
         ("cef-units.txt", "line 3", "HH_STATUS", "'7'"), cef=True),
    Case("unknown GQ type", _set("units", 0, RTYPE="4", QGQTYP="999", HH_STATUS="0"),
         ("cef-units.txt", "line 2", "QGQTYP", "999"), cef=True),
    Case("FINAL_POP not a number", _set("units", 0, FINAL_POP="x"),
         ("cef-units.txt", "line 2", "FINAL_POP", "'x'"), cef=True),
    Case("unknown sex", _set("persons", 2, QSEX="3"),
         ("cef-persons.txt", "line 4", "QSEX", "'3'"), cef=True),
    Case("age out of range", _set("persons", 2, QAGE="116"),
         ("cef-persons.txt", "line 4", "QAGE", "116"), cef=True),
    Case("unknown CENHISP", _set("persons", 2, CENHISP="3"),
         ("cef-persons.txt", "line 4", "CENHISP", "'3'"), cef=True),
    Case("unknown CENRACE", _set("persons", 2, CENRACE="64"),
         ("cef-persons.txt", "line 4", "CENRACE", "64"), cef=True),
    Case("unknown RELSHIP", _set("persons", 2, RELSHIP="19"),
         ("cef-persons.txt", "line 4", "RELSHIP", "19"), cef=True),
    Case("a person of an unknown unit", _set("persons", 2, MAFID="999999999"),
         ("cef-persons.txt", "line 4", "MAFID", "999999999"), cef=True),
    Case("EPNUM not a number", _set("persons", 2, EPNUM="a"),
         ("cef-persons.txt", "line 4", "EPNUM", "'a'"), cef=True),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_bad_input_is_refused_located_and_nothing_is_written(case: Case, tmp_path: Path) -> None:
    if case.cef and not HAVE_CEF:
        pytest.skip("needs privtab.data.cef (the synthetic-population readers)")
    data = tmp_path / "data"
    data.mkdir()
    case.mutate(population(7), data)
    out = tmp_path / "release"
    ledger = tmp_path / "state" / "ledger.json"  # the operator's, outside
    res = runner.invoke(
        app, ["topdown", "run", "--data", str(data), "--out", str(out), "--ledger", str(ledger)]
    )
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    for text in case.expect:
        assert text in res.output, (text, res.output)
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written in (["data"], ["data", "state"])  # no release, staging folder or record
    if ledger.exists():  # a private run reserved its entry before reading the records
        assert json.loads(ledger.read_text())["entries"] == []  # and withdrew it


def test_at_least_twenty_classes() -> None:
    assert len(CASES) >= 20


def test_infeasible_data_name_the_block_and_the_constraint(tmp_path: Path) -> None:
    """Without the CEF readers' cross-file rules (``validate_inputs=False``), TopDown's own
    check of the data against their block constraints refuses it naming the block and the
    constraint (production only warned, and its problems would be infeasible)."""
    from privtab.errors import InputError
    from privtab.random import SeededSource
    from privtab.topdown.run import TopDownOptions, run_release

    data = tmp_path / "data"
    data.mkdir()
    pop = population(7)
    row = _first_gq(pop, "5")
    block = "".join(pop.persons.row(row, named=True)[c] for c in
                    ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK"))  # fmt: skip
    _gq_without_facility(pop, data)
    opts = TopDownOptions(source=SeededSource(1), allow_insecure=True, validate_inputs=False)
    with pytest.raises(InputError) as err, pytest.warns(Warning, match="NOT private"):
        run_release(data, tmp_path / "out", opts, progress=lambda _m: None)
    assert block in str(err.value)
    assert "hhgq_total_ub" in str(err.value)
    assert not (tmp_path / "out").exists()
