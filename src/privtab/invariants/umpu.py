"""The semi-private UMPU test for the odds ratio of a 2 × 2 table with invariant margins.

Seed ``semi-dp-invariant-statistics.txt`` §5.3, Definition 35, Lemma 36, Theorem 37
(after Awan & Vadhan 2023). With the margins ``(r₁, r₂; c₁, c₂)`` published, tables with
equal margins differ, ``a = 3`` replacements apart, by ``±D`` (Example 7), so ``x₁₁``
changes by at most 1 and the table has one degree of freedom: ``x₁₁`` given the margins
follows Fisher's noncentral hypergeometric distribution

    P_θ(X = x) ∝ C(r₁, x) C(r₂, c₁ − x) θ^x,   max(0, c₁ − r₂) ≤ x ≤ min(r₁, c₁).

For ``H₀: θ ≤ θ₀`` against ``H₁: θ > θ₀`` and a symmetric trade-off ``f`` with canonical
noise distribution (CND) ``F``, the test releases ``T = x₁₁ + N``, ``N ~ F`` and rejects when
``T ≥ m`` — equivalently ``φ(x) = F(x − m)`` with ``Σ_x P_{θ₀}(x) F(x − m) = α`` — and is
UMP among the f-DP tests with Neyman structure, hence UMPU (Theorem 37). Its p-value
``p(T) = Σ_x P_{θ₀}(x) F(x − T)`` is post-processing of ``T``, is exactly uniform under
``θ = θ₀`` (``F`` is continuous) and ``p ≤ α ⟺ T ≥ m``.

Guarantee: ``T`` (with the margins) is f-DP for tables with the same margins at most 3
replacements apart (f-Semi-DP). CNDs: :class:`TulapCND` for ε-DP (Awan & Slavković 2018;
``Z + U`` with ``Z`` discrete Laplace of parameter ``e^{−ε}`` and ``U ~ U(−½, ½)``),
:class:`GaussianCND` for μ-GDP (``N(0, 1/μ²)``) and :class:`TradeOffCND`, the general
construction of Lemma 36 for any symmetric piecewise-linear trade-off function.

The *naive* alternative (:func:`naive_test`) runs the same test with noise for
``f``-DP under ordinary replace-one neighbours divided by ``a`` (ε/3 for Tulap, μ/3 for
Gaussian) — also f-Semi-DP after the margins are published (Prop. 15), with less power.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import ArrayLike

from privtab._json import fields_dict
from privtab.accounting import GDP, Guarantee, PureDP
from privtab.invariants import _noise
from privtab.invariants._noise import FloatArray, IntArray
from privtab.invariants.tradeoff import TradeOff
from privtab.mechanisms.base import release_source
from privtab.random import RandomSource

__all__ = [
    "CND",
    "GaussianCND",
    "Margins2x2",
    "OddsRatioTest",
    "TestResult",
    "TradeOffCND",
    "TulapCND",
    "fisher_exact_umpu_power",
    "fisher_nch_pmf",
    "naive_test",
]


def _root(fn: Callable[[float], float], lo: float, hi: float) -> float:
    """A root of a monotone function bracketed by ``[lo, hi]`` (Brent's method)."""
    from scipy.optimize import brentq  # lazy (import cost)

    return float(brentq(fn, lo, hi, xtol=1e-13, rtol=4 * np.finfo(float).eps))  # type: ignore[no-untyped-call]


# ---------------------------------------------------------------- Fisher's distribution
@dataclass(frozen=True)
class Margins2x2:
    """Published margins of a 2 × 2 table: row sums ``r1, r2`` and first column sum ``c1``."""

    r1: int
    r2: int
    c1: int

    def __post_init__(self) -> None:
        for name in ("r1", "r2", "c1"):
            v = getattr(self, name)
            if isinstance(v, bool) or int(v) != v or v < 0:
                raise ValueError(f"margin {name} must be a non-negative integer, got {v!r}")
        if self.c1 > self.r1 + self.r2:
            raise ValueError(f"column sum c1 = {self.c1} exceeds the total {self.r1 + self.r2}")

    @classmethod
    def of(cls, table: ArrayLike) -> Margins2x2:
        t = np.asarray(table)
        if t.shape != (2, 2):
            raise ValueError(f"the odds-ratio test needs a 2 × 2 table, got shape {t.shape}")
        if t.dtype.kind not in "iu" and np.any(t != np.round(t)):
            raise ValueError("the table must hold integer counts")
        ti = t.astype(np.int64)
        if np.any(ti < 0):
            raise ValueError("the table must hold non-negative counts")
        return cls(int(ti[0].sum()), int(ti[1].sum()), int(ti[:, 0].sum()))

    @property
    def n(self) -> int:
        return self.r1 + self.r2

    @property
    def support(self) -> IntArray:
        lo = max(0, self.c1 - self.r2)
        hi = min(self.r1, self.c1)
        return np.arange(lo, hi + 1, dtype=np.int64)


def fisher_nch_pmf(theta: float, margins: Margins2x2) -> tuple[IntArray, FloatArray]:
    """Support and pmf of Fisher's noncentral hypergeometric distribution (log-space).

    The arrays are read-only (results are cached per ``(θ, margins)``).
    """
    th = float(theta)
    if not (th > 0 and math.isfinite(th)):
        raise ValueError(f"odds ratio theta must be positive and finite, got {theta!r}")
    return _fisher_nch_cached(th, margins)


@lru_cache(maxsize=4096)
def _fisher_nch_cached(th: float, margins: Margins2x2) -> tuple[IntArray, FloatArray]:
    from scipy.special import gammaln  # lazy (import cost)

    x = margins.support
    xf = x.astype(np.float64)
    logc = (
        gammaln(margins.r1 + 1)
        - gammaln(xf + 1)
        - gammaln(margins.r1 - xf + 1)
        + gammaln(margins.r2 + 1)
        - gammaln(margins.c1 - xf + 1)
        - gammaln(margins.r2 - margins.c1 + xf + 1)
    )
    logp = logc + xf * math.log(th)
    logp -= logp.max()
    p = np.exp(logp)
    pmf = np.asarray(p / p.sum(), dtype=np.float64)
    x.setflags(write=False)
    pmf.setflags(write=False)
    return x, pmf


# ---------------------------------------------------------------- canonical noise
class CND(Protocol):
    """A canonical noise distribution: continuous, symmetric about 0."""

    def cdf(self, x: ArrayLike) -> FloatArray: ...

    def sample(self, size: int, source: RandomSource | None = None) -> FloatArray: ...

    @property
    def guarantee(self) -> Guarantee | TradeOff: ...

    def scaled_down(self, a: int) -> CND: ...


@dataclass(frozen=True)
class TulapCND:
    """Tulap(0, b = e^{−ε}, 0): the CND of ε-DP (Awan & Slavković 2018; Awan & Dong 2022)."""

    epsilon: float

    def __post_init__(self) -> None:
        if not (self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise ValueError(f"epsilon must be positive and finite, got {self.epsilon!r}")

    @property
    def b(self) -> float:
        return math.exp(-self.epsilon)

    def cdf(self, x: ArrayLike) -> FloatArray:
        """``P(Z ≤ k−1) + P(Z = k)(x − k + ½)``, ``k = ⌊x + ½⌋``, ``Z`` discrete Laplace."""
        xx = np.asarray(x, dtype=np.float64)
        b = self.b
        k = np.floor(xx + 0.5)
        frac = xx - k + 0.5
        log_b = -self.epsilon
        j = k - 1.0
        # P(Z ≤ j) = b^{|j|}/(1+b) for j ≤ −1 and 1 − b^{j+1}/(1+b) for j ≥ 0
        lower_tail = np.exp(np.abs(j) * log_b) / (1 + b)
        upper_tail = 1.0 - np.exp((np.maximum(j, -1.0) + 1.0) * log_b) / (1 + b)
        below = np.where(j <= -1, lower_tail, upper_tail)
        pk = (1 - b) / (1 + b) * np.exp(np.abs(k) * log_b)
        return np.asarray(np.clip(below + pk * frac, 0.0, 1.0), dtype=np.float64)

    def sample(self, size: int, source: RandomSource | None = None) -> FloatArray:
        # scale 1/ε as an exact rational: the pmf is exactly ∝ e^{−ε|z|}
        scale = 1 / Fraction(self.epsilon)
        z = _noise.discrete_laplace(scale, size, source=source).astype(np.float64)
        return np.asarray(z + _noise.uniform_open(size, source) - 0.5, dtype=np.float64)

    @property
    def guarantee(self) -> Guarantee:
        return PureDP(self.epsilon)

    def scaled_down(self, a: int) -> TulapCND:
        return TulapCND(self.epsilon / a)


@dataclass(frozen=True)
class GaussianCND:
    """``N(0, 1/μ²)``: the CND of μ-GDP (Awan & Vadhan 2023)."""

    mu: float

    def __post_init__(self) -> None:
        if not (self.mu > 0 and math.isfinite(self.mu)):
            raise ValueError(f"mu must be positive and finite, got {self.mu!r}")

    def cdf(self, x: ArrayLike) -> FloatArray:
        from scipy.special import ndtr  # lazy (import cost)

        return np.asarray(ndtr(self.mu * np.asarray(x, dtype=np.float64)), dtype=np.float64)

    def sample(self, size: int, source: RandomSource | None = None) -> FloatArray:
        return _noise.gaussian(1.0 / self.mu, size, source=source)

    @property
    def guarantee(self) -> Guarantee:
        return GDP(self.mu)

    def scaled_down(self, a: int) -> GaussianCND:
        return GaussianCND(self.mu / a)


@dataclass(frozen=True)
class TradeOffCND:
    """Lemma 36 (Awan & Vadhan 2023, Thm 3.9): the CND of a symmetric nontrivial PL ``f``.

    With ``c`` the fixed point ``f(c) = c``: ``F(x) = c(½ − x) + (1 − c)(½ + x)`` on
    ``[−½, ½]``, ``F(x) = 1 − f(F(x − 1))`` for ``x > ½`` and ``F(x) = f(1 − F(x + 1))`` for
    ``x < −½``. Sampling is by inverting ``F`` numerically (not exact: use
    :class:`TulapCND` / :class:`GaussianCND` for releases).
    """

    f: TradeOff
    c: float = field(init=False)

    def __post_init__(self) -> None:
        if not self.f.is_symmetric():
            raise ValueError("the trade-off function must be symmetric")

        def g(t: float) -> float:
            return float(self.f(t)) - t

        if g(0.5) >= 0:
            raise ValueError("the trade-off function is trivial (f(½) = ½): no CND")
        object.__setattr__(self, "c", _root(g, 0.0, 0.5))

    def _cdf_scalar(self, x: float) -> float:
        if -0.5 <= x <= 0.5:
            return self.c * (0.5 - x) + (1 - self.c) * (0.5 + x)
        if x > 0.5:
            return 1.0 - float(self.f(self._cdf_scalar(x - 1.0)))
        return float(self.f(1.0 - self._cdf_scalar(x + 1.0)))

    def cdf(self, x: ArrayLike) -> FloatArray:
        xx = np.asarray(x, dtype=np.float64)
        flat = np.array([self._cdf_scalar(float(v)) for v in xx.reshape(-1)])
        return flat.reshape(xx.shape)

    def sample(self, size: int, source: RandomSource | None = None) -> FloatArray:
        u = _noise.uniform_open(size, source)
        out = np.empty(size)
        for i, ui in enumerate(u):
            lo, hi = -1.0, 1.0
            while float(self.cdf(lo)) > ui:
                lo *= 2
            while float(self.cdf(hi)) < ui:
                hi *= 2
            target = float(ui)

            def h(t: float, target: float = target) -> float:
                return float(self.cdf(t)) - target

            out[i] = _root(h, lo, hi)
        return out

    @property
    def guarantee(self) -> TradeOff:
        return self.f

    def scaled_down(self, a: int) -> TradeOffCND:
        raise NotImplementedError("a trade-off function has no generic 'divide by a' operation")


# ---------------------------------------------------------------- the test
@dataclass(frozen=True)
class TestResult:
    """Outcome of one run of the semi-private test (what is released: ``statistic``)."""

    statistic: float
    p_value: float
    reject: bool
    alpha: float
    critical_value: float
    theta0: float
    alternative: str
    margins: Margins2x2
    guarantee: str
    private: bool

    def to_dict(self) -> dict[str, Any]:
        return fields_dict(self, margins=fields_dict(self.margins, "r1", "r2", "c1", "n"))


@dataclass(frozen=True)
class OddsRatioTest:
    """Theorem 37's test of ``H₀: θ ≤ θ₀`` vs ``θ > θ₀`` (or the mirror, ``"less"``)."""

    cnd: TulapCND | GaussianCND | TradeOffCND
    theta0: float = 1.0
    alternative: Literal["greater", "less"] = "greater"
    semi_adjacent: int = 3

    def __post_init__(self) -> None:
        if not (self.theta0 > 0 and math.isfinite(self.theta0)):
            raise ValueError(f"theta0 must be positive and finite, got {self.theta0!r}")
        if self.alternative not in ("greater", "less"):
            raise ValueError(f"alternative must be 'greater' or 'less', got {self.alternative!r}")

    def _oriented(self, x: FloatArray) -> FloatArray:
        return x if self.alternative == "greater" else -x

    def rejection_probability(self, m: float, theta: float, margins: Margins2x2) -> float:
        """``E_θ φ_m(X) = Σ_x P_θ(x) F(x − m)`` (orientation applied)."""
        x, p = fisher_nch_pmf(theta, margins)
        return float(np.dot(p, self.cnd.cdf(self._oriented(x.astype(np.float64)) - m)))

    def critical_value(self, margins: Margins2x2, alpha: float) -> float:
        """``m`` with size exactly ``α`` at ``θ₀``."""
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha!r}")
        x = self._oriented(margins.support.astype(np.float64))
        lo, hi = float(x.min()) - 1.0, float(x.max()) + 1.0

        def size(m: float) -> float:
            return self.rejection_probability(m, self.theta0, margins) - alpha

        while size(lo) < 0:
            lo -= 2 * (hi - lo)
        while size(hi) > 0:
            hi += 2 * (hi - lo)
        return _root(size, lo, hi)

    def p_value(self, statistic: float, margins: Margins2x2) -> float:
        """``p(T) = Σ_x P_{θ₀}(x) F(x − T)`` (orientation applied)."""
        x, p = fisher_nch_pmf(self.theta0, margins)
        t = float(statistic) if self.alternative == "greater" else -float(statistic)
        return float(
            np.clip(np.dot(p, self.cnd.cdf(self._oriented(x.astype(np.float64)) - t)), 0.0, 1.0)
        )

    def power(self, theta: float, margins: Margins2x2, alpha: float) -> float:
        """Exact power at odds ratio ``θ`` (size at ``θ₀``)."""
        return self.rejection_probability(self.critical_value(margins, alpha), theta, margins)

    @property
    def guarantee_text(self) -> str:
        g = self.cnd.guarantee
        name = str(g) if not isinstance(g, TradeOff) else "f-DP"
        return (
            f"{name} on 2 × 2 tables with the same margins, at most {self.semi_adjacent} "
            "replacements apart (Semi-DP)"
        )

    def run(
        self,
        table: ArrayLike,
        alpha: float = 0.05,
        *,
        source: RandomSource | None = None,
        allow_insecure: bool = False,
    ) -> TestResult:
        """Release ``T = x₁₁ + N`` and decide. Only ``T`` (and the margins) are released."""
        margins = Margins2x2.of(table)
        x11 = int(np.asarray(table)[0, 0])
        src = release_source(source, allow_insecure, "OddsRatioTest")
        t = float(x11 + self.cnd.sample(1, src)[0])
        m = self.critical_value(margins, alpha)
        p = self.p_value(t, margins)
        stat_oriented = t if self.alternative == "greater" else -t
        return TestResult(
            t,
            p,
            bool(stat_oriented >= m),
            alpha,
            m,
            self.theta0,
            self.alternative,
            margins,
            self.guarantee_text,
            src.is_private,
        )


def naive_test(cnd: TulapCND | GaussianCND, a: int = 3, **kwargs: Any) -> OddsRatioTest:
    """The same test with noise for ordinary DP at ``f/a`` (group privacy), Semi-DP ``f``."""
    return OddsRatioTest(cnd.scaled_down(a), **kwargs)


def fisher_exact_umpu_power(
    theta: float, margins: Margins2x2, alpha: float, theta0: float = 1.0
) -> float:
    """Power of the non-private randomised UMPU (Fisher–Tocher) one-sided test."""
    _, p0 = fisher_nch_pmf(theta0, margins)
    _, p1 = fisher_nch_pmf(theta, margins)
    tail = np.cumsum(p0[::-1])[::-1]  # P(X ≥ x)
    # smallest k with P(X > k) ≤ α; randomise at k
    above = np.append(tail[1:], 0.0)  # P(X > x)
    k = int(np.argmax(above <= alpha + 1e-15))
    gamma = (alpha - above[k]) / p0[k] if p0[k] > 0 else 0.0
    return float(p1[k + 1 :].sum() + min(1.0, gamma) * p1[k])
