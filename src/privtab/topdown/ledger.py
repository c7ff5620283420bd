"""A TopDown release in the operator's release ledger — every call to the ledger in one place.

As for SafeTab-P (:mod:`privtab.publish.ledgering`, :mod:`privtab.accounting.odometer`):
a **private** run reserves a pending entry before it reads the confidential records
(checking the data set's lifetime budget), marks it published once the folder is in
place, and removes it when nothing was published; seeded and noise-off runs protect
nobody and are never recorded.

The entry's guarantee is **ρ per person plus ρ per housing unit** of the runs (each the
larger of the US and Puerto Rico runs: disjoint records): the persons and units runs are
recorded as one release of one data set composed sequentially — conservative, since a
person's record and their housing unit's occupancy are about the same household. The data
set is named by ``dataset_id`` or by the SHA-256 of the ``cef-persons`` file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from privtab.accounting.exact import ExactGuarantee
from privtab.accounting.odometer import Reservation
from privtab.data.inputs import sha256_file

__all__ = ["cancel", "commit", "fingerprints", "reserve"]


def fingerprints(files: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """SHA-256 and size of every input file (confidential: run record and ledger only)."""
    return {str(p): {"sha256": sha256_file(p), "bytes": p.stat().st_size} for p in files.values()}


def reserve(
    *,
    ledger: str | Path | None,
    dataset: str,
    rho: ExactGuarantee,
    release: Path,
    plan: str,
    lifetime: ExactGuarantee | None,
    allow_more: bool,
) -> Reservation:
    """Check the lifetime budget and reserve this release (raises
    :class:`~privtab.accounting.odometer.LifetimeBudgetExceededError`)."""
    from privtab.accounting.odometer import ReleaseLedger

    return ReleaseLedger.open(ledger).reserve(
        dataset,
        rho,
        release=str(release),
        plan=plan,
        lifetime=lifetime,
        allow_more=allow_more,
    )


def commit(reservation: Reservation | None, out: Path, warnings: list[str]) -> dict[str, Any]:
    """The release is published: mark its entry so (never raises)."""
    from privtab.publish.ledgering import commit_quietly

    return commit_quietly(reservation, out, warnings)


def cancel(reservation: Reservation | None) -> None:
    """Nothing was published: remove the pending entry (never raises)."""
    from privtab.publish.ledgering import cancel_quietly

    cancel_quietly(reservation)
