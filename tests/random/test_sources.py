"""Bit sources: known-answer test of the AES-CTR keystream, privacy flags, fork safety."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from scipy import stats

from privtab.random import RandomSource, SecureSource, SeededSource, discrete_laplace

# private on purpose: the AES-CTR stream behind SecureSource is checked on its own
from privtab.random.sources import (
    OSEntropySource,
    _AESCounterStream,
    default_source,
    resolve_source,
)


def test_aes_ctr_keystream_matches_nist_sp800_38a_f55() -> None:
    """NIST SP 800-38A, F.5.5 CTR-AES256.Encrypt: keystream = ciphertext XOR plaintext."""
    key = bytes.fromhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")
    counter = bytes.fromhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")
    plaintext = bytes.fromhex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51")
    ciphertext = bytes.fromhex("601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c5")
    stream = _AESCounterStream(key, counter)
    out = bytearray(32)
    stream.fill(memoryview(out))
    assert bytes(a ^ b for a, b in zip(out, plaintext, strict=True)) == ciphertext


def test_privacy_flags() -> None:
    assert SecureSource().is_private
    assert OSEntropySource().is_private
    assert not SeededSource(1).is_private
    assert "NOT private" in SeededSource(1).description
    assert default_source() is default_source()
    assert default_source().is_private
    assert resolve_source(None) is default_source()


def test_resolve_source_rejects_other_objects() -> None:
    with pytest.raises(TypeError, match="RandomSource"):
        resolve_source(np.random.default_rng(1))  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [0, 2**100, "a", b"\x00"])
def test_seeded_source_is_deterministic(seed: int | str | bytes) -> None:
    a, b = SeededSource(seed), SeededSource(seed)
    for n in (3, 5000, 70_000, 1):
        assert np.array_equal(a.random_uint64(n), b.random_uint64(n))


def test_seeded_sources_with_different_seeds_differ() -> None:
    words = {SeededSource(s).random_uint64(4).tobytes() for s in (1, "1", b"1", 2)}
    assert len(words) == 4


def test_seeded_source_rejects_bad_seeds() -> None:
    with pytest.raises(TypeError, match="seed"):
        SeededSource(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="seed"):
        SeededSource(True)


@pytest.mark.parametrize("cls", [SecureSource, OSEntropySource])
def test_secure_sources_are_uniform_bytes(cls: type[RandomSource]) -> None:
    src = cls()
    data = np.concatenate([src.random_uint64(n) for n in (7, 100, 20_000, 3)]).view(np.uint8)
    counts = np.bincount(data, minlength=256)
    assert stats.chisquare(counts).pvalue > 1e-6
    bits = np.unpackbits(data)
    n = bits.size
    assert abs(bits.mean() - 0.5) < 6 * 0.5 / np.sqrt(n)


def test_two_secure_sources_differ() -> None:
    assert not np.array_equal(SecureSource().random_uint64(4), SecureSource().random_uint64(4))


def test_small_requests_never_repeat_words() -> None:
    src = SecureSource()
    words = np.concatenate([src.random_uint64(3) for _ in range(5000)])
    assert np.unique(words).size == words.size


def test_secure_source_rekeys_after_its_output_bound() -> None:
    src = SecureSource(reseed_bytes=1 << 16)
    src.random_uint64(1 << 13)
    first = src._stream
    src.random_uint64(1 << 13)
    assert src._stream is not first


def test_reseed_bound_is_validated() -> None:
    with pytest.raises(ValueError, match="reseed_bytes"):
        SecureSource(reseed_bytes=10)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_forked_child_does_not_repeat_the_parent_stream() -> None:
    src = SecureSource()
    src.random_uint64(10)  # key and buffer exist before the fork
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        os.write(w, src.random_uint64(4).tobytes())
        os.close(w)
        os._exit(0)
    os.close(w)
    child = b""
    while len(child) < 32:
        chunk = os.read(r, 32)
        if not chunk:
            break
        child += chunk
    os.close(r)
    os.waitpid(pid, 0)
    parent = src.random_uint64(4).tobytes()
    assert len(child) == 32
    assert child != parent


def test_random_bits_and_below() -> None:
    src = SeededSource("bits")
    values = [src.random_bits(5) for _ in range(4000)]
    assert min(values) >= 0
    assert max(values) < 32
    assert set(values) == set(range(32))
    assert src.random_bits(0) == 0
    assert 0 <= src.random_bits(200) < 2**200
    below = [src.random_below(3) for _ in range(3000)]
    assert set(below) == {0, 1, 2}
    with pytest.raises(ValueError, match="n must be"):
        src.random_below(0)
    with pytest.raises(ValueError, match="nbits"):
        src.random_bits(-1)


def test_random_floats_are_on_the_53_bit_grid() -> None:
    x = SeededSource("floats").random(10_000)
    assert ((x >= 0) & (x < 1)).all()
    assert np.array_equal(x * 2.0**53, np.floor(x * 2.0**53))


def test_fill_uint64_validates_its_argument() -> None:
    with pytest.raises(ValueError, match="uint64"):
        SeededSource(1).fill_uint64(np.zeros(4, dtype=np.int64))  # type: ignore[arg-type]


def test_sources_are_thread_safe() -> None:
    src = SecureSource()
    results: list[np.ndarray] = []

    def work() -> None:
        results.append(np.concatenate([src.random_uint64(5) for _ in range(500)]))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    allw = np.concatenate(results)
    assert np.unique(allw).size == allw.size


class _NumpySource(RandomSource):
    """A user's source built on numpy's PCG64: statistically good, cryptographically not."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self._rng = np.random.Generator(np.random.PCG64(seed))

    @property
    def description(self) -> str:
        return "numpy PCG64"

    def _fill_bytes(self, out: memoryview) -> None:
        out[:] = self._rng.bytes(len(out))


def test_a_custom_source_is_not_private_unless_it_says_so() -> None:
    """is_private defaults to False: a PCG64 source is refused by every release path."""
    import warnings

    from privtab.mechanisms import (
        DiscreteGaussian,
        Geometric,
        InsecureReleaseWarning,
        InsecureSourceError,
    )
    from privtab.mechanisms.base import release_source

    src = _NumpySource(1)
    assert RandomSource.is_private is False
    assert src.is_private is False
    with pytest.raises(InsecureSourceError, match="numpy PCG64 is not a secure source"):
        release_source(src, False, "geometric")
    for mech in (Geometric(1), DiscreteGaussian(rho=1)):
        with pytest.raises(InsecureSourceError):
            mech.release([1, 2, 3], source=src)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureReleaseWarning)
        rel = Geometric(1).release([1, 2, 3], source=src, allow_insecure=True)
    assert rel.private is False
    # samplers still accept it (simulation), and the flag is what a subclass declares
    assert discrete_laplace(2, 5, source=src).shape == (5,)

    class Declared(_NumpySource):
        is_private = True

    assert release_source(Declared(2), False, "geometric").is_private
