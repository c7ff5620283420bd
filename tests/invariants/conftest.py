"""Fixtures for the invariants tests: reproducible (non-private) randomness."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from privtab.invariants._noise import NoiseSource, SeededNoise


@pytest.fixture
def seeded() -> Callable[[int], NoiseSource]:
    """A factory of seeded, test-only sources (``is_private`` is False)."""

    def make(seed: int) -> NoiseSource:
        return SeededNoise(seed)

    return make
