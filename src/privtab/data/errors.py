"""Structured input problems and the single error raised for bad input.

Every check in :mod:`privtab.data` reports a :class:`Problem` naming the FILE, the ROW (in
a text file the 1-based line number as in the file — the header is line 1, so the first
data row is line 2; in a Parquet file the 1-based position of the row), the COLUMN and the
offending VALUE. Problems are collected across all input files and raised together as one
:class:`InputValidationError` — a :class:`privtab.errors.InputError` (exit code 1) — before
anything is written. Only the first :data:`DEFAULT_EXAMPLES` rows of each kind of problem are
kept (the total number of offending rows of that kind is counted exactly), so validating
10⁸ bad rows does not need memory for 10⁸ messages.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from privtab._json import fields_dict
from privtab.errors import InputError

DEFAULT_EXAMPLES = 10
_T = TypeVar("_T")
"""How many example rows of each (file, kind) are kept by a :class:`ProblemLog`."""


class InputWarning(UserWarning):
    """An input accepted with a remark (e.g. a UTF-8 byte-order mark that was stripped).

    The command line prints it as ``privtab: warning: ...``.
    """


def warn_input(file: str, message: str) -> None:
    """Emit an :class:`InputWarning` naming the file."""
    warnings.warn(f"{file}: {message}", InputWarning, stacklevel=3)


@dataclass(frozen=True)
class Problem:
    """One bad value (or one bad file-level property) of an input file.

    Attributes:
        file: the file name (or path) as given by the caller.
        kind: a stable, machine-readable code, e.g. ``"unknown_race_code"``.
        message: a human-readable explanation.
        row: text files: the 1-based line number as in the file (header = line 1);
            Parquet files: the 1-based row position; ``None`` for file-level problems
            (e.g. a wrong header) and for keys of ``config.json``.
        column: the column (or, for ``config.json``, the key) at fault.
        value: the offending value as it appears in the file (``None`` if absent).
    """

    file: str
    kind: str
    message: str
    row: int | None = None
    column: str | None = None
    value: str | None = None

    @property
    def row_label(self) -> str:
        """``line`` for text files, ``row`` for Parquet files and in-memory frames (named
        ``"… DataFrame"`` by :mod:`privtab.safetab`): a position, not a line."""
        return "row" if self.file.lower().endswith((".parquet", ".pq", " dataframe")) else "line"

    def __str__(self) -> str:
        where = [self.file]
        if self.row is not None:
            where.append(f"{self.row_label} {self.row}")
        if self.column is not None:
            label = "key" if self.file.lower().endswith(".json") else "column"
            where.append(f"{label} {self.column}")
        if self.value is not None:
            where.append(f"value {self.value!r}")
        return f"{', '.join(where)}: {self.message} [{self.kind}]"

    def to_dict(self) -> dict[str, Any]:
        return fields_dict(self, "file", "kind", "row", "column", "value", "message")


@dataclass
class ProblemLog:
    """Collects problems, keeping the first ``examples`` of each (file, kind) and exact counts.

    ``add`` records one offending row; ``add_many`` records a vectorised check's result
    (its total count and its first example rows). The examples kept are the first in row
    order (a row's problems in the order found), whatever the order they are added in: a
    file read in batches or in parts (:meth:`shifted`, :meth:`extend`) keeps the same ones.
    """

    examples: int = DEFAULT_EXAMPLES
    _kept: dict[tuple[str, str], list[tuple[tuple[bool, int], int, Problem]]] = field(
        default_factory=dict
    )
    _counts: dict[tuple[str, str], int] = field(default_factory=dict)
    _files: dict[str, int] = field(default_factory=dict)
    _seq: int = 0

    def _keep(self, problem: Problem) -> None:
        kept = self._kept.setdefault((problem.file, problem.kind), [])
        self._files.setdefault(problem.file, len(self._files))
        self._seq += 1
        entry = ((problem.row is not None, problem.row or 0), self._seq, problem)
        if len(kept) < self.examples:
            kept.append(entry)
            return
        last = max(range(len(kept)), key=lambda i: kept[i][:2])
        if entry[:2] < kept[last][:2]:
            kept[last] = entry

    def add(self, problem: Problem) -> None:
        key = (problem.file, problem.kind)
        self._counts[key] = self._counts.get(key, 0) + 1
        self._keep(problem)

    def add_many(self, count: int, examples: Iterable[Problem]) -> None:
        """Record ``count`` offending rows of one kind, given (some of) their problems."""
        if count <= 0:
            return
        it = iter(examples)
        first = next(it, None)
        if first is None:
            raise ValueError("add_many needs at least one example problem")
        key = (first.file, first.kind)
        self._counts[key] = self._counts.get(key, 0) + count
        for p in (first, *it):
            self._keep(p)

    def extend(self, other: ProblemLog) -> None:
        """Merge another log into this one (counts add up; examples are kept in order)."""
        for p in other.problems:
            self._keep(p)
        for key, n in other._counts.items():
            self._counts[key] = self._counts.get(key, 0) + n

    def shifted(self, rows: int) -> ProblemLog:
        """This log with every row number moved by ``rows`` (a part of a file read alone,
        its rows numbered from 1: ``rows`` is the file's rows before the part). Merging
        the shifted logs of a file's parts in order (:meth:`extend`) gives the log of one
        reader of the whole file: the same examples and counts."""
        out = ProblemLog(examples=self.examples)
        for p in self.problems:
            out._keep(p if p.row is None else replace(p, row=p.row + rows))
        out._counts = dict(self._counts)
        return out

    def room(self, file: str, kind: str) -> int:
        """How many more example rows of (file, kind) will be kept."""
        return max(0, self.examples - len(self._kept.get((file, kind), ())))

    @property
    def problems(self) -> tuple[Problem, ...]:
        """The kept problems: files in the order they were first reported, each file's in
        row order (file-level problems first; a row's problems in the order found). So the
        list does not depend on how the file was cut into batches or parts."""
        entries = [e for kept in self._kept.values() for e in kept]
        entries.sort(key=lambda e: (self._files[e[2].file], e[0], e[1]))
        return tuple(p for _, _, p in entries)

    @property
    def counts(self) -> dict[tuple[str, str], int]:
        return dict(self._counts)

    def __bool__(self) -> bool:
        return bool(self._counts)

    def __iter__(self) -> Iterator[Problem]:
        return iter(self.problems)

    def raise_if_any(self) -> None:
        """Raise :class:`InputValidationError` if any problem was recorded."""
        if self._counts:
            raise InputValidationError(self.problems, self.counts)


def checked(load: Callable[[ProblemLog], _T | None]) -> _T:
    """Run ``load`` with a fresh :class:`ProblemLog` and return what it loaded, or raise
    :class:`InputValidationError` with every problem it found: the one way a ``read_*``
    function turns its ``load_*`` (which collects problems) into a value or an error."""
    log = ProblemLog()
    value = load(log)
    log.raise_if_any()
    assert value is not None
    return value


class InputValidationError(InputError, ValueError):
    """Bad input: carries every problem found (first rows of each kind) and exact counts.

    A :class:`privtab.errors.InputError` (exit code 1; also a ``ValueError`` for callers
    that catch that). ``problems`` is the structured list (see :class:`Problem`);
    ``counts`` maps ``(file, kind)`` to the total number of offending rows. ``str(err)``
    lists them all, one located line each; ``file``/``row``/``column``/``value`` are those
    of the first problem.
    """

    def __init__(
        self,
        problems: Iterable[Problem],
        counts: dict[tuple[str, str], int] | None = None,
    ) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        if counts is None:
            counts = {}
            for p in self.problems:
                counts[(p.file, p.kind)] = counts.get((p.file, p.kind), 0) + 1
        self.counts: dict[tuple[str, str], int] = dict(counts)
        first = self.problems[0] if self.problems else None
        super().__init__(
            self._render(),
            file=None if first is None else first.file,
            row=None if first is None else first.row,
            column=None if first is None else first.column,
            value=None if first is None else first.value,
        )

    def __str__(self) -> str:
        return self.message

    @property
    def total(self) -> int:
        """Total number of offending rows (or file-level problems) over all kinds."""
        return sum(self.counts.values())

    def kinds(self) -> set[str]:
        return {kind for _, kind in self.counts}

    def _render(self) -> str:
        lines = [f"invalid input: {self.total} problem(s)"]
        shown: dict[tuple[str, str], int] = {}
        for p in self.problems:
            lines.append(f"  {p}")
            shown[(p.file, p.kind)] = shown.get((p.file, p.kind), 0) + 1
        for (file, kind), n in sorted(self.counts.items()):
            more = n - shown.get((file, kind), 0)
            if more > 0:
                lines.append(f"  {file}: ... and {more} more row(s) with [{kind}]")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary: every kept problem plus the exact count per (file, kind)."""
        return {
            "valid": False,
            "total": self.total,
            "counts": [
                {"file": f, "kind": k, "count": n} for (f, k), n in sorted(self.counts.items())
            ],
            "problems": [p.to_dict() for p in self.problems],
        }
