"""Noisy counts of a tabulation: the mechanism of one count, its exact cost, the error of sums.

A published count is either one draw of a per-count mechanism (:class:`CountNoise`: a
discrete Gaussian under zCDP, a geometric under pure DP, with its per-count ρ or ε) or a
sum of ``k`` i.i.d. draws of one (post-processing of noisy cells: a SafeTab-P T1 total of
a group with Sex × Age cells, a SafeTab-H marginal; no privacy cost). Its noise is then
the ``k``-fold convolution of the cell noise. :func:`count_error` gives the variance,
the exact 95 % margin of error (the smallest integer ``m`` with ``P(|noise| ≤ m) ≥ 0.95``)
and the exact coverage ``P(|noise| ≤ m)`` of either kind. For one draw the mechanism's own
exact MOE is used (:meth:`privtab.mechanisms.NoiseMechanism.moe`); for sums, the law of
the sum is :class:`privtab.mechanisms.LinearNoise` (the pmf's FFT raised to the ``k``-th
power, exact to about 1e-13, decided conservatively; at scales where that pmf would not
fit, the certified large-scale enclosure, whose MOE is never below the exact one).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from privtab.mechanisms.base import NoiseMechanism
from privtab.mechanisms.linear import LinearNoise

if TYPE_CHECKING:
    from privtab.accounting.exact import ExactGuarantee

__all__ = ["NOISE_OF", "CountError", "CountNoise", "count_error", "mechanism_cost"]

NoiseName = Literal["discrete_gaussian", "geometric"]
NOISE_OF: dict[str, NoiseName] = {"zcdp": "discrete_gaussian", "puredp": "geometric"}
"""The noise of each privacy definition of the Census configs (``privacy_defn``)."""

LEVEL = Fraction(19, 20)


@dataclass(frozen=True)
class CountError:
    """Noise of a released count: variance, exact 95 % MOE and its exact coverage."""

    variance: float
    moe95: int
    coverage: float


@lru_cache(maxsize=256)
def _sum_error(mech: NoiseMechanism, k: int) -> CountError:
    law = LinearNoise([(1, mech)] * k)
    m = int(law.moe(LEVEL))
    return CountError(k * mech.variance, m, law.central_mass(m))


def count_error(mech: NoiseMechanism, cells: int = 1) -> CountError:
    """Error of one draw of ``mech`` (``cells = 1``) or of the sum of ``cells`` i.i.d. draws."""
    if cells < 1:
        raise ValueError(f"cells must be at least 1, got {cells}")
    if cells == 1:
        m = int(mech.moe(LEVEL))
        return CountError(float(mech.variance), m, float(mech.law.coverage(m)))
    return _sum_error(mech, cells)


@dataclass(frozen=True)
class CountNoise:
    """The mechanism of one noisy count and its exact error.

    ``parameter`` is the per-count ρ (zCDP: discrete Gaussian, σ² = 1/(2ρ)) or ε (pure DP:
    geometric, pmf ∝ e^{−|x|/b}, b = 1/ε) of a sensitivity-1 count; ``noise_scale`` is σ²
    or b. Built by :meth:`build`, which refuses unsupported parameters (``ValueError``)."""

    noise: NoiseName
    parameter: Fraction
    mechanism: NoiseMechanism
    noise_scale: float
    variance: float
    moe95: int

    @classmethod
    def build(cls, privacy_defn: str, parameter: Fraction) -> CountNoise:
        """The per-count mechanism of ``privacy_defn`` (``zcdp`` / ``puredp``) with
        ``parameter``."""
        from privtab.mechanisms.factory import mechanism_from_spec

        if parameter <= 0:
            raise ValueError(f"parameter must be positive, got {parameter}")
        noise = NOISE_OF[privacy_defn]
        if privacy_defn == "zcdp":
            mech = mechanism_from_spec(noise, rho=parameter)
            scale = float(1 / (2 * parameter))
        else:
            mech = mechanism_from_spec(noise, epsilon=parameter)
            scale = float(1 / parameter)
        return cls(noise, parameter, mech, scale, float(mech.variance), int(mech.moe(LEVEL)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "noise": self.noise,
            "parameter": float(self.parameter),
            "parameter_exact": str(self.parameter),
            "noise_scale": self.noise_scale,
            "variance": self.variance,
            "moe95": self.moe95,
        }


def mechanism_cost(mech: NoiseMechanism) -> ExactGuarantee:
    """The exact guarantee of one draw of ``mech`` on a sensitivity-1 count: ρ of the
    discrete Gaussian or ε of the geometric, read from the mechanism object itself."""
    from privtab.accounting.exact import ExactGuarantee
    from privtab.mechanisms.discrete_gaussian import DiscreteGaussian
    from privtab.mechanisms.geometric import Geometric

    if isinstance(mech, DiscreteGaussian):
        return ExactGuarantee("zcdp", Fraction(mech.rho_exact))
    if isinstance(mech, Geometric):
        return ExactGuarantee("pure", Fraction(mech.epsilon_exact))
    raise TypeError(f"no exact guarantee for {type(mech).__name__}")
