"""Hypothesis-testing power bounds: how well can an attacker tell two neighbours apart?

An attacker who sees the output of a mechanism ``M`` and tests ``H0: the input was x``
against ``H1: the input was x'`` (neighbours: they differ in one person's record) has a
significance level ``α = P[reject | x]`` and a power ``P[reject | x']``. Every privacy
definition caps the power at each level (semantics seed §6; Dong, Roth & Su's trade-off
function ``f`` is ``1 − max power``). This module gives the closed-form caps:

* pure ε-DP — Wasserman & Zhou (2010), semantics seed Thm 6.1 eq. (4):
  ``power ≤ min(e^ε α, 1 − e^{−ε}(1 − α))``, tight (randomized response attains it).
  For datasets at distance ``d`` (group privacy / the inferential-limits seed Thm 5.1 and
  Cor. 5.3) ε is replaced by ``εd``, and a lower bound holds as well.
* (ε, δ)-DP — Kairouz, Oh & Viswanath (2015), semantics seed Thm 6.2:
  ``power ≤ min(1, e^ε α + δ, 1 − e^{−ε}(1 − α − δ))``; over a whole privacy profile
  ``δ(ε)`` the cap is the infimum over ε (:func:`profile_power`).
* μ-GDP — Dong, Roth & Su (2019): ``power ≤ Φ(Φ⁻¹(α) + μ)``, exact for the Gaussian
  mechanism; the Gaussian mechanism that is ρ-zCDP has ``μ = √(2ρ)`` (seed §6.3, §8.3).
* Pufferfish — inferential-limits seed Thm 8.7: the pure-DP caps with ``d`` the distance
  between the two competing conjectures.

RDP and zCDP caps (Balle et al. 2020) are in :mod:`privtab.semantics.renyi`; the exact
trade-off of the discrete Gaussian in :mod:`privtab.semantics.discrete_gaussian`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtr, ndtri

from privtab.accounting.guarantees import check_parameter
from privtab.semantics._levels import as_probability, shape_out
from privtab.semantics._numeric import FloatArray, scan_then_refine_max

__all__ = [
    "approx_power",
    "gaussian_power",
    "gdp_power",
    "profile_power",
    "pufferfish_power_bounds",
    "pure_power",
    "pure_power_bounds",
]


def pure_power(epsilon: float, alpha: ArrayLike, distance: int = 1) -> float | FloatArray:
    """Maximum power at level ``α`` under pure ε-DP (Wasserman & Zhou; seed Thm 6.1).

    ``min(e^{εd} α, 1 − e^{−εd}(1 − α))`` with ``d`` = ``distance`` (1 for neighbours; the
    number of differing records for group privacy, inferential-limits seed Thm 5.1).
    Tight: randomized response with parameter εd attains it at every level.
    """
    return pure_power_bounds(epsilon, alpha, distance)[1]


def pure_power_bounds(
    epsilon: float, alpha: ArrayLike, distance: int = 1
) -> tuple[float | FloatArray, float | FloatArray]:
    """``(min power, max power)`` of any size-α test under ε-DP at distance ``d``.

    Inferential-limits seed Cor. 5.3 eq. (10):
    ``max(e^{−εd} α, 1 − e^{εd}(1 − α)) ≤ power ≤ min(e^{εd} α, 1 − e^{−εd}(1 − α))``.
    The lower bound says no test can be much *worse* than chance either.
    """
    eps = check_parameter("epsilon", epsilon)
    if int(distance) != distance or distance < 0:
        raise ValueError(f"distance must be a non-negative integer, got {distance!r}")
    a = as_probability("alpha", alpha)
    k = eps * int(distance)
    with np.errstate(over="ignore"):
        up = np.minimum(np.exp(k) * a, 1.0 - np.exp(-k) * (1.0 - a))
        lo = np.maximum(np.exp(-k) * a, 1.0 - np.exp(k) * (1.0 - a))
    return shape_out(np.clip(lo, 0.0, 1.0), alpha), shape_out(np.clip(up, 0.0, 1.0), alpha)


def pufferfish_power_bounds(
    epsilon: float, alpha: ArrayLike, distance: int = 1
) -> tuple[float | FloatArray, float | FloatArray]:
    """Power bounds of a size-α test between two competing conjectures under Pufferfish.

    Inferential-limits seed Thm 8.7 eq. (22): a mechanism satisfies ε-Pufferfish iff every
    size-α test of ``θ₀`` against ``θ₁`` (conjectures at distance ``d`` in the
    instantiation's graph; ``d = 1`` for a discriminative pair) has power within
    ``[max(e^{−εd}α, 1 − e^{εd}(1−α)), min(e^{εd}α, 1 − e^{−εd}(1−α))]``. Example (seed
    §8): one record, ε = 1, α = 0.05 → power ≤ 0.136.
    """
    return pure_power_bounds(epsilon, alpha, distance)


def approx_power(epsilon: float, delta: float, alpha: ArrayLike) -> float | FloatArray:
    """Maximum power at level ``α`` under (ε, δ)-DP (Kairouz et al. 2015; seed Thm 6.2).

    ``min(1, e^ε α + δ, 1 − e^{−ε}(1 − α − δ))``. Tight for a single (ε, δ) pair.
    """
    eps = check_parameter("epsilon", epsilon)
    d = check_parameter("delta", delta, upper=1.0)
    a = as_probability("alpha", alpha)
    with np.errstate(over="ignore"):
        p = np.minimum(np.exp(eps) * a + d, 1.0 - np.exp(-eps) * (1.0 - a - d))
    return shape_out(np.clip(p, a, 1.0), alpha)


def gdp_power(mu: float, alpha: ArrayLike) -> float | FloatArray:
    """Maximum power at level ``α`` under μ-GDP: ``Φ(Φ⁻¹(α) + μ)`` (Dong, Roth & Su 2019).

    This is ``1 − G_μ(α)`` for the trade-off function ``G_μ``; the Gaussian mechanism
    with sensitivity/σ = μ attains it exactly (the likelihood-ratio test).
    """
    m = check_parameter("mu", mu)
    a = as_probability("alpha", alpha)
    with np.errstate(divide="ignore"):
        p = ndtr(ndtri(a) + m)
    return shape_out(np.where(a >= 1.0, 1.0, np.where(a <= 0.0, 0.0, p)), alpha)


def gaussian_power(rho: float, alpha: ArrayLike) -> float | FloatArray:
    """Exact power of the Gaussian mechanism that is ρ-zCDP: μ = √(2ρ) (seed §6.3, §8.3).

    ``1 − Φ(Φ⁻¹(1 − α) − √(2ρ))`` — the column "Power (Gaussian)" of the semantics seed's
    Tables 2 and 6.
    """
    r = check_parameter("rho", rho)
    return gdp_power(float(np.sqrt(2.0 * r)), alpha)


def profile_power(
    delta_of_epsilon: Callable[[FloatArray], FloatArray],
    alpha: ArrayLike,
    *,
    eps_max: float = 200.0,
    points: int = 400,
    refine: bool = True,
) -> float | FloatArray:
    """Maximum power at level ``α`` implied by a whole privacy profile ``δ(ε)``.

    The mechanism is (ε, δ(ε))-DP for every ε ≥ 0, so (seed §6.2, end) the cap is
    ``inf_ε min(1, e^ε α + δ(ε), 1 − e^{−ε}(1 − α − δ(ε)))``. For the exact profile of a
    mechanism this *is* its trade-off curve (Dong, Roth & Su 2019, Prop. 2.12), e.g. the
    GDP profile reproduces :func:`gdp_power`.

    ``delta_of_epsilon`` is vectorised over an array of ε. The infimum is taken over
    ε = 0 and a log-spaced scan of ``points`` values in [1e−4, ``eps_max``], refined by
    golden-section search (``refine``). Every ε gives a valid bound, so an imperfect
    search can only make the result larger (looser), never invalid.
    """
    a = as_probability("alpha", alpha)
    flat = a.ravel()
    grid = np.concatenate([[0.0], np.geomspace(1e-4, eps_max, points)])

    def neg_bound(eps: FloatArray) -> FloatArray:
        e = np.asarray(eps, dtype=np.float64)
        d = np.asarray(delta_of_epsilon(e.ravel()), dtype=np.float64).reshape(e.shape)
        lv = flat[:, None] if e.ndim == 2 else flat
        with np.errstate(over="ignore", invalid="ignore"):
            p = np.minimum(np.exp(e) * lv + d, 1.0 - np.exp(-e) * (1.0 - lv - d))
        return np.asarray(-np.clip(p, 0.0, 1.0), dtype=np.float64)

    if refine:
        best, _ = scan_then_refine_max(neg_bound, grid, flat.size)
    else:
        vals = neg_bound(np.broadcast_to(grid, (flat.size, grid.size)))
        best = vals.max(axis=1)
    p = np.maximum(-best, flat)  # the trivial test always achieves power = level
    p = np.where(flat >= 1.0, 1.0, p)
    return shape_out(p.reshape(a.shape), alpha)
