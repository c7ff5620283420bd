"""Privacy guarantee types: pure, approximate, zero-concentrated, Rényi and Gaussian DP.

Each type is an immutable value object that validates its parameters on construction
(a negative, infinite or NaN parameter is a :class:`ValueError` naming the parameter).

Definitions (for neighbouring datasets ``x ~ x'`` and a mechanism ``M``):

* :class:`PureDP` ``(ε)``: ``P[M(x) ∈ S] ≤ e^ε P[M(x') ∈ S]`` for every event ``S``.
* :class:`ApproxDP` ``(ε, δ)``: ``P[M(x) ∈ S] ≤ e^ε P[M(x') ∈ S] + δ``.
* :class:`ZCDP` ``(ρ)``: ``D_α(M(x) ‖ M(x')) ≤ ρα`` for all ``α > 1`` (Bun & Steinke 2016).
* :class:`RDP` ``(τ(·))``: ``D_α(M(x) ‖ M(x')) ≤ τ(α)`` for all ``α > 1`` (Mironov 2017).
* :class:`GDP` ``(μ)``: testing ``x`` against ``x'`` is at least as hard as telling
  ``N(0, 1)`` from ``N(μ, 1)`` (Dong, Roth & Su 2019).

See ``safetab-detailed-dhc-race-ethnicity.txt`` App. A and
``semantics-of-dp-variants-2020-census.txt`` §4–5.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import Field, dataclass, fields
from typing import Any, ClassVar, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray: TypeAlias = NDArray[np.float64]
CurveFn: TypeAlias = Callable[[FloatArray], FloatArray]

__all__ = [
    "GDP",
    "RDP",
    "ZCDP",
    "ApproxDP",
    "Guarantee",
    "PureDP",
    "check_parameter",
]


def check_parameter(
    name: str, value: float, *, upper: float | None = None, allow_inf: bool = False
) -> float:
    """Validate a non-negative real privacy parameter and return it as ``float``.

    Raises :class:`ValueError` naming ``name`` when the value is NaN, negative,
    infinite (unless ``allow_inf``) or above ``upper``.
    """
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a real number, got {value!r}") from exc
    if math.isnan(v):
        raise ValueError(f"{name} must be a number, got NaN")
    if v < 0:
        raise ValueError(f"{name} must be non-negative, got {v!r}")
    if math.isinf(v) and not allow_inf:
        raise ValueError(f"{name} must be finite, got {v!r}")
    if upper is not None and v > upper:
        raise ValueError(f"{name} must be at most {upper}, got {v!r}")
    return v


_PARAMETER_NAMES: dict[type, tuple[str, ...]] = {}


def _parameter_names(cls: type[_Parameters]) -> tuple[str, ...]:
    names = _PARAMETER_NAMES.get(cls)
    if names is None:
        names = _PARAMETER_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


class _Parameters:
    """Base of the parameter guarantees: every field is checked by :func:`check_parameter`
    (``delta`` at most 1) and the guarantee prints as its :attr:`_FORMAT`."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
    _FORMAT: ClassVar[str]

    def __post_init__(self) -> None:
        for name in _parameter_names(type(self)):
            upper = 1.0 if name == "delta" else None
            object.__setattr__(self, name, check_parameter(name, getattr(self, name), upper=upper))

    def __str__(self) -> str:
        """The guarantee with its privacy parameters (ε, ρ, μ) rounded *up* to 6
        significant digits (:func:`privtab.report.round_up_sig`: never below the value);
        δ as given."""
        from privtab.report import round_up_sig

        shown = {
            name: getattr(self, name) if name == "delta" else round_up_sig(getattr(self, name))
            for name in _parameter_names(type(self))
        }
        return self._FORMAT.format(**shown)


@dataclass(frozen=True)
class PureDP(_Parameters):
    """ε-differential privacy (pure DP). Dwork, McSherry, Nissim & Smith (2006)."""

    epsilon: float
    _FORMAT: ClassVar[str] = "{epsilon}-DP"


@dataclass(frozen=True)
class ApproxDP(_Parameters):
    """(ε, δ)-differential privacy (approximate DP). Dwork et al. (2006)."""

    epsilon: float
    delta: float
    _FORMAT: ClassVar[str] = "({epsilon}, {delta:.3g})-DP"


@dataclass(frozen=True)
class ZCDP(_Parameters):
    """ρ-zero-concentrated DP: ``D_α ≤ ρα`` for every order ``α > 1`` (Bun & Steinke 2016)."""

    rho: float
    _FORMAT: ClassVar[str] = "{rho}-zCDP"


@dataclass(frozen=True)
class GDP(_Parameters):
    """μ-Gaussian DP (Dong, Roth & Su 2019): trade-off at least ``G_μ(a) = Φ(Φ⁻¹(1−a) − μ)``."""

    mu: float
    _FORMAT: ClassVar[str] = "{mu}-GDP"


def _tabulated_curve(alphas: FloatArray, taus: FloatArray) -> CurveFn:
    """A valid upper-bound curve from RDP values known at finitely many orders.

    Between tabulated orders the function ``(α−1)·D_α`` is convex in ``α`` (it is a
    cumulant generating function), so linear interpolation of ``(α−1)τ`` is an upper
    bound. Below the smallest order ``D_α`` is non-decreasing in ``α``, so ``τ(α_min)``
    bounds it. Above the largest order nothing is known: the curve is ``+inf`` there.
    """
    scaled = (alphas - 1.0) * taus

    def curve(alpha: FloatArray) -> FloatArray:
        a = np.asarray(alpha, dtype=np.float64)
        inner = np.interp(a, alphas, scaled) / np.maximum(a - 1.0, 1e-300)
        out = np.where(a <= alphas[0], taus[0], inner)
        return np.where(a > alphas[-1], np.inf, out).astype(np.float64)

    return curve


@dataclass(frozen=True)
class RDP:
    """Rényi DP: ``D_α(M(x) ‖ M(x')) ≤ τ(α)`` for every ``α > 1`` (Mironov 2017).

    ``curve`` maps an array of orders ``α > 1`` to the bound ``τ(α)``. Build one from a
    closed form with ``RDP(fn, "name")`` or from a table with :meth:`RDP.tabulated`.
    ``limit`` is ``τ(∞) = lim_{α→∞} τ(α)`` when it is known and finite: the curve then also
    implies ``limit``-DP (``D_∞`` is the limit of ``D_α``), and the conversions to (ε, δ)
    use that order too (:func:`privtab.accounting.conversions.rdp_epsilon_order` reports ``α = ∞``).
    """

    curve: CurveFn
    description: str = "rdp curve"
    limit: float | None = None

    def __post_init__(self) -> None:
        if not callable(self.curve):
            raise ValueError(f"curve must be callable α ↦ τ(α), got {self.curve!r}")
        if self.limit is not None and not (math.isfinite(self.limit) and self.limit >= 0):
            raise ValueError(f"limit (τ(∞)) must be a finite number ≥ 0, got {self.limit!r}")
        probe = np.array([1.5, 2.0, 8.0, 64.0])
        values = np.asarray(self.curve(probe), dtype=np.float64)
        if values.shape != probe.shape:
            raise ValueError("curve must map an array of orders to an array of the same shape")
        if np.any(np.isnan(values)):
            raise ValueError("curve (τ(α)) is NaN at a tested order")
        if np.any(values < -1e-12):
            raise ValueError(f"curve (τ(α)) must be non-negative, got {values.tolist()}")

    @classmethod
    def tabulated(
        cls, alphas: Sequence[float] | ArrayLike, taus: Sequence[float] | ArrayLike
    ) -> RDP:
        """An RDP guarantee known at finitely many orders (see :func:`_tabulated_curve`)."""
        a = np.asarray(alphas, dtype=np.float64)
        t = np.asarray(taus, dtype=np.float64)
        if a.ndim != 1 or a.shape != t.shape or a.size == 0:
            raise ValueError("alphas and taus must be 1-d arrays of the same non-zero length")
        if np.any(np.isnan(a)) or np.any(a <= 1.0):
            raise ValueError("alphas must all be > 1")
        if np.any(np.isnan(t)) or np.any(t < 0):
            raise ValueError("taus must be non-negative numbers")
        order = np.argsort(a)
        a, t = a[order], t[order]
        if np.any(np.diff(a) == 0):
            raise ValueError("alphas must be distinct")
        return cls(_tabulated_curve(a, t), f"tabulated RDP at {a.size} orders")

    def __call__(self, alpha: ArrayLike) -> FloatArray:
        """Evaluate ``τ(α)`` (vectorised). Orders must be > 1."""
        a = np.asarray(alpha, dtype=np.float64)
        if np.any(np.isnan(a)) or np.any(a <= 1.0):
            raise ValueError(f"alpha must be > 1, got {alpha!r}")
        return np.asarray(self.curve(a), dtype=np.float64)

    def __str__(self) -> str:
        return f"RDP({self.description})"


Guarantee: TypeAlias = PureDP | ApproxDP | ZCDP | RDP | GDP
