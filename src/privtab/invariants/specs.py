"""Invariants and tables as users write them: parsing and named specifications.

The command line (``privtab invariants …``) and a notebook read the same things the same
way: a table of counts given as text (``"30,12;10,25"``) or a CSV file (optional header row
and label column, detected), and an invariant given by name — ``state-totals``,
``full-table``, ``margins:K`` — or as a JSON file (features, the invariant, and a table or
records). Named invariants carry the semi-adjacent parameters of the semantics seed
(Theorem 16, Remark 17); a JSON invariant's parameter is computed exactly
(:func:`~privtab.invariants.semi_adjacent_parameter`). Bad input raises
:class:`privtab.errors.InputError` naming the file, line and column.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, NoReturn

from privtab.errors import InputError, UsageError

__all__ = ["invariant_from_spec", "load_table", "parse_counts", "read_csv_table"]


def fail(message: str) -> NoReturn:
    """A bad flag value (text given on the command line, a name): exit code 2."""
    raise UsageError(message)


def _bad_file(message: str) -> NoReturn:
    """A bad file: exit code 1."""
    raise InputError(message)


def parse_counts(text: str, what: str) -> list[list[int]]:
    rows = [r for r in text.replace("\n", ";").split(";") if r.strip()]
    if not rows:
        fail(f"{what}: no counts given")
    out: list[list[int]] = []
    for i, row in enumerate(rows, start=1):
        cells = [c.strip() for c in row.split(",")]
        vals = []
        for j, c in enumerate(cells, start=1):
            vals.append(_count(c, f"{what}: row {i}, column {j}"))
        out.append(vals)
    _rectangular(out, what)
    return out


def _count(text: str, where: str) -> int:
    try:
        v = int(text)
    except ValueError:
        fail(f"{where}: {text!r} is not an integer count")
    if v < 0:
        fail(f"{where}: count {v} is negative")
    return v


def _rectangular(rows: list[list[int]], what: str) -> None:
    width = len(rows[0])
    for i, r in enumerate(rows, start=1):
        if len(r) != width:
            fail(f"{what}: row {i} has {len(r)} cells, row 1 has {width}")


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def read_csv_table(path: Path) -> tuple[list[list[int]], list[str] | None, list[str] | None]:
    """Counts from a CSV file; an optional header row and first label column are detected."""
    if not path.is_file():
        _bad_file(f"{path}: no such file")
    with path.open(newline="", encoding="utf-8") as fh:
        raw = [row for row in csv.reader(fh) if any(c.strip() for c in row)]
    if not raw:
        _bad_file(f"{path}: the file holds no rows")
    col_labels: list[str] | None = None
    if not all(_is_int(c.strip()) for c in raw[0][1:]):
        col_labels = [c.strip() for c in raw[0]]
        raw = raw[1:]
    if not raw:
        _bad_file(f"{path}: the file has a header but no counts")
    row_labels: list[str] | None = None
    if not all(_is_int(r[0].strip()) for r in raw):
        row_labels = [r[0].strip() for r in raw]
        raw = [r[1:] for r in raw]
        if col_labels is not None:
            col_labels = col_labels[1:]
    rows = []
    offset = 1 + (col_labels is not None)
    try:
        for i, r in enumerate(raw):
            rows.append(
                [
                    _count(c.strip(), f"{path}: line {i + offset}, column {j + 1}")
                    for j, c in enumerate(r)
                ]
            )
        _rectangular(rows, str(path))
    except UsageError as exc:  # in a file: bad input, not bad usage
        _bad_file(exc.message)
    if col_labels is not None and len(col_labels) != len(rows[0]):
        _bad_file(f"{path}: the header has {len(col_labels)} labels for {len(rows[0])} columns")
    return rows, row_labels, col_labels


def load_table(counts: str | None, input_path: Path | None) -> list[list[int]]:
    if (counts is None) == (input_path is None):
        raise UsageError(
            "give the table with exactly one of --counts 'a,b;c,d' or --input FILE.csv"
        )
    if counts is not None:
        return parse_counts(counts, "--counts")
    assert input_path is not None
    return read_csv_table(input_path)[0]


def invariant_from_spec(spec: str) -> tuple[str, Any]:
    """(description, semi-adjacent parameter) of an invariant specification (see the
    module docstring)."""
    from privtab.invariants.schema import CountInvariant, Schema, histogram_from_records
    from privtab.invariants.semi_adjacency import (
        SemiAdjacency,
        semi_adjacent_parameter,
        theorem16_bound,
    )

    s = spec.strip()
    if s == "state-totals":
        return (
            "total population of each state (one-way margin of one feature, seed §6.1)",
            SemiAdjacency(
                2, True, 2, 2, "Theorem 16 with k = 1 (two or more states are non-empty)"
            ),
        )
    if s == "full-table":
        return (
            "every cell of the full cross-classification (Remark 17)",
            SemiAdjacency(2, True, 2, 2, "Remark 17: all cells published (two or more non-empty)"),
        )
    if s.startswith("margins:"):
        try:
            k = int(s.split(":", 1)[1])
        except ValueError:
            fail(f"--invariant {spec!r}: expected margins:K with K the number of features")
        if k < 1:
            fail(f"--invariant {spec!r}: K must be at least 1")
        up = theorem16_bound(k)
        return (
            f"one-way margins of {k} feature(s) (counts not given: Theorem 16 upper bound)",
            SemiAdjacency(
                up, k == 1, 2 if k > 1 else up, up, f"Theorem 16 bound k + 1 with k = {k}"
            ),
        )
    path = Path(s)
    if not path.is_file():
        fail(
            f"--invariant {spec!r}: not one of state-totals, full-table, margins:K, or an existing "
            "JSON file describing the invariant"
        )
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        _bad_file(f"{path}: not valid JSON ({exc})")
    if not isinstance(doc, dict) or "features" not in doc:
        _bad_file(f'{path}: expected an object with "features" and "invariant"')
    try:
        schema = Schema(doc["features"])
        kind = doc.get("invariant", "one-way-margins")
        hist = None
        if "records" in doc:
            hist = histogram_from_records(schema, doc["records"])
        elif "table" in doc:
            hist = doc["table"]
        if kind == "one-way-margins":
            inv = (
                CountInvariant.one_way_margins(schema, hist)
                if hist is not None
                else CountInvariant.one_way_margins(schema, margins=doc.get("margins"))
            )
        elif kind == "full-table":
            if hist is None:
                _bad_file(f'{path}: the full-table invariant needs "table" or "records"')
            inv = CountInvariant.full_table(schema, hist)
        elif isinstance(kind, dict) and "queries" in kind:
            inv = CountInvariant.from_queries(
                schema, kind["queries"], hist, values=doc.get("values"), n=doc.get("n")
            )
        else:
            _bad_file(
                f'{path}: "invariant" must be "one-way-margins", "full-table" '
                'or {"queries": [...]}'
            )
        res = semi_adjacent_parameter(inv, max_datasets=int(doc.get("max_datasets", 2000)))
    except (ValueError, TypeError, KeyError) as exc:
        _bad_file(f"{path}: {exc}")
    return inv.describe(), res
