"""Noise mechanisms that know their guarantee and their error.

Quick start::

    >>> from privtab.mechanisms import Geometric, DiscreteGaussian, Laplace
    >>> g = Geometric(epsilon=0.5)                # ε-DP, pmf ∝ exp(−0.5|x|)
    >>> g.guarantee, g.moe(0.95)
    (PureDP(epsilon=0.5), 6)
    >>> DiscreteGaussian(rho=0.5).guarantee
    ZCDP(rho=0.5)
    >>> lo, hi = Laplace(epsilon=10).confidence_interval(4, 0.9)   # course Q12: (3.77, 4.23)
    >>> round(lo, 4), round(hi, 4)
    (3.7697, 4.2303)

Every mechanism exposes ``guarantee`` (a :mod:`privtab.accounting` object), ``rdp``, its
noise ``law`` (:class:`NoiseLaw`) and, from it, ``variance``, the exact noise CDF and
quantiles, the exact margin of error ``moe(level)``, ``confidence_interval(value, level)``
and ``release(values)``, which uses the secure source and refuses insecure ones unless
``allow_insecure=True`` (the release is then marked ``private: false``).
:func:`mechanism_from_spec` builds one from a name; :class:`LinearNoise` is the exact law
of a linear combination of independent noises (sums of cells, differences, weighted
combinations); ``check_noise_parameter`` and ``MIN_EPSILON`` … ``MAX_RHO`` state the
supported per-count parameters (:mod:`privtab.mechanisms.ranges`); the laws themselves are
in :mod:`privtab.mechanisms.laws`. Calibration from
margin-of-error targets — exact, or the SafeTab paper's closed forms — is in
:mod:`privtab.mechanisms.calibration`; sensitivities of matrix queries in
:mod:`privtab.mechanisms.sensitivity`. See ``docs/mechanisms.md``.
"""

from privtab.mechanisms.base import InsecureReleaseWarning, InsecureSourceError, NoiseMechanism
from privtab.mechanisms.continuous import Gaussian, Laplace
from privtab.mechanisms.discrete_gaussian import DiscreteGaussian
from privtab.mechanisms.factory import mechanism_from_spec
from privtab.mechanisms.geometric import Geometric
from privtab.mechanisms.laws import NoiseLaw
from privtab.mechanisms.linear import LinearNoise
from privtab.mechanisms.randomized_response import RandomizedResponse

__all__ = [
    "DiscreteGaussian",
    "Gaussian",
    "Geometric",
    "InsecureReleaseWarning",
    "InsecureSourceError",
    "Laplace",
    "LinearNoise",
    "NoiseLaw",
    "NoiseMechanism",
    "RandomizedResponse",
    "mechanism_from_spec",
]
