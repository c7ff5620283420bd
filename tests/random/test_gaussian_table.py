"""The discrete Gaussian's table method (``privtab.random.gaussian_table``) at TopDown's σ².

* The table's integer bounds and its guide are checked against an independent 200-bit
  mpmath computation of the CDF (every entry, every clean bucket).
* Scripted words put ``U`` just below / just above / on a CDF boundary (fast path, search
  path, exact slow path) and far beyond the table's end: the sample must be the exact
  inverse-CDF value — so an off-by-one or a truncated tail fails deterministically (a
  truncation beyond ~4σ moves too little mass for any sampling test).
* Statistical fits (chi-square + DKW at α = 1e-6 each, fixed seeds) at the σ² of the 2020
  TopDown strategy, with every element forced through the search path and through the
  exact slow path, and power against a CDF table shifted by one index; the tail mass
  beyond 3σ by a binomial test, with power against a tail cut there.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import privtab.random.gaussian_table as gt
from privtab.random import RandomSource, SeededSource, discrete_gaussian
from privtab.random.gaussian_table import CdfTable, cdf_table, fill_from_table
from tests._stats import discrete_gaussian_law, fits, moments_ok

# σ² of the 2020 US persons strategy (exact): block detailed, block-group total and
# detailed, state total, and the largest (block total).
BLOCK_DETAILED = Fraction(214437516707, 21246481300)
TOPDOWN_SIGMA2 = [
    BLOCK_DETAILED,
    Fraction(121, 100),
    Fraction(307, 100),
    Fraction(406, 100),
    Fraction(14290, 100),
    Fraction(796326, 100),
]
TWO63 = 1 << 63


def _exact_cdf(sigma2: Fraction, kmax: int) -> list[mpmath.mpf]:
    """F(k) = P(|X| ≤ k), k ≤ kmax, by direct 200-bit summation over |j| ≤ 40σ + 10
    (the omitted tail is below e^{−800}): independent of privtab's code."""
    with mpmath.workprec(200):
        s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
        n = int(40 * math.sqrt(float(sigma2))) + 10
        terms = [mpmath.exp(-mpmath.mpf(j * j) / (2 * s2)) for j in range(n + 1)]
        z = 2 * mpmath.fsum(terms) - 1
        out, acc = [], mpmath.mpf(-1)
        for k in range(kmax + 1):
            acc += 2 * terms[k]
            out.append(acc / z)
        return out


def _floor63(f: mpmath.mpf) -> int:
    with mpmath.workprec(200):
        return int(mpmath.floor(f * TWO63))


def _word(v: int, negative: bool = False) -> int:
    """The 64-bit word whose 63-bit prefix of U is ``v`` and whose sign bit is ``negative``
    (the layout of :func:`privtab.random.gaussian_table.prefix_and_sign`)."""
    return ((v >> 47) << 48) | (int(negative) << 47) | (v & ((1 << 47) - 1))


class Script(RandomSource):
    """Scripted 64-bit words, then an error (a test double; not private)."""

    def __init__(self, words: list[int]) -> None:
        super().__init__()
        self._words = list(words)

    @property
    def description(self) -> str:
        return "script"

    def _fill_bytes(self, out: memoryview) -> None:  # pragma: no cover - not used
        raise AssertionError("fill_uint64 is overridden")

    def fill_uint64(self, out: np.ndarray) -> None:  # type: ignore[override]
        if len(self._words) < out.size:
            raise RuntimeError("the script ran out of words")
        out[:] = np.array(self._words[: out.size], dtype=np.uint64)
        del self._words[: out.size]


def _draw(table: CdfTable, words: list[int]) -> list[int]:
    out = np.empty(1, dtype=np.int64)
    fill_from_table(out, table, Script(words))
    return out.tolist()


# ----------------------------------------------------------------------------- the table


@pytest.mark.parametrize("sigma2", [Fraction(1, 16), *TOPDOWN_SIGMA2, gt.TABLE_MAX_SIGMA2], ids=str)
def test_table_bounds_contain_the_exact_cdf(sigma2: Fraction) -> None:
    table = cdf_table(sigma2)
    cdf = _exact_cdf(sigma2, table.size - 1)
    lo, hi = table.lo.tolist(), table.hi.tolist()
    for k, f in enumerate(cdf):
        exact = _floor63(f)  # 2⁶³F(k) ∈ (exact, exact + 1): F is irrational
        assert lo[k] <= exact, (k, lo[k], exact)
        assert exact + 1 <= hi[k], (k, exact, hi[k])
        assert hi[k] - lo[k] <= 2
    assert lo[-1] >= TWO63 - 1  # every prefix but the last is decided within the table
    assert lo == sorted(lo)
    assert hi == sorted(hi)


@pytest.mark.parametrize("sigma2", [Fraction(1, 16), BLOCK_DETAILED, Fraction(796326, 100)])
def test_guide_entries_are_the_exact_inverse_cdf(sigma2: Fraction) -> None:
    """Every clean (bucket, sign) entry is ±min{k : U < F(k)} for every U in the bucket:
    2⁶³F(g − 1) ≤ bucket start and bucket end ≤ 2⁶³F(g), by exact integer comparison with
    the 200-bit CDF."""
    table = cdf_table(sigma2)
    floors = [_floor63(f) for f in _exact_cdf(sigma2, table.size)]
    guide = table.guide.tolist()
    checked = 0
    for b in range(1 << 16):
        for sign in (0, 1):
            g = guide[2 * b + sign]
            if g == gt._SENTINEL:
                continue
            m = -g if sign else g
            assert m >= 0
            start, end = b << 47, (b + 1) << 47
            assert end <= floors[m]  # U < end·2⁻⁶³ ≤ F(m)
            assert m == 0 or floors[m - 1] + 1 <= start  # F(m − 1) < start·2⁻⁶³ ≤ U
            checked += 1
    assert checked > 0.99 * (2 << 16)


# ----------------------------------------------------------------------------- scripted


@pytest.fixture
def table() -> CdfTable:
    return cdf_table(BLOCK_DETAILED)


@pytest.fixture
def slow_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = gt.resolve_magnitude

    def counting(*args: object) -> int:
        calls.append(1)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(gt, "resolve_magnitude", counting)
    return calls


def test_scripted_prefixes_around_every_boundary(table: CdfTable) -> None:
    """U a few units of 2⁻⁶³ below F(k) gives ±k, a few above gives ±(k+1): every k of
    the table, both signs (the guide and the search paths)."""
    cdf = _exact_cdf(table.sigma2, table.size)
    for k in range(table.size - 1):
        f = _floor63(cdf[k])
        if f - 3 <= _floor63(cdf[k - 1]) + 3 if k else False:
            continue  # F(k) − F(k−1) below 6·2⁻⁶³: the next k is checked instead
        for negative in (False, True):
            sign = -1 if negative else 1
            assert _draw(table, [_word(f - 3, negative)]) == [sign * k], k
            if f + 3 < TWO63:
                assert _draw(table, [_word(f + 3, negative)]) == [sign * (k + 1)], k


def test_prefix_on_a_boundary_takes_the_exact_path(table: CdfTable, slow_calls: list[int]) -> None:
    """The prefix containing 2⁶³F(k) is decided by U's next 64 bits: all zeros put U
    below F(k) (→ k), all ones above (→ k + 1) unless F(k)'s next bits are all ones."""
    cdf = _exact_cdf(table.sigma2, table.size)
    for k in (0, 1, 3, 7, 12):
        with mpmath.workprec(200):
            v = _floor63(cdf[k])
            nxt = int(mpmath.floor((cdf[k] * TWO63 - v) * 2**64))  # F's next 64 bits
        assert 0 < nxt < 2**64 - 1
        assert _draw(table, [_word(v), 0]) == [k]
        assert _draw(table, [_word(v, True), 2**64 - 1]) == [-(k + 1)]
    assert len(slow_calls) == 10


@pytest.mark.parametrize("rounds", [1, 3])
def test_tail_beyond_the_table_is_reached(
    table: CdfTable, slow_calls: list[int], rounds: int
) -> None:
    """U = 1 − 2⁻⁶³ − … with ``rounds`` further words of ones: 1 − U ≈ 2^{−63−64·rounds},
    whose inverse CDF lies beyond the table's last entry (the support is all of ℤ)."""
    u_words = [_word(TWO63 - 1)] + [2**64 - 1] * rounds + [0] * 8
    got = _draw(table, u_words)[0]
    bits = 63 + 64 * rounds
    with mpmath.workprec(bits + 200):
        s2 = mpmath.mpf(table.sigma2.numerator) / table.sigma2.denominator
        u_lo = 1 - mpmath.mpf(2) ** -bits  # U ∈ [u_lo, u_lo + 2^{−bits−64·8})
        n = int(60 * math.sqrt(float(table.sigma2))) + 60
        terms = [mpmath.exp(-mpmath.mpf(j * j) / (2 * s2)) for j in range(n)]
        z = 2 * mpmath.fsum(terms) - 1
        acc, want = mpmath.mpf(-1), None
        for k in range(n):
            acc += 2 * terms[k]
            if u_lo < acc / z:
                want = k
                break
    assert want is not None
    assert want >= table.size
    assert got == want
    assert len(slow_calls) == 1


# ----------------------------------------------------------------------------- statistics


@pytest.mark.parametrize("sigma2", TOPDOWN_SIGMA2, ids=str)
def test_fits_the_exact_pmf_at_topdown_sigma2(sigma2: Fraction) -> None:
    """10⁵ draws; chi-square + DKW at α = 1e-6 each and moments within 6 standard errors
    (false failure < 3e-6 per σ²). Power: a σ 10% off is rejected at these sizes
    (``test_samplers_statistical.py::test_tests_have_power_gaussian``), so are the table
    mutants below."""
    x = discrete_gaussian(sigma2, 100_000, source=SeededSource(f"table:{sigma2}"))
    law = discrete_gaussian_law(float(sigma2))
    for ok, msg in (fits(x, law), moments_ok(x, law)):
        assert ok, msg


def _search_only(table: CdfTable) -> CdfTable:
    guide = np.full_like(table.guide, gt._SENTINEL)
    return replace(table, guide=guide)


def _slow_only(table: CdfTable) -> CdfTable:
    return replace(_search_only(table), lo=np.zeros_like(table.lo))


@pytest.mark.parametrize(
    ("variant", "n"), [(_search_only, 100_000), (_slow_only, 3_000)], ids=["search", "exact"]
)
def test_every_path_alone_fits_the_exact_pmf(
    variant: object, n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the guide disabled (every element searched) and then with no prefix certain
    (every element through the exact slow path), the samples still fit N_ℤ(σ²) at the
    block-detailed σ² (chi-square + DKW at α = 1e-6 each)."""
    real = cdf_table(BLOCK_DETAILED)
    patched = variant(real)  # type: ignore[operator]
    out = np.empty(n, dtype=np.int64)
    fill_from_table(out, patched, SeededSource(f"table-path:{n}"))
    ok, msg = fits(out, discrete_gaussian_law(float(BLOCK_DETAILED)))
    assert ok, msg


def test_tests_have_power_against_a_shifted_table() -> None:
    """A table built for F(k + 1) instead of F(k) (an off-by-one in the cumulative sums:
    P(0) becomes F(1) ≈ 0.36 instead of 0.125) is rejected at 10⁵ draws."""
    real = cdf_table(BLOCK_DETAILED)
    shifted = CdfTable(real.sigma2, real.lo[1:].copy(), real.hi[1:].copy(), real.guide)
    mutant = replace(_search_only(shifted))
    out = np.empty(100_000, dtype=np.int64)
    fill_from_table(out, mutant, SeededSource("table-power-shift"))
    ok, msg = fits(out, discrete_gaussian_law(float(BLOCK_DETAILED)))
    assert not ok, "shifted table accepted: " + msg


def _tail_z(x: np.ndarray, sigma2: Fraction, cut: int) -> float:
    """z-score of #{|x| > cut} against its exact binomial law (200-bit tail mass)."""
    p = float(1 - _exact_cdf(sigma2, cut)[cut])
    n = x.size
    return (int((np.abs(x) > cut).sum()) - n * p) / math.sqrt(n * p * (1 - p))


def test_tail_mass_beyond_3_sigma() -> None:
    """The share of draws beyond 3σ (exact mass 0.0026 at the block-detailed σ²) is within
    5 standard errors at 10⁵ draws (false failure < 6e-7; the pooled chi-square cannot see
    the tails). Power: a sampler that cuts (or clips) the tail at 3σ is 16 standard errors
    off — shown on the clipped samples; cuts further out are caught by the scripted
    tail tests above."""
    s2 = BLOCK_DETAILED
    x = discrete_gaussian(s2, 100_000, source=SeededSource("table-tail-mass"))
    cut = math.floor(3 * math.sqrt(float(s2)))
    assert abs(_tail_z(x, s2, cut)) <= 5
    assert _tail_z(np.clip(x, -cut, cut), s2, cut) < -5
