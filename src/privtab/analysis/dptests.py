"""Hypothesis tests that account for the privacy noise (course seed §4.4).

The course's Example 4.3: a sample of ``n = 100`` people, the count with a disease
released with Laplace noise (ε = 0.5), ``M(D) = 34.21``; test ``H₀: p = 0.255``. The usual
statistic ``z = (p̂ − p₀)/√(p₀(1−p₀)/n)`` is no longer standard normal under ``H₀`` — its
null law is that of ``(X + e − np₀)/√(np₀(1−p₀))`` with ``X ~ Binomial(n, p₀)`` and ``e``
the mechanism's noise. Ignoring the noise (the *naive* test) rejects too often.

:func:`proportion_test` computes the p-value under the correct null law, for any privtab
mechanism:

* ``method="exact"``: ``P(|X + e − np₀| ≥ |obs − np₀|)`` summed over the binomial pmf —
  for integer noise by exact convolution of the binomial pmf with the noise pmf (the
  statistic is then an integer and ties are counted, so the p-value is valid), for
  Laplace/Gaussian noise with their closed-form CDFs (course Example 4.3: 0.09224, where
  the naive p-value is 0.0457);
* ``method="monte_carlo"``: the course's approach — simulate the statistic under ``H₀``
  ``reps`` times — with the ``(1 + #{|Tᵢ| ≥ |t|})/(reps + 1)`` p-value, whose size is at
  most α for every ``reps`` (the observed statistic is exchangeable with the simulated
  ones under ``H₀``).

Both are post-processing of the release: no privacy cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privtab._json import Record

if TYPE_CHECKING:
    from privtab.mechanisms import NoiseMechanism
    from privtab.random import RandomSource

__all__ = [
    "TestResult",
    "monte_carlo_pvalue",
    "naive_proportion_pvalue",
    "proportion_pvalues",
    "proportion_test",
    "proportion_z",
    "type_one_error",
]

Alternative = Literal["two-sided", "greater", "less"]


@dataclass(frozen=True)
class TestResult(Record):
    """A DP-aware test: observed ``z``, its p-value, and the naive p-value for contrast."""

    __test__ = False  # not a pytest class

    statistic: float
    p_value: float
    naive_p_value: float
    method: str
    alternative: str
    reps: int | None = None


def proportion_z(noisy_count: ArrayLike, n: int, p0: float) -> NDArray[np.float64]:
    """``(x/n − p₀)/√(p₀(1−p₀)/n)`` for noisy counts ``x`` (course §4.4)."""
    return (np.asarray(noisy_count, dtype=np.float64) / n - p0) / math.sqrt(p0 * (1 - p0) / n)


def naive_proportion_pvalue(
    noisy_count: ArrayLike, n: int, p0: float, alternative: Alternative = "two-sided"
) -> NDArray[np.float64]:
    """The p-value that ignores the noise (normal approximation): *not* a valid test."""
    from scipy.special import ndtr

    z = proportion_z(noisy_count, n, p0)
    if alternative == "two-sided":
        return np.asarray(2 * ndtr(-np.abs(z)), dtype=np.float64)
    if alternative == "greater":
        return np.asarray(ndtr(-z), dtype=np.float64)
    return np.asarray(ndtr(z), dtype=np.float64)


def monte_carlo_pvalue(
    observed: float, simulated: ArrayLike, alternative: Alternative = "two-sided"
) -> float:
    """``(1 + #{Tᵢ at least as extreme as t})/(reps + 1)``: a valid p-value whenever the
    simulated statistics are i.i.d. draws of the observed one's null law."""
    sims = np.asarray(simulated, dtype=np.float64)
    if alternative == "two-sided":
        hits = int(np.count_nonzero(np.abs(sims) >= abs(observed)))
    elif alternative == "greater":
        hits = int(np.count_nonzero(sims >= observed))
    else:
        hits = int(np.count_nonzero(sims <= observed))
    return (1 + hits) / (sims.size + 1)


def _binomial(n: int, p0: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    from scipy.stats import binom

    k = np.arange(n + 1, dtype=np.float64)
    pmf = np.asarray(binom.pmf(k, n, p0), dtype=np.float64)
    keep = pmf > 1e-300
    return k[keep], pmf[keep]


def _continuous_cdfs(mechanism: NoiseMechanism) -> tuple[Any, Any]:
    """Vectorised ``P(e ≤ x)`` and ``P(e ≥ x)`` for Laplace / Gaussian noise."""
    from scipy.special import ndtr

    from privtab.mechanisms import Gaussian, Laplace

    if isinstance(mechanism, Laplace):
        b = float(mechanism.scale_exact)

        def cdf(x: NDArray[np.float64]) -> NDArray[np.float64]:
            return np.where(
                x < 0, 0.5 * np.exp(np.minimum(x, 0) / b), 1 - 0.5 * np.exp(-np.maximum(x, 0) / b)
            )

        def sf(x: NDArray[np.float64]) -> NDArray[np.float64]:
            return cdf(-x)

        return cdf, sf
    if isinstance(mechanism, Gaussian):
        s = mechanism.sigma
        return (lambda x: ndtr(x / s)), (lambda x: ndtr(-x / s))
    raise TypeError(f"{mechanism!r} is not a continuous-noise mechanism")


def proportion_pvalues(
    noisy_counts: ArrayLike,
    n: int,
    p0: float,
    mechanism: NoiseMechanism,
    alternative: Alternative = "two-sided",
) -> NDArray[np.float64]:
    """Exact p-values (vectorised over observed noisy counts) of ``H₀: p = p₀`` under
    the null law ``X + e``, ``X ~ Binomial(n, p₀)``. Valid: ``P(p ≤ α) ≤ α`` under H₀."""
    from privtab.analysis.noise import discrete_pmf
    from privtab.mechanisms.linear import is_discrete

    obs = np.atleast_1d(np.asarray(noisy_counts, dtype=np.float64))
    d = obs - n * p0
    k, bk = _binomial(n, p0)
    if is_discrete(mechanism):
        pmf, m = discrete_pmf(mechanism)
        full = np.zeros(n + 1)
        full[k.astype(np.int64)] = bk
        law = np.convolve(full, pmf)
        t = np.arange(-m, n + m + 1, dtype=np.float64) - n * p0  # centred statistic
        tol = 1e-9 * max(1.0, n * p0)
        if alternative == "two-sided":
            mags = np.abs(t)
            order = np.argsort(-mags, kind="stable")
            cum = np.cumsum(law[order])
            idx = np.searchsorted(-mags[order], -(np.abs(d) - tol), side="right") - 1
        elif alternative == "greater":
            order = np.argsort(-t, kind="stable")
            cum = np.cumsum(law[order])
            idx = np.searchsorted(-t[order], -(d - tol), side="right") - 1
        else:
            order = np.argsort(t, kind="stable")
            cum = np.cumsum(law[order])
            idx = np.searchsorted(t[order], d + tol, side="right") - 1
        out = np.where(idx >= 0, cum[np.maximum(idx, 0)], 0.0)
        return np.asarray(np.minimum(out, 1.0), dtype=np.float64)
    cdf, sf = _continuous_cdfs(mechanism)
    shift = (n * p0 - k)[None, :]  # e must exceed d + np0 − k
    dd = d[:, None]
    if alternative == "two-sided":
        a = np.abs(dd)
        probs = sf(a + shift) + cdf(-a + shift)
    elif alternative == "greater":
        probs = sf(dd + shift)
    else:
        probs = cdf(dd + shift)
    return np.asarray(np.minimum(probs @ bk, 1.0), dtype=np.float64)


def proportion_test(
    noisy_count: float,
    n: int,
    p0: float,
    mechanism: NoiseMechanism,
    *,
    method: Literal["exact", "monte_carlo"] = "exact",
    alternative: Alternative = "two-sided",
    reps: int = 10_000,
    source: RandomSource | None = None,
    seed: int | None = None,
) -> TestResult:
    """Test ``H₀: p = p₀`` from a noisy count of ``n`` Bernoulli(p) records.

    Course seed §4.4, Example 4.3 (Laplace ε = 0.5, n = 100, p₀ = .255, M(D) = 34.21):
    exact p-value 0.0922 — the naive 0.0457 would reject at 5%. ``source`` draws the
    Monte Carlo noise (default: the secure source); ``seed`` the binomial draws.
    """
    if not (0 < p0 < 1) or n < 1:
        raise ValueError("need 0 < p0 < 1 and n ≥ 1")
    z = float(proportion_z(noisy_count, n, p0)[()])
    naive = float(naive_proportion_pvalue(noisy_count, n, p0, alternative)[()])
    if method == "exact":
        p = float(proportion_pvalues([noisy_count], n, p0, mechanism, alternative)[0])
        return TestResult(z, p, naive, f"exact null law ({mechanism.name})", alternative)
    if method != "monte_carlo":
        raise ValueError(f"method must be 'exact' or 'monte_carlo', got {method!r}")
    rng = np.random.default_rng(seed)
    x = rng.binomial(n, p0, size=reps) + mechanism.sample_noise(reps, source=source)
    sims = proportion_z(x, n, p0)
    p = monte_carlo_pvalue(z, sims, alternative)
    return TestResult(z, p, naive, f"monte carlo null law ({mechanism.name})", alternative, reps)


def type_one_error(
    n: int,
    p0: float,
    mechanism: NoiseMechanism,
    *,
    tests: int = 2000,
    alpha: float = 0.05,
    method: Literal["exact", "monte_carlo"] = "exact",
    reps: int = 1000,
    source: RandomSource | None = None,
    seed: int | None = None,
) -> dict[str, float]:
    """Simulate ``tests`` releases under ``H₀`` and report the rejection rates at ``alpha``
    of the DP-aware test and of the naive test (course §4.4's "type 1 error" check)."""
    rng = np.random.default_rng(seed)
    obs = rng.binomial(n, p0, size=tests) + mechanism.sample_noise(tests, source=source)
    naive = naive_proportion_pvalue(obs, n, p0)
    if method == "exact":
        pv = proportion_pvalues(obs, n, p0, mechanism)
    else:
        z_obs = proportion_z(obs, n, p0)
        sims = rng.binomial(n, p0, size=(tests, reps)) + mechanism.sample_noise(
            (tests, reps), source=source
        )
        hits = np.count_nonzero(np.abs(proportion_z(sims, n, p0)) >= np.abs(z_obs)[:, None], 1)
        pv = (1 + hits) / (reps + 1)
    return {
        "tests": float(tests),
        "alpha": alpha,
        "dp_rejection_rate": float(np.mean(pv <= alpha)),
        "naive_rejection_rate": float(np.mean(naive <= alpha)),
    }
