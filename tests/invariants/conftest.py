"""Fixtures for the invariants tests: reproducible (non-private) randomness."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from privtab.random import RandomSource, SeededSource


@pytest.fixture
def seeded() -> Callable[[int], RandomSource]:
    """A factory of seeded, test-only sources (``is_private`` is False)."""

    def make(seed: int) -> RandomSource:
        return SeededSource(seed)

    return make
