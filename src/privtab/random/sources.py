"""Sources of random bits: a secure default, raw OS entropy, and a seeded source for tests.

Every sampler in :mod:`privtab.random` draws its randomness from a :class:`RandomSource`.
The interface is deliberately small — uniform 64-bit words (vectorised) and arbitrary
numbers of random bits (for the rare exact slow paths) — and every source says whether its
output may be used for a privacy-protecting release (:attr:`RandomSource.is_private`,
``False`` unless the class declares it: only privtab's secure sources do).

Sources
-------
:class:`SecureSource` (the default)
    A cryptographically secure pseudo-random generator: the AES-256 keystream in counter
    mode (the construction of NIST SP 800-90A's CTR_DRBG without its derivation function),
    keyed with 256 bits and a 128-bit initial counter taken from ``os.urandom``. The key is
    replaced with fresh OS entropy after every 2**30 bytes of output and after ``fork()``
    (a child process never repeats its parent's stream). Output is indistinguishable from
    uniform bits to anyone who cannot break AES-256; it runs at several GB/s here (AES-NI
    through OpenSSL, via the ``cryptography`` package), against ~0.2 GB/s for ``os.urandom``.
:class:`OSEntropySource`
    Bytes straight from ``os.urandom`` (the kernel CSPRNG), read in 64 KiB blocks. For
    users who prefer not to rely on a user-space generator; slower.
:class:`SeededSource`
    The same AES-CTR keystream keyed deterministically from a seed (SHA-256 of the seed):
    reproducible across runs and platforms, for tests and examples only. ``is_private`` is
    ``False``, and the release path of :mod:`privtab.mechanisms` refuses it unless the caller
    passes ``allow_insecure=True``, in which case the output is marked ``private: false``.

All sources are thread-safe (a lock around the buffer) and return little-endian words.
"""

from __future__ import annotations

import hashlib
import os
import threading
from abc import ABC, abstractmethod
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "OSEntropySource",
    "RandomSource",
    "SecureSource",
    "SeededSource",
    "default_source",
    "resolve_source",
]

_BLOCK_WORDS = 1 << 16  # words generated per keystream call (512 KiB, fits in L2)
_SMALL_BUFFER_WORDS = 1 << 13  # buffer for small requests (64 KiB)


class RandomSource(ABC):
    """A source of independent uniform random bits.

    Subclasses implement :meth:`_fill_bytes`; everything else is derived from it.
    """

    #: Whether outputs derived from this source may be published as a private release.
    #: ``False`` unless a subclass declares it: a source is private only if its output is
    #: unpredictable to anyone (a cryptographically secure generator with a secret,
    #: fresh key). privtab's :class:`SecureSource` and :class:`OSEntropySource` declare
    #: it; a source of one's own built on a statistical generator (numpy's PCG64,
    #: Mersenne Twister) must not, and the release path then refuses it.
    is_private: bool = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffer = np.empty(0, dtype=np.uint64)
        self._pos = 0

    @property
    @abstractmethod
    def description(self) -> str:
        """A short human-readable description (recorded in release metadata)."""

    @abstractmethod
    def _fill_bytes(self, out: memoryview) -> None:
        """Overwrite every byte of ``out`` with uniform random bytes (lock held)."""

    # -- words -------------------------------------------------------------------------
    def random_uint64(self, size: int) -> NDArray[np.uint64]:
        """``size`` independent uniform 64-bit words as a new ``uint64`` array."""
        n = _check_size(size)
        out = np.empty(n, dtype=np.uint64)
        self.fill_uint64(out)
        return out

    def fill_uint64(self, out: NDArray[np.uint64]) -> None:
        """Overwrite the contiguous ``uint64`` array ``out`` with uniform words."""
        if out.dtype != np.uint64 or not out.flags.c_contiguous:
            raise ValueError("fill_uint64 needs a C-contiguous uint64 array")
        n = out.size
        if n == 0:
            return
        with self._lock:
            if n >= _SMALL_BUFFER_WORDS:
                self._fill_bytes(_bytes_view(out))
                return
            avail = self._buffer.size - self._pos
            if avail < n:
                if self._buffer.size == 0:
                    self._buffer = np.empty(_SMALL_BUFFER_WORDS, dtype=np.uint64)
                self._fill_bytes(_bytes_view(self._buffer))
                self._pos = 0
            out[:] = self._buffer[self._pos : self._pos + n]
            # Used words are overwritten so that they cannot be handed out twice or read
            # back from the buffer later.
            self._buffer[self._pos : self._pos + n] = 0
            self._pos += n

    def random_bits(self, nbits: int) -> int:
        """A uniform integer in ``[0, 2**nbits)`` (for exact slow paths)."""
        if nbits < 0:
            raise ValueError(f"nbits must be non-negative, got {nbits}")
        if nbits == 0:
            return 0
        words = (nbits + 63) // 64
        raw = self.random_uint64(words)
        value = int.from_bytes(raw.tobytes(), "little")
        return value >> (64 * words - nbits)

    def random_below(self, n: int) -> int:
        """A uniform integer in ``[0, n)`` by rejection (exact for any ``n ≥ 1``)."""
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        k = (n - 1).bit_length()
        while True:
            v = self.random_bits(k)
            if v < n:
                return v

    def random(self, size: int) -> NDArray[np.float64]:
        """Uniform floats on the grid ``{0, 2⁻⁵³, …, 1 − 2⁻⁵³}`` (53 random bits each).

        A convenience for non-privacy uses (e.g. shuffling a display). The exact samplers
        never use floats as randomness.
        """
        words = self.random_uint64(size)
        return (words >> np.uint64(11)).astype(np.int64).astype(np.float64) * 2.0**-53

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.description}>"


class _AESCounterStream:
    """The AES-256-CTR keystream (encryption of zeros) for one key and initial counter."""

    def __init__(self, key: bytes, counter: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        if len(key) != 32 or len(counter) != 16:
            raise ValueError("AES-256-CTR needs a 32-byte key and a 16-byte counter")
        self._encryptor: Any = Cipher(algorithms.AES(key), modes.CTR(counter)).encryptor()
        self._zeros = bytes(_BLOCK_WORDS * 8)
        self._in_place = True
        self.produced = 0

    def fill(self, out: memoryview) -> None:
        n = len(out)
        start = 0
        block = len(self._zeros)
        while start < n:
            stop = min(n, start + block)
            data = memoryview(self._zeros)[: stop - start]
            if self._in_place:
                try:
                    self._encryptor.update_into(data, out[start:stop])
                except ValueError:  # older cryptography wants block_size − 1 spare bytes
                    self._in_place = False
                    out[start:stop] = self._encryptor.update(data)
            else:
                out[start:stop] = self._encryptor.update(data)
            start = stop
        self.produced += n


class SecureSource(RandomSource):
    """The default secure source: AES-256-CTR keyed from ``os.urandom`` (see module doc).

    ``reseed_bytes`` bounds the output produced under one key (default 2**30 bytes); after
    that, and in a forked child, a fresh key and counter are drawn from ``os.urandom``.
    """

    is_private = True

    def __init__(self, reseed_bytes: int = 1 << 30) -> None:
        super().__init__()
        if reseed_bytes < 1 << 16:
            raise ValueError("reseed_bytes must be at least 65536")
        self._reseed_bytes = int(reseed_bytes)
        self._pid = -1
        self._stream: _AESCounterStream | None = None

    @property
    def description(self) -> str:
        return "AES-256-CTR keyed from os.urandom (secure)"

    def _rekey(self) -> None:
        self._stream = _AESCounterStream(os.urandom(32), os.urandom(16))
        self._pid = os.getpid()

    def _fill_bytes(self, out: memoryview) -> None:
        if (
            self._stream is None
            or self._pid != os.getpid()
            or self._stream.produced >= self._reseed_bytes
        ):
            self._rekey()
        assert self._stream is not None
        self._stream.fill(out)

    def fill_uint64(self, out: NDArray[np.uint64]) -> None:
        # A forked child must not hand out words its parent buffered before the fork.
        if self._pid != os.getpid():
            with self._lock:
                self._rekey()
                self._buffer = np.empty(0, dtype=np.uint64)
                self._pos = 0
        super().fill_uint64(out)


class OSEntropySource(RandomSource):
    """Bytes straight from ``os.urandom`` (the operating system's CSPRNG)."""

    is_private = True

    def __init__(self) -> None:
        super().__init__()
        self._pid = os.getpid()

    @property
    def description(self) -> str:
        return "os.urandom (secure)"

    def _fill_bytes(self, out: memoryview) -> None:
        n = len(out)
        start = 0
        while start < n:
            stop = min(n, start + (1 << 20))
            out[start:stop] = os.urandom(stop - start)
            start = stop

    def fill_uint64(self, out: NDArray[np.uint64]) -> None:
        if self._pid != os.getpid():
            with self._lock:
                self._buffer = np.empty(0, dtype=np.uint64)
                self._pos = 0
                self._pid = os.getpid()
        super().fill_uint64(out)


class SeededSource(RandomSource):
    """A deterministic, reproducible source for tests and examples — NOT private.

    The AES-256-CTR keystream with key ``SHA-256("privtab-seeded-source-v1:" + seed)``.
    ``seed`` may be an ``int`` (any size), ``str`` or ``bytes``. Anything produced with it
    must not be published: the mechanisms' release path refuses it unless explicitly
    allowed and then marks the output ``private: false``.
    """

    is_private = False

    def __init__(self, seed: int | str | bytes) -> None:
        super().__init__()
        if isinstance(seed, bool) or not isinstance(seed, int | str | bytes):
            raise TypeError(f"seed must be an int, str or bytes, got {type(seed).__name__}")
        if isinstance(seed, int):
            material = b"int:" + str(seed).encode()
        elif isinstance(seed, str):
            material = b"str:" + seed.encode("utf-8")
        else:
            material = b"bytes:" + seed
        self._seed = seed
        key = hashlib.sha256(b"privtab-seeded-source-v1:" + material).digest()
        self._stream = _AESCounterStream(key, bytes(16))

    @property
    def seed(self) -> int | str | bytes:
        """The seed this source was made from (test sources only)."""
        return self._seed

    @property
    def description(self) -> str:
        return f"SeededSource({self._seed!r}) (NOT private: for tests and examples)"

    def _fill_bytes(self, out: memoryview) -> None:
        self._stream.fill(out)


_DEFAULT: SecureSource | None = None
_DEFAULT_LOCK = threading.Lock()


def default_source() -> RandomSource:
    """The process-wide secure source (created on first use; fork-safe)."""
    global _DEFAULT
    if _DEFAULT is None:
        with _DEFAULT_LOCK:
            if _DEFAULT is None:
                _DEFAULT = SecureSource()
    return _DEFAULT


def resolve_source(source: RandomSource | None) -> RandomSource:
    """``source`` itself, or the default secure source when ``None``."""
    if source is None:
        return default_source()
    if not isinstance(source, RandomSource):
        raise TypeError(
            f"source must be a privtab.random.RandomSource, got {type(source).__name__}"
        )
    return source


def _bytes_view(words: NDArray[np.uint64]) -> memoryview:
    return memoryview(words.view(np.uint8).data)


def _check_size(size: int) -> int:
    if isinstance(size, bool):
        raise ValueError(f"size must be a non-negative integer, got {size!r}")
    try:
        n = int(size)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"size must be a non-negative integer, got {size!r}") from exc
    if n != size or n < 0:
        raise ValueError(f"size must be a non-negative integer, got {size!r}")
    return n
