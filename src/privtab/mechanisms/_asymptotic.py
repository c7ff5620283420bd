"""Certified closed forms for masses that would otherwise need huge sums.

Two enclosures keep every error computation bounded in time at any supported scale:

* :func:`gaussian_lattice_sum` — ``Σ_{|k|≤m} e^{−k²/(2v)}`` by the Euler–Maclaurin formula
  with its remainder bound (the sum is never formed term by term);
* :func:`laplace_sum_tail` — ``P(|Γ − Γ'| > x)`` for independent ``Γ, Γ' ~ Gamma(k, 1)``,
  the law of a sum of ``k`` continuous Laplace variables of scale 1, in closed form.

Both return mpmath values with an explicit error bound; callers decide against a level
only when the enclosure decides, and conservatively (the larger margin of error)
otherwise.

Euler–Maclaurin (e.g. DLMF 2.10.1 with the remainder bound 24.8.4-based estimate
``|R_p| ≤ 2ζ(2p)/(2π)^{2p} ∫|f^{(2p)}|``) for ``f(u) = e^{−(u/s)²}``, ``s = √(2v)``:

    Σ_{k=−m}^{m} f(k) = s√π·erf(m/s) + f(m) + 2 Σ_{j=1}^{p} B_{2j}/(2j)! · f^{(2j−1)}(m) + R_p,

with ``f^{(n)}(u) = (−1)^n s^{−n} H_n(u/s) e^{−(u/s)²}`` (physicists' Hermite polynomials)
and, by Cauchy–Schwarz, ``∫_ℝ |f^{(2p)}| ≤ s^{1−2p} √π √(2^{2p} (2p)!)``. The relative
error of ``p`` terms is about ``(p/(π s))^{2p}``: below 2⁻¹²⁰ with a handful of terms once
``s`` is in the hundreds.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from mpmath import mp, mpf

__all__ = ["gaussian_lattice_sum", "laplace_sum_tail", "laplace_sum_tail_float"]

_MAX_TERMS = 40


def _em_remainder(p: int, s: mpf) -> mpf:
    """``2ζ(2p)/(2π)^{2p} · s^{1−2p} · √π · √(2^{2p}(2p)!)``: the bound on ``|R_p|``."""
    return (
        2
        * mp.zeta(2 * p)
        / (2 * mp.pi) ** (2 * p)
        * s ** (1 - 2 * p)
        * mp.sqrt(mp.pi)
        * mp.sqrt(mpf(2) ** (2 * p) * mp.factorial(2 * p))
    )


def gaussian_lattice_sum(m: int, v: mpf, prec: int) -> tuple[mpf, mpf] | None:
    """``(S, err)`` with ``|Σ_{|k|≤m} e^{−k²/(2v)} − S| ≤ err`` (caller's working precision
    must be at least ``prec`` bits), or ``None`` when the series cannot reach a relative
    accuracy of ``2^{−prec}`` (tiny ``v``: sum directly instead)."""
    s = mp.sqrt(2 * v)
    target = mpf(2) ** (-prec) * s  # relative to the full sum ≈ s√π
    p = 1
    while _em_remainder(p, s) > target:
        p += 1
        if p > _MAX_TERMS:
            return None
    x = mpf(m) / s
    gauss = mp.exp(-(x * x))
    terms = [s * mp.sqrt(mp.pi) * mp.erf(x), gauss]
    for j in range(1, p + 1):
        n = 2 * j - 1
        deriv = (-1) ** n * s ** (-n) * mp.hermite(n, x) * gauss
        terms.append(2 * mp.bernoulli(2 * j) / mp.factorial(2 * j) * deriv)
    total = mp.fsum(terms)
    rounding = mp.fsum(abs(t) for t in terms) * mpf(2) ** (-prec + 16)
    return total, _em_remainder(p, s) + rounding


def laplace_sum_tail(k: int, x: mpf) -> mpf:
    """``P(|Γ − Γ'| > x)`` for independent ``Γ, Γ' ~ Gamma(k, 1)`` and ``x ≥ 0``.

    ``P(Γ − Γ' > x) = e^{−x} Σ_{i<k} C_i/i! · Σ_{l≤k−1−i} x^l/l!`` with
    ``C_i = (k−1+i)!/((k−1)! 2^{k+i})`` (condition on ``Γ'``, expand the Gamma tail
    ``P(Γ > y) = e^{−y} Σ_{j<k} y^j/j!``); every term is positive, so the value is as
    accurate as the working precision. ``k = 1`` gives the Laplace tail ``e^{−x}``.
    """
    if x <= 0:
        return mpf(1)
    partial = [mpf(1)]  # partial[n] = Σ_{l≤n} x^l/l!
    term = mpf(1)
    for n in range(1, k):
        term = term * x / n
        partial.append(partial[-1] + term)
    coef = _tail_coefficients(k, mp.prec)
    return 2 * mp.exp(-x) * mp.fsum(c * partial[k - 1 - i] for i, c in enumerate(coef))


@lru_cache(maxsize=256)
def _tail_coefficients(k: int, prec: int) -> tuple[mpf, ...]:
    """``C_i/i! = (k−1+i)!/((k−1)! i! 2^{k+i})`` for ``i < k`` at ``prec`` bits."""
    with mp.workprec(prec):
        return tuple(mpf(math.comb(k - 1 + i, i)) / mpf(2) ** (k + i) for i in range(k))


def laplace_sum_tail_float(k: int, x: float) -> float:
    """:func:`laplace_sum_tail` in float64 (positive terms: ~1e-15 relative), for searches
    whose result is then certified at high precision."""
    if x <= 0:
        return 1.0
    log_terms = []
    log_partial = [0.0]  # log Σ_{l≤n} x^l/l!
    log_term = 0.0
    for n in range(1, k):
        log_term += math.log(x) - math.log(n)
        log_partial.append(float(np.logaddexp(log_partial[-1], log_term)))
    for i in range(k):
        log_c = math.lgamma(k + i) - math.lgamma(k) - math.lgamma(i + 1) - (k + i) * math.log(2)
        log_terms.append(log_c + log_partial[k - 1 - i])
    return 2.0 * math.exp(-x + float(np.logaddexp.reduce(log_terms)))
