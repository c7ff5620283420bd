"""Empirical privacy check of a table mechanism against its claimed Gaussian-DP μ.

For a pair of semi-adjacent tables ``x, x'`` (equal margins, ``x' − x`` in the Semi-DP
sensitivity space) the mechanism is run ``n`` times on each. For an additive mechanism
with Gaussian noise in the zero-margin subspace the most powerful test of ``x`` against
``x'`` (Neyman–Pearson) thresholds ``w = ⟨y − x, Δ⟩/‖Δ‖`` (``Δ = x' − x``); everything
orthogonal to the subspace is identical under both (the margins are exact). From the two
samples of ``w``:

* ``μ̂ = (mean(w') − mean(w)) / sd_pooled``, the distinguishability actually achieved,
  with standard error ``≈ √(2/n + μ̂²/(4n))`` (delta method);
* the empirical trade-off: at type-I levels ``α`` the threshold is the empirical
  ``(1 − α)``-quantile of ``w`` and the type-II error the fraction of ``w'`` below it,
  with a binomial standard error.

The check passes when ``μ̂ ≤ μ + z·se`` for the pair and every empirical type-II error is
``≥ G_μ(α) − z·se`` (``z = 4.5``: a false alarm rate below 10⁻⁵ per comparison).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privtab._json import fields_dict
from privtab.invariants.tradeoff import gaussian_tradeoff
from privtab.random import RandomSource

FloatArray = NDArray[np.float64]

__all__ = ["GDPAudit", "audit_gdp"]

Z_CRIT = 4.5


@dataclass(frozen=True)
class GDPAudit:
    """Result of :func:`audit_gdp` for one pair of tables."""

    mu_claimed: float
    mu_pair: float
    mu_hat: float
    mu_se: float
    alphas: tuple[float, ...]
    type2_empirical: tuple[float, ...]
    type2_claimed: tuple[float, ...]
    type2_se: tuple[float, ...]
    n: int

    @property
    def passed(self) -> bool:
        ok_mu = self.mu_hat <= self.mu_claimed + Z_CRIT * self.mu_se
        ok_tr = all(
            e >= c - Z_CRIT * s - 1e-12
            for e, c, s in zip(self.type2_empirical, self.type2_claimed, self.type2_se, strict=True)
        )
        return ok_mu and ok_tr

    def to_dict(self) -> dict[str, Any]:
        return fields_dict(self, passed=self.passed)


def audit_gdp(
    mechanism: Any,
    x: ArrayLike,
    x_prime: ArrayLike,
    mu_claimed: float,
    n: int,
    source: RandomSource | None,
    alphas: tuple[float, ...] = (0.01, 0.05, 0.2),
) -> GDPAudit:
    """Run the mechanism ``n`` times on each table and measure the separation.

    ``mechanism`` needs ``sample_outputs(table, n, source=..., allow_insecure=True)``.
    ``mu_pair`` is the separation the mechanism *should* achieve on this pair,
    ``‖Δ‖₂/σ`` when it has ``sigma``.
    """
    xa = np.asarray(x, dtype=np.int64)
    xb = np.asarray(x_prime, dtype=np.int64)
    if not (np.array_equal(xa.sum(0), xb.sum(0)) and np.array_equal(xa.sum(1), xb.sum(1))):
        raise ValueError("the two tables must have the same margins")
    delta = (xb - xa).astype(np.float64).reshape(-1)
    norm_d = float(np.linalg.norm(delta))
    if norm_d == 0:
        raise ValueError("the two tables are equal")
    u = delta / norm_d

    def stat(table: NDArray[np.int64]) -> FloatArray:
        ys = mechanism.sample_outputs(table, n, source=source, allow_insecure=True).reshape(n, -1)
        return np.asarray((ys - xa.reshape(1, -1)) @ u, dtype=np.float64)

    w0, w1 = stat(xa), stat(xb)
    sd = math.sqrt((w0.var(ddof=1) + w1.var(ddof=1)) / 2)
    mu_hat = (w1.mean() - w0.mean()) / sd
    mu_se = math.sqrt(2.0 / n + mu_hat**2 / (4.0 * n))
    t2e, t2c, t2s = [], [], []
    for a in alphas:
        thr = np.quantile(w0, 1 - a)
        beta = float(np.mean(w1 <= thr))
        claimed = float(gaussian_tradeoff(mu_claimed, a))
        t2e.append(beta)
        t2c.append(claimed)
        # binomial se of β plus the threshold's own sampling error (α estimated from n draws)
        t2s.append(math.sqrt(max(beta * (1 - beta), claimed * (1 - claimed)) / n + a * (1 - a) / n))
    sigma = getattr(mechanism, "sigma", None)
    mu_pair = norm_d / float(sigma) if sigma else float("nan")
    return GDPAudit(
        float(mu_claimed),
        mu_pair,
        float(mu_hat),
        mu_se,
        tuple(alphas),
        tuple(t2e),
        tuple(t2c),
        tuple(t2s),
        n,
    )
