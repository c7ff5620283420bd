"""Spending extra privacy budget on an estimate of error (course seed §4.3).

When the error of a published value has no closed form — after post-processing such as
clipping at zero, whose variance depends on the unknown truth (Example 4.2) — the curator
can release a noisy estimate of the signed error ``c − d`` (true minus published). With
the published ``d`` treated as fixed, ``c ↦ c − d`` has the sensitivity of ``c``, so a
mechanism for the original query releases it; the cost is charged to the
:class:`~privtab.accounting.ledger.PrivacyLedger` **before** any noise is drawn (an
over-budget request raises and releases nothing). By sequential composition the total
cost is the sum (course Q16: ε = 1 + 1 = 2).

``published + error_estimate`` is then an unbiased estimate of the truth with the new
mechanism's noise only, and ``± moe(level)`` an exact interval for it (Q16:
``error_est ± ln 10`` at 90% for ε = 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privtab._json import Record
from privtab.random import RationalLike

if TYPE_CHECKING:
    from privtab.accounting.ledger import PrivacyLedger
    from privtab.mechanisms import NoiseMechanism
    from privtab.random import RandomSource

__all__ = ["ErrorEstimate", "release_error_estimate"]


@dataclass(frozen=True)
class ErrorEstimate(Record):
    """A released error estimate, the implied estimate of the truth and its interval."""

    published: NDArray[np.float64]
    error_estimate: NDArray[np.float64]
    estimate: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    level: float
    moe: float
    guarantee: str
    private: bool


def release_error_estimate(
    true_values: ArrayLike,
    published: ArrayLike,
    mechanism: NoiseMechanism,
    ledger: PrivacyLedger,
    *,
    label: str = "error estimate",
    level: RationalLike = 0.9,
    source: RandomSource | None = None,
    allow_insecure: bool = False,
) -> ErrorEstimate:
    """Release ``(true − published) + noise`` with ``mechanism``, charging the ledger.

    ``mechanism`` must be calibrated to the sensitivity of the *true* query (the published
    values are fixed). The ledger is charged first; :class:`BudgetExceededError` means
    nothing was released. Insecure sources are refused unless ``allow_insecure`` (the
    result then says ``private: False``).
    """
    from privtab.mechanisms.laws import as_level
    from privtab.mechanisms.linear import mechanism_moe

    d = np.asarray(published, dtype=np.float64)
    err = np.asarray(true_values, dtype=np.float64) - d  # integer mechanisms validate it
    ledger.charge(mechanism.guarantee, label)
    rel = mechanism.release(err, source=source, allow_insecure=allow_insecure)
    e = np.asarray(rel.values, dtype=np.float64)
    m = float(mechanism_moe(mechanism, level))
    est = d + e
    return ErrorEstimate(
        published=np.atleast_1d(d),
        error_estimate=np.atleast_1d(e),
        estimate=np.atleast_1d(est),
        lower=np.atleast_1d(est - m),
        upper=np.atleast_1d(est + m),
        level=float(as_level(level)),
        moe=m,
        guarantee=str(rel.guarantee),
        private=rel.private,
    )
