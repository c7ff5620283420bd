"""Randomness used by the invariant-aware mechanisms: a thin layer over :mod:`privtab.random`.

* :func:`gaussian` / :func:`laplace` — real-valued noise sampled *exactly* on a dyadic
  lattice (``privtab.random.lattice.gaussian`` / ``laplace``: an exact discrete Gaussian/Laplace
  scaled by a power of two ``γ ≈ 2⁻⁴⁰·scale``), so integer tables are lattice points and
  the discrete mechanism's analysis applies;
* :func:`discrete_laplace` — the exact integer sampler (Tulap noise);
* :func:`uniform_open` — uniforms on the open interval (0, 1) with 53 random bits
  (``(k + ½)·2⁻⁵³``), used by the K-norm samplers (rejection, Gamma radii, simplices).

The default source is :class:`privtab.random.SecureSource` (AES-256-CTR keyed from OS
entropy); :class:`privtab.random.SeededSource` is for tests only (``is_private`` False).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

import privtab.random.laplace_sampler as _laplace_sampler
import privtab.random.lattice as _lattice
from privtab.random import RandomSource, SeededSource
from privtab.random.sources import resolve_source

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

__all__ = [
    "NoiseSource",
    "SeededSource",
    "discrete_laplace",
    "gaussian",
    "laplace",
    "resolve_source",
    "round_up",
    "uniform_open",
]

NoiseSource = RandomSource


def uniform_open(size: int, source: RandomSource | None = None) -> FloatArray:
    """``size`` uniforms on (0, 1): ``(k + ½)·2⁻⁵³`` with ``k`` 53 uniform random bits."""
    words = resolve_source(source).random_uint64(int(size))
    k = (words >> np.uint64(11)).astype(np.int64).astype(np.float64)
    return np.asarray((k + 0.5) * 2.0**-53, dtype=np.float64)


def round_up(scale: float) -> float:
    """A noise scale computed in floating point (a few roundings, each ≤ ½ ulp), moved up by
    2⁻⁵⁰ relative so that the scale used is never below the exact one: rounding only ever
    adds noise."""
    return float(scale) * (1.0 + 2.0**-50)


def gaussian(sigma: float, size: int, *, source: RandomSource | None = None) -> FloatArray:
    """N(0, σ²) noise, exact on the lattice ``γℤ`` (:func:`privtab.random.lattice.gaussian`),
    σ rounded up."""
    out = _lattice.gaussian(round_up(sigma), int(size), source=source)
    return np.asarray(out, dtype=np.float64)


def laplace(scale: float, size: int, *, source: RandomSource | None = None) -> FloatArray:
    """Laplace noise, exact on the lattice ``γℤ`` (:func:`privtab.random.lattice.laplace`),
    scale rounded up."""
    out = _lattice.laplace(round_up(scale), int(size), source=source)
    return np.asarray(out, dtype=np.float64)


def discrete_laplace(
    scale: float | Fraction, size: int, *, source: RandomSource | None = None
) -> IntArray:
    """Integers with pmf ∝ exp(−|x|/scale), exactly (``privtab.random.discrete_laplace``);
    pass a :class:`~fractions.Fraction` for an exact rational scale."""
    return np.asarray(
        _laplace_sampler.discrete_laplace(scale, int(size), source=source), dtype=np.int64
    )
