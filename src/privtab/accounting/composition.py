"""Composition, group privacy and subsampling of privacy guarantees.

* :func:`compose` — sequential composition: ε, δ, ρ and τ(α) add; μ adds in quadrature
  (Dwork et al. 2006; Bun & Steinke 2016, Lemma 2.3; Mironov 2017, Prop. 1; Dong, Roth &
  Su 2019, Cor. 3.3). Valid for adaptively chosen mechanisms in every definition when the
  *sequence of guarantees* is fixed in advance; see :mod:`privtab.accounting.ledger` for
  budgets whose spending is decided on the fly.
* :func:`parallel` — mechanisms on disjoint parts of the data: the maximum.
* :func:`compose_by_degree` — generalized parallel composition (SafeTab seed Lemmas 9, 10
  and 12): when each record can affect at most ``z`` of the mechanisms, each with
  guarantee ``g``, the whole is ``z·ε`` / ``z·ρ`` / ``z·τ`` (and ``√z·μ``, ``(zε, zδ)``).
* :func:`group_privacy` — ``k`` records changing together: ``kε``; ``(kε, k e^{(k−1)ε} δ)``;
  ``k²ρ`` (Bun & Steinke 2016, Prop. 1.9); ``kμ`` (Dong et al. 2019, Thm. 2.14).
* :func:`poisson_subsample` — amplification by Poisson subsampling at rate β for pure and
  approximate DP: ``ln(1 + β(e^ε − 1))`` and ``βδ`` (Li, Qardaji & Su 2012; Balle, Barthe
  & Gaboardi 2018, Thm. 8).

Every function takes guarantee objects (an exact one is read as its float rounded up), never
a bare number: ``compose(1.0, 2.0)`` would not say whether it means ε or ρ
(:mod:`privtab.accounting._args`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from privtab.accounting._args import guarantee_arg
from privtab.accounting.conversions import to_rdp
from privtab.accounting.exact import ExactGuarantee
from privtab.accounting.guarantees import (
    GDP,
    RDP,
    ZCDP,
    ApproxDP,
    FloatArray,
    Guarantee,
    PureDP,
    check_parameter,
)

__all__ = ["compose", "compose_by_degree", "group_privacy", "parallel", "poisson_subsample"]


def _sum_rdp(parts: list[RDP], weights: list[float] | None = None) -> RDP:
    w = weights or [1.0] * len(parts)
    curves = [p.curve for p in parts]

    def curve(alpha: FloatArray) -> FloatArray:
        total = np.zeros(np.shape(alpha), dtype=np.float64)
        for c, wi in zip(curves, w, strict=True):
            total = total + wi * np.asarray(c(alpha), dtype=np.float64)
        return total

    terms = [
        p.description if wi == 1.0 else f"{wi:g} × {p.description}"
        for p, wi in zip(parts, w, strict=True)
    ]
    limits = [p.limit for p in parts]
    limit = (
        math.fsum(wi * lim for lim, wi in zip(limits, w, strict=True) if lim is not None)
        if all(lim is not None for lim in limits)
        else None
    )
    if len(terms) == 1:
        return RDP(curve, terms[0], limit=limit)
    names = ", ".join(terms[:3]) + (" …" if len(terms) > 3 else "")
    return RDP(curve, f"sum of {len(parts)} curves [{names}]", limit=limit)


def compose(
    *guarantees: Guarantee | ExactGuarantee | Iterable[Guarantee | ExactGuarantee],
) -> Guarantee:
    """Sequential composition of guarantees.

    Same-type inputs keep their type. Mixed inputs (other than (ε, δ)-DP) are composed as
    RDP curves, using each one's tightest curve (pure ε as randomized response), so the
    result is never looser than converting everything to zCDP first. (ε, δ)-DP composes
    only with (ε, δ)-DP or pure DP (basic composition); convert the others first with
    :func:`privtab.accounting.to_approx`.
    """
    items: list[Guarantee] = []
    for g in guarantees:
        if isinstance(g, Iterable) and not isinstance(g, str):
            items.extend(guarantee_arg(x, "compose") for x in g)
        else:
            items.append(guarantee_arg(g, "compose"))
    if not items:
        raise ValueError("compose needs at least one guarantee")
    kinds = {type(g) for g in items}
    if kinds == {PureDP}:
        return PureDP(math.fsum(g.epsilon for g in items))  # type: ignore[union-attr]
    if kinds == {ZCDP}:
        return ZCDP(math.fsum(g.rho for g in items))  # type: ignore[union-attr]
    if kinds == {GDP}:
        return GDP(math.sqrt(math.fsum(g.mu**2 for g in items)))  # type: ignore[union-attr]
    if kinds <= {PureDP, ApproxDP}:
        eps = math.fsum(g.epsilon for g in items)  # type: ignore[union-attr]
        delta = math.fsum(g.delta for g in items if isinstance(g, ApproxDP))
        return ApproxDP(eps, min(delta, 1.0))
    if ApproxDP in kinds:
        raise TypeError(
            "cannot compose (ε, δ)-DP with zCDP/RDP/GDP guarantees: convert those to (ε, δ) "
            "first with privtab.accounting.to_approx(g, delta)"
        )
    if kinds == {ZCDP, GDP}:
        rho = math.fsum(g.rho if isinstance(g, ZCDP) else g.mu**2 / 2 for g in items)  # type: ignore[union-attr]
        return ZCDP(rho)
    return _sum_rdp([to_rdp(g) for g in items])


def parallel(*args: Guarantee | ExactGuarantee) -> Guarantee:
    """Parallel composition over disjoint parts of the data: the pointwise maximum.

    Under add/remove-one neighbours a record lies in one part, so the whole satisfies the
    worst part's guarantee. (Under replace-one neighbours a record can leave one part and
    join another: use :func:`compose_by_degree` with ``z = 2``.)
    """
    if not args:
        raise ValueError("parallel needs at least one guarantee")
    guarantees = [guarantee_arg(g, "parallel") for g in args]
    kinds = {type(g) for g in guarantees}
    if kinds == {PureDP}:
        return PureDP(max(g.epsilon for g in guarantees))  # type: ignore[union-attr]
    if kinds == {ZCDP}:
        return ZCDP(max(g.rho for g in guarantees))  # type: ignore[union-attr]
    if kinds == {GDP}:
        return GDP(max(g.mu for g in guarantees))  # type: ignore[union-attr]
    if kinds == {ApproxDP}:
        return ApproxDP(
            max(g.epsilon for g in guarantees),  # type: ignore[union-attr]
            max(g.delta for g in guarantees),  # type: ignore[union-attr]
        )
    if ApproxDP in kinds:
        raise TypeError("parallel composition of (ε, δ)-DP with other kinds: convert first")
    rdps = [to_rdp(g) for g in guarantees]
    curves = [r.curve for r in rdps]
    limits = [r.limit for r in rdps]

    def curve(alpha: FloatArray) -> FloatArray:
        stacked = np.stack([np.asarray(c(alpha), dtype=np.float64) for c in curves])
        return np.asarray(stacked.max(axis=0), dtype=np.float64)

    limit = max(lim for lim in limits if lim is not None) if None not in limits else None
    return RDP(curve, f"max of {len(curves)} curves", limit=limit)


def compose_by_degree(g: Guarantee | ExactGuarantee, degree: int) -> Guarantee:
    """Generalized parallel composition (SafeTab seed App. B.2, Lemmas 9, 10, 12).

    Mechanisms each satisfying ``g`` run on the parts of a (possibly overlapping) family of
    subsets; if every record lies in at most ``degree`` = z parts, the whole satisfies the
    z-fold composition of ``g``: zε, zρ, zτ(α), √z μ, (zε, zδ).
    """
    g = guarantee_arg(g, "compose_by_degree")
    z = _positive_int("degree", degree)
    if isinstance(g, PureDP):
        return PureDP(z * g.epsilon)
    if isinstance(g, ZCDP):
        return ZCDP(z * g.rho)
    if isinstance(g, GDP):
        return GDP(math.sqrt(z) * g.mu)
    if isinstance(g, ApproxDP):
        return ApproxDP(z * g.epsilon, min(z * g.delta, 1.0))
    return _sum_rdp([g], [float(z)])


def group_privacy(g: Guarantee | ExactGuarantee, k: int) -> Guarantee:
    """The guarantee for groups of ``k`` records changing together.

    Pure kε; approximate (kε, k e^{(k−1)ε} δ) (Dwork & Roth 2014, Thm. 2.2 generalised);
    zCDP k²ρ (Bun & Steinke 2016, Prop. 1.9); GDP kμ (Dong, Roth & Su 2019, Thm. 2.14).
    RDP curves have no tight generic group rule: compute the mechanism's divergence at
    shift k instead (e.g. ``geometric_rdp(eps * k, sensitivity=k)``).
    """
    g = guarantee_arg(g, "group_privacy")
    kk = _positive_int("k", k)
    if isinstance(g, PureDP):
        return PureDP(kk * g.epsilon)
    if isinstance(g, ApproxDP):
        return ApproxDP(kk * g.epsilon, min(kk * math.exp((kk - 1) * g.epsilon) * g.delta, 1.0))
    if isinstance(g, ZCDP):
        return ZCDP(kk * kk * g.rho)
    if isinstance(g, GDP):
        return GDP(kk * g.mu)
    raise TypeError(
        "group privacy for a general RDP curve has no tight rule; compute the mechanism's "
        "divergence at shift k (e.g. privtab.accounting.curves.geometric_rdp(k*eps, sensitivity=k))"
    )


def poisson_subsample(g: Guarantee | ExactGuarantee, rate: float) -> Guarantee:
    """Privacy amplification by Poisson subsampling with probability β = ``rate``.

    ε-DP ⇒ ln(1 + β(e^ε − 1))-DP; (ε, δ) ⇒ (ln(1 + β(e^ε − 1)), βδ)
    (Balle, Barthe & Gaboardi 2018, Thm. 8; course seed §5.2).
    """
    g = guarantee_arg(g, "poisson_subsample")
    beta = check_parameter("rate", rate, upper=1.0)
    if isinstance(g, PureDP):
        return PureDP(math.log1p(beta * math.expm1(g.epsilon)))
    if isinstance(g, ApproxDP):
        return ApproxDP(math.log1p(beta * math.expm1(g.epsilon)), beta * g.delta)
    raise TypeError(
        "privtab implements amplification by subsampling for pure and (ε, δ)-DP only; "
        "zCDP is not amplified by subsampling in general"
    )


def _positive_int(name: str, value: int) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)
