"""Conversions between privacy definitions, each with its source.

Pure DP:
* ε-DP ⇒ (ε²/2)-zCDP (Bun & Steinke 2016, Prop. 3.3);
* ε-DP ⇒ RDP ``τ(α) = min(ε, αε²/2)`` (Bun & Steinke 2016, Prop. 3.3 and Lemma 3.5's
  proof), or the tight curve of randomized response
  ``τ(α) = ln[(e^{αε} + e^{(1−α)ε})/(e^ε + 1)]/(α−1)`` (every ε-DP pair of output
  distributions is a post-processing of randomized response's pair — Kairouz, Oh &
  Viswanath 2015 — so by data processing no ε-DP mechanism has a larger divergence);
* ε-DP ⇒ (ε, 0)-DP.

zCDP ⇒ (ε, δ) (SafeTab seed App. A.3, Lemmas 4–5):
* ``analytic``: ε = ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3);
* ``optimal``: ε = inf_{α>1} [ρα + (ln(1/δ) + (α−1)ln(1−1/α) − ln α)/(α−1)]
  (Canonne, Kamath & Steinke 2020, Prop. 12 / Cor. 13), solved to machine precision from
  the first-order condition ``ρ(α−1)² + ln α = ln(1/δ)``;
* ``grid``: the same expression minimised over α ∈ {1.01, 1.02, …, 10.00}, as the SafeTab
  paper does (App. F.2), for reproducing its Table 2.

RDP ⇒ (ε, δ): the same CKS expression with τ(α) in place of ρα (``optimal``; ``grid``), and
Mironov's (2017, Prop. 3) ε = τ(α) + ln(1/δ)/(α−1) (``mironov``) for comparison.

GDP: the exact privacy profile δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)
(Dong, Roth & Su 2019, Cor. 2.13; Balle & Wang 2018) and its inverse; μ-GDP ⇒ (μ²/2)-zCDP.

Arguments (one rule, :mod:`privtab.accounting._args`): a function named after a definition
takes that definition's guarantee object (or an exact one) or its parameter as a number —
``pure_to_zcdp(PureDP(1.0))`` and ``pure_to_zcdp(1.0)`` are the same, as are
``zcdp_epsilon(ZCDP(2.63), 1e-10)`` and ``zcdp_epsilon(2.63, 1e-10)``; ``rdp_*`` take an
:class:`RDP` curve; the generic :func:`to_rdp`, :func:`epsilon_at` and :func:`to_approx`
take any guarantee object (never a bare number, which would be ambiguous).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from privtab.accounting._args import (
    gdp_arg,
    guarantee_arg,
    parameter_or_array,
    pure_arg,
    rdp_arg,
    zcdp_arg,
)
from privtab.accounting._solve import increasing_root, minimise_over_orders
from privtab.accounting.exact import ExactGuarantee
from privtab.accounting.guarantees import (
    GDP,
    RDP,
    ZCDP,
    ApproxDP,
    FloatArray,
    Guarantee,
    PureDP,
)
from privtab.report import round_up_sig

__all__ = [
    "SAFETAB_ALPHA_GRID",
    "ZCDPMethod",
    "epsilon_at",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_to_zcdp",
    "pure_to_approx",
    "pure_to_rdp",
    "pure_to_zcdp",
    "randomized_response_rdp",
    "rdp_delta",
    "rdp_epsilon",
    "rdp_epsilon_order",
    "to_approx",
    "to_rdp",
    "zcdp_analyses",
    "zcdp_delta",
    "zcdp_epsilon",
    "zcdp_optimal_order",
    "zcdp_to_rdp",
]

ZCDPMethod = Literal["optimal", "analytic", "grid"]
RDPMethod = Literal["optimal", "mironov", "grid"]

#: The order grid used by the SafeTab paper (App. F.2): α ∈ {1.01, 1.02, …, 10.00}.
SAFETAB_ALPHA_GRID: FloatArray = np.arange(101, 1001, dtype=np.float64) / 100.0


def _log_inv_delta(delta: FloatArray) -> FloatArray:
    if np.any(np.isnan(delta)) or np.any(delta < 0) or np.any(delta > 1):
        raise ValueError(f"delta must lie in [0, 1], got {delta!r}")
    with np.errstate(divide="ignore"):
        return np.asarray(-np.log(delta), dtype=np.float64)


def _nonneg_array(name: str, value: ArrayLike) -> FloatArray:
    arr = np.asarray(value, dtype=np.float64)
    if np.any(np.isnan(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be non-negative, got {value!r}")
    return arr


def _shape_out(result: FloatArray, *inputs: ArrayLike) -> float | FloatArray:
    if all(np.ndim(i) == 0 for i in inputs):
        return float(result)
    return result


# ---------------------------------------------------------------------------- pure DP


def pure_to_zcdp(g: PureDP | ExactGuarantee | float) -> ZCDP:
    """ε-DP ⇒ (ε²/2)-zCDP (Bun & Steinke 2016, Prop. 3.3). ``g``: a PureDP or ε."""
    return ZCDP(pure_arg(g, "pure_to_zcdp").epsilon ** 2 / 2.0)


def pure_to_approx(g: PureDP | ExactGuarantee | float) -> ApproxDP:
    """ε-DP is (ε, 0)-DP. ``g``: a PureDP or ε."""
    return ApproxDP(pure_arg(g, "pure_to_approx").epsilon, 0.0)


def randomized_response_rdp(epsilon: PureDP | ExactGuarantee | float) -> RDP:
    """The tight RDP curve implied by ε-DP: that of ε-randomized response (``epsilon``: ε
    or a PureDP).

    ``τ(α) = ln[(e^{αε} + e^{(1−α)ε}) / (e^ε + 1)] / (α − 1)``. Every pair of ε-DP output
    distributions is a post-processing of randomized response's pair (Kairouz, Oh &
    Viswanath 2015, Thm. 2.4), so this bounds the divergence of every ε-DP mechanism; it is
    also the exact divergence of the two-sided geometric mechanism at sensitivity 1.
    """
    eps = pure_arg(epsilon, "randomized_response_rdp").epsilon

    def curve(alpha: FloatArray) -> FloatArray:
        a = np.asarray(alpha, dtype=np.float64)
        num = np.logaddexp(a * eps, (1.0 - a) * eps) - np.logaddexp(eps, 0.0)
        return np.asarray(np.maximum(num / (a - 1.0), 0.0), dtype=np.float64)

    return RDP(curve, f"randomized response / geometric, eps={round_up_sig(eps)}", limit=eps)


def pure_to_rdp(
    g: PureDP | ExactGuarantee | float, method: Literal["bun_steinke", "tight"] = "bun_steinke"
) -> RDP:
    """ε-DP ⇒ RDP (``g``: a PureDP or ε).

    ``bun_steinke``: ``τ(α) = min(ε, αε²/2)`` (Bun & Steinke 2016). ``tight``: the curve of
    randomized response (:func:`randomized_response_rdp`), which is never larger.
    """
    eps = pure_arg(g, "pure_to_rdp").epsilon
    if method == "tight":
        return randomized_response_rdp(eps)
    if method != "bun_steinke":
        raise ValueError(f"method must be 'bun_steinke' or 'tight', got {method!r}")

    def curve(alpha: FloatArray) -> FloatArray:
        return np.minimum(eps, np.asarray(alpha, dtype=np.float64) * eps * eps / 2.0)

    return RDP(curve, f"pure eps={round_up_sig(eps)} (Bun-Steinke)", limit=eps)


# ------------------------------------------------------------------------------- zCDP


def zcdp_to_rdp(g: ZCDP | ExactGuarantee | float) -> RDP:
    """ρ-zCDP is RDP with ``τ(α) = ρα`` (``g``: a ZCDP or ρ)."""
    rho = zcdp_arg(g, "zcdp_to_rdp").rho

    def curve(alpha: FloatArray) -> FloatArray:
        return rho * np.asarray(alpha, dtype=np.float64)

    return RDP(curve, f"zCDP rho={round_up_sig(rho)}")


def _zcdp_optimal_x(rho: FloatArray, L: FloatArray) -> FloatArray:
    """Solve ``ρx² + ln(1+x) = L`` for ``x = α* − 1 > 0`` (first-order condition of CKS)."""

    def fn(x: FloatArray) -> tuple[FloatArray, FloatArray]:
        return rho * x * x + np.log1p(x) - L, 2.0 * rho * x + 1.0 / (1.0 + x)

    hi = np.minimum(np.sqrt(L / rho), np.expm1(np.minimum(L, 700.0))) * (1 + 1e-12) + 1e-300
    # Newton from the right end: h is convex there in all practical cases, so the iterates
    # decrease monotonically to the root; the bracket safeguards the rest.
    return increasing_root(fn, np.zeros_like(L), hi, x0=hi)


def _cks_objective(rho_alpha_term: FloatArray, x: FloatArray, L: FloatArray) -> FloatArray:
    """``τ + (L + (α−1) ln(1−1/α) − ln α)/(α−1)`` written in ``x = α−1`` for accuracy."""
    return np.asarray(
        rho_alpha_term + L / x + (np.log(x) - np.log1p(x)) - np.log1p(x) / x, dtype=np.float64
    )


def _zcdp_optimal_scalar(rho: float, L: float) -> float:
    """Scalar fast path of the optimal conversion (pure-Python safeguarded Newton)."""
    lo, hi = 0.0, min(math.sqrt(L / rho), math.expm1(min(L, 700.0))) * (1 + 1e-12) + 1e-300
    x = 0.5 * (lo + hi)
    for _ in range(200):
        f = rho * x * x + math.log1p(x) - L
        if f == 0.0:
            break
        if f < 0.0:
            lo = x
        else:
            hi = x
        step = x - f / (2.0 * rho * x + 1.0 / (1.0 + x))
        x_new = step if lo < step < hi else 0.5 * (lo + hi)
        if abs(x_new - x) <= 1e-15 * x_new:
            x = x_new
            break
        x = x_new
    value = rho * (1.0 + x) + L / x + (math.log(x) - math.log1p(x)) - math.log1p(x) / x
    return max(value, 0.0)


def zcdp_optimal_order(
    rho: ZCDP | ExactGuarantee | ArrayLike, delta: ArrayLike
) -> float | FloatArray:
    """The order α* minimising the CKS conversion of ρ-zCDP at δ (``nan`` where trivial).
    ``rho``: ρ (a number or an array) or a ZCDP."""
    rho_in: ArrayLike = parameter_or_array(rho, "zcdp_optimal_order", ZCDP)
    r = _nonneg_array("rho", rho_in)
    L = _log_inv_delta(np.asarray(delta, dtype=np.float64))
    r, L = np.broadcast_arrays(r, L)
    ok = (r > 0) & (L > 0) & np.isfinite(L)
    out = np.full(r.shape, np.nan)
    if np.any(ok):
        out[ok] = 1.0 + _zcdp_optimal_x(r[ok], L[ok])
    return _shape_out(out, rho_in, delta)


def zcdp_epsilon(
    rho: ZCDP | ExactGuarantee | ArrayLike, delta: ArrayLike, method: ZCDPMethod = "optimal"
) -> float | FloatArray:
    """ε such that ρ-zCDP implies (ε, δ)-DP; vectorised over ``rho`` and ``delta``
    (``rho``: ρ, an array of them, or a ZCDP).

    ``optimal`` is accurate to ~1e-14 relative (the minimiser solves the first-order
    condition exactly); ``analytic`` and ``grid`` are the looser conversions of the
    SafeTab paper (Lemma 5 and eq. (7) on α ∈ {1.01, …, 10}).
    """
    rho_in: ArrayLike = parameter_or_array(rho, "zcdp_epsilon", ZCDP)
    if method == "optimal" and isinstance(rho_in, float | int) and isinstance(delta, float | int):
        r0, d0 = float(rho_in), float(delta)
        if 0.0 < r0 < math.inf and 0.0 < d0 < 1.0:
            return _zcdp_optimal_scalar(r0, -math.log(d0))
    r = _nonneg_array("rho", rho_in)
    d = np.asarray(delta, dtype=np.float64)
    L = _log_inv_delta(d)
    r, L = np.broadcast_arrays(r, L)
    out = np.zeros(r.shape, dtype=np.float64)
    active = (r > 0) & (L > 0)
    out[(r > 0) & np.isinf(L)] = np.inf
    act = active & np.isfinite(L)
    if method == "analytic":
        out[act] = r[act] + 2.0 * np.sqrt(r[act] * L[act])
    elif method == "optimal":
        if np.any(act):
            ra, La = r[act], L[act]
            x = _zcdp_optimal_x(ra, La)
            out[act] = np.maximum(_cks_objective(ra * (1.0 + x), x, La), 0.0)
    elif method == "grid":
        if np.any(act):
            x = SAFETAB_ALPHA_GRID - 1.0
            ra, La = r[act][:, None], L[act][:, None]
            vals = _cks_objective(ra * SAFETAB_ALPHA_GRID, x, La)
            out[act] = np.maximum(vals.min(axis=1), 0.0)
    else:
        raise ValueError(f"method must be 'optimal', 'analytic' or 'grid', got {method!r}")
    return _shape_out(out, rho_in, delta)


def zcdp_delta(
    rho: ZCDP | ExactGuarantee | ArrayLike,
    epsilon: ArrayLike,
    method: Literal["optimal", "analytic"] = "optimal",
) -> float | FloatArray:
    """δ such that ρ-zCDP implies (ε, δ)-DP (inverse of :func:`zcdp_epsilon`; ``rho``: ρ,
    an array of them, or a ZCDP).

    ``optimal``: δ = inf_α exp((α−1)(αρ−ε)) (1−1/α)^α / (α−1) (CKS 2020, Prop. 12), solved
    from its first-order condition ``ρ + 2ρ(α−1) − ε + ln(1 − 1/α) = 0``.
    ``analytic``: δ = exp(−(ε−ρ)²/(4ρ)) for ε ≥ ρ (Bun & Steinke 2016).
    """
    rho_in: ArrayLike = parameter_or_array(rho, "zcdp_delta", ZCDP)
    r = _nonneg_array("rho", rho_in)
    e = _nonneg_array("epsilon", epsilon)
    r, e = np.broadcast_arrays(r, e)
    out = np.zeros(r.shape, dtype=np.float64)
    pos = r > 0
    if method == "analytic":
        with np.errstate(divide="ignore"):
            val = np.exp(-((e - r) ** 2) / (4.0 * np.where(pos, r, 1.0)))
        out = np.where(pos, np.where(e >= r, val, 1.0), 0.0)
    elif method == "optimal":
        if np.any(pos):
            rp, ep = r[pos], e[pos]

            def fn(t: FloatArray) -> tuple[FloatArray, FloatArray]:
                x = np.exp(t)
                f = rp + 2.0 * rp * x - ep + t - np.log1p(x)
                return f, 2.0 * rp * x + 1.0 - x / (1.0 + x)

            hi = np.log(ep / (2.0 * rp) + 1.0 / rp + 1.0)
            t = increasing_root(fn, np.full_like(rp, -745.0), hi)
            x = np.exp(t)
            logd = x * (rp * (1.0 + x) - ep) + x * (t - np.log1p(x)) - np.log1p(x)
            out[pos] = np.minimum(np.exp(logd), 1.0)
    else:
        raise ValueError(f"method must be 'optimal' or 'analytic', got {method!r}")
    return _shape_out(out, rho_in, epsilon)


# -------------------------------------------------------------------------------- RDP


def rdp_epsilon_order(g: RDP, delta: float, method: RDPMethod = "optimal") -> tuple[float, float]:
    """``(ε, α*)``: the RDP ⇒ (ε, δ) conversion and the order achieving it.

    ``optimal`` and ``mironov`` search ``α − 1 ∈ [10⁻⁷, 10⁷]`` (scan + Brent), continue to
    ``10¹⁵`` when the objective is still decreasing at the top, and include the limit
    ``α → ∞``, where both objectives tend to ``τ(∞)``: when the curve states it
    (:attr:`RDP.limit`, e.g. a geometric or pure-DP curve) and it is the smallest value,
    the result is ``(τ(∞), inf)`` — the pure-DP guarantee the curve implies, reported
    explicitly.
    """
    g = rdp_arg(g, "rdp_epsilon_order")
    d = float(delta)
    L = float(_log_inv_delta(np.asarray(d)))
    if L == 0.0:
        return 0.0, float("nan")
    if math.isinf(L):
        return float("inf"), float("nan")

    if method == "grid":
        a = SAFETAB_ALPHA_GRID
        vals = _cks_objective(g(a), a - 1.0, np.full_like(a, L))
        i = int(np.argmin(vals))
        return max(float(vals[i]), 0.0), float(a[i])
    if method == "optimal":

        def obj(a: FloatArray) -> FloatArray:
            return _cks_objective(g.curve(a), a - 1.0, np.full_like(a, L))

    elif method == "mironov":

        def obj(a: FloatArray) -> FloatArray:
            return np.asarray(g.curve(a) + L / (a - 1.0), dtype=np.float64)

    else:
        raise ValueError(f"method must be 'optimal', 'mironov' or 'grid', got {method!r}")
    value, alpha = minimise_over_orders(obj)
    if alpha > 1.0 + 0.5e7:  # still decreasing at the top of the range: go further
        far, far_alpha = minimise_over_orders(obj, x_min=1e7, x_max=1e15, points=200)
        if far < value:
            value, alpha = far, far_alpha
    if g.limit is not None and g.limit <= value:
        return max(g.limit, 0.0), math.inf
    return max(value, 0.0), alpha


def rdp_epsilon(g: RDP, delta: ArrayLike, method: RDPMethod = "optimal") -> float | FloatArray:
    """ε such that the RDP curve implies (ε, δ)-DP (vectorised over ``delta``).

    ``optimal``: CKS (2020, Prop. 12) minimised over α by scan + Brent; ``grid``: the same on
    α ∈ {1.01, …, 10}; ``mironov``: ε = inf_α τ(α) + ln(1/δ)/(α−1) (Mironov 2017, Prop. 3).
    """
    g = rdp_arg(g, "rdp_epsilon")
    d = np.asarray(delta, dtype=np.float64)
    flat = np.array([rdp_epsilon_order(g, float(v), method)[0] for v in d.ravel()])
    return _shape_out(flat.reshape(d.shape), delta)


def rdp_delta(g: RDP, epsilon: float) -> float:
    """δ such that the RDP curve implies (ε, δ)-DP: inf_α of CKS's expression (Prop. 12);
    0 when ε is at least the curve's limit τ(∞) (the curve implies ε-DP)."""
    g = rdp_arg(g, "rdp_delta")
    eps = float(_nonneg_array("epsilon", epsilon))
    if g.limit is not None and eps >= g.limit:
        return 0.0

    def obj(a: FloatArray) -> FloatArray:
        x = a - 1.0
        return np.asarray(
            x * (g.curve(a) - eps) + x * (np.log(x) - np.log1p(x)) - np.log1p(x),
            dtype=np.float64,
        )

    logd, _ = minimise_over_orders(obj)
    return float(min(math.exp(logd), 1.0)) if logd < 700 else 1.0


# -------------------------------------------------------------------------------- GDP


def gdp_to_zcdp(g: GDP | float) -> ZCDP:
    """μ-GDP ⇒ (μ²/2)-zCDP (its divergences are those of N(0,1) vs N(μ,1)); ``g``: a GDP
    or μ."""
    return ZCDP(gdp_arg(g, "gdp_to_zcdp").mu ** 2 / 2.0)


def gdp_delta(mu: GDP | ArrayLike, epsilon: ArrayLike) -> float | FloatArray:
    """Exact privacy profile of μ-GDP: δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)
    (``mu``: μ, an array of them, or a GDP).

    Dong, Roth & Su (2019), Corollary 2.13. Tight: the Gaussian mechanism attains it.
    """
    from scipy.special import log_ndtr, ndtr  # lazy: scipy.special is slow to import

    mu_in: ArrayLike = parameter_or_array(mu, "gdp_delta", GDP)
    m = _nonneg_array("mu", mu_in)
    e = np.asarray(epsilon, dtype=np.float64)
    if np.any(np.isnan(e)):
        raise ValueError("epsilon must be a number")
    m, e = np.broadcast_arrays(m, e)
    out = np.zeros(m.shape, dtype=np.float64)
    pos = m > 0
    if np.any(pos):
        mp, ep = m[pos], e[pos]
        with np.errstate(over="ignore"):
            t1 = ndtr(-ep / mp + mp / 2.0)
            t2 = np.exp(ep + log_ndtr(-ep / mp - mp / 2.0))
        out[pos] = np.clip(t1 - t2, 0.0, 1.0)
    return _shape_out(out, mu_in, epsilon)


def _gdp_epsilon_scalar(mu: float, delta: float) -> float:
    if mu == 0.0 or delta >= 1.0:
        return 0.0
    if delta <= 0.0:
        return math.inf

    def f(e: float) -> float:
        return float(gdp_delta(mu, e)) - delta

    if f(0.0) <= 0.0:
        return 0.0
    hi = max(1.0, mu * mu)
    while f(hi) > 0.0:
        hi *= 2.0
        if hi > 1e8:
            return math.inf

    # log-scale residual keeps full relative accuracy when delta is tiny
    def g(e: float) -> float:
        return math.log(max(float(gdp_delta(mu, e)), 1e-320)) - math.log(delta)

    from scipy.optimize import brentq  # lazy: scipy.optimize is slow to import

    return float(brentq(g, 0.0, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500))


def gdp_epsilon(mu: GDP | ArrayLike, delta: ArrayLike) -> float | FloatArray:
    """Inverse of :func:`gdp_delta`: the smallest ε with δ_μ(ε) ≤ δ (vectorised; ``mu``: μ,
    an array of them, or a GDP)."""
    mu_in: ArrayLike = parameter_or_array(mu, "gdp_epsilon", GDP)
    m = _nonneg_array("mu", mu_in)
    d = np.asarray(delta, dtype=np.float64)
    _log_inv_delta(d)
    m, d = np.broadcast_arrays(m, d)
    flat = np.array(
        [_gdp_epsilon_scalar(float(a), float(b)) for a, b in zip(m.ravel(), d.ravel(), strict=True)]
    )
    return _shape_out(flat.reshape(m.shape), mu_in, delta)


# --------------------------------------------------------------------------- generic


def to_rdp(g: Guarantee | ExactGuarantee) -> RDP:
    """Express a guarantee as an RDP curve (tightest known; ApproxDP has none)."""
    g = guarantee_arg(g, "to_rdp")
    if isinstance(g, RDP):
        return g
    if isinstance(g, PureDP):
        return randomized_response_rdp(g.epsilon)
    if isinstance(g, ZCDP):
        return zcdp_to_rdp(g)
    if isinstance(g, GDP):
        return zcdp_to_rdp(gdp_to_zcdp(g))
    raise TypeError(f"{g} has no Rényi-DP form: (ε, δ)-DP does not bound Rényi divergences")


def epsilon_at(g: Guarantee | ExactGuarantee, delta: float) -> float:
    """The tightest ε available here such that ``g`` implies (ε, δ)-DP.

    Pure DP: ε itself. (ε, δ₀)-DP: ε if δ ≥ δ₀ (else ``ValueError``). zCDP: CKS optimal.
    RDP: CKS optimal over α. GDP: the exact profile's inverse.
    """
    g = guarantee_arg(g, "epsilon_at")
    if isinstance(g, PureDP):
        return g.epsilon
    if isinstance(g, ApproxDP):
        if delta < g.delta:
            raise ValueError(f"{g} does not imply any ε at δ={delta} < its δ={g.delta}")
        return g.epsilon
    if isinstance(g, ZCDP):
        return float(zcdp_epsilon(g.rho, delta, "optimal"))
    if isinstance(g, GDP):
        return float(gdp_epsilon(g.mu, delta))
    return rdp_epsilon_order(g, delta, "optimal")[0]


def to_approx(g: Guarantee | ExactGuarantee, delta: float) -> ApproxDP:
    """``g`` as an (ε, δ)-DP guarantee at the given δ, by the tightest method here."""
    g = guarantee_arg(g, "to_approx")
    return ApproxDP(epsilon_at(g, delta), delta if not isinstance(g, PureDP) else 0.0)


def zcdp_analyses(rho: float, delta: float, total: str = "ρ") -> dict[str, dict[str, Any]]:
    """ε(δ) of a ρ-zCDP guarantee by each conversion (``zcdp_analytic``, ``zcdp_grid``,
    ``zcdp_optimal`` — the last with its order α*), as the rows of a release's analyses;
    ``total`` is how the method names ρ (e.g. ``ρ = Σρ_i``)."""
    out: dict[str, dict[str, Any]] = {}
    for m in ("analytic", "grid", "optimal"):
        out[f"zcdp_{m}"] = {
            "epsilon": float(zcdp_epsilon(rho, delta, m)),
            "delta": delta,
            "rho": rho,
            "method": f"{total}, {m} conversion",
        }
    out["zcdp_optimal"]["alpha"] = float(zcdp_optimal_order(rho, delta))
    return out
