"""k-ary randomized response (Warner 1965; the local model), exact and secure.

Each record's category ``v ∈ {0, …, k−1}`` is reported truthfully with probability
``p = e^ε/(e^ε + k − 1)`` and otherwise replaced by one of the other ``k − 1`` categories
uniformly (each with probability ``q = 1/(e^ε + k − 1)``). Changing one record's category
changes its report distribution by a factor of at most ``p/q = e^ε``: ε-DP for that record
(course seed §3; the tight Rényi curve is that of the two reports' distributions).

The mechanism can be given by ε or by its **flip probability** — the probability
``f = (k−1)q`` that the report is not the truth (inferential-limits seed Ex. 2.3 and
semantics seed Ex. 4.3 describe binary randomized response this way): ``e^ε = (k−1)(1−f)/f``,
so ``ε = ln((1−f)/f)`` for ``k = 2`` and ``f < 1/2``. A rational ``f`` keeps every
probability rational (:attr:`RandomizedResponse.exact_probabilities`) and ε is stated as
``ln`` of the exact rational :attr:`RandomizedResponse.exp_epsilon_exact` (published
rounded up).

The truthful-report coin is an *exact* Bernoulli(p): decided by certified comparison
(:func:`privtab.random.uniform.bernoulli_certified`) when ``p`` is irrational (ε rational), by
exact rational arithmetic (:func:`privtab.random.uniform.bernoulli`) when it is rational; the
replacement is an exact uniform draw.

Counts are estimated without bias by ``(S_j − nq)/(p − q)`` where ``S_j`` is the number of
reports of category ``j``; :meth:`RandomizedResponse.count_pmf` gives the exact law of
``S_j`` (a sum of two binomials), from which the margin of error and exact (test-inversion)
confidence intervals follow.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from mpmath import mp, mpf
from numpy.typing import ArrayLike, NDArray

from privtab.accounting import RDP, PureDP
from privtab.accounting.conversions import randomized_response_rdp
from privtab.accounting.guarantees import FloatArray
from privtab.mechanisms.base import Release, float_up, release_source
from privtab.mechanisms.geometric import positive_int
from privtab.mechanisms.laws import as_level
from privtab.random import RandomSource, RationalLike
from privtab.random.exact import exp_neg_enclosure
from privtab.random.rational import as_rational
from privtab.random.uniform import bernoulli, bernoulli_certified, uniform_int
from privtab.report import round_up_sig

__all__ = ["RandomizedResponse"]


def _ln_up(x: Fraction) -> float:
    """A float ≥ ``ln x`` (``x > 1`` rational), at most one float step above it."""
    with mp.workprec(200):
        ln = mp.log1p(mpf(x.numerator - x.denominator) / x.denominator)
        # log1p is within a few units of 2^-200 relative; the margin makes it an upper bound
        man, exp = (ln * (1 + mpf(2) ** -180)).man_exp
    return float_up(Fraction(man) * Fraction(2) ** exp)


class RandomizedResponse:
    """ε-DP k-ary randomized response over categories ``0, …, k−1`` (see module doc)."""

    name = "randomized_response"

    def __init__(self, epsilon: RationalLike, categories: int = 2) -> None:
        eps = as_rational(epsilon, "epsilon", positive=True)
        self._setup(eps, None, categories)

    @classmethod
    def from_flip_probability(cls, p: RationalLike, categories: int = 2) -> RandomizedResponse:
        """The mechanism whose report differs from the truth with probability ``p``.

        ``e^ε = (k−1)(1−p)/p`` exactly (a float ``p`` is taken at its binary value, a string
        such as ``"1/4"`` exactly); needs ``0 < p < (k−1)/k`` — ``0 < p < 1/2`` for binary
        randomized response (inferential-limits seed Ex. 2.3: ``p = 1/(1+e^ε)``).

        >>> rr = RandomizedResponse.from_flip_probability("1/4")
        >>> rr.exp_epsilon_exact, rr.exact_probabilities
        (Fraction(3, 1), (Fraction(3, 4), Fraction(1, 4)))
        """
        k = positive_int(categories, "categories")
        if k < 2:
            raise ValueError("randomized response needs at least 2 categories")
        f = as_rational(p, "flip probability", positive=True)
        top = Fraction(k - 1, k)
        if f >= top:
            raise ValueError(
                f"flip probability must lie strictly between 0 and {top} for {k} categories "
                f"(at {top} the report is independent of the truth: ε = 0), got {p!r}"
            )
        rr = cls.__new__(cls)
        rr._setup(None, (k - 1) * (1 - f) / f, k)
        return rr

    def _setup(self, eps: Fraction | None, exp_eps: Fraction | None, categories: int) -> None:
        self.categories = positive_int(categories, "categories")
        if self.categories < 2:
            raise ValueError("randomized response needs at least 2 categories")
        #: ε exactly, when it is rational (built from ε); else ``None``.
        self.epsilon_exact: Fraction | None = eps
        #: ``e^ε`` exactly, when it is rational (built from a flip probability); else ``None``.
        self.exp_epsilon_exact: Fraction | None = exp_eps
        k1 = self.categories - 1
        if exp_eps is not None:
            self._exact: tuple[Fraction, Fraction] | None = (
                exp_eps / (exp_eps + k1),
                k1 / (exp_eps + k1),
            )
            self._p = float(self._exact[0])
            self._q = float(1 / (exp_eps + k1))
            self._eps_up = _ln_up(exp_eps)
        else:
            assert eps is not None
            self._exact = None
            self._eps_up = float_up(eps)
            with mp.workprec(120):
                e = mp.exp(mpf(eps.numerator) / eps.denominator)
                self._p = float(e / (e + k1))
                self._q = float(1 / (e + k1))

    def __repr__(self) -> str:
        if self.epsilon_exact is None:
            f = float(1 - self._exact[0]) if self._exact else float("nan")
            return f"RandomizedResponse.from_flip_probability({f!r}, {self.categories})"
        eps = float(self.epsilon_exact)
        return f"RandomizedResponse(epsilon={eps!r}, categories={self.categories})"

    @property
    def epsilon(self) -> float:
        """ε, rounded up to a float (``ln e^ε`` when built from a flip probability)."""
        return self._eps_up

    @property
    def p_truth(self) -> float:
        """``p = e^ε/(e^ε + k − 1)``: the probability of a truthful report."""
        return self._p

    @property
    def p_other(self) -> float:
        """``q = 1/(e^ε + k − 1)``: the probability of each particular other category."""
        return self._q

    @property
    def flip_probability(self) -> float:
        """``1 − p = (k−1)q``: the probability that the report is not the truth."""
        if self._exact is not None:
            return float(self._exact[1])
        return (self.categories - 1) * self._q

    @property
    def exact_probabilities(self) -> tuple[Fraction, Fraction] | None:
        """``(truth probability, flip probability)`` as exact fractions when they are
        rational (built from a flip probability), else ``None`` (irrational for rational
        ε)."""
        return self._exact

    @property
    def guarantee(self) -> PureDP:
        return PureDP(self.epsilon)

    @property
    def rdp(self) -> RDP:
        """The exact Rényi divergence between the report laws of two different inputs."""
        if self.categories == 2:
            return randomized_response_rdp(self.epsilon)
        p, q, k = self._p, self._q, self.categories
        lp, lq = math.log(p), math.log(q)

        def curve(alpha: FloatArray) -> FloatArray:
            a = np.asarray(alpha, dtype=np.float64)
            terms = np.stack(
                np.broadcast_arrays(
                    a * lp + (1 - a) * lq, a * lq + (1 - a) * lp, np.log((k - 2) * q) + 0 * a
                )
            )
            top = terms.max(axis=0)
            lse = top + np.log(np.exp(terms - top).sum(axis=0))
            return np.asarray(np.maximum(lse / (a - 1), 0.0), dtype=np.float64)

        return RDP(
            curve,
            f"{k}-ary randomized response eps={round_up_sig(self.epsilon)}",
            limit=self.epsilon,
        )

    @property
    def variance(self) -> float:
        """Per-record variance of the unbiased count estimator, worst case over the truth:
        ``max(p(1−p), q(1−q))/(p − q)²``."""
        p, q = self._p, self._q
        return max(p * (1 - p), q * (1 - q)) / (p - q) ** 2

    def count_variance(self, n: int, count: int) -> float:
        """Variance of the unbiased estimate of a category's count ``count`` among ``n``."""
        p, q = self._p, self._q
        return (count * p * (1 - p) + (n - count) * q * (1 - q)) / (p - q) ** 2

    # -- release and estimation ---------------------------------------------------------
    def _truth_enclosure(self, prec: int) -> tuple[Fraction, Fraction]:
        assert self.epsilon_exact is not None
        lo_e, hi_e = exp_neg_enclosure(self.epsilon_exact, prec)
        k1 = self.categories - 1
        return 1 / (1 + k1 * hi_e), 1 / (1 + k1 * lo_e)

    def release(
        self,
        values: ArrayLike,
        *,
        source: RandomSource | None = None,
        allow_insecure: bool = False,
    ) -> Release:
        """Randomize every record's category (int64 array in ``[0, k)``)."""
        arr = np.asarray(values)
        if not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"{self.name} needs integer category codes, got dtype {arr.dtype}")
        bad = (arr < 0) | (arr >= self.categories)
        if bad.any():
            i = int(np.flatnonzero(bad.ravel())[0])
            raise ValueError(
                f"{self.name}: category at flat index {i} is {arr.ravel()[i]!r}, "
                f"outside 0..{self.categories - 1}"
            )
        src = release_source(source, allow_insecure, self.name)
        truth = arr.astype(np.int64)
        if self._exact is not None:
            keep = bernoulli(self._exact[0], truth.shape, source=src)
        else:
            keep = bernoulli_certified(self._truth_enclosure, truth.shape, source=src)
        other = uniform_int(self.categories - 1, truth.shape, source=src)
        other += other >= truth
        reports = np.where(keep, truth, other)
        return Release(
            values=reports,
            mechanism=self.name,
            guarantee=self.guarantee,
            private=src.is_private,
            source=src.description,
            parameters={"epsilon": self.epsilon, "categories": self.categories},
        )

    def estimate_counts(self, reports: ArrayLike) -> NDArray[np.float64]:
        """Unbiased estimates of every category's count from the reports."""
        arr = np.asarray(reports, dtype=np.int64).ravel()
        n = arr.size
        s = np.bincount(arr, minlength=self.categories).astype(np.float64)
        return (s - n * self._q) / (self._p - self._q)

    # -- exact error ----------------------------------------------------------------------
    def count_pmf(self, n: int, count: int) -> NDArray[np.float64]:
        """Exact pmf of ``S`` = reports of a category whose true count is ``count`` of ``n``:
        ``Binomial(count, p) + Binomial(n − count, q)`` (index = value of ``S``)."""
        n = int(n)
        c = int(count)
        if not 0 <= c <= n:
            raise ValueError(f"count must be between 0 and n={n}, got {count!r}")
        from scipy import stats

        a = stats.binom.pmf(np.arange(c + 1), c, self._p)
        b = stats.binom.pmf(np.arange(n - c + 1), n - c, self._q)
        if min(a.size, b.size) > 2000:
            from scipy.signal import fftconvolve

            return np.asarray(np.clip(fftconvolve(a, b), 0.0, None), dtype=np.float64)
        return np.asarray(np.convolve(a, b), dtype=np.float64)

    def _worst_count(self, n: int) -> int:
        p, q = self._p, self._q
        return n if p * (1 - p) >= q * (1 - q) else 0

    def moe(self, level: RationalLike = 0.95, *, n: int, count: int | None = None) -> float:
        """The smallest ``m`` with ``P(|estimate − count| ≤ m) ≥ level`` for the unbiased
        count estimate (exact law; ``count`` defaults to the variance-maximising count)."""
        lv = float(as_level(level))
        c = self._worst_count(n) if count is None else int(count)
        pmf = self.count_pmf(n, c)
        s = np.arange(pmf.size)
        err = np.abs((s - n * self._q) / (self._p - self._q) - c)
        order = np.argsort(err, kind="stable")
        cum = np.cumsum(pmf[order])
        idx = int(np.searchsorted(cum, lv * (1 - 1e-13)))
        return float(err[order][min(idx, err.size - 1)])

    def confidence_interval(
        self, estimate: float, level: RationalLike = 0.95, *, n: int
    ) -> tuple[int, int]:
        """An exact (Clopper–Pearson-style) confidence interval for a category's true count.

        Inverts the two one-sided tests on the report count ``S``: the interval is every
        count ``c`` with ``P_c(S ≥ s) > α/2`` and ``P_c(S ≤ s) > α/2`` (``α = 1 − level``),
        which by the stochastic monotonicity of ``S`` in ``c`` is an interval found by
        bisection. Coverage is at least ``level`` for every true count.
        """
        alpha = 1 - float(as_level(level))
        s_obs = round(estimate * (self._p - self._q) + n * self._q)
        s_obs = min(max(s_obs, 0), n)

        def upper_tail(c: int) -> float:  # P_c(S ≥ s_obs)
            pmf = self.count_pmf(n, c)
            return float(pmf[s_obs:].sum())

        def lower_tail(c: int) -> float:  # P_c(S ≤ s_obs)
            pmf = self.count_pmf(n, c)
            return float(pmf[: s_obs + 1].sum())

        lo, hi = 0, n
        # smallest c with upper_tail(c) > alpha/2 (upper_tail increases with c)
        a, b = 0, n
        if upper_tail(n) <= alpha / 2:
            lo = n
        else:
            while a < b:
                mid = (a + b) // 2
                if upper_tail(mid) > alpha / 2:
                    b = mid
                else:
                    a = mid + 1
            lo = a
        # largest c with lower_tail(c) > alpha/2 (lower_tail decreases with c)
        a, b = 0, n
        if lower_tail(0) <= alpha / 2:
            hi = 0
        else:
            while a < b:
                mid = (a + b + 1) // 2
                if lower_tail(mid) > alpha / 2:
                    a = mid
                else:
                    b = mid - 1
            hi = a
        return lo, hi

    def parameters(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "categories": self.categories}
