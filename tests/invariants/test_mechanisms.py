"""Invariant-aware table mechanisms: margins kept, error formulas, the §5.2 ordering.

Statistical checks use fixed seeds; tolerances are ≥ 5 standard errors (false-failure
probability < 10⁻⁶ per check had the seed been random).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

from privtab.accounting import GDP, PureDP
from privtab.invariants import (
    CountInvariant,
    NaiveGaussian,
    NaiveKNorm,
    OptimalKNorm,
    ProjectedGaussian,
    Schema,
)
from privtab.invariants.knorm import SubspacePolytope
from privtab.invariants.postprocess import nearest_integer_table
from privtab.invariants.semi_adjacency import conforming_datasets
from privtab.invariants.sensitivity import projection_matrix
from privtab.mechanisms import InsecureSourceError
from privtab.random import RandomSource

Seeded = Callable[[int], RandomSource]

# releases here use seeded (test-only) sources on purpose
pytestmark = pytest.mark.filterwarnings("ignore::privtab.mechanisms.InsecureReleaseWarning")
X33 = np.array([[30, 12, 8], [10, 25, 15], [5, 9, 40]])


def all_mechanisms(r: int, c: int) -> list[object]:
    return [
        ProjectedGaussian(r, c, mu=1.0),
        OptimalKNorm(r, c, epsilon=1.0),
        NaiveGaussian(r, c, mu=1.0),
        NaiveKNorm(r, c, epsilon=1.0, norm="l1"),
        NaiveKNorm(r, c, epsilon=1.0, norm="l2"),
        NaiveKNorm(r, c, epsilon=1.0, norm="linf"),
    ]


def test_ours_keep_margins_naive_do_not(seeded: Seeded) -> None:
    for mech in all_mechanisms(3, 3):
        rel = mech.release(X33, source=seeded(1), allow_insecure=True)  # type: ignore[attr-defined]
        assert rel.private is False
        if mech.name in ("projected-gaussian", "optimal-knorm"):  # type: ignore[attr-defined]
            assert rel.margin_error < 1e-9
        else:
            assert rel.margin_error > 0.1


def test_projected_noise_lies_in_span(seeded: Seeded) -> None:
    mech = ProjectedGaussian(3, 4, mu=0.5)
    ys = mech.sample_outputs(
        np.ones((3, 4), dtype=int) * 5, 200, source=seeded(2), allow_insecure=True
    )
    noise = ys.reshape(200, 12) - 5
    p = projection_matrix(3, 4)
    assert np.allclose(noise @ p, noise, atol=1e-9)
    assert np.abs(ys.sum(axis=2) - 20).max() < 1e-9
    assert np.abs(ys.sum(axis=1) - 15).max() < 1e-9


@pytest.mark.parametrize(("r", "c"), [(2, 2), (3, 3), (2, 4)])
def test_expected_squared_l2_matches_monte_carlo(r: int, c: int, seeded: Seeded) -> None:
    n = 20000
    for k, mech in enumerate(all_mechanisms(r, c)):
        sq = (mech.noise(n, seeded(10 + k)) ** 2).sum(axis=1)  # type: ignore[attr-defined]
        se = sq.std() / math.sqrt(n)
        assert abs(sq.mean() - mech.expected_squared_l2()) < 5 * se, mech  # type: ignore[attr-defined]


def test_closed_form_sigmas() -> None:
    # Algorithm 1 with Δ₂ = 2 (2 × 2, Example 8) and √6 (3 × 3, 3-cycles); naive 3√2/μ
    assert ProjectedGaussian(2, 2, mu=1.0).sigma == pytest.approx(2.0)
    assert ProjectedGaussian(3, 3, mu=2.0).sigma == pytest.approx(math.sqrt(6) / 2)
    assert ProjectedGaussian(3, 3, mu=1.0, paper_space=True).sigma == pytest.approx(2.0)
    assert NaiveGaussian(3, 3, mu=1.0).sigma == pytest.approx(3 * math.sqrt(2))
    assert ProjectedGaussian(2, 2).expected_squared_l2() == pytest.approx(4.0)
    assert NaiveGaussian(2, 2).expected_squared_l2() == pytest.approx(18.0 * 4)
    assert ProjectedGaussian(3, 3).guarantee.guarantee == GDP(1.0)
    assert OptimalKNorm(3, 3, epsilon=0.5).guarantee.guarantee == PureDP(0.5)
    assert "3 replacements" in str(ProjectedGaussian(3, 3).guarantee)


@pytest.mark.parametrize("model", ["I", "II"])
def test_ours_beat_naive_on_models_i_ii(model: str, seeded: Seeded) -> None:
    # seed §5.2, Figures 2–3, bounded: 30 replicates of a 3 × 3 table, n = 200
    r = c = 3
    p = (
        np.full(r * c, 1 / (r * c))
        if model == "I"
        else np.arange(1, r * c + 1) / (r * c * (r * c + 1) / 2)
    )
    rng = np.random.default_rng(5)
    tables = [rng.multinomial(200, p).reshape(r, c) for _ in range(30)]

    def mean_l2(mech: object, seed: int) -> float:
        src = seeded(seed)
        out = [
            np.linalg.norm(mech.release(t, source=src, allow_insecure=True).table - t)  # type: ignore[attr-defined]
            for t in tables
        ]
        return float(np.mean(out))

    g_ours = mean_l2(ProjectedGaussian(r, c, mu=1.0), 1)
    g_naive = mean_l2(NaiveGaussian(r, c, mu=1.0), 2)
    assert g_ours < g_naive
    k_ours = mean_l2(OptimalKNorm(r, c, epsilon=1.0), 3)
    for i, norm in enumerate(("l1", "l2", "linf")):
        assert k_ours < mean_l2(NaiveKNorm(r, c, epsilon=1.0, norm=norm), 4 + i)


def test_seeded_source_refused_without_flag(seeded: Seeded) -> None:
    with pytest.raises(InsecureSourceError, match="not a secure source"):
        ProjectedGaussian(2, 2).release(np.eye(2, dtype=int), source=seeded(1))
    rel = ProjectedGaussian(2, 2).release(np.eye(2, dtype=int))
    assert rel.private is True


def test_integer_postprocessing_keeps_margins(seeded: Seeded) -> None:
    x = np.array([[0, 1, 7], [3, 0, 2]])
    rel = OptimalKNorm(2, 3, epsilon=0.3).release(
        x, source=seeded(4), allow_insecure=True, integer=True
    )
    it = rel.integer_table
    assert it is not None
    assert it.min() >= 0
    assert it.sum(axis=1).tolist() == [8, 5]
    assert it.sum(axis=0).tolist() == [3, 1, 9]


def test_nearest_integer_table_brute_force() -> None:
    rng = np.random.default_rng(11)
    for _ in range(15):
        x = rng.integers(0, 4, size=(2, 3))
        y = x + rng.normal(0, 2.0, size=x.shape)
        best = nearest_integer_table(y, x.sum(1), x.sum(0))
        inv = CountInvariant.one_way_margins(Schema.grid(2, 3), x)
        cands = conforming_datasets(inv, max_datasets=100_000)
        brute = np.abs(cands - y.reshape(1, -1)).sum(axis=1).min()
        assert np.abs(best - y).sum() == pytest.approx(brute, abs=1e-9)


def test_bad_tables_are_named() -> None:
    with pytest.raises(ValueError, match=r"cell \(row 2, column 1\) is negative: -3"):
        ProjectedGaussian(2, 2).release(np.array([[1, 2], [-3, 4]]))
    with pytest.raises(ValueError, match="not an integer count"):
        ProjectedGaussian(2, 2).release(np.array([[1.5, 2], [3, 4]]))
    with pytest.raises(ValueError, match="shape"):
        ProjectedGaussian(2, 2).release(np.ones((2, 3), dtype=int))
    with pytest.raises(ValueError, match="mu"):
        ProjectedGaussian(2, 2, mu=0.0)


# ------------------------------------------------------------------ the K-norm polytope
def test_polytope_gauge_and_moments(seeded: Seeded) -> None:
    mech = OptimalKNorm(3, 3, epsilon=1.0)
    poly = mech.polytope
    coords = mech.space.elements.astype(float) @ mech.space.basis
    g = poly.gauge(coords)
    assert np.all(g <= 1 + 1e-9)
    assert np.isclose(g.max(), 1.0)
    u = poly.sample_uniform(40000, seeded(3), method="rejection")
    sq = (u**2).sum(axis=1)
    assert abs(sq.mean() - poly.second_moment()) < 5 * sq.std() / 200
    # acceptance of the box proposal, by Monte Carlo
    box = (2 * seeded(4).random(40000 * poly.dim).reshape(-1, poly.dim) - 1) * poly.half_widths
    frac = poly.contains(box).mean()
    assert abs(frac - poly.acceptance) < 5 * math.sqrt(poly.acceptance / 40000)


@pytest.mark.parametrize("method", ["rejection", "cone"])
def test_uniform_in_polytope_gauge_law(method: str, seeded: Seeded) -> None:
    # U uniform in an m-dimensional convex body ⇒ P(‖U‖_K ≤ t) = t^m
    poly = OptimalKNorm(3, 4, epsilon=1.0).polytope
    u = poly.sample_uniform(20000, seeded(21), method=method)
    g = poly.gauge(u)
    res = stats.kstest(g**poly.dim, "uniform")
    assert res.pvalue > 1e-6


def test_knorm_radial_law(seeded: Seeded) -> None:
    # density ∝ exp(−ε‖z‖_K) on ℝ^m ⇒ ‖noise‖_K ~ Gamma(m, 1/ε); the sampler draws
    # R ~ Gamma(m + 1, 1/ε) times U uniform in K, and ‖RU‖_K = R·‖U‖_K (Hardt–Talwar)
    mech = OptimalKNorm(3, 3, epsilon=0.7)
    noise = mech.noise(20000, seeded(8))
    coords = noise @ mech.space.basis
    radial = mech.polytope.gauge(coords)
    res = stats.kstest(radial, stats.gamma(a=mech.space.dim, scale=1 / 0.7).cdf)
    assert res.pvalue > 1e-6


def test_one_dimensional_polytope(seeded: Seeded) -> None:
    poly = SubspacePolytope.from_points(np.array([[2.0], [-2.0]]))
    assert poly.volume == 4.0
    assert poly.acceptance == 1.0
    assert poly.second_moment() == pytest.approx(4 / 3)
    u = poly.sample_uniform(1000, seeded(1), method="cone")
    assert u.min() >= -2
    assert u.max() <= 2


def test_polytope_refuses_large_dimension() -> None:
    with pytest.raises(ValueError, match="spans 16 dimensions"):
        _ = OptimalKNorm(5, 5).polytope
