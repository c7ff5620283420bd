"""The discrete Gaussian's privacy-loss distribution on a loss grid, bucket by bucket.

For ``X ~ N_ℤ(0, σ²)`` against ``X + 1`` the privacy loss ``L(x) = (1 − 2x)/(2σ²)`` is
linear in ``x``, so the atoms whose loss falls in the grid cell ``[jH, (j+1)H)`` form an
integer interval ``[a_j, b_j]`` (computed exactly, in rational arithmetic). The
connect-the-dots split (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022, §4) sends an
atom at ``L = jH + y`` (``0 ≤ y < H``) to ``(j+1)H`` with weight ``(1 − e^{−y})/(1 − e^{−H})``
and to ``jH`` with the rest, so per cell it needs

* ``P_j = Σ_{x=a}^{b} p(x)``, and
* ``U_j = Σ_{x=a}^{b} p(x)(1 − e^{−y(x)}) = P_j − e^{jH} Σ p(x − 1)
  = e^{jH}(p(b) − p(a − 1)) − (e^{jH} − 1) P_j``

(``p(x)e^{−L(x)} = p(x − 1)``: the law shifted by the neighbour, weighted by ``e^{−L}``,
is the same law on the interval shifted by one, which telescopes to its two end atoms).
The up mass is ``U_j/(1 − e^{−H})`` and the down mass ``P_j − U_j/(1 − e^{−H})``.
This takes ``O(#cells)`` work at any σ, against ``O(σ)`` atoms listed one by one.

**Enclosures.** ``P_j`` comes from the Euler–Maclaurin midpoint formula
``Σ_{x=a}^{b} g(x) = ∫_{a−½}^{b+½} g − (g′(b+½) − g′(a−½))/24 + R`` with
``|R| ≤ (1/720)∫|g⁗| ≤ (v⁴ + 6)/(720σ⁴) ∫ g`` for ``g(t) = e^{−t²/(2σ²)}`` (``v`` the
largest ``|t|/σ`` on the interval; ``|B₄|/4! = 1/720`` bounds the periodic Bernoulli
kernel), the normaliser ``Σ_ℤ g = σ√(2π)(1 + 2Σ_k e^{−2π²σ²k²})`` (Poisson summation; the
correction is below ``e^{−5·10⁹}`` for ``σ > 2¹⁴``, zero in double precision), and the
integral a difference of normal tails taken on one side of 0 through the Mills ratio
(``scipy.special.erfcx``), so tail cells keep their relative accuracy. ``U_j`` is a
difference of two terms of the same sign: its error is bounded by the error of each term
times their size, which stays small because every cell spans at least σ/64 integers
(coarser cells than the grid are used where the grid is finer than that: their points
are grid points, so the result is still on the grid). Every error term is bounded
explicitly, per cell, under the stated model that scipy's ``erf``/``erfcx`` and libm's
``exp``/``log`` are accurate to 64 units in the last place; pessimistic masses are the
upper ends of the enclosures, optimistic ones (all of a cell's mass at ``jH``: losses
rounded down) the lower ends. The mass beyond the listed cells is bounded by the normal
tail ``Φc(b/σ)`` (``g`` decreasing there) and returned as the mass at ``L = +∞``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from privtab.accounting.guarantees import FloatArray

__all__ = ["MIN_SIGMA", "gaussian_buckets", "tail_bound"]

#: Above this σ the discrete Gaussian's PLD is built cell by cell (below: atom by atom).
MIN_SIGMA = 2.0**14
_MIN_CELL = 1.0 / 64.0  # every cell spans at least σ·_MIN_CELL integers
_U = float(np.finfo(np.float64).eps)
_KAPPA = 64.0  # assumed accuracy of erf, erfcx, exp, log, expm1: 64 ulp
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT2 = math.sqrt(2.0)


def _log_normal_mass(alpha: FloatArray, beta: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``log(Φ(β) − Φ(α))`` for ``α < β`` elementwise, and a bound on the relative error
    of ``Φ(β) − Φ(α)`` computed from it. One-sided intervals use
    ``Φc(l) − Φc(u) = ½e^{−l²/2}[erfcx(l/√2) − e^{−(u−l)(u+l)/2} erfcx(u/√2)]``
    (mirrored for ``u ≤ 0``); intervals across 0 the sum ``(erf(u/√2) + erf(−l/√2))/2``."""
    from scipy.special import erf, erfcx

    right, left = alpha >= 0.0, beta <= 0.0
    across = ~(right | left)
    lo = np.where(right, alpha, np.where(left, -beta, 0.0))
    hi = np.where(right, beta, np.where(left, -alpha, 1.0))
    r_lo = erfcx(lo / _SQRT2)
    r_hi = erfcx(hi / _SQRT2) * np.exp(-(hi - lo) * (hi + lo) / 2.0)
    bracket = r_lo - r_hi
    with np.errstate(divide="ignore", invalid="ignore"):
        log_side = -lo * lo / 2.0 - math.log(2.0) + np.log(bracket)
        err_side = _KAPPA * _U * (r_lo + r_hi) / bracket + _U * (lo * lo + 8.0)
    total = erf(np.where(across, beta, 1.0) / _SQRT2) + erf(np.where(across, -alpha, 1.0) / _SQRT2)
    log_across = np.log(total) - math.log(2.0)
    log_mass = np.where(across, log_across, log_side)
    err = np.where(across, 4.0 * _KAPPA * _U, np.where(bracket > 0, err_side, np.inf))
    return np.asarray(log_mass, dtype=np.float64), np.asarray(err, dtype=np.float64)


def _tail(v: float) -> float:
    """An upper bound on ``Φc(v)`` (``v ≥ 0``)."""
    return 0.5 * math.erfc(v / _SQRT2) * (1.0 + 1e-10)


def tail_bound(s2: float, half: int) -> float:
    """An upper bound on ``P[|X| > half]`` for ``X ~ N_ℤ(0, σ²)``: ``2Φc(half/σ)``."""
    return min(2.0 * _tail(half / math.sqrt(s2)), 1.0)


def _cells(
    s2: float, half: int, h: float, m: int
) -> tuple[np.ndarray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Cell indices ``j`` (cells ``[jH, (j+1)H)`` of the loss, ``H = mh``) and their integer
    intervals ``[a_j, b_j]`` of ``x``: the atoms of the cell with ``|x| ≤ half``, all
    computed exactly (``L(x) ≥ jH ⇔ x ≤ (1 − 2jHσ²)/2``). The two outer cells are cut at
    ``±half`` (a cell can be far wider than the whole support when ``Hσ²`` is huge)."""
    hs = Fraction(h) * m * Fraction(s2)
    p, q = hs.numerator, hs.denominator
    j_lo = ((1 - 2 * half) * q) // (2 * p)
    j_hi = ((1 + 2 * half) * q) // (2 * p)
    top = [(q - 2 * j * p) // (2 * q) for j in range(j_lo, j_hi + 2)]  # b_j, then b_{j_hi+1}
    bs = [min(t, half) for t in top[:-1]]
    as_ = [max(t + 1, -half) for t in top[1:]]
    # the width b − a + 1 and b + a − 1 exactly (a, b alone round once |x| > 2⁵³)
    width = np.array([b - a + 1 for a, b in zip(as_, bs, strict=True)], dtype=np.float64)
    mid = np.array([b + a - 1 for a, b in zip(as_, bs, strict=True)], dtype=np.float64)
    js = np.arange(j_lo, j_hi + 1, dtype=np.int64)
    a, b = np.array(as_, dtype=np.float64), np.array(bs, dtype=np.float64)
    return js, a, b, width, mid


def gaussian_buckets(
    s2: float, half: int, h: float, pessimistic: bool
) -> tuple[np.ndarray, FloatArray, float]:
    """The PLD of ``N_ℤ(0, σ²)`` (``σ² = s2``, ``σ > 2¹⁴``) on the grid of width ``h``:
    ``(indices, log_masses, inf)`` — sorted distinct grid indices, the log of their masses
    and the mass at ``L = +∞`` (0 unless ``pessimistic``). Pessimistic masses dominate the
    exact connect-the-dots split of every atom with ``|x| ≤ half``, and ``inf`` the normal
    tail bound of the mass beyond (so the result is a valid upper bound on the PLD: it
    dominates the exact one); optimistic masses are below those of the losses rounded
    down (a lower bound). Valid for every σ ≥ 10 (where the Poisson correction of the
    normaliser vanishes in double precision); tight (relative excess ~10⁻¹⁰ in the centre)
    for the σ > 2¹⁴ it is used at."""
    sigma = math.sqrt(s2)
    m = max(1, math.ceil(_MIN_CELL / (sigma * h)))
    big_h = m * h
    js, a, b, width, mid = _cells(s2, half, h, m)
    alpha, beta = (a - 0.5) / sigma, (b + 0.5) / sigma
    log_dphi, err_dphi = _log_normal_mass(alpha, beta)
    v = np.maximum(np.abs(alpha), np.abs(beta))
    log_phi_a = -alpha * alpha / 2.0 - _LOG_SQRT_2PI - log_dphi  # log φ(α)/ΔΦ
    log_phi_b = -beta * beta / 2.0 - _LOG_SQRT_2PI - log_dphi
    ratio_a, ratio_b = np.exp(log_phi_a), np.exp(log_phi_b)
    # Euler–Maclaurin: P = ΔΦ + (βφ(β) − αφ(α))/(24σ²) + R, |R| ≤ the next term + R₂
    third = (
        7.0
        / 5760.0
        * (ratio_a * np.abs(alpha**3 - 3 * alpha) + ratio_b * np.abs(beta**3 - 3 * beta))
    )
    corr = (beta * ratio_b - alpha * ratio_a) / (24.0 * s2)
    log_p = log_dphi + np.log1p(corr)
    eps_p = (
        err_dphi
        + (v**4 + 6.0) / 720.0 / s2 / s2  # R₂ of Euler–Maclaurin
        + third / s2 / s2  # its f‴ term
        + 4.0 * _U * (np.abs(alpha) * ratio_a + np.abs(beta) * ratio_b)  # α, β rounded
        + _KAPPA * _U * (np.abs(corr) + 1.0)
        + 4.0 * _U * np.abs(log_p)
    )
    # U/P = e^{jH}(p(b) − p(a−1))/P − (e^{jH} − 1)
    log_pb = -((b / sigma) ** 2) / 2.0 - math.log(sigma) - _LOG_SQRT_2PI
    d_ab = (width / sigma) * (mid / sigma) / 2.0  # log p(a−1) − log p(b)
    jh = js.astype(np.float64) * big_h
    # |1 − e^{d}| in log space: d is large in cells far wider than σ
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_gap = np.where(d_ab > 0, d_ab + np.log(-np.expm1(-d_ab)), np.log(-np.expm1(d_ab)))
    t1 = -np.sign(d_ab) * np.exp(jh + log_pb - log_p + log_gap)
    t2 = np.expm1(jh)
    share = t1 - t2
    eps_1 = eps_p + _U * (4.0 * (np.abs(jh) + np.abs(log_pb) + np.abs(log_p) + np.abs(d_ab)) + 16.0)
    err = np.abs(t1) * (eps_1 + _KAPPA * _U) + np.abs(t2) * (eps_p + _KAPPA * _U)
    err += 4.0 * _U * np.abs(share)
    g = -math.expm1(-big_h)
    rounding = 16.0 * _U * (1.0 + np.abs(log_p))
    if pessimistic:
        up = np.clip(share + err, 0.0, g) / g
        down = np.clip(g - share + err + 4.0 * _U * g, 0.0, g) / g
        unsafe = ~np.isfinite(eps_p) | (eps_p >= 0.5)  # a guard: not seen for σ ≥ 10
        up[unsafe], down[unsafe] = 1.0, 1.0  # each part is at most the whole cell
        idx = np.concatenate([m * js, m * (js + 1)])
        with np.errstate(divide="ignore"):
            scale = log_p - np.log1p(-np.minimum(eps_p, 0.5)) + rounding  # P/(1 − ε) ≥ P_true
            logs = np.concatenate([np.log(down), np.log(up)]) + np.tile(scale, 2)
        inf = min(_tail(b[0] / sigma) + _tail(-a[-1] / sigma), 1.0)
    else:
        idx = m * js
        logs = log_p - np.log1p(np.minimum(eps_p, 0.5)) - rounding  # P/(1 + ε) ≤ P_true
        logs[~np.isfinite(eps_p) | (eps_p >= 0.5)] = -np.inf
        inf = 0.0
    return (*_merge(idx, logs), inf)


def _merge(idx: np.ndarray, logs: FloatArray) -> tuple[np.ndarray, FloatArray]:
    """Sorted distinct indices and the log of the summed masses at each (zero masses
    dropped)."""
    keep = np.isfinite(logs)
    idx, logs = idx[keep], logs[keep]
    uniq, inv = np.unique(idx, return_inverse=True)
    top = float(np.max(logs))
    mass = np.bincount(inv, np.exp(logs - top), uniq.size)
    with np.errstate(divide="ignore"):
        return uniq, np.asarray(np.log(mass) + top, dtype=np.float64)
