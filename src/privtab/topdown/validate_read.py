"""Reading the files of a TopDown release for its validation (:mod:`privtab.topdown.validate`):
the problem log, a text file in row batches, its Parquet copy compared batch by batch, and
the fast way — the copy read as the text (checked byte for byte).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from privtab.data.errors import Problem, ProblemLog
from privtab.publish.validation import OutputValidationError
from privtab.release.marking import PRIVATE_KEY

__all__: list[str] = []  # the validation's parts: privtab.topdown.validate is the API


LINE = "_LINE"
SEP = "|"
#: Text read per batch (bytes): the memory of a file being validated.
BLOCK_BYTES = 16 << 20


class _Check:
    """The problem log of one validation, with helpers to report located rows."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.log = ProblemLog()

    def name(self, path: Path) -> str:
        return str(path)

    def raise_if_any(self) -> None:
        if self.log:
            raise OutputValidationError(self.log.problems, self.log.counts)

    def add(
        self,
        path: Path,
        kind: str,
        message: str,
        row: int | None = None,
        column: str | None = None,
        value: str | None = None,
    ) -> None:
        self.log.add(Problem(self.name(path), kind, message, row, column, value))

    def rows(
        self, path: Path, kind: str, message: str, bad: pl.DataFrame, column: str | None
    ) -> bool:
        """Report the rows of ``bad`` (with :data:`LINE`); ``True`` if there were any."""
        if not bad.height:
            return False
        first = bad.head(self.log.examples)
        self.log.add_many(
            bad.height,
            (
                Problem(
                    self.name(path),
                    kind,
                    message,
                    int(r[LINE]),
                    column,
                    None if column is None or r.get(column) is None else str(r[column]),
                )
                for r in first.iter_rows(named=True)
            ),
        )
        return True


class _TextStream:
    """A pipe-delimited file read in row batches (every column a string, with its line
    numbers in :data:`LINE`; header = line 1): at most one batch (≈ :data:`BLOCK_BYTES` of
    text) is held. ``ok`` is false once the header or a line's field count is wrong (a
    problem is logged); ``rows`` counts the data rows read."""

    #: the line of the first data row (the header is line 1)
    first_line = 2

    def __init__(self, check: _Check, path: Path, columns: Sequence[str]) -> None:
        self.check, self.path, self.columns = check, path, tuple(columns)
        self.ok = True
        self.rows = 0

    def _header(self) -> bool:
        try:
            with self.path.open("rb") as fh:
                header = fh.readline().decode("utf-8", "replace").rstrip("\r\n")
        except OSError as exc:
            self.check.add(self.path, "layout", f"cannot read: {exc.strerror}")
            return False
        if header != SEP.join(self.columns):
            self.check.add(
                self.path, "header", f"the header must be {SEP.join(self.columns)}", 1, None,
                header,
            )  # fmt: skip
            return False
        return True

    def _failed(self, exc: Exception) -> None:
        self.ok = False
        self.check.add(
            self.path,
            "field_count",
            f"not a {len(self.columns)}-column pipe-delimited file: {exc}",
            self.rows + 2,
        )

    def __iter__(self) -> Iterator[pl.DataFrame]:
        if not self._header():
            self.ok = False
            return
        strings = {c: pa.string() for c in self.columns}
        try:
            reader = pacsv.open_csv(
                self.path,
                read_options=pacsv.ReadOptions(
                    skip_rows=1, column_names=list(self.columns), block_size=BLOCK_BYTES
                ),
                parse_options=pacsv.ParseOptions(delimiter=SEP, quote_char=False),
                convert_options=pacsv.ConvertOptions(
                    column_types=strings, strings_can_be_null=False
                ),
            )
        except (pa.ArrowInvalid, OSError) as exc:
            self._failed(exc)
            return
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            except (pa.ArrowInvalid, OSError) as exc:
                self._failed(exc)
                return
            df = pl.DataFrame(pl.from_arrow(batch))
            first = self.rows + 2
            self.rows += df.height
            yield df.with_columns(
                pl.int_range(first, first + df.height, dtype=pl.Int64).alias(LINE)
            )


class _ParquetCopy:
    """A Parquet copy compared with its text file batch by batch (:meth:`compare` with each
    text batch in order, then :meth:`finish`): at most one batch of each is held."""

    def __init__(
        self, check: _Check, path: Path, columns: Sequence[str], private: bool,
        ints: Sequence[str],
    ) -> None:  # fmt: skip
        self.check, self.path, self.columns = check, path, list(columns)
        self.ok = False
        self.first: int | None = None
        self.at = 0
        self._buf: pl.DataFrame | None = None
        try:
            pf = pq.ParquetFile(path)
            schema = pf.schema_arrow
            self.height = pf.metadata.num_rows
        except (OSError, pa.ArrowException, ValueError) as exc:
            check.add(path, "parquet_copy", f"cannot read: {exc}")
            return
        flag = (schema.metadata or {}).get(PRIVATE_KEY.encode(), b"").decode()
        if flag != ("true" if private else "false"):
            check.add(
                path, "private_marker",
                f"privacy metadata {PRIVATE_KEY} must agree with release.json", None,
                PRIVATE_KEY, flag,
            )  # fmt: skip
        if schema.names != self.columns:
            check.add(
                path, "parquet_copy", f"the columns must be {self.columns}", None, None,
                str(schema.names),
            )  # fmt: skip
            return
        for c in ints:
            if schema.field(c).type != pa.int64():
                check.add(
                    path, "parquet_copy", f"column {c} must be Int64", None, c,
                    str(schema.field(c).type),
                )  # fmt: skip
        self._batches = pf.iter_batches(batch_size=1 << 16)
        self.ok = True

    def _take(self, n: int) -> pl.DataFrame | None:
        parts = [] if self._buf is None else [self._buf]
        have = sum(p.height for p in parts)
        while have < n:
            try:
                batch = next(self._batches)
            except StopIteration:
                break
            except (OSError, pa.ArrowException) as exc:
                self.check.add(self.path, "parquet_copy", f"cannot read: {exc}")
                self.ok = False
                return None
            parts.append(pl.DataFrame(pl.from_arrow(batch)))
            have += parts[-1].height
        if have < n:
            return None  # fewer rows than the text file: reported by finish
        whole = pl.concat(parts) if len(parts) > 1 else parts[0]
        self._buf = whole.slice(n)
        return whole.slice(0, n)

    def compare(self, text: pl.DataFrame) -> None:
        """The next ``text.height`` rows of the copy against the text batch ``text``."""
        if not self.ok or (self.first is not None) or not text.height:
            self.at += text.height
            return
        got = self._take(text.height)
        if got is None:
            self.at += text.height
            return
        for c in self.columns:
            differs = np.flatnonzero(
                got.get_column(c).cast(pl.String)
                .ne_missing(text.get_column(c)).fill_null(True).to_numpy()
            )  # fmt: skip
            if differs.size and (self.first is None or self.at + int(differs[0]) < self.first):
                self.first = self.at + int(differs[0])
        self.at += text.height

    def finish(self, text_rows: int) -> None:
        if not self.ok:
            return
        if self.height != text_rows:
            self.check.add(
                self.path, "parquet_copy", f"{self.height} rows, the text file has {text_rows}"
            )
            return
        if self.first is not None:
            self.check.add(self.path, "parquet_copy", "differs from the text file", self.first + 1)


class _CopyAsText:
    """A text file read the fast way, for a file with nothing wrong: its Parquet copy read
    in slices, each slice written back as pipe-delimited text and compared **byte for
    byte** with the text file on disk, and yielded as the text file's rows would be (every
    column a string, :data:`LINE`) — the text holds exactly these values, so every rule
    checked on them holds for the text. ``ok`` turns false (and a problem is logged) at
    the first difference; ``sha256``: the text file's, once all its bytes were read;
    ``complete``: every row was yielded.

    ``text`` false (a Parquet-only release, :mod:`privtab.topdown.formats`): ``path`` is
    the Parquet file itself, read the same way with nothing to compare; its rows are
    numbered from 1 (``first_line``) and a missing value is a ``pattern`` problem."""

    def __init__(
        self, check: _Check, path: Path, columns: Sequence[str], private: bool,
        ints: Sequence[str], step: int | None = None, as_text: bool = True, text: bool = True,
    ) -> None:  # fmt: skip
        self.check, self.path, self.columns, self.ints = check, path, tuple(columns), ints
        #: rows per slice (default from :data:`BLOCK_BYTES`); ``as_text`` false: the
        #: slices as read (``ints`` Int64, no :data:`LINE`)
        self.step, self.as_text, self.text = step, as_text, text
        self.first_line = 2 if text else 1
        self.ok = True
        self.complete = False
        self.rows = 0
        self.sha256: str | None = None
        self._copy = _ParquetCopy(check, path.with_suffix(".parquet"), columns, private, ints)

    def _differs(self) -> None:
        self.ok = False
        self.check.add(self.path, "parquet_copy", "differs from its Parquet copy")

    def _missing(self, df: pl.DataFrame) -> None:
        """A slice with a null value (Parquet only): the first one, located."""
        self.ok = False
        if not df.height:
            self.check.add(self.path, "parquet_copy", f"ends after {self.rows} rows")
            return
        nulls = df.select(pl.all().is_null()).to_numpy()
        row, col = (int(i[0]) for i in np.nonzero(nulls))
        self.check.add(
            self.path, "pattern", "a value is missing (null)", self.rows + row + 1,
            df.columns[col],
        )  # fmt: skip

    def _compare(self, fh: io.BufferedReader | None, digest: Any, df: pl.DataFrame) -> bool:
        """The slice written back as text equals the next bytes of the text file."""
        if fh is None:
            return True
        buf = io.BytesIO()
        df.write_csv(buf, separator=SEP, include_header=False)
        want = buf.getvalue()
        got = fh.read(len(want))
        digest.update(got)
        return got == want

    def __iter__(self) -> Iterator[pl.DataFrame]:
        if not self._copy.ok:
            self.ok = False
            return
        digest = hashlib.sha256()
        step = self.step or max(1, BLOCK_BYTES // 64)
        frame = pl.scan_parquet(self.path.with_suffix(".parquet"))
        with contextlib.ExitStack() as stack:
            fh = stack.enter_context(self.path.open("rb")) if self.text else None
            if fh is not None:
                header = (SEP.join(self.columns) + "\n").encode()
                head = fh.read(len(header))
                digest.update(head)
                if head != header:
                    self._differs()
                    return
            while self.rows < self._copy.height:
                df = frame.slice(self.rows, step).collect()
                if not df.height or any(df.null_count().row(0)):
                    if self.text:
                        self._differs()
                    else:
                        self._missing(df)
                    return
                if not self._compare(fh, digest, df):
                    self._differs()
                    return
                first = self.rows + self.first_line
                self.rows += df.height
                yield (
                    df.with_columns(
                        *(pl.col(c).cast(pl.String) for c in self.ints),
                        pl.int_range(first, first + df.height, dtype=pl.Int64).alias(LINE),
                    )
                    if self.as_text
                    else df
                )
            if fh is not None and fh.read(1):
                self._differs()
                return
        self.sha256 = digest.hexdigest() if self.text else None
        self.complete = True


def _not_after(key: pl.DataFrame, strict: bool) -> np.ndarray:
    """Indices ``i ≥ 1`` of the rows of ``key`` (its columns in order) that do not come
    after row ``i − 1`` (lexicographically: ``strict`` — not greater; else — less)."""
    later: pl.Expr = pl.lit(not strict)
    for c in reversed(key.columns):
        prev = pl.col(c).shift(1)
        later = (pl.col(c) > prev) | ((pl.col(c) == prev) & later)
    if key.height < 2:
        return np.zeros(0, dtype=np.int64)
    ok = key.select(later.fill_null(True)).to_series().to_numpy()
    return np.flatnonzero(~ok[1:]) + 1
