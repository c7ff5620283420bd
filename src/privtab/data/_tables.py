"""Reading pipe-delimited Census text files: header check, exact strings, row numbers.

All Census text files are pipe-delimited with a header row; ``Null`` marks a missing value.
Files may use CRLF line ends and may end with blank lines (the production iteration files
do); fully blank lines carry no data and are skipped. Rows are named by their 1-based line
number in the file (the header is line 1). A UTF-8 byte-order mark at the start is
stripped, with a warning (:class:`~privtab.data.errors.InputWarning`).

Small reference files are read here in pure Python (they have at most ~14,000 rows); the
large person and GRF-C files are scanned with polars (see :mod:`privtab.data.persons` and
:mod:`privtab.data.geography`), using :func:`read_header` and :func:`check_header` from here.

Every input is checked to be a **regular file** before it is opened
(:func:`check_regular_file`): a directory, a named pipe (FIFO), a device such as
``/dev/zero``, a socket, a symbolic link whose target is missing or that loops, or a name
the file system refuses as too long is reported as such — a pipe or a device could block
forever or never end. Files read whole into memory have a size limit
(:data:`MAX_REFERENCE_BYTES`). The checks run on the path as given, before anything else
is read; a file replaced by a pipe between the check and the read is the operator's race.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from privtab._files import file_problem
from privtab.data.errors import Problem, ProblemLog, warn_input

ROW = "ROW"
"""Name of the row column added by every reader: the 1-based line number in a text file
(the header is line 1), the 1-based row position in a Parquet file."""
BOM = "\ufeff"

SEPARATOR = "|"
NULL = "Null"
MAX_HEADER_BYTES = 1 << 16
"""The longest header line read (64 KiB; a Census header has about 150 bytes): a file
without ``\\n`` line ends is refused after that much, not read whole."""
MAX_REFERENCE_BYTES = 64 << 20
"""The largest reference file read (64 MiB; the 2020 files are at most 0.3 MB): they are
read whole, so a wrong file (a person file given as a code list) is refused before it
fills memory."""


def check_regular_file(path: Path, log: ProblemLog, max_bytes: int | None = None) -> bool:
    """Whether ``path`` is a readable regular file (see :func:`file_problem`); if not, the
    reason is added to ``log`` as a problem naming the file."""
    found = file_problem(path, max_bytes)
    if found is None:
        return True
    log.add(Problem(str(path), found[0], found[1]))
    return False


def read_header(path: Path, log: ProblemLog) -> list[str] | None:
    """The column names on the first line of a text file (``None`` + a problem if unreadable)."""
    if not check_regular_file(path, log):
        return None
    try:
        with path.open("rb") as fh:
            first = fh.readline(MAX_HEADER_BYTES + 1)
    except OSError as exc:
        log.add(Problem(str(path), "unreadable", f"cannot read the file: {exc.strerror}"))
        return None
    body = first.rstrip(b"\r\n")
    if b"\r" in body or len(first) > MAX_HEADER_BYTES:
        cr = b"\r" in body
        log.add(
            Problem(
                str(path),
                "wrong_line_ends",
                "the lines end with a bare carriage return (\\r, old Mac style); Census text "
                "files end lines with \\n or \\r\\n"
                if cr
                else f"the first line is longer than {MAX_HEADER_BYTES:,} bytes: not a header "
                "(is this a text file with \\n line ends?)",
                row=1,
            )
        )
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


def decode_utf8(name: str, raw: bytes, log: ProblemLog) -> str | None:
    """``raw`` decoded as UTF-8, or ``None`` and an ``invalid_utf8`` problem naming the line
    and byte of the first invalid byte and showing the bytes around it (escaped)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        lineno = raw[: exc.start].count(b"\n") + 1
        line_start = raw.rfind(b"\n", 0, exc.start) + 1
        line_end = raw.find(b"\n", exc.start)
        line_end = len(raw) if line_end < 0 else line_end
        shown = raw[max(line_start, exc.start - 8) : min(line_end, exc.end + 8)]
        log.add(
            Problem(
                name,
                "invalid_utf8",
                f"not valid UTF-8: byte {exc.start - line_start + 1} of the line is "
                f"0x{raw[exc.start]:02X} (the file must be UTF-8; a Latin-1 or UTF-16 file "
                "must be converted)",
                row=lineno,
                value=shown.decode("utf-8", "backslashreplace"),
            )
        )
        return None


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
    if not check_regular_file(path, log, MAX_REFERENCE_BYTES):
        return None
    try:
        raw = path.read_bytes()
    except OSError as exc:
        log.add(Problem(name, "unreadable", f"cannot read the file: {exc.strerror}"))
        return None
    text = decode_utf8(name, raw, log)
    if text is None:
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
    message_column: str | None = None,
) -> None:
    """Add one problem per row of ``bad`` (which has ``ROW`` and ``column``) — first rows only.

    ``bad`` holds every offending row (or at least its height is the exact count); only the
    first ``log.room(...)`` rows are turned into messages. ``message_column``: a column of
    ``bad`` whose text is appended to ``message`` row by row (e.g. where a duplicate was
    first seen).
    """
    count = bad.height
    if count == 0:
        return
    take = bad.head(max(1, log.room(file, kind)))
    vcol = value_column or column
    extra = take[message_column].to_list() if message_column else [""] * take.height
    examples = [
        Problem(
            file,
            kind,
            message.format(e) if message_column else message,
            row=None if r is None else int(r),
            column=column,
            value=None if v is None else str(v),
        )
        for r, v, e in zip(take[ROW].to_list(), take[vcol].to_list(), extra, strict=True)
    ]
    log.add_many(count, examples)


def pattern_ok(column: str, regex: str) -> pl.Expr:
    """True where ``column`` matches ``regex`` in full (nulls do not match)."""
    return pl.col(column).str.contains(f"^(?:{regex})$").fill_null(False)


FOUR_DIGIT_CODE = r"[1-9][0-9]{3}"
"""A race/ethnicity code (schema pattern ``[1-9]\\d{3}``, ASCII digits only)."""

ITERATION_CODE_PATTERN = r"[0-9]{4}"
