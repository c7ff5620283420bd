"""The records digest: the identity of a data set whatever the order, batching or encoding
of its rows, and different for a different multiset of records."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from privtab.accounting.digest import RECORDS_PREFIX, RecordDigest

SCHEMA = "test v1: a, b, c"
#: the key of the fixed records below, as privtab 0.1 computed it (never to change)
PINNED = "001e3efebf21c558d66ce084e898b97e6066c3c6bf639f39f9882b4c289581ab"


def _rows(n: int = 10_000, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 1 << 62, size=(n, 3), dtype=np.uint64)
    rows[::7] = rows[0]  # duplicate rows: a multiset, not a set
    return rows


def _key(rows: np.ndarray, batches: int = 1) -> RecordDigest:
    d = RecordDigest(SCHEMA)
    for part in np.array_split(rows, batches):
        d.add([part[:, j] for j in range(rows.shape[1])])
    return d


def test_order_and_batching_do_not_matter() -> None:
    rows = _rows()
    base = _key(rows)
    assert base.key.startswith(RECORDS_PREFIX)
    assert len(base.key) == len(RECORDS_PREFIX) + 64
    assert base.rows == rows.shape[0]
    perm = np.random.default_rng(2).permutation(rows.shape[0])
    assert _key(rows[perm]).key == base.key
    assert _key(rows[::-1], batches=7).key == base.key
    parts = [_key(p) for p in np.array_split(rows[perm], 5)]  # Spark tasks, merged
    merged = RecordDigest(SCHEMA)
    for p in reversed(parts):
        merged.merge(p)
    assert merged.key == base.key


@pytest.mark.parametrize(
    "change",
    ["drop a row", "duplicate a row", "one bit", "swap a value between rows", "swap words"],
)
def test_a_different_multiset_has_another_key(change: str) -> None:
    rows = _rows()
    other = rows.copy()
    if change == "drop a row":
        other = other[1:]
    elif change == "duplicate a row":
        other = np.vstack([other, other[5:6]])
    elif change == "one bit":
        other[3, 1] ^= np.uint64(1)
    elif change == "swap a value between rows":  # the column sums stay the same
        other[3, 0], other[4, 0] = rows[4, 0], rows[3, 0]
    else:  # the same numbers in other fields of the row
        other[3, 0], other[3, 1] = rows[3, 1], rows[3, 0]
    assert _key(other).key != _key(rows).key


def test_the_schema_and_the_word_count_are_part_of_the_key() -> None:
    rows = _rows(100)
    cols = [rows[:, j] for j in range(3)]
    a, b = RecordDigest(SCHEMA), RecordDigest("another product")
    a.add(cols)
    b.add(cols)
    assert a.key != b.key
    with pytest.raises(ValueError, match="earlier batches had 3"):
        a.add(cols[:2])
    with pytest.raises(ValueError, match="cannot merge"):
        a.merge(b)
    with pytest.raises(ValueError, match="at least one word"):
        a.add([])
    assert RecordDigest(SCHEMA).key != a.key  # no records is a key of its own


def _reference_lanes(cols: list[list[int]]) -> tuple[int, int]:
    """Both lanes in plain Python integers (an independent computation of the numpy one):
    Σ over rows of (Σ kᵢ·wᵢ) and of SplitMix64(Σ kᵢ·wᵢ), modulo 2⁶⁴."""
    keys = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9)
    m = (1 << 64) - 1
    linear = mixed = 0
    for row in zip(*cols, strict=True):
        z = sum(k * w for k, w in zip(keys, row, strict=False)) & m
        linear = (linear + z) & m
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
        mixed = (mixed + (z ^ (z >> 31))) & m
    return linear, mixed


def test_the_key_is_stable_across_versions() -> None:
    """The ledger keeps keys for years: the digest of fixed records never changes (a change
    here would make every earlier release of a data set look like another data set). The
    lanes are checked against a plain-integer computation, the key against SHA-256."""
    a = list(range(1000))
    b = [3 * i for i in a]
    c = [(1 << 63) + 7 * i for i in a]
    d = RecordDigest("fixed v1")
    d.add([np.asarray(x, dtype=np.uint64) for x in (a, b, c)])
    assert (d.linear, d.mixed) == _reference_lanes([a, b, c])
    expected = hashlib.sha256(b"privtab-records-v1\0fixed v1\0")
    for v in (3, 1000, d.linear, d.mixed):
        expected.update(v.to_bytes(8, "little"))
    assert d.key == RECORDS_PREFIX + expected.hexdigest()
    assert d.key.endswith(PINNED)
