"""Bayesian bounds: course Alice/Bob, seed values, and exact posteriors on a small example."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from privtab.accounting import RDP, ZCDP, PureDP
from privtab.semantics import pbdp_curve
from privtab.semantics.bayes import (
    alice_premium_bound,
    bob_max_epsilon,
    counterfactual_odds_bound,
    laplace_binary_sum_bounds,
    posterior_interval,
    posterior_ratio_tail_arbitrary_prior,
    posterior_ratio_tail_rest_known,
    pufferfish_odds_bounds,
    pure_posterior_ratio_bounds,
    randomized_response_bounds,
    randomized_response_flip,
)

# intro-to-dp-jsm2019-course.md Figure 3.3.1 (Alice): p e^{2ε}
ALICE = {
    1e-9: [
        1.0202013400267558e-09,
        1.2214027581601698e-09,
        7.38905609893065e-09,
        5.459815003314424e-08,
        2.9809579870417283e-06,
        0.008886110520507872,
        78962.96018268069,
    ],
    1.1: [
        1.1222214740294314,
        1.343543033976187,
        8.127961708823715,
        60.05796503645866,
        3279.053785745901,
        9774721.57255866,
        86859256200948.77,
    ],
    2.0: [
        2.0404026800535116,
        2.4428055163203397,
        14.7781121978613,
        109.19630006628847,
        5961.915974083457,
        17772221.041015744,
        157925920365361.38,
    ],
    16.0: [
        16.323221440428092,
        19.542444130562718,
        118.2248975828904,
        873.5704005303078,
        47695.32779266765,
        142177768.32812595,
        1263407362922891.0,
    ],
}
EPS = [0.01, 0.1, 1, 2, 4, 8, 16]


@pytest.mark.parametrize(("p", "row"), ALICE.items())
def test_alice_table(p: float, row: list[float]) -> None:
    np.testing.assert_allclose(counterfactual_odds_bound(p, EPS), row, rtol=1e-12)


def test_alice_premium_and_bob() -> None:
    assert alice_premium_bound(0.01) == pytest.approx(61.110737014715696, abs=1e-9)  # not $60
    assert bob_max_epsilon(1.25) == pytest.approx(0.11157177565710488, abs=1e-15)
    assert round(bob_max_epsilon(), 2) == 0.11
    assert math.exp(2 * bob_max_epsilon()) == pytest.approx(1.25)


def test_seed_zcdp_bayes_values() -> None:
    """Semantics seed Thms 7.4.1 / 7.4.2 (ρ = 2.63 and Scenario A)."""
    rk = {5.0: 0.003950449711593527, 10.0: 2.5983905364362136e-07, 15.0: 1.4744330002859308e-13}
    for e, v in rk.items():
        assert posterior_ratio_tail_rest_known(ZCDP(2.63), e) == pytest.approx(v, rel=1e-12)
    rho_a = 0.11150074378640834
    for e, v1, v2 in [
        (0.5, 0.4323976779542864, 0.7129032490445758),
        (1.0, 0.06266120921419631, 0.17033082635622032),
        (2.0, 4.5562514741968696e-05, 0.0003366639774367614),
    ]:
        assert posterior_ratio_tail_rest_known(ZCDP(rho_a), e) == pytest.approx(v1, rel=1e-12)
        assert posterior_ratio_tail_arbitrary_prior(ZCDP(rho_a), e) == pytest.approx(v2, rel=1e-12)


def test_single_rdp_pair_values() -> None:
    for lam, tau, e, v1, v2 in [
        (2.0, 0.5, 1.0, 0.22313016014842982, 0.6065306597126334),
        (5.0, 1.0, 2.0, 0.0024787521766663585, 0.01831563888873418),
        # seed-checks 000.bayes.thm741_rdp / thm742_rdp .al10.0.tau2.63.eps4.0
        (10.0, 2.63, 4.0, 8.090420795158388e-08, 4.417220084053278e-06),
    ]:
        g = RDP.tabulated([lam], [tau])  # known at one order only: the bound uses it
        # exp((λ−1)τ − λε) and exp((λ−1)(τ − ε)) exactly (a smaller value would be invalid)
        assert posterior_ratio_tail_rest_known(g, e) == pytest.approx(v1, rel=1e-9)
        assert posterior_ratio_tail_arbitrary_prior(g, e) == pytest.approx(v2, rel=1e-9)


def test_inferential_limits_values() -> None:
    raw = {"bound": "raw"}
    assert posterior_interval(0.3, 0.5, **raw) == pytest.approx(
        (0.18195919791379003, 0.4946163812100384)
    )
    lo, hi = posterior_interval(0.5, 0.25, 4, clip=False, **raw)
    assert (lo, hi) == pytest.approx((0.18393972058572117, 1.3591409142295225))
    assert posterior_interval(0.5, 0.25, 4, **raw)[1] == 1.0
    assert randomized_response_bounds(3, 1.0) == pytest.approx(
        (0.019452395344246545, 0.3907118049313079), abs=1e-15
    )
    assert randomized_response_bounds(10, 0.5) == pytest.approx(
        (5.883522358797562e-05, 0.008731921399197894), abs=1e-15
    )
    assert pufferfish_odds_bounds(0.25, 1.0) == pytest.approx(
        (0.09196986029286058, 0.6795704571147613)
    )
    assert randomized_response_flip(1.0) == pytest.approx(0.2689414213699951)
    # seed-checks 001.ex23.rr_flip.e0.5, 001.thm64.raw.pi0.9/pi0.02, 001.thm85.odds.o3.e0.5
    assert randomized_response_flip(0.5) == pytest.approx(0.37754066879814546, rel=1e-12)
    assert posterior_interval(0.9, 0.2, clip=False, **raw) == pytest.approx(
        (0.7368576777701836, 1.0992624823441528), rel=1e-12
    )
    assert posterior_interval(0.9, 0.2, **raw) == pytest.approx(
        (0.7368576777701836, 1.0), rel=1e-12
    )
    assert posterior_interval(0.02, 1.0, **raw) == pytest.approx(
        (0.007357588823428847, 0.054365636569180906), rel=1e-12
    )
    assert pufferfish_odds_bounds(3, 0.5) == pytest.approx(
        (1.8195919791379003, 4.946163812100385), rel=1e-12
    )
    assert pure_posterior_ratio_bounds(1.0)[1] == pytest.approx(math.e)


# ------------------------------------------------------------- exact posteriors (small model)


def _geometric_clamped(eps0: float, top: int = 6) -> np.ndarray:
    """P(ω | c): ω = clamp(c + G, 0, top), G two-sided geometric (ε0-DP, c ∈ {0..3})."""
    t = math.exp(-eps0)
    g = np.arange(-200, 201)
    pg = (1 - t) / (1 + t) * t ** np.abs(g)
    out = np.zeros((4, top + 1))
    for c in range(4):
        w = np.clip(c + g, 0, top)
        np.add.at(out[c], w, pg)
    return out


def _renyi(p: np.ndarray, q: np.ndarray, lam: float) -> float:
    return float(np.log(np.sum(p**lam * q ** (1 - lam))) / (lam - 1))


@pytest.mark.parametrize("eps0", [0.3, 1.0])
def test_bounds_hold_for_exact_posteriors(eps0: float) -> None:
    """Record r ∈ {0,1}, the rest z ∈ {0,1,2} (correlated prior); output clamp(r+z+G)."""
    rng = np.random.default_rng(7)
    lik = _geometric_clamped(eps0)  # lik[c] = P(ω | count c)
    prior = rng.dirichlet(np.ones(6)).reshape(2, 3)  # π(r, z)
    pw = lambda r, z: lik[r + z]  # noqa: E731
    lams = [1.5, 2.0, 4.0, 10.0]
    tau = {
        lam: max(_renyi(pw(r, z), pw(1 - r, z), lam) for r in (0, 1) for z in range(3))
        for lam in lams
    }
    eps_grid = np.linspace(0.01, 3 * eps0, 25)
    zc = ZCDP(eps0**2 / 2)  # ε-DP ⇒ ε²/2-zCDP
    # the model's own Rényi curve at the four orders, through privtab's RDP bounds
    g = RDP.tabulated(lams, [tau[lam] for lam in lams])
    pbdp = pbdp_curve(PureDP(eps0), eps_grid)
    # Thm 7.4.1: z known, ratio = P(ω|r,z)/P_z(ω), ω ~ P_z
    for z in range(3):
        pz = prior[:, z] / prior[:, z].sum()
        marg = sum(pz[r] * pw(r, z) for r in (0, 1))
        for r in (0, 1):
            ratio = pw(r, z) / marg
            assert np.all(ratio <= math.exp(eps0) * (1 + 1e-12))
            for i, e in enumerate(eps_grid):
                exact = float(marg[ratio > math.exp(e)].sum())
                for lam in lams:
                    assert exact <= math.exp((lam - 1) * tau[lam] - lam * e) + 1e-12
                assert exact <= float(posterior_ratio_tail_rest_known(zc, e)) + 1e-12
                assert exact <= float(posterior_ratio_tail_rest_known(g, e)) + 1e-12
                # f-DP / pbdp version: ω drawn given the true record r
                truth = float(pw(r, z)[ratio > math.exp(e)].sum())
                assert truth <= pbdp[i] + 1e-12
    # Thm 7.4.2: arbitrary (correlated) prior, counterfactual replaces r by π(·|z)
    p_omega = sum(prior[r, z] * pw(r, z) for r in (0, 1) for z in range(3))
    p_cf = [sum(prior[r, z] / prior[:, z].sum() * pw(r, z) for r in (0, 1)) for z in range(3)]
    for r in (0, 1):
        actual = sum(prior[r, z] * pw(r, z) for z in range(3)) / p_omega
        cf = sum(prior[r, z] * p_cf[z] for z in range(3)) / p_omega
        ratio = actual / cf
        lo, hi = pure_posterior_ratio_bounds(eps0)  # Thm 7.3
        assert np.all(ratio <= hi * (1 + 1e-12))
        assert np.all(ratio >= lo * (1 - 1e-12))
        given_r = sum(prior[r, z] / prior[r].sum() * pw(r, z) for z in range(3))
        for e in eps_grid:
            exact = float(given_r[ratio > math.exp(e)].sum())
            for lam in lams:
                assert exact <= math.exp((lam - 1) * (tau[lam] - e)) + 1e-12
            assert exact <= float(posterior_ratio_tail_arbitrary_prior(g, e)) + 1e-12
            assert exact <= float(posterior_ratio_tail_arbitrary_prior(zc, e)) + 1e-12


def test_thm41_data_probability_bounds_exact() -> None:
    """Example 4.4: the privatised-data density of any model on {0,1}^3 lies in [l, u]."""
    rng = np.random.default_rng(3)
    n, eps = 3, 0.5
    s = np.linspace(-5, 8, 131)
    lo, hi = laplace_binary_sum_bounds(s, n, eps)
    xs = np.array([[(k >> i) & 1 for i in range(n)] for k in range(2**n)]).sum(axis=1)
    for _ in range(20):
        theta = rng.dirichlet(np.full(2**n, 0.3))
        dens = (theta[:, None] * 0.5 * eps * np.exp(-eps * np.abs(s[None, :] - xs[:, None]))).sum(0)
        assert np.all(dens >= lo * (1 - 1e-12))
        assert np.all(dens <= hi * (1 + 1e-12))


# ------------------------------------------------------ prior-to-posterior (issue 21, Thm 6.4)


@pytest.mark.parametrize("prior", [0.05, 0.4, 0.75])
@pytest.mark.parametrize("eps", [0.3, 0.8])
@pytest.mark.parametrize("d", [1, 3])
def test_coherent_posterior_bounds_formula(prior: float, eps: float, d: int) -> None:
    """Upper = min(e^{εd}π, 1 − e^{−εd}(1−π)), lower = max(e^{−εd}π, 1 − e^{εd}(1−π)):
    against mpmath at 40 digits, to 1e-12; the odds form against π e^{±k}/(π e^{±k} + 1 − π);
    the three forms nest (odds ⊂ coherent ⊂ raw)."""
    with mpmath.workdps(40):
        k, p = mpmath.mpf(eps) * d, mpmath.mpf(prior)
        up = min(mpmath.exp(k) * p, 1 - mpmath.exp(-k) * (1 - p))
        lo = max(mpmath.exp(-k) * p, 1 - mpmath.exp(k) * (1 - p))
        odds_up = p * mpmath.exp(k) / (p * mpmath.exp(k) + 1 - p)
        odds_lo = p * mpmath.exp(-k) / (p * mpmath.exp(-k) + 1 - p)
    c_lo, c_hi = posterior_interval(prior, eps, d)
    assert c_hi == pytest.approx(float(up), abs=1e-12)
    assert c_lo == pytest.approx(float(max(lo, 0)), abs=1e-12)
    o_lo, o_hi = posterior_interval(prior, eps, d, bound="odds")
    assert (o_lo, o_hi) == pytest.approx((float(odds_lo), float(odds_up)), abs=1e-12)
    r_lo, r_hi = posterior_interval(prior, eps, d, bound="raw")
    assert r_lo <= c_lo <= o_lo <= prior <= o_hi <= c_hi <= r_hi
    # coherence: the bounds on "not A" are 1 − the bounds on A
    n_lo, n_hi = posterior_interval(1 - prior, eps, d)
    assert (n_lo, n_hi) == pytest.approx((1 - c_hi, 1 - c_lo), abs=1e-12)


def test_posterior_bounds_hold_in_random_discrete_models() -> None:
    """Simulation: random priors over a parameter θ ∈ {0..3}, random data models P(x|θ) on
    counts x ∈ {0..4} (any two at distance ≤ d* = 4), a geometric mechanism on the count
    (ε-DP at distance 1), random events A; the exact posterior of A at every output never
    leaves the odds bounds (hence neither the coherent nor the raw ones), and the odds
    bound is attained by the two-point model of the seed's optimality argument."""
    rng = np.random.default_rng(21)
    outputs = np.arange(-40, 45)
    for _ in range(300):
        eps = float(rng.uniform(0.05, 1.5))
        lik_s_x = np.exp(-eps * np.abs(outputs[None, :] - np.arange(5)[:, None]))
        lik_s_x /= lik_s_x.sum(axis=1, keepdims=True)  # P(s | x) (truncated, normalised)
        prior = rng.dirichlet(np.ones(4))
        model = rng.dirichlet(np.full(5, 0.3), size=4)  # P(x | θ)
        event = rng.random(4) < 0.5
        if event.all() or not event.any():
            continue
        lik_s_theta = model @ lik_s_x  # P(s | θ)
        joint = prior[:, None] * lik_s_theta
        post = joint[event].sum(axis=0) / joint.sum(axis=0)
        pi = float(prior[event].sum())
        # the truncated, renormalised mechanism is still within e^{ε·4} at distance 4
        ratio = lik_s_x.max(axis=0) / lik_s_x.min(axis=0)
        k = float(np.log(ratio.max()))
        assert k <= eps * 4 * (1 + 1e-9) + 1e-9
        for form in ("odds", "coherent", "raw"):
            lo, hi = posterior_interval(pi, k, 1, bound=form)
            assert np.all(post >= lo - 1e-12)
            assert np.all(post <= hi + 1e-12)
    # attained: A ⇔ x = 0, not A ⇔ x = 1, one output with ratio e^k
    k, pi = 0.7, 0.3
    post = pi * math.exp(k) / (pi * math.exp(k) + (1 - pi))
    assert posterior_interval(pi, k, bound="odds")[1] == pytest.approx(post, rel=1e-15)


def test_probable_posterior_interval_zcdp() -> None:
    """zCDP analogue: exact probability, under each hypothesis, that the posterior of A
    leaves the interval, for a discrete Gaussian mechanism on a count (ρ-zCDP at distance
    1) and a random model on {0, 1}: at most 1 − confidence. Pure DP: probability 0 with
    t = εd (the same interval as posterior_interval); RDP beyond distance 1 is refused."""
    from privtab.accounting import PureDP
    from privtab.semantics.bayes import probable_posterior_interval

    rho = 0.2
    sigma2 = 1 / (2 * rho)
    s = np.arange(-60, 62)
    lik = np.exp(-((s[None, :] - np.array([[0], [1]])) ** 2) / (2 * sigma2))
    lik /= lik.sum(axis=1, keepdims=True)
    for pi in (0.05, 0.4, 0.75):
        for conf in (0.9, 0.99):
            lo, hi, t = probable_posterior_interval(pi, ZCDP(rho), confidence=conf)
            post = pi * lik[0] / (pi * lik[0] + (1 - pi) * lik[1])
            outside = (post < lo - 1e-12) | (post > hi + 1e-12)
            for h in (0, 1):  # A true (x = 0) or false (x = 1)
                assert float(lik[h][outside].sum()) <= 1 - conf
    lo, hi, t = probable_posterior_interval(0.4, PureDP(0.3), 3)
    assert t == pytest.approx(0.9)
    assert (lo, hi) == pytest.approx(posterior_interval(0.4, 0.3, 3), abs=1e-15)
    with pytest.raises(ValueError, match="distance 1 only"):
        probable_posterior_interval(0.4, RDP.tabulated([2.0], [0.1]), 2)
