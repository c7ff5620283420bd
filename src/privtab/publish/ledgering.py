"""A release and the operator's release ledger (odometer) across runs, for any product.

A private run, in its worker (:func:`privtab.publish.run.publish_release` runs it):

1. before the confidential file is read, fingerprints its inputs (:func:`fingerprints`),
   composes its planned guarantee with every earlier release of the same data set and
   reserves a *pending* entry under the declared ``--dataset-id``, the product's default
   data set (e.g. SafeTab-H's: that of the release whose T1 it reads,
   :func:`dataset_of_folder`) or the confidential file's bytes (:func:`reserve_release`,
   refusing past a lifetime budget) — and reports every unconfirmed entry of the ledger
   with the command that settles it;
2. once the records were read, before any noise is drawn, adds the order- and
   encoding-independent digest of the parsed records (:class:`privtab.accounting.digest.
   RecordDigest`; the data set's key when the entry was keyed by the file's bytes) and
   checks the lifetime budgets again against everything released of those records
   (:func:`identify_release`); it reports the earlier releases of the data set with the
   composed guarantee (ρ and ε), lifetime budget or not;
3. after publication marks the entry published (:func:`commit_quietly`);

and a run that ends before publication removes the entry (:func:`withdraw`: after the
worker's ledger step, whatever the moment of the signal). Each ledger change by the worker
happens under the run's ``ledger_step`` lock after a last look at its cancellation flag,
so an interrupted run never leaves a reservation behind. See
:mod:`privtab.accounting.odometer`.

The API is written against two small protocols, so that any product's run can use it:

- :class:`LedgerOptions` — the operator's ledger choices (``ledger``, ``use_ledger``,
  ``lifetime``, ``allow_more_releases``, ``dataset_id``, ``overwrite``, ``returned``,
  ``delta``; :class:`privtab.tabulate.RunOptions` is one);
- :class:`LedgerRun` — the run: its ``opts``, ``out``, ``folder_id`` (the release folder's
  marker id), ``private``, the ``reservation`` it holds, the ``ledger_step`` lock, the
  ``cancel`` flag, ``warnings``, ``inputs_record`` (the fingerprints), ``check()`` and
  ``progress(msg)`` (:class:`privtab.publish.context.ReleaseContext` is one).

The product supplies the rest as plain values: the **planned guarantee** per unit the
ledger counts (an :class:`~privtab.accounting.exact.ExactGuarantee`, e.g. SafeTab-H's
person-level ``2 ρ_H``) with a one-line plan label, the **confidential file** whose bytes
key the reservation, and after reading the **records digest** key (``records:<hex>``).

Functions: :func:`fingerprints` (paths → SHA-256 and size), :func:`reserve_release`,
:func:`identify_release`, :func:`withdraw`, :func:`cancel_quietly`,
:func:`commit_quietly`, :func:`dataset_of_folder`.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from privtab.accounting.exact import ExactGuarantee
    from privtab.accounting.odometer import Reservation
    from privtab.atomic import InterruptGuard

__all__ = [
    "LEDGER_STEP_WAIT",
    "LedgerOptions",
    "LedgerRun",
    "cancel_quietly",
    "commit_quietly",
    "dataset_of_folder",
    "fingerprints",
    "identify_release",
    "reserve_release",
    "withdraw",
]

#: How long an interrupted run waits for its worker's ledger transaction to end before
#: withdrawing the reservation (a transaction takes milliseconds unless another process
#: holds the ledger's lock; an entry made after the wait stays pending and is reported by
#: every later run).
LEDGER_STEP_WAIT = 10.0


class LedgerOptions(Protocol):
    """The operator's ledger choices of a run (module docstring)."""

    @property
    def ledger(self) -> str | Path | None: ...
    @property
    def use_ledger(self) -> bool: ...
    @property
    def lifetime(self) -> ExactGuarantee | None: ...
    @property
    def allow_more_releases(self) -> bool: ...
    @property
    def dataset_id(self) -> str | None: ...
    @property
    def overwrite(self) -> bool: ...
    @property
    def returned(self) -> bool: ...
    @property
    def delta(self) -> float: ...


class LedgerRun(Protocol):
    """What the ledger steps need of a run (module docstring)."""

    reservation: Reservation | None

    @property
    def opts(self) -> LedgerOptions: ...
    @property
    def out(self) -> Path: ...
    @property
    def folder_id(self) -> str: ...
    @property
    def private(self) -> bool: ...
    @property
    def ledger_step(self) -> threading.Lock: ...
    @property
    def cancel(self) -> threading.Event: ...
    @property
    def warnings(self) -> list[str]: ...
    @property
    def inputs_record(self) -> dict[str, dict[str, Any]]: ...
    def check(self) -> None: ...
    def progress(self, msg: str) -> None: ...


def fingerprints(paths: Iterable[Path]) -> dict[str, dict[str, Any]]:
    """SHA-256 and size of every input file (read once, before the data are aggregated;
    confidential: for the run record and the release ledger only)."""
    from privtab.data.inputs import sha256_file

    return {str(p): {"sha256": sha256_file(p), "bytes": p.stat().st_size} for p in paths}


def reserve_release(
    run: LedgerRun,
    confidential: Path,
    planned: ExactGuarantee,
    plan: str,
    *,
    dataset: str | None = None,
) -> None:
    """Check the data set's lifetime budget in the release ledger and reserve this release
    (``run.reservation``), before the confidential file is read (private runs only; a
    seeded or noise-off run protects nobody and is never recorded).

    ``confidential``: the file whose bytes identify the data set until its records are
    read (its fingerprint must be in ``run.inputs_record``); ``planned``: the guarantee the
    ledger is charged (per the unit it counts); ``plan``: a one-line label; ``dataset``:
    the product's default data-set key when none was declared (``None``: the file's
    bytes, replaced by the records digest in :func:`identify_release`). The ledger's
    unconfirmed entries go to the run's warnings. Raises
    :class:`~privtab.accounting.odometer.LifetimeBudgetExceededError`."""
    if not (run.private and run.opts.use_ledger):
        return
    from privtab.accounting.odometer import ReleaseLedger

    opts = run.opts
    file_key = "sha256:" + run.inputs_record[str(confidential)]["sha256"]
    ledger = ReleaseLedger.open(opts.ledger)
    run.progress(f"checking the release ledger {ledger.path}")
    with run.ledger_step:
        run.check()
        run.reservation = ledger.reserve(
            opts.dataset_id or dataset or file_key,
            planned,
            release=None if opts.returned else str(Path(os.path.abspath(run.out))),
            plan=plan,
            lifetime=opts.lifetime,
            allow_more=opts.allow_more_releases,
            identities=[file_key],
            folder=run.folder_id,
            replaces=_folder_id(run.out) if opts.overwrite else "",
        )
    run.warnings.extend(ledger.pending_notes(exclude=run.reservation.entry.id))


def _folder_id(folder: Path) -> str:
    """The id of the privtab folder at ``folder`` (``""`` if none)."""
    from privtab.atomic import read_marker

    return str((read_marker(folder) or {}).get("id", "")) if folder.is_dir() else ""


def dataset_of_folder(ledger: str | Path | None, folder: Path) -> str | None:
    """The data-set key of the ledger entry that wrote the privtab release folder
    ``folder`` (found by the folder's marker id), or ``None`` — no marker, no such entry,
    no ledger. Confidential (a key may be a records digest): the run record and the
    ledger only."""
    from privtab.accounting.odometer import ReleaseLedger

    folder_id = _folder_id(folder)
    if not folder_id:
        return None
    book = ReleaseLedger.open(ledger)
    if not book.exists:
        return None
    return next((e.dataset for e in book.entries() if e.folder == folder_id), None)


def identify_release(run: LedgerRun, records: str | None) -> None:
    """The records were read (``records``: their digest key, ``None`` if the engine gave
    none): tie the reservation to them (they become the data set's key when it was keyed
    by the file's bytes), check the lifetime budgets again (before any noise is drawn),
    and report what the data set already had."""
    res = run.reservation
    if res is None:
        return
    if records is not None:
        by_bytes = res.entry.dataset in res.entry.identities  # no name, no product default
        with run.ledger_step:
            run.check()
            run.reservation = res = res.identify(
                [records],
                dataset=records if by_bytes else None,
                lifetime=run.opts.lifetime,
                allow_more=run.opts.allow_more_releases,
            )
    run.warnings.extend(res.history.notes(res.ledger.path, run.opts.delta))


def withdraw(run: LedgerRun, guard: InterruptGuard) -> None:
    """The run failed or was interrupted before publication: remove its pending entry —
    once the worker's ledger step (if one is under way) is over, with further signals
    deferred. Never raises (a failure leaves the entry pending: counted as spent and
    reported by every later run, never under-counted)."""
    with guard.deferring():
        run.cancel.set()  # the worker makes no ledger change after this
        held = run.ledger_step.acquire(timeout=LEDGER_STEP_WAIT)
        try:
            cancel_quietly(run.reservation)
        finally:
            if held:
                run.ledger_step.release()


def cancel_quietly(reservation: Reservation | None) -> None:
    """Nothing was published: remove the pending ledger entry (if that fails, the entry
    stays pending and counts as spent — never under-counted)."""
    if reservation is not None:
        with contextlib.suppress(Exception):
            reservation.cancel()


def commit_quietly(
    reservation: Reservation | None, out: Path, warnings: list[str], returned: bool = False
) -> dict[str, Any]:
    """The release is published (at ``out``, or ``returned`` to the caller): mark its
    ledger entry so; never raises (a failure leaves the entry pending, which counts as
    spent, and says how to settle it). Returns what the confidential run record keeps:
    the ledger, the entry, the folder id, the delivery and a declared data-set name (the
    records digest is kept in the ledger only)."""
    if reservation is None:
        return {}
    entry = reservation.entry
    info = {
        "ledger": str(reservation.ledger.path),
        "entry": entry.id,
        "folder": entry.folder,
        "delivery": entry.delivery,
    }
    if not entry.dataset.startswith(("records:", "sha256:")):
        info["dataset"] = entry.dataset  # a declared name; a digest stays in the ledger only
    try:
        reservation.commit(release=None if returned else str(Path(os.path.abspath(out))))
    except Exception as exc:
        warnings.append(
            f"the release is published but its ledger entry {entry.id} could not be marked "
            f"so ({exc}); it counts as spent: privtab ledger settle {entry.id} --published "
            f"--ledger {reservation.ledger.path}"
        )
        info["status"] = "pending"
    return info
