"""Uniform integers, Bernoulli trials, exact rationals and lattice (real-valued) noise."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from privtab.random import SeededSource
from privtab.random.lattice import default_granularity, gaussian, laplace
from privtab.random.rational import as_rational, round_rational

# private on purpose: the scalar Bernoulli path is driven with scripted bits
from privtab.random.uniform import _bernoulli_scalar, bernoulli, bernoulli_exp, uniform_int
from tests._stats import ALPHA


def _binomial_ok(successes: int, n: int, p: float) -> bool:
    """Two-sided exact binomial test at α = 1e-6."""
    return stats.binomtest(successes, n, p).pvalue > ALPHA


@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 1000, 2**31 + 11])
def test_uniform_int_is_uniform(n: int) -> None:
    x = uniform_int(n, 60_000, source=SeededSource(f"u{n}"))
    assert x.dtype == np.int64
    assert x.min() >= 0
    assert x.max() < n
    if n == 1:
        assert (x == 0).all()
    elif n <= 1000:
        counts = np.bincount(x, minlength=n)
        assert stats.chisquare(counts).pvalue > ALPHA
    else:  # compare with the uniform CDF (KS)
        assert stats.kstest(x / n, "uniform").pvalue > ALPHA


def test_uniform_int_extremes_and_errors() -> None:
    x = uniform_int(2**63, 1000, source=SeededSource("big"))
    assert (x >= 0).all()
    for bad in (0, 2**63 + 1, 1.5, True):
        with pytest.raises(ValueError, match="n must"):
            uniform_int(bad, 3)  # type: ignore[arg-type]


@pytest.mark.parametrize("p", ["1/3", 0.1, "0.999", Fraction(1, 2**70), Decimal("0.25")])
def test_bernoulli_rational(p: object) -> None:
    n = 200_000
    x = bernoulli(p, n, source=SeededSource(f"b{p}"))  # type: ignore[arg-type]
    assert x.dtype == np.bool_
    assert _binomial_ok(int(x.sum()), n, float(as_rational(p)))  # type: ignore[arg-type]


def test_bernoulli_degenerate_and_invalid() -> None:
    assert not bernoulli(0, 100).any()
    assert bernoulli(1, 100).all()
    for bad in (-0.1, 1.5, "x", float("nan")):
        with pytest.raises(ValueError, match="p"):
            bernoulli(bad, 3)  # type: ignore[arg-type]


def test_bernoulli_tie_recursion_is_exact() -> None:
    """When the 64-bit prefix equals ⌊2⁶⁴p⌋ the next bits decide, exactly."""
    from tests.random.test_exact_paths import ScriptedSource

    p = Fraction(1, 3)  # binary 0.010101…; ⌊2⁶⁴/3⌋ = 0x5555…5
    t = math.floor(p * 2**64)
    assert _bernoulli_scalar(p, ScriptedSource([t, 0])) is True  # U just above t/2⁶⁴
    assert _bernoulli_scalar(p, ScriptedSource([t, 2**64 - 1])) is False


@pytest.mark.parametrize("gamma", [0, "1/10", 1, 2.5, 20])
def test_bernoulli_exp(gamma: object) -> None:
    n = 200_000
    x = bernoulli_exp(gamma, n, source=SeededSource(f"be{gamma}"))  # type: ignore[arg-type]
    p = math.exp(-float(as_rational(gamma)))  # type: ignore[arg-type]
    assert _binomial_ok(int(x.sum()), n, p)
    with pytest.raises(ValueError, match="gamma"):
        bernoulli_exp(-1, 3)


def test_as_rational_is_exact() -> None:
    assert as_rational(0.1) == Fraction(3602879701896397, 36028797018963968)
    assert as_rational("0.1") == Fraction(1, 10)
    assert as_rational("1/3") == Fraction(1, 3)
    assert as_rational(Decimal("2.5")) == Fraction(5, 2)
    assert as_rational(np.float32(0.5)) == Fraction(1, 2)
    assert as_rational(np.int64(3)) == 3
    for bad in (float("inf"), "abc", None, True, [1]):
        with pytest.raises(ValueError, match="value"):
            as_rational(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="scale must be positive"):
        as_rational(0, "scale", positive=True)


def test_round_rational_directions() -> None:
    x = Fraction(10, 3)
    up, changed = round_rational(x, 2, "up")
    down, _ = round_rational(x, 2, "down")
    assert changed
    assert (down, up) == (Fraction(3), Fraction(7, 2))
    assert round_rational(x, 3, "up") == (x, False)
    assert round_rational(Fraction(1, 2), 10, "up") == (Fraction(1, 2), False)


@pytest.mark.parametrize("sigma", [0.5, 3.0, 1e6])
def test_gaussian_on_lattice(sigma: float) -> None:
    n = 100_000
    x = gaussian(sigma, n, source=SeededSource(f"g{sigma}"))
    gamma = float(default_granularity(sigma))
    assert np.array_equal(x / gamma, np.round(x / gamma))  # exact lattice points
    assert 2.0**40 <= sigma / gamma < 2.0**41
    assert stats.kstest(x / sigma, "norm").pvalue > ALPHA
    assert abs(x.var() / sigma**2 - 1) < 6 * math.sqrt(2 / n)


@pytest.mark.parametrize("scale", [0.25, 10.0])
def test_laplace_on_lattice(scale: float) -> None:
    n = 100_000
    x = laplace(scale, n, source=SeededSource(f"l{scale}"))
    assert stats.kstest(x / scale, "laplace").pvalue > ALPHA


def test_lattice_granularity_option() -> None:
    x = gaussian(1.0, 1000, source=SeededSource("gran"), granularity=Fraction(1, 4))
    assert np.array_equal(x * 4, np.round(x * 4))
    with pytest.raises(ValueError, match="power of two"):
        gaussian(1.0, 3, granularity=0.3)
    with pytest.raises(ValueError, match="too fine"):
        laplace(1e6, 3, granularity=2.0**-40)


def test_default_granularity_is_a_power_of_two() -> None:
    for s in (1e-9, 0.3, 1.0, 7.0, 2.0**50):
        g = default_granularity(s)
        assert g.numerator == 1 or g.denominator == 1
        assert 2**40 <= Fraction(s) / g < 2**41
