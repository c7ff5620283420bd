"""What every product's release run carries while it works, whatever the product.

:class:`ReleaseContext` holds the product-neutral state of one run: where the release
goes (``out``) and the operator's choices (``opts``: any object with the fields of
:class:`ReleaseOptions`, e.g. :class:`privtab.tabulate.RunOptions`), the random source,
the progress sink, the cancellation flag the worker checks at its safe points, the run's
start (every published file carries it as its time), the release folder's random id, the
timings and input fingerprints of the confidential run record, the ledger reservation
and the lock of the worker's ledger step, and the warnings reported at the end. A product
subclasses it with its own inputs (config, data folder, engine, ...).

It satisfies :class:`privtab.publish.ledgering.LedgerRun` and is what
:func:`privtab.publish.run.publish_release` runs.
"""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from privtab.publish.ledgering import LedgerOptions
from privtab.random import RandomSource

if TYPE_CHECKING:
    from privtab.accounting.odometer import Reservation

__all__ = [
    "Progress",
    "ReleaseContext",
    "ReleaseOptions",
    "RunCancelledError",
    "phase",
    "started_now",
]

Progress = Callable[[str], None]


class RunCancelledError(Exception):
    """The worker noticed that the run was interrupted (raised at a safe point)."""


class ReleaseOptions(LedgerOptions, Protocol):
    """The choices every product's run reads (besides the ledger's,
    :class:`~privtab.publish.ledgering.LedgerOptions`): the random ``source`` (refused when
    insecure unless ``allow_insecure``), ``noise`` (off: exact counts, tests only),
    ``report`` (write ``report.html``), ``parents`` (create missing parent folders of the
    output), ``run_record`` (where the confidential run record goes)."""

    @property
    def source(self) -> RandomSource | None: ...
    @property
    def allow_insecure(self) -> bool: ...
    @property
    def noise(self) -> bool: ...
    @property
    def report(self) -> bool: ...
    @property
    def parents(self) -> bool: ...
    @property
    def run_record(self) -> str | Path | None: ...


def phase(name: str) -> None:
    """A named point of a run (``inputs``, ``level``, ``write``, ``published``): the place
    where tests hold a run to deliver a signal in a known phase. Does nothing."""


def started_now() -> tuple[str, float]:
    """The run's start, before any data is read: UTC ISO 8601 in whole seconds, and the
    same instant in seconds since the epoch (every published file's time)."""
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    return now.isoformat(), now.timestamp()


@dataclass(kw_only=True)
class ReleaseContext:
    """Everything one run needs (resolved once, read by the worker; module docstring)."""

    out: Path
    opts: ReleaseOptions
    source: RandomSource
    say: Progress
    cancel: threading.Event = field(default_factory=threading.Event)
    started_utc: str
    """When the run started (UTC ISO 8601, whole seconds), before any data is read."""
    started_at: float
    """The same instant in seconds since the epoch: every file of the release carries it as
    its modification time (:func:`privtab.atomic.atomic_directory`)."""
    folder_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    """The random id of the release folder (its marker's ``id``; the ledger entry's
    ``folder``)."""
    seconds: dict[str, float] = field(default_factory=dict)
    reservation: Reservation | None = None
    """The pending entry of this release in the release ledger (private runs)."""
    ledger_step: threading.Lock = field(default_factory=threading.Lock)
    """Held by the worker while it changes the ledger, and by the main thread while it
    withdraws the reservation of an interrupted run: a reservation is either withdrawn or
    never made, whatever the moment of the signal."""
    warnings: list[str] = field(default_factory=list)
    """What the run reports to the operator at the end (stderr / ``UserWarning``)."""
    inputs_record: dict[str, dict[str, Any]] = field(default_factory=dict)
    """SHA-256 and size of every input (confidential: for the run record only)."""

    @property
    def private(self) -> bool:
        return self.source.is_private and self.opts.noise

    def check(self) -> None:
        """A safe point: stop if the run was interrupted."""
        if self.cancel.is_set():
            raise RunCancelledError("interrupted")

    def hook(self, name: str) -> None:
        """The test hook of a named point (:func:`phase`; a product may name its own)."""
        phase(name)

    def phase(self, name: str) -> None:
        """A named point of the run and a safe point (see :func:`phase`)."""
        self.hook(name)
        self.check()

    def progress(self, msg: str) -> None:
        self.check()
        self.say(msg)
