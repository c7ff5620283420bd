"""How the command line ends on an error: one located message, a documented exit code.

Every command runs inside :class:`ErrorHandlingGroup` (the ``privtab`` group), which turns

- a :class:`privtab.errors.UserError` (bad input, bad usage, output location, missing
  optional dependency) into ``privtab: error: <file, line, column, value>: <message>``
  on stderr and its exit code (1 input, 2 usage) — never a traceback;
- ``KeyboardInterrupt`` (Ctrl-C, and SIGTERM/SIGHUP where a command maps them to it) into
  ``privtab: interrupted`` and exit code 130;
- an ``OSError`` the file system raises for a path whatever privtab does — a name too long,
  a symbolic link loop — into the usage error it is (exit code 2, naming the path);
- anything else — a bug in privtab — into one line naming the exception and the file the
  traceback was written to (under the temporary directory), exit code 3.

``--debug`` (before the command: ``privtab --debug validate ...``) or ``PRIVTAB_DEBUG=1``
also prints the traceback. With ``--json`` the command's one JSON object on stdout is then
``{"error": {...}}`` (see :func:`error_document`); the message is still printed on stderr.
Input warnings (:class:`privtab.data.errors.InputWarning`, e.g. a stripped UTF-8
byte-order mark) are printed as ``privtab: warning: ...``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import tempfile
import traceback
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from typer.exceptions import TyperException

from privtab.cli._render import FullHelpGroup, log_to_stderr
from privtab.errors import EXIT_BUG, EXIT_INTERRUPTED, UsageError, UserError

__all__ = ["ErrorHandlingGroup", "error_document"]

_ARGV = "privtab.argv"
DEBUG = "privtab.debug"


def _echo(message: str) -> None:
    typer.echo(message, err=True)


def error_document(exc: BaseException, exit_code: int, **extra: Any) -> dict[str, Any]:
    """The ``--json`` form of an error: ``{"error": {...}}`` (plus, for bad input, the
    validation summary ``valid``/``total``/``counts``/``problems`` at the top level)."""
    doc: dict[str, Any] = {
        "exit_code": exit_code,
        "type": type(exc).__name__,
        "message": getattr(exc, "message", str(exc)),
        **extra,
    }
    if isinstance(exc, UserError):
        doc.update(file=exc.file, row=exc.row, column=exc.column, value=exc.value, hint=exc.hint)
    out: dict[str, Any] = {"error": doc}
    to_dict = getattr(exc, "to_dict", None)
    if callable(to_dict):
        out.update(to_dict())
    return out


def _write_traceback(exc: BaseException) -> str:
    fd, path = tempfile.mkstemp(prefix="privtab-bug-", suffix=".txt")
    with os.fdopen(fd, "w") as fh:
        fh.write(f"privtab {' '.join(sys.argv[1:])}\n\n")
        traceback.print_exception(exc, file=fh)
    return path


def _report(exc: BaseException, code: int, as_json: bool, debug: bool, **extra: Any) -> None:
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    if as_json:
        from privtab.cli._render import print_json

        print_json(error_document(exc, code, **extra))


@contextmanager
def _input_warnings() -> Iterator[None]:
    """Print :class:`~privtab.data.errors.InputWarning` s as ``privtab: warning: ...``."""
    seen: set[str] = set()
    previous = warnings.showwarning

    def show(message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
        if category.__name__ == "InputWarning":
            if str(message) not in seen:
                seen.add(str(message))
                _echo(f"privtab: warning: {message}")
            return
        previous(message, category, *args, **kwargs)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous


class ErrorHandlingGroup(FullHelpGroup):
    """The root command group: runs a command and ends every failure as documented."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        ctx.meta[_ARGV] = list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        argv = ctx.meta.get(_ARGV, [])
        as_json = "--json" in argv
        try:
            with _input_warnings(), log_to_stderr():
                return super().invoke(ctx)
        except (typer.Exit, typer.Abort, TyperException):
            raise
        except UserError as exc:
            _echo(f"privtab: error: {exc}")
            _report(exc, exc.exit_code, as_json, _debug(ctx))
            raise typer.Exit(exc.exit_code) from None
        except BrokenPipeError:  # the reader of stdout went away (``| head``): not an error
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(0) from None
        except KeyboardInterrupt as exc:
            _echo("privtab: interrupted: nothing was published")
            _report(exc, EXIT_INTERRUPTED, as_json, _debug(ctx))
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except Exception as exc:
            path_error = _path_error(exc)
            if path_error is not None:
                _echo(f"privtab: error: {path_error}")
                _report(path_error, path_error.exit_code, as_json, _debug(ctx))
                raise typer.Exit(path_error.exit_code) from None
            debug = _debug(ctx)
            path = _write_traceback(exc)
            _echo(
                f"privtab: internal error (a bug in privtab, please report it): "
                f"{type(exc).__name__}: {_one_line(exc)}; traceback written to {path}"
                + ("" if debug else " (run with --debug to print it)")
            )
            _report(exc, EXIT_BUG, as_json, debug, traceback_file=path)
            raise typer.Exit(EXIT_BUG) from None


_PATH_ERRNOS = {
    errno.ENAMETOOLONG: "the name is too long for the file system (at most 255 bytes per "
    "folder or file name)",
    errno.ELOOP: "a symbolic link on the path loops (it never reaches a file)",
    errno.EISDIR: "the path names a folder where a file is to be read or written",
    errno.ENOTDIR: "a part of the path that must be a folder is a file",
}


def _path_error(exc: BaseException) -> UsageError | None:
    """A path the file system refuses whatever privtab does (a name too long, a symbolic
    link loop) as the user error it is, naming the path; ``None`` for anything else."""
    if not isinstance(exc, OSError) or exc.errno not in _PATH_ERRNOS:
        return None
    named = exc.filename2 if exc.filename2 is not None else exc.filename  # a rename: its target
    name = None if named is None else str(named)
    return UsageError(_PATH_ERRNOS[exc.errno], file=name)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


def _debug(ctx: Any) -> bool:
    """``--debug`` (read after the root callback set it) or ``PRIVTAB_DEBUG=1``."""
    return bool(ctx.meta.get(DEBUG)) or os.environ.get("PRIVTAB_DEBUG", "") not in ("", "0")
