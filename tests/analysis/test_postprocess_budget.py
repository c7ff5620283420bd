"""Post-processing (bias, consistency) and error estimates charged to the ledger."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privtab.accounting import ZCDP, BudgetExceededError, PrivacyLedger, PureDP
from privtab.analysis.combine import gls
from privtab.analysis.error_budget import release_error_estimate
from privtab.analysis.postprocess import clip_bias, clip_nonnegative, consistent_total, round_counts
from privtab.mechanisms import DiscreteGaussian, Gaussian, Geometric, InsecureSourceError, Laplace
from privtab.random import SeededSource


def test_clip_and_round() -> None:
    np.testing.assert_array_equal(clip_nonnegative([-1.5, 0, 2.5]), [0, 0, 2.5])
    np.testing.assert_array_equal(round_counts([-1.5, 0.49, 2.5]), [-2, 0, 3])


@pytest.mark.parametrize(
    "mech", [Laplace(1.0), Geometric(1.0), DiscreteGaussian(0.5), Gaussian(0.5)],
    ids=lambda m: m.name,
)  # fmt: skip
@pytest.mark.parametrize("c", [0, 1, 3])
def test_clip_bias_exact_vs_simulation(mech: object, c: int) -> None:
    """Course §4.3 Example 4.2: clipping biases small counts upward (Laplace: (b/2)e^{−c/b})."""
    n = 100_000
    e = mech.sample_noise(n, source=SeededSource(f"clip-{c}"))  # type: ignore[attr-defined]
    sim = np.maximum(c + e, 0)
    bias = clip_bias(mech, c)  # type: ignore[arg-type]
    assert bias > 0
    assert abs(sim.mean() - c - bias) < 4.5 * sim.std() / math.sqrt(n)
    if isinstance(mech, Laplace):
        assert bias == pytest.approx(0.5 * math.exp(-c), rel=1e-9)


def test_consistent_total_is_gls_and_nonnegative() -> None:
    parts, total = np.array([5.0, -2.0, 7.0]), 12.0
    v, vt = 2.0, 3.0
    free = consistent_total(total, parts, vt, v, nonnegative=False)
    a = np.vstack([np.eye(3), np.ones((1, 3))])
    ref = gls(a, np.append(parts, total), [v, v, v, vt]).coef
    np.testing.assert_allclose(free.parts, ref, atol=1e-9)
    assert free.total == pytest.approx(free.parts.sum())
    nn = consistent_total(total, parts, vt, v, nonnegative=True)
    assert (nn.parts >= 0).all()
    assert nn.parts[1] == 0


def test_consistency_reduces_error_by_simulation() -> None:
    rng = np.random.default_rng(3)
    g = Geometric(0.5)
    src = SeededSource("consistency")
    truth = rng.integers(20, 60, size=(2000, 4))
    parts = truth + g.sample_noise(truth.shape, source=src)
    total = truth.sum(1) + g.sample_noise(2000, source=src)
    fit = np.array(
        [consistent_total(t, p, g.variance, g.variance, nonnegative=False).parts
         for t, p in zip(total, parts, strict=True)]
    )  # fmt: skip
    mse_raw = ((parts - truth) ** 2).mean()
    mse_fit = ((fit - truth) ** 2).mean()
    assert mse_fit < mse_raw
    # GLS: each cell's variance is v(1 − v/(4v + v)) = 0.8 v
    assert mse_fit == pytest.approx(0.8 * g.variance, rel=0.05)
    assert abs((fit - truth).mean()) < 4 * math.sqrt(0.8 * g.variance / fit.size)


def test_error_estimate_ledger_and_coverage() -> None:
    ledger = PrivacyLedger(ZCDP(1.0))
    mech = DiscreteGaussian(0.25)
    with pytest.warns(UserWarning, match="private: false"):
        est = release_error_estimate(
            np.arange(2000) % 7, np.zeros(2000), mech, ledger, level=0.9,
            source=SeededSource("err"), allow_insecure=True,
        )  # fmt: skip
    assert ledger.spent == ZCDP(0.25)
    assert [c.label for c in ledger.entries] == ["error estimate"]
    truth = np.arange(2000) % 7
    rate = float(((est.lower <= truth) & (truth <= est.upper)).mean())
    cov = mech.law.coverage(int(est.moe))
    assert rate == pytest.approx(cov, abs=4 * math.sqrt(cov * (1 - cov) / 2000))
    # over budget: raises and records nothing
    small = PrivacyLedger(PureDP(0.5))
    with pytest.raises(BudgetExceededError):
        release_error_estimate(3, 0, Laplace(1.0), small, source=SeededSource(1))
    assert small.entries == ()
    # insecure sources are refused without allow_insecure
    with pytest.raises(InsecureSourceError):
        release_error_estimate(3, 0, Laplace(0.1), small, source=SeededSource(1))
