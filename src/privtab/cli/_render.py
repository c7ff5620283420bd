"""How every command shows what it did: the one place that prints.

- results: rich tables on stdout that fit the terminal — every cell wraps or folds, no
  value is ever cut to "…" — or, with ``--json``, exactly one JSON object;
- log records of the library (loggers ``privtab.*``) and warnings: one plain line each on
  stderr (``privtab: ...``, ``privtab: warning: ...``); the root options ``--quiet`` (warnings
  and errors only) and ``--verbose`` (debug records too) set the level;
- user errors (:func:`fail`) end the command through :class:`privtab.errors.UserError`.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from privtab._json import jsonable
from privtab.errors import EXIT_INPUT, EXIT_INTERRUPTED, EXIT_USAGE, InputError, UsageError
from privtab.report.text import Table, fields_table

LOG = logging.getLogger("privtab")


class _StderrHandler(logging.Handler):
    """One plain line per record on the *current* ``sys.stderr`` (tests swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        tag = "warning: " if record.levelno >= logging.WARNING else ""
        text = f"privtab: {tag}{record.getMessage()}"
        if sys.stderr.isatty():  # a terminal: wrapped to its width (logs keep one line)
            import shutil
            import textwrap

            width = shutil.get_terminal_size().columns
            text = textwrap.fill(text, width, subsequent_indent="  ", break_long_words=False)
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


class FullHelpGroup(TyperGroup):
    """A command group whose ``--help`` lists each command with its whole description
    (wrapped at spaces to the terminal), never cut to "…" (issue 31)."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, describe_command(cmd)))
        if rows:
            with formatter.section("Commands"):
                _write_rows(formatter, rows)


def _write_rows(formatter: Any, rows: list[tuple[str, str]]) -> None:
    """``name  description`` rows, the descriptions wrapped at spaces only (a hyphenated
    word such as "post-processing" is never broken)."""
    import textwrap

    first = min(max(len(name) for name, _ in rows), 30) + 2
    indent = formatter.current_indent
    width = max(formatter.width - indent - first, 20)
    for name, text in rows:
        lines = textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False)
        lines = lines or [""]
        if len(name) + 2 > first:
            formatter.write(f"{'':>{indent}}{name}\n")
            head = ""
        else:
            head = name
        formatter.write(f"{'':>{indent}}{head:<{first}}{lines[0]}\n")
        for line in lines[1:]:
            formatter.write(f"{'':>{indent + first}}{line}\n")


def describe_command(cmd: Any) -> str:
    """A command's description for a list of commands: its short help, else the first
    paragraph of its help, joined into one line (not truncated)."""
    text = cmd.short_help or (cmd.help or "").strip().split("\n\n")[0]
    return " ".join(text.split())


def group(help: str, **kw: Any) -> typer.Typer:
    """A command group with plain help that wraps to the terminal (no truncated options or
    command descriptions)."""
    return typer.Typer(
        rich_markup_mode=None, help=help, cls=FullHelpGroup, **{"no_args_is_help": True, **kw}
    )


def add_group(app: typer.Typer, name: str, help: str, commands: dict[str, Any]) -> None:
    """Add the group ``name`` of ``commands`` (name → function) to ``app``."""
    sub = group(help)
    for command, function in commands.items():
        sub.command(command)(function)
    app.add_typer(sub, name=name)


def set_verbosity(quiet: bool = False, verbose: bool = False) -> None:
    """The level of the records printed: INFO (default), WARNING (quiet), DEBUG (verbose)."""
    LOG.setLevel(logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO)


@contextmanager
def log_to_stderr() -> Iterator[None]:
    """While a command runs, print the library's log records on stderr (and only then:
    a notebook or a test that called the command keeps its own logging afterwards)."""
    handler, before = _StderrHandler(), (LOG.level, LOG.propagate)
    LOG.addHandler(handler)
    LOG.propagate = False
    set_verbosity()
    try:
        yield
    finally:
        LOG.removeHandler(handler)
        LOG.setLevel(before[0])
        LOG.propagate = before[1]


def _quiet(value: bool) -> bool:
    if value:
        set_verbosity(quiet=True)
    return value


QuietOption = Annotated[
    bool,
    typer.Option("--quiet", "-q", callback=_quiet, help="No progress on stderr (as privtab -q)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
ConfigOption = Annotated[
    str | None,
    typer.Option("--config", "-c", help="config.json or its directory (default: 2020 production)."),
]
DeltaOption = Annotated[float, typer.Option("--delta", help="δ of the (ε, δ) conversions.")]
OverwriteOption = Annotated[
    bool, typer.Option("--overwrite", help="Replace an output that privtab wrote.")
]


def print_json(obj: Mapping[str, Any]) -> None:
    """Print exactly one JSON object on stdout (NaN → null, ±inf → strings)."""
    sys.stdout.write(json.dumps(jsonable(dict(obj)), indent=2) + "\n")
    sys.stdout.flush()


def fail(message: str, code: int = EXIT_USAGE, hint: str | None = None) -> NoReturn:
    """End the command with a user error — bad usage (exit 2), bad input (exit 1) — or
    with ``privtab: error: MESSAGE`` and another exit ``code`` (3: a benchmark failed)."""
    if code in (EXIT_INPUT, EXIT_USAGE):
        raise (InputError if code == EXIT_INPUT else UsageError)(message, hint=hint)
    typer.echo(f"privtab: error: {message}", err=True)
    raise typer.Exit(code)


@contextmanager
def usage_errors(*kinds: type[Exception]) -> Iterator[None]:
    """Inside, a library's ``kinds`` of exception (default ``ValueError``: a bad option
    value) ends the command as bad usage with its message (exit 2)."""
    caught = kinds or (ValueError,)
    try:
        yield
    except caught as exc:
        fail(str(exc))


def warn(message: str) -> None:
    """A warning on stderr (shown even with ``--quiet``)."""
    LOG.warning(message)


def info(message: str) -> None:
    """A progress line on stderr (hidden by ``--quiet``)."""
    LOG.info(message)


_TABLE_OVERHEAD = 3
"""Terminal cells a table spends per column (borders and padding), plus one."""


def _longest_word(texts: Iterable[str]) -> int:
    from rich.cells import cell_len

    return max((cell_len(w) for t in texts for w in t.split()), default=1)


def show(tables: Iterable[Table], lines: Sequence[str] = (), head: Sequence[str] = ()) -> None:
    """Print ``head`` lines, tables, then ``lines`` on stdout, wrapped to the terminal
    width at spaces: no word of a header or cell is ever broken or cut to "…" (issue 31:
    ``4971,19 / 971,149``, ``stabili ty``). Each column is at least as wide as its longest
    word; a table whose columns cannot all be that wide is printed as a list instead (one
    block per row, ``column: value``), so nothing is folded mid-word. Only a single word
    wider than the terminal (a long path) is folded."""
    from rich.console import Console
    from rich.table import Table as RichTable

    console = Console(highlight=False)
    for line in head:
        console.print(line, overflow="fold")
    for tab in tables:
        widths = _column_widths(tab, console.width)
        if widths is None:
            _show_as_list(console, tab)
        else:
            rt = RichTable(title=tab.title or None, title_justify="left")
            for k, col in enumerate(tab.columns):
                rt.add_column(
                    col,
                    justify="left" if k < tab.left else "right",
                    overflow="fold",
                    width=widths[k],
                )
            for row in tab.rows:
                rt.add_row(*row)
            console.print(rt)
        for note in tab.notes:
            console.print(note, overflow="fold")
    for line in lines:
        console.print(line, overflow="fold")


def _column_widths(tab: Table, width: int) -> list[int] | None:
    """Each column's width in a table ``width`` cells wide: at least its longest word
    (header or cell), the rest shared out so that as many cells as possible fit on one
    line; ``None`` when even the longest words do not fit (the table is shown as a list)."""
    from rich.cells import cell_len

    n = len(tab.columns)
    avail = width - _TABLE_OVERHEAD * n - 1
    texts = [[col, *(row[i] for row in tab.rows)] for i, col in enumerate(tab.columns)]
    mins = [_longest_word(t) for t in texts]
    if sum(mins) > avail:
        return None
    maxs = [max(max(cell_len(x) for x in t), m) for t, m in zip(texts, mins, strict=True)]
    widths = list(mins)
    spare = avail - sum(widths)
    for i in sorted(range(n), key=lambda i: maxs[i] - mins[i]):  # the narrowest gaps first
        give = min(maxs[i] - widths[i], spare)
        widths[i] += give
        spare -= give
    return widths


def _show_as_list(console: Any, tab: Table) -> None:
    """A table too wide for the terminal, as one block per row: the first column's value,
    then ``column: value`` for the others (wrapped at spaces, indented)."""
    if tab.title:
        console.print(tab.title, overflow="fold")
    for row in tab.rows:
        console.print(f"• {tab.columns[0]}: {row[0]}", overflow="fold")
        for col, value in zip(tab.columns[1:], row[1:], strict=True):
            console.print(f"    {col}: {value}", overflow="fold")


def emit(
    payload: Mapping[str, Any],
    as_json: bool,
    tables: Iterable[Table] | None = None,
    lines: Sequence[str] = (),
    title: str = "",
    head: Sequence[str] = (),
) -> None:
    """``--json``: the payload as one object; else ``tables`` (default: its fields)."""
    if as_json:
        print_json(payload)
    else:
        show([fields_table(title, payload)] if tables is None else tables, lines, head)


@contextmanager
def interruptible(what: str) -> Iterator[None]:
    """Map SIGTERM/SIGHUP to an interrupt; an interrupt ends as ``interrupted: WHAT``, 130."""
    from privtab.atomic import InterruptGuard

    try:
        with InterruptGuard():
            yield
    except KeyboardInterrupt:
        typer.echo(f"privtab: interrupted: {what}", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None


class Progress:
    """``label: done/total unit (pct), rate, ETA`` through the log, at most every ``every`` s
    (a callback ``(done, total, seconds)`` for long library loops)."""

    def __init__(self, label: str, unit: str = "rows", every: float = 2.0) -> None:
        self.label, self.unit, self.every, self._last = label, unit, every, 0.0

    def __call__(self, done: int, total: int | None, seconds: float) -> None:
        now = time.monotonic()
        if not (total is not None and done >= total) and now - self._last < self.every:
            return
        self._last = now
        rate = f"{done / seconds / 1e6:.2f} M {self.unit}/s" if seconds > 0 else ""
        if total:
            info(f"{self.label}: {done:,}/{total:,} {self.unit} ({100 * done / total:.1f}%) {rate}")
        else:
            info(f"{self.label}: {done:,} {self.unit} {rate}")
