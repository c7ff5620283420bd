"""SafeTab-H's plan before any data: queries, budgets, noise, MOE and guarantees.

:func:`plan` gives a run's :class:`~privtab.safetab_h.queries.HPlan`; :func:`plan_summary`
is ``privtab safetab-h plan``: per query (table × geography × iteration level) the budget,
the stability, σ² (or the geometric scale) and the exact 95 % MOE of every published cell
of every statistic level; per run the guarantee per household under every analysis (zCDP
conversions or pure ε and RDP, and the privacy-loss distribution); and the guarantee per
person of DHC-A and DHC-B together, with SafeTab-P's plan (default: the packaged 2020
production NMFv7). Everything here is public: config and reference files only.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

from privtab.safetab_h.queries import HPlan

__all__ = ["config_and_reference", "plan", "plan_summary", "plan_tables"]


def config_and_reference(config: str | Path | None) -> tuple[Any, Any]:
    from privtab.data import read_reference
    from privtab.safetab_h.config import read_config
    from privtab.safetab_h.inputs import resolve_config_path

    path = resolve_config_path(config)
    return read_config(path), read_reference(path.parent)


def plan(config: str | Path | None = None, scope: str = "US") -> HPlan:
    """The plan of one run (``US`` or ``PR``) of a SafeTab-H config (a ``config.json`` or
    a parameters folder; default: the packaged 2020 production NMFv5)."""
    from privtab.errors import UsageError

    cfg, ref = config_and_reference(config)
    runs = {s.value: s for s in cfg.scopes}
    if scope.upper() not in runs:
        raise UsageError(f"the config does not run {scope!r} (it runs {', '.join(runs)})")
    return HPlan.from_config(cfg, ref, runs[scope.upper()])


def _persons(config_p: str | Path | None) -> tuple[Any, str]:
    """SafeTab-P's guarantee of the run with the largest one (its exact ρ or ε)."""
    from privtab.accounting.exact import ExactGuarantee
    from privtab.data import read_config, read_reference
    from privtab.data.inputs import resolve_config_path
    from privtab.tabulate.plan import ReleasePlan

    path = resolve_config_path(config_p)
    cfg = read_config(path)
    ref = read_reference(path.parent)
    plans = [ReleasePlan.from_config(cfg, ref, s) for s in cfg.scopes]
    return ExactGuarantee.parallel(p.exact_guarantee() for p in plans), str(path)


def plan_summary(
    config: str | Path | None = None,
    *,
    config_p: str | Path | None = None,
    delta: float = 1e-10,
    pld_grid: float = 1e-3,
) -> dict[str, Any]:
    """``privtab safetab-h plan``: every run of the config (module docstring)."""
    from privtab.accounting.exact import ExactGuarantee
    from privtab.safetab_h.privacy import analyse, person_guarantee_json

    cfg, ref = config_and_reference(config)
    runs: dict[str, Any] = {}
    plans = []
    for scope in cfg.scopes:
        p = HPlan.from_config(cfg, ref, scope)
        plans.append(p)
        runs[scope.value] = {
            "guarantee_per_household": p.exact_guarantee().to_json(),
            "privacy": analyse(p, delta, pld_grid=pld_grid),
            "queries": [q.to_dict() for q in p.queries],
        }
    household = ExactGuarantee.parallel(p.exact_guarantee() for p in plans)
    persons, source = _persons(config_p)
    return {
        "config": cfg.source,
        "privacy_defn": cfg.privacy_defn,
        "delta": delta,
        "guarantee_per_household": household.to_json(),
        "person_level": person_guarantee_json(
            household, persons, f"SafeTab-P plan {source}", delta
        ),
        "runs": runs,
        "statistic_levels": "chosen from the public T1 count: deterministic, no budget",
        "private": True,
    }


def plan_tables(summary: dict[str, Any]) -> tuple[str, list[Any]]:
    """The human form: a headline and one table of queries per run."""
    from privtab.accounting.exact import exact_or_up
    from privtab.report import round_up_sig
    from privtab.report.text import table
    from privtab.safetab_h.privacy import PERSON_FACTOR

    person = summary["person_level"]
    g = summary["guarantee_per_household"]
    unit = "rho" if "zcdp" in g else "epsilon"
    body = g["zcdp"] if "zcdp" in g else g["pure"]
    hh_exact = body[f"{unit}_exact"]
    per_person = next(iter(person["guarantee"].values()))
    pp_exact = per_person[f"{unit}_exact"]
    head = (
        f"per household: {unit} = {exact_or_up(Fraction(hh_exact))} (exact {hh_exact}); "
        f"per person (DHC-A + DHC-B, {person['formula']}; "
        f"{person['persons_source']}): {unit} = {exact_or_up(Fraction(pp_exact))} (exact "
        f"{pp_exact}) — epsilon {round_up_sig(person['epsilon'], 4)} at delta "
        f"{person['delta']:g} ({PERSON_FACTOR} x a household's part)"
    )
    tables = []
    for scope, run in summary["runs"].items():
        rows = []
        for q in run["queries"]:
            moe = q["moe95"]
            worst = max(moe, key=lambda t: len(moe[t]))
            rows.append(
                (
                    q["query"],
                    f"{q['budget']:g}",
                    str(q["stability"]),
                    f"{q['cell']['noise_scale']:.4g}",
                    str(q["cell"]["moe95"]),
                    ", ".join(f"{t}:{m['0']}" for t, m in moe.items()),
                    " ".join(f"{c}:{v}" for c, v in moe[worst].items()),
                )
            )
        eps = {k: v["epsilon"] for k, v in run["privacy"].items()}
        title = f"{scope} run — epsilon(delta={summary['delta']:g}): " + ", ".join(
            f"{k} {v:.4g}" for k, v in eps.items()
        )
        cols = ("query", "budget", "s", "sigma2/scale", "MOE cell", "MOE total", "MOE per cell")
        tables.append(table(title, cols, rows))
    return head, tables
