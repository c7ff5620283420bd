"""Exact discrete Gaussian sampling, and continuous-looking noise on a fine dyadic lattice.

:func:`discrete_gaussian` samples ``N_ℤ(σ²)``: ``P(X = x) ∝ exp(−x²/(2σ²))`` on ℤ for a
rational ``σ² > 0`` (SafeTab seed Def. 7, Alg. 5; Canonne, Kamath & Steinke 2020).

Two exact methods, chosen by σ² alone (so a seeded stream depends only on the calls made):
for ``1/16 ≤ σ² ≤ 2¹⁴`` inversion from a certified integer CDF table
(:mod:`privtab.random.gaussian_table`: one 64-bit word and no floating point per sample),
otherwise the rejection sampler below.

Method (rejection from the discrete Laplace, CKS 2020 Alg. 3, vectorised)
-------------------------------------------------------------------------
Draw ``Y ~`` discrete Laplace with a rational scale ``t > 0`` (we take ``t`` = σ rounded to
a float, which is optimal up to rounding) and keep it with probability

    ``a(Y) = exp(−(|Y| − σ²/t)² / (2σ²))``.

Then ``P(Y = y, kept) ∝ e^{−|y|/t} · e^{−y²/(2σ²) + |y|/t − σ²/(2t²)} ∝ e^{−y²/(2σ²)}``, so a
kept ``Y`` has exactly the law ``N_ℤ(σ²)`` for *any* ``t > 0``. The acceptance probability
is ``tanh(1/(2t)) · e^{−σ²/(2t²)} · Σ_y e^{−y²/(2σ²)}``: about 0.76 for ``t = σ ≥ 1`` and
higher for small σ (0.87 at σ = 0.5), so the expected number of proposals per sample is at
most 1.32 and the probability that a sample needs more than ``k`` proposals is below
``0.24^k``. Batches are sized from this rate and topped up until full.

The test ``V < a(Y)`` (``V`` uniform, 63 bits drawn) is decided in float64 with a rigorous
error bound on both ``−ln V`` and the exponent (:func:`privtab.random._kernels.accept_exp_neg`);
the rare undecided elements (probability ~2⁻³⁸) are resolved exactly with the exact
rational exponent and interval arithmetic. The Laplace proposals are exact
(:mod:`privtab.random.laplace_sampler`). Hence the output is exactly ``N_ℤ(σ²)``.

"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from privtab.random._kernels import accept_exp_neg, prefixes63
from privtab.random._util import Size, exact_int64
from privtab.random.exact import LazyUniform, exp_neg_enclosure, resolve_less
from privtab.random.gaussian_table import (
    TABLE_MAX_SIGMA2,
    TABLE_MIN_SIGMA2,
    cdf_table,
    fill_from_table,
)
from privtab.random.laplace_sampler import MAX_SCALE, MIN_SCALE, _fill_discrete_laplace
from privtab.random.rational import RationalLike, as_rational
from privtab.random.sources import RandomSource

__all__ = ["discrete_gaussian", "rejection_discrete_gaussian"]


@dataclass(frozen=True)
class _DGSpec:
    sigma2: Fraction
    t: Fraction  # proposal scale
    s2t: Fraction  # σ²/t
    s2t_float: float
    inv2s2_float: float  # 1/(2σ²)
    acceptance: float  # expected acceptance rate (for batch sizing only)


def _acceptance_rate(sigma2: float, t: float) -> float:
    sigma = math.sqrt(sigma2)
    if sigma < 50:
        k = np.arange(-int(40 * sigma) - 10, int(40 * sigma) + 11, dtype=np.float64)
        z = float(np.exp(-(k * k) / (2 * sigma2)).sum())
    else:
        z = math.sqrt(2 * math.pi * sigma2)
    return math.tanh(1 / (2 * t)) * math.exp(-sigma2 / (2 * t * t)) * z


@lru_cache(maxsize=256)
def _dg_spec(sigma2: Fraction) -> _DGSpec:
    t = Fraction(math.sqrt(float(sigma2)))
    s2t = sigma2 / t
    acc = _acceptance_rate(float(sigma2), float(t))
    return _DGSpec(sigma2, t, s2t, float(s2t), float(1 / (2 * sigma2)), max(acc, 0.05))


def _fill_discrete_gaussian(out: NDArray[np.int64], spec: _DGSpec, src: RandomSource) -> None:
    filled = 0
    while filled < out.size:
        need = out.size - filled
        k = min(int(need / spec.acceptance * 1.03) + 32, 1 << 17)
        y = np.empty(k, dtype=np.int64)
        _fill_discrete_laplace(y, spec.t, src)
        a = np.abs(y).astype(np.float64)
        v, vf = prefixes63(src.random_uint64(k))
        d = a - spec.s2t_float
        q = d * d
        q *= spec.inv2s2_float
        # |q − q_exact| ≤ (|Y| + σ²/t)²/(2σ²) · 2⁻⁵⁰ (see docs/random.md); 2⁻⁴⁷ for margin.
        q_err = a + spec.s2t_float
        q_err *= q_err
        q_err *= spec.inv2s2_float * 2.0**-47
        accept, amb = accept_exp_neg(vf, q, q_err)
        for i in np.flatnonzero(amb):
            exponent = (abs(int(y[i])) - spec.s2t) ** 2 / (2 * spec.sigma2)

            def enclosure(prec: int, e: Fraction = exponent) -> tuple[Fraction, Fraction]:
                return exp_neg_enclosure(e, prec)

            accept[i] = resolve_less(LazyUniform(int(v[i]), 63), enclosure, src)
        kept = y[accept]
        take = min(kept.size, need)
        out[filled : filled + take] = kept[:take]
        filled += take


def _sigma2(sigma2: RationalLike, name: str = "sigma2") -> Fraction:
    s2 = as_rational(sigma2, name, positive=True)
    if s2 > MAX_SCALE * MAX_SCALE:
        raise ValueError(f"{name} must be at most 2**88 (σ ≤ 2**44), got {sigma2!r}")
    if s2 < MIN_SCALE * MIN_SCALE:
        raise ValueError(f"{name} must be at least 2**-80 (σ ≥ 2**-40), got {sigma2!r}")
    return s2


Filler = Callable[[NDArray[np.int64], RandomSource], None]


@lru_cache(maxsize=256)
def _filler(sigma2: Fraction) -> Filler:
    """The sampler of ``N_ℤ(sigma2)`` (validated): the table inside its range, else rejection."""
    s2 = _sigma2(sigma2)
    if TABLE_MIN_SIGMA2 <= s2 <= TABLE_MAX_SIGMA2:
        table = cdf_table(s2)
        return lambda block, src: fill_from_table(block, table, src)
    spec = _dg_spec(s2)
    return lambda block, src: _fill_discrete_gaussian(block, spec, src)


def discrete_gaussian(
    sigma2: RationalLike, size: Size, *, source: RandomSource | None = None
) -> NDArray[np.int64]:
    """Exact discrete Gaussian samples: ``P(X = x) ∝ exp(−x²/(2·sigma2))`` on the integers.

    ``sigma2`` (σ², the *variance parameter*) is a positive rational — an int, a float's
    exact binary value, a :class:`~fractions.Fraction`, a decimal string, … — with
    ``σ ≤ 2**44``. The discrete Gaussian mechanism with ρ-zCDP on a query of L2 sensitivity
    Δ uses ``sigma2 = Δ²/(2ρ)`` (CKS 2020 Thm. 4; SafeTab seed Alg. 5). Returns an
    ``int64`` array of shape ``size``. See the module docstring for the methods and the
    exactness arguments.
    """
    fill = _filler(as_rational(sigma2, "sigma2", positive=True))
    return exact_int64(size, source, fill)


def rejection_discrete_gaussian(
    sigma2: RationalLike, size: Size, *, source: RandomSource | None = None
) -> NDArray[np.int64]:
    """:func:`discrete_gaussian` by the rejection method at every σ² (for tests and the
    same-run benchmark of the two methods; same law)."""
    spec = _dg_spec(_sigma2(sigma2))
    return exact_int64(size, source, lambda block, src: _fill_discrete_gaussian(block, spec, src))
