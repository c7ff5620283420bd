"""Exact discrete Gaussian sampling by inverse CDF from a certified integer table (small σ).

For ``TABLE_MIN_SIGMA2 ≤ σ² ≤ TABLE_MAX_SIGMA2`` (1/16 … 2¹⁴, which holds every σ² of
TopDown's 2020 strategies: 1.2 … 7,963) :func:`~privtab.random.discrete_gaussian` uses
this sampler instead of the rejection sampler of :mod:`privtab.random.gaussian_sampler`:
about five times faster, and just as exact.

Method (inversion with certified integer bounds; Devroye 1986 §III.2 and the guide
tables of Chen & Asau 1974, with the exact comparisons of Karney 2016 / CKS 2020)
----------------------------------------------------------------------------------
``|X|`` for ``X ~ N_ℤ(σ²)`` has the CDF ``F(k) = S(k)/Z`` with
``S(k) = 1 + 2·Σ_{1≤j≤k} e^{−j²/(2σ²)}`` and ``Z = S(∞)``. For a uniform ``U ∈ [0, 1)``,
``M = min{k : U < F(k)}`` has exactly the law of ``|X|``, and with an independent fair
sign bit ``±M`` has exactly the law ``N_ℤ(σ²)`` (``P(±0) = F(0) = 1/Z``,
``P(X = ±k) = (F(k) − F(k−1))/2 = e^{−k²/(2σ²)}/Z``).

``F(k)`` is transcendental, so it is never stored as a float. :func:`cdf_bounds` computes
integers ``L_k ≤ 2^p·F(k) ≤ H_k`` *as proofs*: every term ``e^{−j²/(2σ²)}`` is enclosed
by rigorous interval arithmetic (:func:`privtab.random.exact.exp_neg_enclosure`) and
rounded outwards to ``2^{−(p+16)}``, the sums are exact integers, and the tail of ``Z``
beyond the last term ``J`` is bounded by the geometric series
``Σ_{j>J} e^{−j²/(2σ²)} ≤ e^{−(J+1)²/(2σ²)} / (1 − e^{−(2J+3)/(2σ²)})`` (consecutive terms
shrink by ``e^{−(2j+1)/(2σ²)}``), so ``Z_lo ≤ 2^{p+16}·Z ≤ Z_hi`` and
``L_k = ⌊2^p·S_lo(k)/Z_hi⌋``, ``H_k = ⌈2^p·S_hi(k)/Z_lo⌉``.

A draw uses one 64-bit word ``w``: bit 47 is the sign, the other 63 bits (in order) are
the first bits ``v`` of ``U``, so ``U ∈ [v·2⁻⁶³, (v+1)·2⁻⁶³)``. With the table's ``L``/``H``
at ``p = 63``:

* ``H_k ≤ v`` ⇒ ``F(k) ≤ v·2⁻⁶³ ≤ U`` ⇒ ``M > k``; and ``v + 1 ≤ L_k`` ⇒ ``U < F(k)``.
  So if ``i = #{k : H_k ≤ v}`` (``H`` is made non-decreasing; a running minimum from the
  right keeps every ``H_k`` an upper bound because ``F`` increases) and ``v < L_i``, then
  ``M = i`` *for every U with that prefix*.
* **Guide table.** For each of the 2¹⁶ buckets of ``v``'s top 16 bits the index ``i`` at
  the bucket's start is precomputed; when ``L_i`` is at or above the bucket's end, the
  whole bucket maps to ``M = i`` ("clean"). A 2¹⁷-entry table indexed by ``w >> 47``
  (bucket and sign) then gives the signed sample in one gather. Non-clean buckets (those
  holding a CDF boundary: probability ≲ K·2⁻¹⁶ for a table of K entries, ~0.1% at
  σ² = 10) go through the comparison above (``searchsorted``), and the prefixes within
  one unit of a boundary (probability ~3K·2⁻⁶³) and beyond the table's end (``U`` above
  ``1 − 2⁻⁶³``) are finished exactly: ``U``'s further bits are drawn lazily and compared
  with :func:`cdf_bounds` at growing precision (:func:`privtab.random.exact.resolve_less`),
  for ``k = i, i+1, …`` as far into the tail as ``U`` requires — the support is all of ℤ.

Every output is therefore ``±min{k : U < F(k)}`` for an exact uniform ``U``: the law is
exactly ``N_ℤ(σ²)``; the integer table only decides how quickly the answer is found.
One 64-bit word per sample (the rejection sampler needs ~2.6), no floating point at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from privtab.random.exact import LazyUniform, exp_neg_enclosure, resolve_less
from privtab.random.sources import RandomSource

__all__ = [
    "TABLE_MAX_SIGMA2",
    "TABLE_MIN_SIGMA2",
    "CdfTable",
    "cdf_bounds",
    "cdf_table",
    "fill_from_table",
]

#: The σ² range of the table sampler (below and above it: rejection from the Laplace).
TABLE_MIN_SIGMA2 = Fraction(1, 16)
TABLE_MAX_SIGMA2 = Fraction(1 << 14)

_PREFIX_BITS = 63
_GUIDE_BITS = 16
_BUCKET_SHIFT = _PREFIX_BITS - _GUIDE_BITS  # 47: bucket = v >> 47
_LOW_MASK = (1 << _BUCKET_SHIFT) - 1
_GUARD_BITS = 16
_SENTINEL = np.iinfo(np.int16).min  # a non-clean bucket in the signed guide
_CHUNK = 1 << 16


def _terms(sigma2: Fraction, prec: int) -> int:
    """A number of terms ``J`` after which ``e^{−j²/(2σ²)} < 2^{−prec−4}`` (a choice of
    speed only: the tail bound in :func:`cdf_bounds` is rigorous for any ``J``)."""
    return math.ceil(math.sqrt(2.0 * float(sigma2) * (prec + 4) * math.log(2.0))) + 2


def _floor_scaled(x: Fraction, bits: int) -> int:
    return (x.numerator << bits) // x.denominator


def _ceil_scaled(x: Fraction, bits: int) -> int:
    return -((-x.numerator << bits) // x.denominator)


@lru_cache(maxsize=64)
def cdf_bounds(sigma2: Fraction, prec: int, jmax: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Integers ``L_k ≤ 2^prec·F(k) ≤ H_k`` for ``k = 0, …, J`` (``J ≥ jmax``), where
    ``F(k) = P(|X| ≤ k)`` for ``X ~ N_ℤ(sigma2)`` (module docstring: the proof).

    Widths ``H_k − L_k`` are 1 or 2 for ``prec`` up to a few hundred bits and ``J`` below
    ~10⁵ terms (each term's enclosure is ``2^{−prec−16}`` tight)."""
    if sigma2 <= 0 or prec < 1:
        raise ValueError("cdf_bounds needs sigma2 > 0 and prec ≥ 1")
    work = prec + _GUARD_BITS
    n_terms = max(jmax, _terms(sigma2, prec))
    two_s2 = 2 * sigma2
    s_lo: list[int] = [1 << work]
    s_hi: list[int] = [1 << work]
    for j in range(1, n_terms + 1):
        a, b = exp_neg_enclosure(Fraction(j * j) / two_s2, work + 8)
        s_lo.append(s_lo[-1] + 2 * _floor_scaled(a, work))
        s_hi.append(s_hi[-1] + 2 * _ceil_scaled(b, work))
    first_hi = exp_neg_enclosure(Fraction((n_terms + 1) ** 2) / two_s2, work + 8)[1]
    ratio_hi = exp_neg_enclosure(Fraction(2 * n_terms + 3) / two_s2, work + 8)[1]
    if ratio_hi >= 1:
        raise ValueError("sigma2 too large for an exact CDF table")
    tail_hi = _ceil_scaled(first_hi / (1 - ratio_hi), work)
    z_lo, z_hi = s_lo[-1], s_hi[-1] + 2 * tail_hi
    one = 1 << prec
    lows = tuple((s << prec) // z_hi for s in s_lo)
    highs = tuple(min(one, -((-s << prec) // z_lo)) for s in s_hi)
    return lows, highs


@dataclass(frozen=True, eq=False)
class CdfTable:
    """The certified inverse-CDF table of ``N_ℤ(sigma2)`` (module docstring).

    ``lo``/``hi``: ``(K,)`` uint64 bounds ``lo_k ≤ 2⁶³·F(k) ≤ hi_k``, both non-decreasing,
    ``lo_{K−1} ≥ 2⁶³ − 1`` (tested at the ends of the σ² range); ``guide``: ``(2¹⁷,)`` int16,
    the signed sample of every (bucket, sign) whose bucket is clean, ``_SENTINEL``
    otherwise."""

    sigma2: Fraction
    lo: NDArray[np.uint64]
    hi: NDArray[np.uint64]
    guide: NDArray[np.int16]

    @property
    def size(self) -> int:
        return int(self.lo.size)


@lru_cache(maxsize=64)
def cdf_table(sigma2: Fraction) -> CdfTable:
    """The table for ``sigma2`` (``TABLE_MIN_SIGMA2 ≤ sigma2 ≤ TABLE_MAX_SIGMA2``), built
    once per process in ~1–100 ms (about 15σ exponentials at 150 bits)."""
    if not TABLE_MIN_SIGMA2 <= sigma2 <= TABLE_MAX_SIGMA2:
        raise ValueError(f"sigma2 {sigma2} is outside the table sampler's range")
    lows, highs = cdf_bounds(sigma2, _PREFIX_BITS, 0)
    top = (1 << _PREFIX_BITS) - 1
    # Up to the first k with L_k ≥ 2⁶³ − 1 (every prefix but the last decided within the
    # table); prefixes beyond the table's end are exact too, just slow (resolve_magnitude).
    k_end = next((k for k, low in enumerate(lows) if low >= top), len(lows) - 1)
    lo = np.maximum.accumulate(np.array(lows[: k_end + 1], dtype=np.uint64))
    hi = np.minimum.accumulate(np.array(highs[: k_end + 1], dtype=np.uint64)[::-1])[::-1]
    hi = np.ascontiguousarray(hi)
    if lo.size >= np.iinfo(np.int16).max:  # pragma: no cover - σ² ≤ 2¹⁴ gives ~1,300
        raise RuntimeError("CDF table too long for the int16 guide")
    starts = np.arange(1 << _GUIDE_BITS, dtype=np.uint64) << np.uint64(_BUCKET_SHIFT)
    ends = starts + np.uint64(1 << _BUCKET_SHIFT)  # one past each bucket's last prefix
    first = np.searchsorted(hi, starts, side="right")  # #{k : hi_k ≤ bucket start}
    clean = (first < lo.size) & (lo[np.minimum(first, lo.size - 1)] >= ends)
    mag = np.where(clean, first, -1).astype(np.int64)
    guide = np.empty(2 << _GUIDE_BITS, dtype=np.int16)
    guide[0::2] = np.where(clean, mag, _SENTINEL)
    guide[1::2] = np.where(clean, -mag, _SENTINEL)
    lo.flags.writeable = False
    hi.flags.writeable = False
    guide.flags.writeable = False
    return CdfTable(sigma2, lo, hi, guide)


def prefix_and_sign(words: NDArray[np.uint64]) -> tuple[NDArray[np.uint64], NDArray[np.bool_]]:
    """The 63-bit prefixes ``v`` of ``U`` and the sign bits (bit 47) of ``words``."""
    top = words >> np.uint64(_BUCKET_SHIFT + 1)
    v = (top << np.uint64(_BUCKET_SHIFT)) | (words & np.uint64(_LOW_MASK))
    sign = ((words >> np.uint64(_BUCKET_SHIFT)) & np.uint64(1)).astype(bool)
    return v, sign


def resolve_magnitude(table: CdfTable, v: int, start: int, src: RandomSource) -> int:
    """``min{k ≥ start : U < F(k)}`` exactly for ``U`` with 63-bit prefix ``v``, given
    that ``U ≥ F(start − 1)``: lazily refined ``U`` against :func:`cdf_bounds`."""
    u = LazyUniform(v, _PREFIX_BITS)
    k = start
    while True:

        def enclosure(prec: int, k: int = k) -> tuple[Fraction, Fraction]:
            lows, highs = cdf_bounds(table.sigma2, prec, max(k, _terms(table.sigma2, prec)))
            return Fraction(lows[k], 1 << prec), Fraction(highs[k], 1 << prec)

        if resolve_less(u, enclosure, src):
            return k
        k += 1


def _finish(table: CdfTable, words: NDArray[np.uint64], src: RandomSource) -> NDArray[np.int64]:
    """Signed samples for words in non-clean buckets (search, then the exact slow path)."""
    v, negative = prefix_and_sign(words)
    idx = np.searchsorted(table.hi, v, side="right")
    inside = idx < table.size
    sure = inside & (v < table.lo[np.minimum(idx, table.size - 1)])
    mag = idx.astype(np.int64)
    for i in np.flatnonzero(~sure):
        mag[i] = resolve_magnitude(table, int(v[i]), int(idx[i]), src)
    return np.where(negative, -mag, mag)


def fill_from_table(out: NDArray[np.int64], table: CdfTable, src: RandomSource) -> None:
    """Fill the 1-d ``out`` with exact ``N_ℤ(table.sigma2)`` samples, one word each."""
    shift = np.uint64(_BUCKET_SHIFT)
    for start in range(0, out.size, _CHUNK):
        block = out[start : start + _CHUNK]
        words = src.random_uint64(block.size)
        signed = np.take(table.guide, (words >> shift).view(np.intp))
        block[:] = signed
        bad = np.flatnonzero(signed == _SENTINEL)
        if bad.size:
            block[bad] = _finish(table, words[bad], src)
