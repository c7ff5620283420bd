"""Progress of a one-call release: a rich display in terminals and notebooks.

A run reports its steps as text through its progress callback
(:data:`privtab.tabulate.context.Progress`): reading the inputs, validating and aggregating
the records, then one line per step of a known number, ``[i/n] <step>: …`` (a level of a
SafeTab run, a parent solved by TopDown). :class:`RichProgress` shows the latest step
beside a spinner and the elapsed time, and — once counted steps start — a bar over the
``n`` steps (labelled by the text before the colon). It writes to stderr (never
stdout); rich renders it as a live widget in Jupyter and as a redrawn line in a terminal,
and prints nothing when neither is present (a pipe, a log file). ``progress=False`` turns
it off.
"""

from __future__ import annotations

import re
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, Task, TaskID

__all__ = ["RichProgress"]

_LEVEL = re.compile(r"^\[(\d+)/(\d+)\]\s*(.*)$")


class RichProgress:
    """A context manager whose instances are the run's progress callback."""

    def __init__(self, title: str, *, console: Console | None = None) -> None:
        self.title = title
        self._console = console
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    @property
    def task(self) -> Task | None:
        """The displayed task (``None`` outside the ``with`` block)."""
        if self._progress is None or self._task is None:
            return None
        return self._progress.tasks[0]

    def __enter__(self) -> RichProgress:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        console = self._console or Console(stderr=True)
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.fields[title]}[/bold]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=console,
            transient=False,
            disable=not (console.is_terminal or console.is_jupyter),
        )
        self._progress.start()
        self._task = self._progress.add_task("starting", total=None, title=self.title)
        return self

    def __call__(self, message: str) -> None:
        if self._progress is None or self._task is None:
            return
        m = _LEVEL.match(message)
        if m:
            done, total = int(m.group(1)), int(m.group(2))
            level = m.group(3).split(":")[0]  # "US (COUNTY, 1)"
            self._progress.update(self._task, completed=done, total=total, description=level)
        else:
            self._progress.update(self._task, description=message)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            if kind is None and self._task is not None:
                self._progress.update(self._task, description="done")
            self._progress.stop()
        self._progress = None
