"""Probabilistically-bounded DP (pbdp): from a trade-off curve to an (ε, δ) curve.

Semantics seed §5.2 (Definitions 5.2–5.4, 5.7): a mechanism is (ε, δ)-pbdp when no
post-processing can change the odds of a correct guess by more than e^ε except with
probability at most δ. With binary post-processings (tests) this reads: for every test
with level ``a`` and power ``P(a)``, ``P(a) ≤ max(δ, e^ε a)``. For a trade-off curve
``f`` (power ``P = 1 − f``, concave) the smallest such δ is the fixed point

    δ(ε) = P(e^{−ε} δ(ε)) = 1 − f(e^{−ε} δ(ε)),

i.e. the power where the curve crosses the line ``e^ε a`` (seed §5.2 after Def. 5.7 and
its footnote 8). For μ-GDP: ``δ = Φ(Φ⁻¹(e^{−ε} δ) + μ)`` (seed §8.3; Fig. 1, 4, 8).

Upper bounds from Rényi accounting (seed §5.3, Bun & Steinke 2016 Lemma 3.5):
``δ(ε) ≤ inf_λ exp((λ−1)(τ(λ) − ε))`` for RDP and ``exp(−(ε−ρ)²/(4ρ))`` (ε > ρ) for
ρ-zCDP. These are also the Bayesian bounds of seed Thm 7.4.2 (:mod:`.bayes`). A tighter
zCDP upper bound comes from applying the fixed point to Balle et al.'s trade-off bound
(:func:`pbdp_delta_from_power` with :func:`privtab.semantics.renyi.zcdp_power`).

The privacy-loss tail ``P[L > ε]`` of the Gaussian mechanism, ``Φ(μ/2 − ε/μ)`` (seed
Example 5.10), is *not* post-processing invariant and lies below the pbdp δ.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtr, ndtri

from privtab.accounting.guarantees import RDP, ZCDP, check_parameter
from privtab.semantics._levels import shape_out
from privtab.semantics._numeric import (
    BoolArray,
    FloatArray,
    bisect_feasible,
    scan_then_refine_max,
)

__all__ = [
    "gaussian_plrv_tail",
    "pbdp_delta_from_power",
    "pbdp_delta_from_power_table",
    "pbdp_delta_gdp",
    "rdp_tail_bound",
    "zcdp_tail_bound",
]


def _eps_array(epsilon: ArrayLike) -> FloatArray:
    e = np.asarray(epsilon, dtype=np.float64)
    if np.any(np.isnan(e)) or np.any(e < 0):
        raise ValueError(f"epsilon must be non-negative, got {epsilon!r}")
    return e


def pbdp_delta_from_power(
    power: Callable[[FloatArray], FloatArray], epsilon: ArrayLike, iterations: int = 64
) -> float | FloatArray:
    """pbdp ``δ(ε)`` of a mechanism whose maximum power at level ``a`` is ``power(a)``.

    Solves the fixed point by bisection on ``a ∈ [0, e^{−ε}]`` (``power`` must be
    concave and non-decreasing, true of every trade-off curve and every bound here). The
    returned δ is rounded upwards (conservative) by at most ``e^ε 2^{−iterations}``.
    ``power`` is called with an array of levels, one per ε.
    """
    e = _eps_array(epsilon)
    flat = e.ravel()
    top = np.exp(-flat)

    def above_line(a: FloatArray) -> BoolArray:
        # the line e^ε a dominates the curve at a (ties count: P(a) ≤ max(δ, e^ε a))
        line = np.exp(flat) * a
        return np.asarray(np.asarray(power(a)) <= line * (1.0 + 1e-12), dtype=np.bool_)

    lo = np.zeros_like(flat)
    _, a_star = bisect_feasible(above_line, lo, top, iterations)  # upper end: δ rounded up
    delta = np.minimum(np.exp(flat) * a_star, 1.0)
    delta = np.where(np.asarray(above_line(np.full_like(flat, 1e-300))), 0.0, delta)
    return shape_out(delta.reshape(e.shape), epsilon)


def pbdp_delta_from_power_table(
    levels: ArrayLike, powers: ArrayLike, epsilon: ArrayLike
) -> float | FloatArray:
    """pbdp ``δ(ε)`` from a power curve known at sorted levels ``0 ≤ a_0 < … < a_n``.

    Conservative: on ``(a_i, a_{i+1}]`` the power is bounded by ``power(a_{i+1})``
    (monotonicity), so ``δ ≤ max{power(a_{i+1}) : power(a_{i+1}) > e^ε a_i}``. Use a
    dense, log-spaced table; the looseness is at most one table step.
    """
    a = np.asarray(levels, dtype=np.float64)
    p = np.asarray(powers, dtype=np.float64)
    if a.ndim != 1 or a.shape != p.shape or a.size < 2 or np.any(np.diff(a) <= 0):
        raise ValueError("levels must be a strictly increasing 1-d array matching powers")
    e = _eps_array(epsilon)
    flat = e.ravel()
    nxt = p[1:][None, :]
    ok = nxt > np.exp(flat)[:, None] * a[:-1][None, :]
    d = np.where(ok, nxt, 0.0).max(axis=1)
    return shape_out(np.minimum(d, 1.0).reshape(e.shape), epsilon)


def pbdp_delta_gdp(mu: float, epsilon: ArrayLike) -> float | FloatArray:
    """pbdp ``δ(ε)`` of μ-GDP: the fixed point ``δ = Φ(Φ⁻¹(e^{−ε}δ) + μ)`` (seed §8.3)."""
    m = check_parameter("mu", mu)

    def power(a: FloatArray) -> FloatArray:
        with np.errstate(divide="ignore"):
            return np.asarray(np.where(a <= 0, 0.0, ndtr(ndtri(np.minimum(a, 1.0)) + m)))

    if m == 0.0:
        e = _eps_array(epsilon)
        return shape_out(np.zeros_like(e), epsilon)
    return pbdp_delta_from_power(power, epsilon, iterations=200)


def gaussian_plrv_tail(mu: float, epsilon: ArrayLike) -> float | FloatArray:
    """``P[L > ε]`` for the Gaussian mechanism's privacy loss ``L ~ N(μ²/2, μ²)``.

    Semantics seed Example 5.10: ``Φ(μ/2 − ε/μ)``. Not post-processing invariant (seed
    Example 4.9), hence not itself a privacy parameter; shown for comparison.
    """
    m = check_parameter("mu", mu)
    e = _eps_array(epsilon)
    if m == 0.0:
        return shape_out(np.zeros_like(e), epsilon)
    return shape_out(np.asarray(ndtr(m / 2.0 - e / m)), epsilon)


def zcdp_tail_bound(rho: float, epsilon: ArrayLike) -> float | FloatArray:
    """Bun & Steinke's bound ``exp(−(ε−ρ)²/(4ρ))`` for ε > ρ (1 otherwise).

    Upper bound on the pbdp δ(ε) of any ρ-zCDP mechanism (seed §5.3) and on the
    probability of seed Thm 7.4.2 (arbitrary priors).
    """
    r = check_parameter("rho", rho)
    e = _eps_array(epsilon)
    if r == 0.0:
        return shape_out(np.zeros_like(e), epsilon)
    out = np.where(e > r, np.exp(-((e - r) ** 2) / (4.0 * r)), 1.0)
    return shape_out(out, epsilon)


def rdp_tail_bound(g: RDP | ZCDP, epsilon: ArrayLike) -> float | FloatArray:
    """``inf_λ exp((λ−1)(τ(λ) − ε))`` — the RDP form of :func:`zcdp_tail_bound`.

    Optimised over ``λ − 1 ∈ [1e−6, 1e6]`` by scan and golden-section refinement (every
    order is valid, so the search only affects tightness).
    """
    e = _eps_array(epsilon)
    flat = e.ravel()
    grid = np.linspace(np.log(1e-6), np.log(1e6), 241)

    def neg_log(t: FloatArray) -> FloatArray:
        x = np.exp(t)
        lam = 1.0 + x
        tau = g.rho * lam if isinstance(g, ZCDP) else np.asarray(g.curve(lam))
        with np.errstate(invalid="ignore"):
            return np.asarray(-(x * (tau - flat[:, None])), dtype=np.float64)

    best, _ = scan_then_refine_max(neg_log, grid, flat.size)
    out = np.minimum(np.exp(np.minimum(-best, 0.0)), 1.0)
    return shape_out(out.reshape(e.shape), epsilon)
