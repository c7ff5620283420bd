"""Exact noise laws: pmf, CDF, quantiles, variance, margin of error — and sampling.

:class:`DiscreteLaplaceLaw` (pmf ∝ ``e^{−|x|/t}``) and :class:`DiscreteGaussianLaw`
(pmf ∝ ``e^{−x²/(2σ²)}``) on the integers, optionally scaled onto a lattice ``γℤ``
(``granularity``; the law of ``γ·X``) for the real-valued mechanisms. Both share the
interface :class:`NoiseLaw`, which every :class:`~privtab.mechanisms.NoiseMechanism`
delegates to.

"Exact" here means that every *decision* — is the coverage ``P(|noise| ≤ m)`` at least the
level? is ``P(noise ≤ x)`` at least ``q``? — is made with a rigorous error bound and falls
back to higher precision whenever the bound does not decide, so integer answers (margins
of error, quantiles) are the true ones. Probabilities returned as floats are accurate to
about 1e-15 relative. Every computation takes bounded time at every supported scale
(:mod:`privtab.mechanisms.ranges`): where an exact sum would have ~σ terms, a certified
closed form with an explicit error bound is used (:mod:`._asymptotic`); if even that
cannot decide, the decision is made conservatively (a margin of error one larger, never
smaller).

Formulas (``r = e^{−1/t}``):

* Laplace: ``P(X = x) = (1−r)/(1+r)·r^{|x|}``; ``P(|X| > m) = 2r^{m+1}/(1+r)``;
  ``P(X ≤ x) = r^{−x}/(1+r)`` for ``x < 0`` and ``1 − r^{x+1}/(1+r)`` for ``x ≥ 0``;
  ``Var X = 2r/(1−r)²`` (SafeTab seed App. D.3, course seed Defs. 9–10).
* Gaussian: ``Z = Σ_x e^{−x²/(2σ²)} = σ√(2π)·Σ_k e^{−2π²σ²k²}`` (Poisson summation),
  ``Var X = σ²·Σ_k (1 − 4π²σ²k²) e^{−2π²σ²k²} / Σ_k e^{−2π²σ²k²}`` (≤ σ², CKS 2020 Cor. 9);
  central masses ``P(|X| ≤ m)`` by summation (σ ≤ 2¹⁴) or by the midpoint rule
  ``∫_{−m−½}^{m+½} e^{−u²/(2σ²)} du`` with its error bound ``(2m+1)/(24σ²)`` (larger σ),
  refined by Euler–Maclaurin with its remainder bound when that does not decide.

Sums of ``k`` independent draws (the T1 totals that add ``k`` Sex × Age cells) have the
``k``-fold convolution as their law; :class:`privtab.mechanisms.LinearNoise` computes it
by FFT while its support is small, and otherwise from :meth:`NoiseLaw.sum_coverage_bounds`:

* discrete Gaussian: ``P(S = s)`` equals the ``N(0, kσ²)`` density at ``s`` up to
  ``2k·3e^{−σ²π²/2} + e^{−kσ²π²/2}/(π²kσ²)`` (the characteristic function of ``N_ℤ(σ²)``
  is ``e^{−σ²t²/2}`` on ``[−π, π]`` up to its aliases, Poisson summation), and the sum of
  that density over ``|s| ≤ m`` is enclosed by Euler–Maclaurin;
* discrete Laplace: ``X = ⌊bE⌋ − ⌊bE'⌋`` for independent unit exponentials (``⌊bE⌋`` is
  geometric with ratio ``e^{−1/b}``), so the sum differs from a sum of ``k`` continuous
  Laplace(b) variables by less than ``k`` and its central mass is enclosed by that of the
  continuous sum (closed form) at ``m + 1 − k`` and ``m + k``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from fractions import Fraction
from functools import cached_property, lru_cache
from statistics import NormalDist
from typing import Any

import numpy as np
from mpmath import mp, mpf
from numpy.typing import ArrayLike, NDArray

from privtab.mechanisms._asymptotic import (
    gaussian_lattice_sum,
    laplace_sum_tail,
    laplace_sum_tail_float,
)
from privtab.random import RandomSource, RationalLike, discrete_gaussian, discrete_laplace
from privtab.random.rational import as_rational

__all__ = ["DiscreteGaussianLaw", "DiscreteLaplaceLaw", "NoiseLaw", "as_level"]

_PREC = 120  # working precision (bits) of the certified decisions


def as_level(level: RationalLike, name: str = "level") -> Fraction:
    """A confidence level strictly between 0 and 1, as an exact rational.

    A float is read as the decimal it prints as (``0.95`` is ``19/20``), which is what a
    user writing a level means; pass a :class:`~fractions.Fraction` for anything else.
    """
    if isinstance(level, float | np.floating):
        if not math.isfinite(float(level)):
            raise ValueError(f"{name} must be between 0 and 1, got {level!r}")
        value = Fraction(repr(float(level)))
    else:
        value = as_rational(level, name)
    if not 0 < value < 1:
        raise ValueError(f"{name} must be strictly between 0 and 1, got {level!r}")
    return value


def _mp(x: Fraction) -> mpf:
    return mpf(x.numerator) / x.denominator


def _log(x: Fraction | float) -> float:
    """``ln x`` for a positive rational or float, without underflow for tiny fractions."""
    if isinstance(x, Fraction):
        return math.log(x.numerator) - math.log(x.denominator)
    return math.log(x)


def smallest_true(pred: Callable[[int], bool], start: int, upper: int) -> int:
    """The smallest ``m`` in ``[0, upper]`` with ``pred(m)``, for a monotone ``pred`` that
    is taken to hold at ``upper`` (a certified bound): galloping from ``start``, then
    bisection — ``O(log upper)`` evaluations whatever the scale."""
    m = min(max(start, 0), upper)
    lo, hi, step = -1, upper, 1  # pred(lo) is false (or lo = −1), pred(hi) true
    if m == upper or pred(m):
        hi = m
        while hi > 0:
            cand = max(hi - step, 0)
            if pred(cand):
                hi, step = cand, step * 2
            else:
                lo = cand
                break
    else:
        lo = m
        while lo + step < hi:
            if pred(lo + step):
                hi = lo + step
                break
            lo, step = lo + step, step * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _lattice_index(x: ArrayLike, gamma: Fraction) -> NDArray[np.float64]:
    """``⌊x/γ⌋`` as float64 (exact for the magnitudes used)."""
    arr = np.asarray(x, dtype=np.float64)
    return np.floor(arr / float(gamma))


class NoiseLaw(ABC):
    """The law of ``γ·X`` for a symmetric integer-valued ``X`` (``γ`` = :attr:`gamma`).

    Equal laws (same family, parameter and granularity) compare and hash equal, so sums of
    draws from equal mechanisms can be grouped. Subclasses supply the family's pmf, CDF,
    variance, certified decisions and sampler; quantiles and the lattice margin of error
    are shared.
    """

    gamma: Fraction

    @abstractmethod
    def _key(self) -> tuple[Any, ...]:
        """The parameters that identify the law."""

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, NoiseLaw)
            and type(other) is type(self)
            and (other._key() == self._key())
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))

    # -- probabilities (floats) ---------------------------------------------------------
    @abstractmethod
    def pmf(self, x: ArrayLike) -> NDArray[np.float64]:
        """``P(noise = x)`` (0 off the lattice)."""

    @abstractmethod
    def cdf(self, x: ArrayLike) -> NDArray[np.float64]:
        """``P(noise ≤ x)``."""

    @property
    @abstractmethod
    def variance(self) -> float:
        """The exact variance of the noise (``γ²·Var X``)."""

    @property
    @abstractmethod
    def index_variance(self) -> float:
        """``Var X`` (lattice units)."""

    @abstractmethod
    def coverage(self, m: int) -> float:
        """``P(|X| ≤ m)`` for integer ``m`` (lattice units)."""

    @abstractmethod
    def tail_index(self, mass: Fraction | float) -> int:
        """An integer ``M ≥ 0`` with ``P(|X| > M) ≤ mass`` (closed-form tail bound)."""

    def sum_tail_index(self, k: int, mass: Fraction | float) -> int:
        """``M`` with ``P(|X₁ + … + X_k| > M) ≤ mass`` (a closed-form tail bound; never more
        than the union bound ``k·tail_index(mass/k)``)."""
        return k * self.tail_index(mass / k)

    # -- exact decisions ----------------------------------------------------------------
    @abstractmethod
    def moe_index(self, level: RationalLike = Fraction(19, 20)) -> int:
        """The smallest integer ``m`` with ``P(|X| ≤ m) ≥ level`` (lattice units)."""

    @abstractmethod
    def _quantile_index(self, q: float) -> int:
        """The smallest integer ``x`` with ``P(X ≤ x) ≥ q``."""

    def moe(self, level: RationalLike = Fraction(19, 20)) -> float:
        """The exact margin of error: the smallest lattice point ``m ≥ 0`` with
        ``P(|noise| ≤ m) ≥ level`` (an ``int`` when ``γ = 1``)."""
        m = self.moe_index(level)
        return m if self.gamma == 1 else float(m) * float(self.gamma)

    def quantile(self, q: ArrayLike) -> NDArray[np.float64]:
        """The smallest lattice point ``x`` with ``P(noise ≤ x) ≥ q`` (``0 < q < 1``)."""
        qs = np.atleast_1d(np.asarray(q, dtype=np.float64))
        out = np.array([self._quantile_index(float(v)) for v in qs.ravel()], dtype=np.float64)
        if self.gamma != 1:
            out = out * float(self.gamma)
        return out.reshape(np.shape(q))

    # -- sums of independent draws --------------------------------------------------------
    @abstractmethod
    def sum_coverage_bounds(self, k: int, m: int, prec: int = _PREC) -> tuple[mpf, mpf]:
        """Rigorous ``(lo, hi)`` around ``P(|X₁ + … + X_k| ≤ m)`` for large scales, in time
        independent of the scale (see the module docstring)."""

    def sum_moe_index(self, k: int, level: RationalLike = Fraction(19, 20)) -> int:
        """A margin of error ``m`` of the sum of ``k`` draws with certified coverage
        ``P(|S| ≤ m) ≥ level``: the smallest ``m`` whose *lower* bound reaches the level
        (equal to the exact one unless the enclosure straddles the level, then larger)."""
        lv = as_level(level)
        target = _mp(lv)

        def certified(m: int) -> bool:
            with mp.workprec(_PREC + 20):
                return bool(self.sum_coverage_bounds(k, m)[0] >= target)

        return smallest_true(certified, self._sum_moe_start(k, lv), self.sum_tail_index(k, 1 - lv))

    def _sum_moe_start(self, k: int, level: Fraction) -> int:
        """Where the search for :meth:`sum_moe_index` starts (the normal approximation)."""
        z = NormalDist().inv_cdf(min((1.0 + float(level)) / 2.0, 1.0 - 1e-16))
        return max(0, math.ceil(z * math.sqrt(k * self.index_variance)))

    def sum_coverage(self, k: int, m: int) -> float:
        """A certified lower bound on ``P(|X₁ + … + X_k| ≤ m)`` (large scales)."""
        with mp.workprec(_PREC + 20):
            return float(self.sum_coverage_bounds(k, m)[0])

    # -- sampling -------------------------------------------------------------------------
    @abstractmethod
    def sample_index(
        self, size: int | tuple[int, ...], *, source: RandomSource | None = None
    ) -> NDArray[np.int64]:
        """Exact draws of ``X`` (lattice units, int64) from ``source``."""


class DiscreteLaplaceLaw(NoiseLaw):
    """The law of ``γ·X`` with ``P(X = x) ∝ e^{−|x|/t}`` on ℤ (``γ = granularity``)."""

    def __init__(self, scale: RationalLike, granularity: RationalLike = 1) -> None:
        self.t = as_rational(scale, "scale", positive=True)
        self.gamma = as_rational(granularity, "granularity", positive=True)
        with mp.workprec(_PREC):
            t = _mp(self.t)
            self._r = mp.exp(-1 / t)
            self._log1pr = float(mp.log1p(self._r))
            self._logc0 = float(mp.log(-mp.expm1(-1 / t)) - mp.log1p(self._r))
        self._tf = float(self.t)

    def __repr__(self) -> str:
        return f"DiscreteLaplaceLaw(scale={self.t}, granularity={self.gamma})"

    def _key(self) -> tuple[Any, ...]:
        return (self.t, self.gamma)

    @property
    def p(self) -> float:
        """``1 − e^{−1/t}``: the success probability of the two geometric variables whose
        difference ``X`` is (course seed Defs. 9–10: ``p = 1 − e^{−ε/Δ}``)."""
        with mp.workprec(_PREC):
            return float(-mp.expm1(-1 / _mp(self.t)))

    # -- probabilities (floats) ---------------------------------------------------------
    def pmf(self, x: ArrayLike) -> NDArray[np.float64]:
        """``P(noise = x)`` (0 off the lattice)."""
        arr = np.asarray(x, dtype=np.float64)
        k = arr / float(self.gamma)
        out = np.exp(self._logc0 - np.abs(k) / self._tf)
        return np.where(k == np.round(k), out, 0.0)

    def _cdf_index(self, k: NDArray[np.float64]) -> NDArray[np.float64]:
        """``P(X ≤ k)`` for integer-valued float ``k``."""
        neg = np.exp(np.minimum(k, 0) / self._tf - self._log1pr)
        pos = -np.expm1(-(np.maximum(k, 0) + 1) / self._tf - self._log1pr)
        return np.where(k < 0, neg, pos)

    def cdf(self, x: ArrayLike) -> NDArray[np.float64]:
        """``P(noise ≤ x)``."""
        return self._cdf_index(_lattice_index(x, self.gamma))

    def sf(self, x: ArrayLike) -> NDArray[np.float64]:
        """``P(noise > x)`` (computed without cancellation: ``P(X ≤ −⌊x/γ⌋ − 1)``)."""
        return self._cdf_index(-_lattice_index(x, self.gamma) - 1)

    @cached_property
    def variance(self) -> float:
        """``γ²·2r/(1−r)²``."""
        with mp.workprec(_PREC):
            v = 2 * self._r / (1 - self._r) ** 2 * _mp(self.gamma) ** 2
            return float(v)

    @cached_property
    def index_variance(self) -> float:
        with mp.workprec(_PREC):
            return float(2 * self._r / (1 - self._r) ** 2)

    def tail_index(self, mass: Fraction | float) -> int:
        """``P(|X| > M) = 2r^{M+1}/(1+r) ≤ 2e^{−(M+1)/t}``."""
        return max(0, math.ceil(self._tf * (math.log(2.0) - _log(mass))))

    # -- exact decisions ----------------------------------------------------------------
    def _tail_mp(self, m: int) -> mpf:
        """``P(|X| > m)`` for integer ``m ≥ 0``."""
        return 2 * mp.exp(-(m + 1) / _mp(self.t)) / (1 + self._r)

    def _tail_at_most(self, m: int, alpha: Fraction) -> bool:
        """Is ``P(|X| > m) ≤ alpha``? (Never a tie: the left side is transcendental.)"""
        for prec in (_PREC, 4 * _PREC, 16 * _PREC):
            with mp.workprec(prec):
                t = _mp(self.t)  # e^{−(m+1)/t} directly: r^(m+1) would amplify r's error
                diff = 2 * mp.exp(-(m + 1) / t) / (1 + mp.exp(-1 / t)) - _mp(alpha)
                if abs(diff) > mpf(2) ** (-prec + 20):
                    return bool(diff < 0)
        return False  # pragma: no cover - undecided at 1920 bits: the larger MOE

    def moe_index(self, level: RationalLike = Fraction(19, 20)) -> int:
        lv = as_level(level)
        alpha = 1 - lv
        with mp.workprec(_PREC):
            est = _mp(self.t) * mp.log(2 / (_mp(alpha) * (1 + self._r))) - 1
        start = max(0, math.ceil(float(est)))
        return smallest_true(lambda m: self._tail_at_most(m, alpha), start, self.tail_index(alpha))

    def coverage(self, m: int) -> float:
        if m < 0:
            return 0.0
        with mp.workprec(_PREC):
            return float(1 - self._tail_mp(int(m)))

    def cdf_ge(self, x: int, q: Fraction) -> bool:
        """Is ``P(X ≤ x) ≥ q``? Decided exactly for the rational ``q`` (certified
        high-precision arithmetic; used for quantiles and zero-suppression thresholds)."""
        for prec in (_PREC, 4 * _PREC, 16 * _PREC):
            with mp.workprec(prec):
                t = _mp(self.t)
                one_r = 1 + mp.exp(-1 / t)
                c = mp.exp(x / t) / one_r if x < 0 else 1 - mp.exp(-(x + 1) / t) / one_r
                diff = c - _mp(q)
                if abs(diff) > mpf(2) ** (-prec + 20):
                    return bool(diff > 0)
        return x < 0  # pragma: no cover - undecided: the wider quantile

    def _quantile_index(self, q: float) -> int:
        if not 0 < q < 1:
            raise ValueError(f"quantile level must be strictly between 0 and 1, got {q!r}")
        qq = Fraction(q)
        x = math.floor(self._approx_quantile(q))
        while not self.cdf_ge(x, qq):
            x += 1
        while self.cdf_ge(x - 1, qq):
            x -= 1
        return x

    def _approx_quantile(self, q: float) -> float:
        r_log1p = self._log1pr
        if q < 0.5:
            return self._tf * (math.log(q) + r_log1p)
        return -self._tf * (math.log1p(-q) + r_log1p) - 1

    # -- sums ---------------------------------------------------------------------------
    def sum_coverage_bounds(self, k: int, m: int, prec: int = _PREC) -> tuple[mpf, mpf]:
        """``P(|S_c| < m+1−k) ≤ P(|S| ≤ m) ≤ P(|S_c| < m+k)`` for the continuous sum
        ``S_c`` coupled to ``S`` with ``|S − S_c| < k`` (module docstring)."""
        t = _mp(self.t)
        slack = mpf(2) ** (-prec + 16)

        def central(y: int) -> mpf:
            return 1 - laplace_sum_tail(k, mpf(y) / t) if y > 0 else mpf(0)

        return max(central(m + 1 - k) - slack, mpf(0)), min(central(m + k) + slack, mpf(1))

    def _sum_moe_start(self, k: int, level: Fraction) -> int:
        """``m + 1 − k`` at the continuous sum's quantile (float bisection of the closed
        form): the certified answer, or within a step of it."""
        alpha = 1.0 - float(level)
        if not alpha > 0:
            return super()._sum_moe_start(k, level)
        lo, hi = 0.0, 1.0
        while laplace_sum_tail_float(k, hi) > alpha:
            lo, hi = hi, 2 * hi
        for _ in range(80):
            mid = (lo + hi) / 2
            if laplace_sum_tail_float(k, mid) > alpha:
                lo = mid
            else:
                hi = mid
        return max(0, math.ceil(hi * self._tf) + k - 1)

    def sum_tail_index(self, k: int, mass: Fraction | float) -> int:
        """``|S| < |S_c| + k`` for the coupled continuous sum, so ``P(|S| > M) ≤
        P(|S_c| > M − k)``, a closed form (:func:`laplace_sum_tail`); solved by bisection."""
        exact = _laplace_sum_tail_index(self.t, k, Fraction(mass))
        return min(exact, super().sum_tail_index(k, mass))

    # -- sampling -------------------------------------------------------------------------
    def sample_index(
        self, size: int | tuple[int, ...], *, source: RandomSource | None = None
    ) -> NDArray[np.int64]:
        return discrete_laplace(self.t, size, source=source)


@lru_cache(maxsize=1024)
def _laplace_sum_tail_index(t: Fraction, k: int, mass: Fraction) -> int:
    """The smallest ``M`` (up to a factor 2⁻²⁰ of ``t``) with ``P(|S_c| > M − k) ≤ mass``."""
    with mp.workprec(_PREC):
        target = _mp(mass)
        lo, hi = 0.0, 1.0
        while laplace_sum_tail(k, mpf(hi)) > target:
            lo, hi = hi, hi * 2
        while hi - lo > max(hi, 1.0) * 2.0**-20:
            mid = (lo + hi) / 2
            if laplace_sum_tail(k, mpf(mid)) > target:
                lo = mid
            else:
                hi = mid
    return k + math.ceil(hi * float(t))


@lru_cache(maxsize=1024)
def _dg_normaliser(sigma2: Fraction, prec: int) -> mpf:
    """``Σ_x e^{−x²/(2σ²)}`` to ``prec`` bits (Poisson summation for σ ≥ 1)."""
    with mp.workprec(prec + 20):
        s2 = _mp(sigma2)
        if sigma2 >= 1:
            q = mp.exp(-2 * mp.pi**2 * s2)
            total = mpf(1)
            k = 1
            while True:
                term = 2 * q ** (k * k)
                total += term
                if term < mpf(2) ** (-prec - 10):
                    break
                k += 1
            return mp.sqrt(2 * mp.pi * s2) * total
        bound = int(40 * math.sqrt(float(sigma2))) + 12
        return 1 + 2 * mp.fsum(mp.exp(-mpf(x * x) / (2 * s2)) for x in range(1, bound))


class DiscreteGaussianLaw(NoiseLaw):
    """The law of ``γ·X`` with ``P(X = x) ∝ e^{−x²/(2σ²)}`` on ℤ (``γ = granularity``)."""

    _SUM_LIMIT = 1 << 14  # σ above which central masses use the midpoint-rule bound
    _EXACT_SUM_LIMIT = 1 << 16  # most terms an exact high-precision sum may have

    def __init__(self, sigma2: RationalLike, granularity: RationalLike = 1) -> None:
        self.sigma2 = as_rational(sigma2, "sigma2", positive=True)
        self.gamma = as_rational(granularity, "granularity", positive=True)
        self._s2f = float(self.sigma2)
        self._sf = math.sqrt(self._s2f)
        with mp.workprec(_PREC):
            self._z = _dg_normaliser(self.sigma2, _PREC)
            self._log_z = float(mp.log(self._z))

    def __repr__(self) -> str:
        return f"DiscreteGaussianLaw(sigma2={self.sigma2}, granularity={self.gamma})"

    def _key(self) -> tuple[Any, ...]:
        return (self.sigma2, self.gamma)

    @property
    def sigma(self) -> float:
        """``√σ²`` of the integer law (before scaling by the granularity)."""
        return self._sf

    # -- probabilities (floats) ---------------------------------------------------------
    def pmf(self, x: ArrayLike) -> NDArray[np.float64]:
        """``P(noise = x)`` (0 off the lattice)."""
        arr = np.asarray(x, dtype=np.float64)
        k = arr / float(self.gamma)
        out = np.exp(-(k * k) / (2 * self._s2f) - self._log_z)
        return np.where(k == np.round(k), out, 0.0)

    @cached_property
    def variance(self) -> float:
        """The exact variance of the noise (slightly below ``γ²σ²``)."""
        with mp.workprec(_PREC):
            return float(self._index_variance_mp() * _mp(self.gamma) ** 2)

    @cached_property
    def index_variance(self) -> float:
        with mp.workprec(_PREC):
            return float(self._index_variance_mp())

    def _index_variance_mp(self) -> mpf:
        s2 = _mp(self.sigma2)
        if self.sigma2 >= 1:
            q = mp.exp(-2 * mp.pi**2 * s2)
            num = mpf(1)
            den = mpf(1)
            for k in range(1, 8):
                w = q ** (k * k)
                num += 2 * (1 - 4 * mp.pi**2 * s2 * k * k) * w
                den += 2 * w
            return s2 * num / den
        bound = int(40 * self._sf) + 12
        return (
            2 * mp.fsum(mpf(x * x) * mp.exp(-mpf(x * x) / (2 * s2)) for x in range(1, bound))
        ) / self._z

    def tail_index(self, mass: Fraction | float) -> int:
        """``P(|X| > M) ≤ 2∫_M^∞ e^{−u²/(2σ²)} du / Z ≤ 2.6σ·e^{−M²/(2σ²)}`` (``Z ≥ 1``)."""
        log_c = math.log(max(1.0, 2.6 * self._sf + 2.0))
        return math.ceil(self._sf * math.sqrt(2.0 * max(log_c - _log(mass), 0.0))) + 1

    def sum_tail_index(self, k: int, mass: Fraction | float) -> int:
        """``N_ℤ(σ²)`` is σ²-subgaussian (``E e^{λX} ≤ e^{λ²σ²/2}``, Canonne, Kamath &
        Steinke 2020), so ``P(|S| > M) ≤ 2e^{−M²/(2kσ²)}``."""
        log_ratio = max(math.log(2.0) - _log(mass), 0.0)
        bound = math.ceil(math.sqrt(2.0 * k * self._s2f * log_ratio)) + 1
        return min(bound, super().sum_tail_index(k, mass))

    def _central_float(self, m: int) -> tuple[float, float]:
        """``(c, err)`` with ``|P(|X| ≤ m) − c| ≤ err``."""
        if m < 0:
            return 0.0, 0.0
        z = float(self._z)
        cap = self.tail_index(2.0**-70)  # beyond it the mass is below 2⁻⁷⁰: stop summing
        if m > cap:
            c, err = self._central_float(cap)
            return c, err + 2.0**-70
        if self._sf <= self._SUM_LIMIT or m <= 4 * self._SUM_LIMIT:
            k = np.arange(1, m + 1, dtype=np.float64)
            terms = np.exp(-(k * k) / (2 * self._s2f))
            c = (1.0 + 2.0 * math.fsum(terms.tolist())) / z
            return c, c * 2.0**-40 + 2.0**-60
        with mp.workprec(80):
            val = mp.erf((m + mpf(1) / 2) / mp.sqrt(2 * _mp(self.sigma2)))
            integral = val * mp.sqrt(2 * mp.pi * _mp(self.sigma2))
            c = float(integral / self._z)
        err = (2 * m + 1) / (24 * self._s2f) / z + c * 2.0**-50
        return c, err

    def _central_exact_ge(self, m: int, level: Fraction) -> bool:
        """``P(|X| ≤ m) ≥ level`` at high precision: exact summation of at most
        :attr:`_EXACT_SUM_LIMIT` terms, else the Euler–Maclaurin enclosure; ``False`` (the
        conservative answer) if neither decides."""
        for prec in (_PREC, 4 * _PREC):
            with mp.workprec(prec + 20):
                s2 = _mp(self.sigma2)
                # terms beyond ``cap`` hold less than 2^-(prec+40) of the mass (Z ≥ 1)
                cap = min(m, self.tail_index(2.0 ** -(prec + 40)))
                if cap <= self._EXACT_SUM_LIMIT:
                    terms = (mp.exp(-mpf(k * k) / (2 * s2)) for k in range(1, cap + 1))
                    total = 1 + 2 * mp.fsum(terms)
                    err = self._z * mpf(2) ** (-prec - 40) if cap < m else mpf(0)
                else:
                    enclosure = gaussian_lattice_sum(m, s2, prec)
                    if enclosure is None:
                        return False
                    total, err = enclosure
                z = _dg_normaliser(self.sigma2, prec)
                diff = total / z - _mp(level)
                if abs(diff) > err / z + mpf(2) ** (-prec + 20):
                    return bool(diff >= 0)
        return False

    def _covers(self, m: int, level: Fraction) -> bool:
        c, err = self._central_float(m)
        lv = float(level)
        if c - err > lv + 2.0**-52:
            return True
        if c + err < lv - 2.0**-52:
            return False
        return self._central_exact_ge(m, level)

    def coverage(self, m: int) -> float:
        return min(self._central_float(int(m))[0], 1.0)

    def moe_index(self, level: RationalLike = Fraction(19, 20)) -> int:
        return _dg_moe_index(self.sigma2, as_level(level))

    def cdf(self, x: ArrayLike) -> NDArray[np.float64]:
        """``P(noise ≤ x)``."""
        k = _lattice_index(x, self.gamma)
        flat = k.ravel()
        out = np.empty(flat.size, dtype=np.float64)
        for i, kv in enumerate(flat):
            kk = int(kv)
            if kk >= 0:
                out[i] = 0.5 + 0.5 * self._central_float(kk)[0]
            else:
                out[i] = 0.5 - 0.5 * self._central_float(-kk - 1)[0]
        return np.clip(out, 0.0, 1.0).reshape(k.shape)

    def cdf_ge(self, x: int, q: Fraction) -> bool:
        """Is ``P(X ≤ x) ≥ q``? Decided exactly for the rational ``q`` (certified
        high-precision arithmetic; used for quantiles and zero-suppression thresholds)."""
        # P(X ≤ x) ≥ q ⇔ P(|X| ≤ x) ≥ 2q − 1 (x ≥ 0) or P(|X| ≤ −x−1) ≤ 1 − 2q (x < 0)
        if x >= 0:
            target = 2 * q - 1
            return True if target <= 0 else self._covers(x, target)
        target = 1 - 2 * q
        if target <= 0:
            return False
        # P(|X| ≤ m) is transcendental, so it never equals the rational target.
        return not self._covers(-x - 1, target)

    def _quantile_index(self, q: float) -> int:
        if not 0 < q < 1:
            raise ValueError(f"quantile level must be strictly between 0 and 1, got {q!r}")
        from scipy.special import ndtri

        qq = Fraction(q)
        x = round(float(ndtri(q)) * self._sf)
        while not self.cdf_ge(x, qq):
            x += 1
        while self.cdf_ge(x - 1, qq):
            x -= 1
        return x

    # -- sums ---------------------------------------------------------------------------
    def sum_coverage_bounds(self, k: int, m: int, prec: int = _PREC) -> tuple[mpf, mpf]:
        """``P(|S| ≤ m) = Σ_{|s|≤m} φ_{kσ²}(s) ± (2m+1)(6k·e^{−σ²π²/2} + e^{−kσ²π²/2}/
        (π²kσ²))`` (needs σ ≥ 1), the sum enclosed by Euler–Maclaurin."""
        if self.sigma2 < 1:
            raise ValueError("the asymptotic law of a sum needs σ ≥ 1; use the exact pmf")
        s2 = _mp(self.sigma2)
        v = k * s2
        alias = (2 * m + 1) * (
            6 * k * mp.exp(-s2 * mp.pi**2 / 2) + mp.exp(-v * mp.pi**2 / 2) / (mp.pi**2 * v)
        )
        enclosure = gaussian_lattice_sum(m, v, prec)
        if enclosure is None:  # pragma: no cover - needs σ√k below ~1
            return mpf(0), mpf(1)
        total, err = enclosure
        base = mp.sqrt(2 * mp.pi * v)
        slack = mpf(2) ** (-prec + 16)
        lo = (total - err) / base - alias - slack
        hi = (total + err) / base + alias + slack
        return max(lo, mpf(0)), min(hi, mpf(1))

    # -- sampling -------------------------------------------------------------------------
    def sample_index(
        self, size: int | tuple[int, ...], *, source: RandomSource | None = None
    ) -> NDArray[np.int64]:
        return discrete_gaussian(self.sigma2, size, source=source)


@lru_cache(maxsize=4096)
def _dg_moe_index(sigma2: Fraction, level: Fraction) -> int:
    law = DiscreteGaussianLaw(sigma2)
    # a starting guess only (the certified search decides); the stdlib's normal quantile
    # keeps scipy.special (≈ 0.5 s to import) off the plan path
    z = NormalDist().inv_cdf(min((1.0 + float(level)) / 2.0, 1.0 - 1e-16))
    start = max(0, math.ceil(law.sigma * z - 0.5))
    return smallest_true(lambda m: law._covers(m, level), start, law.tail_index(1 - level))
