"""K-norm mechanisms: the optimal one for a rank-deficient sensitivity space, and ℓp balls.

Seed §2.3 (Prop. 7, Hardt & Talwar 2010), §4.2 (Lemma 29, Prop. 30, Thm 31) and
Algorithms 2–3. A K-norm mechanism adds noise with density ``∝ exp(−ε‖z‖_K / Δ_K)``; it is
ε-DP when ``Δ_K`` bounds the K-norm of every element of the sensitivity space. Sampling
(Hardt & Talwar): ``R·U`` with ``R ~ Gamma(m + 1, Δ_K/ε)`` and ``U`` uniform in the unit
ball ``K`` of the norm, ``m`` the dimension.

When the invariant makes the sensitivity space ``S`` rank-deficient, its convex hull is a
norm ball only *inside* ``V = span(S)`` (Lemma 29). :class:`SubspacePolytope` works in the
coordinates of an orthonormal basis of ``V`` (the isomorphism φ of Prop. 30), where
``K = conv(φ(S))`` is a full-dimensional, centrally symmetric polytope; ``Δ_K = 1``; the
noise is drawn in ``ℝ^m`` and mapped back with the basis (Algorithm 2). Uniform points of
``K`` are drawn either

* ``"rejection"`` — Algorithm 3: uniform in the smallest axis-aligned box containing
  ``K`` (the seed's cube, tightened per axis), accepted when inside ``K`` (facet
  inequalities from Qhull). Expected proposals per point: ``vol(box)/vol(K)``, reported
  as :attr:`SubspacePolytope.acceptance`; or
* ``"cone"`` — rejection-free: ``K`` is the union of the simplices ``conv(0, F)`` over its
  (triangulated) facets ``F``; pick one with probability ∝ its volume and a uniform point
  in it (Dirichlet(1, …, 1) weights).

Both are exact up to float64 arithmetic. ``"auto"`` uses rejection while its acceptance
is at least 2%. The facet enumeration (Qhull) is the cost driver: milliseconds for
``(r−1)(c−1) ≤ 6``, seconds at 8 and minutes at 9 (4 × 4 tables); larger spaces are refused.

Randomness: uniforms from the secure source (53-bit resolution). The ε-DP statement is
for the real-valued mechanism; like every continuous mechanism computed in floating point
the low-order bits are not analysed (Mironov 2012) — use the Gaussian mechanisms of
:mod:`privtab.invariants.mechanisms` (lattice-exact) when that matters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from privtab.invariants import _noise
from privtab.random import RandomSource

FloatArray = NDArray[np.float64]

__all__ = ["MAX_POLYTOPE_DIM", "SubspacePolytope", "gamma_radius", "lp_ball_uniform"]

#: Largest subspace dimension for which the convex hull is computed.
MAX_POLYTOPE_DIM = 9


def gamma_radius(
    shape_int: int, scale: float, size: int, source: RandomSource | None
) -> FloatArray:
    """``Gamma(k, scale)`` for integer ``k`` as ``−scale · Σ_{i≤k} ln U_i``."""
    u = _noise.uniform_open(size * shape_int, source).reshape(size, shape_int)
    return np.asarray(-scale * np.log(u).sum(axis=1), dtype=np.float64)


def lp_ball_uniform(norm: str, dim: int, size: int, source: RandomSource | None) -> FloatArray:
    """Uniform points of the unit ℓ₁, ℓ₂ or ℓ∞ ball of ``ℝ^dim`` (``size × dim``)."""
    if norm == "linf":
        u = _noise.uniform_open(size * dim, source).reshape(size, dim)
        return np.asarray(2.0 * u - 1.0, dtype=np.float64)
    if norm == "l2":
        g = _noise.gaussian(1.0, size * dim, source=source).reshape(size, dim)
        nrm = np.linalg.norm(g, axis=1, keepdims=True)
        while np.any(nrm == 0):  # probability ~0; redraw for exactness
            bad = nrm[:, 0] == 0
            g[bad] = _noise.gaussian(1.0, int(bad.sum()) * dim, source=source).reshape(-1, dim)
            nrm = np.linalg.norm(g, axis=1, keepdims=True)
        rad = _noise.uniform_open(size, source) ** (1.0 / dim)
        return np.asarray(g / nrm * rad[:, None], dtype=np.float64)
    if norm == "l1":
        e = -np.log(_noise.uniform_open(size * (dim + 1), source)).reshape(size, dim + 1)
        signs = np.where(
            _noise.uniform_open(size * dim, source).reshape(size, dim) < 0.5, -1.0, 1.0
        )
        return np.asarray(signs * e[:, :dim] / e.sum(axis=1, keepdims=True), dtype=np.float64)
    raise ValueError(f"norm must be 'l1', 'l2' or 'linf', got {norm!r}")


@dataclass(frozen=True)
class SubspacePolytope:
    """``K = conv(φ(S))`` in orthonormal coordinates of ``span(S)`` (seed Lemma 29)."""

    points: FloatArray
    facets: FloatArray = field(repr=False)
    simplices: NDArray[np.int64] = field(repr=False)
    simplex_volumes: FloatArray = field(repr=False)
    half_widths: FloatArray

    @classmethod
    def from_points(cls, coords: FloatArray) -> SubspacePolytope:
        """Build from the sensitivity space in subspace coordinates (``n × m``, symmetric)."""
        z = np.asarray(coords, dtype=np.float64)
        if z.ndim != 2 or z.shape[0] == 0:
            raise ValueError("need a non-empty n × m array of points")
        m = z.shape[1]
        if m == 0:
            raise ValueError("the sensitivity space is {0}: nothing to perturb")
        if m > MAX_POLYTOPE_DIM:
            raise ValueError(
                f"the sensitivity space spans {m} dimensions; the convex hull is only computed up "
                f"to {MAX_POLYTOPE_DIM} (Qhull cost grows explosively) — use the projected Gaussian"
            )
        half = np.abs(z).max(axis=0)
        if m == 1:
            h = float(half[0])
            facets = np.array([[1.0 / h], [-1.0 / h]])
            pts = np.array([[-h], [h]])
            simplices = np.array([[1], [0]], dtype=np.int64)
            vols = np.array([h, h])
            return cls(pts, facets, simplices, vols, half)
        from scipy.spatial import ConvexHull  # lazy: scipy.spatial costs ~0.7 s to import

        hull = ConvexHull(z)
        normals, offsets = hull.equations[:, :-1], hull.equations[:, -1]
        if np.any(offsets >= 0):
            raise ValueError("the origin is not interior to conv(S): the space is not symmetric")
        w = normals / (-offsets[:, None])  # gauge(z) = max_f w_f · z
        facets = np.unique(np.round(w, 10), axis=0)
        verts = z[hull.simplices]  # (F, m, m)
        vols = np.abs(np.linalg.det(verts)) / math.factorial(m)
        return cls(z, facets, hull.simplices.astype(np.int64), vols, half)

    @property
    def dim(self) -> int:
        return int(self.points.shape[1])

    @property
    def volume(self) -> float:
        return float(self.simplex_volumes.sum())

    @property
    def acceptance(self) -> float:
        """Acceptance probability of Algorithm 3's box proposal: ``vol(K)/vol(box)``."""
        return self.volume / float(np.prod(2.0 * self.half_widths))

    def gauge(self, z: FloatArray) -> FloatArray:
        """The K-norm ``‖z‖_K`` of rows of ``z`` (coordinates)."""
        zz = np.atleast_2d(np.asarray(z, dtype=np.float64))
        return np.asarray((zz @ self.facets.T).max(axis=1), dtype=np.float64)

    def contains(self, z: FloatArray) -> NDArray[np.bool_]:
        return np.asarray(self.gauge(z) <= 1.0)

    def second_moment(self) -> float:
        """``E‖U‖²`` for ``U`` uniform in ``K``, exactly (simplex moment formula)."""
        m = self.dim
        if m == 1:
            return float(self.half_widths[0] ** 2 / 3.0)
        verts = self.points[self.simplices]
        per = (
            np.einsum("fij,fij->f", verts, verts)
            + np.einsum("fj,fj->f", verts.sum(1), verts.sum(1))
        ) / ((m + 1) * (m + 2))
        return float((per * self.simplex_volumes).sum() / self.volume)

    def sample_uniform(
        self, size: int, source: RandomSource | None = None, method: str = "auto"
    ) -> FloatArray:
        """``size`` uniform points of ``K`` (``size × m``)."""
        if method == "auto":
            method = "rejection" if self.acceptance >= 0.02 else "cone"
        if method == "rejection":
            return self._rejection(size, source)
        if method == "cone":
            return self._cone(size, source)
        raise ValueError(f"method must be 'auto', 'rejection' or 'cone', got {method!r}")

    def _rejection(self, size: int, source: RandomSource | None) -> FloatArray:
        m = self.dim
        out = np.empty((size, m))
        filled = 0
        batch = max(16, int(1.3 * size / max(self.acceptance, 1e-6)))
        while filled < size:
            n = min(batch, 1_000_000)
            u = _noise.uniform_open(n * m, source).reshape(n, m)
            z = (2.0 * u - 1.0) * self.half_widths
            ok = z[self.contains(z)]
            take = min(ok.shape[0], size - filled)
            out[filled : filled + take] = ok[:take]
            filled += take
        return out

    def _cone(self, size: int, source: RandomSource | None) -> FloatArray:
        m = self.dim
        cum = np.cumsum(self.simplex_volumes)
        pick = np.searchsorted(cum, _noise.uniform_open(size, source) * cum[-1], side="right")
        pick = np.minimum(pick, cum.size - 1)
        verts = self.points[self.simplices[pick]]  # (size, m, m)
        e = -np.log(_noise.uniform_open(size * (m + 1), source)).reshape(size, m + 1)
        lam = e[:, 1:] / e.sum(axis=1, keepdims=True)  # weight e[:, 0] sits on the origin
        return np.asarray(np.einsum("si,sij->sj", lam, verts), dtype=np.float64)
