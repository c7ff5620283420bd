"""The supported per-count noise parameters of the integer mechanisms, and why.

Every number a release computes from a mechanism — the exact noise draws, the variance,
the exact margin of error of one count and of a sum of cells, quantiles, CDFs — is exact
(or certified, never understating error) and finishes in bounded time for every parameter
in these ranges (``tests/mechanisms/test_bounded.py`` measures it across them). Outside
them a mechanism refuses to be built, with a :class:`ValueError` naming the parameter.

* **Geometric noise** (pmf ∝ ``e^{−|x|/b}``, ``b = Δ/ε``): ``2⁻⁴⁰ ≤ b ≤ 2⁵⁴``. The upper
  end is set by the exact sampler's integer arithmetic: draws are int64, and at ``b = 2⁵⁴``
  a draw of magnitude ``2⁶²`` has probability ``e^{−256}``; at ``2⁵⁶`` an intermediate
  would overflow with probability ~10⁻¹⁴ per draw. The lower end: below ``2⁻⁴⁰`` the noise
  is 0 except with probability ``< e^{−2⁴⁰}``, i.e. no noise at all. At sensitivity 1 the
  per-count ε therefore lies in ``[2⁻⁵⁴, 2⁴⁰] ≈ [5.6e-17, 1.1e12]``.
* **Discrete Gaussian noise** (pmf ∝ ``e^{−x²/(2σ²)}``, ``σ² = Δ²/(2ρ)``):
  ``2⁻⁴⁰ ≤ σ ≤ 2⁴⁴``. The sampler's rejection step compares ``(|y| − σ)²/(2σ²)`` computed
  in float64 with a certified error bound, which needs the proposal ``|y|`` (up to ~40σ)
  to be exact in float64 (``< 2⁵³``). At sensitivity 1 the per-count ρ lies in
  ``[2⁻⁸⁹, 2⁷⁹] ≈ [1.6e-27, 6.0e23]``; σ up to ``2⁴⁴ ≈ 1.8e13``.

A SafeTab level with budget ``b``, stage-1 fraction ``γ`` and stability ``s`` spends
``γ·b/s``, ``(1−γ)·b/s`` and ``b/s`` per count. For zCDP every budget in ``[1e-12, 1e6]``
with ``s ≤ 1000`` and ``γ ≥ 1e-12`` is inside the range; for pure DP the per-count ε must
be at least ``5.6e-17`` (e.g. ``b = 1e-12``, ``s = 100`` needs ``γ ≥ 5.6e-3``), and a plan
that needs less is refused by :func:`check_noise_parameter` with the parameter named.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

from privtab.random import RationalLike
from privtab.random.laplace_sampler import MAX_LAPLACE_SCALE, MAX_SCALE, MIN_SCALE
from privtab.random.rational import as_rational

__all__ = [
    "MAX_EPSILON",
    "MAX_GEOMETRIC_SCALE",
    "MAX_RHO",
    "MAX_SIGMA",
    "MIN_EPSILON",
    "MIN_GEOMETRIC_SCALE",
    "MIN_RHO",
    "MIN_SIGMA",
    "check_noise_parameter",
    "check_scale",
    "check_sigma2",
]

#: Largest geometric noise scale ``b`` = 2⁵⁴ (int64 draws; see the module docstring).
MAX_GEOMETRIC_SCALE = MAX_LAPLACE_SCALE
#: Smallest geometric noise scale ``b`` = 2⁻⁴⁰ (below it the noise is 0 with certainty ~1).
MIN_GEOMETRIC_SCALE = MIN_SCALE
#: Largest discrete Gaussian σ = 2⁴⁴ (the sampler's float64 certification).
MAX_SIGMA = MAX_SCALE
#: Smallest discrete Gaussian σ = 2⁻⁴⁰.
MIN_SIGMA = MIN_SCALE
#: Per-count ε range of the geometric mechanism at sensitivity 1: ``[2⁻⁵⁴, 2⁴⁰]``.
MIN_EPSILON = 1 / MAX_GEOMETRIC_SCALE
MAX_EPSILON = 1 / MIN_GEOMETRIC_SCALE
#: Per-count ρ range of the discrete Gaussian mechanism at sensitivity 1: ``[2⁻⁸⁹, 2⁷⁹]``.
MIN_RHO = 1 / (2 * MAX_SIGMA**2)
MAX_RHO = 1 / (2 * MIN_SIGMA**2)


def _fmt(x: Fraction) -> str:
    return f"{float(x):.3g}"


def _show(given: object) -> str:
    if isinstance(given, Fraction):
        return f"{float(given):.4g} (exactly {given})"
    return repr(given)


def check_scale(name: str, scale: Fraction, given: object) -> Fraction:
    """Refuse a geometric noise scale outside ``[MIN_GEOMETRIC_SCALE, MAX_GEOMETRIC_SCALE]``;
    the message names the parameter ``name`` the user gave (value ``given``)."""
    if scale > MAX_GEOMETRIC_SCALE:
        raise ValueError(
            f"{name} = {_show(given)} gives geometric noise of scale {_fmt(scale)}, above the "
            f"supported maximum 2**54 (about {_fmt(MAX_GEOMETRIC_SCALE)}): exact draws must "
            f"fit in int64. Use a per-count {name} of at least {_fmt(MIN_EPSILON)} times "
            "the sensitivity"
        )
    if scale < MIN_GEOMETRIC_SCALE:
        raise ValueError(
            f"{name} = {_show(given)} gives geometric noise of scale {_fmt(scale)}, below the "
            f"supported minimum 2**-40: the noise would be 0 with certainty. Use a "
            f"per-count {name} of at most {_fmt(MAX_EPSILON)} times the sensitivity"
        )
    return scale


def check_sigma2(name: str, sigma2: Fraction, given: object) -> Fraction:
    """Refuse a discrete Gaussian σ² outside ``[MIN_SIGMA², MAX_SIGMA²]``; the message names
    the parameter ``name`` the user gave (value ``given``)."""
    if sigma2 > MAX_SIGMA**2:
        raise ValueError(
            f"{name} = {_show(given)} gives discrete Gaussian noise with σ = "
            f"{_fmt(Fraction(float(sigma2) ** 0.5))}, above the supported maximum 2**44 "
            f"(about {_fmt(MAX_SIGMA)}): the exact sampler's certified arithmetic needs "
            f"draws below 2**53. Use a per-count {name} of at least {_fmt(MIN_RHO)} times "
            "the squared sensitivity"
        )
    if sigma2 < MIN_SIGMA**2:
        raise ValueError(
            f"{name} = {_show(given)} gives discrete Gaussian noise with σ below the supported "
            f"minimum 2**-40: the noise would be 0 with certainty. Use a per-count {name} "
            f"of at most {_fmt(MAX_RHO)} times the squared sensitivity"
        )
    return sigma2


def check_noise_parameter(
    kind: Literal["epsilon", "rho"], value: RationalLike, sensitivity: RationalLike = 1
) -> Fraction:
    """Validate a per-count privacy parameter of the geometric (``epsilon``) or discrete
    Gaussian (``rho``) mechanism and return it exactly.

    Raises :class:`ValueError` naming ``kind`` when the value is not a positive finite
    number or lies outside the supported range (module docstring): ``ε/Δ ∈ [2⁻⁵⁴, 2⁴⁰]``,
    ``ρ/Δ² ∈ [2⁻⁸⁹, 2⁷⁹]``.

    >>> check_noise_parameter("rho", "1e-16")
    Fraction(1, 10000000000000000)
    >>> check_noise_parameter("epsilon", 1e-18)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: epsilon = 1e-18 gives geometric noise of scale 1e+18, above the supported ...
    """
    p = as_rational(value, kind, positive=True)
    d = as_rational(sensitivity, "sensitivity", positive=True)
    if kind == "epsilon":
        check_scale(kind, d / p, value)
    elif kind == "rho":
        check_sigma2(kind, d * d / (2 * p), value)
    else:
        raise ValueError(f"kind must be 'epsilon' or 'rho', got {kind!r}")
    return p
