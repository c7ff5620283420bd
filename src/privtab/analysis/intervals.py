"""Intervals for noisy releases: single values, simultaneous, and derived quantities.

These are *noise-only* ("privacy") intervals: they cover the value the mechanism was
applied to — the confidential tabulation — with the stated probability over the noise
(course seed §4.2). They do not include sampling error (course §5.1).

* :func:`noise_interval` — ``value ± moe`` with the mechanism's exact margin of error
  (course §4.2 Cor. 4.1.1; Q11–Q12: Laplace ε = 1, z = 4 → (1.70, 6.30); ε = 10 → (3.77,
  4.23)). For integer noise the bounds are integers: the shortest symmetric integer
  interval whose exact coverage is at least the level.
* :func:`simultaneous_intervals` — a box covering a whole vector: ``bonferroni`` (each
  coordinate at level ``1 − (1−level)/k``; for Laplace this is the course's Thm. 4.1
  bound ``(Δ/ε) ln(k/β)``, Q13: 12.28) or ``exact`` (each at ``level^{1/k}``: the joint
  coverage of independent noises is the product of the marginal ones, so this is exact
  for i.i.d. noise and never below the level for any independent noise).
* :func:`combination_interval` (sums, differences, any fixed linear combination) — from
  the exact law of ``Σ cᵢ eᵢ`` (:class:`~privtab.analysis.noise.LinearNoise`:
  convolution for discrete noise).
* :func:`ratio_interval` — Fieller-type test inversion: the true ratio ``r = A/B``
  satisfies ``a − r·b = e_A − r·e_B``, whose exact law is known for each ``r``; the
  interval is the set of ``r`` not rejected at level ``1 − level``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privtab._json import Record
from privtab.mechanisms.linear import LinearNoise, mechanism_moe
from privtab.random import RationalLike

if TYPE_CHECKING:
    from privtab.mechanisms import NoiseMechanism

__all__ = [
    "Interval",
    "SimultaneousIntervals",
    "combination_interval",
    "coordinate_level",
    "difference_interval",
    "laplace_max_error_bound",
    "noise_interval",
    "ratio_interval",
    "simultaneous_intervals",
    "sum_interval",
]


@dataclass(frozen=True)
class Interval(Record):
    """An interval for one (derived) quantity: ``lower ≤ truth ≤ upper`` with probability
    at least ``level`` over the noise; ``coverage`` is the exact coverage when known."""

    estimate: float
    lower: float
    upper: float
    level: float
    moe: float
    method: str
    coverage: float | None = None


@dataclass(frozen=True)
class SimultaneousIntervals(Record):
    """A box covering every coordinate at once with probability ≥ ``level``."""

    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    moe: NDArray[np.float64]
    level: float
    coordinate_level: float
    method: str
    coverage: float


def _level(level: RationalLike) -> Fraction:
    from privtab.mechanisms.laws import as_level

    return as_level(level)


def _coverage(mechanism: NoiseMechanism, level: RationalLike) -> float | None:
    """Exact coverage of the MOE interval (the level itself for the lattice Gaussian,
    whose MOE is the continuous one rounded up: see ``mechanism_moe``)."""
    from privtab.mechanisms import Gaussian

    law = getattr(mechanism, "law", None)
    if law is None:
        return None
    if isinstance(mechanism, Gaussian):
        return float(_level(level))
    return float(law.coverage(law.moe_index(level)))


def noise_interval(value: float, mechanism: NoiseMechanism, level: RationalLike = 0.9) -> Interval:
    """``value ± moe(level)`` with the mechanism's exact margin of error.

    Guarantee: for every true value, ``P(lower ≤ truth ≤ upper) = coverage ≥ level`` over
    the noise (the noise is symmetric and the MOE exact; course seed §4.2).

    >>> from privtab.mechanisms import Laplace
    >>> iv = noise_interval(4, Laplace(1.0), 0.9)            # course Q11
    >>> round(iv.lower, 3), round(iv.upper, 3)
    (1.697, 6.303)
    """
    m = mechanism_moe(mechanism, level)
    return Interval(
        estimate=float(value),
        lower=value - m,
        upper=value + m,
        level=float(_level(level)),
        moe=m,
        method=f"exact {mechanism.name} margin of error",
        coverage=_coverage(mechanism, level),
    )


def coordinate_level(level: RationalLike, k: int, method: str = "exact") -> Fraction:
    """The per-coordinate level of a ``k``-dimensional simultaneous box.

    ``bonferroni``: ``1 − (1 − level)/k`` (exact rational). ``exact``: ``level^{1/k}``,
    rounded *up* to a rational with a 2⁻⁹⁶ grid (so the product of the coordinates'
    coverages is at least ``level``).
    """
    lv = _level(level)
    if k < 1:
        raise ValueError(f"k must be a positive integer, got {k}")
    if method == "bonferroni":
        return 1 - (1 - lv) / k
    if method != "exact":
        raise ValueError(f"method must be 'exact' or 'bonferroni', got {method!r}")
    from mpmath import mp, mpf

    with mp.workprec(160):
        root = (mpf(lv.numerator) / lv.denominator) ** (mpf(1) / k)
        scaled = int(mp.ceil(root * 2**96))
    out = Fraction(scaled, 2**96)
    return out if out < 1 else 1 - Fraction(1, 2**96)


def simultaneous_intervals(
    values: ArrayLike,
    mechanisms: NoiseMechanism | Sequence[NoiseMechanism],
    level: RationalLike = 0.95,
    method: Literal["exact", "bonferroni"] = "exact",
) -> SimultaneousIntervals:
    """Intervals covering all ``k`` coordinates at once with probability ≥ ``level``.

    ``mechanisms`` is one mechanism (i.i.d. noise) or one per coordinate (independent
    noise). ``coverage`` is the exact joint coverage ``Π P(|eᵢ| ≤ mᵢ)`` (≥ level).

    Course seed §4.2, Thm. 4.1 and Q13: Laplace, Δ = 3, ε = 1, k = 3, β = 0.05 →
    ``method="bonferroni"`` gives the half-width ``3 ln 60 = 12.28``.
    """
    v = np.atleast_1d(np.asarray(values, dtype=np.float64))
    k = v.size
    mechs = [mechanisms] * k if not isinstance(mechanisms, Sequence) else list(mechanisms)
    if len(mechs) != k:
        raise ValueError(f"{len(mechs)} mechanisms for {k} values")
    cl = coordinate_level(level, k, method)
    cache: dict[int, tuple[float, float]] = {}
    moes = np.empty(k)
    cov = 1.0
    for i, m in enumerate(mechs):
        if id(m) not in cache:
            cache[id(m)] = (float(mechanism_moe(m, cl)), _coverage(m, cl) or float(cl))
        moes[i], c = cache[id(m)]
        cov *= c
    return SimultaneousIntervals(
        lower=v - moes,
        upper=v + moes,
        moe=moes,
        level=float(_level(level)),
        coordinate_level=float(cl),
        method=method,
        coverage=cov,
    )


def laplace_max_error_bound(sensitivity: float, epsilon: float, k: int, beta: float) -> float:
    """Course seed Thm. 4.1: ``P(‖f(x) − z‖_∞ ≥ (Δ/ε) ln(k/β)) ≤ β`` for the Laplace
    mechanism on a k-dimensional query (Q13: Δ = 3, ε = 1, k = 3, β = .05 → 12.28)."""
    return sensitivity / epsilon * math.log(k / beta)


def combination_interval(
    values: ArrayLike,
    coefficients: ArrayLike,
    mechanisms: NoiseMechanism | Sequence[NoiseMechanism],
    level: RationalLike = 0.95,
) -> Interval:
    """An interval for ``Σ cᵢ·truthᵢ`` from the released ``values``.

    The estimate ``Σ cᵢ vᵢ`` has noise ``Σ cᵢ eᵢ`` whose exact law (convolution for
    discrete noise) gives the margin of error; the coverage is at least ``level`` for
    every truth. For integer coefficients on discrete noise the bounds are integers.
    """
    v = np.atleast_1d(np.asarray(values, dtype=np.float64))
    c = np.atleast_1d(np.asarray(coefficients))
    mechs = [mechanisms] * v.size if not isinstance(mechanisms, Sequence) else list(mechanisms)
    if not (v.size == c.size == len(mechs)):
        raise ValueError("values, coefficients and mechanisms must have the same length")
    coefs = [int(x) if float(x).is_integer() else float(x) for x in c.tolist()]
    law = LinearNoise(list(zip(coefs, mechs, strict=True)))
    m = law.moe(level)
    est = float(sum(ci * vi for ci, vi in zip(coefs, v.tolist(), strict=True)))
    return Interval(
        estimate=est,
        lower=est - m,
        upper=est + m,
        level=float(_level(level)),
        moe=m,
        method="exact law of the combination" + (" (convolution)" if law.is_lattice else ""),
        coverage=law.central_mass(m),
    )


def sum_interval(
    values: ArrayLike,
    mechanisms: NoiseMechanism | Sequence[NoiseMechanism],
    level: RationalLike = 0.95,
) -> Interval:
    """Interval for the sum of the true values (see :func:`combination_interval`)."""
    v = np.atleast_1d(np.asarray(values, dtype=np.float64))
    return combination_interval(v, np.ones(v.size, dtype=np.int64), mechanisms, level)


def difference_interval(
    a: float,
    b: float,
    mechanism_a: NoiseMechanism,
    mechanism_b: NoiseMechanism,
    level: RationalLike = 0.95,
) -> Interval:
    """Interval for ``truth_a − truth_b`` (see :func:`combination_interval`)."""
    return combination_interval([a, b], [1, -1], [mechanism_a, mechanism_b], level)


def ratio_interval(
    numerator: float,
    denominator: float,
    mechanism_num: NoiseMechanism,
    mechanism_den: NoiseMechanism,
    level: RationalLike = 0.95,
) -> Interval:
    """Fieller-type interval for the ratio ``A/B`` of two true values.

    For a candidate ``r`` the pivot ``a − r·b`` equals ``e_A − r·e_B`` when ``r = A/B``;
    ``r`` is kept when ``P(|e_A − r e_B| < |a − r b|) < level`` under the exact law of the
    pivot. The kept set contains the true ratio with probability ≥ ``level``. It is
    searched outward from ``a/b`` by bisection, so it is reported as the interval around
    the estimate (the Fieller set is an interval whenever ``b`` is clearly positive); when
    the noisy denominator is not clearly positive the set can be unbounded, and ``±inf``
    is returned.
    """
    lv = float(_level(level))
    a, b = float(numerator), float(denominator)

    def accepted(r: float) -> bool:
        law = LinearNoise([(1, mechanism_num), (-r, mechanism_den)])
        return law.central_mass(abs(a - r * b), strict=True) < lv - law.error

    if b <= 0:
        return Interval(a / b if b else math.nan, -math.inf, math.inf, lv, math.inf, "fieller")
    est = a / b
    scale = max(abs(est), 1.0 / b)

    def edge(direction: float) -> float:
        step = 0.01 * scale
        inside = est
        while True:
            r = est + direction * step
            if not accepted(r):
                outside = r
                break
            inside = r
            step *= 2
            if step > 1e12 * scale:
                return direction * math.inf
        for _ in range(60):
            mid = 0.5 * (inside + outside)
            if accepted(mid):
                inside = mid
            else:
                outside = mid
            if abs(outside - inside) <= 1e-10 * scale:
                break
        return outside

    lo, hi = edge(-1.0), edge(1.0)
    return Interval(est, lo, hi, lv, max(est - lo, hi - est), "fieller (exact pivot law)")
