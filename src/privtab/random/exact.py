"""Exact slow paths: lazily refined uniforms and rigorous interval arithmetic.

The fast samplers decide almost every comparison with floating-point arithmetic and a
*certified* error bound (see ``docs/random.md``). The few comparisons the bound cannot
decide (probability ~1e-12 per draw at moderate scales) come here, where they are decided
exactly:

* The uniform ``U`` whose first bits were drawn is a :class:`LazyUniform`: an interval
  ``[n·2⁻ᵏ, (n+1)·2⁻ᵏ)`` that is narrowed by drawing 64 more random bits at a time. The
  bits drawn so far are a prefix of ``U``'s infinite binary expansion, so refining never
  changes the distribution.
* The target (``e^{−q}`` for rational ``q``, or ``y(U) = s·(κ − ln U)``) is enclosed in an
  interval with mpmath's interval primitives (directed rounding of every operation), which
  we widen further by a relative ``2⁻⁽ᵖʳᵉᶜ⁻²⁰⁾`` so that the enclosure holds even if a
  primitive were off by several hundred thousand units in the last place.
* The comparison is decided as soon as the two intervals separate; otherwise both are
  refined (64 more bits of ``U``, 64 more bits of working precision). The targets are
  transcendental numbers (``e^{−q}`` is irrational for rational ``q ≠ 0``, Lindemann), so
  they never equal a dyadic ``U`` and the loop ends with probability one; each further
  round is needed with probability about ``2⁻⁶⁰``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import TypeAlias

from mpmath.libmp import libmpf, libmpi

from privtab.random.sources import RandomSource

__all__ = [
    "Interval",
    "LazyUniform",
    "exp_neg_enclosure",
    "iv_add",
    "iv_exp",
    "iv_log",
    "iv_mul",
    "iv_rational",
    "iv_sub",
    "iv_to_fractions",
    "resolve_floor",
    "resolve_less",
]

Mpf: TypeAlias = tuple[int, int, int, int]
Interval: TypeAlias = tuple[Mpf, Mpf]

# A hard cap on refinement rounds. Reaching it has probability below 2^-3000 for a correct
# enclosure; it exists so that a programming error can never hang a release.
_MAX_ROUNDS = 64


class LazyUniform:
    """A uniform ``U ∈ [0, 1)`` known through its first ``nbits`` bits ``num``."""

    __slots__ = ("nbits", "num")

    def __init__(self, num: int, nbits: int) -> None:
        if not 0 <= num < (1 << nbits):
            raise ValueError("prefix out of range")
        self.num = num
        self.nbits = nbits

    @property
    def lower(self) -> Fraction:
        return Fraction(self.num, 1 << self.nbits)

    @property
    def upper(self) -> Fraction:
        return Fraction(self.num + 1, 1 << self.nbits)

    def refine(self, source: RandomSource, bits: int = 64) -> None:
        """Draw ``bits`` more bits of ``U``'s binary expansion."""
        self.num = (self.num << bits) | source.random_bits(bits)
        self.nbits += bits


# -- interval arithmetic ---------------------------------------------------------------


def iv_rational(value: Fraction, prec: int) -> Interval:
    """An interval enclosing the rational ``value``."""
    p, q = value.numerator, value.denominator
    return (
        libmpf.from_rational(p, q, prec, libmpf.round_floor),
        libmpf.from_rational(p, q, prec, libmpf.round_ceiling),
    )


def _widen(x: Interval, prec: int) -> Interval:
    a, b = x
    shift = -(prec - 20)
    a2 = libmpf.mpf_sub(a, libmpf.mpf_shift(libmpf.mpf_abs(a), shift), prec, libmpf.round_floor)
    b2 = libmpf.mpf_add(b, libmpf.mpf_shift(libmpf.mpf_abs(b), shift), prec, libmpf.round_ceiling)
    return a2, b2


def iv_add(x: Interval, y: Interval, prec: int) -> Interval:
    return _widen(libmpi.mpi_add(x, y, prec), prec)


def iv_sub(x: Interval, y: Interval, prec: int) -> Interval:
    return _widen(libmpi.mpi_sub(x, y, prec), prec)


def iv_mul(x: Interval, y: Interval, prec: int) -> Interval:
    return _widen(libmpi.mpi_mul(x, y, prec), prec)


def iv_exp(x: Interval, prec: int) -> Interval:
    return _widen(libmpi.mpi_exp(x, prec), prec)


def iv_log(x: Interval, prec: int) -> Interval:
    """Natural log of a positive interval (a zero lower end gives ``−inf``)."""
    return _widen(libmpi.mpi_log(x, prec), prec)


def _mpf_to_fraction(m: Mpf) -> Fraction | None:
    if m == libmpf.fzero:
        return Fraction(0)
    if m in (libmpf.finf, libmpf.fninf, libmpf.fnan):
        return None
    sign, man, exp, _ = m
    value = Fraction(man << exp) if exp >= 0 else Fraction(man, 1 << -exp)
    return -value if sign else value


def iv_to_fractions(x: Interval) -> tuple[Fraction | None, Fraction | None]:
    """The interval's ends as exact fractions (``None`` for an infinite end)."""
    return _mpf_to_fraction(x[0]), _mpf_to_fraction(x[1])


def exp_neg_enclosure(q: Fraction, prec: int) -> tuple[Fraction, Fraction]:
    """Exact rationals ``lo ≤ e^{−q} ≤ hi`` (for rational ``q``), about ``prec`` bits tight."""
    lo, hi = iv_to_fractions(iv_exp(iv_rational(-q, prec), prec))
    assert lo is not None
    assert hi is not None
    return max(lo, Fraction(0)), hi


# -- exact decisions -------------------------------------------------------------------


def resolve_less(
    u: LazyUniform,
    enclosure: Callable[[int], tuple[Fraction, Fraction]],
    source: RandomSource,
) -> bool:
    """Decide ``U < T`` exactly, where ``enclosure(prec)`` returns ``lo ≤ T ≤ hi``.

    ``T`` must not be a dyadic rational (true for every target privtab uses).
    """
    for _ in range(_MAX_ROUNDS):
        lo, hi = enclosure(u.nbits + 64)
        if u.upper <= lo:
            return True
        if u.lower >= hi:
            return False
        u.refine(source)
    raise RuntimeError("exact comparison did not resolve: please report this as a bug")


def resolve_floor(
    u: LazyUniform,
    y_range: Callable[[Fraction, Fraction, int], tuple[Fraction | None, Fraction | None]],
    source: RandomSource,
) -> int:
    """Return ``⌊y(U)⌋`` exactly.

    ``y_range(lower, upper, prec)`` must return rationals (or ``None`` for an infinite
    end) enclosing ``{y(U) : lower ≤ U < upper}``. ``y(U)`` must never be an integer for
    the (non-dyadic) ``U`` that occur — true for ``y = s·(κ − ln U)`` with transcendental
    thresholds.
    """
    for _ in range(_MAX_ROUNDS):
        lo, hi = y_range(u.lower, u.upper, u.nbits + 64)
        if lo is not None and hi is not None:
            k = math.floor(lo)
            if math.floor(hi) == k:
                return k
        u.refine(source)
    raise RuntimeError("exact floor did not resolve: please report this as a bug")
