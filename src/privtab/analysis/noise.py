"""Noise laws for analysis: the pmf of one discrete mechanism's noise, and re-exports.

The law of a linear combination of independent noises (:class:`LinearNoise`), the exact
margin of error of a mechanism (:func:`mechanism_moe`) and :func:`is_discrete` live in
:mod:`privtab.mechanisms.linear` — the one routine the release (``privtab.tabulate``) and
the analysis both use; mechanisms are built from names by
:func:`privtab.mechanisms.mechanism_from_spec`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from privtab.mechanisms.linear import LinearNoise, index_pmf, is_discrete, mechanism_moe

if TYPE_CHECKING:
    from privtab.mechanisms import NoiseMechanism

__all__ = ["LinearNoise", "discrete_pmf", "is_discrete", "mechanism_moe"]

_TAIL = 1e-18  # truncated tail mass of :func:`discrete_pmf`


def discrete_pmf(mechanism: NoiseMechanism) -> tuple[NDArray[np.float64], int]:
    """The pmf of a discrete mechanism's noise on ``[−M, M]`` and ``M``, where
    ``P(|noise| > M) ≤ 10⁻¹⁸`` (the law's closed-form tail bound). Read-only (cached)."""
    if not is_discrete(mechanism):
        raise TypeError(f"{mechanism!r} does not add integer noise")
    return index_pmf(mechanism.law, _TAIL)
