"""Secure randomness and exact, vectorised noise samplers.

Quick start::

    >>> from privtab.random import SeededSource, discrete_gaussian, discrete_laplace
    >>> x = discrete_laplace(10, 5, source=SeededSource(1))   # pmf ∝ exp(−|x|/10)
    >>> y = discrete_gaussian(100, 5, source=SeededSource(2))  # pmf ∝ exp(−x²/200)
    >>> x.dtype, y.shape
    (dtype('int64'), (5,))

Without ``source=`` every sampler uses the secure default (:class:`SecureSource`:
AES-256-CTR keyed from ``os.urandom``). :class:`SeededSource` is for tests only: its
``is_private`` is ``False`` and :mod:`privtab.mechanisms` refuses to release with it unless
told otherwise. Every sampler is exact — the output distribution equals the mathematical
one — and parameters are exact rationals (floats are taken at their exact binary value,
strings such as ``"1/3"`` exactly). See ``docs/random.md`` for the methods and proofs.
"""

from privtab.random._exact import exp_neg_enclosure
from privtab.random._rational import RationalLike, as_rational, round_rational
from privtab.random.gaussian_sampler import discrete_gaussian
from privtab.random.laplace_sampler import (
    MAX_LAPLACE_SCALE,
    MAX_SCALE,
    MIN_SCALE,
    discrete_laplace,
    geometric,
)
from privtab.random.lattice import LATTICE_BITS, default_granularity, gaussian, laplace
from privtab.random.sources import (
    OSEntropySource,
    RandomSource,
    SecureSource,
    SeededSource,
    default_source,
    resolve_source,
)
from privtab.random.uniform import bernoulli, bernoulli_certified, bernoulli_exp, uniform_int

__all__ = [
    "LATTICE_BITS",
    "MAX_LAPLACE_SCALE",
    "MAX_SCALE",
    "MIN_SCALE",
    "OSEntropySource",
    "RandomSource",
    "RationalLike",
    "SecureSource",
    "SeededSource",
    "as_rational",
    "bernoulli",
    "bernoulli_certified",
    "bernoulli_exp",
    "default_granularity",
    "default_source",
    "discrete_gaussian",
    "discrete_laplace",
    "exp_neg_enclosure",
    "gaussian",
    "geometric",
    "laplace",
    "resolve_source",
    "round_rational",
    "uniform_int",
]
