"""A release and the operator's release ledger (odometer) across runs.

Before the person file is read, a private run fingerprints its inputs, composes its planned
guarantee with every earlier release of the same data set and reserves a *pending* entry
(:func:`reserve_release`, refusing past a lifetime budget); after publication it marks the
entry published (:func:`commit_quietly`); a run that ends before publication removes it
(:func:`cancel_quietly`). See :mod:`privtab.accounting.odometer`.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from privtab.accounting.exact import ExactGuarantee
from privtab.accounting.odometer import Reservation
from privtab.data import SafeTabInputs, Scope
from privtab.data.inputs import sha256_file
from privtab.tabulate.context import RunContext
from privtab.tabulate.plan import ReleasePlan

__all__ = ["cancel_quietly", "commit_quietly", "fingerprints", "reserve_release"]


def fingerprints(inputs: SafeTabInputs) -> dict[str, dict[str, Any]]:
    """SHA-256 and size of every input file (read once, before the data are aggregated;
    confidential: for the run record and the release ledger only)."""
    return {
        str(p): {"sha256": sha256_file(p), "bytes": p.stat().st_size} for p in inputs.input_files()
    }


def reserve_release(
    ctx: RunContext, inputs: SafeTabInputs, plans: dict[Scope, ReleasePlan]
) -> Reservation | None:
    """Check the data set's lifetime budget in the release ledger and reserve this release,
    before the person file is read (private runs only; a seeded or noise-off run protects
    nobody and is never recorded). Raises
    :class:`~privtab.accounting.odometer.LifetimeBudgetExceededError`."""
    if not (ctx.private and ctx.opts.use_ledger):
        return None
    from privtab.accounting.odometer import ReleaseLedger

    planned = ExactGuarantee.parallel(p.exact_guarantee() for p in plans.values())
    person = ctx.inputs_record[str(inputs.persons_path)]["sha256"]
    dataset = ctx.opts.dataset_id or f"sha256:{person}"  # = fingerprint_files([persons])
    ledger = ReleaseLedger.open(ctx.opts.ledger)
    ctx.progress(f"checking the release ledger {ledger.path}")
    return ledger.reserve(
        dataset,
        planned,
        release=str(Path(os.path.abspath(ctx.out))),
        plan=" + ".join(p.source for p in plans.values()),
        lifetime=ctx.opts.lifetime,
        allow_more=ctx.opts.allow_more_releases,
    )


def cancel_quietly(reservation: Reservation | None) -> None:
    """Nothing was published: remove the pending ledger entry (if that fails, the entry
    stays pending and counts as spent — never under-counted)."""
    if reservation is not None:
        with contextlib.suppress(Exception):
            reservation.cancel()


def commit_quietly(
    reservation: Reservation | None, out: Path, warnings: list[str]
) -> dict[str, Any]:
    """The release is published: mark its ledger entry so; never raises (a failure leaves
    the entry pending, which counts as spent, and says how to settle it)."""
    if reservation is None:
        return {}
    entry = reservation.entry
    info = {"ledger": str(reservation.ledger.path), "entry": entry.id, "dataset": entry.dataset}
    try:
        reservation.commit(release=str(Path(os.path.abspath(out))))
    except Exception as exc:
        warnings.append(
            f"the release is published but its ledger entry {entry.id} could not be marked "
            f"so ({exc}); it counts as spent: privtab ledger settle {entry.id} --published"
        )
        info["status"] = "pending"
    return info
