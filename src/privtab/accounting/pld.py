"""Privacy-loss distributions (PLDs): the exact privacy profile of composed discrete noise.

For a dominating pair ``(P, Q)`` of output distributions the privacy loss is
``L = ln P(X)/Q(X)`` with ``X ~ P``, and the tight (ε, δ) profile is
``δ(ε) = E_P[(1 − e^{ε − L})_+] + P[L = ∞]`` (Balle & Wang 2018; Koskela, Jälkö &
Honkela 2020; Doroshenko et al. 2022). Composition of independent mechanisms adds their
losses, so the composed profile comes from the convolution of the individual PLDs.

Here the mechanisms are the integer-valued ones privtab releases with, each on a counting
query (shift 1 between neighbours):

* discrete Gaussian N_ℤ(σ²): ``L(x) = (1 − 2x)/(2σ²)``, ``x ~ N_ℤ(0, σ²)``;
* two-sided geometric with parameter ε: ``L = ε`` for ``x ≤ 0`` and ``−ε`` for ``x ≥ 1``.

Both are symmetric (``x ↦ 1 − x`` swaps P and Q), so one orientation gives the profile.

Rigour. Each mechanism's loss is computed exactly on its own lattice; the composition is
carried on a common grid of width ``h`` by rounding every loss value *up* (the profile is
increasing in L pointwise, so this can only increase δ: a pessimistic, valid bound —
Meiser & Mohammadi 2018, dp_accounting's "pessimistic" discretisation); probability mass
outside the truncated support goes to ``L = +∞`` (counted fully in δ). A second pass
rounding *down* and dropping that mass gives an optimistic value; the two bracket the
exact profile and their gap is reported. The convolution uses FFTs on an exponentially
tilted copy of the PLD (tilting commutes with convolution), so the tail where δ lives is
computed with high relative accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from privtab.accounting.guarantees import FloatArray, check_parameter


def logsumexp(values: np.ndarray) -> float:
    """``log Σ exp(values)`` computed stably (−inf for an empty or all −inf input)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return -math.inf
    top = float(np.max(v))
    if not math.isfinite(top):
        return top
    return top + math.log(float(np.sum(np.exp(v - top))))


__all__ = [
    "LossFactor",
    "PLDProfile",
    "compose_plds",
    "discrete_gaussian_loss",
    "either_of",
    "geometric_loss",
]


@dataclass(frozen=True)
class LossFactor:
    """A mechanism's exact privacy-loss distribution (under P) with truncated tail mass.

    ``losses`` and ``log_probs`` are the support points and their log-probabilities; the
    mass ``tail`` lies outside (it is treated as ``L = +∞`` in upper bounds). A factor too
    large to list point by point (the discrete Gaussian at σ > 2¹⁴) sets ``on_grid``,
    which returns its gridded form ``(start, log_probs, tail)`` for a grid width and
    direction directly (``losses``/``log_probs`` then hold a coarse pessimistic summary).
    """

    losses: FloatArray
    log_probs: FloatArray
    tail: float
    description: str
    on_grid: Callable[[float, bool], tuple[int, FloatArray, float]] | None = None


def _discrete_gaussian_log_pmf(sigma2: float, xs: np.ndarray) -> FloatArray:
    """log P[N_ℤ(0, σ²) = x] with the normaliser summed to double precision."""
    half = int(math.ceil(40.0 * math.sqrt(sigma2))) + 2
    ys = np.arange(-half, half + 1, dtype=np.float64)
    log_norm = float(logsumexp(-(ys * ys) / (2.0 * sigma2)))
    return np.asarray(-(xs * xs) / (2.0 * sigma2) - log_norm, dtype=np.float64)


def discrete_gaussian_loss(sigma2: float, *, tail: float = 1e-30) -> LossFactor:
    """PLD of the discrete Gaussian N_ℤ(σ²) on a counting query (SafeTab Algorithm 5)."""
    s2 = check_parameter("sigma2", sigma2)
    if s2 == 0:
        raise ValueError("sigma2 must be positive")
    if s2 > _DG_DIRECT_MAX_SIGMA2:
        return _large_discrete_gaussian_loss(s2, tail)
    # keep x with P(x) above ~tail: |x| <= sigma * sqrt(2 ln(1/tail)) + 1
    half = int(math.ceil(math.sqrt(2.0 * s2 * math.log(1.0 / tail)))) + 2
    xs = np.arange(-half, half + 1, dtype=np.float64)
    log_p = _discrete_gaussian_log_pmf(s2, xs)
    # the truncated mass, summed directly (both tails are equal by symmetry)
    beyond = np.arange(half + 1, half + 1 + int(40.0 * math.sqrt(s2)) + 40, dtype=np.float64)
    tail_mass = 2.0 * float(np.exp(logsumexp(_discrete_gaussian_log_pmf(s2, beyond))))
    return LossFactor(
        losses=(1.0 - 2.0 * xs) / (2.0 * s2),
        log_probs=log_p,
        tail=tail_mass,
        description=f"discrete Gaussian sigma2={s2:.6g}",
    )


_DG_DIRECT_MAX_SIGMA2 = float(1 << 28)  # σ ≤ 2¹⁴: list the support point by point


def _interval_mass_bounds(a: FloatArray, b: FloatArray, sigma: float) -> tuple[FloatArray, ...]:
    """Rigorous ``(log lower, log upper)`` bounds on ``P(a ≤ X ≤ b)`` for ``X ~ N_ℤ(σ²)``
    with ``σ > 2¹⁴`` and integer arrays ``a ≤ b``.

    For a unimodal ``f`` peaking at an integer, ``|Σ_{x=a}^{b} f(x) − ∫_a^b f| ≤ max_{[a,b]} f``;
    ``Z = σ√(2π)(1 + η)`` with ``0 ≤ η ≤ 3e^{−2π²σ²}`` (Poisson summation; below any double
    here). The integral is a difference of normal CDFs taken in log space on the side away
    from the centre, so tail masses keep their relative accuracy.
    """
    from scipy.special import log_ndtr

    za, zb = a / sigma, b / sigma
    # log(Φ(zb) − Φ(za)) without cancellation: mirror intervals right of the centre
    right = za >= 0
    lo_z = np.where(right, za, -zb)  # the end nearer the centre, mirrored to ≤ … ≥ 0 form
    hi_z = np.where(right, zb, -za)
    both = (za < 0) & (zb > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        l_near = log_ndtr(-np.abs(lo_z))  # log Φc(|nearer end|)
        l_far = log_ndtr(-np.abs(hi_z))
        side = l_near + np.log1p(-np.exp(l_far - l_near))
        middle = np.log1p(-(np.exp(log_ndtr(za)) + np.exp(log_ndtr(-zb))))
        log_int = np.where(both, middle, side)
        near = np.where(both, 0.0, np.minimum(np.abs(a), np.abs(b)))
        log_peak = -(near * near) / (2.0 * sigma * sigma) - math.log(sigma * math.sqrt(2 * math.pi))
        upper = np.logaddexp(log_int, log_peak) + 1e-12
        lower = log_int + np.log1p(-np.minimum(np.exp(log_peak - log_int), 1.0)) - 1e-12
    return np.where(np.isnan(lower), -np.inf, lower), upper


def _large_discrete_gaussian_loss(s2: float, tail: float) -> LossFactor:
    """The discrete Gaussian's PLD for σ > 2¹⁴, gridded directly: the loss
    ``L(x) = (1 − 2x)/(2σ²)`` is monotone in ``x``, so each grid bucket is an interval of
    ``x`` whose mass is bounded rigorously (:func:`_interval_mass_bounds`; upper bounds in
    the pessimistic direction, lower bounds in the optimistic one). Bounded time at any σ:
    one bucket per grid step of the ~``24/σ`` wide loss range."""
    sigma = math.sqrt(s2)
    half = int(math.ceil(math.sqrt(2.0 * s2 * math.log(1.0 / tail)))) + 2
    # mass beyond ±half: 2·Φc((half − 1)/σ) bounds Σ_{|x|>half} (decreasing f)
    from scipy.special import ndtr

    beyond = min(2.0 * float(ndtr(-(half - 1) / sigma)) * (1 + 1e-12), 1.0)

    def loss_of(x: float) -> float:
        return (1.0 - 2.0 * x) / (2.0 * s2)

    def on_grid(h: float, pessimistic: bool) -> tuple[int, FloatArray, float]:
        lmin, lmax = loss_of(half), loss_of(-half)
        j0 = math.floor(lmin / h) - 1
        j1 = math.ceil(lmax / h) + 1
        j = np.arange(j0, j1 + 1, dtype=np.float64)
        u = (1.0 - 2.0 * h * s2 * j) / 2.0  # L(x) ≤ jh ⇔ x ≥ u_j
        # float error in u: buckets overlap by a point (pessimistic: counted twice) or
        # lose one (optimistic), never the reverse
        tol = 1e-9 * (np.abs(u) + h * s2) + 1e-9
        if pessimistic:  # bucket j: L ∈ ((j−1)h, jh] ⇔ u_j ≤ x < u_{j−1}
            a = np.ceil(u - tol)
            b = np.ceil(u + h * s2 + tol) - 1.0
        else:  # bucket j: L ∈ [jh, (j+1)h) ⇔ u_{j+1} < x ≤ u_j
            a = np.floor(u - h * s2 + tol) + 1.0
            b = np.floor(u - tol)
        a = np.maximum(a, -half)
        b = np.minimum(b, half)
        logp = np.full(j.size, -np.inf)
        ok = a <= b
        lower, upper = _interval_mass_bounds(a[ok], b[ok], sigma)
        logp[ok] = upper if pessimistic else lower
        return j0, logp, (beyond if pessimistic else 0.0)

    # a coarse pessimistic summary for inspection: 2^10 equal x-blocks, block max loss
    edges = np.linspace(-half, half + 1, 1025).round()
    a, b = edges[:-1], edges[1:] - 1.0
    _, upper = _interval_mass_bounds(a, b, sigma)
    return LossFactor(
        losses=(1.0 - 2.0 * a) / (2.0 * s2),
        log_probs=np.asarray(upper, dtype=np.float64),
        tail=beyond,
        description=f"discrete Gaussian sigma2={s2:.6g}",
        on_grid=on_grid,
    )


def geometric_loss(epsilon: float) -> LossFactor:
    """PLD of the two-sided geometric mechanism with parameter ε (SafeTab Algorithm 4).

    ``P[L = ε] = P[X ≤ 0] = 1/(1 + e^{−ε})`` and ``P[L = −ε] = e^{−ε}/(1 + e^{−ε})``.
    """
    e = check_parameter("epsilon", epsilon)
    log_hi = -math.log1p(math.exp(-e))
    log_lo = -e + log_hi
    return LossFactor(
        losses=np.array([-e, e]),
        log_probs=np.array([log_lo, log_hi]),
        tail=0.0,
        description=f"geometric eps={e:.6g}",
    )


def _factor_on_grid(f: LossFactor, h: float, pessimistic: bool) -> tuple[int, FloatArray, float]:
    if f.on_grid is not None:
        return f.on_grid(h, pessimistic)
    idx = np.ceil(f.losses / h - 1e-9) if pessimistic else np.floor(f.losses / h + 1e-9)
    idx = idx.astype(np.int64)
    start = int(idx.min())
    size = int(idx.max()) - start + 1
    logp = np.full(size, -np.inf)
    # several lattice points may land in one bucket: combine with logaddexp
    np.logaddexp.at(logp, idx - start, f.log_probs)
    return start, logp, (f.tail if pessimistic else 0.0)


_NOISE = 1e-13  # FFT round-off relative to the tilted peak (conservative)


@dataclass(frozen=True)
class PLDProfile:
    """The composed PLD of a list of (factor, count) on a grid of width ``grid``.

    ``pessimistic`` profiles (losses rounded up, truncated mass at +∞, FFT noise counted
    against privacy) give valid upper bounds on δ(ε); optimistic ones give lower bounds.
    """

    grid: float
    parts: tuple[tuple[int, FloatArray, int], ...]
    log_survive: float
    pessimistic: bool

    @property
    def infinity_mass(self) -> float:
        return -math.expm1(self.log_survive) if self.pessimistic else 0.0

    @property
    def max_loss(self) -> float:
        """The largest finite loss with positive probability (on the grid)."""
        return self.grid * sum((s + lp.size - 1) * c for s, lp, c in self.parts)

    def _cgf(self, theta: float) -> tuple[float, float, float]:
        """K(θ) = log E[e^{θL}] of the total loss, K'(θ) and K''(θ)."""
        k = dk = d2k = 0.0
        for start, logp, count in self.parts:
            ls = self.grid * (start + np.arange(logp.size))
            t = logp + theta * ls
            lz = logsumexp(t)
            w = np.exp(t - lz)
            m = float(np.dot(w, ls))
            k += count * lz
            dk += count * m
            d2k += count * float(np.dot(w, (ls - m) ** 2))
        return k, dk, d2k

    def _tilt_for(self, epsilon: float) -> float:
        """θ ≥ 0 with K'(θ) = ε (the tilted distribution centred at ε), by Newton's
        method safeguarded by bisection (K' is increasing)."""
        _, dk, d2k = self._cgf(0.0)
        if dk >= epsilon:
            return 0.0
        lo, hi = 0.0, math.inf
        theta = (epsilon - dk) / d2k if d2k > 0 else 1.0
        for _ in range(100):
            _, dk, d2k = self._cgf(theta)
            if dk < epsilon:
                lo = theta
            else:
                hi = theta
            if abs(dk - epsilon) <= 1e-9 * max(abs(epsilon), 1.0) or d2k <= 0:
                break
            nxt = theta - (dk - epsilon) / d2k
            if not lo < nxt < hi:
                nxt = 0.5 * (lo + hi) if math.isfinite(hi) else 2.0 * max(theta, 1.0)
            if nxt > 1e7:
                return lo
            theta = nxt
        return theta

    def _convolve(self, theta: float) -> tuple[FloatArray, FloatArray]:
        """Losses and log-probabilities of the composition, via a θ-tilted FFT."""
        h = self.grid
        total_start = sum(s * c for s, _, c in self.parts)
        total_len = sum((lp.size - 1) * c for _, lp, c in self.parts) + 1
        n = 1 << max(int(math.ceil(math.log2(total_len))), 1)
        acc = np.ones(n // 2 + 1, dtype=np.complex128)
        log_scale = 0.0
        for start, logp, count in self.parts:
            tilted = logp + theta * h * np.arange(logp.size)
            top = float(np.max(tilted))
            acc = acc * np.fft.rfft(np.exp(tilted - top), n) ** count
            log_scale += count * (top + theta * h * start)
        out = np.fft.irfft(acc, n)[:total_len]
        floor = _NOISE * float(np.max(out))
        # below the round-off floor the FFT value is noise: bound it by the floor
        # (pessimistic) or drop it (optimistic)
        out = np.where(out > floor, out, 2.0 * floor if self.pessimistic else 0.0)
        losses = np.asarray(h * (total_start + np.arange(total_len)), dtype=np.float64)
        with np.errstate(divide="ignore"):
            log_out = np.log(out)
        log_probs = log_out + log_scale - theta * losses + self.log_survive
        return losses, np.asarray(log_probs, dtype=np.float64)

    def power(self, alpha: ArrayLike) -> FloatArray:
        """Maximum power of any level-α test between the neighbouring output distributions.

        The Neyman–Pearson tests reject when the loss exceeds a threshold (randomising at
        it), so the points (Q[L > t], P[L > t]) joined linearly are the exact power curve of
        the composed pair (Dong, Roth & Su 2019, Prop. 2.2) — for the pessimistic PLD an
        upper bound on the true power. Computed from one untilted convolution: accurate for
        levels well above the 1e-13 round-off floor (the usual 0.001–0.1).
        """
        a = np.asarray(alpha, dtype=np.float64)
        if np.any(np.isnan(a)) or np.any(a < 0) or np.any(a > 1):
            raise ValueError(f"alpha must lie in [0, 1], got {alpha!r}")
        losses, lp = self._convolve(0.0)
        p = np.exp(lp)[::-1]
        q = np.exp(lp - losses)[::-1]
        type1 = np.concatenate([[0.0], np.cumsum(q)])
        power = np.concatenate([[0.0], np.cumsum(p)]) + self.infinity_mass
        power = np.minimum(power, 1.0)
        out = np.interp(a, type1, power, right=1.0)
        return np.asarray(np.maximum(out, a), dtype=np.float64)

    @staticmethod
    def _delta_from(losses: FloatArray, log_probs: FloatArray, eps: float, inf: float) -> float:
        above = losses > eps
        if not np.any(above):
            return min(inf, 1.0)
        w = -np.expm1(eps - losses[above])
        lse = logsumexp(log_probs[above] + np.log(w))
        return min(math.exp(min(lse, 0.0)) + inf, 1.0)

    def delta(self, epsilon: float) -> float:
        """δ(ε) = E[(1 − e^{ε − L})_+] + P[L = ∞] of the composition."""
        if epsilon >= self.max_loss:
            return min(self.infinity_mass, 1.0)
        losses, lp = self._convolve(self._tilt_for(float(epsilon)))
        return self._delta_from(losses, lp, float(epsilon), self.infinity_mass)

    def epsilon(self, delta: float) -> float:
        """The smallest ε ≥ 0 with δ(ε) ≤ ``delta``.

        Brent's method on ``log δ(ε)``, each δ(ε) computed with its own tilt (one FFT per
        evaluation), so every evaluation has full relative accuracy.
        """
        from scipy.optimize import brentq  # lazy: scipy.optimize is slow to import

        d = check_parameter("delta", delta, upper=1.0)
        inf = self.infinity_mass
        if inf > d or (inf == d and inf > 0):
            return math.inf
        if d == 0.0:
            return max(self.max_loss, 0.0)
        top = self.max_loss
        if self.delta(top) > d:
            return math.inf

        def f(e: float) -> float:
            return math.log(max(self.delta(e), 1e-320)) - math.log(d)

        # Fast estimate: solve on a profile tilted at a guess, re-centre once; then
        # bracket the estimate with accurate evaluations and finish with Brent.
        _, mean, var = self._cgf(0.0)
        guess = min(mean + math.sqrt(2.0 * var * math.log(1.0 / d)), top)
        for _ in range(2):
            losses, lp = self._convolve(self._tilt_for(max(guess, 0.0)))

            def local(e: float, losses: FloatArray = losses, lp: FloatArray = lp) -> float:
                return math.log(max(self._delta_from(losses, lp, e, inf), 1e-320)) - math.log(d)

            if local(0.0) <= 0 or local(top) > 0:
                break
            guess = float(brentq(local, 0.0, top, xtol=1e-9))
        step = max(abs(guess) * 2e-4, 2 * self.grid)
        lo, hi = max(guess - step, 0.0), min(guess + step, top)
        while lo > 0.0 and f(lo) <= 0:
            lo, step = max(lo - step, 0.0), step * 4
        while hi < top and f(hi) > 0:
            hi, step = min(hi + step, top), step * 4
        if lo == 0.0 and f(0.0) <= 0:
            return 0.0
        return float(brentq(f, lo, hi, xtol=1e-7, rtol=1e-7))


def compose_plds(
    factors: Sequence[tuple[LossFactor, int]],
    *,
    grid: float = 1e-3,
    pessimistic: bool = True,
) -> PLDProfile:
    """Compose ``count`` copies of each factor: the PLD of the worst-case record.

    ``grid`` is the discretisation width ``h``; ``pessimistic=True`` rounds losses up and
    sends truncated mass to +∞ (a valid upper bound on δ(ε)); ``False`` rounds down and
    drops it (a lower bound). The two bracket the exact profile.
    """
    if not factors:
        raise ValueError("compose_plds needs at least one factor")
    h = check_parameter("grid", grid)
    if h == 0:
        raise ValueError("grid must be positive")
    parts = []
    log_survive = 0.0  # log P[no factor falls in its truncated tail]
    for f, count in factors:
        if isinstance(count, bool) or int(count) != count or count < 1:
            raise ValueError(f"count must be a positive integer, got {count!r}")
        start, logp, tail = _factor_on_grid(f, h, pessimistic)
        parts.append((start, logp, int(count)))
        log_survive += int(count) * math.log1p(-min(tail, 1.0 - 1e-16))
    return PLDProfile(h, tuple(parts), log_survive if pessimistic else 0.0, pessimistic)


def _option_pmf(
    option: Sequence[tuple[LossFactor, int]], h: float
) -> tuple[int, FloatArray, float]:
    """Direct (non-FFT) pessimistic composition of a small option on the grid."""
    start, probs, survive = 0, np.ones(1), 1.0
    for f, count in option:
        fs, logp, tail = _factor_on_grid(f, h, pessimistic=True)
        p = np.exp(logp)
        for _ in range(int(count)):
            probs = np.convolve(probs, p)
            start += fs
            survive *= 1.0 - tail
    return start, probs * survive, 1.0 - survive


def either_of(
    options: Sequence[Sequence[tuple[LossFactor, int]]], *, grid: float = 1e-3
) -> LossFactor:
    """A PLD dominating every one of several alternative mechanisms.

    Used when a record's contribution to one query is *one of* several compositions —
    in SafeTab a population group is either tabulated in two stages (γρ then (1−γ)ρ) or
    as a single total (ρ) — and neither dominates the other. The pointwise maximum of the
    options' privacy profiles is the profile of the convex hull of the minimum of their
    trade-off functions, a valid guarantee for each. It is evaluated on the grid and
    turned back into a PLD by the "connect-the-dots" construction (Doroshenko, Ghazi,
    Kamath, Kumar & Manurangsi 2022): atoms on the grid whose profile interpolates the
    maximum linearly in e^ε — above the convex true profile between grid points, so the
    result is a valid upper bound. Masses that round-off would make negative are dropped
    and any resulting shortfall is added to the mass at +∞ (again an upper bound).
    """
    h = check_parameter("grid", grid)
    if not options:
        raise ValueError("either_of needs at least one option")
    pmfs = [_option_pmf(opt, h) for opt in options]
    lo = min(s for s, _, _ in pmfs) - 1
    hi = max(s + p.size for s, p, _ in pmfs) + 1
    ks = np.arange(lo, hi + 1)
    eps = h * ks
    deltas = []
    for start, probs, inf in pmfs:
        full = np.zeros(ks.size)
        full[start - lo : start - lo + probs.size] = probs
        losses = eps
        # delta(eps_k) = sum_{l_j > eps_k} p_j - e^{eps_k} sum_{l_j > eps_k} p_j e^{-l_j} + inf
        tail_p = np.concatenate([np.cumsum(full[::-1])[::-1][1:], [0.0]])
        tail_q = np.concatenate([np.cumsum((full * np.exp(-losses))[::-1])[::-1][1:], [0.0]])
        deltas.append(np.maximum(tail_p - np.exp(eps) * tail_q, 0.0) + inf)
    d = np.max(np.stack(deltas), axis=0)
    u = np.exp(eps)
    slopes = np.diff(d) / np.diff(u)
    c = (1.0 - d[0]) / u[0]  # slope -c below the grid: total mass exactly one
    jumps = np.diff(np.concatenate([[-c], slopes, [0.0]]))
    masses = np.clip(jumps, 0.0, None) * u
    p_inf = float(d[-1])
    # profile of the constructed PLD at the grid points; raise +inf mass if below target
    tail_p = np.concatenate([np.cumsum(masses[::-1])[::-1][1:], [0.0]])
    tail_q = np.concatenate([np.cumsum((masses / u)[::-1])[::-1][1:], [0.0]])
    built = tail_p - u * tail_q + p_inf
    p_inf += float(max(np.max(d - built), 0.0))
    keep = masses > 0
    with np.errstate(divide="ignore"):
        log_m = np.log(masses[keep])
    names = " | ".join(" + ".join(f"{c}x[{f.description}]" for f, c in opt) for opt in options)
    return LossFactor(eps[keep], log_m, p_inf, f"either of: {names}")
