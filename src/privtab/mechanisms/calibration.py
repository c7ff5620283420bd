"""From margin-of-error targets to privacy parameters, exactly and as the SafeTab paper did.

The SafeTab paper (seed App. D.3 eq. (36), Cor. 2; App. E.2, Cor. 4; App. F.1 eqs. (37)–(38))
calibrates its base mechanisms with closed forms:

* geometric: ε = ln 20/(⌊MOE⌋ + 1), claiming the 95% MOE ``⌊b·ln(40/(1+e^{1/b}))⌋``;
* discrete Gaussian: ρ = 1.92/⌊MOE⌋², claiming the 95% MOE ``⌊1.96σ⌋``.

The geometric formula is off by one: ``⌊b·ln(40/(1+e^{1/b}))⌋`` is a floor where a ceiling
is needed, so at ε = ln 20/7 the true 95% MOE is 7, not 6 (coverage at 6 is 93.95%); the
exact calibration for MOE 6 needs ε ≈ 0.45690. ``⌊1.96σ⌋`` is right at the paper's
calibrated points but is not a bound in general (σ = 0.5 and σ = 29.95 need one more).
privtab therefore calibrates exactly by default (``method="exact"``: the smallest ε or ρ —
the most privacy — whose *exact* MOE meets the target) and keeps the paper's forms
(``method="paper"``) for reproducing its tables.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Literal

from mpmath import mp, mpf

from privtab.mechanisms.laws import DiscreteGaussianLaw, DiscreteLaplaceLaw, as_level
from privtab.random import RationalLike
from privtab.random.rational import as_rational

__all__ = [
    "discrete_gaussian_rho_for_moe",
    "gaussian_rho_for_moe",
    "geometric_epsilon_for_moe",
    "laplace_epsilon_for_moe",
    "paper_discrete_gaussian_moe",
    "paper_discrete_gaussian_rho",
    "paper_geometric_epsilon",
    "paper_geometric_moe",
]

Method = Literal["exact", "paper"]


def _target(moe: float) -> int:
    m = float(moe)
    if not math.isfinite(m) or m < 0:
        raise ValueError(f"moe must be a non-negative number, got {moe!r}")
    return math.floor(m)


def paper_geometric_moe(scale: float) -> int:
    """SafeTab Cor. 2 / eq. (36): ``⌊b·ln(40/(1+e^{1/b}))⌋`` — one too small (see module)."""
    b = float(scale)
    if not b > 0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    return math.floor(b * math.log(40.0 / (1.0 + math.exp(1.0 / b))))


def paper_discrete_gaussian_moe(sigma: float) -> int:
    """SafeTab Cor. 4: ``⌊1.96σ⌋`` (not a bound in general, see module)."""
    return math.floor(1.96 * float(sigma))


def paper_geometric_epsilon(moe: float, sensitivity: int = 1) -> float:
    """SafeTab eq. (38): ``ε = Δ·ln 20/(⌊MOE⌋ + 1)``."""
    return sensitivity * math.log(20.0) / (_target(moe) + 1)


def paper_discrete_gaussian_rho(moe: float, sensitivity: float = 1.0) -> float:
    """SafeTab eq. (37): ``ρ = Δ²·1.92/⌊MOE⌋²``."""
    m = _target(moe)
    if m == 0:
        raise ValueError("the paper's formula needs a MOE target of at least 1")
    return float(sensitivity) ** 2 * 1.92 / (m * m)


def _smallest_float(ok: Callable[[float], bool], start: float) -> float:
    """The smallest float ``x`` near ``start`` with ``ok(x)`` (``ok`` monotone increasing)."""
    x = start
    while not ok(x):
        x = math.nextafter(x, math.inf)
    while True:
        below = math.nextafter(x, -math.inf)
        if below <= 0 or not ok(below):
            return x
        x = below


def geometric_epsilon_for_moe(
    moe: float,
    level: RationalLike = 0.95,
    *,
    sensitivity: int = 1,
    method: Method = "exact",
) -> float:
    """ε for the geometric mechanism whose margin of error at ``level`` is at most ``moe``.

    ``method="exact"``: the smallest float ε whose exact MOE (smallest integer ``m`` with
    ``P(|noise| ≤ m) ≥ level``) is ≤ ⌊moe⌋. Solves ``2r^{M+1}/(1+r) = 1 − level`` for
    ``r = e^{−ε/Δ}`` at high precision, then verifies the returned float and its
    predecessor with the exact MOE. ``method="paper"``: :func:`paper_geometric_epsilon`
    (95% only).
    """
    m = _target(moe)
    delta = int(sensitivity)
    if delta < 1:
        raise ValueError(f"sensitivity must be a positive integer, got {sensitivity!r}")
    lv = as_level(level)
    if method == "paper":
        if lv != Fraction(19, 20):
            raise ValueError("the paper's closed form is for the 95% level only")
        return paper_geometric_epsilon(m, delta)
    if method != "exact":
        raise ValueError(f"method must be 'exact' or 'paper', got {method!r}")
    alpha = 1 - lv
    with mp.workprec(200):
        a = mpf(alpha.numerator) / alpha.denominator

        def f(r: mpf) -> mpf:
            return 2 * r ** (m + 1) / (1 + r) - a

        lo, hi = mpf(0), mpf(1)
        for _ in range(190):
            mid = (lo + hi) / 2
            if f(mid) > 0:
                hi = mid
            else:
                lo = mid
        eps_star = float(-delta * mp.log(lo))

    def ok(eps: float) -> bool:
        return DiscreteLaplaceLaw(Fraction(delta) / Fraction(eps)).moe_index(lv) <= m

    return _smallest_float(ok, eps_star)


def discrete_gaussian_rho_for_moe(
    moe: float,
    level: RationalLike = 0.95,
    *,
    sensitivity: RationalLike = 1,
    method: Method = "exact",
) -> float:
    """ρ for the discrete Gaussian mechanism whose margin of error at ``level`` is ≤ ``moe``.

    ``method="exact"``: the smallest float ρ whose exact MOE is ≤ ⌊moe⌋ — bisection on σ²
    with certified coverage decisions, then verification of the returned float and its
    predecessor. ``method="paper"``: :func:`paper_discrete_gaussian_rho` (95% only).
    """
    m = _target(moe)
    d = as_rational(sensitivity, "sensitivity", positive=True)
    lv = as_level(level)
    if method == "paper":
        if lv != Fraction(19, 20):
            raise ValueError("the paper's closed form is for the 95% level only")
        return paper_discrete_gaussian_rho(m, float(d))
    if method != "exact":
        raise ValueError(f"method must be 'exact' or 'paper', got {method!r}")

    def covers(sigma2: float) -> bool:
        return DiscreteGaussianLaw(Fraction(sigma2))._covers(m, lv)

    lo = 1e-6  # covers: P(X = 0) ≈ 1
    hi = max(1.0, (m + 1.0) ** 2)
    while covers(hi):
        hi *= 4
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if mid in (lo, hi):
            break
        if covers(mid):
            lo = mid
        else:
            hi = mid
    rho_star = float(d * d / (2 * Fraction(lo)))

    def ok(rho: float) -> bool:
        return DiscreteGaussianLaw(d * d / (2 * Fraction(rho))).moe_index(lv) <= m

    return _smallest_float(ok, rho_star)


def laplace_epsilon_for_moe(
    moe: float, level: RationalLike = 0.95, *, sensitivity: float = 1.0
) -> float:
    """ε for the (continuous) Laplace mechanism: ``ε = Δ·ln(1/(1−level))/moe``."""
    lv = float(as_level(level))
    if not moe > 0:
        raise ValueError(f"moe must be positive, got {moe!r}")
    return float(sensitivity) * math.log(1.0 / (1.0 - lv)) / float(moe)


def gaussian_rho_for_moe(
    moe: float, level: RationalLike = 0.95, *, sensitivity: float = 1.0
) -> float:
    """ρ for the (continuous) Gaussian mechanism: ``σ = moe/z``, ``ρ = Δ²/(2σ²)``."""
    from scipy.special import ndtri

    lv = float(as_level(level))
    if not moe > 0:
        raise ValueError(f"moe must be positive, got {moe!r}")
    z = float(ndtri(0.5 + lv / 2))
    sigma = float(moe) / z
    return float(sensitivity) ** 2 / (2 * sigma * sigma)
