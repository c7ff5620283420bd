"""The block algebra against dense matrices: classes, products, inverses, vectors and
quadratic forms, on random reduced histograms and on TopDown's 2,016-cell histogram with
the 2020 strategy's queries and constraints."""

from __future__ import annotations

import numpy as np
import pytest

from privtab.topdown.blocks import Basis, Blocks, interchangeable_classes
from privtab.topdown.histogram import MEASURED_QUERIES, SHAPE, query
from privtab.topdown.kron import KronQuery


def _partition(labels: list[int]) -> np.ndarray:
    k = max(labels) + 1
    return np.stack([(np.asarray(labels) == i).astype(float) for i in range(k)])


def test_classes_of_the_topdown_attributes() -> None:
    ones = np.ones((63, 63))
    assert interchangeable_classes(63, [np.eye(63), ones]) == [list(range(63))]
    hhinst = _partition([0, 1, 1, 1, 1, 2, 2, 2])
    g = [np.eye(8), np.ones((8, 8)), hhinst.T @ hhinst]
    assert interchangeable_classes(8, g) == [[0], [1, 2, 3, 4], [5, 6, 7]]
    nurse = np.zeros((8, 8))
    nurse[3, 3] = 1.0
    assert interchangeable_classes(8, [*g, nurse]) == [[0], [1, 2, 4], [3], [5, 6, 7]]


def _random_element(rng: np.random.Generator, per_attr: list[list[np.ndarray]]) -> np.ndarray:
    """A random symmetric positive definite sum of Kronecker products of the matrices."""
    total = None
    for _ in range(4):
        term = np.ones((1, 1))
        for mats in per_attr:
            term = np.kron(term, mats[int(rng.integers(len(mats)))])
        term = float(rng.uniform(0.5, 2.0)) * term
        total = term if total is None else total + term
    assert total is not None
    return total + 0.1 * np.eye(total.shape[0])


@pytest.mark.parametrize("seed", range(8))
def test_blocks_match_dense_matrices(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = [(4, 2, 3), (5, 3), (3, 2, 2, 2)][seed % 3]
    per_attr = []
    for n in shape:
        labels = [int(x) for x in rng.integers(0, 2, size=n)]
        labels[0], labels[-1] = 0, 1
        p = _partition(labels)
        sel = np.zeros((n, n))
        sel[0, 0] = 1.0
        per_attr.append([np.eye(n), np.ones((n, n)), p.T @ p, *([sel] if seed % 2 else [])])
    basis = Basis(shape, per_attr)
    a = _random_element(rng, per_attr)
    b = _random_element(rng, per_attr)
    ba, bb = basis.from_dense(a), basis.from_dense(b)
    assert np.allclose(basis.to_dense(ba), a, atol=1e-10)
    assert np.allclose(basis.to_dense(ba @ bb), a @ b, atol=1e-9)
    inv, regular = ba.eigh_inverse(pseudo=False, rtol=1e-12)
    assert regular
    assert np.allclose(basis.to_dense(inv), np.linalg.inv(a), atol=1e-9)
    kron = basis.kron([m[2] for m in per_attr])
    dense_kron = np.ones((1, 1))
    for m in per_attr:
        dense_kron = np.kron(dense_kron, m[2])
    assert np.allclose(basis.to_dense(kron), dense_kron, atol=1e-12)
    x = rng.normal(size=(3, 2, basis.size))
    vb = basis.to_blocks(x)
    assert np.allclose(basis.from_blocks(vb), x, atol=1e-12)
    batched = Blocks(tuple(np.stack([m, m, m]) for m in ba.arrays))
    assert np.allclose(basis.from_blocks(batched.apply(vb)), x @ a.T, atol=1e-9)
    rows = rng.normal(size=(5, basis.size))
    quad = basis.row_grams(rows) @ ba.flat()
    assert np.allclose(quad, np.einsum("ki,ij,kj->k", rows, a, rows), atol=1e-9)


def test_a_matrix_outside_the_algebra_is_refused() -> None:
    basis = Basis((3,), [[np.eye(3), np.ones((3, 3))]])
    with pytest.raises(ValueError, match="not in the"):
        basis.from_dense(np.diag([1.0, 2.0, 3.0]))


def test_topdown_information_inverts_like_the_dense_matrix() -> None:
    rng = np.random.default_rng(5)
    qs = [KronQuery.of(query(n)) for n in MEASURED_QUERIES]
    nurse = KronQuery("nurse", (np.eye(8)[3:4], np.eye(2)[:1], np.eye(2), np.eye(63)))
    per_attr = [[*(q.grams()[a] for q in qs), nurse.projectors()[a]] for a in range(4)]
    basis = Basis(SHAPE, per_attr)
    assert basis.classes[0] == [[0], [1, 2, 4], [3], [5, 6, 7]]
    assert [len(c) for c in basis.classes[1:]] == [2, 1, 1]
    variances = rng.uniform(1.0, 30.0, size=len(qs))
    info = basis.kron(qs[0].grams())
    info = Blocks(tuple(a / variances[0] for a in info.arrays))

    def gram(q: KronQuery) -> np.ndarray:  # FᵀF as the Kronecker product of factor Grams
        out = np.ones((1, 1))
        for f in q.factors:
            out = np.kron(out, f.T @ f)
        return out

    dense = gram(qs[0]) / variances[0]
    for q, v in zip(qs[1:], variances[1:], strict=True):
        info = info + Blocks(tuple(a / v for a in basis.kron(q.grams()).arrays))
        dense += gram(q) / v
    assert sum(d * d for d in basis.block_sizes) < 2016 * 2016 // 1000
    assert np.allclose(basis.to_dense(info), dense, atol=1e-10)
    inv, ok = info.eigh_inverse(pseudo=False, rtol=1e-12)
    assert ok
    ref = np.linalg.inv(dense)
    assert np.abs(basis.to_dense(inv) - ref).max() <= 1e-9 * np.abs(ref).max()
