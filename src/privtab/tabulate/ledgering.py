"""A release and the operator's release ledger (odometer) across runs.

A private run, in its worker:

1. before the person file is read, fingerprints its inputs, composes its planned guarantee
   with every earlier release of the same data set and reserves a *pending* entry under the
   declared ``--dataset-id`` or the person file's bytes (:func:`reserve_release`, refusing
   past a lifetime budget) — and reports every unconfirmed entry of the ledger with the
   command that settles it;
2. once the records were read, before any noise is drawn, adds the order- and
   encoding-independent digest of the parsed records (the data set's key when no name was
   declared) and checks the lifetime budgets again against everything released of those
   records (:func:`identify_release`); it reports the earlier releases of the data set with
   the composed guarantee (ρ and ε), lifetime budget or not;
3. after publication marks the entry published (:func:`commit_quietly`);

and a run that ends before publication removes the entry (:func:`withdraw`: after the
worker's ledger step, whatever the moment of the signal). Each ledger change by the worker
happens under :attr:`RunContext.ledger_step` after a last look at the cancellation flag,
so an interrupted run never leaves a reservation behind. See
:mod:`privtab.accounting.odometer`.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privtab.accounting.exact import ExactGuarantee
from privtab.accounting.odometer import Reservation
from privtab.data import SafeTabInputs, Scope
from privtab.data.inputs import sha256_file
from privtab.tabulate.context import RunContext
from privtab.tabulate.plan import ReleasePlan

if TYPE_CHECKING:
    from privtab.atomic import InterruptGuard

__all__ = [
    "cancel_quietly",
    "commit_quietly",
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


def fingerprints(inputs: SafeTabInputs) -> dict[str, dict[str, Any]]:
    """SHA-256 and size of every input file (read once, before the data are aggregated;
    confidential: for the run record and the release ledger only)."""
    return {
        str(p): {"sha256": sha256_file(p), "bytes": p.stat().st_size} for p in inputs.input_files()
    }


def reserve_release(
    ctx: RunContext, inputs: SafeTabInputs, plans: dict[Scope, ReleasePlan]
) -> None:
    """Check the data set's lifetime budget in the release ledger and reserve this release
    (:attr:`RunContext.reservation`), before the person file is read (private runs only;
    a seeded or noise-off run protects nobody and is never recorded). The ledger's
    unconfirmed entries go to the run's warnings. Raises
    :class:`~privtab.accounting.odometer.LifetimeBudgetExceededError`."""
    if not (ctx.private and ctx.opts.use_ledger):
        return
    from privtab.accounting.odometer import ReleaseLedger

    planned = ExactGuarantee.parallel(p.exact_guarantee() for p in plans.values())
    file_key = "sha256:" + ctx.inputs_record[str(inputs.persons_path)]["sha256"]
    ledger = ReleaseLedger.open(ctx.opts.ledger)
    ctx.progress(f"checking the release ledger {ledger.path}")
    with ctx.ledger_step:
        ctx.check()
        ctx.reservation = ledger.reserve(
            ctx.opts.dataset_id or file_key,
            planned,
            release=None if ctx.opts.returned else str(Path(os.path.abspath(ctx.out))),
            plan=" + ".join(p.source for p in plans.values()),
            lifetime=ctx.opts.lifetime,
            allow_more=ctx.opts.allow_more_releases,
            identities=[file_key],
            folder=ctx.folder_id,
            replaces=_folder_id(ctx.out) if ctx.opts.overwrite else "",
        )
    ctx.warnings += ledger.pending_notes(exclude=ctx.reservation.entry.id)


def _folder_id(folder: Path) -> str:
    """The id of the privtab folder at ``folder`` (``""`` if none)."""
    from privtab.atomic import read_marker

    return str((read_marker(folder) or {}).get("id", "")) if folder.is_dir() else ""


def identify_release(ctx: RunContext, records: str | None) -> None:
    """The records were read (``records``: their digest key, ``None`` if the engine gave
    none): tie the reservation to them, check the lifetime budgets again (before any noise
    is drawn), and report what the data set already had."""
    res = ctx.reservation
    if res is None:
        return
    if records is not None:
        with ctx.ledger_step:
            ctx.check()
            ctx.reservation = res = res.identify(
                [records],
                dataset=None if ctx.opts.dataset_id else records,
                lifetime=ctx.opts.lifetime,
                allow_more=ctx.opts.allow_more_releases,
            )
    ctx.warnings += res.history.notes(res.ledger.path, ctx.opts.delta)


def withdraw(ctx: RunContext, guard: InterruptGuard) -> None:
    """The run failed or was interrupted before publication: remove its pending entry —
    once the worker's ledger step (if one is under way) is over, with further signals
    deferred. Never raises (a failure leaves the entry pending: counted as spent and
    reported by every later run, never under-counted)."""
    with guard.deferring():
        ctx.cancel.set()  # the worker makes no ledger change after this
        held = ctx.ledger_step.acquire(timeout=LEDGER_STEP_WAIT)
        try:
            cancel_quietly(ctx.reservation)
        finally:
            if held:
                ctx.ledger_step.release()


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
