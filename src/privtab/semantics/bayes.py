"""Bayesian semantics: how much can a release move an attacker's beliefs?

Posterior-to-posterior (counterfactual) bounds — semantics seed §7:

* pure ε-DP, Thm 7.3: the actual posterior of any record value is within a factor
  ``e^{±ε}`` of the counterfactual posterior (Jessie's record replaced by a draw from the
  attacker's conditional, "Option 3"); with the record *deleted* or replaced by a fixed
  default, the posterior **odds** move by at most ``e^{±2ε}`` (course seed Thm 3.1; Alice)
  and so does the posterior **probability** (course §3.3.2; Bob: ``e^{2ε} ≤ 1.25`` ⇔
  ``ε ≤ ½ ln 1.25``).
* RDP / zCDP, rest of the data known, Thm 7.4.1: for every record value ``r``,
  ``P[π(r|ω)/π(r) > e^ε] ≤ inf_λ exp((λ−1)τ(λ) − λε)``; for ρ-zCDP
  ``exp(−(ε+ρ)²/(4ρ))`` when ε > ρ (``e^{−ε}`` otherwise). ω is drawn from the
  attacker's (correct) prior and the mechanism.
* RDP / zCDP, arbitrary prior, the true record, Thm 7.4.2:
  ``P[actual/counterfactual posterior > e^ε] ≤ inf_λ exp((λ−1)(τ(λ) − ε))``; for zCDP
  ``exp(−(ε−ρ)²/(4ρ))`` when ε > ρ.
* f-DP / pbdp, seed Thm 3 (§7.4.1): the same probability is at most the pbdp δ(ε) of the
  mechanism's trade-off curve (:mod:`.pbdp`).

Prior-to-posterior and data-probability bounds for pure ε-DP — inferential-limits seed:

* Thm 6.4: ``e^{−εd*} π(A) ≤ π(A | s) ≤ e^{εd*} π(A)`` for every event ``A`` about the
  parameter, where ``d*`` is the largest distance between datasets the prior allows;
  applied to ``A`` and its complement together ("coherent", the default of
  :func:`posterior_interval`), or as a bound on the posterior odds (tight); the zCDP/RDP
  analogue holds in probability only (:func:`probable_posterior_interval`).
* Thms 4.1 / 6.2: the privatised-data probability (and the prior predictive) at ``s`` lies
  in ``[e^{−εd*} sup_x p(s|x), e^{εd*} inf_x p(s|x)]`` over the allowed datasets ``x``;
  Examples 4.4 (Laplace on a binary sum) and 4.5 (randomized response).
* Pufferfish, Thm 8.5: posterior odds of two competing conjectures are within
  ``e^{±ε}`` of the prior odds.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from privtab.accounting.guarantees import RDP, ZCDP, PureDP, check_parameter
from privtab.semantics._levels import as_probability, shape_out
from privtab.semantics._numeric import FloatArray, scan_then_refine_max
from privtab.semantics.pbdp import rdp_tail_bound, zcdp_tail_bound

__all__ = [
    "POSTERIOR_BOUNDS",
    "PosteriorBound",
    "alice_premium_bound",
    "bob_max_epsilon",
    "counterfactual_odds_bound",
    "data_probability_bounds",
    "laplace_binary_sum_bounds",
    "posterior_interval",
    "posterior_ratio_tail_arbitrary_prior",
    "posterior_ratio_tail_rest_known",
    "probable_posterior_interval",
    "pufferfish_odds_bounds",
    "pure_posterior_ratio_bounds",
    "randomized_response_bounds",
    "randomized_response_flip",
]


# ------------------------------------------------------------------ pure DP, counterfactual


def pure_posterior_ratio_bounds(epsilon: float) -> tuple[float, float]:
    """``(e^{−ε}, e^{ε})``: range of actual/counterfactual posterior ratios (seed Thm 7.3)."""
    e = check_parameter("epsilon", epsilon)
    return math.exp(-e), math.exp(e)


def counterfactual_odds_bound(prior_odds: ArrayLike, epsilon: ArrayLike) -> float | FloatArray:
    """Largest posterior odds given counterfactual odds ``p``: ``p e^{2ε}``.

    Course seed Thm 3.1 and Figure 3.3.1 (Alice): the odds of ``S`` against ``S'`` after
    seeing an ε-DP release are at most ``e^{2ε}`` times what they would have been had the
    person's record been deleted.
    """
    p = np.asarray(prior_odds, dtype=np.float64)
    e = np.asarray(epsilon, dtype=np.float64)
    if np.any(np.isnan(p)) or np.any(p < 0):
        raise ValueError(f"prior_odds must be non-negative, got {prior_odds!r}")
    if np.any(np.isnan(e)) or np.any(e < 0):
        raise ValueError(f"epsilon must be non-negative, got {epsilon!r}")
    return shape_out(p * np.exp(2.0 * e), prior_odds, epsilon)


def alice_premium_bound(
    epsilon: float, baseline_odds: float = 1.1, dollars_per_unit: float = 500.0
) -> float:
    """Alice's worst-case premium ``$500 · (1.1 e^{2ε} − 1)`` (course seed §3.3.1).

    At ε = 0.01 this is $61.11 (the course rounds the odds to 1.12 first and prints $60).
    """
    e = check_parameter("epsilon", epsilon)
    return dollars_per_unit * (baseline_odds * math.exp(2.0 * e) - 1.0)


def bob_max_epsilon(max_probability_ratio: float = 1.25) -> float:
    """Largest ε with ``e^{2ε} ≤`` Bob's tolerated probability ratio (course §3.3.2).

    ``½ ln 1.25 ≈ 0.1116``: the posterior probability of Bob's race rises by at most 25%
    over the world where his record was not collected, whatever the prior.
    """
    r = float(max_probability_ratio)
    if not r >= 1.0 or math.isinf(r):
        raise ValueError(f"max_probability_ratio must be a finite number ≥ 1, got {r!r}")
    return 0.5 * math.log(r)


# ------------------------------------------------------------------ RDP / zCDP, Thm 7.4.x


def posterior_ratio_tail_rest_known(g: RDP | ZCDP, epsilon: ArrayLike) -> float | FloatArray:
    """Bound on ``P[posterior/prior > e^ε]`` when the attacker knows everyone else.

    Semantics seed Thm 7.4.1. zCDP: ``exp(−(ε+ρ)²/(4ρ))`` for ε > ρ, else ``e^{−ε}``.
    RDP: ``inf_λ exp((λ−1)τ(λ) − λε)`` (scan + golden-section over the order).
    """
    e = np.asarray(epsilon, dtype=np.float64)
    if np.any(np.isnan(e)) or np.any(e < 0):
        raise ValueError(f"epsilon must be non-negative, got {epsilon!r}")
    if isinstance(g, ZCDP):
        r = g.rho
        if r == 0.0:
            return shape_out(np.zeros_like(e), epsilon)
        out = np.where(e > r, np.exp(-((e + r) ** 2) / (4.0 * r)), np.exp(-e))
        return shape_out(out, epsilon)
    flat = e.ravel()
    grid = np.linspace(np.log(1e-6), np.log(1e6), 241)

    def neg_log(t: FloatArray) -> FloatArray:
        x = np.exp(t)
        lam = 1.0 + x
        tau = np.asarray(g.curve(lam))
        with np.errstate(invalid="ignore"):
            return np.asarray(-(x * tau - lam * flat[:, None]), dtype=np.float64)

    best, _ = scan_then_refine_max(neg_log, grid, flat.size)
    out = np.minimum(np.exp(np.minimum(-best, -flat)), np.exp(-flat))  # λ→1 gives e^{−ε}
    return shape_out(out.reshape(e.shape), epsilon)


def posterior_ratio_tail_arbitrary_prior(g: RDP | ZCDP, epsilon: ArrayLike) -> float | FloatArray:
    """Bound on ``P[actual/counterfactual posterior of the true record > e^ε]``.

    Semantics seed Thm 7.4.2 (any prior): zCDP ``exp(−(ε−ρ)²/(4ρ))`` for ε > ρ; RDP
    ``inf_λ exp((λ−1)(τ(λ) − ε))``. Numerically the Bun–Steinke tail bound.
    """
    if isinstance(g, ZCDP):
        return zcdp_tail_bound(g.rho, epsilon)
    return rdp_tail_bound(g, epsilon)


# ------------------------------------------------------------------ prior-to-posterior


PosteriorBound = Literal["coherent", "raw", "odds"]
POSTERIOR_BOUNDS: tuple[PosteriorBound, ...] = ("coherent", "raw", "odds")


def _interval_from_factor(
    p: FloatArray, k: FloatArray | float, bound: PosteriorBound, clip: bool
) -> tuple[FloatArray, FloatArray]:
    """Posterior bounds of an event with prior ``p`` when the Bayes factor of the event
    against its complement lies in ``[e^{−k}, e^{k}]``."""
    up_f, down_f = np.exp(k), np.exp(-np.asarray(k))
    if bound == "raw":
        lo, hi = down_f * p, up_f * p
        return lo, (np.minimum(hi, 1.0) if clip else hi)
    if bound == "coherent":
        lo = np.maximum(down_f * p, 1.0 - up_f * (1.0 - p))
        hi = np.minimum(up_f * p, 1.0 - down_f * (1.0 - p))
        return np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
    if bound == "odds":
        with np.errstate(invalid="ignore", divide="ignore"):
            hi = np.where(p > 0, p / (p + (1.0 - p) * down_f), 0.0)
            lo = np.where(p < 1, p / (p + (1.0 - p) * up_f), 1.0)
        return lo, hi
    raise ValueError(f"bound must be one of {', '.join(POSTERIOR_BOUNDS)}, got {bound!r}")


def posterior_interval(
    prior: ArrayLike,
    epsilon: float,
    distance: int = 1,
    *,
    bound: PosteriorBound = "coherent",
    clip: bool = True,
) -> tuple[float | FloatArray, float | FloatArray]:
    """Where the posterior ``π(A | s)`` of an event with prior ``π(A)`` can lie after an
    ε-DP release (inferential-limits seed Thm 6.4, eq. (12)).

    ``distance`` is ``d*``, the largest distance between datasets the analyst's model
    allows (1 for an attacker who knows all other records); ``k = εd*``.

    * ``bound="raw"``: eq. (12) as printed, ``(e^{−k}π, e^{k}π)`` (``clip`` caps the upper
      end at 1);
    * ``bound="coherent"`` (default): eq. (12) applied to ``A`` *and* to its complement —
      ``max(e^{−k}π, 1 − e^{k}(1−π)) ≤ π(A|s) ≤ min(e^{k}π, 1 − e^{−k}(1−π))`` — so the
      bounds on ``A`` and on ``not A`` agree;
    * ``bound="odds"``: the same theorem's argument bounds the Bayes factor of ``A``
      against ``not A`` by ``e^{±k}`` (both likelihoods are averages of ``p(s|x)`` over
      datasets at distance ≤ ``d*``), i.e. the posterior *odds* lie within ``e^{±k}`` of
      the prior odds: ``π e^{−k}/(π e^{−k} + 1 − π) ≤ π(A|s) ≤ π e^{k}/(π e^{k} + 1 − π)``.
      The tightest of the three, and attained (two datasets at distance ``d*``, a
      mechanism with likelihood ratio ``e^{k}`` at ``s``).

    >>> lo, hi = posterior_interval(0.75, 0.8, 1)     # raw: (0.337, 1.0)
    >>> round(lo, 6), round(hi, 6)
    (0.443615, 0.887668)
    """
    e = check_parameter("epsilon", epsilon)
    if int(distance) != distance or distance < 0:
        raise ValueError(f"distance must be a non-negative integer, got {distance!r}")
    p = as_probability("prior", prior)
    lo, hi = _interval_from_factor(p, e * int(distance), bound, clip)
    return shape_out(lo, prior), shape_out(hi, prior)


def probable_posterior_interval(
    prior: ArrayLike,
    g: PureDP | ZCDP | RDP,
    distance: int = 1,
    *,
    confidence: float = 0.95,
    bound: PosteriorBound = "coherent",
) -> tuple[float | FloatArray, float | FloatArray, float]:
    """The zCDP / RDP analogue of :func:`posterior_interval`: ``(lower, upper, t)`` such
    that, whichever of ``A`` and ``not A`` is true, the posterior ``π(A | s)`` lies in
    ``[lower, upper]`` with probability at least ``confidence`` over the data and the
    release — for every data model and prior on datasets within distance ``d*``.

    Where the seed's argument extends, and where it does not. Thm 6.4 rests on a bound on
    the likelihood ratio ``p(s|x)/p(s|x')`` for *every* output ``s``; zCDP and RDP give no
    such bound (the Gaussian mechanism's ratio is unbounded), so **no interval holds for
    every output**: for rare outputs the posterior can be arbitrarily close to 0 or 1.
    What does extend is the argument in probability. Both ``p(s|A)`` and ``p(s|not A)``
    are mixtures of ``p(s|x)`` over datasets at distance ≤ ``d*``, so by the joint
    quasi-convexity of Rényi divergence (van Erven & Harremoës 2014, Thm 13) the Bayes
    factor ``B = p(s|A)/p(s|not A)`` has ``D_α ≤ τ_{d*}(α)`` in both directions, with
    ``τ_{d*}(α) = d*²ρα`` for ρ-zCDP (group privacy, Bun & Steinke 2016 Prop. 1.9) and
    ``τ`` itself for an RDP curve (``d* = 1`` only: Rényi group privacy needs order
    changes). Markov's inequality on ``B^{α−1}`` and ``B^{−α}`` (the semantics seed's Thm
    7.4.2 and 7.4.1 bounds, :func:`posterior_ratio_tail_arbitrary_prior` and
    :func:`posterior_ratio_tail_rest_known`) gives ``P(|ln B| > t) ≤ arbitrary(t) +
    rest_known(t)`` under either hypothesis; ``t`` is the smallest with that sum at most
    ``1 − confidence`` (bisection), and the interval is that of a Bayes factor in
    ``[e^{−t}, e^{t}]`` in the chosen ``bound`` form. For pure ε-DP, ``t = εd*`` with
    probability 1 (:func:`posterior_interval`).
    """
    if int(distance) != distance or distance < 0:
        raise ValueError(f"distance must be a non-negative integer, got {distance!r}")
    d = int(distance)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    p = as_probability("prior", prior)
    if isinstance(g, PureDP):
        t = g.epsilon * d
    else:
        if isinstance(g, ZCDP):
            renyi: ZCDP | RDP = ZCDP(g.rho * d * d)
        elif d <= 1:
            renyi = g
        else:
            raise ValueError(
                "an RDP curve gives a prior-to-posterior bound for distance 1 only (Rényi "
                "group privacy changes the order); use a zCDP guarantee or distance 1"
            )
        t = _renyi_bayes_factor_radius(renyi, 1.0 - confidence) if d > 0 else 0.0
    lo, hi = _interval_from_factor(p, t, bound, True)
    return shape_out(lo, prior), shape_out(hi, prior), t


def _renyi_bayes_factor_radius(g: ZCDP | RDP, beta: float) -> float:
    """Smallest ``t ≥ 0`` (to 1e-12 relative, rounded up) with
    ``arbitrary(t) + rest_known(t) ≤ beta``."""

    def fails(t: float) -> float:
        a = float(np.asarray(posterior_ratio_tail_arbitrary_prior(g, t)))
        r = float(np.asarray(posterior_ratio_tail_rest_known(g, t)))
        return a + r

    lo, hi = 0.0, 1.0
    while fails(hi) > beta:
        lo, hi = hi, 2.0 * hi
        if hi > 1e6:
            return math.inf
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        if fails(mid) > beta:
            lo = mid
        else:
            hi = mid
    return hi


def data_probability_bounds(
    likelihoods: ArrayLike, epsilon: float, distance: int
) -> tuple[FloatArray, FloatArray]:
    """Bounds on the privatised-data probability / prior predictive (Thms 4.1, 6.2).

    ``likelihoods[j, i]`` is the density (or pmf) of output ``s_i`` given dataset ``x_j``,
    one row per dataset the model (or prior) allows; ``distance`` is ``d*``, the largest
    distance between them. Returns ``(l, u)`` with
    ``l(s) = e^{−εd*} max_j p(s|x_j) ≤ p(s) ≤ e^{εd*} min_j p(s|x_j) = u(s)``, valid for
    every data model and prior supported on those datasets.
    """
    e = check_parameter("epsilon", epsilon)
    if int(distance) != distance or distance < 0:
        raise ValueError(f"distance must be a non-negative integer, got {distance!r}")
    lik = np.atleast_2d(np.asarray(likelihoods, dtype=np.float64))
    if np.any(np.isnan(lik)) or np.any(lik < 0):
        raise ValueError("likelihoods must be non-negative numbers")
    k = e * int(distance)
    return np.exp(-k) * lik.max(axis=0), np.exp(k) * lik.min(axis=0)


def laplace_binary_sum_bounds(
    s: ArrayLike, n: int, epsilon: float
) -> tuple[FloatArray, FloatArray]:
    """Example 4.4: Laplace(1/ε) noise on the sum of ``n`` binary records.

    Every dataset has a sum in ``{0, …, n}`` and any two are at Hamming distance ≤ n,
    so ``d* = n`` and the density of the noisy sum at ``s`` lies in
    ``[e^{−εn} max_k f(s−k), e^{εn} min_k f(s−k)]`` with ``f(z) = (ε/2) e^{−ε|z|}``,
    whatever the data model.
    """
    e = check_parameter("epsilon", epsilon)
    if e == 0.0:
        raise ValueError("epsilon must be positive for the Laplace mechanism")
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    pts = np.asarray(s, dtype=np.float64).ravel()
    ks = np.arange(int(n) + 1, dtype=np.float64)[:, None]
    lik = 0.5 * e * np.exp(-e * np.abs(pts[None, :] - ks))
    return data_probability_bounds(lik, e, int(n))


def randomized_response_bounds(n: ArrayLike, epsilon: float) -> tuple[FloatArray, FloatArray]:
    """Example 4.5 eq. (8): ``(1+e^ε)^{−n} ≤ p(s) ≤ (e^ε/(1+e^ε))^n`` for n RR answers."""
    e = check_parameter("epsilon", epsilon)
    nn = np.asarray(n, dtype=np.float64)
    if np.any(nn < 0) or np.any(nn != np.floor(nn)):
        raise ValueError(f"n must be non-negative integers, got {n!r}")
    lo = np.exp(-nn * np.logaddexp(0.0, e))
    hi = np.exp(nn * (e - np.logaddexp(0.0, e)))
    return lo, hi


def randomized_response_flip(epsilon: float) -> float:
    """Flip probability ``1/(1+e^ε)`` that makes randomized response ε-DP (Example 2.3)."""
    e = check_parameter("epsilon", epsilon)
    return 1.0 / (1.0 + math.exp(e))


def pufferfish_odds_bounds(
    prior_odds: ArrayLike, epsilon: float
) -> tuple[float | FloatArray, float | FloatArray]:
    """``(e^{−ε} o, e^{ε} o)``: posterior odds of two conjectures with prior odds ``o``.

    Inferential-limits seed eq. (17) / Thm 8.5: ε-Pufferfish holds iff every attacker's
    prior-to-posterior odds ratio of each discriminative pair lies in ``[e^{−ε}, e^{ε}]``.
    """
    e = check_parameter("epsilon", epsilon)
    o = np.asarray(prior_odds, dtype=np.float64)
    if np.any(np.isnan(o)) or np.any(o < 0):
        raise ValueError(f"prior_odds must be non-negative, got {prior_odds!r}")
    return shape_out(np.exp(-e) * o, prior_odds), shape_out(np.exp(e) * o, prior_odds)
