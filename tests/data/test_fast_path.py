"""The fast integer checks flag exactly the rows the detailed (naming) checks reject."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pytest

from privtab.data import ReferenceData, persons, read_geography, toy_dataset_dir

# private on purpose: the two compilations of the person checks (the reader's per-distinct-
# value checks on dictionary-encoded batches, and the naming checks) and the row-number
# column they share are compared directly
from privtab.data._scan import CodedBatch, _coded
from privtab.data._tables import ROW
from privtab.data.errors import ProblemLog
from privtab.data.persons import PERSON_COLUMNS, _Checker, _CodedPath
from privtab.data.spec import FIELDS

POOLS: dict[str, list[str]] = {
    "QAGE": ["000", "0", "28", "115", "116", "-1", "+5", " 5", "1e2", "", "0115", "abc"],
    "QSEX": ["1", "2", "0", "3", "", "+1"],
    "HOUSEHOLDER": ["True", "False", "true", ""],
    "TABBLKST": ["01", "02", "72", "11", "1", "+1", "03", "001", ""],
    "TABBLKCOU": ["001", "002", "031", "01", "+01", "0001"],
    "TABTRACTCE": ["000001", "000002", "050901", "000100", "+00001", "00001"],
    "TABBLK": ["0001", "0002", "2040", "3004", "+001", "001", "0009"],
    "CENRACE": ["01", "63", "00", "64", "1", "+1", "ab"],
    "QSPAN": ["9950", "2011", "1000", "1234", "0999", "+999", "Null", "", "99500"],
}
RACE = ["1000", "3000", "4000", "2011", "9950", "Null", "Null", "Null", "1234", "0999",
        "+999", "12", "", "10000"]  # fmt: skip


def _row(rng: random.Random, clean: float) -> dict[str, str]:
    if rng.random() < clean:
        row = {c: POOLS[c][0] for c in POOLS}
        k = rng.randint(1, 8)
        codes = rng.sample(["1000", "3000", "4000", "2011", "9950", "1002", "5000", "7500"], k)
        row.update({f"QRACE{i + 1}": (codes[i] if i < k else "Null") for i in range(8)})
        return row
    row = {c: rng.choice(p) for c, p in POOLS.items()}
    row.update({f"QRACE{i}": rng.choice(RACE) for i in range(1, 9)})
    return row


@pytest.mark.parametrize("lookup", [False, True])
@pytest.mark.parametrize(("seed", "k"), [(1, 8), (2, 3), (3, 1), (4, 8), (5, 2)])
def test_dictionary_path_agrees_with_detailed_checks(
    ref: ReferenceData, seed: int, k: int, lookup: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-distinct-value checks of the reader (dictionary-encoded batches) flag
    exactly the rows the naming checks reject, and drop exactly the blank rows — also when
    the race-code row rules are looked up by QRACE1 (as in batches of 2¹⁶ rows or more)."""
    monkeypatch.setattr(persons, "_LOOKUP_ROWS", 1 if lookup else 1 << 62)
    rng = random.Random(seed)
    rows = [_row(rng, clean=0.5) for _ in range(4000)]
    rows[7] = dict.fromkeys(PERSON_COLUMNS, "")  # a blank line: dropped, never reported
    one_code = {f"QRACE{i}": "Null" for i in range(2, 9)}
    rows[11] = {**_row(rng, clean=1.0), **one_code, "TABBLKCOU": "998"}  # not in the GRF-C
    rows[13] = {**_row(rng, clean=1.0), **one_code, "QRACE1": "Null"}  # no race code at all
    b = pl.DataFrame(
        {
            ROW: list(range(2, len(rows) + 2)),
            FIELDS: [len(PERSON_COLUMNS)] * len(rows),
            **{c: [r[c] for r in rows] for c in PERSON_COLUMNS},
        },
        schema={ROW: pl.UInt64, FIELDS: pl.UInt32, **dict.fromkeys(PERSON_COLUMNS, pl.String)},
    )
    b = b.with_columns(pl.when(pl.col(ROW) == 20).then(16).otherwise(pl.col(FIELDS)).alias(FIELDS))
    geo = read_geography(toy_dataset_dir() / "GRF-C.txt")
    seen: dict = {}
    coded = CodedBatch(
        b[ROW].to_numpy(),
        b[FIELDS].to_numpy(),
        {c: _coded(b[c].to_arrow(), c, (), seen) for c in PERSON_COLUMNS},
    )
    assert coded.frame(np.ones(len(rows), bool)).equals(b)  # the encoding loses nothing
    kept, bad, _ = _CodedPath(ref, geo, k).check(coded)
    assert b.filter(~pl.Series(kept))[ROW].to_list() == [9]
    nonblank = b.filter(pl.Series(kept))
    flagged = set(nonblank.filter(pl.Series(bad[kept]))[ROW].to_list())
    ok_rows = set(_Checker("f", ref, geo, k).check(nonblank, ProblemLog())[ROW].to_list())
    assert flagged == set(nonblank[ROW].to_list()) - ok_rows
    assert {13, 20} <= flagged  # the unknown block, the wrong field count
    assert 0.2 * len(rows) < len(flagged) < 0.97 * len(rows)  # both kinds of rows occur
