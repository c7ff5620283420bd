"""Privacy-loss distributions: exact profiles of discrete noise and their composition."""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from privtab.accounting import zcdp_delta, zcdp_epsilon
from privtab.accounting.pld import (
    LossFactor,
    compose_plds,
    discrete_gaussian_loss,
    geometric_loss,
)


def _dg_delta_direct(eps: float, sigma2: float) -> float:
    """δ(ε) of N_Z(0,σ²) vs N_Z(1,σ²) by direct summation over Z at 40 digits."""
    mp.mp.dps = 40
    n = int(60 * math.sqrt(sigma2)) + 60
    xs = range(-n, n + 1)
    z = mp.fsum(mp.exp(-(mp.mpf(y) ** 2) / (2 * sigma2)) for y in xs)
    tot = mp.mpf(0)
    for x in xs:
        p = mp.exp(-(mp.mpf(x) ** 2) / (2 * sigma2)) / z
        q = mp.exp(-(mp.mpf(x - 1) ** 2) / (2 * sigma2)) / z
        tot += max(p - mp.exp(eps) * q, 0)
    return float(tot)


@pytest.mark.parametrize("sigma2", [0.25, 4.0, 37.5])
def test_single_discrete_gaussian_matches_direct_sum(sigma2: float) -> None:
    up = compose_plds([(discrete_gaussian_loss(sigma2), 1)], grid=1e-4)
    low = compose_plds([(discrete_gaussian_loss(sigma2), 1)], grid=1e-4, pessimistic=False)
    for eps in [0.0, 0.3, 1.0, 2.0]:
        exact = _dg_delta_direct(eps, sigma2)
        if exact < 1e-280:
            continue
        assert low.delta(eps) <= exact * (1 + 1e-9) + 1e-300
        assert up.delta(eps) >= exact * (1 - 1e-9)
        assert up.delta(eps) == pytest.approx(exact, rel=1e-3)


def test_geometric_composition_is_binomial() -> None:
    n, e = 10, 0.5
    prof = compose_plds([(geometric_loss(e), n)], grid=1e-3)
    p = 1 / (1 + math.exp(-e))
    for eps in [0.0, 1.0, 2.5, 4.9]:
        exact = sum(
            math.comb(n, k) * p**k * (1 - p) ** (n - k) * (1 - math.exp(eps - (2 * k - n) * e))
            for k in range(n + 1)
            if (2 * k - n) * e > eps
        )
        assert prof.delta(eps) == pytest.approx(exact, rel=1e-6)
    # pure DP: no mass beyond n * eps
    assert prof.delta(n * e) == pytest.approx(0.0, abs=1e-12)
    assert prof.epsilon(0.0) == pytest.approx(n * e, abs=2e-3)


def test_composition_is_tighter_than_zcdp_and_close_to_it() -> None:
    rhos = [0.005, 0.02, 0.0004]
    factors = [(discrete_gaussian_loss(1 / (2 * r)), 9) for r in rhos]
    rho_total = 9 * sum(rhos)
    up = compose_plds(factors, grid=1e-3)
    low = compose_plds(factors, grid=1e-3, pessimistic=False)
    eps_up, eps_low = up.epsilon(1e-10), low.epsilon(1e-10)
    assert eps_low <= eps_up
    assert eps_up - eps_low < 0.01
    assert eps_up < zcdp_epsilon(rho_total, 1e-10)
    # delta at the zCDP epsilon is below the zCDP delta bound
    e = zcdp_epsilon(rho_total, 1e-10)
    assert up.delta(e) <= zcdp_delta(rho_total, e)


def test_matches_dp_accounting_when_installed() -> None:
    pld_mod = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    sigma = 3.0
    theirs = pld_mod.from_discrete_gaussian_mechanism(
        sigma, sensitivity=1, value_discretization_interval=1e-4
    ).self_compose(20)
    ours = compose_plds([(discrete_gaussian_loss(sigma**2), 20)], grid=1e-4)
    assert ours.epsilon(1e-8) == pytest.approx(theirs.get_epsilon_for_delta(1e-8), rel=2e-3)


def test_validation() -> None:
    with pytest.raises(ValueError, match="at least one"):
        compose_plds([])
    with pytest.raises(ValueError, match="count"):
        compose_plds([(geometric_loss(1.0), 0)])
    with pytest.raises(ValueError, match="sigma2"):
        discrete_gaussian_loss(0.0)


def test_epsilon_solver_matches_exact_enumeration_at_large_rho() -> None:
    # 9 discrete Gaussians with sigma^2 = 1/4 (rho = 2 each): the loss is a function of the
    # sum of 9 i.i.d. N_Z(0, 1/4), enumerated exactly here.
    import numpy as np

    s2, n = 0.25, 9
    xs = np.arange(-10, 11)
    p = np.exp(-(xs**2) / (2 * s2))
    p /= p.sum()
    q = p.copy()
    for _ in range(n - 1):
        q = np.convolve(q, p)
    losses = (n - 2 * np.arange(-10 * n, 10 * n + 1)) / (2 * s2)

    def exact(e: float) -> float:
        m = losses > e
        return float(np.sum(q[m] * -np.expm1(e - losses[m])))

    prof = compose_plds([(discrete_gaussian_loss(s2), n)], grid=1e-3)
    eps = prof.epsilon(1e-10)
    assert exact(eps) <= 1e-10 * (1 + 1e-6)
    assert exact(eps - 0.02) > 1e-10  # and it is tight to within the grid
    assert eps < zcdp_epsilon(n / (2 * s2), 1e-10)


def test_either_of_dominates_each_option() -> None:
    import numpy as np

    from privtab.accounting.pld import either_of

    for rho in [0.005, 0.5, 2.0]:
        two = [
            (discrete_gaussian_loss(1 / (2 * 0.1 * rho)), 1),
            (discrete_gaussian_loss(1 / (2 * 0.9 * rho)), 1),
        ]
        one = [(discrete_gaussian_loss(1 / (2 * rho)), 1)]
        both = either_of([two, one], grid=1e-3)
        assert sum(np.exp(both.log_probs)) + both.tail == pytest.approx(1.0, abs=1e-6)
        pe = compose_plds([(both, 1)], grid=1e-3)
        pa, pb = compose_plds(two, grid=1e-3), compose_plds(one, grid=1e-3)
        for e in np.linspace(-0.5, 4 * np.sqrt(rho) + 3 * rho, 7):
            assert pe.delta(e) >= max(pa.delta(e), pb.delta(e)) * (1 - 1e-6) - 1e-15
        # composing 9 of them is no tighter than either homogeneous composition
        eps_e = compose_plds([(both, 9)], grid=1e-3).epsilon(1e-10)
        eps_a = compose_plds([(f, 9) for f, _ in two], grid=1e-3).epsilon(1e-10)
        eps_b = compose_plds([(one[0][0], 9)], grid=1e-3).epsilon(1e-10)
        # (each homogeneous composition carries up to 9-18 grid roundings of pessimism)
        assert eps_e >= max(eps_a, eps_b) - 0.02
        assert eps_e <= zcdp_epsilon(9 * rho, 1e-10)


# --------------------------------------------------------------------------------------
# Independent references: the exact PLD of a few composed mechanisms, enumerated in mpmath.
# Every loss is an integer multiple of UNIT (0.0137, not a multiple of the grid width, so
# the connect-the-dots split is exercised); a factor is a dict {multiple: probability}.

UNIT = 0.0137


def _mp_dg(k: int) -> tuple[dict[int, mp.mpf], mp.mpf]:
    """N_Z(0, σ²) with 1/(2σ²) = k·UNIT on a counting query: loss (1 − 2x)·k·UNIT. Atoms
    with |x| ≤ 10σ + 6; returns them and the mass left out (< 1e-22)."""
    s2 = 1 / (2 * k * mp.mpf(UNIT))
    sigma = float(mp.sqrt(s2))
    big = int(60 * sigma) + 60
    z = mp.fsum(mp.exp(-(mp.mpf(y) ** 2) / (2 * s2)) for y in range(-big, big + 1))
    half = int(10 * sigma) + 6
    atoms = {
        (1 - 2 * x) * k: mp.exp(-(mp.mpf(x) ** 2) / (2 * s2)) / z for x in range(-half, half + 1)
    }
    return atoms, 1 - mp.fsum(atoms.values())


def _mp_geometric(k: int, unit: float = UNIT) -> tuple[dict[int, mp.mpf], mp.mpf]:
    e = k * mp.mpf(unit)
    hi = 1 / (1 + mp.exp(-e))
    return {-k: 1 - hi, k: hi}, mp.mpf(0)


def _mp_convolve(a: dict[int, mp.mpf], b: dict[int, mp.mpf]) -> dict[int, mp.mpf]:
    out: dict[int, mp.mpf] = {}
    for m0, p0 in a.items():
        for m1, p1 in b.items():
            out[m0 + m1] = out.get(m0 + m1, mp.mpf(0)) + p0 * p1
    return out


class _Exact:
    """δ(ε) and ε(δ) of an enumerated composition, in mpmath at 30 digits; ``left`` (the
    mass the enumeration leaves out) bounds how far the true δ can lie above ``delta``."""

    def __init__(self, factors: list[tuple[dict[int, mp.mpf], mp.mpf]], unit: float = UNIT) -> None:
        acc: dict[int, mp.mpf] = {0: mp.mpf(1)}
        kept = mp.mpf(1)
        for atoms, out in factors:
            acc, kept = _mp_convolve(acc, atoms), kept * (1 - out)
        self.left = 1 - kept
        ms = sorted(acc)
        self.losses = [m * mp.mpf(unit) for m in ms]
        # suffix sums of P and of P e^{-L} from each atom up
        self.tail_p = [mp.mpf(0)] * (len(ms) + 1)
        self.tail_q = [mp.mpf(0)] * (len(ms) + 1)
        for i in range(len(ms) - 1, -1, -1):
            self.tail_p[i] = self.tail_p[i + 1] + acc[ms[i]]
            self.tail_q[i] = self.tail_q[i + 1] + acc[ms[i]] * mp.exp(-self.losses[i])

    def delta(self, eps: float) -> mp.mpf:
        e = mp.mpf(eps)
        i = next((k for k, lv in enumerate(self.losses) if lv > e), len(self.losses))
        return self.tail_p[i] - mp.exp(e) * self.tail_q[i]

    def epsilon(self, delta: float) -> float:
        d = mp.mpf(delta)
        # δ is decreasing and linear in e^ε between atoms: find the atom interval
        for i in range(len(self.losses)):
            if self.tail_p[i] - mp.exp(self.losses[i]) * self.tail_q[i] <= d:
                e = mp.log((self.tail_p[i] - d) / self.tail_q[i])
                lo = self.losses[i - 1] if i else e
                return float(max(max(e, lo), mp.mpf(0)))
        return float(self.losses[-1])


def _dg(k: int) -> LossFactor:
    return discrete_gaussian_loss(1 / (2 * k * UNIT))


def _geo(k: int) -> LossFactor:
    return geometric_loss(k * UNIT)


_CASES = {
    "two discrete Gaussians": ([(_dg(3), 1), (_dg(37), 1)], [_mp_dg(3), _mp_dg(37)]),
    "three discrete Gaussians": (
        [(_dg(11), 1), (_dg(29), 2)],
        [_mp_dg(11), _mp_dg(29), _mp_dg(29)],
    ),
    "three geometrics": (
        [(_geo(22), 2), (_geo(51), 1)],
        [_mp_geometric(22)] * 2 + [_mp_geometric(51)],
    ),
    "geometric and discrete Gaussian": (
        [(_geo(33), 1), (_dg(17), 2)],
        [_mp_geometric(33), _mp_dg(17), _mp_dg(17)],
    ),
}


@pytest.fixture(scope="module")
def exact_cases() -> dict[str, _Exact]:
    mp.mp.dps = 30
    return {name: _Exact(atoms) for name, (_, atoms) in _CASES.items()}


@pytest.mark.parametrize("name", list(_CASES))
def test_upper_bound_never_below_exact_and_tight(name: str, exact_cases) -> None:
    factors, _ = _CASES[name]
    exact = exact_cases[name]
    up = compose_plds(factors, grid=1e-3)
    low = compose_plds(factors, grid=1e-3, pessimistic=False)
    for d in (1e-2, 1e-5, 1e-9, 1e-14):
        e_exact = exact.epsilon(d)
        e_up, e_low = up.epsilon(d), low.epsilon(d)
        # a valid upper bound: never below the exact value (up to its float rounding)
        assert e_up >= e_exact - 1e-12, (d, e_up, e_exact)
        assert e_low <= e_exact + 1e-12, (d, e_low, e_exact)
        # connect-the-dots is second order in the grid where atoms are dense (far inside
        # one grid width); next to an isolated atom it may cost up to a grid width
        assert e_up - e_exact <= (3e-3 if "geometric" in name else 2e-4), (d, e_up, e_exact)
    for eps in (0.0, 0.37, 1.1, 2.3):
        true = exact.delta(eps)
        assert up.delta(eps) >= float(true) * (1 - 1e-9)
        assert up.delta(eps) <= float(true + exact.left) * (1 + 1e-2) + 1e-300
        assert low.delta(eps) <= float(true + exact.left) * (1 + 1e-9)


@pytest.mark.parametrize(
    ("units", "grid"),
    [
        ((16, 45), 2.8e-12),
        ((60,), 2e-12),
        ((100,), 3e-12),
        ((200, 30), 9e-12),
        ((30, 30, 30), 1e-12),
    ],
)
def test_tiny_losses_keep_their_relative_accuracy(units: tuple[int, ...], grid: float) -> None:
    """Geometric noise at ε ≈ 10⁻⁹ (a budget of 10⁻⁹ on a fine grid): δ(ε) = u − e^x v was
    taken from two sums ≈ P[L > ε] that agree to ~12 digits, and ``r1 − r2`` from two
    numbers ≈ 1 − 10⁻¹², so ε lost its last ~10⁻¹⁶ in absolute terms — up to 3 × 10⁻⁷ of
    it; the upper bound fell below the exact ε (and the lower above it). Against mpmath."""
    unit = 1e-11
    mp.mp.dps = 40
    exact = _Exact([_mp_geometric(k, unit) for k in units], unit).epsilon(1e-10)
    factors = [(geometric_loss(k * unit), 1) for k in units]
    up = compose_plds(factors, grid=grid).epsilon(1e-10)
    low = compose_plds(factors, grid=grid, pessimistic=False).epsilon(1e-10)
    assert low <= exact <= up <= exact * (1 + 1e-9), (low, exact, up)


def test_worst_of_is_the_largest_configuration() -> None:
    from privtab.accounting.pld import either_of, worst_of

    # a record in two groups, each tabulated in two stages (γ = 0.1) or as one total
    a, b, t = 7, 63, 70
    two = [(_dg(a), 1), (_dg(b), 1)]
    one = [(_dg(t), 1)]
    configs = [two + two, two + one, one + one]
    mp.mp.dps = 30
    ma, mb, mt = _mp_dg(a), _mp_dg(b), _mp_dg(t)
    exact = [_Exact([ma, mb, ma, mb]), _Exact([ma, mb, mt]), _Exact([mt, mt])]
    worst = worst_of(configs, grid=1e-3)
    hull = compose_plds([(either_of([two, one], grid=1e-3), 2)], grid=1e-3)
    for d in (1e-3, 1e-8, 1e-13):
        e_exact = max(x.epsilon(d) for x in exact)
        e_worst = worst.epsilon(d)
        assert e_exact - 1e-12 <= e_worst <= e_exact + 2e-4
        # the per-group hull is valid too, and never tighter than the configurations
        assert hull.epsilon(d) >= e_worst - 1e-9


def _mp_dg_integer(rho: int, half: int = 8) -> tuple[dict[int, mp.mpf], mp.mpf]:
    """N_Z(0, σ²) with ρ = 1/(2σ²) an integer: losses (1 − 2x)ρ, integers (unit 1); atoms
    |x| ≤ ``half`` and the mass left out (< 10⁻²⁷ for ρ ≥ 1)."""
    s2 = 1 / (2 * mp.mpf(rho))
    z = mp.fsum(mp.exp(-(mp.mpf(y) ** 2) / (2 * s2)) for y in range(-60, 61))
    atoms = {
        (1 - 2 * x) * rho: mp.exp(-(mp.mpf(x) ** 2) / (2 * s2)) / z for x in range(-half, half + 1)
    }
    return atoms, 1 - mp.fsum(atoms.values())


def test_the_hull_is_not_rho_zcdp() -> None:
    """Why a plan's PLD can exceed its zCDP bound: the per-group hull (:func:`either_of`) of
    two ρ-zCDP options is a valid bound but not ρ-zCDP, so n composed hulls can exceed the
    nρ-zCDP conversion while the exact worst case cannot. Eight groups, each two-stage
    (ρ = 1 + 1) or one total (ρ = 2), checked in mpmath: the exact worst of the nine
    configurations is below the zCDP bound of ρ = 16, the PLD of the configurations
    (``worst_of``) matches it (losses on the grid: no discretisation), the composed hulls
    are 0.29 above the zCDP bound — and the hull's Rényi divergence, summed from its atoms
    at 30 digits, exceeds αρ where the options' stays below."""
    from privtab.accounting.pld import either_of, worst_of

    two = [(discrete_gaussian_loss(0.5), 2)]
    one = [(discrete_gaussian_loss(0.25), 1)]
    n, delta = 8, 1e-10
    mp.mp.dps = 30
    (stage, out_s), (total, out_t) = _mp_dg_integer(1), _mp_dg_integer(2)
    group = _mp_convolve(stage, stage)
    powers_two, powers_one = [{0: mp.mpf(1)}], [{0: mp.mpf(1)}]
    for _ in range(n):
        powers_two.append(_mp_convolve(powers_two[-1], group))
        powers_one.append(_mp_convolve(powers_one[-1], total))
    exact = max(
        _Exact([(powers_two[k], 2 * k * out_s), (powers_one[n - k], (n - k) * out_t)], 1.0).epsilon(
            delta
        )
        for k in range(n + 1)
    )
    bound = zcdp_epsilon(2.0 * n, delta, "optimal")
    stage_loss, total_loss = two[0][0], one[0][0]
    configs = [
        [(stage_loss, 2 * k)] * (k > 0) + [(total_loss, n - k)] * (k < n) for k in range(n + 1)
    ]
    worst = worst_of(configs, grid=1e-3).epsilon(delta)
    hull = either_of([two, one], grid=1e-3)
    hulls = compose_plds([(hull, n)], grid=1e-3).epsilon(delta)
    assert exact <= worst <= exact + 1e-6 < bound < hulls - 0.2, (exact, worst, bound, hulls)
    assert hull.tail == 0
    for alpha in (1.5, 2, 4):
        d_hull = mp.log(
            mp.fsum(
                mp.exp(mp.mpf(float(lp)) + (alpha - 1) * mp.mpf(float(lv)))
                for lv, lp in zip(hull.losses, hull.log_probs, strict=True)
            )
        ) / (alpha - 1)
        d_two = 2 * mp.log(mp.fsum(p * mp.exp((alpha - 1) * lv) for lv, p in stage.items()))
        d_one = mp.log(mp.fsum(p * mp.exp((alpha - 1) * lv) for lv, p in total.items()))
        assert max(d_two, d_one) / (alpha - 1) <= 2 * alpha < d_hull, (alpha, d_hull)


def test_window_matches_a_direct_convolution_far_into_the_tail() -> None:
    # 40 discrete Gaussians sigma^2 = 1: losses (40 - 2S)/2 with S the sum, on the grid;
    # the window is far narrower than the support, so the convolution wraps around
    import numpy as np

    n, s2 = 40, 1.0
    f = discrete_gaussian_loss(s2)
    prof = compose_plds([(f, n)], grid=1e-2)
    xs = np.arange(-12, 13)
    p = np.exp(-(xs**2) / (2 * s2))
    p /= p.sum()
    q = np.ones(1)
    for _ in range(n):
        q = np.convolve(q, p)  # positive terms: every entry to full relative accuracy
    sums = np.arange(-12 * n, 12 * n + 1)
    losses = (n - 2 * sums) / (2 * s2)

    def exact(e: float) -> float:
        m = losses > e
        return float(np.sum(q[m] * -np.expm1(e - losses[m])))

    for eps in (20.0, 45.0, 70.0, 95.0):
        d = exact(eps)
        assert d > 1e-60
        assert prof.delta(eps) == pytest.approx(d, rel=1e-6)
        assert prof.delta(eps) >= d
    w = prof._window(prof._tilt_for(70.0))
    assert w.size < 0.25 * (prof._index_range(0)[1] - prof._index_range(0)[0])


def test_round_off_bound_holds() -> None:
    import numpy as np

    # private on purpose: the FFT round-off bound is internal to PLDProfile; checked here
    from privtab.accounting.pld import _fft_error

    factors = [(discrete_gaussian_loss(2.0), 3), (discrete_gaussian_loss(7.0), 2)]
    prof = compose_plds(factors, grid=1e-2)
    theta = prof._tilt_for(4.0)
    w = prof._window(theta)
    direct = np.ones(1)
    for part, count in zip(prof.parts, prof.configs[0], strict=True):
        t = part.tilted(theta, part.size)
        for _ in range(count):
            direct = np.convolve(direct, t)  # positive terms: accurate to a few ulps
    # the circular convolution on the window is the linear one folded onto it
    first = prof._index_range(0)[0]
    folded = np.bincount((np.arange(direct.size) + first - w.base) % w.size, direct, w.size)
    err = np.max(np.abs(w.configs[0].values - folded))
    assert err <= _fft_error(w.size, 5)
    assert err > 0  # the bound is not vacuous: round-off happens


def test_production_plan_against_the_previous_computation() -> None:
    import numpy as np

    from privtab.accounting import zcdp_epsilon
    from privtab.data import Scope, read_config, read_reference
    from privtab.data.inputs import resolve_config_path
    from privtab.tabulate import ReleasePlan
    from privtab.tabulate.privacy import plan_pld

    path = resolve_config_path(None)
    plan = ReleasePlan.from_config(read_config(path), read_reference(path.parent), Scope.US)
    eps = plan_pld(plan).epsilon(1e-10)
    # The previous implementation (pessimistic rounding on a 2^20-point FFT, commit
    # 63c9880, 23.5 s) bracketed the exact value between these two numbers at grid 1e-3:
    old_upper, old_lower = 24.67920218783637, 24.325790198465985
    assert old_lower <= eps <= old_upper
    # … and every configuration a real person can have is below the new bound
    for option in ("two_stage", "total"):
        assert plan_pld(plan, option=option).epsilon(1e-10) <= eps + 1e-9
    # the tail is tight: ε(δ) stays below the zCDP bound for every δ (it used to reach
    # ε ≈ 300 below δ = 1e-11 in the report's curve)
    deltas = np.geomspace(1e-40, 1e-2, 9)
    curve = plan_pld(plan).epsilon_curve(deltas)
    assert np.all(np.diff(curve) < 0)
    assert np.all(curve < [zcdp_epsilon(4.944, float(d)) for d in deltas])


def test_truncated_tail_counts_in_full() -> None:
    # a coarse truncation: ~1e-11 of the mass of each factor is left out and sent to +∞
    f = discrete_gaussian_loss(1.0, tail=1e-3)
    assert 1e-12 < f.tail < 1e-3
    up = compose_plds([(f, 4)], grid=1e-3)
    inf = 1 - (1 - f.tail * (1 + 1e-12)) ** 4
    assert up.infinity_mass == pytest.approx(inf, rel=1e-9)
    assert up.delta(1e3) == pytest.approx(inf, rel=1e-9)
    assert up.delta(2.0) >= up.delta(1e3)
    assert up.epsilon(inf / 2) == math.inf
    low = compose_plds([(f, 4)], grid=1e-3, pessimistic=False)
    assert low.infinity_mass == 0.0
    assert low.epsilon(inf / 2) < up.max_loss
