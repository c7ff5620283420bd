"""Empirical privacy check: the projected Gaussian's distinguishability vs its claimed μ.

For semi-adjacent pairs (equal margins, ≤ 3 replacements apart) the measured μ̂ must not
exceed the claimed μ beyond 4.5 standard errors, and the worst pair must reach it (the
calibration is tight). The paper's Prop. 32 calibration (Δ₂ = 2) is caught exceeding its
claim on a 3-cycle pair of 3 × 3 tables, which Prop. 32 omits.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from privtab.invariants import NaiveGaussian, ProjectedGaussian
from privtab.invariants.audit import audit_gdp
from privtab.invariants.sensitivity import table_sensitivity_space
from privtab.random import RandomSource

Seeded = Callable[[int], RandomSource]

# releases here use seeded (test-only) sources on purpose
pytestmark = pytest.mark.filterwarnings("ignore::privtab.mechanisms.InsecureReleaseWarning")
N_DEFAULT = 20_000

X22 = np.array([[3, 1], [2, 4]])
D22 = np.array([[1, -1], [-1, 1]])
I33 = np.eye(3, dtype=np.int64)
CYCLE = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]])  # same margins as I33, 3 replacements away


@pytest.mark.parametrize(
    ("mech", "x", "xp"),
    [
        (ProjectedGaussian(2, 2, mu=0.5), X22, X22 + D22),
        (ProjectedGaussian(3, 3, mu=1.0), I33, CYCLE),
        (
            ProjectedGaussian(3, 3, mu=1.0),
            I33 * 2,
            I33 * 2 + np.array([[-1, 1, 0], [1, -1, 0], [0, 0, 0]]),
        ),
        (NaiveGaussian(3, 3, mu=1.0), I33, CYCLE),
    ],
)
def test_claimed_mu_holds(mech: object, x: np.ndarray, xp: np.ndarray, seeded: Seeded) -> None:
    mu = mech.mu  # type: ignore[attr-defined]
    res = audit_gdp(mech, x, xp, mu, N_DEFAULT, seeded(17))
    assert res.passed, res.to_dict()
    # the measured separation matches the pair's own ‖Δ‖/σ
    assert abs(res.mu_hat - res.mu_pair) < 4.5 * res.mu_se


def test_worst_pair_is_tight(seeded: Seeded) -> None:
    mech = ProjectedGaussian(3, 3, mu=1.0)
    res = audit_gdp(mech, I33, CYCLE, 1.0, N_DEFAULT, seeded(3))
    assert res.mu_pair == pytest.approx(1.0)
    assert abs(res.mu_hat - 1.0) < 4.5 * res.mu_se


def test_paper_calibration_exceeds_its_claim_on_a_three_cycle(seeded: Seeded) -> None:
    mech = ProjectedGaussian(3, 3, mu=1.0, paper_space=True)  # σ = 2/μ (Prop. 32, Example 8)
    res = audit_gdp(mech, I33, CYCLE, 1.0, N_DEFAULT, seeded(4))
    assert not res.passed
    assert res.mu_pair == pytest.approx(math.sqrt(6) / 2)
    assert res.mu_hat > 1.0 + 10 * res.mu_se


def test_every_element_of_the_space_within_claim(seeded: Seeded) -> None:
    # the pair separation ‖Δ‖/σ over the whole space never exceeds μ, attained by 3-cycles
    mech = ProjectedGaussian(3, 4, mu=0.8)
    norms = np.linalg.norm(table_sensitivity_space(3, 4).astype(float), axis=1)
    assert (norms / mech.sigma).max() == pytest.approx(0.8)


def test_audit_input_errors(seeded: Seeded) -> None:
    mech = ProjectedGaussian(2, 2)
    with pytest.raises(ValueError, match="same margins"):
        audit_gdp(mech, X22, X22 + np.array([[1, 0], [0, 0]]), 1.0, 10, seeded(1))
    with pytest.raises(ValueError, match="equal"):
        audit_gdp(mech, X22, X22, 1.0, 10, seeded(1))


@pytest.mark.slow
@pytest.mark.parametrize("n", [1_000_000])
def test_claimed_mu_holds_slow(n: int, seeded: Seeded) -> None:
    mech = ProjectedGaussian(3, 3, mu=1.0)
    res = audit_gdp(mech, I33, CYCLE, 1.0, n, seeded(99), alphas=(0.001, 0.01, 0.05, 0.2, 0.5))
    assert res.passed, res.to_dict()
    assert abs(res.mu_hat - 1.0) < 4.5 * res.mu_se  # se ≈ 0.0015
