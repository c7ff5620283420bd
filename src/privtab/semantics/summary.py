"""What a guarantee means, in numbers: the tables behind ``privtab semantics``.

:func:`power_bounds` lists, for one guarantee, every power bound privtab can compute at
the requested significance levels; :func:`posterior_bounds` the probability that a
release moves a posterior by more than a given ratio; :func:`epsilon_delta_curves` the
approximate-DP and pbdp (ε, δ) curves. :data:`BOUNDS` describes each named bound.

Bound names (the keys of the ``power`` object of ``privtab semantics --json``):

=====================  =========  ==========================================================
name                   kind       meaning
=====================  =========  ==========================================================
``pure_bound``         bound      every ε-DP mechanism (Wasserman–Zhou, seed Thm 6.1)
``approx_bound``       bound      every (ε, δ)-DP mechanism (Kairouz et al., seed Thm 6.2)
``zcdp_bound``         bound      every ρ-zCDP mechanism (Balle et al. Rényi constraints)
``zcdp_profile_bound`` bound      every ρ-zCDP mechanism, via its (ε, δ(ε)) curve (CKS)
``rdp_bound``          bound      every mechanism with the given Rényi curve (Balle et al.)
``rdp_profile_bound``  bound      the same via the curve's (ε, δ(ε)) conversion (CKS)
``gdp``                exact      μ-GDP trade-off (Dong, Roth & Su), the Gaussian mechanism
``gaussian``           mechanism  the Gaussian mechanism with the same ρ (μ = √(2ρ))
``discrete_gaussian``  mechanism  k discrete Gaussian queries with the same total ρ (exact)
=====================  =========  ==========================================================

"bound" rows hold for every mechanism with the guarantee; "mechanism" rows are the exact
power against one specific mechanism and show how conservative the bounds are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from privtab.accounting.conversions import gdp_delta, rdp_delta, zcdp_delta
from privtab.accounting.guarantees import GDP, RDP, ZCDP, ApproxDP, Guarantee, PureDP
from privtab.semantics._numeric import FloatArray
from privtab.semantics.bayes import (
    PosteriorBound,
    posterior_ratio_tail_arbitrary_prior,
    posterior_ratio_tail_rest_known,
    probable_posterior_interval,
)
from privtab.semantics.discrete_gaussian import discrete_gaussian_tradeoff
from privtab.semantics.pbdp import (
    pbdp_delta_from_power,
    pbdp_delta_from_power_table,
    pbdp_delta_gdp,
    rdp_tail_bound,
)
from privtab.semantics.power import approx_power, gaussian_power, gdp_power, profile_power
from privtab.semantics.power import pure_power as _pure_power
from privtab.semantics.renyi import rdp_power

__all__ = [
    "BOUNDS",
    "KINDS",
    "POSTERIOR_ROWS",
    "BoundInfo",
    "describe_guarantee",
    "epsilon_delta_curves",
    "posterior_bounds",
    "power_bounds",
    "prior_posterior_bounds",
    "tightest_power",
]

DEFAULT_LEVELS: tuple[float, ...] = (0.01, 0.05, 0.1)
DEFAULT_RATIOS: tuple[float, ...] = (1.25, 2.0, 5.0, 10.0, 100.0)
DEFAULT_PRIORS: tuple[float, ...] = (0.05, 0.4, 0.75)


@dataclass(frozen=True)
class BoundInfo:
    """What a named bound is, and where it comes from.

    ``label`` is its plain name for tables and legends; ``refs`` the works it comes from as
    ``(key of privtab.report.references.REFERENCES, section in that work)``."""

    kind: str  # "bound" (every mechanism), "exact" (tight for the definition), "mechanism"
    label: str
    description: str
    refs: tuple[tuple[str, str], ...]
    assumption: str = ""
    """What the bound assumes about the attacker ("" when it holds for any attacker); a
    sentence quoting a bound with an assumption names it."""

    @property
    def source(self) -> str:
        """The references as text, e.g. ``Kifer et al. 2022, Theorem 6.1``."""
        from privtab.report.references import REFERENCES

        return "; ".join(REFERENCES[k].short + (f", {w}" if w else "") for k, w in self.refs)


#: What each kind of row means, in words.
KINDS: dict[str, str] = {
    "bound": "holds for every mechanism with the guarantee",
    "exact": "exact for the definition (attained by the Gaussian mechanism)",
    "mechanism": "one specific mechanism: shows how conservative the bounds are",
}

BOUNDS: dict[str, BoundInfo] = {
    "pure_bound": BoundInfo(
        "bound",
        "pure DP bound",
        "maximum power of any test against any ε-DP mechanism (tight)",
        (("wasserman-zhou", ""), ("semantics", "Theorem 6.1, eq. (4)")),
    ),
    "approx_bound": BoundInfo(
        "bound",
        "(ε, δ)-DP bound",
        "maximum power of any test against any (ε, δ)-DP mechanism (tight)",
        (("kairouz", ""), ("semantics", "Theorem 6.2")),
    ),
    "zcdp_bound": BoundInfo(
        "bound",
        "zCDP bound",
        "maximum power against any ρ-zCDP mechanism: two-sided Rényi constraints, "
        "optimised over the order",
        (("balle", ""), ("semantics", "Theorem 6.3, Tables 2 and 6")),
    ),
    "zcdp_profile_bound": BoundInfo(
        "bound",
        "zCDP bound via (ε, δ)",
        "maximum power against any ρ-zCDP mechanism via its (ε, δ(ε)) curve",
        (("cks", "Proposition 12"), ("kairouz", "")),
    ),
    "rdp_bound": BoundInfo(
        "bound",
        "Rényi bound",
        "maximum power against any mechanism with this Rényi curve, optimised over the order",
        (("balle", ""), ("semantics", "Theorem 6.3")),
    ),
    "rdp_profile_bound": BoundInfo(
        "bound",
        "Rényi bound via (ε, δ)",
        "maximum power via the curve's (ε, δ(ε)) conversion",
        (("cks", "Proposition 12"), ("kairouz", "")),
    ),
    "gdp": BoundInfo(
        "exact",
        "Gaussian DP (exact)",
        "maximum power under μ-GDP; attained by the Gaussian mechanism",
        (("dong-roth-su", ""),),
    ),
    "gaussian": BoundInfo(
        "mechanism",
        "Gaussian",
        "exact power against the Gaussian mechanism with the same ρ (μ = √(2ρ))",
        (("semantics", "§6.3, Tables 2 and 6, column 'Power (Gaussian)'"),),
    ),
    "discrete_gaussian": BoundInfo(
        "mechanism",
        "discrete Gaussian",
        "exact power against k discrete Gaussian queries with the same total ρ, from the "
        "probability mass function (Neyman–Pearson)",
        (("cks", ""),),
    ),
    "release_pld": BoundInfo(
        "mechanism",
        "this run's worst-case person",
        "power against the worst-case person of a SafeTab release: the privacy-loss "
        "distribution of its actual composition of noisy counts (upper bound)",
        (("safetab", "Algorithms 1–3"), ("doroshenko", "")),
    ),
}

#: The rows of :func:`posterior_bounds`, in the same form.
POSTERIOR_ROWS: dict[str, BoundInfo] = {
    "rest_known": BoundInfo(
        "bound",
        "attacker knows everyone else",
        "the attacker knows every other record; bounds the ratio for any record",
        (("semantics", "§7.4.1, Theorem 7.4.1"),),
        assumption="the attacker already knows every other person's record",
    ),
    "arbitrary_prior": BoundInfo(
        "bound",
        "any prior",
        "whatever the attacker believed beforehand; the ratio for the person's true record",
        (("semantics", "§7.4.2, Theorem 7.4.2"),),
    ),
    "pbdp": BoundInfo(
        "bound",
        "trade-off (pbdp) bound",
        "from the tightest hypothesis-testing trade-off of the guarantee (f-DP / pbdp); "
        "the true record, any prior",
        (("semantics", "§5.2 and §7.4.1"),),
    ),
    "gaussian_pbdp": BoundInfo(
        "mechanism",
        "Gaussian mechanism",
        "the Gaussian mechanism with the same ρ",
        (("semantics", "§7.4.1, Figures 4 and 8"),),
    ),
    "pure_bound": BoundInfo(
        "bound",
        "pure DP limit",
        "under pure ε-DP the ratio never exceeds e^ε",
        (("semantics", "Theorem 7.3"),),
    ),
}


def describe_guarantee(g: Guarantee) -> dict[str, Any]:
    """``{"type": ..., parameters..., "text": str(g)}`` for JSON output."""
    if isinstance(g, PureDP):
        return {"type": "pure", "epsilon": g.epsilon, "text": str(g)}
    if isinstance(g, ApproxDP):
        return {"type": "approx", "epsilon": g.epsilon, "delta": g.delta, "text": str(g)}
    if isinstance(g, ZCDP):
        return {"type": "zcdp", "rho": g.rho, "text": str(g)}
    if isinstance(g, GDP):
        return {"type": "gdp", "mu": g.mu, "text": str(g)}
    return {"type": "rdp", "description": g.description, "text": str(g)}


def _rdp_delta_vec(g: RDP) -> Any:
    def fn(eps: FloatArray) -> FloatArray:
        e = np.asarray(eps, dtype=np.float64)
        return np.array([rdp_delta(g, float(v)) for v in e.ravel()]).reshape(e.shape)

    return fn


def power_bounds(
    g: Guarantee, levels: Any = DEFAULT_LEVELS, *, dg_queries: int = 1
) -> dict[str, FloatArray]:
    """Every applicable power bound of ``g`` at the significance ``levels``.

    Keys are the names of :data:`BOUNDS`. ``dg_queries`` is the number ``k`` of discrete
    Gaussian queries sharing a zCDP budget for the ``discrete_gaussian`` row (each with
    σ² = k/(2ρ), sensitivity 1).
    """
    a = np.asarray(levels, dtype=np.float64)
    out: dict[str, FloatArray] = {}
    if isinstance(g, PureDP):
        out["pure_bound"] = np.asarray(_pure_power(g.epsilon, a))
    elif isinstance(g, ApproxDP):
        out["approx_bound"] = np.asarray(approx_power(g.epsilon, g.delta, a))
    elif isinstance(g, ZCDP):
        rho = g.rho
        out["zcdp_bound"] = np.asarray(rdp_power(g, a))
        out["zcdp_profile_bound"] = np.asarray(
            profile_power(lambda e: np.asarray(zcdp_delta(rho, e)), a)
        )
        out["gaussian"] = np.asarray(gaussian_power(rho, a))
        if rho > 0:
            sigma = math.sqrt(dg_queries / (2.0 * rho))
            out["discrete_gaussian"] = np.asarray(
                discrete_gaussian_tradeoff(sigma, 1, dg_queries).power(a)
            )
    elif isinstance(g, GDP):
        out["gdp"] = np.asarray(gdp_power(g.mu, a))
        out["zcdp_bound"] = np.asarray(rdp_power(ZCDP(g.mu**2 / 2.0), a))
    else:
        out["rdp_bound"] = np.asarray(rdp_power(g, a))
        out["rdp_profile_bound"] = np.asarray(
            profile_power(_rdp_delta_vec(g), a, points=60, refine=False)
        )
    return out


def tightest_power(bounds: dict[str, FloatArray]) -> FloatArray:
    """Pointwise minimum of the rows that hold for every mechanism ("bound"/"exact")."""
    rows = [v for k, v in bounds.items() if BOUNDS[k].kind in ("bound", "exact")]
    return np.asarray(np.min(np.vstack(rows), axis=0))


def _power_function(g: Guarantee) -> Any:
    """The tightest available power curve of ``g`` as a vectorised function of the level."""
    if isinstance(g, PureDP):
        return lambda a: np.asarray(_pure_power(g.epsilon, a))
    if isinstance(g, ApproxDP):
        return lambda a: np.asarray(approx_power(g.epsilon, g.delta, a))
    if isinstance(g, GDP):
        return lambda a: np.asarray(gdp_power(g.mu, a))
    return None


#: Levels at which Rényi power curves are tabulated for the pbdp conversion.
_PBDP_LEVELS: FloatArray = np.concatenate([[0.0], np.geomspace(1e-12, 1.0, 160)])


def pbdp_curve(g: Guarantee, epsilons: Any) -> FloatArray:
    """pbdp δ(ε) implied by the tightest trade-off bound of ``g`` (seed §5.2).

    Closed-form trade-offs (pure, approximate, GDP) use the exact fixed point; Rényi
    guarantees use their Balle et al. power curve tabulated on a dense log grid with the
    conservative step rule of :func:`pbdp_delta_from_power_table`, capped by the
    Bun–Steinke tail bound (whichever is smaller; both are valid).
    """
    e = np.asarray(epsilons, dtype=np.float64)
    if isinstance(g, GDP):
        return np.asarray(pbdp_delta_gdp(g.mu, e))
    fn = _power_function(g)
    if fn is not None:
        return np.asarray(pbdp_delta_from_power(fn, e))
    assert isinstance(g, ZCDP | RDP)
    table = np.asarray(pbdp_delta_from_power_table(_PBDP_LEVELS, _renyi_table(g), e))
    # both are valid upper bounds; the table's step rule is loose at large ε
    return np.asarray(np.minimum(table, np.asarray(rdp_tail_bound(g, e))), dtype=np.float64)


@lru_cache(maxsize=32)
def _renyi_table(g: ZCDP | RDP) -> FloatArray:
    """Balle et al. power of ``g`` on :data:`_PBDP_LEVELS` (cached: it is reused often)."""
    out = np.asarray(rdp_power(g, _PBDP_LEVELS))
    out.setflags(write=False)
    return out


def posterior_bounds(g: Guarantee, ratios: Any = DEFAULT_RATIOS) -> dict[str, Any]:
    """Bounds on ``P[posterior ratio > r]`` for each ratio ``r > 1`` (seed §7).

    Rows: ``rest_known`` (Thm 7.4.1, attacker knows everyone else), ``arbitrary_prior``
    (Thm 7.4.2), ``pbdp`` (the f-DP/pbdp version: δ(ln r) of the tightest trade-off),
    ``gaussian_pbdp`` (zCDP only: the Gaussian mechanism with the same ρ, seed Fig. 4/8).
    For pure ε-DP the ratio never exceeds ``e^ε`` (Thm 7.3): probability 0 above it, and
    no bound (1) below. ``None`` marks a bound that does not apply.
    """
    r = np.asarray(ratios, dtype=np.float64)
    if np.any(np.isnan(r)) or np.any(r <= 1.0):
        raise ValueError(f"posterior ratios must be > 1, got {ratios!r}")
    eps = np.log(r)
    out: dict[str, Any] = {"ratios": r, "epsilons": eps}
    if isinstance(g, PureDP):
        out["pure_bound"] = np.where(eps >= g.epsilon, 0.0, 1.0)
        out["pbdp"] = pbdp_curve(g, eps)
        return out
    if isinstance(g, ApproxDP):
        out["pbdp"] = pbdp_curve(g, eps)
        return out
    renyi: ZCDP | RDP = ZCDP(g.mu**2 / 2.0) if isinstance(g, GDP) else g
    out["rest_known"] = np.asarray(posterior_ratio_tail_rest_known(renyi, eps))
    out["arbitrary_prior"] = np.asarray(posterior_ratio_tail_arbitrary_prior(renyi, eps))
    out["pbdp"] = pbdp_curve(g, eps)
    if isinstance(g, ZCDP):
        out["gaussian_pbdp"] = np.asarray(pbdp_delta_gdp(math.sqrt(2.0 * g.rho), eps))
    return out


def prior_posterior_bounds(
    g: Guarantee,
    priors: Any = DEFAULT_PRIORS,
    *,
    distance: int = 1,
    bound: PosteriorBound = "coherent",
    confidence: float = 0.95,
) -> dict[str, Any] | None:
    """Where the posterior of an event with each prior can lie after a release of ``g``
    (inferential-limits seed Thm 6.4; :func:`~privtab.semantics.bayes.posterior_interval`
    and its zCDP/RDP analogue :func:`~privtab.semantics.bayes.probable_posterior_interval`).

    Returns ``{"priors", "lower", "upper", "bound", "distance", "radius", "confidence",
    "holds"}`` — ``radius`` is the bound ``t`` on ``|ln(Bayes factor)|``, ``holds`` says
    whether the interval holds for every output (pure DP, ``confidence`` 1) or with the
    stated probability (zCDP, GDP as zCDP, RDP) — or ``None`` for (ε, δ)-DP, where the
    argument does not give a bound without further assumptions.
    """
    p = np.asarray(priors, dtype=np.float64)
    if isinstance(g, ApproxDP):
        return None
    renyi: PureDP | ZCDP | RDP = ZCDP(g.mu**2 / 2.0) if isinstance(g, GDP) else g
    lo, hi, t = probable_posterior_interval(p, renyi, distance, confidence=confidence, bound=bound)
    pure = isinstance(g, PureDP)
    return {
        "priors": p,
        "lower": np.asarray(lo, dtype=np.float64),
        "upper": np.asarray(hi, dtype=np.float64),
        "bound": bound,
        "distance": int(distance),
        "radius": float(t),
        "confidence": 1.0 if pure else float(confidence),
        "holds": "for every output" if pure else f"with probability ≥ {confidence:g}",
    }


def epsilon_delta_curves(g: Guarantee, epsilons: Any) -> dict[str, FloatArray]:
    """Approximate-DP δ(ε) (the privacy profile) and the pbdp δ(ε) over ``epsilons``.

    ``approx_dp``: the (ε, δ)-DP curve (pure / approximate: the tight curve of randomized
    response, ``δ₀ + (1−δ₀)(e^{ε₀} − e^ε)/(1 + e^{ε₀})`` below ε₀; zCDP: CKS optimal;
    GDP: exact; RDP: CKS over orders). ``pbdp``: see :func:`pbdp_curve`.
    ``zcdp_tail``: Bun & Steinke's upper bound on the pbdp curve (Rényi guarantees).
    """
    from privtab.semantics.pbdp import zcdp_tail_bound

    e = np.asarray(epsilons, dtype=np.float64)
    out: dict[str, FloatArray] = {}
    if isinstance(g, PureDP | ApproxDP):
        # tight profile: that of randomized response (Kairouz et al. 2015), plus δ₀
        e0, d0 = g.epsilon, (g.delta if isinstance(g, ApproxDP) else 0.0)
        rr = np.clip((np.exp(e0) - np.exp(np.minimum(e, e0))) / (1.0 + np.exp(e0)), 0.0, 1.0)
        out["approx_dp"] = d0 + (1.0 - d0) * rr
    elif isinstance(g, ZCDP):
        out["approx_dp"] = np.asarray(zcdp_delta(g.rho, e))
        out["zcdp_tail"] = np.asarray(zcdp_tail_bound(g.rho, e))
    elif isinstance(g, GDP):
        out["approx_dp"] = np.asarray(gdp_delta(g.mu, e))
        out["zcdp_tail"] = np.asarray(zcdp_tail_bound(g.mu**2 / 2.0, e))
    else:
        out["approx_dp"] = _rdp_delta_vec(g)(e)
        out["zcdp_tail"] = np.asarray(rdp_tail_bound(g, e))
    out["pbdp"] = pbdp_curve(g, e)
    return out
