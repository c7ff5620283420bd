"""Post-processing of noisy counts: non-negativity, rounding, total/parts consistency.

Everything here is a function of the released values (and public design information such
as variances) only, so by the post-processing property (course seed §2.4.1) it costs **no
privacy**. It does change the statistical properties of the estimates, which this module
quantifies:

* **Non-negativity** (``max(v, 0)``) raises every estimate whose true value is small:
  ``E[max(c + e, 0)] − c = E[(−c − e)⁺] > 0``. For Laplace noise of scale ``b`` and a true
  count ``c ≥ 0`` the bias is exactly ``(b/2)·e^{−c/b}``; for integer noise it is
  ``Σ_{x < −c} (−c − x)·P(e = x)`` (:func:`clip_bias`, exact). The variance falls, and
  it depends on the unknown ``c`` (course seed §4.3, Example 4.2) — so the published
  variance no longer describes the clipped value.
* **Rounding** to the nearest integer is unbiased in distribution for integer noise (a
  no-op) and adds a bias of at most ½ (and up to 1/12 variance) for continuous noise.
* **Consistency** of a total with its parts by weighted least squares (``scipy``'s
  non-negative least squares on the whitened system): without the non-negativity
  constraint this is the GLS projection, which is unbiased and reduces the variance of
  every cell; with it, cells near zero are biased upward as with clipping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privtab._json import Record

if TYPE_CHECKING:
    from privtab.mechanisms import NoiseMechanism

__all__ = [
    "ConsistentTable",
    "clip_bias",
    "clip_nonnegative",
    "consistent_total",
    "round_counts",
]


def clip_nonnegative(values: ArrayLike) -> NDArray[np.float64]:
    """``max(v, 0)`` elementwise. Post-processing (no privacy cost); biased upward near 0
    (see :func:`clip_bias`)."""
    return np.maximum(np.asarray(values, dtype=np.float64), 0.0)


def round_counts(values: ArrayLike) -> NDArray[np.int64]:
    """Round half away from zero to integers. Post-processing (no privacy cost); exact
    for integer-noise releases, bias ≤ ½ for continuous ones."""
    v = np.asarray(values, dtype=np.float64)
    return (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int64)


def clip_bias(mechanism: NoiseMechanism, true_count: float) -> float:
    """The exact bias ``E[max(c + e, 0)] − c`` of clipping at zero for a true count ``c``.

    Laplace: ``(b/2)e^{−c/b}`` for ``c ≥ 0`` (``b/2·e^{c/b} − c`` for ``c < 0``); integer
    noise: ``Σ_{x < −c} (−c − x) P(e = x)`` from the exact pmf; Gaussian:
    ``σφ(c/σ) − cΦ(−c/σ)``.
    """
    from privtab.mechanisms import Gaussian, Laplace

    c = float(true_count)
    if isinstance(mechanism, Laplace):
        b = float(mechanism.scale_exact)
        return b / 2 * math.exp(-c / b) if c >= 0 else b / 2 * math.exp(c / b) - c
    if isinstance(mechanism, Gaussian):
        s = mechanism.sigma
        z = c / s
        phi = math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
        return s * phi - c * 0.5 * math.erfc(z / math.sqrt(2))
    from privtab.analysis.noise import discrete_pmf

    pmf, m = discrete_pmf(mechanism)
    x = np.arange(-m, m + 1, dtype=np.float64)
    short = np.maximum(-c - x, 0.0)
    return float(math.fsum((short * pmf).tolist()))


@dataclass(frozen=True)
class ConsistentTable(Record):
    """Parts and total that agree exactly, from a weighted least-squares fit."""

    parts: NDArray[np.float64]
    total: float
    method: str


def consistent_total(
    total: float,
    parts: ArrayLike,
    total_variance: float,
    part_variances: ArrayLike,
    *,
    nonnegative: bool = True,
) -> ConsistentTable:
    """Make noisy ``parts`` add up to a noisy ``total``.

    Minimises ``Σ (xᵢ − pᵢ)²/vᵢ + (Σxᵢ − t)²/v_t`` over the true parts ``x`` (subject to
    ``x ≥ 0`` when ``nonnegative``; ``scipy.optimize.nnls`` on the whitened system).
    Unconstrained, this is the GLS estimate of the parts from all the measurements:
    unbiased, with smaller variance than the raw parts. Post-processing: no privacy cost.
    """
    p = np.atleast_1d(np.asarray(parts, dtype=np.float64))
    v = np.broadcast_to(np.asarray(part_variances, dtype=np.float64), p.shape).astype(float)
    if not (total_variance > 0 and np.all(v > 0)):
        raise ValueError("variances must be positive")
    k = p.size
    a = np.vstack([np.diag(1 / np.sqrt(v)), np.ones((1, k)) / math.sqrt(total_variance)])
    rhs = np.concatenate([p / np.sqrt(v), [total / math.sqrt(total_variance)]])
    if nonnegative:
        from scipy.optimize import nnls

        x, _ = nnls(a, rhs)
        method = "weighted least squares, non-negative (scipy nnls)"
    else:
        x = np.linalg.lstsq(a, rhs, rcond=None)[0]
        method = "weighted least squares (GLS)"
    x = np.asarray(x, dtype=np.float64)
    return ConsistentTable(x, float(x.sum()), method)
