"""Privacy-loss distributions (PLDs): certified privacy profiles of composed discrete noise.

For a dominating pair ``(P, Q)`` of output distributions the privacy loss is
``L = ln P(X)/Q(X)`` with ``X ~ P``, and the tight (ε, δ) profile is
``δ(ε) = E_P[(1 − e^{ε − L})_+] + P[L = ∞]`` (Balle & Wang 2018; Koskela, Jälkö &
Honkela 2020; Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022). Composition of
independent mechanisms adds their losses, so the composed profile comes from the
convolution of the individual PLDs.

Here the mechanisms are the integer-valued ones privtab releases with, each on a counting
query (shift 1 between neighbours):

* discrete Gaussian N_ℤ(σ²): ``L(x) = (1 − 2x)/(2σ²)``, ``x ~ N_ℤ(0, σ²)``;
* two-sided geometric with parameter ε: ``L = ε`` for ``x ≤ 0`` and ``−ε`` for ``x ≥ 1``.

Both are symmetric (``x ↦ 1 − x`` swaps P and Q), so one orientation gives the profile.

**Upper bounds** (``pessimistic=True``, the default). Each mechanism's loss is exact on its
own lattice; the mass of the far tails (below ``tail``, 10⁻⁵⁰ by default) is sent to
``L = +∞`` and counted in full. On the common grid of width ``h`` every atom is split
between its two neighbouring grid points by the *connect-the-dots* rule (Doroshenko et al.
2022, §4): an atom of mass p at ``l = (k + f)h`` puts ``p(1 − e^{−fh})/(1 − e^{−h})`` at
``(k + 1)h`` and the rest at ``kh``. The split keeps ``E_P[e^{−L}]``, makes the profile
exact at the grid points and linear in ``e^ε`` between them — a chord of the convex true
profile, so above it: each factor is dominated, and so is their composition (composition
is monotone in each factor's profile). Unlike rounding every loss up, which shifts each
mechanism's loss by up to ``h`` so that the error grows with their number, the split is
unbiased to first order: its error is second order in ``h``. Every factor's masses are
also inflated by a relative 10⁻¹² to cover floating-point error in computing them.

**Lower bounds** (``pessimistic=False``): losses rounded *down*, tail mass dropped, masses
deflated by 10⁻¹²; every numerical error is taken in the optimistic direction. The two
bracket the exact profile.

**Composition and ε(δ).** Identical mechanisms are grouped (a count becomes a power of a
Fourier transform). To evaluate δ near a target ε₀ the PLD is exponentially tilted,
``P_θ(l) ∝ P(l) e^{θl}`` with ``K'(θ) = ε₀`` (K the cumulant generating function of the
total loss): tilting commutes with convolution and centres the total at ε₀ with standard
deviation ``√K''(θ)``, so δ ≈ 10⁻¹⁰ keeps full relative accuracy and only a window of
±9 standard deviations around ε₀ has to be convolved (2¹⁶ points for the 2020
production plan at ``h = 10⁻³``, against 2²⁰ for the whole support). The convolution is
circular on that window: mass wrapped around from outside it only *adds* to the window
(pessimistic), the mass above the window is bounded by Chernoff's inequality
``P[L ≥ t] ≤ e^{K(s) − st}`` and added in full, and a bound on the FFT round-off
(:func:`_fft_error`) is added to every entry. δ at every grid point of the window then
comes from two backward recurrences in O(N), and ε(δ) is solved exactly between grid
points (δ from the difference of the two suffix sums, taken directly, and ``log1p``/``expm1``:
ε keeps its relative accuracy at any scale — at ε ≈ 10⁻⁹ on a grid of 10⁻¹² the two sums
agree to 12 digits). The first tilt comes from the saddle-point approximation of δ; if the numerical
part (round-off bound, tail bound) is above 10⁻⁶ of δ at the solution the solve is
repeated at the tilt of that solution. Every returned ε is a valid upper bound whether
or not that test passed; the test only guards tightness.

**Error statement.** ``epsilon(δ)`` of the upper PLD is ≥ the exact ε(δ) of the composed
mechanisms. Its excess comes from the connect-the-dots chords (second order in ``h``
where atoms are dense, up to about ``h`` next to an isolated atom; for the 2020
production plan at δ = 10⁻¹⁰ the bound at ``h = 10⁻³`` is within 5 × 10⁻⁵ of the one at
``h = 3 × 10⁻⁴``, see ``docs/accounting.md``), the tail mass (≤ 10⁻⁵⁰ per mechanism, in
δ) and the numerical part (≤ 10⁻⁶ of δ). :func:`worst_of` gives the largest profile of
several compositions (configurations), sharing their Fourier transforms.
Loss values within 10⁻⁹ grid widths of a grid point are taken to lie on it; the total of
those shifts is added to every ε returned.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import TypeVar

import numpy as np
from numpy.typing import ArrayLike

from privtab.accounting._gaussian_buckets import MIN_SIGMA, tail_bound
from privtab.accounting.guarantees import FloatArray, check_parameter
from privtab.report import round_up_sig

_T = TypeVar("_T")


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """``Σ a_i b_i`` without BLAS (whose threads stall on a shared machine: 100× slower)."""
    return float(np.einsum("i,i->", a, b))


def _exp(x: float) -> float:
    """``e^x`` for ``x ≤ 700``, ``e^700`` above (no overflow; every caller compares the
    result with a probability, so the cap never changes a decision)."""
    return math.exp(min(x, 700.0))


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
    "AtomLoss",
    "DiscreteGaussianLoss",
    "GridTooFineError",
    "LossFactor",
    "PLDProfile",
    "compose_plds",
    "discrete_gaussian_loss",
    "either_of",
    "feasible_grid",
    "geometric_loss",
    "solve_on_a_fitting_grid",
    "worst_of",
]

_U = float(np.finfo(np.float64).eps)
_SLACK = 1e-12  # relative inflation (upper) / deflation (lower) of every factor's masses
_SNAP = 1e-9  # losses this close to a grid point (in grid widths) are taken to lie on it
_ACCURATE = 1e-6  # a solve is accepted when its numerical part is below this share of δ
_SPAN = 9.0  # half-width of the convolution window, in tilted standard deviations
_MIN_FFT = 64
_OUTSIDE = 1e-14  # the window is widened until the tilted mass outside it is below this
_MAX_TILT = 50.0  # |θ| · grid at most this: weights e^{−θh} stay above e^{−50}
_MAX_WINDOW = 1 << 20  # grid points of one convolution window (at most)
_MAX_CELLS = 1 << 22  # window points × configurations (bounds the time and memory of a solve)
_MAX_INDEX = 2.0**52  # |loss| / grid: grid indices stay exact integers in float64


class GridTooFineError(ValueError):
    """A grid too fine for a computation's time and memory bounds; ``grid`` is a grid
    that fits (the computation needs at least that width)."""

    def __init__(self, message: str, grid: float) -> None:
        super().__init__(message)
        self.grid = grid


@dataclass(frozen=True)
class _Grid:
    """One factor on a grid: sorted distinct grid indices ``idx``, the log of their
    masses, and the mass ``inf`` at ``L = +∞``."""

    idx: np.ndarray
    log_mass: FloatArray
    inf: float


class LossFactor(ABC):
    """A mechanism's privacy-loss distribution ``L = ln P(X)/Q(X)`` under ``X ~ P``.

    Every factor puts itself on a loss grid (:meth:`on_grid`): pessimistically (its
    profile at and between the grid points is at least the exact one — connect-the-dots;
    mass it leaves out is put at ``L = +∞``) or optimistically (losses rounded down,
    left-out mass dropped). ``tail`` is the mass at ``L = +∞`` of the pessimistic form.
    """

    description: str

    @property
    @abstractmethod
    def tail(self) -> float:
        """Mass left out of the listed support (sent to ``L = +∞`` by upper bounds)."""

    @property
    @abstractmethod
    def key(self) -> Hashable:
        """Equal keys, equal distributions (identical factors are composed together)."""

    @abstractmethod
    def on_grid(self, h: float, pessimistic: bool) -> _Grid:
        """The factor on the grid of width ``h`` (see the class documentation)."""

    @property
    @abstractmethod
    def variance(self) -> float:
        """``Var_P(L)`` of the finite part: the scale of the loss (for choosing grids)."""

    @property
    @abstractmethod
    def variance_bound(self) -> float:
        """A bound on the variance of the loss under every tilt ``P_θ ∝ P e^{θL}`` (it
        bounds the convolution windows; see :func:`feasible_grid`)."""


@dataclass(frozen=True, eq=False)
class AtomLoss(LossFactor):
    """A privacy-loss distribution listed atom by atom: ``losses`` and their
    log-probabilities ``log_probs``; the mass ``tail`` lies outside."""

    losses: FloatArray
    log_probs: FloatArray
    tail: float = 0.0
    description: str = ""

    @cached_property
    def key(self) -> Hashable:  # type: ignore[override]
        return (self.losses.tobytes(), self.log_probs.tobytes(), float(self.tail))

    @cached_property
    def variance(self) -> float:  # type: ignore[override]
        w = np.exp(self.log_probs - float(np.max(self.log_probs)))
        w = w / float(np.sum(w))
        mean = _dot(w, self.losses)
        return _dot(w, (self.losses - mean) ** 2)

    @property
    def variance_bound(self) -> float:
        """Popoviciu: ``(max − min)²/4`` over the atoms."""
        return float((np.max(self.losses) - np.min(self.losses)) ** 2 / 4.0)

    def on_grid(self, h: float, pessimistic: bool) -> _Grid:
        """Connect-the-dots (pessimistic): an atom of mass p at ``(k + f)h`` puts
        ``p(1 − e^{−fh})/(1 − e^{−h})`` at ``(k + 1)h`` and the rest at ``kh``; or every
        loss rounded down (optimistic)."""
        if self.losses.size == 0:
            raise ValueError(f"{self.description}: a loss factor needs at least one atom")
        top = float(np.max(self.log_probs))
        p = np.exp(self.log_probs - top)
        lost = p == 0  # below e^{−745} of the largest atom: to +∞ (upper) or dropped
        inf = self.tail + float(np.sum(np.exp(self.log_probs[lost]))) if pessimistic else 0.0
        k, frac = _snap(self.losses[~lost], h)
        p = p[~lost]
        if pessimistic:
            # connect-the-dots: p(1 − e^{−fh})/(1 − e^{−h}) to k+1, the rest to k
            denom = -math.expm1(-h)
            up = p * -np.expm1(-frac * h) / denom
            down = p * np.exp(-frac * h) * -np.expm1(-(1.0 - frac) * h) / denom
            idx, mass = np.concatenate([k, k + 1]), np.concatenate([down, up])
            scale, inf = top + math.log1p(_SLACK), inf * (1.0 + _SLACK)
        else:
            idx, mass, scale = k, p, top + math.log1p(-_SLACK)
        start = int(idx.min())
        if int(idx.max()) - start < 4 * idx.size:  # dense enough: count in place
            mass = np.bincount(idx - start, mass)
            idx = np.flatnonzero(mass) + start
            mass = mass[idx - start]
        else:
            idx, inv = np.unique(idx, return_inverse=True)
            mass = np.bincount(inv, mass, idx.size)
            idx, mass = idx[mass > 0], mass[mass > 0]
        return _Grid(idx.astype(np.int64), np.log(mass) + scale, min(inf, 1.0))


def _snap(losses: FloatArray, h: float) -> tuple[np.ndarray, FloatArray]:
    """Grid index ``k`` below each loss and the fraction ``f ∈ [0, 1)`` above it."""
    x = np.asarray(losses, dtype=np.float64) / h
    far = float(np.max(np.abs(x))) if x.size else 0.0
    if far >= _MAX_INDEX:
        wide = far * h / 2.0**40
        raise GridTooFineError(
            f"grid {h:.3g} is too fine for losses up to {far * h:.3g} (grid indices beyond "
            f"2^52); use a grid of at least {wide:.3g}",
            wide,
        )
    k = np.floor(x)
    f = x - k
    up = f > 1.0 - _SNAP
    k[up] += 1.0
    f[up] = 0.0
    f[f < _SNAP] = 0.0
    return k.astype(np.int64), f


def _discrete_gaussian_log_pmf(sigma2: float, xs: np.ndarray) -> FloatArray:
    """log P[N_ℤ(0, σ²) = x] with the normaliser summed to double precision."""
    half = int(math.ceil(40.0 * math.sqrt(sigma2))) + 2
    ys = np.arange(-half, half + 1, dtype=np.float64)
    log_norm = float(logsumexp(-(ys * ys) / (2.0 * sigma2)))
    return np.asarray(-(xs * xs) / (2.0 * sigma2) - log_norm, dtype=np.float64)


@lru_cache(maxsize=256)
def _discrete_gaussian_atoms(s2: float, half: int) -> AtomLoss:
    """The atoms ``|x| ≤ half`` of N_ℤ(σ²) (σ ≤ 2¹⁴: at most ~10⁶ of them)."""
    xs = np.arange(-half, half + 1, dtype=np.float64)
    log_p = _discrete_gaussian_log_pmf(s2, xs)
    # the truncated mass, summed directly (both tails are equal by symmetry)
    beyond = np.arange(half + 1, half + 1 + int(40.0 * math.sqrt(s2)) + 40, dtype=np.float64)
    tail_mass = 2.0 * float(np.exp(logsumexp(_discrete_gaussian_log_pmf(s2, beyond))))
    return AtomLoss(
        losses=(1.0 - 2.0 * xs) / (2.0 * s2),
        log_probs=log_p,
        tail=tail_mass,
        description=f"discrete Gaussian sigma2={s2:.6g}",
    )


@dataclass(frozen=True, eq=False)
class DiscreteGaussianLoss(LossFactor):
    """The PLD of the discrete Gaussian N_ℤ(σ²) on a counting query (SafeTab Algorithm 5):
    ``L(x) = (1 − 2x)/(2σ²)`` for ``x ~ N_ℤ(0, σ²)``, the atoms with ``|x| ≤ half`` kept
    (``half ≈ σ√(2 ln(1/tail))``; the rest is the mass at +∞ of upper bounds).

    For σ ≤ 2¹⁴ the atoms are listed (:class:`AtomLoss`, at most ~5·10⁵); above, the
    factor is gridded cell by cell with certified enclosures of each cell's two
    connect-the-dots masses (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022, §4;
    :mod:`privtab.accounting._gaussian_buckets`), cells at least ``1/(64σ)`` wide in loss
    (the factor's effective grid is ``max(h, 1/(64σ))``, a multiple of ``h``), in at most
    ``128√(2 ln(1/tail)) + 2`` cells (~2,000 at the default tail) whatever σ (up to
    10³⁰⁰) and ``h``. Either way the pessimistic grid PLD
    dominates the exact one (a valid upper bound on δ(ε), hence on ε(δ)) and the
    optimistic one is dominated by it.
    """

    sigma2: float
    half: int
    description: str

    @property
    def _listed(self) -> bool:
        return math.sqrt(self.sigma2) <= MIN_SIGMA

    @cached_property
    def _atoms(self) -> AtomLoss:
        return _discrete_gaussian_atoms(self.sigma2, self.half)

    @property
    def tail(self) -> float:
        if self._listed:
            return self._atoms.tail
        return tail_bound(self.sigma2, self.half)

    @property
    def key(self) -> Hashable:
        return ("discrete Gaussian", self.sigma2, self.half)

    @property
    def variance(self) -> float:
        """``Var(X)/σ⁴`` (``1/σ²`` up to ``e^{−2π²σ²}`` for large σ)."""
        return self._atoms.variance if self._listed else 1.0 / self.sigma2

    @property
    def variance_bound(self) -> float:
        """``(σ² + ¼)/σ⁴ = 2ρ + ρ²`` — under a tilt X is N_ℤ centred at ``−θ``, whose
        variance is at most σ² + ¼ (the two-point law at σ → 0, centre ½; checked
        numerically over σ ∈ [0.01, 20] and every centre) — or Popoviciu's bound on the
        kept atoms ``|x| ≤ half`` if smaller (0 when only x = 0 is kept)."""
        return min((self.sigma2 + 0.25) / self.sigma2**2, (self.half / self.sigma2) ** 2)

    def on_grid(self, h: float, pessimistic: bool) -> _Grid:
        if self._listed:
            return self._atoms.on_grid(h, pessimistic)
        return _gaussian_grid(self.sigma2, self.half, h, pessimistic)


@lru_cache(maxsize=64)
def _gaussian_grid(s2: float, half: int, h: float, pessimistic: bool) -> _Grid:
    from privtab.accounting._gaussian_buckets import gaussian_buckets

    idx, log_mass, inf = gaussian_buckets(s2, half, h, pessimistic)
    if pessimistic:
        log_mass, inf = log_mass + math.log1p(_SLACK), inf * (1.0 + _SLACK)
    else:
        log_mass = log_mass + math.log1p(-_SLACK)
    return _Grid(idx, log_mass, min(inf, 1.0))


def discrete_gaussian_loss(sigma2: float, *, tail: float = 1e-50) -> DiscreteGaussianLoss:
    """PLD of the discrete Gaussian N_ℤ(σ²) on a counting query (SafeTab Algorithm 5).

    Atoms with probability below about ``tail`` are left out; their mass is the factor's
    ``tail`` (computed for σ ≤ 2¹⁴, a normal-tail bound above). Bounded time and memory
    for every σ (see :class:`DiscreteGaussianLoss`).
    """
    s2 = check_parameter("sigma2", sigma2)
    if s2 == 0:
        raise ValueError("sigma2 must be positive")
    t = check_parameter("tail", tail, upper=1e-3)
    if t == 0:
        raise ValueError("tail must be positive")
    # keep x with e^{−x²/(2σ²)} ≥ tail: |x| ≤ σ√(2 ln(1/tail)) (only x = 0 for tiny σ —
    # atoms far below the tail would drag the tilted windows far above the mass)
    half = int(math.floor(math.sqrt(2.0 * s2 * math.log(1.0 / t))))
    return DiscreteGaussianLoss(s2, half, f"discrete Gaussian sigma2={s2:.6g}")


def geometric_loss(epsilon: float) -> AtomLoss:
    """PLD of the two-sided geometric mechanism with parameter ε (SafeTab Algorithm 4).

    ``P[L = ε] = P[X ≤ 0] = 1/(1 + e^{−ε})`` and ``P[L = −ε] = e^{−ε}/(1 + e^{−ε})``.
    """
    e = check_parameter("epsilon", epsilon)
    log_hi = -math.log1p(math.exp(-e))
    log_lo = -e + log_hi
    return AtomLoss(
        losses=np.array([-e, e]),
        log_probs=np.array([log_lo, log_hi]),
        tail=0.0,
        description=f"geometric eps={round_up_sig(e)}",
    )


def feasible_grid(sd_bound: float, configurations: int = 1) -> float:
    """The finest grid at which every convolution window of :class:`PLDProfile` fits its
    bound (2²⁰ points, and 2²² points × configurations), for compositions whose total
    loss has standard deviation at most ``sd_bound`` under every tilt (the sum of the
    factors' :attr:`LossFactor.variance_bound` times their counts bounds its square).
    Finer grids raise :class:`GridTooFineError` when a window would not fit."""
    limit = _window_limit(configurations)
    return (2.0 * _SPAN * sd_bound) / (limit / 2.0 - 8.0)


def _window_limit(configurations: int) -> int:
    """Largest window (a power of two) for ``configurations`` configurations."""
    cap = max(min(_MAX_WINDOW, _MAX_CELLS // max(configurations, 1)), _MIN_FFT)
    return 1 << (cap.bit_length() - 1)


# ------------------------------------------------------------------ one factor on the grid


@dataclass(frozen=True)
class _Part:
    """One factor on the grid: ``size`` grid points from ``start``, of
    which those at offsets ``at`` (losses ``losses``) carry the log-masses ``log_mass``."""

    start: int
    size: int
    at: np.ndarray
    losses: FloatArray
    log_mass: FloatArray
    inf: float

    @classmethod
    def of(cls, g: _Grid, h: float) -> _Part:
        start = int(g.idx[0])
        return cls(
            start,
            int(g.idx[-1]) - start + 1,
            g.idx - start,
            h * g.idx.astype(np.float64),
            g.log_mass,
            g.inf,
        )

    def tilted(self, theta: float, n: int) -> FloatArray:
        """The θ-tilted masses, normalised to sum 1, on ``n`` points from ``start``
        (folded modulo ``n`` where the support is longer: circular convolution wraps)."""
        t = self.log_mass + theta * self.losses
        w = np.exp(t - logsumexp(t))
        return np.asarray(np.bincount(self.at % n, w, n), dtype=np.float64)


@lru_cache(maxsize=16)
def _suffix_scales(r: float, n: int) -> tuple[int, FloatArray, FloatArray, FloatArray]:
    """Block length and the scale arrays ``r^{−m}``, ``r^m``, ``r^{m+1}`` of :func:`_suffix`."""
    lr = math.log(r)
    block = n if lr == 0.0 else max(1, min(n, int(600.0 / -lr)))
    up = np.exp(-lr * np.arange(block, dtype=np.float64))
    down = 1.0 / up
    return block, up, down, down * r


def _suffix(x: FloatArray, r: float) -> FloatArray:
    """``S_k = Σ_{q ≥ k} x_q r^{q−k}`` for ``x ≥ 0``, ``0 < r ≤ 1`` (positive sums only,
    so every entry keeps full relative accuracy), computed blockwise without overflow."""
    n = x.size
    if r == 0.0:  # e^{−(θ+1)h} below the smallest double: only the term q = k is left
        return np.array(x, dtype=np.float64)
    block, up, down, carry_w = _suffix_scales(r, n)
    if n > 64 * block:  # r far below 1: many short blocks — a doubling scan instead
        return _suffix_doubling(x, math.log(r))
    rev = x[::-1]
    out = np.empty(n, dtype=np.float64)
    carry = 0.0
    for s in range(0, n, block):
        seg = rev[s : s + block]
        k = seg.size
        part = np.cumsum(seg * up[:k]) * down[:k]
        if carry:
            part += carry * carry_w[:k]
        out[s : s + k] = part
        carry = float(part[-1])
    return out[::-1]


def _suffix_doubling(x: FloatArray, lr: float) -> FloatArray:
    """:func:`_suffix` by ⌈log₂ n⌉ vectorised passes ``S_k += r^{2^j} S_{k+2^j}`` (positive
    terms; each weight ``r^{2^j} = e^{2^j ln r}`` rounded once), stopping once the weight
    underflows — the terms left are then below the last bit of every entry."""
    s = np.array(x, dtype=np.float64)
    step = 1
    while step < s.size:
        w = math.exp(lr * step)
        if w == 0.0:
            break
        s[:-step] += w * s[step:]
        step *= 2
    return s


def _excess(o: FloatArray, r1: float, h: float) -> FloatArray:
    """``c_k = Σ_{q>k} o_q (r1^{q−k} − r2^{q−k})`` with ``r2 = r1 e^{−h}`` for ``o ≥ 0`` and
    ``h ≥ 0``, from the recurrence of positive terms ``c_k = r1 c_{k+1} + (r1 − r2)(o_{k+1}
    + v_{k+1})`` with ``v_k = Σ_{q>k} o_q r2^{q−k}`` — accurate even where the two sums
    nearly cancel; ``r1 − r2 = r1(1 − e^{−h})`` is taken from ``expm1`` (a subtraction of
    the two would lose all but ~16 − |log₁₀ h| digits on fine grids)."""
    r2 = r1 * math.exp(-h)
    big_v = _suffix(o, r2)  # o_k + v_k
    c_in = np.empty(o.size, dtype=np.float64)
    c_in[:-1] = (r1 * -math.expm1(-h)) * big_v[1:]
    c_in[-1] = 0.0
    return _suffix(c_in, r1)


def _power(x: np.ndarray, k: int) -> np.ndarray:
    """``x**k`` by repeated squaring (at most 2 log₂ k products; numpy's complex power
    takes the slow exp-log route for k ≥ 100)."""
    out: np.ndarray | None = None
    while k:
        if k & 1:
            out = x if out is None else out * x
        k >>= 1
        if k:
            x = x * x
    assert out is not None
    return out


def _fft_error(n: int, multiplications: int) -> float:
    """A bound on the absolute error of one entry of a circular convolution of
    probability vectors (each summing to at most 1) by FFT of length ``n``, with
    ``multiplications`` products of transforms: each transform entry is off by at most
    ~log₂(n)·u relative to the vector's ℓ¹ norm (Higham, *Accuracy and Stability of
    Numerical Algorithms*, §24.1), each product adds u, and the inverse transform another
    log₂(n)·u; a factor 8 covers the constants."""
    return 8.0 * _U * (math.log2(max(n, 2)) + 1.0) * (multiplications + 2)


def _uv_at(o: FloatArray, i: int, g2: FloatArray, gd: FloatArray) -> tuple[float, float]:
    """``v = Σ_{q>i} o_q r2^{q−i}`` and ``d = Σ_{q>i} o_q (r1^{q−i} − r2^{q−i})`` (``u − v``
    for ``u`` the same sum with ``r1``), given ``g2 = r2^{1…n}`` and ``gd = r1^{1…n} −
    r2^{1…n}``. δ is ``u − e^x v = d − (e^x − 1)v``: taken from ``d`` and ``v`` it keeps
    its relative accuracy where ``u`` and ``v`` agree to many digits (a fine grid and a
    small ε: both are ≈ P[L > ε])."""
    rest = o[i + 1 :]
    return _dot(rest, g2[: rest.size]), _dot(rest, gd[: rest.size])


@dataclass(frozen=True)
class _Config:
    """One composition on a window: its θ-tilted, normalised masses (``values``, from a
    circular convolution), log δ without the tails at every window grid point
    (``log_c``), log K(θ), the round-off bound ``eta`` of each value, the Chernoff bound
    ``top_tail`` of the untilted mass above the window, the bound ``alias`` of the tilted
    mass outside it, and ``tails`` — what upper bounds add to δ (top tail, mass at +∞)."""

    values: FloatArray
    log_c: FloatArray
    log_k: float
    eta: float
    top_tail: float
    alias: float
    tails: float

    def weights(self, pessimistic: bool) -> FloatArray:
        if pessimistic:
            return np.maximum(self.values, 0.0) + self.eta
        return np.maximum(self.values - self.eta, 0.0)


@dataclass(frozen=True)
class _Window:
    """Every configuration θ-tilted on grid indices ``base … base + size − 1``;
    ``noise[k]`` is Σ_{q>k} of the δ-weights, i.e. δ's round-off part per unit η."""

    theta: float
    base: int
    size: int
    noise: FloatArray
    configs: tuple[_Config, ...]
    g2: FloatArray
    gd: FloatArray

    def losses(self, h: float) -> FloatArray:
        return h * (self.base + np.arange(self.size, dtype=np.float64))


@dataclass(frozen=True)
class PLDProfile:
    """The privacy-loss distribution of the worst of several compositions on a grid.

    ``parts`` are distinct factors on the grid of width ``grid``; each of ``configs``
    gives a count per part (a composition). The profile is the pointwise maximum of the
    configurations' profiles — ``compose_plds`` makes one configuration, ``worst_of``
    several. ``pessimistic`` profiles give valid upper bounds on δ(ε) (and ε(δ));
    optimistic ones give lower bounds. See the module documentation for the method and
    its error.
    """

    grid: float
    parts: tuple[_Part, ...]
    configs: tuple[tuple[int, ...], ...]
    pessimistic: bool
    snap_slack: float = 0.0
    _cache: dict[float, _Window] = field(default_factory=dict, compare=False, repr=False)

    def _counts(self) -> np.ndarray:
        return np.asarray(self.configs, dtype=np.float64).reshape(len(self.configs), -1)

    def _config_inf(self) -> FloatArray:
        inf = np.array([p.inf for p in self.parts])
        log_survive = np.log1p(-np.minimum(inf, 1.0 - 1e-16))
        return np.asarray(-np.expm1(np.einsum("cp,p->c", self._counts(), log_survive)))

    @property
    def infinity_mass(self) -> float:
        """Mass at L = +∞ (truncated tails; counted in full by upper bounds)."""
        return float(np.max(self._config_inf())) if self.pessimistic else 0.0

    def _index_range(self, c: int) -> tuple[int, int]:
        """The first and last grid index of configuration ``c``'s finite support."""
        counts = self.configs[c]
        lo = sum(p.start * k for p, k in zip(self.parts, counts, strict=True))
        hi = sum((p.start + p.size - 1) * k for p, k in zip(self.parts, counts, strict=True))
        return lo, hi

    @property
    def max_loss(self) -> float:
        """The largest finite loss with positive probability (on the grid)."""
        return self.grid * max(self._index_range(c)[1] for c in range(len(self.configs)))

    # ------------------------------------------------------------------ tilting

    def _part_stats(self, thetas: FloatArray) -> FloatArray:
        """``out[t, p] = (log Z, mean, variance)`` of part ``p`` tilted by ``thetas[t]``
        (a few thetas at once: one array operation per part)."""
        out = np.empty((thetas.size, len(self.parts), 3))
        for i, p in enumerate(self.parts):
            step = max(1, (1 << 22) // max(p.losses.size, 1))  # at most 2²² products at once
            for s in range(0, thetas.size, step):
                th = thetas[s : s + step, None]
                t = p.log_mass[None, :] + th * p.losses[None, :]
                top = np.max(t, axis=1, keepdims=True)
                w = np.exp(t - top)
                z = np.sum(w, axis=1, keepdims=True)
                w /= z
                m = np.einsum("tk,k->t", w, p.losses)  # no BLAS (see _dot)
                dev = p.losses[None, :] - m[:, None]
                out[s : s + step, i, 0] = top[:, 0] + np.log(z[:, 0])
                out[s : s + step, i, 1] = m
                out[s : s + step, i, 2] = np.einsum("tk,tk->t", w, dev * dev)
        return out

    def _stats(self, theta: float) -> tuple[FloatArray, FloatArray, FloatArray]:
        """K(θ), K'(θ), K''(θ) of every configuration's total (finite) loss."""
        parts = self._part_stats(np.array([float(theta)]))[0]
        out = np.einsum("cp,ps->cs", self._counts(), parts)
        return out[:, 0], out[:, 1], out[:, 2]

    def _own_stats(self, thetas: FloatArray) -> FloatArray:
        """``out[c] = (K, K', K'')`` of configuration ``c`` at its own tilt ``thetas[c]``."""
        return np.asarray(np.einsum("cp,cps->cs", self._counts(), self._part_stats(thetas)))

    def _cgf(self, theta: float, c: int = 0) -> tuple[float, float, float]:
        k, dk, d2k = self._stats(theta)
        return float(k[c]), float(dk[c]), float(d2k[c])

    def _tilt_for(self, target: float, c: int = 0, *, allow_negative: bool = False) -> float:
        """θ with K'(θ) = ``target`` for configuration ``c`` (θ ≥ 0 unless
        ``allow_negative``), by Newton's method safeguarded by bisection."""
        _, dk, d2k = self._cgf(0.0, c)
        if dk >= target and not allow_negative:
            return 0.0
        if abs(dk - target) <= 1e-12 * max(abs(target), 1.0):
            return 0.0
        sign = 1.0 if target > dk else -1.0
        lo, hi = (0.0, math.inf) if sign > 0 else (-math.inf, 0.0)
        cap = _MAX_TILT / self.grid
        theta = max(min((target - dk) / d2k if d2k > 0 else sign, cap), -cap)
        for _ in range(200):
            _, dk, d2k = self._cgf(theta, c)
            if dk < target:
                lo = theta
            else:
                hi = theta
            if abs(dk - target) <= 1e-10 * max(abs(target), 1.0) or d2k <= 0:
                break
            nxt = theta - (dk - target) / d2k
            if not lo < nxt < hi:
                if math.isfinite(lo) and math.isfinite(hi):
                    nxt = 0.5 * (lo + hi)
                else:
                    nxt = 2.0 * theta if abs(theta) > 1.0 else theta + sign
            if abs(nxt) > _MAX_TILT / self.grid:  # the extreme atom alone: tilt no further
                return math.copysign(_MAX_TILT / self.grid, sign)
            theta = nxt
        return theta

    def _tail_bounds(self, theta: float, t: float, above: bool) -> FloatArray:
        """Chernoff bounds, per configuration, on the θ-tilted and normalised mass (θ = 0:
        the untilted one, relative to its total) at or above ``t`` (``above``) or at or
        below it: ``e^{K(s) − K(θ) − (s − θ)t}`` with one ``s`` (optimal for the first
        configuration; any ``s`` on the right side of θ gives a valid bound)."""
        s = self._tilt_for(t, allow_negative=True)
        if (above and s <= theta) or (not above and s >= theta):
            return np.ones(len(self.configs))
        k_s, _, _ = self._stats(s)
        k_t, _, _ = self._stats(theta)
        return np.asarray(np.exp(np.minimum(k_s - k_t - (s - theta) * t, 0.0)))

    def _transforms(self, theta: float, n: int) -> list[dict[int, np.ndarray]]:
        """Per part, the Fourier transform of its θ-tilted masses raised to every count a
        configuration uses (powers by repeated multiplication)."""
        out: list[dict[int, np.ndarray]] = []
        for i, p in enumerate(self.parts):
            x = np.fft.rfft(p.tilted(theta, n), n)
            need = sorted({c[i] for c in self.configs} - {0})
            powers: dict[int, np.ndarray] = {}
            if len(need) > 1 and need[-1] - need[0] < 2 * len(need):
                cur, k = x, 1
                while k <= need[-1]:
                    if k in need:
                        powers[k] = cur
                    cur, k = cur * x, k + 1
            else:
                for k in need:
                    powers[k] = _power(x, k)
            out.append(powers)
        return out

    def _span(self, theta: float) -> tuple[int, int]:
        """``(base, n)``: the window's first grid index and its length (a power of two)
        covering ±9 tilted standard deviations of every configuration, widened until the
        Chernoff bound of the tilted mass outside is below 10⁻¹⁴ (far from Gaussian when
        there are few factors) or the window reaches its size bound, or the whole support
        when that is no longer. :class:`GridTooFineError` if the ±9 deviations do not fit the
        bound (2²⁰ points, 2²² points × configurations)."""
        h = self.grid
        limit = _window_limit(len(self.configs))
        _, mean, var = self._stats(theta)
        sd = np.sqrt(np.maximum(var, 0.0))
        ranges = [self._index_range(c) for c in range(len(self.configs))]
        lo_i, hi_i = min(r[0] for r in ranges), max(r[1] for r in ranges)
        lo = max(int(math.floor(float(np.min(mean - _SPAN * sd)) / h)) - 2, lo_i)
        hi = min(int(math.ceil(float(np.max(mean + _SPAN * sd)) / h)) + 2, hi_i)
        if hi - lo + 1 > limit:
            wide = h * (hi - lo + 1) / (limit / 2)
            raise GridTooFineError(
                f"grid {h:.3g} is too fine for this composition: its convolution window "
                f"needs {hi - lo + 1} points (at most {limit} for {len(self.configs)} "
                f"configuration(s)); use a grid of at least {wide:.3g}",
                wide,
            )
        for _ in range(30):
            width = hi - lo + 1
            wide_lo = lo > lo_i and np.max(self._tail_bounds(theta, h * lo, False)) > _OUTSIDE
            wide_hi = hi < hi_i and np.max(self._tail_bounds(theta, h * hi, True)) > _OUTSIDE
            if not (wide_lo or wide_hi) or width >= limit:
                break
            grow = min(width // 2, (limit - width) // (2 if wide_lo and wide_hi else 1))
            lo = max(lo - grow, lo_i) if wide_lo else lo
            hi = min(hi + grow, hi_i) if wide_hi else hi
        n = max(1 << int(math.ceil(math.log2(max(hi - lo + 1, 2)))), _MIN_FFT)
        if hi_i - lo_i + 1 <= n:  # the whole support fits: nothing wraps
            return lo_i, max(1 << int(math.ceil(math.log2(hi_i - lo_i + 1))), _MIN_FFT)
        return lo, n

    def _outside(self, theta: float, base: int, n: int) -> tuple[FloatArray, FloatArray]:
        """Per configuration: the Chernoff bound of the untilted mass at or above the
        window's end, and of the tilted, normalised mass outside the window (0 where a
        configuration's support does not reach there)."""
        h, count = self.grid, len(self.configs)
        ranges = [self._index_range(c) for c in range(count)]
        above = np.array([r[1] >= base + n for r in ranges])
        below = np.array([r[0] < base for r in ranges])
        top_tail, alias = np.zeros(count), np.zeros(count)
        if np.any(above):
            k0 = self._stats(0.0)[0]
            top_tail = np.where(above, self._tail_bounds(0.0, h * (base + n), True) * np.exp(k0), 0)
            alias = np.where(above, self._tail_bounds(theta, h * (base + n), True), 0.0)
        if np.any(below):
            alias = alias + np.where(below, self._tail_bounds(theta, h * (base - 1), False), 0)
        return top_tail, alias

    def _window(self, theta: float) -> _Window:
        """Every configuration θ-tilted on one window (see :meth:`_span`)."""
        hit = self._cache.get(theta)
        if hit is not None:
            return hit
        h = self.grid
        base, n = self._span(theta)
        powers = self._transforms(theta, n)
        fixed = [i for i in range(len(self.parts)) if len({c[i] for c in self.configs}) == 1]
        shared = np.ones(n // 2 + 1, dtype=np.complex128)
        for i in fixed:
            if self.configs[0][i]:
                shared = shared * powers[i][self.configs[0][i]]
        r1 = math.exp(-theta * h)
        log_k = self._stats(theta)[0]
        top_tail, alias = self._outside(theta, base, n)
        infs = self._config_inf() if self.pessimistic else np.zeros(len(self.configs))
        scale = -theta * h * (base + np.arange(n, dtype=np.float64))
        configs = []
        for c, counts in enumerate(self.configs):
            acc = shared
            for i, k in enumerate(counts):
                if k and i not in fixed:
                    acc = acc * powers[i][k]
            values = np.roll(np.fft.irfft(acc, n), -((base - self._index_range(c)[0]) % n))
            cfg = _Config(
                values,
                np.empty(0),
                float(log_k[c]),
                _fft_error(n, int(sum(counts))),
                float(top_tail[c]),
                float(alias[c]),
                float(top_tail[c] + infs[c]) if self.pessimistic else 0.0,
            )
            cc = _excess(cfg.weights(self.pessimistic), r1, h)
            if not self.pessimistic:
                cc = np.maximum(cc - cfg.alias, 0.0)
            with np.errstate(divide="ignore"):
                log_c = np.log(cc) + cfg.log_k + scale
            configs.append(replace(cfg, log_c=log_c))
        m = np.arange(1, n + 1, dtype=np.float64)
        g1 = np.exp(-theta * h * m)
        g2, gd = g1 * np.exp(-h * m), g1 * -np.expm1(-h * m)  # r2^m and r1^m − r2^m
        win = _Window(theta, base, n, _excess(np.ones(n), r1, h), tuple(configs), g2, gd)
        cached = sum(x.size for x in self._cache.values()) + n
        if len(self._cache) >= 4 or cached * len(self.configs) > _MAX_CELLS:
            self._cache.clear()
        self._cache[theta] = win
        return win

    # ------------------------------------------------------------------ δ(ε)

    def _delta_in(self, w: _Window, eps: float) -> float:
        """δ(ε) from one window: the largest over the configurations (ε below the window
        only for the untilted one, where the mass below it counts at its untilted size)."""
        h, theta = self.grid, w.theta
        j = int(math.floor(eps / h + 1e-12)) - w.base  # grid point at or below ε
        if j < 0 and theta != 0.0:
            raise ValueError("internal: ε below a tilted window")
        worst = 0.0
        for cfg in w.configs:
            if j >= w.size - 1:
                worst = max(worst, cfg.tails)
                continue
            o = cfg.weights(self.pessimistic)
            i = max(j, 0)
            v, d = _uv_at(o, i, w.g2, w.gd)
            if j < 0:  # below the window: every atom in it counts, and the mass below
                v += float(o[0])  # (its r1⁰ − r2⁰ is 0: d is unchanged)
            x = eps - h * (w.base + i)
            inner = d - math.expm1(x) * v  # u − e^x v
            if j < 0 and self.pessimistic:  # the mass below the window counts in full
                inner += cfg.alias
            elif not self.pessimistic:  # wrapped mass may have been counted
                inner -= cfg.alias
            log_scale = cfg.log_k - theta * h * (w.base + i)
            part = _exp(log_scale + math.log(inner)) if inner > 0 else 0.0
            worst = max(worst, part + cfg.tails)
        return min(worst, 1.0)

    def delta(self, epsilon: float) -> float:
        """δ(ε) = E[(1 − e^{ε − L})_+] + P[L = ∞] (the worst configuration): an upper
        bound for pessimistic profiles, a lower bound otherwise."""
        eps = float(epsilon)
        if math.isnan(eps):
            raise ValueError("epsilon must be a number")
        if self.pessimistic:
            eps -= self.snap_slack
        if eps >= self.max_loss:
            return min(self.infinity_mass, 1.0)
        w = self._window(self._tilt_for(eps))
        if eps < self.grid * w.base:  # far below the mean: the untilted window
            w = self._window(0.0)
        return self._delta_in(w, eps)

    # ------------------------------------------------------------------ ε(δ)

    def _saddle_theta(self, delta: float, *, gaussian: bool = True) -> tuple[float, int]:
        """``(θ, c)``: per configuration, θ at which the saddle-point approximation of δ
        equals ``delta`` — ``log δ ≈ K(θ) − θK'(θ) − log(θ(1+θ)) − ½ log(2π K''(θ))``
        (decreasing in θ); without the last two terms (``gaussian=False``) the
        large-deviation rate alone, which stays meaningful for lattice-like losses (a few
        isolated atoms, K'' ≈ 0) — and of those the one whose tilted mean K'(θ) (≈ ε) is
        largest, with its configuration."""

        def g(theta: FloatArray) -> FloatArray:
            st = self._own_stats(theta)
            val = st[:, 0] - theta * st[:, 1] - math.log(delta)
            if gaussian:
                val -= np.log(theta * (1.0 + theta)) + 0.5 * np.log(
                    2 * math.pi * np.maximum(st[:, 2], 1e-300)
                )
            return np.asarray(val, dtype=np.float64)

        count = len(self.configs)
        cap = _MAX_TILT / self.grid
        sd0 = math.sqrt(max(float(np.max(self._stats(0.0)[2])), 1e-300))
        lo, hi = np.full(count, min(1e-9, 1e-3 / sd0)), np.ones(count)
        for _ in range(200):
            up = (g(hi) > 0) & (hi < cap)
            if not np.any(up):
                break
            lo, hi = np.where(up, hi, lo), np.where(up, hi * 4.0, hi)
        for _ in range(60):
            mid = np.sqrt(lo * hi)
            pos = g(mid) > 0
            lo, hi = np.where(pos, mid, lo), np.where(pos, hi, mid)
            if np.all(hi / lo < 1.0 + 1e-3):
                break
        thetas = np.minimum(np.sqrt(lo * hi), cap)
        c = int(np.argmax(self._own_stats(thetas)[:, 1]))
        return float(thetas[c]), c

    def _solve(self, w: _Window, delta: float) -> tuple[float, float, int]:
        """Smallest ε in the window with δ(ε) ≤ ``delta`` for every configuration.

        Returns ``(ε, share, where)``: ``share`` is the largest share of the numerical part
        (round-off bound, tail bound, wrapped mass) in δ at the answer, and ``where`` is −1
        if the answer lies below the window, +1 above it, else 0.
        """
        h, theta = self.grid, w.theta
        targets = np.array([delta - cfg.tails for cfg in w.configs])
        if np.any(targets <= 0):
            return math.inf, 1.0, 1
        log_t = np.log(targets)
        above = np.stack([cfg.log_c for cfg in w.configs]) > log_t[:, None]
        fails = np.any(above, axis=0)
        ok = np.flatnonzero(~fails)
        if ok.size == 0:
            return math.inf, 1.0, 1
        j = int(ok[0])
        lowest = min(self._index_range(c)[0] for c in range(len(self.configs)))
        if j == 0:
            return h * w.base, 1.0, (-1 if w.base > lowest else 0)
        i = j - 1
        eps, share = h * (w.base + i), 0.0
        for cfg, t in zip(w.configs, targets, strict=True):
            log_scale = cfg.log_k - theta * h * (w.base + i)
            v, d = _uv_at(cfg.weights(self.pessimistic), i, w.g2, w.gd)
            # e^x = (u − target)/v: x = log1p((d − target)/v), relative accuracy kept
            above = d - (0.0 if self.pessimistic else cfg.alias) - _exp(math.log(t) - log_scale)
            x = math.log1p(above / v) if v > 0 and above > -v else h
            eps = max(eps, h * (w.base + i) + min(max(x, 0.0), h))
            main = math.exp(float(cfg.log_c[i]) - log_scale) if np.isfinite(cfg.log_c[i]) else 0.0
            extra = cfg.eta * float(w.noise[i]) + cfg.alias
            share = max(share, (extra / main if main > 0 else 1.0) + cfg.top_tail / delta)
        return eps, share, 0

    def epsilon(self, delta: float) -> float:
        """The smallest ε ≥ 0 with δ(ε) ≤ ``delta`` (an upper bound on the exact ε for
        pessimistic profiles, a lower bound otherwise)."""
        d = check_parameter("delta", delta, upper=1.0)
        inf = self.infinity_mass
        if inf > d or (inf == d and inf > 0):
            return math.inf
        slack = self.snap_slack if self.pessimistic else -self.snap_slack
        if d == 0.0:
            return max(self.max_loss + slack, 0.0)
        for w in list(self._cache.values()):  # a window from an earlier call may do
            eps, share, where = self._solve(w, d)
            if where == 0 and math.isfinite(eps) and share <= _ACCURATE:
                return max(eps + slack, 0.0)
        pick = min if self.pessimistic else max  # every answer found is a valid bound
        best = math.inf if self.pessimistic else 0.0
        theta, c = self._saddle_theta(d - inf)
        rates: list[float] = []  # the second try if inaccurate: computed when needed

        def rate() -> float:
            if not rates:
                rates.append(self._saddle_theta(d - inf, gaussian=False)[0])
            return rates[0]

        tried: set[float] = set()
        for _ in range(8):
            tried.add(theta)
            w = self._window(theta)
            eps, share, where = self._solve(w, d)
            if where == 0 and math.isfinite(eps):
                best = pick(best, eps)
                if share <= _ACCURATE:
                    break
                theta = rate() if rate() not in tried else self._tilt_for(eps, c)
            elif where < 0:  # the answer lies below the window
                theta = self._tilt_for(self.grid * w.base, c)
                if theta == w.theta:  # … and below the untilted window: its bottom
                    best = pick(best, self.grid * w.base if self.pessimistic else 0.0)
                    break
            else:  # above the window
                top = self.grid * (w.base + w.size)
                if top >= self.max_loss:
                    best = pick(best, self.max_loss)
                    break
                theta = self._tilt_for(top, c)
            if theta in tried:  # a tilt seen before: nothing new to learn
                if rate() in tried:
                    break
                theta = rate()
        if not math.isfinite(best):  # the solver did not converge: the largest loss
            best = self.max_loss
        return max(best + slack, 0.0)

    def epsilon_curve(self, deltas: ArrayLike) -> FloatArray:
        """ε(δ) for every δ of an array (each convolution serves every δ it resolves)."""
        ds = np.asarray(deltas, dtype=np.float64)
        return np.array([self.epsilon(float(d)) for d in ds.ravel()]).reshape(ds.shape)

    # ------------------------------------------------------------------ power

    def power(self, alpha: ArrayLike) -> FloatArray:
        """Maximum power of any level-α test between the neighbouring output distributions.

        The Neyman–Pearson tests reject when the loss exceeds a threshold (randomising at
        it), so the points (Q[L > t], P[L > t]) are the corners of the exact power curve of
        the composed pair (Dong, Roth & Su 2019, Prop. 2.2); with several configurations,
        the largest power. For the pessimistic PLD the result is an upper bound on the true
        power: P-tails are rounded up (round-off bound, mass above the window, mass at
        +∞) and Q-tails down, which moves every corner up and to the left; the polyline
        through such corners is above the true one (a point of the true polyline at α is a
        convex combination of two corners, and the same combination of the moved corners
        lies on the computed polyline at a level ≤ α). Accurate for levels well above the
        10⁻¹³ round-off floor.
        """
        a = np.asarray(alpha, dtype=np.float64)
        if np.any(np.isnan(a)) or np.any(a < 0) or np.any(a > 1):
            raise ValueError(f"alpha must lie in [0, 1], got {alpha!r}")
        w = self._window(0.0)
        losses = w.losses(self.grid)
        infs = self._config_inf()
        best = np.zeros(a.shape)
        for cfg, inf in zip(w.configs, infs, strict=True):
            scale = math.exp(cfg.log_k)
            p_up = (np.maximum(cfg.values, 0.0) + cfg.eta)[::-1] * scale
            # Q-masses P e^{−L}, in logs (e^{−L} alone overflows where L < −709)
            with np.errstate(divide="ignore"):
                log_q = np.log(np.maximum(cfg.values - cfg.eta - cfg.alias, 0.0)) - losses
            q_low = np.exp(np.minimum(log_q + cfg.log_k, 0.0))[::-1]
            type1 = np.concatenate([[0.0], np.cumsum(q_low)])
            power = np.concatenate([[0.0], np.cumsum(p_up)]) + cfg.top_tail + float(inf)
            best = np.maximum(best, np.interp(a, type1, np.minimum(power, 1.0), right=1.0))
        return np.asarray(np.clip(np.maximum(best, a), 0.0, 1.0), dtype=np.float64)


def _group(
    factors: Sequence[tuple[LossFactor, int]],
) -> list[tuple[LossFactor, int]]:
    """Identical factors (equal keys) merged, their counts added."""
    seen: dict[Hashable, int] = {}
    out: list[tuple[LossFactor, int]] = []
    for f, count in factors:
        if isinstance(count, bool) or int(count) != count or count < 1:
            raise ValueError(f"count must be a positive integer, got {count!r}")
        if f.key in seen:
            g, c = out[seen[f.key]]
            out[seen[f.key]] = (g, c + int(count))
        else:
            seen[f.key] = len(out)
            out.append((f, int(count)))
    return out


def worst_of(
    compositions: Sequence[Sequence[tuple[LossFactor, int]]],
    *,
    grid: float = 1e-3,
    pessimistic: bool = True,
) -> PLDProfile:
    """The worst of several compositions: δ(ε) is the largest of their profiles.

    Each composition is a list of ``(factor, count)``; the result's ε(δ) is the largest
    of their ε(δ) — the guarantee of a record whose contribution is one of them (in
    SafeTab: how many of its population groups are tabulated in two stages and how many
    as a single total). Factors shared between compositions are put on the grid once and
    the configurations share every Fourier transform. ``grid``, ``pessimistic``: as in
    :func:`compose_plds`.
    """
    if not compositions or any(not c for c in compositions):
        raise ValueError("worst_of needs at least one non-empty composition")
    h = check_parameter("grid", grid)
    if h == 0:
        raise ValueError("grid must be positive")
    grouped = [_group(c) for c in compositions]
    distinct = _group([(f, 1) for g in grouped for f, _ in g])
    where = {f.key: i for i, (f, _) in enumerate(distinct)}
    parts = tuple(_Part.of(f.on_grid(h, pessimistic), h) for f, _ in distinct)
    configs = []
    for g in grouped:
        counts = [0] * len(parts)
        for f, c in g:
            counts[where[f.key]] += c
        configs.append(tuple(counts))
    slack = max(sum(c) for c in configs) * _SNAP * h
    return PLDProfile(h, parts, tuple(configs), pessimistic, slack)


def compose_plds(
    factors: Sequence[tuple[LossFactor, int]],
    *,
    grid: float = 1e-3,
    pessimistic: bool = True,
) -> PLDProfile:
    """Compose ``count`` copies of each factor: the PLD of the worst-case record.

    ``grid`` is the discretisation width ``h``; ``pessimistic=True`` splits every atom
    between its neighbouring grid points (connect-the-dots) and sends truncated mass to +∞
    (a valid upper bound on δ(ε)); ``False`` rounds down and drops it (a lower bound).
    """
    if not factors:
        raise ValueError("compose_plds needs at least one factor")
    return worst_of([factors], grid=grid, pessimistic=pessimistic)


# ------------------------------------------------------------------ alternatives


_HULL_POINTS = 1 << 20  # grid points of either_of's profiles (at most)
_HULL_WORK = 1 << 27  # products in either_of's direct convolutions (at most)
_CHUNK = 1 << 22  # products held in memory at once by a sparse convolution


def _convolve_positive(a: FloatArray, b: FloatArray) -> FloatArray:
    """The linear convolution of two non-negative arrays by direct sums (no round-off
    floor: every entry to a few ulps), over the non-zero entries only when that is cheaper
    (the grid copies of coarse lattices are mostly zeros)."""
    ia, ib = np.flatnonzero(a), np.flatnonzero(b)
    if ia.size * ib.size >= a.size * b.size // 4:
        return np.asarray(np.convolve(a, b), dtype=np.float64)
    out = np.zeros(a.size + b.size - 1)
    step = max(1, _CHUNK // max(ib.size, 1))
    for s in range(0, ia.size, step):
        rows = ia[s : s + step]
        at = (rows[:, None] + ib[None, :]).ravel()
        out += np.bincount(at, (a[rows][:, None] * b[ib][None, :]).ravel(), out.size)
    return out


def _hull_step(options: Sequence[Sequence[tuple[LossFactor, int]]], h: float) -> int:
    """The smallest ``m ≥ 1`` for which :func:`either_of` on the grid ``m·h`` stays within
    :data:`_HULL_POINTS` points and :data:`_HULL_WORK` products (dense work falls as
    ``1/m²``; sparse work — isolated atoms — does not depend on ``m``)."""
    lo, hi, dense, cheapest = math.inf, -math.inf, 0.0, 0.0
    for opt in options:
        first = last = 0
        length, nnz = 1, 1
        for f, count in _group(opt):
            g = f.on_grid(h, True)
            span, atoms = int(g.idx[-1] - g.idx[0]) + 1, int(g.idx.size)
            first, last = first + count * int(g.idx[0]), last + count * int(g.idx[-1])
            for _ in range(count):
                dense += float(length) * span
                cheapest += min(float(length) * span, float(nnz) * atoms)
                length, nnz = length + span - 1, min(length + span - 1, nnz * atoms)
        lo, hi = min(lo, first), max(hi, last)
    m = max(1, math.ceil((hi - lo + 3) / _HULL_POINTS))
    if cheapest > _HULL_WORK:
        m = max(m, math.ceil(math.sqrt(dense / _HULL_WORK)))
    return m


def _option_on_grid(
    option: Sequence[tuple[LossFactor, int]], h: float
) -> tuple[int, FloatArray, float, float]:
    """An option's composition on the grid, directly (positive sums: no round-off
    floor): ``(start, masses, log_scale, inf)`` with the masses scaled by ``e^{log_scale}``."""
    start, probs, log_scale, survive = 0, np.ones(1), 0.0, 1.0
    for f, count in _group(option):
        g = f.on_grid(h, pessimistic=True)
        top = float(np.max(g.log_mass))
        p = np.zeros(int(g.idx[-1] - g.idx[0]) + 1)
        p[g.idx - g.idx[0]] = np.exp(g.log_mass - top)
        for _ in range(count):
            probs = _convolve_positive(probs, p)
            peak = float(np.max(probs))
            probs = probs / peak
            log_scale += top + math.log(peak)
            start += int(g.idx[0])
            survive *= 1.0 - g.inf
    return start, probs, log_scale, 1.0 - survive


def either_of(
    options: Sequence[Sequence[tuple[LossFactor, int]]], *, grid: float = 1e-3
) -> AtomLoss:
    """A PLD dominating every one of several alternative mechanisms.

    Used when a record's contribution to one query is *one of* several compositions —
    in SafeTab a population group is either tabulated in two stages (γρ then (1−γ)ρ) or
    as a single total (ρ) — and neither dominates the other. The pointwise maximum of the
    options' privacy profiles is the profile of the convex hull of the minimum of their
    trade-off functions, a valid guarantee for each. Each option is composed on the grid
    (connect-the-dots, so its profile at the grid points is an upper bound), the maximum is
    taken at the grid points and turned back into a PLD by the "connect-the-dots"
    construction (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022): atoms on the grid
    whose profile interpolates the maximum linearly in e^ε — above the convex true profile
    between grid points, so the result is a valid upper bound. Where one option is the
    maximum at a grid point and both neighbours, the atom there is that option's own;
    elsewhere it comes from second differences of the maximum. Finally all masses are
    scaled up by the largest relative shortfall of the result's profile against the
    maximum at any grid point (round-off), so it is never below it.
    """
    h = check_parameter("grid", grid)
    if h == 0:
        raise ValueError("grid must be positive")
    if not options:
        raise ValueError("either_of needs at least one option")
    h *= _hull_step(options, h)
    grids = [_option_on_grid(opt, h) for opt in options]
    lo = min(s for s, _, _, _ in grids) - 1
    hi = max(s + p.size for s, p, _, _ in grids)
    ks = np.arange(lo, hi + 1)
    profiles, masses, totals = [], [], []
    for start, probs, log_scale, inf in grids:
        full = np.zeros(ks.size)
        full[start - lo : start - lo + probs.size] = probs
        scale = math.exp(log_scale)
        c = _excess(full, 1.0, h)
        profiles.append(c * scale + inf)
        masses.append(full * scale)
        totals.append(float(np.sum(full)) * scale + inf)
    d_all = np.stack(profiles)
    which = np.argmax(d_all, axis=0)
    d = d_all[which, np.arange(ks.size)]
    # the atom at k is e^{kh} × the change of slope (in e^ε) of the chords there; with
    # steps D_k = d_{k+1} − d_k that is D_k/(e^h − 1) − D_{k−1}/(1 − e^{−h}) (no e^{kh},
    # which overflows for large losses); below the grid the chord keeps the total
    steps = np.diff(d)
    m = np.concatenate([steps * (math.exp(-h) / -math.expm1(-h)), [0.0]])  # 1/(e^h − 1)
    m -= np.concatenate([[0.0], steps / -math.expm1(-h)])
    m[0] += max(totals) - d[0]
    m = np.clip(m, 0.0, None)
    own = np.zeros(ks.size, dtype=bool)
    own[1:-1] = (which[:-2] == which[1:-1]) & (which[2:] == which[1:-1])
    idx = np.flatnonzero(own)
    m[idx] = np.stack(masses)[which[idx], idx]
    p_inf = float(d[-1])
    built = _excess(m, 1.0, h)
    built = built + p_inf
    pos = d > 0
    if np.any(pos & (built <= 0)):
        p_inf += float(np.max(d[pos & (built <= 0)]))
        built = built + float(np.max(d[pos & (built <= 0)]))
    short = float(np.max(np.where(pos, (d - built) / np.where(built > 0, built, 1.0), 0.0)))
    if short > 0:
        m = m * (1.0 + short)
        p_inf *= 1.0 + short
    keep = m > 0
    names = " | ".join(" + ".join(f"{c}x[{f.description}]" for f, c in opt) for opt in options)
    return AtomLoss(
        h * ks[keep].astype(np.float64), np.log(m[keep]), min(p_inf, 1.0), f"either of: {names}"
    )


def solve_on_a_fitting_grid(
    solve: Callable[[float], _T], grid: float, tries: int = 8
) -> tuple[float, _T]:
    """``(grid, solve(grid))``, coarsening the grid (each time at least twofold, or to the
    width a :class:`GridTooFineError` names) while ``solve`` finds it too fine;
    ``RuntimeError`` after ``tries`` grids."""
    for _ in range(tries):
        try:
            return grid, solve(grid)
        except GridTooFineError as exc:
            grid = max(exc.grid, 2.0 * grid)
    raise RuntimeError(f"the PLD analysis found no feasible grid (last tried {grid:.3g})")
