"""The common interface of noise mechanisms, and what a release carries.

A mechanism adds noise to the true answer of a query whose sensitivity is known. Every
mechanism object states

* its privacy guarantee as a :mod:`privtab.accounting` object (:attr:`guarantee`), and a
  Rényi curve (:attr:`rdp`) for tight composition;
* its error: :attr:`variance`, the exact noise CDF and quantiles, the exact margin of error
  :meth:`moe` and :meth:`confidence_interval` — all from its :attr:`law`, the one object
  that also draws the noise;
* how to use it: :meth:`release` on numpy arrays.

The release path is where secure randomness is enforced: :meth:`release` refuses a source
whose ``is_private`` is false (such as :class:`privtab.random.SeededSource`) unless the
caller passes ``allow_insecure=True``; the :class:`Release` it then returns says
``private: false`` and a :class:`InsecureReleaseWarning` is issued.
"""

from __future__ import annotations

import math
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privtab.accounting import RDP, ZCDP, Guarantee, PureDP
from privtab.accounting.conversions import zcdp_to_rdp
from privtab.mechanisms.laws import NoiseLaw
from privtab.random import RandomSource, RationalLike
from privtab.random.sources import resolve_source

__all__ = [
    "InsecureReleaseWarning",
    "InsecureSourceError",
    "NoiseMechanism",
    "PureDPMechanism",
    "Release",
    "ZCDPMechanism",
    "float_down",
    "float_up",
    "integer_values",
    "release_source",
]


class InsecureSourceError(RuntimeError):
    """A release was attempted with a source that is not cryptographically secure."""


class InsecureReleaseWarning(UserWarning):
    """A release was made with an insecure (seeded) source: it is marked ``private: false``."""


def float_up(value: Fraction) -> float:
    """The smallest float ≥ ``value`` (for stating privacy costs conservatively)."""
    f = float(value)
    if Fraction(f) < value:
        f = math.nextafter(f, math.inf)
    return f


def float_down(value: Fraction) -> float:
    """The largest float ≤ ``value``."""
    f = float(value)
    if Fraction(f) > value:
        f = math.nextafter(f, -math.inf)
    return f


@dataclass(frozen=True)
class Release:
    """Noisy values plus what is needed to publish and interpret them.

    ``private`` is ``False`` when an insecure source produced the noise: such values must
    never be published. ``guarantee`` is the guarantee of *this* release (it can be weaker
    than the mechanism's nominal one when real-valued inputs had to be snapped to the
    lattice, see :class:`~privtab.mechanisms.Laplace`).
    """

    values: NDArray[Any]
    mechanism: str
    guarantee: Guarantee
    private: bool
    source: str
    parameters: dict[str, Any] = field(default_factory=dict)

    def metadata(self) -> dict[str, Any]:
        """JSON-ready metadata: mechanism, parameters, guarantee and ``private``."""
        return {
            "mechanism": self.mechanism,
            "guarantee": str(self.guarantee),
            "private": self.private,
            "source": self.source,
            **self.parameters,
        }


class NoiseMechanism(ABC):
    """Base class of additive-noise mechanisms (see the module docstring).

    A mechanism adds ``γ·X`` to each (snapped) value, where ``X`` is drawn from its
    :attr:`law` (a :class:`~privtab.mechanisms.laws.NoiseLaw`): the error figures
    (variance, pmf, CDF, quantiles, margin of error) and the noise draws all come from that
    one law. Subclasses state the guarantee and parameters; the lattice mechanisms
    (:class:`~privtab.mechanisms.Laplace`, :class:`~privtab.mechanisms.Gaussian`) also
    override how values are put on and taken off the lattice.
    """

    #: Short name recorded in release metadata.
    name: str = "mechanism"
    #: The exact law of the noise added to each value.
    law: NoiseLaw

    @property
    @abstractmethod
    def guarantee(self) -> Guarantee:
        """The privacy guarantee for one release on neighbouring inputs."""

    @property
    @abstractmethod
    def rdp(self) -> RDP:
        """The Rényi-DP curve of the mechanism (tight where known)."""

    @abstractmethod
    def parameters(self) -> dict[str, Any]:
        """The mechanism's parameters (JSON-ready)."""

    # -- the error, from the law ---------------------------------------------------------
    @property
    def variance(self) -> float:
        """The exact variance of the noise added to each value."""
        return self.law.variance

    def noise_pmf(self, x: ArrayLike) -> NDArray[np.float64]:
        """``P(noise = x)``."""
        return self.law.pmf(x)

    def noise_cdf(self, x: ArrayLike) -> NDArray[np.float64]:
        """``P(noise ≤ x)``."""
        return self.law.cdf(x)

    def noise_quantile(self, q: ArrayLike) -> NDArray[np.float64]:
        """The smallest attainable noise value ``x`` with ``P(noise ≤ x) ≥ q``."""
        return self.law.quantile(q)

    def moe(self, level: RationalLike = 0.95) -> float:
        """The exact margin of error: the smallest attainable ``m`` with
        ``P(|noise| ≤ m) ≥ level`` (an ``int`` for the integer mechanisms)."""
        return self.law.moe(level)

    def confidence_interval(self, value: ArrayLike, level: RationalLike = 0.95) -> tuple[Any, Any]:
        """An interval containing the true value with probability ≥ ``level``.

        ``value ± moe(level)``: the noise is symmetric, so this covers the true value with
        probability exactly ``P(|noise| ≤ moe) ≥ level``. Works elementwise on arrays.
        """
        m = self.moe(level)
        v = np.asarray(value)
        lo, hi = v - m, v + m
        if lo.ndim == 0:
            return float(lo), float(hi)
        return lo, hi

    def describe(self) -> dict[str, Any]:
        """Parameters, guarantee and error summary (JSON-ready)."""
        return {
            "mechanism": self.name,
            **self.parameters(),
            "guarantee": str(self.guarantee),
            "variance": self.variance,
            "moe95": self.moe(0.95),
        }

    # -- the release path ----------------------------------------------------------------
    def sample_noise(
        self, size: int | tuple[int, ...], *, source: RandomSource | None = None
    ) -> NDArray[Any]:
        """Noise only (for simulation; use :meth:`release` to publish)."""
        return self._from_lattice(self.law.sample_index(size, source=source))

    def release(
        self,
        values: ArrayLike,
        *,
        source: RandomSource | None = None,
        allow_insecure: bool = False,
    ) -> Release:
        """Add independent noise to every value and return a :class:`Release`.

        The values are put on the noise lattice (:meth:`_to_lattice`), exact noise from
        :attr:`law` is added in integer arithmetic, and the result is taken back
        (:meth:`_from_lattice`). Guarantee: :attr:`guarantee` for values on the lattice,
        the one :meth:`_release_guarantee` states otherwise.
        """
        k, on_lattice = self._to_lattice(values)
        src = release_source(source, allow_insecure, self.name)
        noisy = k + self.law.sample_index(k.shape, source=src)
        guarantee, extra = self._release_guarantee(k.size, on_lattice)
        params = self.parameters()
        params.update(extra)
        return Release(
            values=self._from_lattice(noisy),
            mechanism=self.name,
            guarantee=guarantee,
            private=src.is_private,
            source=src.description,
            parameters=params,
        )

    def _to_lattice(self, values: ArrayLike) -> tuple[NDArray[np.int64], bool]:
        """Lattice indices of ``values`` and whether all were on the lattice (integer
        mechanisms: the values themselves, which must be integers)."""
        return integer_values(values, self.name), True

    def _from_lattice(self, k: NDArray[np.int64]) -> NDArray[Any]:
        """Values of lattice indices (integer mechanisms: the indices)."""
        return k

    def _release_guarantee(self, n: int, on_lattice: bool) -> tuple[Guarantee, dict[str, Any]]:
        """The guarantee of a release of ``n`` values and extra metadata."""
        return self.guarantee, {}


class PureDPMechanism(NoiseMechanism):
    """A mechanism stated by an exact ε (geometric, Laplace): ``ε``-DP, published rounded
    up; noise scale ``b = Δ/ε``."""

    epsilon_exact: Fraction
    scale_exact: Fraction

    @property
    def epsilon(self) -> float:
        """ε rounded up to a float (never understates the cost)."""
        return float_up(self.epsilon_exact)

    @property
    def scale(self) -> float:
        """The noise scale ``b = Δ/ε``."""
        return float(self.scale_exact)

    @property
    def guarantee(self) -> PureDP:
        return PureDP(self.epsilon)


class ZCDPMechanism(NoiseMechanism):
    """A mechanism stated by an exact ρ (discrete and lattice Gaussian): ``ρ``-zCDP,
    published rounded up; ``σ² = Δ²/(2ρ)`` exactly."""

    rho_exact: Fraction
    sensitivity_exact: Fraction
    sigma2_exact: Fraction

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(rho={float(self.rho_exact)!r}, "
            f"sensitivity={float(self.sensitivity_exact)!r})"
        )

    @property
    def rho(self) -> float:
        """ρ rounded up to a float (never understates the cost)."""
        return float_up(self.rho_exact)

    @property
    def sigma(self) -> float:
        """``σ = √(Δ²/(2ρ))``."""
        return math.sqrt(float(self.sigma2_exact))

    @property
    def guarantee(self) -> ZCDP:
        return ZCDP(self.rho)

    @property
    def rdp(self) -> RDP:
        """``τ(α) = ρα``."""
        return zcdp_to_rdp(self.guarantee)


def release_source(
    source: RandomSource | None, allow_insecure: bool, mechanism: str
) -> RandomSource:
    """The source a release may use: ``source`` (default: the secure source), refused when
    insecure unless ``allow_insecure`` (then an :class:`InsecureReleaseWarning` is issued)."""
    src = resolve_source(source)
    if not src.is_private:
        if not allow_insecure:
            raise InsecureSourceError(
                f"{src.description} is not a secure source; {mechanism}.release refuses "
                "it. Use the default source for anything published, or pass "
                "allow_insecure=True for tests (the release is then marked private: false)"
            )
        warnings.warn(
            f"{mechanism} release made with {src.description}: marked private: false, "
            "do not publish",
            InsecureReleaseWarning,
            stacklevel=3,
        )
    return src


def integer_values(values: ArrayLike, mechanism: str) -> NDArray[np.int64]:
    """Validate that ``values`` are integers (counts) and return them as int64."""
    arr = np.asarray(values)
    if arr.dtype == np.bool_:
        return arr.astype(np.int64)
    if np.issubdtype(arr.dtype, np.integer):
        return arr.astype(np.int64)
    if not np.issubdtype(arr.dtype, np.floating):
        raise TypeError(f"{mechanism} needs numeric integer values, got dtype {arr.dtype}")
    bad = ~np.isfinite(arr) | (arr != np.round(arr)) | (np.abs(arr) >= 2.0**62)
    if bad.any():
        idx = np.unravel_index(int(np.flatnonzero(bad.ravel())[0]), arr.shape)
        where = idx[0] if arr.ndim == 1 else idx
        raise ValueError(
            f"{mechanism} adds integer noise to integer values; value at index {where} is "
            f"{arr[idx].item()!r} (use Laplace or Gaussian for real-valued queries)"
        )
    return arr.astype(np.int64)
