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
strings such as ``"1/3"`` exactly: :data:`RationalLike`, :mod:`privtab.random.rational`).
Further samplers (``geometric``, the lattice ``laplace``/``gaussian``, ``bernoulli*``,
``uniform_int``) live in their modules. See ``docs/random.md`` for the methods and proofs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from privtab.random.gaussian_sampler import discrete_gaussian
    from privtab.random.laplace_sampler import discrete_laplace
    from privtab.random.rational import RationalLike
    from privtab.random.sources import RandomSource, SecureSource, SeededSource

__all__ = [
    "RandomSource",
    "RationalLike",
    "SecureSource",
    "SeededSource",
    "discrete_gaussian",
    "discrete_laplace",
]

_WHERE = {
    "RandomSource": "sources",
    "RationalLike": "rational",
    "SecureSource": "sources",
    "SeededSource": "sources",
    "discrete_gaussian": "gaussian_sampler",
    "discrete_laplace": "laplace_sampler",
}


def __getattr__(name: str) -> Any:
    # names load on first use, so that ``privtab.random.rational`` (used by
    # privtab.accounting) does not pull in the samplers and mpmath
    if name in _WHERE:
        value = getattr(importlib.import_module(f"privtab.random.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'privtab.random' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
