"""Exact uniform integers and exact Bernoulli trials.

* :func:`uniform_int` — uniform on ``{0, …, n−1}`` by rejection: draw ``k = ⌈log₂ n⌉``
  random bits and keep the value if it is below ``n``. Each try succeeds with probability
  ``n / 2^k > 1/2``, so the expected number of tries is below 2 and the probability of
  needing more than ``r`` tries is below ``2^−r``.
* :func:`bernoulli` — ``P(1) = p`` for rational ``p``: compare a uniform ``U`` with ``p``
  through ``U``'s first 64 bits ``u``: ``u < ⌊2⁶⁴p⌋`` means ``U < p`` and ``u > ⌊2⁶⁴p⌋``
  means ``U > p``. Only ``u = ⌊2⁶⁴p⌋`` (probability 2⁻⁶⁴) is undecided; then
  ``U < p ⇔ W < frac(2⁶⁴p)`` for the uniform ``W`` made of ``U``'s remaining bits, which is
  again a Bernoulli trial with a rational parameter — resolved by recursion, exactly.
* :func:`bernoulli_exp` — ``P(1) = e^{−γ}`` for rational ``γ ≥ 0``: the same comparison
  against integer bounds ``L ≤ 2⁶⁴e^{−γ} ≤ H`` computed once with rigorous interval
  arithmetic; the one or two undecided prefixes are resolved exactly
  (:mod:`privtab.random.exact`).

All are exact: the output distribution is the stated one, with no floating-point error.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from privtab.random._util import Size, fill_chunks, shape_of
from privtab.random.exact import LazyUniform, exp_neg_enclosure, resolve_less
from privtab.random.rational import RationalLike, as_rational
from privtab.random.sources import RandomSource, resolve_source

__all__ = ["bernoulli", "bernoulli_certified", "bernoulli_exp", "uniform_int"]

_TWO64 = 1 << 64


def uniform_int(n: int, size: Size, *, source: RandomSource | None = None) -> NDArray[np.int64]:
    """Uniform integers on ``{0, 1, …, n−1}`` (``1 ≤ n ≤ 2⁶³``), exactly, by rejection.

    Returns an ``int64`` array of shape ``size``.
    """
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise ValueError(f"n must be an integer, got {n!r}")
    nn = int(n)
    if not 1 <= nn <= 1 << 63:
        raise ValueError(f"n must be between 1 and 2**63, got {nn}")
    shape, count = shape_of(size)
    src = resolve_source(source)
    k = (nn - 1).bit_length()
    if k == 0:
        return np.zeros(shape, dtype=np.int64)
    shift = np.uint64(64 - k)
    bound = np.uint64(nn)

    def fill(out: NDArray[np.generic]) -> None:
        filled = 0
        m = out.size
        while filled < m:
            need = m - filled
            words = src.random_uint64(need + need // 2 + 8) >> shift
            good = words[words < bound]
            take = min(good.size, need)
            out[filled : filled + take] = good[:take].view(np.int64)
            filled += take

    return fill_chunks(count, np.int64, fill).reshape(shape)  # type: ignore[return-value]


def _bernoulli_scalar(p: Fraction, src: RandomSource) -> bool:
    """One exact Bernoulli(p) trial, 64 bits at a time (expected 1 + 2⁻⁶⁴ words)."""
    while True:
        if p <= 0:
            return False
        if p >= 1:
            return True
        scaled = p * _TWO64
        threshold = math.floor(scaled)
        u = src.random_bits(64)
        if u != threshold:
            return u < threshold
        p = scaled - threshold


def bernoulli(
    p: RationalLike, size: Size, *, source: RandomSource | None = None
) -> NDArray[np.bool_]:
    """Exact Bernoulli trials with ``P(True) = p`` for rational ``0 ≤ p ≤ 1``.

    ``p`` may be an int, float (its exact binary value), :class:`~fractions.Fraction`,
    :class:`~decimal.Decimal` or a string such as ``"1/3"``. Returns a ``bool`` array.
    """
    pr = as_rational(p, "p", nonnegative=True, at_most=1)
    shape, count = shape_of(size)
    src = resolve_source(source)
    if pr == 0:
        return np.zeros(shape, dtype=bool)
    if pr == 1:
        return np.ones(shape, dtype=bool)
    threshold = math.floor(pr * _TWO64)
    rest = pr * _TWO64 - threshold
    thr = np.uint64(threshold)

    def fill(out: NDArray[np.generic]) -> None:
        words = src.random_uint64(out.size)
        np.less(words, thr, out=out)
        for i in np.flatnonzero(words == thr):
            out[i] = _bernoulli_scalar(rest, src)

    return fill_chunks(count, np.bool_, fill).reshape(shape)  # type: ignore[return-value]


def bernoulli_certified(
    enclosure: Callable[[int], tuple[Fraction, Fraction]],
    size: Size,
    *,
    source: RandomSource | None = None,
) -> NDArray[np.bool_]:
    """Exact Bernoulli trials for a probability ``p`` known through rigorous enclosures.

    ``enclosure(prec)`` must return rationals ``lo ≤ p ≤ hi`` whose width shrinks like
    ``2^−prec``, and ``p`` must not be a dyadic rational in ``(0, 1)`` (e.g. ``e^{−γ}``,
    ``1/(1 + k·e^{−ε})``). A uniform ``U``'s first 64 bits decide ``U < p`` unless they fall
    between ``⌊2⁶⁴lo⌋`` and ``⌈2⁶⁴hi⌉``; those (about one in 2⁶⁰) are resolved exactly.
    """
    shape, count = shape_of(size)
    src = resolve_source(source)
    lo, hi = enclosure(160)
    lower = max(0, math.floor(lo * _TWO64))
    upper = math.ceil(hi * _TWO64)
    lo_w = np.uint64(min(lower, _TWO64 - 1))
    hi_w = np.uint64(upper) if upper < _TWO64 else None  # None: no prefix is surely ≥ p

    def fill(out: NDArray[np.generic]) -> None:
        words = src.random_uint64(out.size)
        np.less(words, lo_w, out=out)
        if lower >= _TWO64:
            out[:] = True
            return
        maybe = words >= lo_w
        if hi_w is not None:
            maybe &= words < hi_w
        for i in np.flatnonzero(maybe):
            out[i] = resolve_less(LazyUniform(int(words[i]), 64), enclosure, src)

    return fill_chunks(count, np.bool_, fill).reshape(shape)  # type: ignore[return-value]


def bernoulli_exp(
    gamma: RationalLike, size: Size, *, source: RandomSource | None = None
) -> NDArray[np.bool_]:
    """Exact Bernoulli trials with ``P(True) = exp(−γ)`` for rational ``γ ≥ 0``.

    Exact by certified integer thresholds (see the module docstring); ``γ`` is converted
    to an exact rational like every privtab parameter.
    """
    g = as_rational(gamma, "gamma", nonnegative=True)
    if g == 0:
        return np.ones(shape_of(size)[0], dtype=bool)

    def enclosure(prec: int) -> tuple[Fraction, Fraction]:
        return exp_neg_enclosure(g, prec)

    return bernoulli_certified(enclosure, size, source=source)
