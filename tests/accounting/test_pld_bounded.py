"""The discrete Gaussian's PLD at any σ: bounded work, a valid upper bound, and tight.

Above σ = 2¹⁴ the PLD is built cell by cell of the loss grid
(:mod:`privtab.accounting._gaussian_buckets`) instead of atom by atom (~30σ atoms: 10⁸ at
σ² = 10¹⁴, which used to hang). Checked here:

* every grid mass against the exact connect-the-dots split computed atom by atom in mpmath
  (40 digits) at moderate σ, where the cell formulas are just as valid: pessimistic masses
  are never below the exact ones except by mass the factor sends to +∞, optimistic ones
  never above; both within 10⁻⁶ relatively in the centre and 10⁻³ in the far tails (an
  atom put in the wrong cell moves a cell's mass by ≳ 2 %, a tail cut short leaves a
  shortfall above the mass at +∞);
* the cell path against the atom path at a σ both can do;
* ε(δ) at σ² = 10¹⁴ … 10²⁰ against the Gaussian mechanism's closed form (mpmath), which the
  discrete Gaussian matches there to far below the grid error;
* absurd parameters (σ² from 10⁻³⁰ to 10³⁰⁰, grids from 10⁻⁹ to 1) finish: run in a
  subprocess with a generous time limit so that a hang fails instead of stalling the suite.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap

import mpmath as mp
import numpy as np
import pytest

# private on purpose: the cell-by-cell construction is checked against mpmath per mass
from privtab.accounting._gaussian_buckets import MIN_SIGMA, gaussian_buckets
from privtab.accounting.pld import (
    AtomLoss,
    DiscreteGaussianLoss,
    compose_plds,
    discrete_gaussian_loss,
)


def _exact_split(s2: float, h: float, pessimistic: bool) -> tuple[dict[int, mp.mpf], mp.mpf]:
    """The connect-the-dots masses (or the rounded-down ones) of N_ℤ(0, σ²)'s loss on the
    grid ``h``, atom by atom at 40 digits over |x| ≤ 16σ + 40 (the rest is < 10⁻⁵⁵), and
    the exact mass of |x| > ``half`` as the factor truncates it."""
    mp.mp.dps = 40
    s2m, hm = mp.mpf(s2), mp.mpf(h)
    big = int(16 * math.sqrt(s2)) + 40
    weights = [mp.exp(-(mp.mpf(x) ** 2) / (2 * s2m)) for x in range(-big, big + 1)]
    z = mp.fsum(weights)
    den = -mp.expm1(-hm)
    out: dict[int, mp.mpf] = {}
    for x, w in zip(range(-big, big + 1), weights, strict=True):
        p = w / z
        loss = (1 - 2 * mp.mpf(x)) / (2 * s2m)
        k = int(mp.floor(loss / hm))
        up = p * -mp.expm1(-(loss - k * hm)) / den if pessimistic else mp.mpf(0)
        out[k] = out.get(k, mp.mpf(0)) + p - up
        if pessimistic:
            out[k + 1] = out.get(k + 1, mp.mpf(0)) + up
    half = discrete_gaussian_loss(s2).half
    beyond = 2 * mp.fsum(w for x, w in zip(range(-big, big + 1), weights, strict=True) if x > half)
    return out, beyond / z


# σ from 100 to 316; 0.5 to 3 grid points per standard deviation of the loss (cells of
# 20 to 40 atoms)
_SMALL = [(1e4, 2e-3), (4e4, 1e-3), (1e5, 3e-4)]


@pytest.mark.parametrize(("s2", "h"), _SMALL)
def test_cells_bound_the_exact_split_per_mass(s2: float, h: float) -> None:
    half = discrete_gaussian_loss(s2).half
    exact, beyond = _exact_split(s2, h, pessimistic=True)
    idx, log_mass, inf = gaussian_buckets(s2, half, h, pessimistic=True)
    got = dict(zip(idx.tolist(), np.exp(log_mass).tolist(), strict=True))
    # the mass at +∞ covers the truncated tail, and every shortfall of a grid mass
    assert inf >= beyond
    shortfall = mp.fsum(max(p - got.get(k, 0.0), 0) for k, p in exact.items())
    assert shortfall <= inf, (float(shortfall), inf)
    # tight: above, never below, every grid mass above 1e-30 (in the tails the
    # Euler–Maclaurin remainder bound grows as (x/σ)⁴/σ⁴), the central ones within 1e-6
    for k, p in exact.items():
        if p > 1e-30:
            rel = 1e-6 if p > 1e-4 else 1e-3
            assert p * (1 - 1e-15) <= got[k] <= p * (1 + rel), (k, float(p), got[k])
    assert set(got) <= set(exact)
    # optimistic: every mass at most the exact rounded-down one, and close to it
    low, _ = _exact_split(s2, h, pessimistic=False)
    idx, log_mass, inf = gaussian_buckets(s2, half, h, pessimistic=False)
    assert inf == 0.0
    for k, lm in zip(idx.tolist(), log_mass.tolist(), strict=True):
        assert math.exp(lm) <= low[k], (k, math.exp(lm), float(low[k]))
        if low[k] > 1e-30:
            assert math.exp(lm) >= low[k] * (1 - (1e-6 if low[k] > 1e-4 else 1e-3))


def _profile_gap(a: DiscreteGaussianLoss | AtomLoss, b: AtomLoss, h: float) -> None:
    for count in (1, 40):
        up_a = compose_plds([(a, count)], grid=h)
        up_b = compose_plds([(b, count)], grid=h)
        for d in (1e-3, 1e-10, 1e-30):
            ea, eb = up_a.epsilon(d), up_b.epsilon(d)
            assert ea == pytest.approx(eb, rel=1e-7, abs=1e-12), (count, d, ea, eb)


def test_cell_path_agrees_with_the_atom_path() -> None:
    # private on purpose: the atom listing is the independent float64 computation
    from privtab.accounting.pld import _discrete_gaussian_atoms

    s2 = (1.25 * MIN_SIGMA) ** 2  # ~1.3 M atoms: the cell path is used, the atoms still fit
    f = discrete_gaussian_loss(s2)
    assert not f._listed
    atoms = _discrete_gaussian_atoms(s2, f.half)
    assert f.tail == pytest.approx(atoms.tail, rel=1e-6)
    sd = 1.0 / math.sqrt(s2)  # the loss's standard deviation
    _profile_gap(f, atoms, sd / 3.0)


def _gaussian_epsilon(mu: float, delta: float) -> float:
    """ε(δ) of the Gaussian mechanism with μ = 1/σ (Balle & Wang 2018, Thm 8), mpmath."""
    mp.mp.dps = 50
    m = mp.mpf(mu)

    def dlt(e: mp.mpf) -> mp.mpf:
        return mp.ncdf(-e / m + m / 2) - mp.exp(e) * mp.ncdf(-e / m - m / 2)

    lo, hi = mp.mpf(0), 40 * m
    if dlt(lo) <= delta:
        return 0.0
    for _ in range(200):  # δ decreases in ε: bisection to 60 bits
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if dlt(mid) > delta else (lo, mid)
    return float(hi)


@pytest.mark.parametrize("s2", [1e14, 1e16, 1e20])
@pytest.mark.parametrize("count", [1, 1000])
def test_huge_sigma_matches_the_gaussian_mechanism(s2: float, count: int) -> None:
    mu = math.sqrt(count / s2)  # the composition is the Gaussian mechanism with this μ
    h = mu / 300.0
    prof = compose_plds([(discrete_gaussian_loss(s2), count)], grid=h)
    lower = compose_plds([(discrete_gaussian_loss(s2), count)], grid=h, pessimistic=False)
    for d in (1e-3, 1e-10, 1e-20):
        ref = _gaussian_epsilon(mu, d)
        eps = prof.epsilon(d)
        # never below the reference (the discrete and continuous profiles differ by far
        # less than 1e-9 relatively at σ ≥ 10⁷), and within the connect-the-dots error:
        # second order in h per factor, it adds up over 1000 factors to 2.1h at δ = 1e-20
        # at this grid (0.7h at h = μ/900)
        assert eps >= ref * (1 - 1e-9), (d, eps, ref)
        assert eps <= ref + 2.5 * h, (d, eps, ref, h)
        assert lower.epsilon(d) <= ref * (1 + 1e-9)


def test_truncated_tail_of_the_cells_counts_in_full() -> None:
    # a coarse truncation on the cell path: 2Φc(half/σ) ≈ 1e-3·(…) goes to +∞
    s2 = 1e12
    f = discrete_gaussian_loss(s2, tail=1e-3)
    assert not f._listed
    sigma = math.sqrt(s2)
    exact_tail = float(mp.erfc(mp.mpf(f.half) / sigma / mp.sqrt(2)))  # continuous, ≈ discrete
    assert exact_tail <= f.tail <= exact_tail * (1 + 1e-6)
    up = compose_plds([(f, 3)], grid=1e-7)
    inf = 1 - (1 - f.tail) ** 3
    assert up.infinity_mass == pytest.approx(inf, rel=1e-9)
    assert up.infinity_mass >= inf * (1 - 1e-12)
    assert up.epsilon(inf / 2) == math.inf


_SWEEP = textwrap.dedent(
    """
    import json, math, sys, time
    from privtab.accounting.pld import GridTooFineError, compose_plds, discrete_gaussian_loss
    out = []
    for s2 in (1e-30, 1e-8, 1.0, 2.7e8, 1e14, 1e20, 1e30, 1e100, 1e300):
        for h in (1e-9, 1e-3, 1.0):
            for n in (1, 1000) if s2 != 1.0 else (1,):  # σ = 1, n = 1000: a 2²⁰ FFT, ~5 s
                t = time.perf_counter()
                try:
                    e = compose_plds([(discrete_gaussian_loss(s2), n)], grid=h).epsilon(1e-10)
                    r = "inf" if math.isinf(e) else e
                except GridTooFineError as exc:
                    r = {"coarser": exc.grid}
                out.append([s2, h, n, r, time.perf_counter() - t])
    json.dump(out, sys.stdout)
    """
)


def test_absurd_parameters_finish() -> None:
    # a subprocess: a hang (or a C-level loop no alarm can interrupt) fails the test at the
    # limit — generous (the whole sweep takes ~1 s idle); not a performance assertion
    run = subprocess.run(
        [sys.executable, "-c", _SWEEP], capture_output=True, text=True, timeout=300, check=True
    )
    rows = json.loads(run.stdout)
    assert len(rows) == 51
    for s2, h, n, r, _ in rows:
        if isinstance(r, dict):  # a grid too fine for the window bound: refused, with a fix
            assert r["coarser"] > h
            continue
        assert r == "inf" or (isinstance(r, float) and r >= 0), (s2, h, n, r)
        if s2 <= 1.0 and h <= 1e-3:  # near-deterministic noise: ε ≈ n/(2σ²)
            assert r >= n / (2 * s2) * (1 - 1e-6)
    # every huge σ gives a finite answer at the coarse grids
    assert all(not isinstance(r, dict) for s2, h, n, r, _ in rows if s2 >= 1e14 and h >= 1e-3)
