"""Exact noise laws: pmf, CDF, quantiles, variance and margin of error.

:class:`DiscreteLaplaceLaw` (pmf ∝ ``e^{−|x|/t}``) and :class:`DiscreteGaussianLaw`
(pmf ∝ ``e^{−x²/(2σ²)}``) on the integers, optionally scaled onto a lattice ``γℤ``
(``granularity``; the law of ``γ·X``) for the real-valued mechanisms.

"Exact" here means that every *decision* — is the coverage ``P(|noise| ≤ m)`` at least the
level? is ``P(noise ≤ x)`` at least ``q``? — is made with a rigorous error bound and falls
back to higher precision whenever the bound does not decide, so integer answers (margins
of error, quantiles) are the true ones. Probabilities returned as floats are accurate to
about 1e-15 relative.

Formulas (``r = e^{−1/t}``):

* Laplace: ``P(X = x) = (1−r)/(1+r)·r^{|x|}``; ``P(|X| > m) = 2r^{m+1}/(1+r)``;
  ``P(X ≤ x) = r^{−x}/(1+r)`` for ``x < 0`` and ``1 − r^{x+1}/(1+r)`` for ``x ≥ 0``;
  ``Var X = 2r/(1−r)²`` (SafeTab seed App. D.3, course seed Defs. 9–10).
* Gaussian: ``Z = Σ_x e^{−x²/(2σ²)} = σ√(2π)·Σ_k e^{−2π²σ²k²}`` (Poisson summation),
  ``Var X = σ²·Σ_k (1 − 4π²σ²k²) e^{−2π²σ²k²} / Σ_k e^{−2π²σ²k²}`` (≤ σ², CKS 2020 Cor. 9);
  central masses ``P(|X| ≤ m)`` by summation (σ ≤ 2¹⁴) or by the midpoint rule
  ``∫_{−m−½}^{m+½} e^{−u²/(2σ²)} du`` with its error bound ``(2m+1)/(24σ²)`` (larger σ).
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from statistics import NormalDist

import numpy as np
from mpmath import mp, mpf
from numpy.typing import ArrayLike, NDArray

from privtab.random import RationalLike, as_rational

__all__ = ["DiscreteGaussianLaw", "DiscreteLaplaceLaw", "as_level"]

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


def _scale_out(k: NDArray[np.int64] | int, gamma: Fraction) -> NDArray[np.float64] | float:
    if gamma == 1:
        return k if isinstance(k, int) else k.astype(np.float64)
    g = float(gamma)
    return float(k) * g if isinstance(k, int) else k.astype(np.float64) * g


def _lattice_index(x: ArrayLike, gamma: Fraction) -> NDArray[np.float64]:
    """``⌊x/γ⌋`` as float64 (exact for the magnitudes used)."""
    arr = np.asarray(x, dtype=np.float64)
    return np.floor(arr / float(gamma))


class DiscreteLaplaceLaw:
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

    @property
    def variance(self) -> float:
        """``γ²·2r/(1−r)²``."""
        with mp.workprec(_PREC):
            v = 2 * self._r / (1 - self._r) ** 2 * _mp(self.gamma) ** 2
            return float(v)

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
        raise ArithmeticError("margin-of-error decision did not resolve")  # pragma: no cover

    def moe_index(self, level: RationalLike = Fraction(19, 20)) -> int:
        """The smallest integer ``m`` with ``P(|X| ≤ m) ≥ level`` (lattice units)."""
        lv = as_level(level)
        alpha = 1 - lv
        with mp.workprec(_PREC):
            est = _mp(self.t) * mp.log(2 / (_mp(alpha) * (1 + self._r))) - 1
        m = max(0, math.ceil(float(est)))
        while not self._tail_at_most(m, alpha):
            m += 1
        while m > 0 and self._tail_at_most(m - 1, alpha):
            m -= 1
        return m

    def moe(self, level: RationalLike = Fraction(19, 20)) -> float:
        """The exact margin of error: the smallest lattice point ``m ≥ 0`` with
        ``P(|noise| ≤ m) ≥ level`` (an integer when ``γ = 1``)."""
        return _scale_out(self.moe_index(level), self.gamma)  # type: ignore[return-value]

    def coverage(self, m: int) -> float:
        """``P(|X| ≤ m)`` for integer ``m`` (lattice units)."""
        if m < 0:
            return 0.0
        with mp.workprec(_PREC):
            return float(1 - self._tail_mp(int(m)))

    def quantile(self, q: ArrayLike) -> NDArray[np.float64]:
        """The smallest lattice point ``x`` with ``P(noise ≤ x) ≥ q`` (``0 < q < 1``)."""
        qs = np.atleast_1d(np.asarray(q, dtype=np.float64))
        out = np.array([self._quantile_index(float(v)) for v in qs.ravel()], dtype=np.int64)
        res = _scale_out(out, self.gamma)
        return np.asarray(res, dtype=np.float64).reshape(np.shape(q))

    def _cdf_ge(self, x: int, q: Fraction) -> bool:
        for prec in (_PREC, 4 * _PREC, 16 * _PREC):
            with mp.workprec(prec):
                t = _mp(self.t)
                one_r = 1 + mp.exp(-1 / t)
                c = mp.exp(x / t) / one_r if x < 0 else 1 - mp.exp(-(x + 1) / t) / one_r
                diff = c - _mp(q)
                if abs(diff) > mpf(2) ** (-prec + 20):
                    return bool(diff > 0)
        raise ArithmeticError("quantile decision did not resolve")  # pragma: no cover

    def _quantile_index(self, q: float) -> int:
        if not 0 < q < 1:
            raise ValueError(f"quantile level must be strictly between 0 and 1, got {q!r}")
        qq = Fraction(q)
        x = math.floor(self._approx_quantile(q))
        while not self._cdf_ge(x, qq):
            x += 1
        while self._cdf_ge(x - 1, qq):
            x -= 1
        return x

    def _approx_quantile(self, q: float) -> float:
        r_log1p = self._log1pr
        if q < 0.5:
            return self._tf * (math.log(q) + r_log1p)
        return -self._tf * (math.log1p(-q) + r_log1p) - 1


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


class DiscreteGaussianLaw:
    """The law of ``γ·X`` with ``P(X = x) ∝ e^{−x²/(2σ²)}`` on ℤ (``γ = granularity``)."""

    _SUM_LIMIT = 1 << 14  # σ above which central masses use the midpoint-rule bound

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

    @property
    def variance(self) -> float:
        """The exact variance of the noise (slightly below ``γ²σ²``)."""
        with mp.workprec(_PREC):
            s2 = _mp(self.sigma2)
            if self.sigma2 >= 1:
                q = mp.exp(-2 * mp.pi**2 * s2)
                num = mpf(1)
                den = mpf(1)
                for k in range(1, 8):
                    w = q ** (k * k)
                    num += 2 * (1 - 4 * mp.pi**2 * s2 * k * k) * w
                    den += 2 * w
                v = s2 * num / den
            else:
                bound = int(40 * self._sf) + 12
                v = (
                    2
                    * mp.fsum(mpf(x * x) * mp.exp(-mpf(x * x) / (2 * s2)) for x in range(1, bound))
                    / self._z
                )
            return float(v * _mp(self.gamma) ** 2)

    def _central_float(self, m: int) -> tuple[float, float]:
        """``(c, err)`` with ``|P(|X| ≤ m) − c| ≤ err``."""
        if m < 0:
            return 0.0, 0.0
        z = float(self._z)
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
        """``P(|X| ≤ m) ≥ level`` by exact summation at high precision (slow path)."""
        for prec in (_PREC, 4 * _PREC):
            with mp.workprec(prec + 20):
                s2 = _mp(self.sigma2)
                total = 1 + 2 * mp.fsum(mp.exp(-mpf(k * k) / (2 * s2)) for k in range(1, m + 1))
                diff = total / _dg_normaliser(self.sigma2, prec) - _mp(level)
                if abs(diff) > mpf(2) ** (-prec + 20):
                    return bool(diff >= 0)
        raise ArithmeticError("coverage decision did not resolve")  # pragma: no cover

    def _covers(self, m: int, level: Fraction) -> bool:
        c, err = self._central_float(m)
        lv = float(level)
        if c - err > lv + 2.0**-52:
            return True
        if c + err < lv - 2.0**-52:
            return False
        return self._central_exact_ge(m, level)

    def coverage(self, m: int) -> float:
        """``P(|X| ≤ m)`` for integer ``m`` (lattice units)."""
        return self._central_float(int(m))[0]

    def moe_index(self, level: RationalLike = Fraction(19, 20)) -> int:
        """The smallest integer ``m`` with ``P(|X| ≤ m) ≥ level`` (lattice units)."""
        return _dg_moe_index(self.sigma2, as_level(level))

    def moe(self, level: RationalLike = Fraction(19, 20)) -> float:
        """The exact margin of error: the smallest lattice point ``m ≥ 0`` with
        ``P(|noise| ≤ m) ≥ level`` (an integer when ``γ = 1``)."""
        return _scale_out(self.moe_index(level), self.gamma)  # type: ignore[return-value]

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
        return out.reshape(k.shape)

    def quantile(self, q: ArrayLike) -> NDArray[np.float64]:
        """The smallest lattice point ``x`` with ``P(noise ≤ x) ≥ q`` (``0 < q < 1``)."""
        qs = np.atleast_1d(np.asarray(q, dtype=np.float64))
        out = np.array([self._quantile_index(float(v)) for v in qs.ravel()], dtype=np.int64)
        res = _scale_out(out, self.gamma)
        return np.asarray(res, dtype=np.float64).reshape(np.shape(q))

    def _cdf_ge(self, x: int, q: Fraction) -> bool:
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
        while not self._cdf_ge(x, qq):
            x += 1
        while self._cdf_ge(x - 1, qq):
            x -= 1
        return x


@lru_cache(maxsize=4096)
def _dg_moe_index(sigma2: Fraction, level: Fraction) -> int:
    law = DiscreteGaussianLaw(sigma2)
    # a starting guess only (the exact loops below decide); the stdlib's normal quantile
    # keeps scipy.special (≈ 0.5 s to import) off the `safetab plan` path
    z = NormalDist().inv_cdf(min((1.0 + float(level)) / 2.0, 1.0 - 1e-16))
    m = max(0, math.ceil(law.sigma * z - 0.5))
    while not law._covers(m, level):
        m += 1
    while m > 0 and law._covers(m - 1, level):
        m -= 1
    return m
