"""One way to build a mechanism from a name and parameters.

Plans (:class:`privtab.tabulate.plan.StagePlan`), the analysis of a release (its ``NOISE`` and
``NOISE_SCALE`` columns) and the CLI (``privtab analyze --mechanism``) all name a
mechanism and give either its privacy parameter or its noise scale; this is the one
function that turns that into a :class:`~privtab.mechanisms.NoiseMechanism`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

from privtab.random import RationalLike
from privtab.random.rational import as_rational

if TYPE_CHECKING:
    from privtab.mechanisms.base import NoiseMechanism

__all__ = ["MECHANISM_NAMES", "MechanismName", "mechanism_from_spec"]

MechanismName = Literal["laplace", "geometric", "gaussian", "discrete_gaussian"]
#: The names :func:`mechanism_from_spec` accepts.
MECHANISM_NAMES: tuple[MechanismName, ...] = (
    "laplace",
    "geometric",
    "gaussian",
    "discrete_gaussian",
)


def mechanism_from_spec(
    mechanism: str,
    *,
    epsilon: RationalLike | None = None,
    rho: RationalLike | None = None,
    sensitivity: RationalLike = 1,
    scale: RationalLike | None = None,
) -> NoiseMechanism:
    """A mechanism from its name and parameters (as plans, the CLI and release files give
    them).

    ``mechanism`` is ``laplace``, ``geometric`` (needs ``epsilon`` or ``scale`` = b),
    ``gaussian``, ``discrete_gaussian`` (need ``rho`` or ``scale`` = σ²); ``-`` may stand
    for ``_`` and case is ignored. Parameters are exact (a float at its binary value).
    Raises :class:`ValueError` naming the problem (unknown name, both or neither of the
    parameter and the scale, a non-integer sensitivity for the geometric mechanism, a
    parameter outside :mod:`privtab.mechanisms.ranges`).

    >>> mechanism_from_spec("geometric", epsilon=0.5)
    Geometric(epsilon=0.5, sensitivity=1)
    >>> mechanism_from_spec("discrete-gaussian", scale=8).rho
    0.0625
    """
    from privtab.mechanisms import DiscreteGaussian, Gaussian, Geometric, Laplace

    name = mechanism.lower().replace("-", "_")
    if name in ("laplace", "geometric"):
        if (epsilon is None) == (scale is None):
            raise ValueError(f"{name} needs exactly one of epsilon or scale")
        if name == "geometric":
            d = as_rational(sensitivity, "sensitivity", positive=True)
            if d.denominator != 1:
                raise ValueError("the geometric mechanism needs an integer sensitivity")
            if scale is not None:
                return Geometric.from_scale(scale, int(d))
            assert epsilon is not None
            return Geometric(epsilon, int(d))
        if scale is not None:
            eps = as_rational(sensitivity, "sensitivity", positive=True) / as_rational(
                scale, "scale", positive=True
            )
            return Laplace(eps, sensitivity)
        assert epsilon is not None
        return Laplace(epsilon, sensitivity)
    if name in ("gaussian", "discrete_gaussian"):
        if (rho is None) == (scale is None):
            raise ValueError(f"{name} needs exactly one of rho or scale (σ²)")
        if name == "discrete_gaussian":
            if scale is not None:
                return DiscreteGaussian.from_sigma2(scale, sensitivity)
            assert rho is not None
            return DiscreteGaussian(rho, sensitivity)
        if scale is not None:
            return Gaussian.from_sigma(math.sqrt(float(as_rational(scale, "scale"))), sensitivity)
        assert rho is not None
        return Gaussian(rho, sensitivity)
    raise ValueError(
        f"unknown mechanism {mechanism!r}: use laplace, geometric, gaussian or discrete_gaussian"
    )
