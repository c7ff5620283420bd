"""ε at a given δ by every applicable conversion — what ``privtab account`` prints."""

from __future__ import annotations

from privtab.accounting._args import guarantee_arg
from privtab.accounting.conversions import (
    gdp_epsilon,
    rdp_epsilon_order,
    zcdp_epsilon,
    zcdp_optimal_order,
)
from privtab.accounting.exact import ExactGuarantee
from privtab.accounting.guarantees import GDP, RDP, ZCDP, ApproxDP, Guarantee, PureDP

__all__ = ["epsilon_by_method"]


def epsilon_by_method(g: Guarantee | ExactGuarantee, delta: float) -> dict[str, dict[str, float]]:
    """For ``g``, ``{method: {"epsilon": ε, "alpha": α*}}`` at ``delta``.

    zCDP: ``analytic``, ``optimal``, ``grid``; RDP: ``optimal``, ``mironov``, ``grid``;
    GDP: ``exact``; pure DP: ``pure``; (ε, δ): ``approx``. ``alpha`` is the order that
    achieves the bound (NaN where there is none).
    """
    g = guarantee_arg(g, "epsilon_by_method")
    nan = float("nan")
    if isinstance(g, PureDP):
        return {"pure": {"epsilon": g.epsilon, "alpha": nan}}
    if isinstance(g, ApproxDP):
        return {"approx": {"epsilon": g.epsilon, "alpha": nan}}
    if isinstance(g, GDP):
        return {"exact": {"epsilon": float(gdp_epsilon(g.mu, delta)), "alpha": nan}}
    if isinstance(g, ZCDP):
        out = {
            m: {"epsilon": float(zcdp_epsilon(g.rho, delta, m)), "alpha": nan}
            for m in ("analytic", "optimal", "grid")
        }
        out["optimal"]["alpha"] = float(zcdp_optimal_order(g.rho, delta))
        return out
    assert isinstance(g, RDP)
    res: dict[str, dict[str, float]] = {}
    for m in ("optimal", "mironov", "grid"):
        eps, alpha = rdp_epsilon_order(g, delta, m)  # type: ignore[arg-type]
        res[m] = {"epsilon": eps, "alpha": alpha}
    return res
