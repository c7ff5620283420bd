"""Laplace and Gaussian mechanisms for real-valued queries, without floating-point leaks.

Textbook implementations add ``b·(−ln U)``-style floats to the true value; the set of
floats such a sampler can output depends on the input, which leaks it (Mironov 2012).
privtab instead works on the lattice ``γℤ`` for a power of two ``γ`` (by default the
largest with ``scale/γ ≥ 2⁴⁰``, see :func:`privtab.random.lattice.default_granularity`):

1. the true values are snapped to the lattice, ``s(v) = γ·⌊v/γ + ½⌋``;
2. exact integer noise ``Z`` is drawn — discrete Laplace of scale ``b/γ``, or discrete
   Gaussian of variance ``σ²/γ²`` (:mod:`privtab.random`);
3. the output is ``s(v) + γZ``, computed exactly in float64.

The noise law is exactly the Laplace (Gaussian) law on ``γℤ``. For inputs already on the
lattice (integers, whenever ``γ ≤ 1``) snapping does nothing and the guarantee is the
discrete mechanism's with the same sensitivity: ε = Δ/b, ρ = Δ²/(2σ²) — the continuous
mechanisms' values. For other inputs snapping can move two neighbouring values' difference
by up to 2γ per coordinate, so a release of ``n`` values of an L1 (L2) sensitivity-Δ
query is charged with sensitivity ``Δ + 2γn`` (``Δ + 2γ√n``); the :class:`Release` states
the guarantee actually achieved (at the default lattice the increase is ~n·2⁻³⁹ of ε for
Laplace). Error figures (variance, margin of error) are those of the lattice law, which
differ from the continuous ones by about 2⁻⁴⁰ relative.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privtab.accounting import RDP, ZCDP, Guarantee, PureDP
from privtab.accounting.curves import geometric_rdp_divergence
from privtab.accounting.guarantees import FloatArray
from privtab.mechanisms.base import NoiseMechanism, PureDPMechanism, ZCDPMechanism, float_up
from privtab.mechanisms.laws import DiscreteGaussianLaw, DiscreteLaplaceLaw
from privtab.random import RationalLike
from privtab.random.lattice import check_granularity, from_lattice
from privtab.random.rational import as_rational
from privtab.report import round_up_sig

__all__ = ["Gaussian", "Laplace", "snap_to_lattice"]


def snap_to_lattice(
    values: ArrayLike, granularity: Fraction, mechanism: str
) -> tuple[NDArray[np.int64], bool]:
    """Lattice indices ``⌊v/γ + ½⌋`` of real ``values`` and whether all were on the lattice."""
    arr = np.asarray(values, dtype=np.float64)
    if not np.isfinite(arr).all():
        idx = int(np.flatnonzero(~np.isfinite(arr.ravel()))[0])
        raise ValueError(f"{mechanism}: value at flat index {idx} is not finite")
    exponent = granularity.numerator.bit_length() - granularity.denominator.bit_length()
    z = np.ldexp(arr, -exponent)
    if z.size and float(np.abs(z).max()) >= 2.0**51:
        raise ValueError(
            f"{mechanism}: values up to {float(np.abs(arr).max()):.6g} are too large for the "
            f"lattice of spacing {float(granularity):.3g} (choose a coarser granularity)"
        )
    k = np.floor(z + 0.5)
    return k.astype(np.int64), bool((k == z).all())


class _LatticeMechanism(NoiseMechanism):
    """A mechanism on the lattice ``γℤ``: values are snapped to it and taken off it."""

    granularity: Fraction

    def _to_lattice(self, values: ArrayLike) -> tuple[NDArray[np.int64], bool]:
        return snap_to_lattice(values, self.granularity, self.name)

    def _from_lattice(self, k: NDArray[np.int64]) -> NDArray[np.float64]:
        return from_lattice(k, self.granularity, "noisy value")

    def _release_guarantee(self, n: int, on_lattice: bool) -> tuple[Guarantee, dict[str, Any]]:
        """The mechanism's guarantee for values on the lattice; off it, the one at the
        sensitivity snapping can reach (:meth:`_snapped_guarantee`, module docstring)."""
        extra: dict[str, Any] = {"snapped": not on_lattice}
        if on_lattice:
            return self.guarantee, extra
        extra["sensitivity_effective"], guarantee = self._snapped_guarantee(n)
        return guarantee, extra

    @abstractmethod
    def _snapped_guarantee(self, n: int) -> tuple[float, Guarantee]:
        """The effective sensitivity of a release of ``n`` snapped values and its guarantee."""


class Laplace(_LatticeMechanism, PureDPMechanism):
    """ε-DP Laplace mechanism for real-valued queries of L1 sensitivity Δ (course §2.3).

    Noise is exactly the Laplace law of scale ``b = Δ/ε`` on the lattice ``γℤ`` (see the
    module docstring); the guarantee is ε-DP for values on the lattice (e.g. counts) and
    is stated per release otherwise.

    >>> lo, hi = Laplace(1.0).confidence_interval(4, 0.9)   # course Q11: (1.7, 6.3)
    >>> round(lo, 4), round(hi, 4)
    (1.6974, 6.3026)
    """

    name = "laplace"

    def __init__(
        self,
        epsilon: RationalLike,
        sensitivity: RationalLike = 1,
        *,
        granularity: RationalLike | None = None,
    ) -> None:
        self.epsilon_exact = as_rational(epsilon, "epsilon", positive=True)
        self.sensitivity_exact = as_rational(sensitivity, "sensitivity", positive=True)
        self.scale_exact = self.sensitivity_exact / self.epsilon_exact
        self.granularity = check_granularity(granularity, self.scale_exact)
        self.law: DiscreteLaplaceLaw = DiscreteLaplaceLaw(
            self.scale_exact / self.granularity, self.granularity
        )

    def __repr__(self) -> str:
        return (
            f"Laplace(epsilon={float(self.epsilon_exact)!r}, "
            f"sensitivity={float(self.sensitivity_exact)!r})"
        )

    @property
    def rdp(self) -> RDP:
        """The exact Rényi curve of the lattice Laplace law at the largest lattice shift
        ≤ Δ (it tends to Mironov's continuous-Laplace curve as the lattice refines)."""
        shift = math.floor(self.sensitivity_exact / self.granularity)
        per_step = float(self.granularity / self.scale_exact)
        if shift < 1:
            return RDP(lambda a: np.zeros_like(a), "laplace below lattice resolution", limit=0.0)

        def curve(alpha: FloatArray) -> FloatArray:
            return geometric_rdp_divergence(alpha, per_step, shift)

        limit = float_up(Fraction(shift) * self.granularity / self.scale_exact)
        return RDP(curve, f"laplace eps={round_up_sig(self.epsilon)} (exact, lattice)", limit=limit)

    def parameters(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "sensitivity": float(self.sensitivity_exact),
            "scale": self.scale,
            "granularity": float(self.granularity),
        }

    def _snapped_guarantee(self, n: int) -> tuple[float, Guarantee]:
        """Sensitivity ``Δ + 2γn`` (module docstring), rounded up, and its ε-DP."""
        eff = self.sensitivity_exact + 2 * self.granularity * max(n, 1)
        return float_up(eff), PureDP(float_up(eff / self.scale_exact))


class Gaussian(_LatticeMechanism, ZCDPMechanism):
    """ρ-zCDP Gaussian mechanism for real-valued queries of L2 sensitivity Δ.

    Noise is exactly the Gaussian law of variance ``σ² = Δ²/(2ρ)`` on the lattice ``γℤ``
    (see the module docstring): ρ-zCDP for values on the lattice, stated per release
    otherwise (CKS 2020 Thm. 4 applied on the lattice).
    """

    name = "gaussian"

    def __init__(
        self,
        rho: RationalLike,
        sensitivity: RationalLike = 1,
        *,
        granularity: RationalLike | None = None,
    ) -> None:
        self.rho_exact = as_rational(rho, "rho", positive=True)
        self.sensitivity_exact = as_rational(sensitivity, "sensitivity", positive=True)
        self.sigma2_exact = self.sensitivity_exact**2 / (2 * self.rho_exact)
        sigma_approx = Fraction(math.sqrt(float(self.sigma2_exact)))
        self.granularity = check_granularity(granularity, sigma_approx)
        self.law: DiscreteGaussianLaw = DiscreteGaussianLaw(
            self.sigma2_exact / self.granularity**2, self.granularity
        )

    @classmethod
    def from_sigma(cls, sigma: RationalLike, sensitivity: RationalLike = 1) -> Gaussian:
        """The mechanism with noise standard deviation σ: ρ = Δ²/(2σ²)."""
        s = as_rational(sigma, "sigma", positive=True)
        d = as_rational(sensitivity, "sensitivity", positive=True)
        return cls(d * d / (2 * s * s), d)

    def parameters(self) -> dict[str, Any]:
        return {
            "rho": self.rho,
            "sensitivity": float(self.sensitivity_exact),
            "sigma": self.sigma,
            "granularity": float(self.granularity),
        }

    def _snapped_guarantee(self, n: int) -> tuple[float, Guarantee]:
        """Sensitivity ``Δ + 2γ√n`` (module docstring), rounded up, and its ρ-zCDP."""
        eff = float(self.sensitivity_exact) + 2 * float(self.granularity) * math.sqrt(max(n, 1))
        eff = math.nextafter(eff * (1 + 2.0**-50), math.inf)
        return eff, ZCDP(float_up(Fraction(eff) ** 2 / (2 * self.sigma2_exact)))
