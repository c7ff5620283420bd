"""Privacy curves of the basic noise mechanisms.

* Gaussian and discrete Gaussian noise of variance parameter σ² on a query of L2
  sensitivity Δ: ρ = Δ²/(2σ²)-zCDP (Bun & Steinke 2016, Prop. 1.6; Canonne, Kamath &
  Steinke 2020, Thm. 4 for the discrete Gaussian — SafeTab seed Lemma 7).
* Two-sided geometric (discrete Laplace) noise ``P[X = x] ∝ e^{−ε|x|}`` on a counting
  query: its *exact* Rényi divergence between the output distributions at true values
  differing by an integer shift ``k``, in closed form (derived below, checked in the tests
  against direct summation over ℤ at 50 digits).

Derivation. With ``t = e^{−ε}`` and ``C = (1−t)/(1+t)``,
``Σ_x P(x)^α P(x−k)^{1−α} = C Σ_x t^{α|x| + (1−α)|x−k|}``. Splitting ℤ into x ≤ 0,
0 < x < k and x ≥ k gives three geometric series:
``C [ t^{(1−α)k}/(1−t) + t^{αk}/(1−t) + t^{(1−α)k} Σ_{x=1}^{k−1} t^{(2α−1)x} ]``, so

    D_α = ln( [e^{(α−1)kε} + e^{−αkε} + (1−e^{−ε}) e^{(α−1)kε} S] / (1 + e^{−ε}) ) / (α−1),

with ``S = Σ_{x=1}^{k−1} e^{−(2α−1)εx}``. For k = 1 this is randomized response's
divergence, the largest any ε-DP mechanism can have.

The SafeTab paper's Lemma 8 / Corollary 1 integrates the discrete pmf over ℝ and
*understates* this divergence (α = 2, ε = 1: 0.540 instead of 0.735; negative near α = 1),
so it is not a valid guarantee. It is kept as :func:`geometric_rdp_paper` only to
reproduce the paper's numbers.
"""

from __future__ import annotations

import math

import numpy as np

from privtab.accounting.guarantees import RDP, ZCDP, FloatArray, check_parameter
from privtab.report import round_up_sig

__all__ = [
    "discrete_gaussian_zcdp",
    "gaussian_zcdp",
    "geometric_rdp",
    "geometric_rdp_divergence",
    "geometric_rdp_paper",
]


def gaussian_zcdp(sigma: float, sensitivity: float = 1.0) -> ZCDP:
    """Gaussian noise N(0, σ²) on a query of L2 sensitivity Δ is Δ²/(2σ²)-zCDP."""
    s = check_parameter("sigma", sigma)
    d = check_parameter("sensitivity", sensitivity)
    if s == 0:
        raise ValueError("sigma must be positive")
    return ZCDP(d * d / (2.0 * s * s))


def discrete_gaussian_zcdp(sigma2: float, sensitivity: float = 1.0) -> ZCDP:
    """Discrete Gaussian N_ℤ(σ²) on an integer query of L2 sensitivity Δ: Δ²/(2σ²)-zCDP.

    Canonne, Kamath & Steinke (2020), Theorem 4 (SafeTab seed Lemma 7, Algorithm 5).
    """
    s2 = check_parameter("sigma2", sigma2)
    d = check_parameter("sensitivity", sensitivity)
    if s2 == 0:
        raise ValueError("sigma2 must be positive")
    return ZCDP(d * d / (2.0 * s2))


def geometric_rdp_divergence(alpha: FloatArray, epsilon: float, shift: int = 1) -> FloatArray:
    """Exact ``D_α(L + k ‖ L)`` for two-sided geometric ``L`` with pmf ∝ e^{−ε|x|}.

    Vectorised over ``alpha`` (> 1). ``shift`` is the integer distance ``k ≥ 1`` between the
    two true values. See the module docstring for the closed form.
    """
    eps = check_parameter("epsilon", epsilon)
    if int(shift) != shift or shift < 1:
        raise ValueError(f"shift must be a positive integer, got {shift!r}")
    k = int(shift)
    a = np.asarray(alpha, dtype=np.float64)
    if eps == 0.0:
        return np.zeros_like(a)
    terms = [(a - 1.0) * k * eps, -a * k * eps]
    if k > 1:
        r_log = -(2.0 * a - 1.0) * eps
        log_s = r_log + np.log(-np.expm1(r_log * (k - 1))) - np.log(-np.expm1(r_log))
        terms.append((a - 1.0) * k * eps + np.log(-np.expm1(-eps)) + log_s)
    stacked = np.stack(np.broadcast_arrays(*terms))
    top = stacked.max(axis=0)
    lse = top + np.log(np.exp(stacked - top).sum(axis=0))
    out = (lse - np.logaddexp(0.0, -eps)) / (a - 1.0)
    return np.asarray(np.maximum(out, 0.0), dtype=np.float64)


def geometric_rdp(epsilon: float, sensitivity: int = 1) -> RDP:
    """Exact RDP curve of the geometric mechanism with pure-DP parameter ε.

    The noise has pmf ∝ exp(−ε|x|/Δ) for a query of L1 sensitivity Δ = ``sensitivity``;
    neighbouring true values differ by at most Δ and the divergence grows with the shift
    (checked in the tests), so the curve is the divergence at shift Δ. At Δ = 1 it equals
    randomized response's curve. Satisfies ε-DP as well (``α → ∞`` limit).
    """
    eps = check_parameter("epsilon", epsilon)
    if int(sensitivity) != sensitivity or sensitivity < 1:
        raise ValueError(f"sensitivity must be a positive integer, got {sensitivity!r}")
    per_unit = eps / int(sensitivity)

    def curve(alpha: FloatArray) -> FloatArray:
        return geometric_rdp_divergence(alpha, per_unit, int(sensitivity))

    return RDP(
        curve, f"geometric eps={round_up_sig(eps)}, sensitivity={sensitivity} (exact)", limit=eps
    )


def geometric_rdp_paper_value(alpha: FloatArray, epsilon: float) -> FloatArray:
    """SafeTab seed Corollary 1, eq. (17) — NOT a valid bound (see module docstring).

    ``τ(α) = ln[C·(A·e^{(α−1)ε} + B·e^{−αε})]/(α−1)`` with ``C = (e^ε−1)/(e^ε+1)``,
    ``A = 2α/(ε(2α−1))``, ``B = 2(α−1)/(ε(2α−1))``, evaluated in log space as
    ``ε + [ln C + ln A + log1p((B/A)·e^{−(2α−1)ε})]/(α−1)``: finite and accurate at every
    order (the direct form overflows above α ≈ 1,500 at ε = 0.5); it tends to ε as
    ``α → ∞``.
    """
    a = np.asarray(alpha, dtype=np.float64)
    e = float(epsilon)
    x = a - 1.0
    # ln C + ln A = ln(2 tanh(ε/2)/ε) − ln((2α−1)/α), each term without cancellation
    with np.errstate(divide="ignore"):
        log_b_over_a = np.log(x) - np.log(a)  # B/A = (α−1)/α
    rest = np.log1p(np.exp(log_b_over_a - (2.0 * a - 1.0) * e))
    numerator = _log_tanh_ratio(e) - np.log1p(x / a) + rest
    return np.asarray(e + numerator / x, dtype=np.float64)


def _log_tanh_ratio(e: float) -> float:
    """``ln(2·tanh(ε/2)/ε)`` to full relative accuracy (its Taylor series for small ε)."""
    h = e / 2.0
    if h > 0.05:
        return math.log(math.tanh(h) / h)
    # tanh(h)/h − 1 = Σ_{n≥1} 2^{2n+2}(2^{2n+2} − 1) B_{2n+2} h^{2n}/(2n+2)!
    coef = (-1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925, 21844 / 6081075)
    hh = h * h
    s, p = 0.0, 1.0
    for c in coef:
        p *= hh
        s += c * p
    return math.log1p(s)


def geometric_rdp_paper(epsilon: float) -> RDP:
    """The SafeTab paper's Corollary 1 curve, clipped at 0 so it is a curve at all.

    Provided only to reproduce the paper's Table 2 RDP column. It understates the true
    divergence (use :func:`geometric_rdp`), so privtab never uses it as a guarantee.
    """
    e = check_parameter("epsilon", epsilon)

    def curve(alpha: FloatArray) -> FloatArray:
        return np.maximum(geometric_rdp_paper_value(alpha, e), 0.0)

    return RDP(curve, f"SafeTab Cor. 1 (paper's, understated) eps={round_up_sig(e)}", limit=e)
