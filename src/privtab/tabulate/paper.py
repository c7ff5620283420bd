"""The SafeTab paper's simplified model (seed App. F): a plan per list of MOE targets.

Used by ``privtab safetab plan --moe …`` to reproduce the paper's Tables 1, 2 and 4 and to
compare geometric and discrete Gaussian noise at the same margins of error.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from privtab.tabulate.plan import ReleasePlan
from privtab.tabulate.privacy import analyse

__all__ = ["paper_model"]


def paper_model(
    moes: list[float],
    stability: int,
    gamma: float,
    delta: float,
    calibration: str,
    pld_grid: float,
) -> dict[str, Any]:
    """The SafeTab paper's simplified model (seed App. F): one level per stage-2 MOE target,
    calibrated for geometric and discrete Gaussian noise (``exact`` or the paper's closed
    forms), with the end-to-end ε of both under every analysis at ``delta`` — the numbers
    of the paper's Tables 1, 2 and 4 (``privtab safetab plan --moe``)."""
    kw: dict[str, Any] = {
        "stability": stability,
        "gamma": Fraction(str(gamma)),
        "calibration": calibration,
    }
    geo = ReleasePlan.from_moe_targets(moes, privacy_defn="puredp", **kw)
    dg = ReleasePlan.from_moe_targets(moes, privacy_defn="zcdp", **kw)
    a, b = analyse(geo, delta, pld_grid=pld_grid), analyse(dg, delta, pld_grid=pld_grid)
    levels = [
        {
            "moe": m,
            "geometric_eps_step2": float(g.stage2.parameter) * g.stability,
            "geometric_eps_total": float(g.budget),
            "geometric_moe_exact": g.stage2.moe95,
            "dgauss_rho_step2": float(d.stage2.parameter) * d.stability,
            "dgauss_rho_total": float(d.budget),
            "dgauss_moe_exact": d.stage2.moe95,
        }
        for m, g, d in zip(moes, geo.levels, dg.levels, strict=True)
    ]
    return {
        "model": "SafeTab paper App. F: one level per stage-2 MOE target",
        "calibration": calibration,
        "stability": stability,
        "gamma": gamma,
        "levels": levels,
        "totals": {
            "geometric_eps": float(geo.total_budget),
            "dgauss_rho": float(dg.total_budget),
        },
        "epsilon": {
            "geometric_pure": a["pure"]["epsilon"],
            "geometric_rdp": a["rdp"]["epsilon"],
            "geometric_rdp_paper_invalid": a["rdp_paper"]["epsilon"],
            "geometric_pld": a["pld"]["epsilon"],
            "dgauss_zcdp_analytic": b["zcdp_analytic"]["epsilon"],
            "dgauss_zcdp_grid": b["zcdp_grid"]["epsilon"],
            "dgauss_zcdp_optimal": b["zcdp_optimal"]["epsilon"],
            "dgauss_pld": b["pld"]["epsilon"],
        },
        "analyses": {"geometric": a, "dgauss": b},
        "delta": delta,
    }
