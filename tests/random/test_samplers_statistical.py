"""Statistical tests of the exact samplers against the exact pmfs (issue 3 acceptance).

Every sampler at small, medium and large scales (σ or scale ∈ {0.5, 1, 3.7, 10, 1000}):
chi-square with pooled tails and a DKW/KS test, each at α = 1e-6, fixed seeds; 10⁵ draws
by default and 10⁶ in the slow suite. Power: the same tests reject a sampler whose scale
is 10% off. Moments within 6 standard errors (false-failure probability < 1e-8).
"""

from __future__ import annotations

import numpy as np
import pytest

from privtab.random import SeededSource, discrete_gaussian, discrete_laplace
from privtab.random.laplace_sampler import geometric
from tests._stats import (
    ALPHA,
    discrete_gaussian_law,
    discrete_laplace_law,
    fits,
    geometric_law,
    moments_ok,
)

SCALES = [0.5, 1.0, 3.7, 10.0, 1000.0]
N_DEFAULT = 100_000
N_SLOW = 1_000_000


def _seed(*parts: object) -> SeededSource:
    return SeededSource("stat:" + ":".join(map(str, parts)))


@pytest.mark.parametrize("scale", SCALES)
def test_discrete_laplace_fits_exact_pmf(scale: float) -> None:
    x = discrete_laplace(scale, N_DEFAULT, source=_seed("dlap", scale))
    ok, msg = fits(x, discrete_laplace_law(scale))
    assert ok, msg
    ok, msg = moments_ok(x, discrete_laplace_law(scale))
    assert ok, msg


@pytest.mark.parametrize("sigma", SCALES)
def test_discrete_gaussian_fits_exact_pmf(sigma: float) -> None:
    x = discrete_gaussian(sigma * sigma, N_DEFAULT, source=_seed("dg", sigma))
    law = discrete_gaussian_law(sigma * sigma)
    ok, msg = fits(x, law)
    assert ok, msg
    ok, msg = moments_ok(x, law)
    assert ok, msg


@pytest.mark.parametrize("scale", [0.5, 3.7, 1000.0])
def test_geometric_fits_exact_pmf(scale: float) -> None:
    x = geometric(scale, N_DEFAULT, source=_seed("geom", scale))
    ok, msg = fits(x, geometric_law(scale))
    assert ok, msg
    ok, msg = moments_ok(x, geometric_law(scale))
    assert ok, msg


@pytest.mark.parametrize("scale", [2.0**21 + 0.5, 3.0e9])
def test_discrete_laplace_large_scale_path(scale: float) -> None:
    """Scales above 2²⁰ use the exact decomposition G = M·Q + R."""
    x = discrete_laplace(scale, N_DEFAULT, source=_seed("dlap-large", scale))
    ok, msg = fits(x, discrete_laplace_law(scale))
    assert ok, msg
    ok, msg = moments_ok(x, discrete_laplace_law(scale))
    assert ok, msg


@pytest.mark.parametrize("log2_scale", [50, 54])
def test_discrete_laplace_largest_scales(log2_scale: int) -> None:
    """Up to MAX_LAPLACE_SCALE = 2⁵⁴ (the geometric mechanism's per-count ε down to
    2⁻⁵⁴): X/t against the continuous Laplace law (the lattice changes its CDF by < 1/t),
    KS at level 1e-6, and E|X|/t = 1 within 6 standard errors (Var |X|/t = 1). Power: a
    scale 10% off moves E|X|/t by 0.1 = 30 standard errors."""
    from scipy import stats

    t = 2.0**log2_scale
    x = discrete_laplace(1 << log2_scale, N_DEFAULT, source=_seed("dlap-huge", log2_scale))
    assert x.dtype == np.int64
    y = x.astype(np.float64) / t
    assert stats.kstest(y, "laplace").pvalue >= ALPHA
    assert abs(float(np.abs(y).mean()) - 1.0) <= 6.0 / np.sqrt(N_DEFAULT)
    with pytest.raises(ValueError, match="2\\*\\*54"):
        discrete_laplace((1 << 54) + 1, 1)


def test_discrete_gaussian_rational_and_string_parameters() -> None:
    """σ² given as an exact decimal string: 13.69 = 3.7²."""
    x = discrete_gaussian("13.69", N_DEFAULT, source=_seed("dg-str"))
    ok, msg = fits(x, discrete_gaussian_law(13.69))
    assert ok, msg


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("factor", [0.9, 1.1])
def test_tests_have_power_laplace(scale: float, factor: float) -> None:
    """A sampler whose scale is 10% off is rejected by the same tests."""
    x = discrete_laplace(scale * factor, N_DEFAULT, source=_seed("dlap-power", scale, factor))
    ok, msg = fits(x, discrete_laplace_law(scale))
    assert not ok, "10%-off sampler accepted: " + msg


@pytest.mark.parametrize("sigma", SCALES)
@pytest.mark.parametrize("factor", [0.9, 1.1])
def test_tests_have_power_gaussian(sigma: float, factor: float) -> None:
    s = sigma * factor
    x = discrete_gaussian(s * s, N_DEFAULT, source=_seed("dg-power", sigma, factor))
    ok, msg = fits(x, discrete_gaussian_law(sigma * sigma))
    assert not ok, "10%-off sampler accepted: " + msg


@pytest.mark.slow
@pytest.mark.parametrize("scale", SCALES)
def test_discrete_laplace_fits_exact_pmf_1e6(scale: float) -> None:
    x = discrete_laplace(scale, N_SLOW, source=_seed("dlap-slow", scale))
    law = discrete_laplace_law(scale)
    for ok, msg in (fits(x, law), moments_ok(x, law)):
        assert ok, msg


@pytest.mark.slow
@pytest.mark.parametrize("sigma", SCALES)
def test_discrete_gaussian_fits_exact_pmf_1e6(sigma: float) -> None:
    x = discrete_gaussian(sigma * sigma, N_SLOW, source=_seed("dg-slow", sigma))
    law = discrete_gaussian_law(sigma * sigma)
    for ok, msg in (fits(x, law), moments_ok(x, law)):
        assert ok, msg


@pytest.mark.slow
@pytest.mark.parametrize("scale", [0.5, 3.7, 1000.0, 2.0**30])
def test_geometric_fits_exact_pmf_1e6(scale: float) -> None:
    x = geometric(scale, N_SLOW, source=_seed("geom-slow", scale))
    law = geometric_law(scale)
    for ok, msg in (fits(x, law), moments_ok(x, law)):
        assert ok, msg


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [1e6, 2.0**30])
def test_discrete_gaussian_huge_sigma(sigma: float) -> None:
    """Large σ: checked against the continuous normal CDF (difference ≪ 1e-9)."""
    from scipy import stats as st

    from tests._stats import IntegerLaw

    def cdf(k: np.ndarray) -> np.ndarray:
        return np.asarray(st.norm.cdf((np.floor(k) + 0.5) / sigma), dtype=np.float64)

    law = IntegerLaw(
        f"DG σ={sigma}", cdf, -int(12 * sigma), int(12 * sigma), 0.0, sigma**2, 3 * sigma**4
    )
    x = discrete_gaussian(sigma * sigma, N_SLOW, source=_seed("dg-huge", sigma))
    for ok, msg in (fits(x, law), moments_ok(x, law)):
        assert ok, msg


def test_samples_are_int64_with_requested_shape() -> None:
    src = _seed("shape")
    assert discrete_laplace(2, (3, 4), source=src).shape == (3, 4)
    assert discrete_gaussian(2, (2, 0), source=src).shape == (2, 0)
    x = discrete_gaussian(4, 10, source=src)
    assert x.dtype == np.int64
    assert discrete_laplace(1, 0, source=src).size == 0


def test_seeded_streams_are_reproducible() -> None:
    a = discrete_gaussian(100, 1000, source=SeededSource(7))
    b = discrete_gaussian(100, 1000, source=SeededSource(7))
    c = discrete_gaussian(100, 1000, source=SeededSource(8))
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_chunk_boundaries_do_not_change_the_law() -> None:
    """Sizes that straddle the 2¹⁶ chunk size are filled completely and correctly."""
    n = (1 << 16) * 2 + 17
    x = discrete_gaussian(9, n, source=_seed("chunks"))
    assert x.size == n
    ok, msg = fits(x, discrete_gaussian_law(9))
    assert ok, msg


@pytest.mark.parametrize(
    ("fn", "bad"),
    [
        (discrete_laplace, 0),
        (discrete_laplace, -1.0),
        (discrete_laplace, float("nan")),
        (discrete_laplace, float("inf")),
        (discrete_laplace, 2.0**55),
        (discrete_laplace, 2.0**-41),
        (discrete_gaussian, 2.0**-81),
        (discrete_gaussian, 0),
        (discrete_gaussian, "abc"),
        (discrete_gaussian, 2.0**90),
    ],
)
def test_bad_parameters_are_rejected_with_a_clear_error(fn: object, bad: object) -> None:
    with pytest.raises(ValueError, match=r"scale|sigma2"):
        fn(bad, 3)  # type: ignore[operator]


@pytest.mark.parametrize("size", [-1, 2.5, (2, -1), True])
def test_bad_sizes_are_rejected(size: object) -> None:
    with pytest.raises(ValueError, match="size"):
        discrete_laplace(1, size)  # type: ignore[arg-type]
