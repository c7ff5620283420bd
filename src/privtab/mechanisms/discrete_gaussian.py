"""The discrete Gaussian mechanism for integer queries.

SafeTab seed Def. 7 and Alg. 5 (``BaseDiscreteGaussian``); Canonne, Kamath & Steinke (2020)
Thm. 4: adding ``X ~ N_ℤ(σ²)`` (pmf ∝ ``e^{−x²/(2σ²)}``) to an integer query of L2
sensitivity Δ is ``Δ²/(2σ²)``-zCDP. Given ρ the mechanism uses ``σ² = Δ²/(2ρ)`` exactly.
"""

from __future__ import annotations

from typing import Any, Literal

from privtab.mechanisms.base import ZCDPMechanism
from privtab.mechanisms.laws import DiscreteGaussianLaw
from privtab.mechanisms.ranges import check_sigma2
from privtab.random import RationalLike
from privtab.random.rational import as_rational

__all__ = ["DiscreteGaussian"]


class DiscreteGaussian(ZCDPMechanism):
    """ρ-zCDP discrete Gaussian mechanism: integer noise with pmf ∝ ``exp(−x²/(2σ²))``.

    ``rho`` is exact (a float is taken at its binary value); ``sensitivity`` is the query's
    L2 sensitivity Δ (any positive rational, e.g. ``2`` or the float ``math.sqrt(2)``);
    ``σ² = Δ²/(2ρ)`` exactly. The variance is the exact ``Σ x² e^{−x²/(2σ²)}/Z`` (slightly
    below σ², CKS Cor. 9); :meth:`moe` is exact (SafeTab Cor. 4's ``⌊1.96σ⌋`` is right at its
    calibrated points but not in general, e.g. σ = 0.5 or 29.95). A release adds the noise
    to integer values: ρ-zCDP for a query of L2 sensitivity Δ (the whole array is one
    query).

    >>> m = DiscreteGaussian(1.92 / 36)   # SafeTab's calibration for a 95% MOE of 6
    >>> m.moe(0.95)
    6
    """

    name = "discrete_gaussian"

    def __init__(self, rho: RationalLike, sensitivity: RationalLike = 1) -> None:
        self.rho_exact = as_rational(rho, "rho", positive=True)
        self.sensitivity_exact = as_rational(sensitivity, "sensitivity", positive=True)
        self.sigma2_exact = self.sensitivity_exact**2 / (2 * self.rho_exact)
        check_sigma2("rho", self.sigma2_exact, rho)
        self.law: DiscreteGaussianLaw = DiscreteGaussianLaw(self.sigma2_exact)

    @classmethod
    def from_sigma2(cls, sigma2: RationalLike, sensitivity: RationalLike = 1) -> DiscreteGaussian:
        """The mechanism with variance parameter ``σ²``: ρ = Δ²/(2σ²)."""
        s2 = as_rational(sigma2, "sigma2", positive=True)
        d = as_rational(sensitivity, "sensitivity", positive=True)
        return cls(d * d / (2 * s2), d)

    @classmethod
    def for_moe(
        cls,
        moe: float,
        level: RationalLike = 0.95,
        sensitivity: RationalLike = 1,
        method: Literal["exact", "paper"] = "exact",
    ) -> DiscreteGaussian:
        """The mechanism calibrated to a margin-of-error target (see
        :func:`privtab.mechanisms.calibration.discrete_gaussian_rho_for_moe`)."""
        from privtab.mechanisms.calibration import discrete_gaussian_rho_for_moe

        rho = discrete_gaussian_rho_for_moe(moe, level, sensitivity=sensitivity, method=method)
        return cls(rho, sensitivity)

    @property
    def sigma2(self) -> float:
        return float(self.sigma2_exact)

    def parameters(self) -> dict[str, Any]:
        return {
            "rho": self.rho,
            "sensitivity": float(self.sensitivity_exact),
            "sigma2": self.sigma2,
        }
