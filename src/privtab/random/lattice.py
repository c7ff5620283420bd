"""Real-valued Gaussian and Laplace noise, sampled exactly on a fine dyadic lattice.

Textbook samplers (Box–Muller, ``−b·ln U`` inverse CDF) produce floating-point values whose
low-order bits leak the noiseless input (Mironov 2012). privtab never samples real noise
that way. :func:`gaussian` and :func:`laplace` return ``γ·Z`` for an *exact* integer sample
``Z`` (:func:`~privtab.random.discrete_gaussian` / :func:`~privtab.random.discrete_laplace`
with scale ``scale/γ``) and a power of two ``γ`` (default: ``scale/γ ∈ [2⁴⁰, 2⁴¹)``). So

* every output is an exactly representable float64 on the lattice ``γℤ`` (``|Z| < 2⁵³``),
  and its distribution is *exactly* the discrete Gaussian (Laplace) on ``γℤ``;
* at the default lattice (2⁻⁴⁰ of the scale) that law is indistinguishable from the
  continuous one at any practical sample size (total-variation distance ≈ 2⁻⁴⁰·const).

Privacy analyses treat the output as the lattice law: adding it to values *on the lattice*
(integers, or anything snapped to ``γℤ``) gives the discrete mechanism's guarantee with the
sensitivity measured on the lattice; :mod:`privtab.mechanisms` snaps inputs and accounts
for the snapping.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from privtab.random._util import Size
from privtab.random.gaussian_sampler import discrete_gaussian
from privtab.random.laplace_sampler import MAX_SCALE, discrete_laplace
from privtab.random.rational import RationalLike, as_rational
from privtab.random.sources import RandomSource

__all__ = ["LATTICE_BITS", "default_granularity", "gaussian", "laplace"]

#: Default lattice: the spacing is the largest power of two ≤ scale · 2⁻⁴⁰.
LATTICE_BITS = 40


def default_granularity(scale: RationalLike) -> Fraction:
    """The default lattice spacing for real-valued noise of the given scale.

    The largest power of two ``γ`` with ``scale/γ ≥ 2⁴⁰`` (so ``scale/γ ∈ [2⁴⁰, 2⁴¹)``).
    """
    s = as_rational(scale, "scale", positive=True)
    k = LATTICE_BITS - (s.numerator.bit_length() - s.denominator.bit_length())
    gamma = Fraction(2) ** (-k)
    while s / gamma < 1 << LATTICE_BITS:
        gamma /= 2
    while s / (gamma * 2) >= 1 << LATTICE_BITS:
        gamma *= 2
    return gamma


def _granularity(granularity: RationalLike | None, scale: Fraction) -> Fraction:
    if granularity is None:
        return default_granularity(scale)
    g = as_rational(granularity, "granularity", positive=True)
    num, den = g.numerator, g.denominator
    if (num != 1 and den != 1) or (num & (num - 1)) or (den & (den - 1)):
        raise ValueError(f"granularity must be a power of two (e.g. 2**-30), got {granularity!r}")
    if scale / g > MAX_SCALE:
        raise ValueError(
            f"granularity {granularity!r} is too fine for scale {float(scale):.6g}: "
            "scale/granularity must be at most 2**44"
        )
    return g


def _to_lattice(z: NDArray[np.int64], gamma: Fraction) -> NDArray[np.float64]:
    if z.size and int(np.abs(z).max()) >= 1 << 53:
        raise OverflowError("lattice sample does not fit a float64 exactly")
    exponent = gamma.numerator.bit_length() - gamma.denominator.bit_length()
    return np.ldexp(z.astype(np.float64), exponent)


def gaussian(
    sigma: RationalLike,
    size: Size,
    *,
    source: RandomSource | None = None,
    granularity: RationalLike | None = None,
) -> NDArray[np.float64]:
    """Gaussian noise of standard deviation ``sigma``, sampled exactly on a dyadic lattice.

    Returns ``γ·Z`` with ``Z ~ N_ℤ(σ²/γ²)`` exact (:func:`discrete_gaussian`) and ``γ`` a
    power of two (``granularity``; default :func:`default_granularity`, i.e. 2⁻⁴⁰ of σ).
    The output is exactly the discrete Gaussian on ``γℤ`` — a float64 array whose values
    are exact lattice points, free of the floating-point artefacts of Box–Muller or
    inverse-CDF samplers.
    """
    s = as_rational(sigma, "sigma", positive=True)
    gamma = _granularity(granularity, s)
    z = discrete_gaussian((s / gamma) ** 2, size, source=source)
    return _to_lattice(z, gamma)


def laplace(
    scale: RationalLike,
    size: Size,
    *,
    source: RandomSource | None = None,
    granularity: RationalLike | None = None,
) -> NDArray[np.float64]:
    """Laplace noise of scale ``scale``, sampled exactly on a dyadic lattice.

    Returns ``γ·Z`` with ``Z`` exact discrete Laplace of scale ``scale/γ``; see
    :func:`gaussian` for the lattice.
    """
    b = as_rational(scale, "scale", positive=True)
    gamma = _granularity(granularity, b)
    z = discrete_laplace(b / gamma, size, source=source)
    return _to_lattice(z, gamma)
