"""What ``privtab analyze ci|combine|test|postprocess`` computes from values given by hand.

Each function takes the parsed values, calls the analysis routines of this package and
returns a JSON-ready result (integer bounds as integers for integer noise). Post-processing
and inference on published values: no privacy cost.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

if TYPE_CHECKING:
    from privtab.mechanisms import NoiseMechanism
    from privtab.random import RandomSource

__all__ = ["combine_values", "interval_summary", "postprocess_values", "proportion_test_summary"]

LOG = logging.getLogger("privtab.analysis")


def _num(x: float, integer: bool) -> float | int:
    return int(round(x)) if integer and float(x).is_integer() else x


def interval_summary(
    mech: NoiseMechanism,
    level: float,
    values: Sequence[float],
    *,
    combination: str | None = None,
    simultaneous: str | None = None,
) -> dict[str, Any]:
    """Exact noise intervals (course seed §4.2): one value (``simultaneous`` None); several
    values as a joint box (``simultaneous`` ``exact`` or ``bonferroni``); or their ``sum``,
    ``difference`` (first minus second) or ``ratio`` (``combination``). Raises
    ``ValueError`` on bad arguments."""
    from privtab.analysis import intervals as iv
    from privtab.mechanisms.linear import is_discrete

    integer = is_discrete(mech)
    out: dict[str, Any]
    if combination is not None:
        if combination in ("difference", "ratio") and len(values) != 2:
            raise ValueError(f"--combination {combination} needs exactly two --values")
        if combination == "sum":
            r = iv.sum_interval(values, mech, level)
        elif combination == "difference":
            r = iv.difference_interval(values[0], values[1], mech, mech, level)
        elif combination == "ratio":
            r = iv.ratio_interval(values[0], values[1], mech, mech, level)
        else:
            raise ValueError("--combination must be sum, difference or ratio")
        out = {"combination": combination, **r.to_dict()}
        if combination != "ratio":
            out.update(lower=_num(r.lower, integer), upper=_num(r.upper, integer))
    elif simultaneous is None:  # one value
        r = iv.noise_interval(values[0], mech, level)
        out = {**r.to_dict(), "lower": _num(r.lower, integer), "upper": _num(r.upper, integer)}
        out["estimate"] = _num(r.estimate, integer)
    else:
        if simultaneous not in ("exact", "bonferroni"):
            raise ValueError("--simultaneous must be exact or bonferroni")
        box = cast(Literal["exact", "bonferroni"], simultaneous)
        s = iv.simultaneous_intervals(values, mech, level, box)
        out = s.to_dict()
        if integer:
            out["lower"] = [_num(x, True) for x in s.lower.tolist()]
            out["upper"] = [_num(x, True) for x in s.upper.tolist()]
    return {**out, "mechanism": mech.describe()}


def combine_values(
    values: Sequence[float],
    variances: Sequence[float],
    design: Sequence[Sequence[float]] | None = None,
    contrast: Sequence[float] | None = None,
) -> dict[str, Any]:
    """Inverse-variance combination of measurements of one target, or GLS with a design
    matrix (and optionally a contrast of the unknowns) — course seed §4.1."""
    from privtab.analysis.combine import gls, inverse_variance

    if design is None:
        return {"method": "inverse_variance", **inverse_variance(values, variances).to_dict()}
    g = gls(design, values, variances)
    out: dict[str, Any] = {
        "method": "gls",
        "coef": g.coef.tolist(),
        "covariance": g.covariance.tolist(),
    }
    if contrast is not None:
        out["estimate"], out["variance"] = g.estimate(contrast)
    return out


def proportion_test_summary(
    observed: float,
    n: int,
    p0: float,
    mech: NoiseMechanism,
    *,
    method: str = "exact",
    alternative: str = "two-sided",
    reps: int = 10_000,
    seed: int | None = None,
    alpha: float = 0.05,
) -> dict[str, Any]:
    """The DP-aware test of ``H₀: p = p0`` (course seed §4.4) with a conclusion sentence.
    ``method`` is ``exact`` or ``monte-carlo``; ``seed`` seeds the Monte Carlo draws
    (reproducible, not secure: warned). Raises :class:`privtab.errors.UsageError` naming
    the option of a bad method, alternative or ``alpha``."""
    from privtab._options import open_unit
    from privtab.analysis.dptests import proportion_test
    from privtab.errors import UsageError

    m = method.replace("-", "_")
    if m not in ("exact", "monte_carlo") or alternative not in ("two-sided", "greater", "less"):
        raise UsageError(
            "--method is exact or monte-carlo; --alternative two-sided, greater or less"
        )
    open_unit("--alpha", alpha)
    source: RandomSource | None = None
    if seed is not None:
        from privtab.random import SeededSource

        source = SeededSource(seed)
        LOG.warning("Monte Carlo simulation uses a seeded (insecure) source: fine for a p-value")
    r = proportion_test(
        observed, n, p0, mech, method=cast(Any, m), alternative=cast(Any, alternative),
        reps=reps, source=source, seed=seed,
    )  # fmt: skip
    decision = "rejects" if r.p_value < alpha else "does not reject"
    naive = "would reject" if r.naive_p_value < alpha else "would not reject either"
    conclusion = (
        f"At the {alpha:.0%} level the test {decision} H0: p = {p0:g} (p-value "
        f"{r.p_value:.4g}, accounting for the noise); the naive test that ignores the noise "
        f"(p-value {r.naive_p_value:.4g}) {naive}."
    )
    return {
        **r.to_dict(),
        "mechanism": mech.describe(),
        "seeded": seed is not None,
        "conclusion": conclusion,
    }


def postprocess_values(
    parts: Sequence[float],
    *,
    total: float | None = None,
    variance: float | None = None,
    total_variance: float | None = None,
    nonnegative: bool = True,
    round_: bool = False,
) -> dict[str, Any]:
    """Non-negativity, rounding and consistency of noisy parts with their noisy total
    (GLS, course seed §4.3): post-processing, no privacy cost."""
    import numpy as np

    from privtab.analysis.postprocess import clip_nonnegative, consistent_total, round_counts

    x = np.asarray(parts, dtype=np.float64)
    if total is not None:
        if variance is None or total_variance is None:
            raise ValueError("--total needs --variance and --total-variance")
        res = consistent_total(total, x, total_variance, variance, nonnegative=nonnegative)
        fitted, method = res.parts, res.method
    elif nonnegative:
        fitted, method = clip_nonnegative(x), "clip at zero"
    else:
        fitted, method = x, "none"
    values: list[Any] = (round_counts(fitted) if round_ else fitted).tolist()
    return {
        "values": values,
        "total": float(np.sum(values)),
        "method": method + (", rounded" if round_ else ""),
        "privacy_cost": 0,
    }
