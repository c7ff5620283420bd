"""ε at a given δ by every applicable conversion — what ``privtab account`` prints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from privtab.accounting._args import guarantee_arg
from privtab.accounting.conversions import (
    gdp_epsilon,
    rdp_epsilon_order,
    zcdp_epsilon,
    zcdp_optimal_order,
)
from privtab.accounting.exact import ExactGuarantee
from privtab.accounting.guarantees import GDP, RDP, ZCDP, ApproxDP, Guarantee, PureDP

if TYPE_CHECKING:
    from privtab.report.text import Table

__all__ = ["account", "account_given", "account_table", "epsilon_by_method"]


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


def account_given(
    given: Mapping[str, float | None], delta: float, *, compose: int = 1, group: int = 1
) -> dict[str, Any]:
    """``privtab account``: :func:`account` of the one guarantee among ``given`` (kind →
    value, ``None`` when not given). Raises :class:`privtab.errors.UsageError` unless
    exactly one is given, or for a ``delta`` outside (0, 1)."""
    from privtab._options import open_unit
    from privtab.errors import UsageError

    chosen = [(k, v) for k, v in given.items() if v is not None]
    if len(chosen) != 1:
        raise UsageError("give exactly one of --zcdp, --pure, --gdp, --rdp-geometric")
    open_unit("--delta", delta)
    return account(*chosen[0], delta, compose=compose, group=group)


def account(
    kind: str, value: float, delta: float, *, compose: int = 1, group: int = 1
) -> dict[str, Any]:
    """What ``privtab account`` reports: the guarantee ``kind`` (``zcdp``, ``pure``, ``gdp``
    or ``rdp_geometric`` — the two-sided geometric mechanism with pure-DP parameter
    ``value``, whose exact RDP curve is used) for ``group`` records, composed ``compose``
    times, as ε at ``delta`` by every applicable conversion (:func:`epsilon_by_method`).
    Raises ``ValueError`` on a parameter out of range."""
    from privtab.accounting.composition import compose_by_degree, group_privacy
    from privtab.accounting.curves import geometric_rdp

    if not 0 < delta < 1:
        raise ValueError(f"delta must lie strictly between 0 and 1, got {delta}")
    g: Guarantee
    if kind == "rdp_geometric":
        # K records change every count by up to K: the exact divergence at shift K.
        g = geometric_rdp(value * group, sensitivity=group)
    else:
        kinds: dict[str, type[ZCDP | PureDP | GDP]] = {"zcdp": ZCDP, "pure": PureDP, "gdp": GDP}
        base: Guarantee = kinds[kind](value)
        g = group_privacy(base, group) if group > 1 else base
    if compose > 1:
        g = compose_by_degree(g, compose)
    table = epsilon_by_method(g, delta)
    out: dict[str, Any] = {
        "input": {kind: value, "compose": compose, "group": group},
        "guarantee": str(g),
        "delta": delta,
        "epsilon": {m: r["epsilon"] for m, r in table.items()},
        "alpha": {m: r["alpha"] for m, r in table.items()},
    }
    if kind == "rdp_geometric":
        out["epsilon"]["pure"] = value * group * compose
    return out


def account_table(result: dict[str, Any]) -> Table:
    """The human form of :func:`account`: ε (and the optimal order) by method."""
    from privtab.report import round_up_sig
    from privtab.report.text import table

    rows = []
    for m, eps in result["epsilon"].items():
        a = result["alpha"].get(m, float("nan"))
        rows.append((m, round_up_sig(float(eps), 7), "" if a != a else f"{a:.4f}"))
    title = f"{result['guarantee']}  at δ = {result['delta']:g} (ε rounded up)"
    return table(title, ("method", "ε", "order α*"), rows)
