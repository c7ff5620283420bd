"""Randomness used by the invariant-aware mechanisms (interim adapter).

INTERIM: ``privtab.random`` (exact samplers over a secure source) is being built in
parallel; until it lands every mechanism here draws through this module, whose functions
have the same names and signatures as ``privtab.random``'s, so wiring it in is a one-file
change. The interim secure source reads ``os.urandom``; :class:`SeededNoise` is for tests.
"""

from __future__ import annotations

import math
import os
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

__all__ = [
    "NoiseSource",
    "SeededNoise",
    "discrete_laplace",
    "gaussian",
    "laplace",
    "resolve_source",
    "uniform_open",
]


class NoiseSource(Protocol):
    """A source of uniform floats; ``is_private`` is False for test-only sources."""

    is_private: bool

    def random(self, size: int) -> FloatArray: ...


class _OSUniform:
    is_private = True

    def random(self, size: int) -> FloatArray:
        raw = np.frombuffer(os.urandom(8 * int(size)), dtype=np.uint64)
        return np.asarray((raw >> np.uint64(11)).astype(np.float64) * 2.0**-53, dtype=np.float64)


class SeededNoise:
    """Reproducible uniforms for tests and examples only (``is_private`` is False)."""

    is_private = False

    def __init__(self, seed: int) -> None:
        self._rng = np.random.Generator(np.random.PCG64(seed))

    def random(self, size: int) -> FloatArray:
        return np.asarray(self._rng.random(int(size)), dtype=np.float64)


_DEFAULT: NoiseSource | None = None


def resolve_source(source: NoiseSource | None) -> NoiseSource:
    global _DEFAULT
    if source is not None:
        return source
    if _DEFAULT is None:
        _DEFAULT = _OSUniform()
    return _DEFAULT


def uniform_open(size: int, source: NoiseSource | None = None) -> FloatArray:
    """Uniform on the open interval (0, 1) (zeros redrawn)."""
    src = resolve_source(source)
    u = src.random(size)
    while np.any(u == 0.0):
        bad = u == 0.0
        u[bad] = src.random(int(bad.sum()))
    return u


def _lattice(scale: float) -> float:
    return 2.0 ** (math.floor(math.log2(scale)) - 40)


def gaussian(sigma: float, size: int, *, source: NoiseSource | None = None) -> FloatArray:
    """N(0, σ²) noise on the lattice 2⁻⁴⁰σ·ℤ (interim: Box–Muller then snapped)."""
    u1 = uniform_open(size, source)
    u2 = uniform_open(size, source)
    z = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2) * sigma
    g = _lattice(sigma)
    return np.asarray(np.round(z / g) * g, dtype=np.float64)


def discrete_laplace(scale: float, size: int, *, source: NoiseSource | None = None) -> IntArray:
    """Integers with pmf ∝ exp(−|x|/scale) (interim: difference of two geometrics)."""
    log_b = -1.0 / scale
    g1 = np.floor(np.log(uniform_open(size, source)) / log_b)
    g2 = np.floor(np.log(uniform_open(size, source)) / log_b)
    return (g1 - g2).astype(np.int64)


def laplace(scale: float, size: int, *, source: NoiseSource | None = None) -> FloatArray:
    """Laplace(scale) noise on the lattice 2⁻⁴⁰·scale·ℤ (interim)."""
    g = _lattice(scale)
    return np.asarray(discrete_laplace(scale / g, size, source=source).astype(np.float64) * g)
