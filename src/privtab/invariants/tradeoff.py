"""Piecewise-linear trade-off functions (f-DP) with exact group privacy and composition.

A trade-off function ``f(α)`` is the smallest type-II error of any test of ``x`` against
``x'`` at type-I error ``α`` (Dong, Roth & Su 2022; seed §2.2). Pure and approximate DP
have piecewise-linear (PL) trade-off functions, and so has every pair of discrete
distributions, so this module represents a trade-off function *exactly* by its breakpoints
and implements, exactly for PL functions:

* **group privacy / Semi-DP** (seed Prop. 15, Cor. 18): a mechanism that is f-DP is
  ``1 − (1 − f)^{∘k}``-DP for datasets ``k`` replacements apart (Dong et al. Thm 2.14).
  The seed writes this as the k-fold composition ``f^{∘k}`` in the convention of Awan &
  Dong (2022) where trade-off functions are indexed by power; it is the same object;
* **composition** ``f ⊗ g`` (the trade-off of product distributions), computed from a
  dominating pair of discrete distributions: a PL ``f`` is ``T(P, Q)`` for the discrete
  ``P, Q`` whose atoms are its linear pieces (mass ``Δα`` under ``P`` and ``−Δβ`` under
  ``Q``), and ``T(P, Q) ⊗ T(P', Q') = T(P × P', Q × Q')`` (Neyman–Pearson on likelihood
  ratios, which multiply);
* the (ε, δ) profile ``δ(ε) = max_α (1 − f(α) − e^ε α)`` (Dong et al. Prop. 2.12).

Gaussian DP is not PL: :func:`gaussian_tradeoff` evaluates ``G_μ`` in closed form, and
group privacy of ``G_μ`` is ``G_{kμ}``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

__all__ = ["TradeOff", "gaussian_tradeoff"]

_TOL = 1e-12


def gaussian_tradeoff(mu: float, alpha: ArrayLike) -> FloatArray:
    """``G_μ(α) = Φ(Φ⁻¹(1 − α) − μ)``: the trade-off of ``N(0,1)`` vs ``N(μ,1)``."""
    from scipy.special import ndtr, ndtri  # lazy (import cost)

    a = np.clip(np.asarray(alpha, dtype=np.float64), 0.0, 1.0)
    # Φ⁻¹(1 − α) = −Φ⁻¹(α), accurate for tiny α
    return np.asarray(ndtr(-ndtri(a) - float(mu)), dtype=np.float64)


@dataclass(frozen=True)
class TradeOff:
    """A piecewise-linear trade-off function given by breakpoints ``(alphas, betas)``.

    ``alphas`` increase from 0 to 1; the function is convex, non-increasing, ``f(1) = 0``
    and ``f(α) ≤ 1 − α``. Validation rejects anything else.
    """

    alphas: FloatArray
    betas: FloatArray

    def __post_init__(self) -> None:
        a = np.asarray(self.alphas, dtype=np.float64).copy()
        b = np.asarray(self.betas, dtype=np.float64).copy()
        if a.ndim != 1 or a.shape != b.shape or a.size < 2:
            raise ValueError("alphas and betas must be 1-d arrays of equal length ≥ 2")
        if abs(a[0]) > _TOL or abs(a[-1] - 1.0) > _TOL or np.any(np.diff(a) < -_TOL):
            raise ValueError("alphas must increase from 0 to 1")
        if abs(b[-1]) > 1e-9 or np.any(b < -1e-9) or np.any(b > 1.0 - a + 1e-9):
            raise ValueError("a trade-off function satisfies 0 ≤ f(α) ≤ 1 − α and f(1) = 0")
        if np.any(np.diff(b) > 1e-9):
            raise ValueError("a trade-off function is non-increasing")
        a[0], a[-1] = 0.0, 1.0
        b = np.clip(b, 0.0, 1.0)
        # repeated α (a vertical jump at α = 0): keep the last, i.e. the lowest β
        keep = np.concatenate([np.diff(a) > _TOL, [True]])
        a, b = a[keep], b[keep]
        a[0], a[-1] = 0.0, 1.0
        b[-1] = 0.0
        a, b = _simplify(a, b)
        slopes = np.diff(b) / np.diff(a)
        if np.any(np.diff(slopes) < -1e-7 * np.maximum(1.0, np.abs(slopes[1:]))):
            raise ValueError("a trade-off function is convex")
        object.__setattr__(self, "alphas", a)
        object.__setattr__(self, "betas", b)

    # ----------------------------------------------------------------- constructors
    @classmethod
    def pure(cls, epsilon: float) -> TradeOff:
        """``f_{ε,0}``: the trade-off of ε-DP."""
        return cls.approx(epsilon, 0.0)

    @classmethod
    def approx(cls, epsilon: float, delta: float) -> TradeOff:
        """``f_{ε,δ}(α) = max(0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α))`` (Dong et al. eq. 5)."""
        if not (epsilon >= 0 and math.isfinite(epsilon)):
            raise ValueError(f"epsilon must be finite and ≥ 0, got {epsilon!r}")
        if not 0 <= delta <= 1:
            raise ValueError(f"delta must lie in [0, 1], got {delta!r}")
        a1 = (1.0 - delta) / (1.0 + math.exp(epsilon))
        return cls(np.array([0.0, a1, 1.0 - delta, 1.0]), np.array([1.0 - delta, a1, 0.0, 0.0]))

    @classmethod
    def perfect(cls) -> TradeOff:
        """``f(α) = 1 − α``: nothing can be distinguished (0-DP)."""
        return cls(np.array([0.0, 1.0]), np.array([1.0, 0.0]))

    @classmethod
    def from_distributions(cls, p: ArrayLike, q: ArrayLike) -> TradeOff:
        """``T(P, Q)`` for discrete distributions given as probability vectors on the same atoms."""
        pp = np.asarray(p, dtype=np.float64).reshape(-1)
        qq = np.asarray(q, dtype=np.float64).reshape(-1)
        if pp.shape != qq.shape or np.any(pp < 0) or np.any(qq < 0):
            raise ValueError("p and q must be non-negative vectors of the same length")
        if abs(pp.sum() - 1) > 1e-9 or abs(qq.sum() - 1) > 1e-9:
            raise ValueError("p and q must each sum to 1")
        return _from_atoms(pp, qq)

    # ----------------------------------------------------------------- evaluation
    def __call__(self, alpha: ArrayLike) -> FloatArray:
        a = np.asarray(alpha, dtype=np.float64)
        return np.asarray(np.interp(a, self.alphas, self.betas), dtype=np.float64)

    def delta(self, epsilon: float) -> float:
        """The smallest δ with ``f ≥ f_{ε,δ}``: ``max_α 1 − f(α) − e^ε α`` (at a breakpoint)."""
        vals = 1.0 - self.betas - math.exp(epsilon) * self.alphas
        return float(max(0.0, vals.max()))

    def dominates(self, other: TradeOff, tol: float = 1e-12) -> bool:
        """``self ≥ other`` everywhere (``self`` is at least as private). Exact for PL."""
        grid = np.union1d(self.alphas, other.alphas)
        return bool(np.all(self(grid) >= other(grid) - tol))

    def inverse(self) -> TradeOff:
        """``f⁻¹(y) = inf{α : f(α) ≤ y}``: the trade-off with the roles of x, x' swapped."""
        a, b = self.alphas, self.betas
        first_zero = int(np.flatnonzero(b <= 0.0)[0])
        xs = b[: first_zero + 1][::-1]
        ys = a[: first_zero + 1][::-1]
        if xs[-1] < 1.0:
            xs = np.append(xs, 1.0)
            ys = np.append(ys, 0.0)
        return TradeOff(xs, ys)

    def is_symmetric(self, tol: float = 1e-9) -> bool:
        """Whether ``f = f⁻¹`` (the graph is symmetric about the diagonal)."""
        inv = self.inverse()
        return self.dominates(inv, tol) and inv.dominates(self, tol)

    # ----------------------------------------------------------------- operations
    def group(self, k: int) -> TradeOff:
        """Group privacy for ``k`` replacements: ``1 − (1 − f)^{∘k}`` (exact for PL ``f``)."""
        if int(k) != k or k < 0:
            raise ValueError(f"k must be a non-negative integer, got {k!r}")
        if k == 0:
            return TradeOff.perfect()
        ha, hb = self.alphas, 1.0 - self.betas
        ra, rb = ha, hb
        for _ in range(int(k) - 1):
            ra, rb = _compose_increasing(ha, hb, ra, rb)
        return TradeOff(ra, 1.0 - rb)

    def tensor(self, other: TradeOff) -> TradeOff:
        """Composition ``f ⊗ g``: the trade-off of the two mechanisms run together."""
        p1, q1 = self.to_distributions()
        p2, q2 = other.to_distributions()
        return _from_atoms(np.outer(p1, p2).ravel(), np.outer(q1, q2).ravel())

    def to_distributions(self) -> tuple[FloatArray, FloatArray]:
        """A dominating pair ``(P, Q)`` of discrete distributions with ``T(P, Q) = f``."""
        p = [0.0]
        q = [1.0 - float(self.betas[0])]
        p.extend(np.diff(self.alphas).tolist())
        q.extend((-np.diff(self.betas)).tolist())
        pa, qa = np.array(p), np.array(q)
        keep = (pa > 0) | (qa > 0)
        return pa[keep], qa[keep]

    def __str__(self) -> str:
        return f"TradeOff({self.alphas.size} breakpoints)"


def _simplify(a: FloatArray, b: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Drop breakpoints that are collinear with their neighbours."""
    if a.size <= 2:
        return a, b
    keep = [0]
    for i in range(1, a.size - 1):
        j = keep[-1]
        s1 = (b[i] - b[j]) / (a[i] - a[j])
        s2 = (b[i + 1] - b[i]) / (a[i + 1] - a[i])
        if abs(s1 - s2) > 1e-12 * max(1.0, abs(s1), abs(s2)):
            keep.append(i)
    keep.append(a.size - 1)
    return a[keep], b[keep]


def _compose_increasing(
    ha: FloatArray, hb: FloatArray, ga: FloatArray, gb: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Breakpoints of ``h ∘ g`` for non-decreasing PL maps of [0, 1] into [0, 1]."""
    xs = set(ga.tolist())
    # g⁻¹ of h's breakpoints on the strictly increasing part of g
    inc = np.concatenate([[True], np.diff(gb) > 0])
    ga_i, gb_i = ga[inc], gb[inc]
    for y in ha:
        if gb_i[0] <= y <= gb_i[-1]:
            xs.add(float(np.interp(y, gb_i, ga_i)))
    x = np.array(sorted(xs))
    y = np.interp(np.interp(x, ga, gb), ha, hb)
    return x, y


def _from_atoms(p: FloatArray, q: FloatArray) -> TradeOff:
    """``T(P, Q)`` by the Neyman–Pearson lemma: reject atoms by decreasing ``q/p``."""
    keep = (p > 0) | (q > 0)
    p, q = p[keep], q[keep]
    with np.errstate(divide="ignore", invalid="ignore"):
        lr = np.where(p > 0, q / np.where(p > 0, p, 1.0), np.inf)
    order = np.argsort(-lr, kind="stable")
    p, q, lr = p[order], q[order], lr[order]
    # merge atoms with equal likelihood ratio (they lie on one linear piece)
    alphas = [0.0]
    betas = [1.0]
    i = 0
    while i < p.size:
        j = i
        sp, sq = 0.0, 0.0
        while j < p.size and (
            lr[j] == lr[i] or (np.isfinite(lr[i]) and abs(lr[j] - lr[i]) <= 1e-12 * lr[i])
        ):
            sp += p[j]
            sq += q[j]
            j += 1
        alphas.append(alphas[-1] + sp)
        betas.append(betas[-1] - sq)
        i = j
    a = np.clip(np.array(alphas), 0.0, 1.0)
    b = np.clip(np.array(betas), 0.0, 1.0)
    a[-1], b[-1] = 1.0, 0.0
    return TradeOff(a, b)
