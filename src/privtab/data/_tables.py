"""Reading pipe-delimited Census text files: header check, exact strings, row numbers.

All Census text files are pipe-delimited with a header row; ``Null`` marks a missing value.
Files may use CRLF line ends and may end with blank lines (the production iteration files
do); fully blank lines carry no data and are skipped. Rows are named by their 1-based line
number in the file (the header is line 1). A UTF-8 byte-order mark at the start is
stripped, with a warning (:class:`~privtab.data.errors.InputWarning`).

Small reference files are read here in pure Python (they have at most ~14,000 rows); the
large person and GRF-C files are scanned with polars (see :mod:`privtab.data.persons` and
:mod:`privtab.data.geography`), using :func:`read_header` and :func:`check_header` from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from privtab.data.errors import Problem, ProblemLog, warn_input

ROW = "ROW"
"""Name of the row column added by every reader: the 1-based line number in a text file
(the header is line 1), the 1-based row position in a Parquet file."""
BOM = "\ufeff"

SEPARATOR = "|"
NULL = "Null"


def read_header(path: Path, log: ProblemLog) -> list[str] | None:
    """The column names on the first line of a text file (``None`` + a problem if unreadable)."""
    try:
        with path.open("rb") as fh:
            first = fh.readline()
    except OSError as exc:
        log.add(Problem(str(path), "missing_file", f"cannot read the file: {exc.strerror}"))
        return None
    if not first.strip():
        log.add(Problem(str(path), "empty_file", "the file is empty (no header row)", row=1))
        return None
    try:
        line = first.decode("utf-8")
    except UnicodeDecodeError as exc:
        log.add(
            Problem(
                str(path),
                "invalid_utf8",
                f"the header is not valid UTF-8 (byte {exc.start + 1} of the line)",
                row=1,
            )
        )
        return None
    return _strip_bom(str(path), line).rstrip("\r\n").split(SEPARATOR)


def _strip_bom(file: str, text: str) -> str:
    if text.startswith(BOM):
        warn_input(file, "UTF-8 byte-order mark at the start of the file ignored")
        return text[len(BOM) :]
    return text


def check_header(
    file: str,
    found: Sequence[str],
    expected: Sequence[str],
    log: ProblemLog,
    *,
    extra_ok: bool = False,
    ordered: bool = True,
) -> bool:
    """Compare a header with the expected columns; add a ``wrong_header`` problem if different.

    ``extra_ok`` accepts additional columns (the real GRF-C has dozens); ``ordered``
    requires the expected columns in the expected order (text files read unchanged).
    """
    found = list(found)
    missing = [c for c in expected if c not in found]
    extra = [c for c in found if c not in expected]
    dupes = sorted({c for c in found if found.count(c) > 1})
    problems: list[str] = []
    if missing:
        problems.append(f"missing column(s) {', '.join(missing)}")
    if extra and not extra_ok:
        problems.append(f"unexpected column(s) {', '.join(extra)}")
    if dupes:
        problems.append(f"repeated column(s) {', '.join(dupes)}")
    if not problems and ordered:
        kept = [c for c in found if c in expected]
        if kept != list(expected):
            problems.append("columns are not in the expected order")
    if problems:
        col = (missing or extra or dupes or [""])[0] or None
        log.add(
            Problem(
                file,
                "wrong_header",
                "; ".join(problems) + f"; expected {SEPARATOR.join(expected)}",
                column=col,
                value=SEPARATOR.join(found),
            )
        )
        return False
    return True


def read_small_table(
    path: str | Path, columns: Sequence[str], log: ProblemLog
) -> pl.DataFrame | None:
    """Read a small pipe-delimited text file exactly as strings, with a ``ROW`` column.

    Checks the header (exact columns, in order) and the number of fields of every row.
    Returns ``None`` if the file cannot be used (problems are in ``log``).
    """
    path = Path(path)
    name = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        log.add(Problem(name, "missing_file", f"cannot read the file: {exc.strerror}"))
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        lineno = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        log.add(
            Problem(
                name,
                "invalid_utf8",
                f"not valid UTF-8 (byte {col} of the line)",
                row=lineno,
                value=raw[exc.start : exc.end + 8].decode("utf-8", "backslashreplace"),
            )
        )
        return None
    lines = _strip_bom(name, text).splitlines()
    if not lines or not lines[0].strip():
        log.add(Problem(name, "empty_file", "the file is empty (no header row)", row=1))
        return None
    header = lines[0].split(SEPARATOR)
    if not check_header(name, header, columns, log):
        return None
    rows: list[list[str]] = []
    numbers: list[int] = []
    n = len(columns)
    for i, line in enumerate(lines[1:], start=2):  # line numbers: the header is line 1
        if not line.strip():
            continue
        fields = line.split(SEPARATOR)
        if len(fields) != n:
            log.add(
                Problem(
                    name,
                    "wrong_field_count",
                    f"expected {n} fields separated by '|', found {len(fields)}",
                    row=i,
                    value=line,
                )
            )
            continue
        rows.append(fields)
        numbers.append(i)
    data = {c: [r[j] for r in rows] for j, c in enumerate(columns)}
    return pl.DataFrame(
        {ROW: numbers, **data},
        schema={ROW: pl.UInt32, **dict.fromkeys(columns, pl.String)},
    )


def report_rows(
    log: ProblemLog,
    file: str,
    kind: str,
    message: str,
    bad: pl.DataFrame,
    column: str,
    value_column: str | None = None,
) -> None:
    """Add one problem per row of ``bad`` (which has ``ROW`` and ``column``) — first rows only.

    ``bad`` holds every offending row (or at least its height is the exact count); only the
    first ``log.room(...)`` rows are turned into messages.
    """
    count = bad.height
    if count == 0:
        return
    take = bad.head(max(1, log.room(file, kind)))
    vcol = value_column or column
    examples = [
        Problem(
            file,
            kind,
            message,
            row=None if r is None else int(r),
            column=column,
            value=None if v is None else str(v),
        )
        for r, v in zip(take[ROW].to_list(), take[vcol].to_list(), strict=True)
    ]
    log.add_many(count, examples)


def pattern_ok(column: str, regex: str) -> pl.Expr:
    """True where ``column`` matches ``regex`` in full (nulls do not match)."""
    return pl.col(column).str.contains(f"^(?:{regex})$").fill_null(False)


FOUR_DIGIT_CODE = r"[1-9][0-9]{3}"
"""A race/ethnicity code (schema pattern ``[1-9]\\d{3}``, ASCII digits only)."""

ITERATION_CODE_PATTERN = r"[0-9]{4}"
