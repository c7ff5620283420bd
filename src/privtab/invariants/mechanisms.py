"""Invariant-aware mechanisms for an r × c table whose one-way margins are published.

Seed ``semi-dp-invariant-statistics.txt`` §4–5. Every mechanism here releases a noisy
table for the *same* Semi-DP target — indistinguishability of tables with equal margins at
most ``a`` replacements apart (``a = 3``, Example 5) — so their errors can be compared:

* :class:`ProjectedGaussian` (Algorithm 1, Prop. 28): ``x + P·N(0, σ² I)`` with
  ``σ = Δ₂/μ``, ``Δ₂`` the ℓ₂ sensitivity of the Semi-DP space and ``P`` the projection onto
  its span. Noise lives in the zero-margin subspace, so **the margins are kept** (to float
  rounding). Guarantee: μ-GDP on ``D_t`` (and ρ = μ²/2 zCDP).
* :class:`OptimalKNorm` (Algorithms 2–3, Thm 31): the K-norm mechanism whose ball is the
  convex hull of the sensitivity space inside its span; ε-DP on ``D_t``; margins kept.
* :class:`NaiveGaussian` and :class:`NaiveKNorm` (§5.2 baselines): ordinary mechanisms
  for replace-one neighbours with sensitivity inflated by ``a`` (group privacy), noise in
  every cell; they reach the same Semi-DP target but move the margins.

Sensitivity space: by default the complete one (``D`` matrices and, for r, c ≥ 3,
3-cycles: Δ₂ = √6, Δ₁ = 6); ``paper_space=True`` uses the seed's Prop. 32 list
(Δ₂ = 2), which is only valid for 2 × c tables — see :mod:`privtab.invariants.sensitivity`.

Exactness of the Gaussian noise: ``x + Z`` is formed with ``Z`` an *exact* discrete
Gaussian on a dyadic lattice ``γℤ^{rc}`` (``γ = 2⁻⁴⁰σ``, a power of two, so integer tables
are lattice points) — a multivariate discrete Gaussian mechanism whose ρ-zCDP guarantee
``ρ = Δ₂²/(2σ²)`` holds exactly (Canonne, Kamath & Steinke 2020) — and the projection
``y = P(x + Z) + (I − P)x`` is post-processing: ``(I − P)x`` depends only on the published
margins (seed Lemma 42). The GDP statement is that of the continuous Gaussian, which the
lattice law matches to the 2⁻⁴⁰ lattice resolution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privtab._json import fields_dict
from privtab.accounting import GDP, ZCDP, Guarantee, PureDP
from privtab.invariants import _noise
from privtab.invariants.knorm import SubspacePolytope, gamma_radius, lp_ball_uniform
from privtab.invariants.sensitivity import TableSpace
from privtab.mechanisms.base import release_source
from privtab.random import RandomSource

FloatArray = NDArray[np.float64]

__all__ = [
    "NaiveGaussian",
    "NaiveKNorm",
    "OptimalKNorm",
    "ProjectedGaussian",
    "SemiGuarantee",
    "TableRelease",
    "check_table",
]


@dataclass(frozen=True)
class SemiGuarantee:
    """A Semi-DP guarantee: ``guarantee`` holds for invariant-conforming datasets at most
    ``semi_adjacent`` replacements apart (seed Definition 12)."""

    guarantee: Guarantee
    semi_adjacent: int
    invariant: str = "one-way margins"

    def __str__(self) -> str:
        return (
            f"{self.guarantee} on datasets with the same {self.invariant}, at most "
            f"{self.semi_adjacent} replacements apart (Semi-DP)"
        )

    def to_dict(self) -> dict[str, Any]:
        g = self.guarantee
        out: dict[str, Any] = {
            "text": str(self),
            "semi_adjacent": self.semi_adjacent,
            "invariant": self.invariant,
        }
        if isinstance(g, GDP):
            out.update(kind="gdp", mu=g.mu, rho=g.mu**2 / 2)
        elif isinstance(g, PureDP):
            out.update(kind="pure", epsilon=g.epsilon)
        elif isinstance(g, ZCDP):
            out.update(kind="zcdp", rho=g.rho)
        return out


def check_table(table: ArrayLike) -> NDArray[np.int64]:
    """Validate a contingency table of non-negative integer counts (2-d)."""
    t = np.asarray(table)
    if t.ndim != 2 or t.shape[0] < 1 or t.shape[1] < 1:
        raise ValueError(f"a contingency table must be a non-empty 2-d array, got shape {t.shape}")
    if t.dtype.kind not in "iu":
        bad = ~np.isfinite(t.astype(np.float64)) | (t != np.round(t))
        if np.any(bad):
            i, j = np.argwhere(bad)[0]
            raise ValueError(
                f"cell (row {i + 1}, column {j + 1}) is not an integer count: {t[i, j]!r}"
            )
    ti = t.astype(np.int64)
    if np.any(ti < 0):
        i, j = np.argwhere(ti < 0)[0]
        raise ValueError(f"cell (row {i + 1}, column {j + 1}) is negative: {int(ti[i, j])}")
    return ti


@dataclass(frozen=True)
class TableRelease:
    """A released table. ``private`` is False when a test-only source produced it."""

    table: FloatArray
    mechanism: str
    guarantee: SemiGuarantee
    private: bool
    row_margins: NDArray[np.int64]
    col_margins: NDArray[np.int64]
    integer_table: NDArray[np.int64] | None = None

    @property
    def margin_error(self) -> float:
        """Largest absolute deviation of the released margins from the true ones."""
        rows = np.abs(self.table.sum(axis=1) - self.row_margins).max()
        cols = np.abs(self.table.sum(axis=0) - self.col_margins).max()
        return float(max(rows, cols))

    def to_dict(self) -> dict[str, Any]:
        names = ["mechanism", "private", "guarantee", "table", "row_margins", "col_margins"]
        out = fields_dict(self, *names, margin_error=self.margin_error)
        if self.integer_table is not None:
            out["integer_table"] = self.integer_table.tolist()
        return out


def _positive(name: str, v: float) -> float:
    x = float(v)
    if not (x > 0 and math.isfinite(x)):
        raise ValueError(f"{name} must be a positive finite number, got {v!r}")
    return x


@dataclass(frozen=True)
class _TableMechanism:
    r: int
    c: int
    a: int = 3

    name: str = field(default="", init=False)

    def _check(self, table: ArrayLike) -> NDArray[np.int64]:
        t = check_table(table)
        if t.shape != (self.r, self.c):
            raise ValueError(
                f"table has shape {t.shape}, mechanism was built for {(self.r, self.c)}"
            )
        return t

    @property
    def guarantee(self) -> SemiGuarantee:
        raise NotImplementedError

    def noise(self, size: int, source: RandomSource | None = None) -> FloatArray:
        """``size`` noise draws (``size × rc``) — for error studies, not for releases."""
        raise NotImplementedError

    def expected_squared_l2(self) -> float:
        """``E‖M(x) − x‖₂²`` in closed form."""
        raise NotImplementedError

    def release(
        self,
        table: ArrayLike,
        *,
        source: RandomSource | None = None,
        allow_insecure: bool = False,
        integer: bool = False,
    ) -> TableRelease:
        """Release a noisy table. ``integer=True`` adds the non-negative integer table with
        the same margins nearest in ℓ₁ (post-processing, seed Remark 33)."""
        x = self._check(table)
        src = release_source(source, allow_insecure, self.name)
        y = self._perturb(x, src)
        rows, cols = x.sum(axis=1), x.sum(axis=0)
        it = None
        if integer:
            from privtab.invariants.postprocess import nearest_integer_table

            it = nearest_integer_table(y, rows, cols)
        return TableRelease(y, self.name, self.guarantee, src.is_private, rows, cols, it)

    def sample_outputs(
        self,
        table: ArrayLike,
        size: int,
        *,
        source: RandomSource | None = None,
        allow_insecure: bool = False,
    ) -> FloatArray:
        """``size`` independent outputs of the mechanism on ``table`` (``size × r × c``),
        by the same code path as :meth:`release` — for audits and error studies."""
        x = self._check(table)
        return self._perturb_many(x, int(size), release_source(source, allow_insecure, self.name))

    def _perturb(self, x: NDArray[np.int64], source: RandomSource) -> FloatArray:
        return np.asarray(self._perturb_many(x, 1, source)[0], dtype=np.float64)

    def _perturb_many(self, x: NDArray[np.int64], size: int, source: RandomSource) -> FloatArray:
        noise = self.noise(size, source).reshape(size, self.r, self.c)
        return np.asarray(x[None, :, :] + noise, dtype=np.float64)


class _SubspaceMechanism(_TableMechanism):
    """A mechanism whose noise lives in :attr:`space`, the tables with zero margins (the
    seed's Prop. 32 list of neighbour differences when ``paper_space``)."""

    paper_space: bool  # a field of each subclass (after its own parameter)

    @cached_property
    def space(self) -> TableSpace:
        return TableSpace(self.r, self.c, self.a, self.paper_space)


@dataclass(frozen=True)
class ProjectedGaussian(_SubspaceMechanism):
    """Algorithm 1: Gaussian noise projected onto the span of the Semi-DP sensitivity space."""

    mu: float = 1.0
    paper_space: bool = False
    name: str = field(default="projected-gaussian", init=False)

    def __post_init__(self) -> None:
        _positive("mu", self.mu)

    @property
    def sensitivity(self) -> float:
        return self.space.sensitivity("l2")

    @property
    def sigma(self) -> float:
        return self.sensitivity / self.mu

    @property
    def guarantee(self) -> SemiGuarantee:
        return SemiGuarantee(GDP(self.mu), self.a)

    def expected_squared_l2(self) -> float:
        return self.sigma**2 * self.space.dim

    def noise(self, size: int, source: RandomSource | None = None) -> FloatArray:
        if self.space.dim == 0:
            return np.zeros((size, self.r * self.c))
        z = _noise.gaussian(self.sigma, size * self.r * self.c, source=source).reshape(
            size, self.r, self.c
        )
        return _double_center(z).reshape(size, self.r * self.c)

    def _perturb_many(self, x: NDArray[np.int64], size: int, source: RandomSource) -> FloatArray:
        xf = x.astype(np.float64)
        if self.space.dim == 0:
            return np.repeat(xf[None], size, axis=0)
        z = _noise.gaussian(self.sigma, size * self.r * self.c, source=source).reshape(
            size, self.r, self.c
        )
        w = x[None, :, :] + z  # the exact lattice Gaussian mechanism on ℤ^{rc}
        # post-processing: y = P w + (I − P) x, and (I − P) x = row mean + column mean −
        # grand mean depends on the published margins only (seed Lemma 42)
        public = xf.mean(axis=1, keepdims=True) + xf.mean(axis=0, keepdims=True) - xf.mean()
        return np.asarray(_double_center(w) + public[None], dtype=np.float64)


def _double_center(z: FloatArray) -> FloatArray:
    """Apply ``P = (I − J/r) ⊗ (I − J/c)`` to a stack of r × c matrices."""
    return np.asarray(
        z
        - z.mean(axis=2, keepdims=True)
        - z.mean(axis=1, keepdims=True)
        + z.mean(axis=(1, 2), keepdims=True),
        dtype=np.float64,
    )


@dataclass(frozen=True)
class OptimalKNorm(_SubspaceMechanism):
    """Algorithms 2–3: the optimal K-norm mechanism for the rank-deficient Semi-DP space."""

    epsilon: float = 1.0
    paper_space: bool = False
    method: str = "auto"
    name: str = field(default="optimal-knorm", init=False)

    def __post_init__(self) -> None:
        _positive("epsilon", self.epsilon)

    @cached_property
    def polytope(self) -> SubspacePolytope:
        basis = self.space.basis
        return SubspacePolytope.from_points(self.space.elements.astype(np.float64) @ basis)

    @property
    def guarantee(self) -> SemiGuarantee:
        return SemiGuarantee(PureDP(self.epsilon), self.a)

    def expected_squared_l2(self) -> float:
        m = self.space.dim
        if m == 0:
            return 0.0
        return (m + 1) * (m + 2) / self.epsilon**2 * self.polytope.second_moment()

    def noise(self, size: int, source: RandomSource | None = None) -> FloatArray:
        m = self.space.dim
        if m == 0:
            return np.zeros((size, self.r * self.c))
        radius = gamma_radius(m + 1, 1.0 / self.epsilon, size, source)
        u = self.polytope.sample_uniform(size, source, self.method)
        return np.asarray((radius[:, None] * u) @ self.space.basis.T, dtype=np.float64)


@dataclass(frozen=True)
class NaiveGaussian(_TableMechanism):
    """§5.2 baseline: Gaussian noise in every cell with ℓ₂ sensitivity ``a·√2``."""

    mu: float = 1.0
    name: str = field(default="naive-gaussian", init=False)

    def __post_init__(self) -> None:
        _positive("mu", self.mu)

    @property
    def sigma(self) -> float:
        return self.a * math.sqrt(2.0) / self.mu

    @property
    def guarantee(self) -> SemiGuarantee:
        return SemiGuarantee(GDP(self.mu), self.a)

    def expected_squared_l2(self) -> float:
        return self.sigma**2 * self.r * self.c

    def noise(self, size: int, source: RandomSource | None = None) -> FloatArray:
        return _noise.gaussian(self.sigma, size * self.r * self.c, source=source).reshape(
            size, self.r * self.c
        )


@dataclass(frozen=True)
class NaiveKNorm(_TableMechanism):
    """§5.2 baselines: ℓ₁ (Laplace), ℓ₂ or ℓ∞ K-norm noise in every cell, sensitivity
    ``a·Δ_p`` with the replace-one ``Δ₁ = 2, Δ₂ = √2, Δ∞ = 1``."""

    epsilon: float = 1.0
    norm: str = "l1"
    name: str = field(default="naive-knorm", init=False)

    def __post_init__(self) -> None:
        _positive("epsilon", self.epsilon)
        if self.norm not in ("l1", "l2", "linf"):
            raise ValueError(f"norm must be 'l1', 'l2' or 'linf', got {self.norm!r}")
        object.__setattr__(self, "name", f"naive-{self.norm}")

    @property
    def sensitivity(self) -> float:
        return self.a * {"l1": 2.0, "l2": math.sqrt(2.0), "linf": 1.0}[self.norm]

    @property
    def guarantee(self) -> SemiGuarantee:
        return SemiGuarantee(PureDP(self.epsilon), self.a)

    def expected_squared_l2(self) -> float:
        d = self.r * self.c
        s = self.sensitivity / self.epsilon
        if self.norm == "l1":
            return 2.0 * d * s * s
        second = {"l2": d / (d + 2.0), "linf": d / 3.0}[self.norm]
        return (d + 1) * (d + 2) * s * s * second

    def noise(self, size: int, source: RandomSource | None = None) -> FloatArray:
        d = self.r * self.c
        scale = self.sensitivity / self.epsilon
        if self.norm == "l1":
            return _noise.laplace(scale, size * d, source=source).reshape(size, d)
        radius = gamma_radius(d + 1, scale, size, source)
        return np.asarray(
            radius[:, None] * lp_ball_uniform(self.norm, d, size, source), dtype=np.float64
        )
