"""Exact discrete Laplace (two-sided geometric) and geometric samplers, vectorised.

Target distributions, for a rational scale ``t > 0`` and ``r = e^{−1/t}``:

* :func:`discrete_laplace`: ``P(X = x) = (1−r)/(1+r) · r^{|x|}`` on ℤ (pmf ∝ ``e^{−|x|/t}``);
  the noise of the geometric mechanism (SafeTab seed Def. 6, Alg. 4) with ``t = Δ/ε``.
* :func:`geometric`: ``P(G = k) = (1−r) r^k`` on ``{0, 1, 2, …}``.

Method (exact inverse CDF with certified comparisons)
-----------------------------------------------------
For the two-sided law, ``P(|X| ≥ k) = c·r^k`` for ``k ≥ 1`` with ``c = 2/(1+r)``, so for a
uniform ``V``, ``|X| = ⌊y(V)⌋`` with ``y(V) = t·(ln c − ln V)`` has exactly the law of
``|X|``; an independent random bit gives the sign (a zero stays zero, which is why the
magnitude law carries the factor ``c``). One 64-bit word per sample: 63 bits are the first
bits of ``V``, one is the sign. ``⌊y(V)⌋`` is computed in float64 for the whole interval of
``V`` consistent with its first 63 bits, with a rigorous error bound
(:func:`privtab.random._kernels.floor_scaled_neglog`); when the bound straddles an integer
(probability ≈ 2·err, i.e. ~2⁻³⁸·t per draw) the element is finished exactly by drawing
more bits of ``V`` and interval arithmetic (:mod:`privtab.random.exact`). No loop is
needed: every word yields a sample.

For very large scales (``t > 2²⁰``) float64 cannot certify ``⌊y⌋`` often enough, and the
magnitude is decomposed exactly: ``G = M·Q + R`` with ``M = 2^j ≈ t/2¹⁰``, where ``Q`` is
geometric with ratio ``r^M`` (scale ``t/M ∈ [2¹⁰, 2¹¹)``, sampled as above) and ``R`` is
independent of ``Q`` with ``P(R = k) ∝ r^k`` on ``{0, …, M−1}`` (memorylessness). ``R`` is
drawn uniform on ``{0, …, M−1}`` and kept with probability ``r^R = e^{−R/t} ≥ e^{−2⁻¹⁰}``
(certified comparison), so fewer than 0.1% of draws are repeated. The two-sided sample is
``±G`` with the pair (−, 0) rejected (probability ``(1−r)/2 < 2⁻²¹``).

Scales are limited to ``t ≤ 2⁵⁴`` (:data:`MAX_LAPLACE_SCALE`) so that every intermediate
stays exact in int64/float64: ``R < M ≤ 2⁴⁴`` is exact in float64, ``Q·M`` is checked to
stay below ``2⁶²`` (``Q`` of scale below ``2¹¹`` reaches ``2¹⁸`` with probability below
``e^{−128}``; the sample then fails loudly, it is never wrong), and a magnitude of ``2⁶²``
has probability ``e^{−256}`` at ``t = 2⁵⁴``. The discrete Gaussian sampler, which uses
this one for its proposals, keeps ``σ ≤ 2⁴⁴`` (:data:`MAX_SCALE`) for its own float64
certification.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
from mpmath import mp, mpf
from numpy.typing import NDArray

from privtab.random._kernels import (
    accept_exp_neg,
    check_float_log,
    floor_scaled_neglog,
    prefixes63,
)
from privtab.random._util import Size, fill_chunks, shape_of
from privtab.random.exact import (
    Interval,
    LazyUniform,
    exp_neg_enclosure,
    iv_add,
    iv_exp,
    iv_log,
    iv_mul,
    iv_rational,
    iv_sub,
    iv_to_fractions,
    resolve_floor,
    resolve_less,
)
from privtab.random.rational import RationalLike, as_rational
from privtab.random.sources import RandomSource, resolve_source

__all__ = ["MAX_LAPLACE_SCALE", "MAX_SCALE", "MIN_SCALE", "discrete_laplace", "geometric"]

#: Largest supported σ of the discrete Gaussian sampler and scale of the lattice samplers.
MAX_SCALE = Fraction(1 << 44)
#: Largest supported scale of the discrete Laplace and geometric samplers (see above).
MAX_LAPLACE_SCALE = Fraction(1 << 54)
#: Smallest supported scale (below it the noise is 0 except with probability < e^{−2⁴⁰}).
MIN_SCALE = Fraction(1, 1 << 40)
_DIRECT_MAX = Fraction(1 << 20)


@dataclass(frozen=True)
class _FloorSpec:
    """``y(V) = s·(κ − ln V)``: the scale ``s`` and the offset ``κ`` (exact forms)."""

    s: Fraction
    two_sided: bool  # κ = ln 2 − ln(1 + e^{−1/s}) if True, else κ = 0
    s_float: float
    offset_float: float  # 63·ln 2 + κ, to float64

    def kappa(self, prec: int) -> Interval:
        if not self.two_sided:
            return iv_rational(Fraction(0), prec)
        one = iv_rational(Fraction(1), prec)
        r = iv_exp(iv_rational(-1 / self.s, prec), prec)
        ln2 = iv_log(iv_rational(Fraction(2), prec), prec)
        return iv_sub(ln2, iv_log(iv_add(one, r, prec), prec), prec)

    def y_range(
        self, lower: Fraction, upper: Fraction, prec: int
    ) -> tuple[Fraction | None, Fraction | None]:
        v = (iv_rational(lower, prec)[0], iv_rational(upper, prec)[1])
        inner = iv_sub(self.kappa(prec), iv_log(v, prec), prec)
        return iv_to_fractions(iv_mul(iv_rational(self.s, prec), inner, prec))


@lru_cache(maxsize=256)
def _floor_spec(s: Fraction, two_sided: bool) -> _FloorSpec:
    with mp.workprec(100):
        st = mpf(s.numerator) / s.denominator
        kappa = mp.log(2) - mp.log1p(mp.exp(-1 / st)) if two_sided else mpf(0)
        offset = float(63 * mp.log(2) + kappa)
    return _FloorSpec(s, two_sided, float(s), offset)


def _floors(
    spec: _FloorSpec, v: NDArray[np.int64], vf: NDArray[np.float64], src: RandomSource
) -> NDArray[np.int64]:
    """``⌊y(V)⌋`` for every element, exactly (fast path + exact resolution)."""
    lo, amb = floor_scaled_neglog(vf, spec.s_float, spec.offset_float)
    with np.errstate(invalid="ignore"):
        out = lo.astype(np.int64)
    for i in np.flatnonzero(amb):
        out[i] = resolve_floor(LazyUniform(int(v[i]), 63), spec.y_range, src)
    return out


@dataclass(frozen=True)
class _LargeSpec:
    """The decomposition ``G = M·Q + R`` for a large scale ``t``."""

    t: Fraction
    j: int  # M = 2**j
    q_spec: _FloorSpec  # Q: one-sided, scale t/M
    t_inv_float: float


@lru_cache(maxsize=256)
def _large_spec(t: Fraction) -> _LargeSpec:
    j = max(0, math.floor(math.log2(t)) - 10)
    while Fraction(1 << j) > t / 1024:  # guard against log2 rounding
        j -= 1
    return _LargeSpec(t, j, _floor_spec(t / (1 << j), False), float(1 / t))


def _truncated_geometric(spec: _LargeSpec, n: int, src: RandomSource) -> NDArray[np.int64]:
    """``n`` draws of ``R`` with ``P(R = k) ∝ e^{−k/t}`` on ``{0, …, 2^j − 1}``."""
    out = np.empty(n, dtype=np.int64)
    todo = np.arange(n)
    shift = np.uint64(64 - spec.j) if spec.j > 0 else None
    while todo.size:
        m = todo.size
        if shift is None:
            out[todo] = 0
            return out
        cand = (src.random_uint64(m) >> shift).view(np.int64)
        v, vf = prefixes63(src.random_uint64(m))
        q = cand.astype(np.float64) * spec.t_inv_float
        accept, amb = accept_exp_neg(vf, q, q * 2.0**-50)
        for i in np.flatnonzero(amb):
            gamma = Fraction(int(cand[i])) / spec.t

            def enclosure(prec: int, gamma: Fraction = gamma) -> tuple[Fraction, Fraction]:
                return exp_neg_enclosure(gamma, prec)

            accept[i] = resolve_less(LazyUniform(int(v[i]), 63), enclosure, src)
        out[todo[accept]] = cand[accept]
        todo = todo[~accept]
    return out


def _magnitudes_large(
    spec: _LargeSpec, words: NDArray[np.uint64], src: RandomSource
) -> NDArray[np.int64]:
    v, vf = prefixes63(words)
    q = _floors(spec.q_spec, v, vf, src)
    r = _truncated_geometric(spec, words.size, src)
    if q.size and int(q.max()) >= (1 << (62 - spec.j)):
        raise OverflowError("geometric sample exceeds int64 (probability < 2^-60)")
    q <<= spec.j
    q += r
    return q


def _apply_sign(mag: NDArray[np.int64], words: NDArray[np.uint64], out: NDArray[np.int64]) -> None:
    sign = (words & np.uint64(1)).view(np.int64)
    np.bitwise_xor(mag, -sign, out=out)
    out += sign


def _fill_discrete_laplace(out: NDArray[np.int64], t: Fraction, src: RandomSource) -> None:
    """Fill ``out`` (a 1-d int64 array of any length) with exact DLap(t) samples."""
    if t <= _DIRECT_MAX:
        spec = _floor_spec(t, True)
        for start in range(0, out.size, 1 << 16):
            block = out[start : start + (1 << 16)]
            words = src.random_uint64(block.size)
            v, vf = prefixes63(words)
            _apply_sign(_floors(spec, v, vf, src), words, block)
        return
    large = _large_spec(t)
    filled = 0
    while filled < out.size:
        need = min(out.size - filled, 1 << 16)
        words = src.random_uint64(need + 8)
        g = _magnitudes_large(large, words, src)
        x = np.empty_like(g)
        _apply_sign(g, words, x)
        keep = ~((x == 0) & ((words & np.uint64(1)) == 1))  # reject the pair (−, 0)
        x = x[keep][:need]
        out[filled : filled + x.size] = x
        filled += x.size


def _fill_geometric(out: NDArray[np.int64], t: Fraction, src: RandomSource) -> None:
    if t <= _DIRECT_MAX:
        spec = _floor_spec(t, False)
        for start in range(0, out.size, 1 << 16):
            block = out[start : start + (1 << 16)]
            v, vf = prefixes63(src.random_uint64(block.size))
            block[:] = _floors(spec, v, vf, src)
        return
    large = _large_spec(t)
    for start in range(0, out.size, 1 << 16):
        block = out[start : start + (1 << 16)]
        block[:] = _magnitudes_large(large, src.random_uint64(block.size), src)


def _scale(scale: RationalLike) -> Fraction:
    t = as_rational(scale, "scale", positive=True)
    if t > MAX_LAPLACE_SCALE:
        raise ValueError(f"scale must be at most 2**54 (about 1.8e16), got {scale!r}")
    if t < MIN_SCALE:
        raise ValueError(f"scale must be at least 2**-40 (about 9.1e-13), got {scale!r}")
    return t


def discrete_laplace(
    scale: RationalLike, size: Size, *, source: RandomSource | None = None
) -> NDArray[np.int64]:
    """Exact discrete Laplace samples: ``P(X = x) ∝ exp(−|x|/scale)`` on the integers.

    ``scale`` is a positive rational (an int, a float's exact value, a
    :class:`~fractions.Fraction`, a decimal string, …), at most ``2**54``. The geometric
    mechanism with privacy parameter ε on a query of L1 sensitivity Δ uses
    ``scale = Δ/ε`` (SafeTab seed Def. 6). Returns an ``int64`` array of shape ``size``.
    The output distribution is exactly the stated one (see the module docstring for the
    method and ``docs/random.md`` for the proof); every sample costs one 64-bit word from
    ``source`` (the secure default when ``None``).
    """
    t = _scale(scale)
    shape, count = shape_of(size)
    src = resolve_source(source)
    check_float_log()

    def fill(block: NDArray[np.generic]) -> None:
        _fill_discrete_laplace(block, t, src)  # type: ignore[arg-type]

    return fill_chunks(count, np.int64, fill).reshape(shape)  # type: ignore[return-value]


def geometric(
    scale: RationalLike, size: Size, *, source: RandomSource | None = None
) -> NDArray[np.int64]:
    """Exact one-sided geometric samples: ``P(G = k) ∝ exp(−k/scale)`` for ``k = 0, 1, …``.

    Equivalently ``P(G = k) = (1 − r) r^k`` with ``r = e^{−1/scale}``. Same method and
    guarantees as :func:`discrete_laplace`.
    """
    t = _scale(scale)
    shape, count = shape_of(size)
    src = resolve_source(source)
    check_float_log()

    def fill(block: NDArray[np.generic]) -> None:
        _fill_geometric(block, t, src)  # type: ignore[arg-type]

    return fill_chunks(count, np.int64, fill).reshape(shape)  # type: ignore[return-value]
