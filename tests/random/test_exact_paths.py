"""The exact slow paths and the certified fast paths.

* The interval enclosures contain the true values (checked at 300 bits with mpmath).
* ``resolve_less`` / ``resolve_floor`` decide correctly, including from scripted bits.
* The float kernels never certify a wrong answer: every certified element agrees with an
  exact computation.
* With the certification slack inflated so that most elements take the slow path, the
  samplers still produce the exact laws — so the slow path is exercised statistically.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

# private on purpose: the exact slow paths are taken ~1e-12 of the time; driven directly
import privtab.random._kernels as kernels
from privtab.random import RandomSource, SeededSource, discrete_laplace
from privtab.random._kernels import LN2_63, accept_exp_neg, floor_scaled_neglog, prefixes63
from privtab.random.exact import (
    LazyUniform,
    exp_neg_enclosure,
    iv_log,
    iv_rational,
    iv_to_fractions,
    resolve_floor,
    resolve_less,
)
from privtab.random.gaussian_sampler import rejection_discrete_gaussian
from privtab.random.laplace_sampler import _floor_spec, geometric
from privtab.random.uniform import bernoulli_exp
from tests._stats import discrete_gaussian_law, discrete_laplace_law, fits, geometric_law


class ScriptedSource(RandomSource):
    """Returns scripted 64-bit words, then zeros (a test double; not private)."""

    is_private = False

    def __init__(self, words: list[int]) -> None:
        super().__init__()
        self._words = list(words)

    @property
    def description(self) -> str:
        return "scripted"

    def _fill_bytes(self, out: memoryview) -> None:
        n = len(out) // 8
        take = [self._words.pop(0) if self._words else 0 for _ in range(n)]
        out[:] = np.array(take, dtype=np.uint64).tobytes()

    def fill_uint64(self, out: np.ndarray) -> None:  # type: ignore[override]
        with self._lock:
            self._fill_bytes(memoryview(out.view(np.uint8).data))


def _mp(x: Fraction) -> mpmath.mpf:
    return mpmath.mpf(x.numerator) / x.denominator


@pytest.mark.parametrize("q", [Fraction(0), Fraction(1, 3), Fraction(7, 2), Fraction(10**6, 7)])
@pytest.mark.parametrize("prec", [64, 200])
def test_exp_enclosure_contains_the_true_value(q: Fraction, prec: int) -> None:
    lo, hi = exp_neg_enclosure(q, prec)
    with mpmath.workprec(400):
        true = mpmath.exp(-_mp(q))
        assert _mp(lo) <= true <= _mp(hi)
        assert _mp(hi - lo) <= true * mpmath.mpf(2) ** (-prec + 24)


def test_log_enclosure_contains_the_true_value() -> None:
    for x in (Fraction(1, 3), Fraction(2**63 - 1, 2**63), Fraction(5, 2**70)):
        lo, hi = iv_to_fractions(iv_log(iv_rational(x, 100), 100))
        assert lo is not None
        assert hi is not None
        with mpmath.workprec(400):
            assert _mp(lo) <= mpmath.log(_mp(x)) <= _mp(hi)


def test_resolve_less_with_scripted_bits() -> None:
    third = Fraction(1, 3)
    prefix = math.floor(third * 2**64)  # U's first 64 bits equal 1/3's: undecided

    def enclosure(prec: int) -> tuple[Fraction, Fraction]:
        return third - Fraction(1, 2**prec), third + Fraction(1, 2**prec)

    # next 64 bits all zero: U = prefix/2^64 + tiny < 1/3 (1/3's expansion continues 0101…)
    u = LazyUniform(prefix, 64)
    assert resolve_less(u, enclosure, ScriptedSource([0])) is True
    assert u.nbits == 128
    u = LazyUniform(prefix, 64)
    assert resolve_less(u, enclosure, ScriptedSource([2**64 - 1])) is False


def test_resolve_floor_matches_exact_floor() -> None:
    spec = _floor_spec(Fraction(3), True)
    src = SeededSource("floor")
    for v in (1, 2, 3, 10**6, 2**62, 2**63 - 1):
        u = LazyUniform(v, 63)
        k = resolve_floor(u, spec.y_range, src)
        with mpmath.workprec(600):
            t = mpmath.mpf(3)
            kappa = mpmath.log(2) - mpmath.log1p(mpmath.exp(-1 / t))
            y_lo = t * (kappa - mpmath.log(_mp(u.upper)))
            y_hi = t * (kappa - mpmath.log(_mp(u.lower)))
        assert math.floor(y_lo) == k == math.floor(y_hi)


def test_check_float_log_passes_here() -> None:
    kernels.check_float_log()
    assert kernels._checked


@pytest.mark.parametrize("t", [0.5, 3.7, 1000.0, 2.0**20])
def test_floor_kernel_certified_elements_are_exact(t: float) -> None:
    words = SeededSource(f"kern{t}").random_uint64(3000)
    words[:3] = [0, 2, 2**40]  # tiny prefixes must be flagged, not guessed
    v, vf = prefixes63(words)
    spec = _floor_spec(Fraction(t), True)
    floors, amb = floor_scaled_neglog(vf, spec.s_float, spec.offset_float)
    assert amb[0]
    with mpmath.workprec(200):
        tt = mpmath.mpf(t)
        kappa = mpmath.log(2) - mpmath.log1p(mpmath.exp(-1 / tt))
        for i in np.flatnonzero(~amb)[:600]:
            lo = tt * (kappa - mpmath.log(mpmath.mpf(int(v[i]) + 1) / 2**63))
            hi = tt * (kappa - mpmath.log(mpmath.mpf(int(v[i])) / 2**63))
            assert math.floor(lo) == int(floors[i]) == math.floor(hi)


def test_accept_kernel_certified_elements_are_exact() -> None:
    src = SeededSource("acc")
    v, vf = prefixes63(src.random_uint64(4000))
    q = np.linspace(0, 3, 4000)
    accept, amb = accept_exp_neg(vf, q, np.zeros_like(q))
    with mpmath.workprec(200):
        for i in range(0, 4000, 7):
            if amb[i]:
                continue
            target = mpmath.exp(-mpmath.mpf(float(q[i])))
            lo = mpmath.mpf(int(v[i])) / 2**63
            hi = mpmath.mpf(int(v[i]) + 1) / 2**63
            if accept[i]:
                assert hi <= target
            else:
                assert lo >= target
    assert math.isclose(LN2_63, 63 * math.log(2), rel_tol=1e-16)


@pytest.fixture
def force_slow_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inflate the certification slack so that a large share of draws is undecided."""
    monkeypatch.setattr(kernels, "_SLACK_ABS", 0.02)


@pytest.mark.usefixtures("force_slow_path")
def test_slow_path_discrete_laplace_is_exact() -> None:
    x = discrete_laplace(1.5, 6000, source=SeededSource("slow-dlap"))
    ok, msg = fits(x, discrete_laplace_law(1.5))
    assert ok, msg


@pytest.mark.usefixtures("force_slow_path")
def test_slow_path_discrete_laplace_large_scale_is_exact() -> None:
    x = discrete_laplace(2.0**22 + 1, 3000, source=SeededSource("slow-dlap-large"))
    ok, msg = fits(x, discrete_laplace_law(2.0**22 + 1))
    assert ok, msg


@pytest.mark.usefixtures("force_slow_path")
def test_slow_path_discrete_gaussian_is_exact() -> None:
    x = rejection_discrete_gaussian(6.25, 6000, source=SeededSource("slow-dg"))
    ok, msg = fits(x, discrete_gaussian_law(6.25))
    assert ok, msg


@pytest.mark.usefixtures("force_slow_path")
def test_slow_path_geometric_is_exact() -> None:
    x = geometric(2.0, 6000, source=SeededSource("slow-geom"))
    ok, msg = fits(x, geometric_law(2.0))
    assert ok, msg


def test_slow_path_is_really_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}
    import privtab.random.laplace_sampler as lap

    real = lap.resolve_floor

    def counting(*args: object) -> int:
        calls["n"] += 1
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(kernels, "_SLACK_ABS", 0.02)
    monkeypatch.setattr(lap, "resolve_floor", counting)
    discrete_laplace(1.5, 2000, source=SeededSource("count"))
    assert calls["n"] > 20


def test_bernoulli_exp_undecided_prefixes_are_resolved() -> None:
    """Words scripted to sit exactly on the certified threshold take the exact path."""
    lo, _ = exp_neg_enclosure(Fraction(1), 160)
    threshold = math.floor(lo * 2**64)
    # three words for three trials (the first on the threshold), then the first trial's
    # continuation bits (all zero: U is just above threshold/2⁶⁴, below e^{−1})
    src = ScriptedSource([threshold, 0, 2**64 - 1, 0])
    out = bernoulli_exp(1, 3, source=src)
    assert out.tolist() == [True, True, False]
