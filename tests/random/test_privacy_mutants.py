"""Tests aimed at realistic privacy bugs in the noise and the randomness (``make mutation``).

Each test here kills at least one mutant of ``tools/mutation.py``; the docstrings say which
and why the bug breaks privacy. Statistical tests use fixed seeds (so they are
deterministic); their stated false-failure rates are those of the test for a random seed
(normal approximation), and their power is against the planted bug.
"""

from __future__ import annotations

import math
import os
import warnings
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

import privtab.random.gaussian_sampler as gaussian_sampler
import privtab.random.laplace_sampler as laplace_sampler
import privtab.random.sources as sources
from privtab.mechanisms import DiscreteGaussian, Geometric, InsecureReleaseWarning
from privtab.random import (
    RandomSource,
    SecureSource,
    SeededSource,
    discrete_laplace,
)
from privtab.random.gaussian_sampler import rejection_discrete_gaussian
from tests._stats import discrete_gaussian_law, discrete_laplace_law, fits, moments_ok

# ----------------------------------------------------------------------------- tails


class _TailSource(RandomSource):
    """Scripted words: odd-numbered requests get ``proposal`` words (discrete Laplace
    proposals far in the tail), even-numbered ones ``accept`` words (uniforms that accept
    them). Raises after ``limit`` requests: a sampler that never returns the tail value
    would otherwise loop forever. A test double; not private."""

    def __init__(self, proposal: int, accept: int, limit: int = 40) -> None:
        super().__init__()
        self._words = (proposal, accept)
        self._calls = 0
        self._limit = limit

    @property
    def description(self) -> str:
        return "tail script"

    def _fill_bytes(self, out: memoryview) -> None:  # pragma: no cover - not used
        raise AssertionError("fill_uint64 is overridden")

    def fill_uint64(self, out: np.ndarray) -> None:  # type: ignore[override]
        if self._calls >= self._limit:
            raise RuntimeError(f"the sampler rejected the tail proposal {self._limit} times")
        out[:] = self._words[self._calls % 2]
        self._calls += 1


def _laplace_word(t: float, magnitude: int) -> int:
    """A 64-bit word whose discrete Laplace draw at scale ``t`` is ``+magnitude``: its
    63-bit prefix puts ``V`` mid-way in ``{V : ⌊t(κ − ln V)⌋ = magnitude}``, sign bit 0."""
    with mpmath.workprec(200):
        tt = mpmath.mpf(t)
        kappa = mpmath.log(2) - mpmath.log1p(mpmath.exp(-1 / tt))
        v = mpmath.exp(kappa - (magnitude + mpmath.mpf(1) / 2) / tt)
        return int(mpmath.floor(v * 2**63)) << 1


@pytest.mark.parametrize("k_sigma", [6.1, 8.0])
def test_discrete_gaussian_returns_tail_values(k_sigma: float) -> None:
    """Every integer is a possible discrete Gaussian output of the rejection method: a
    proposal ``y`` ≈ kσ out (σ = 10), accepted by its uniform
    (V < e^{−(|y|−σ)²/(2σ²)}), is returned as it is. (The table method's tail:
    ``tests/random/test_gaussian_table.py``.)

    Kills ``dg-tails-6sigma``: a sampler with bounded support has infinite Rényi
    divergence between neighbours (a count near the cut-off is possible on one input and
    impossible on the other), so it satisfies no zCDP bound; the missing mass (~e^{−18})
    is far too small for any sampling test. Deterministic (scripted words).
    """
    sigma2, sigma = 100, 10.0
    y = round(k_sigma * sigma)
    accept_prob = math.exp(-((y - sigma) ** 2) / (2 * sigma2))
    accept_word = int(accept_prob / 16 * 2**63) << 1  # V ≈ a(y)/16: accepted, certified
    src = _TailSource(_laplace_word(sigma, y), accept_word)
    out = rejection_discrete_gaussian(sigma2, 5, source=src)
    assert out.tolist() == [y] * 5


def test_tail_script_is_what_it_claims() -> None:
    """The scripted proposal really is ``+y`` for the discrete Laplace sampler."""
    for y in (61, 80):
        word = _laplace_word(10.0, y)
        src = _TailSource(word, word)
        assert discrete_laplace(10, 3, source=src).tolist() == [y] * 3


# ----------------------------------------------------------------------------- slow paths


@pytest.fixture
def every_acceptance_exact(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Make the certified fast test of the discrete Gaussian decide nothing: every
    acceptance goes through the exact slow path. Counts the exact resolutions."""
    real_accept = gaussian_sampler.accept_exp_neg
    real_resolve = gaussian_sampler.resolve_less
    calls = {"resolve": 0}

    def undecided(*args: Any) -> tuple[np.ndarray, np.ndarray]:
        accept, amb = real_accept(*args)
        return np.zeros_like(accept), np.ones_like(amb)

    def counting(*args: Any) -> bool:
        calls["resolve"] += 1
        return bool(real_resolve(*args))

    monkeypatch.setattr(gaussian_sampler, "accept_exp_neg", undecided)
    monkeypatch.setattr(gaussian_sampler, "resolve_less", counting)
    return calls


def test_discrete_gaussian_slow_path_alone_is_exact(every_acceptance_exact: dict[str, int]) -> None:
    """With every acceptance of the rejection method decided by the exact slow path, 2000
    draws fit N_ℤ(6.25)
    (chi-square and DKW at α = 1e-6 each: false-failure rate ≤ 2e-6).

    Kills ``dg-slow-path-accepts``: a slow path that always accepts returns the discrete
    Laplace proposals (variance 12.3 instead of 6.25), rejected with p ≪ 1e-6 here; in
    production the bug fires on ~2⁻³⁸ of draws and breaks exactness.
    """
    x = rejection_discrete_gaussian(6.25, 2000, source=SeededSource("mutant:dg-slow"))
    assert every_acceptance_exact["resolve"] >= 2000
    ok, msg = fits(x, discrete_gaussian_law(6.25))
    assert ok, msg


@pytest.fixture
def every_floor_exact(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Make the certified floor of the discrete Laplace sampler decide nothing: every
    magnitude goes through the exact slow path. Counts the exact resolutions."""
    real_floor = laplace_sampler.floor_scaled_neglog
    real_resolve = laplace_sampler.resolve_floor
    calls = {"resolve": 0}

    def undecided(*args: Any) -> tuple[np.ndarray, np.ndarray]:
        lo, amb = real_floor(*args)
        return np.full_like(lo, np.nan), np.ones_like(amb)

    def counting(*args: Any) -> int:
        calls["resolve"] += 1
        return int(real_resolve(*args))

    monkeypatch.setattr(laplace_sampler, "floor_scaled_neglog", undecided)
    monkeypatch.setattr(laplace_sampler, "resolve_floor", counting)
    return calls


def test_discrete_laplace_slow_path_alone_is_exact(every_floor_exact: dict[str, int]) -> None:
    """With every magnitude computed by the exact slow path, 1000 draws fit DLap(1.5)
    (chi-square and DKW at α = 1e-6 each).

    Kills ``dlap-slow-floor-off-by-one``: a floor one too high never returns 0 (which has
    probability 0.32 here), so the fit fails with p ≪ 1e-6.
    """
    x = discrete_laplace(1.5, 1000, source=SeededSource("mutant:dlap-slow"))
    assert every_floor_exact["resolve"] == 1000
    ok, msg = fits(x, discrete_laplace_law(1.5))
    assert ok, msg


# ----------------------------------------------------------------------------- the stream


def test_secure_source_keys_come_from_os_entropy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every AES key of ``SecureSource`` is a fresh 32-byte ``os.urandom`` output.

    Kills ``aes-fixed-key``: with a fixed key, one output block reveals the counter
    (AES-decrypt it) and with it every past and future block — noise anyone can subtract.
    """
    drawn: list[bytes] = []
    keys: list[bytes] = []
    real_urandom, real_stream = os.urandom, sources._AESCounterStream

    def urandom(n: int) -> bytes:
        b = real_urandom(n)
        drawn.append(b)
        return b

    class Recording(real_stream):  # type: ignore[misc, valid-type]
        def __init__(self, key: bytes, counter: bytes) -> None:
            keys.append(key)
            super().__init__(key, counter)

    monkeypatch.setattr(os, "urandom", urandom)
    monkeypatch.setattr(sources, "_AESCounterStream", Recording)
    a, b = SecureSource(reseed_bytes=1 << 16), SecureSource()
    a.random_uint64(1 << 14)  # 2¹⁷ bytes under the first key …
    a.random_uint64(1 << 14)  # … so the next request rekeys
    b.random_uint64(4)
    assert len(keys) == 3
    assert len(set(keys)) == 3
    assert all(len(k) == 32 and k in drawn for k in keys)


def test_secure_stream_is_not_predictable_from_one_block() -> None:
    """Black-box version for the zero key: decrypting the first 16 output bytes under an
    all-zero AES-256 key and encrypting the next counter must not predict the next 16
    bytes (true with probability 1 − 2⁻¹²⁸ for a secret key; always false for that key)."""
    out = SecureSource().random_uint64(4).tobytes()
    zero = Cipher(algorithms.AES(bytes(32)), modes.ECB())
    counter = int.from_bytes(zero.decryptor().update(out[:16]), "big")
    guess = zero.encryptor().update(((counter + 1) % 2**128).to_bytes(16, "big"))
    assert guess != out[16:32]


class _EveryVariableSet(dict[str, str]):
    """An environment in which every variable is set (to ``"1"``), recording each lookup."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[object] = []

    def __contains__(self, key: object) -> bool:
        self.asked.append(key)
        return True

    def __getitem__(self, key: str) -> str:
        self.asked.append(key)
        return "1"

    def get(self, key: str, default: object = None) -> str:  # type: ignore[override]
        self.asked.append(key)
        return "1"


def test_secure_stream_ignores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``os.urandom`` scripted, the secure stream is exactly the AES-256-CTR keystream
    of the scripted key and counter — also in an environment where *every* variable is set
    (whatever its name), and without looking at the environment at all.

    Kills ``secure-env-seed-fallback``: a secure source that switches to a seeded
    generator when some variable (a debugging or test switch) is set still calls itself
    private, but its noise is reproducible by anyone who knows or guesses the seed.
    """
    script = [bytes(range(i, i + 32)) for i in range(0, 256, 32)]
    draws = iter(script)
    monkeypatch.setattr(os, "urandom", lambda n: next(draws)[:n])
    env = _EveryVariableSet()
    monkeypatch.setattr(os, "environ", env)
    monkeypatch.setattr(sources, "_DEFAULT", None)
    got = [SecureSource().random_uint64(8).tobytes(), sources.default_source().random_uint64(8)]
    monkeypatch.undo()
    for i, words in enumerate(got):
        expected = bytearray(64)
        sources._AESCounterStream(script[2 * i], script[2 * i + 1][:16]).fill(memoryview(expected))
        assert bytes(words) == bytes(expected), "the secure stream depends on the environment"
    assert env.asked == [], f"the secure source read the environment: {env.asked}"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_forked_processes_never_share_words() -> None:
    """After ``fork()``, parent and child draw 2¹⁴ + 4 words each, in large and small
    requests: no 64-bit word may appear in both (chance collision < 1e-10).

    Kills ``fork-key-reuse``: a child that keeps its parent's key and stream position
    produces the parent's next words — two "independent" releases with identical noise,
    whose difference reveals the difference of the true counts exactly.
    """
    src = SecureSource()
    src.random_uint64(10)  # key, stream position and buffer exist before the fork
    n = (1 << 14) * 8 + 32
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(r)
            data = src.random_uint64(1 << 14).tobytes() + src.random_uint64(4).tobytes()
            while data:
                data = data[os.write(w, data) :]
        finally:
            os._exit(0)
    os.close(w)
    child = b""
    while chunk := os.read(r, 1 << 16):
        child += chunk
    os.close(r)
    os.waitpid(pid, 0)
    parent = src.random_uint64(1 << 14).tobytes() + src.random_uint64(4).tobytes()
    assert len(child) == len(parent) == n
    a = np.frombuffer(child, dtype=np.uint64)
    b = np.frombuffer(parent, dtype=np.uint64)
    assert np.intersect1d(a, b).size == 0


# ----------------------------------------------------------------------------- noise scale


def _release_noise(mech: Any, n: int, seed: str) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureReleaseWarning)
        rel = mech.release(
            np.zeros(n, dtype=np.int64), source=SeededSource(seed), allow_insecure=True
        )
    return np.asarray(rel.values, dtype=np.int64)


def test_discrete_gaussian_mechanism_noise_variance() -> None:
    """``DiscreteGaussian(ρ = 1/200)`` releases noise of variance Var N_ℤ(σ² = 1/(2ρ) = 100)
    (σ² from the definition, variance by direct summation — not privtab's law).

    2·10⁶ draws; mean and variance within 6 standard errors (false failure ≈ 4e-9).
    Power against ``dg-variance-1pct`` (σ² 1% too small, so ρ is 1% more than stated):
    the shift is 0.01·√(n/2) = 14 standard errors: missed with probability < 1e-15.
    """
    rho = Fraction(1, 200)
    sigma2 = 1 / (2 * rho)
    x = _release_noise(DiscreteGaussian(rho), 2_000_000, "mutant:dg-var")
    ok, msg = moments_ok(x, discrete_gaussian_law(float(sigma2)))
    assert ok, msg


def test_geometric_mechanism_noise_scale() -> None:
    """``Geometric(ε = 1/10)`` releases noise with E|X| = 2r/(1 − r²), r = e^{−ε}
    (the two-sided geometric law, computed here from its definition).

    2·10⁶ draws; the mean of |X| within 6 standard errors (false failure ≈ 2e-9). Power
    against ``geometric-scale-1pct`` (scale 1/ε 1% too small: ε 1% more than stated): E|X|
    moves by ≈ 1%, i.e. 14 standard errors (sd(|X|) ≈ E|X| at this scale): missed with
    probability < 1e-14.
    """
    eps = Fraction(1, 10)
    r = math.exp(-float(eps))
    mean_abs = 2 * r / (1 - r * r)
    second = 2 * r / (1 - r) ** 2  # E X²
    n = 2_000_000
    x = _release_noise(Geometric(eps), n, "mutant:geom-scale")
    se = math.sqrt((second - mean_abs**2) / n)
    got = float(np.abs(x).mean())
    assert abs(got - mean_abs) <= 6 * se, f"E|X| {got:.5f}, exact {mean_abs:.5f} ± {se:.2g}"
    assert abs(float(x.mean())) <= 6 * math.sqrt(second / n)
