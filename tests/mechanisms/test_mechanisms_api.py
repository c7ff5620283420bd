"""Mechanism objects: guarantees, curves, releases, the secure-source rule, validation."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from privtab.accounting import RDP, ZCDP, PureDP
from privtab.accounting.conversions import randomized_response_rdp, rdp_epsilon
from privtab.accounting.curves import geometric_rdp
from privtab.mechanisms import (
    DiscreteGaussian,
    Gaussian,
    Geometric,
    InsecureReleaseWarning,
    InsecureSourceError,
    Laplace,
    RandomizedResponse,
)
from privtab.mechanisms.base import Release
from privtab.random import SeededSource

ALPHAS = np.array([1.5, 2.0, 4.0, 16.0, 64.0])

MECHANISMS = [
    Geometric(0.5),
    DiscreteGaussian(0.5),
    Laplace(0.5),
    Gaussian(0.5),
]


def test_guarantee_types_and_values() -> None:
    assert Geometric(0.5, 2).guarantee == PureDP(0.5)
    assert DiscreteGaussian(0.25, 2).guarantee == ZCDP(0.25)
    assert DiscreteGaussian(0.25, 2).sigma2 == 8.0
    assert Laplace(0.5).guarantee == PureDP(0.5)
    assert Gaussian(0.125).guarantee == ZCDP(0.125)
    assert Gaussian(0.125).sigma == 2.0
    assert RandomizedResponse(1.0).guarantee == PureDP(1.0)


def test_guarantees_round_up_never_down() -> None:
    """ε given exactly as 1/3 is stated as the next float up (conservative)."""
    g = Geometric(Fraction(1, 3))
    assert Fraction(g.guarantee.epsilon) >= Fraction(1, 3)
    d = DiscreteGaussian("1/3")
    assert Fraction(d.guarantee.rho) >= Fraction(1, 3)


def test_geometric_rdp_is_the_exact_curve() -> None:
    for eps, sens in ((0.5, 1), (1.0, 3)):
        got = Geometric(eps, sens).rdp.curve(ALPHAS)
        assert np.allclose(got, geometric_rdp(eps, sens).curve(ALPHAS), rtol=1e-14)
    # at Δ = 1 it is randomized response's curve (seed-checks error 1)
    assert np.allclose(
        Geometric(1.0).rdp.curve(ALPHAS), randomized_response_rdp(1.0).curve(ALPHAS), rtol=1e-12
    )


def test_laplace_rdp_tends_to_mironov() -> None:
    a = ALPHAS
    b = 2.0
    mironov = np.log(a / (2 * a - 1) * np.exp((a - 1) / b) + (a - 1) / (2 * a - 1) * np.exp(-a / b))
    assert np.allclose(Laplace(0.5).rdp.curve(a), mironov / (a - 1), rtol=1e-6)


def test_every_rdp_curve_is_below_its_pure_or_zcdp_bound() -> None:
    for m in MECHANISMS:
        curve = m.rdp.curve(ALPHAS)
        g = m.guarantee
        bound = ALPHAS * g.rho if isinstance(g, ZCDP) else np.full_like(ALPHAS, g.epsilon)
        assert (curve <= bound * (1 + 1e-12)).all(), m
        assert isinstance(m.rdp, RDP)
        assert rdp_epsilon(m.rdp, 1e-6) > 0


def test_randomized_response_curves() -> None:
    rr2 = RandomizedResponse(1.0)
    assert np.allclose(rr2.rdp.curve(ALPHAS), randomized_response_rdp(1.0).curve(ALPHAS))
    rr3 = RandomizedResponse(1.0, 3)
    p, q = rr3.p_truth, rr3.p_other
    a = 2.0
    direct = math.log(p**a * q ** (1 - a) + q**a * p ** (1 - a) + q) / (a - 1)
    assert rr3.rdp.curve(np.array([a]))[0] == pytest.approx(direct)
    assert (rr3.rdp.curve(ALPHAS) <= 1.0 + 1e-12).all()


@pytest.mark.parametrize("mech", MECHANISMS, ids=lambda m: m.name)
def test_release_with_default_source_is_private(mech: object) -> None:
    r = mech.release(np.array([3, 10, 0]))  # type: ignore[attr-defined]
    assert isinstance(r, Release)
    assert r.private
    assert r.metadata()["private"] is True
    assert r.values.shape == (3,)
    assert "secure" in r.source


@pytest.mark.parametrize("mech", [*MECHANISMS, RandomizedResponse(1.0, 3)], ids=lambda m: m.name)
def test_seeded_source_is_refused_unless_allowed(mech: object) -> None:
    with pytest.raises(InsecureSourceError, match="allow_insecure"):
        mech.release(np.array([1, 2]), source=SeededSource(1))  # type: ignore[attr-defined]
    with pytest.warns(InsecureReleaseWarning, match="private: false"):
        r = mech.release(np.array([1, 2]), source=SeededSource(1), allow_insecure=True)  # type: ignore[attr-defined]
    assert r.private is False
    assert r.metadata()["private"] is False


def test_integer_mechanisms_keep_integers_and_reject_fractions() -> None:
    with pytest.warns(InsecureReleaseWarning):
        r = Geometric(1.0).release([1.0, 2.0], source=SeededSource(2), allow_insecure=True)
    assert r.values.dtype == np.int64
    with pytest.raises(ValueError, match=r"index 1 is 2\.5"):
        Geometric(1.0).release([1, 2.5])
    with pytest.raises(ValueError, match="index"):
        DiscreteGaussian(1.0).release(np.array([np.nan]))
    with pytest.raises(TypeError, match="numeric"):
        Geometric(1.0).release(np.array(["a"]))


def test_continuous_mechanisms_snap_and_account() -> None:
    r = Laplace(1.0).release(np.array([0.1, 7.0]))
    assert r.parameters["snapped"] is True
    assert r.guarantee.epsilon > 1.0  # type: ignore[attr-defined]
    assert r.guarantee.epsilon < 1.0 + 1e-9  # type: ignore[attr-defined]
    r2 = Laplace(1.0).release(np.array([1, 7]))
    assert r2.parameters["snapped"] is False
    assert r2.guarantee == PureDP(1.0)
    g = Gaussian(0.5).release(np.array([0.3]))
    assert g.guarantee.rho > 0.5  # type: ignore[attr-defined]
    gamma = Laplace(1.0).granularity
    assert np.array_equal(r.values / float(gamma), np.round(r.values / float(gamma)))
    with pytest.raises(ValueError, match="not finite"):
        Laplace(1.0).release([np.inf])
    with pytest.raises(ValueError, match="too large"):
        Gaussian(1.0).release([1e30])


def test_noise_is_added_to_the_values() -> None:
    src = SeededSource("add")
    with pytest.warns(InsecureReleaseWarning):
        r = DiscreteGaussian(2.0).release(np.full(10_000, 1000), source=src, allow_insecure=True)
    assert abs(r.values.mean() - 1000) < 0.1
    noise = Geometric(2.0).sample_noise(10_000, source=src)
    assert noise.dtype == np.int64
    assert abs(noise.mean()) < 0.1


def test_parameters_and_validation() -> None:
    with pytest.raises(ValueError, match="epsilon"):
        Geometric(0)
    with pytest.raises(ValueError, match="sensitivity"):
        Geometric(1.0, 1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rho"):
        DiscreteGaussian(-1)
    with pytest.raises(ValueError, match="power of two"):
        Laplace(1.0, granularity=0.1)
    assert Geometric.from_scale(4, 2).epsilon == 0.5
    assert DiscreteGaussian.from_sigma2(8, 2).rho == 0.25
    assert Gaussian.from_sigma(2).rho == 0.125
    d = Geometric(1.0).describe()
    assert d["mechanism"] == "geometric"
    assert d["moe95"] == 3
    assert "Geometric(epsilon=1.0" in repr(Geometric(1.0))


def test_randomized_response_release_and_estimates() -> None:
    rr = RandomizedResponse(math.log(3), 3)  # p = 3/5, q = 1/5
    assert rr.p_truth == pytest.approx(0.6)
    assert rr.p_other == pytest.approx(0.2)
    truth = np.repeat(np.arange(3), [50_000, 30_000, 20_000])
    with pytest.warns(InsecureReleaseWarning):
        rel = rr.release(truth, source=SeededSource("rr"), allow_insecure=True)
    kept = (rel.values == truth).mean()
    assert abs(kept - 0.6) < 6 * math.sqrt(0.24 / truth.size)
    est = rr.estimate_counts(rel.values)
    sd = math.sqrt(rr.count_variance(truth.size, 50_000))
    assert abs(est[0] - 50_000) < 6 * sd
    with pytest.raises(ValueError, match="outside"):
        rr.release(np.array([3]))
    with pytest.raises(TypeError, match="integer"):
        rr.release(np.array([0.5]))
    with pytest.raises(ValueError, match="categories"):
        RandomizedResponse(1.0, 1)


def test_randomized_response_exact_error() -> None:
    rr = RandomizedResponse(1.0)
    pmf = rr.count_pmf(200, 60)
    assert pmf.sum() == pytest.approx(1.0, abs=1e-12)
    s = np.arange(pmf.size)
    est = (s - 200 * rr.p_other) / (rr.p_truth - rr.p_other)
    assert (pmf * est).sum() == pytest.approx(60, abs=1e-9)  # unbiased
    assert (pmf * (est - 60) ** 2).sum() == pytest.approx(rr.count_variance(200, 60), rel=1e-9)
    m = rr.moe(0.95, n=200, count=60)
    err = np.abs(est - 60)
    assert pmf[err <= m + 1e-9].sum() >= 0.95
    assert pmf[err < m - 1e-9].sum() < 0.95
    # default count: the variance-maximising one; close to the normal 1.96·sd (here ≈ 26.6)
    worst_sd = math.sqrt(max(rr.count_variance(200, c) for c in range(201)))
    assert rr.moe(0.95, n=200) == pytest.approx(1.96 * worst_sd, rel=0.05)


def test_randomized_response_confidence_interval_covers() -> None:
    """Exact test inversion: coverage ≥ level for every true count (checked exactly)."""
    rr = RandomizedResponse(1.0)
    n = 60
    for c in (0, 17, 45, 60):
        pmf = rr.count_pmf(n, c)
        covered = 0.0
        for s_obs, prob in enumerate(pmf):
            est = (s_obs - n * rr.p_other) / (rr.p_truth - rr.p_other)
            lo, hi = rr.confidence_interval(est, 0.9, n=n)
            if lo <= c <= hi:
                covered += prob
        assert covered >= 0.9 - 1e-12


def test_randomized_response_from_flip_probability() -> None:
    """Inferential-limits seed Ex. 2.3 (p = 1/(1+e^ε)) and semantics seed Ex. 4.3: built
    from its flip probability, ε = ln((1−p)/p) is kept as the exact rational e^ε and
    published rounded up; probabilities stay exact fractions; round trip from ε."""
    import mpmath

    rr = RandomizedResponse.from_flip_probability(0.25)
    assert rr.exp_epsilon_exact == Fraction(3)
    assert rr.exact_probabilities == (Fraction(3, 4), Fraction(1, 4))
    with mpmath.workdps(50):
        ln3 = mpmath.log(3)
        assert mpmath.mpf(rr.epsilon) >= ln3  # never understates ε
        assert mpmath.mpf(math.nextafter(rr.epsilon, 0)) < ln3  # by at most one float step
    assert rr.flip_probability == 0.25
    assert rr.p_truth == 0.75
    assert rr.guarantee == PureDP(rr.epsilon)
    assert rr.rdp(np.array([2.0]))[0] == pytest.approx(
        randomized_response_rdp(math.log(3))(np.array([2.0]))[0]
    )
    # k-ary: the flip probability spreads over k − 1 other categories
    rr3 = RandomizedResponse.from_flip_probability("1/2", 3)
    assert rr3.exp_epsilon_exact == Fraction(2)
    assert rr3.exact_probabilities == (Fraction(1, 2), Fraction(1, 2))
    assert rr3.p_other == 0.25
    for eps in (0.1, 1.0, 3.0):
        p = RandomizedResponse(eps).flip_probability
        assert p == pytest.approx(1 / (1 + math.exp(eps)), rel=1e-15)
        back = RandomizedResponse.from_flip_probability(p)
        assert back.epsilon == pytest.approx(eps, rel=1e-14)
        assert RandomizedResponse(eps).exact_probabilities is None
    for bad in (0, 0.5, 0.7, -0.1, "abc"):
        with pytest.raises(ValueError, match="flip probability"):
            RandomizedResponse.from_flip_probability(bad)
    with pytest.raises(ValueError, match="flip probability"):
        RandomizedResponse.from_flip_probability("2/3", 3)


def test_randomized_response_rational_release_is_exact() -> None:
    """A rational truth probability is sampled with exact rational Bernoulli draws: the
    kept fraction matches 3/4 within 6 standard errors (power: 0.7 is 29 se away)."""
    rr = RandomizedResponse.from_flip_probability("1/4")
    truth = np.zeros(100_000, dtype=np.int64)
    with pytest.warns(InsecureReleaseWarning):
        rel = rr.release(truth, source=SeededSource("rr-flip"), allow_insecure=True)
    kept = float((rel.values == 0).mean())
    assert abs(kept - 0.75) < 6 * math.sqrt(0.75 * 0.25 / truth.size)
    assert "from_flip_probability(0.25, 2)" in repr(rr)


@pytest.mark.parametrize(("eps", "sens"), [(0.5, 1), (Fraction(1, 20), 1), (2.0, 3), (1e-9, 1)])
def test_geometric_parameter_p(eps: float, sens: int) -> None:
    """Course seed Defs. 9–10 (Q10): p = 1 − e^{−ε/Δ}; the noise is the difference of two
    geometric variables with success probability p: pmf p/(2−p)·(1−p)^{|x|}, variance
    2(1−p)/p²."""
    import mpmath

    g = Geometric(eps, sens)
    with mpmath.workdps(40):
        expected = -mpmath.expm1(
            -mpmath.mpf(Fraction(eps).numerator) / Fraction(eps).denominator / sens
        )
    assert g.p == pytest.approx(float(expected), rel=1e-15)
    if eps >= 0.05:
        p = g.p
        x = np.arange(-5, 6)
        assert g.noise_pmf(x) == pytest.approx(p / (2 - p) * (1 - p) ** np.abs(x), rel=1e-12)
        assert g.variance == pytest.approx(2 * (1 - p) / p**2, rel=1e-12)
