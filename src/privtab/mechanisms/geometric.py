"""The geometric mechanism (two-sided geometric / discrete Laplace noise) for integer queries.

SafeTab seed Def. 6 and Alg. 4 (``BaseGeometric``); course seed Defs. 9–10. For a query
with integer values and L1 sensitivity Δ, adding ``X`` with ``P(X = x) ∝ e^{−ε|x|/Δ}`` to
each value is ε-DP (pure). Its exact Rényi curve is
:func:`privtab.accounting.curves.geometric_rdp` (the SafeTab paper's Cor. 1 understates it).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Literal

import numpy as np

from privtab.accounting import RDP
from privtab.accounting.curves import geometric_rdp
from privtab.mechanisms.base import PureDPMechanism
from privtab.mechanisms.laws import DiscreteLaplaceLaw
from privtab.mechanisms.ranges import check_scale
from privtab.random import RationalLike
from privtab.random.rational import as_rational

__all__ = ["Geometric", "positive_int"]


def positive_int(value: int, name: str) -> int:
    """Validate a positive integer parameter."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or int(value) < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


class Geometric(PureDPMechanism):
    """ε-DP geometric mechanism: integer noise with pmf ∝ ``exp(−ε|x|/Δ)``.

    ``epsilon`` is exact (a float is taken at its binary value); ``sensitivity`` is the
    query's L1 sensitivity Δ (a positive integer: differences of integer vectors have
    integer L1 norms). Noise scale ``b = Δ/ε`` (the seed's ``1/ε`` at Δ = 1). The variance
    is ``2r/(1−r)²`` with ``r = e^{−ε/Δ}`` (course seed Defs. 9–10); :meth:`moe` is the
    exact margin of error (SafeTab Cor. 2's ``⌊b·ln(40/(1+e^{1/b}))⌋`` is one too small,
    see :func:`privtab.mechanisms.calibration.paper_geometric_moe`). A release adds the noise to
    integer values: ε-DP per query of L1 sensitivity Δ.

    >>> g = Geometric(1.0)
    >>> g.moe(0.95), round(g.variance, 6)
    (3, 1.841347)
    """

    name = "geometric"

    def __init__(self, epsilon: RationalLike, sensitivity: int = 1) -> None:
        self.epsilon_exact = as_rational(epsilon, "epsilon", positive=True)
        self.sensitivity = positive_int(sensitivity, "sensitivity")
        self.scale_exact = Fraction(self.sensitivity) / self.epsilon_exact
        check_scale("epsilon", self.scale_exact, epsilon)
        self.law: DiscreteLaplaceLaw = DiscreteLaplaceLaw(self.scale_exact)

    @classmethod
    def from_scale(cls, scale: RationalLike, sensitivity: int = 1) -> Geometric:
        """The mechanism with noise scale ``b`` (pmf ∝ e^{−|x|/b}): ε = Δ/b."""
        b = as_rational(scale, "scale", positive=True)
        return cls(positive_int(sensitivity, "sensitivity") / b, sensitivity)

    @classmethod
    def for_moe(
        cls,
        moe: float,
        level: RationalLike = 0.95,
        sensitivity: int = 1,
        method: Literal["exact", "paper"] = "exact",
    ) -> Geometric:
        """The mechanism calibrated to a margin-of-error target (see
        :func:`privtab.mechanisms.calibration.geometric_epsilon_for_moe`)."""
        from privtab.mechanisms.calibration import geometric_epsilon_for_moe

        eps = geometric_epsilon_for_moe(moe, level, sensitivity=sensitivity, method=method)
        return cls(eps, sensitivity)

    def __repr__(self) -> str:
        return f"Geometric(epsilon={float(self.epsilon_exact)!r}, sensitivity={self.sensitivity})"

    @property
    def rdp(self) -> RDP:
        return geometric_rdp(self.epsilon, self.sensitivity)

    @property
    def p(self) -> float:
        """``p = 1 − e^{−ε/Δ}``: the two-sided geometric parameter of the course seed
        (Defs. 9–10, used in its Q10) — the noise is the difference of two independent
        geometric variables with success probability ``p``, its variance ``2(1−p)/p²``
        (SafeTab seed Def. 6 writes the pmf as ``(1−α)/(1+α)·α^{|x|}`` with ``α = 1 − p``)."""
        return self.law.p

    def parameters(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "sensitivity": self.sensitivity,
            "scale": self.scale,
        }
