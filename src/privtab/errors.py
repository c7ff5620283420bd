"""The one error type for user-caused failures, and its exit codes.

Every failure a user can cause and fix — a bad input file or config value, a bad flag or
flag combination, an output location that cannot be written, a full disk, a missing optional
dependency — is raised as a :class:`UserError` (or a subclass). The command line prints it as
one located message (file, row, column, value where they exist, and what to do) and exits
with :attr:`UserError.exit_code`; it never shows a traceback for it unless ``--debug`` is
given. Anything else that escapes a command is a bug in privtab (exit code
:data:`EXIT_BUG`).

Exit codes (documented in ``docs/cli.md``):

- :data:`EXIT_INPUT` (1): bad input — a person file, GRF-C, iteration file or config value;
- :data:`EXIT_USAGE` (2): bad usage — flags, output location, missing optional dependency;
- :data:`EXIT_BUG` (3): an unexpected internal error (a bug in privtab);
- :data:`EXIT_FAULT` (4): the run failed in its environment — a Spark worker died, a
  cluster job was lost — before anything was published (:class:`RunFailedError`);
- :data:`EXIT_INTERRUPTED` (130): interrupted (SIGINT/SIGTERM/SIGHUP) before anything was
  published.

Importing this module is cheap (standard library only).
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "EXIT_BUG",
    "EXIT_FAULT",
    "EXIT_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "InputError",
    "RunFailedError",
    "UsageError",
    "UserError",
]

EXIT_INPUT = 1
EXIT_USAGE = 2
EXIT_BUG = 3
EXIT_FAULT = 4
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """A failure the user caused and can fix: printed as one located message, no traceback.

    ``file``, ``row`` (the 1-based line number as in the file), ``column`` and ``value``
    locate the problem where they exist; ``hint`` says what to do.
    """

    exit_code: ClassVar[int] = EXIT_USAGE

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        file: str | None = None,
        row: int | None = None,
        column: str | None = None,
        value: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.file = file
        self.row = row
        self.column = column
        self.value = value

    def location(self) -> str:
        """``file, line r, column c, value 'v'`` (the parts that exist), or ``""``."""
        where = []
        if self.file is not None:
            where.append(str(self.file))
        if self.row is not None:
            where.append(f"line {self.row}")
        if self.column is not None:
            where.append(f"column {self.column}")
        if self.value is not None:
            where.append(f"value {self.value!r}")
        return ", ".join(where)

    def __str__(self) -> str:
        loc = self.location()
        text = f"{loc}: {self.message}" if loc else self.message
        return f"{text} ({self.hint})" if self.hint else text


class InputError(UserError):
    """A bad input file or config value (exit code 1)."""

    exit_code: ClassVar[int] = EXIT_INPUT


class UsageError(UserError):
    """Bad usage: a flag, an output location, a missing optional dependency (exit code 2)."""

    exit_code: ClassVar[int] = EXIT_USAGE


class RunFailedError(UserError):
    """The run failed in its environment (a worker process died, a cluster job was lost):
    nothing was published; run again, with more resources if the message says so."""

    exit_code: ClassVar[int] = EXIT_FAULT
