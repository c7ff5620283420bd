"""The error model of released counts: exact MOE of one draw and of sums of i.i.d. cells,
cross-checked against direct term-by-term convolution (the routine the FFT power replaced)
of an independently tabulated pmf, and brute-force pmf summation."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from privtab.mechanisms import DiscreteGaussian, Geometric
from privtab.mechanisms.counts import count_error

MECHS = [DiscreteGaussian(Fraction(159, 10000)), Geometric(Fraction(1, 20)), DiscreteGaussian(0.5)]


def _noise_pmf(mech) -> tuple[int, np.ndarray]:
    """The pmf on ±(MOE at 1 − 10⁻¹⁵ + 1), normalised: an independent tabulation."""
    half = int(mech.moe(1 - Fraction(1, 10**15))) + 1
    p = np.asarray(mech.noise_pmf(np.arange(-half, half + 1)), dtype=np.float64)
    return half, p / p.sum()


@pytest.mark.parametrize("mech", MECHS, ids=repr)
@pytest.mark.parametrize("k", [2, 8, 18, 46])
def test_sum_moe_matches_direct_convolution(mech, k: int) -> None:
    half, p = _noise_pmf(mech)
    total = p
    for _ in range(k - 1):
        total = np.convolve(total, p)
    c = half * k
    sym = total[c:] + total[c::-1]
    sym[0] = total[c]
    cover = np.cumsum(sym)
    m = int(np.argmax(cover >= 0.95))
    err = count_error(mech, k)
    assert err.moe95 == m
    assert err.coverage == pytest.approx(cover[m], abs=1e-12)
    assert err.coverage >= 0.95 > cover[m - 1]
    assert err.variance == pytest.approx(k * mech.variance)


@pytest.mark.parametrize("mech", MECHS, ids=repr)
def test_single_draw_uses_the_exact_moe(mech) -> None:
    err = count_error(mech)
    assert err.moe95 == mech.moe(0.95)
    xs = np.arange(-err.moe95, err.moe95 + 1)
    assert err.coverage == pytest.approx(float(mech.law.pmf(xs).sum()), abs=1e-12)


def test_sum_moe_by_monte_carlo() -> None:
    """A second, independent check: simulated sums of 18 cells (seeded, 2e5 draws) cover
    the truth at the computed rate within 6 binomial standard errors."""
    from privtab.random import SeededSource

    mech = DiscreteGaussian(Fraction(159, 10000))
    err = count_error(mech, 18)
    noise = mech.sample_noise((200_000, 18), source=SeededSource(5)).sum(axis=1)
    rate = float(np.mean(np.abs(noise) <= err.moe95))
    se = np.sqrt(err.coverage * (1 - err.coverage) / noise.size)
    assert abs(rate - err.coverage) < 6 * se


def test_count_error_rejects_zero_cells() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        count_error(MECHS[0], 0)


@pytest.mark.parametrize("k", [2, 18, 46])
def test_large_scale_path_agrees_with_the_fft(monkeypatch: pytest.MonkeyPatch, k: int) -> None:
    """Above FFT_MAX_POINTS the sum's MOE comes from the certified large-scale enclosure:
    forced at a scale where the FFT still runs, it gives the same MOE for the discrete
    Gaussian and at most 2k more (never less) for the geometric mechanism."""
    import privtab.mechanisms.linear as linear
    from privtab.mechanisms import counts as errors

    mechs = [DiscreteGaussian(Fraction(1, 2 * 90_000)), Geometric(Fraction(1, 300))]
    fft = [count_error(m, k) for m in mechs]
    errors._sum_error.cache_clear()
    monkeypatch.setattr(linear, "FFT_MAX_POINTS", 1000)
    big = [count_error(m, k) for m in mechs]
    errors._sum_error.cache_clear()
    assert big[0].moe95 == fft[0].moe95
    assert fft[1].moe95 <= big[1].moe95 <= fft[1].moe95 + 2 * k
    for b in big:
        assert b.coverage >= 0.95
