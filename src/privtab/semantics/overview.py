"""What ``privtab semantics`` and ``privtab semantics topdown`` compute and show.

:func:`guarantee_overview` gathers, for one guarantee (and, with a privtab release, each
of its runs' worst-case persons), the maximum power of an attacker's test by every bound,
the posterior-ratio tail bounds and the prior-to-posterior bounds
(:mod:`privtab.semantics.summary`); :func:`topdown_overview` the fine-grained accounting
of a per-query allocation (:mod:`privtab.semantics.allocation`). Both return JSON-ready
results; :func:`overview_tables` and :func:`topdown_tables` their human form.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privtab.errors import UsageError
from privtab.report import round_up_sig

if TYPE_CHECKING:
    from privtab.accounting.guarantees import Guarantee
    from privtab.report.text import Table
    from privtab.semantics.allocation import Allocation, Concern
    from privtab.semantics.bayes import PosteriorBound
    from privtab.semantics.release import ReleaseRun

__all__ = [
    "NOT_PRIVATE_WARNING",
    "chosen_guarantee",
    "guarantee_overview",
    "overview_tables",
    "parse_guarantee",
    "person_level",
    "person_level_line",
    "release_runs",
    "select_concerns",
    "topdown_overview",
    "topdown_tables",
]

LOG = logging.getLogger("privtab.semantics")
NO_PRIOR_BOUND = "prior-to-posterior: no bound for (ε, δ)-DP without further assumptions"
NOT_PRIVATE_WARNING = (
    "this release is not private (seeded or noise-off test run): its counts carry no "
    "protection; the bounds below describe its plan only"
)


def parse_guarantee(kind: str, value: Any) -> Guarantee:
    """The guarantee an option names: ``pure`` ε, ``approx`` "ε,δ", ``zcdp`` ρ, ``gdp`` μ,
    ``rdp-file`` (a Rényi curve file) or ``release`` (a release folder or its
    ``release.json``). Raises ``ValueError`` naming the option."""
    from privtab.accounting import GDP, ZCDP, ApproxDP, PureDP
    from privtab.semantics.release import ReleaseError, load_rdp_file, load_release_guarantee

    try:
        if kind == "rdp-file":
            return load_rdp_file(value)
        if kind == "release":
            return load_release_guarantee(value)
    except ReleaseError as exc:
        raise ValueError(str(exc)) from None
    try:
        if kind == "approx":
            parts = [p.strip() for p in str(value).split(",")]
            if len(parts) != 2:
                raise ValueError(f"expects 'EPSILON,DELTA', got {value!r}")
            try:
                e, d = float(parts[0]), float(parts[1])
            except ValueError:
                raise ValueError(f"expects two numbers 'EPSILON,DELTA', got {value!r}") from None
            return ApproxDP(e, d)
        kinds: dict[str, type[PureDP | ZCDP | GDP]] = {"pure": PureDP, "zcdp": ZCDP, "gdp": GDP}
        return kinds[kind](value)
    except ValueError as exc:
        raise ValueError(f"--{kind}: {exc}") from None


def chosen_guarantee(given: Mapping[str, Any]) -> Guarantee:
    """The one guarantee given among the options ``given`` (flag → value, ``None`` when
    not given: ``--pure``, ``--approx``, ``--zcdp``, ``--gdp``, ``--rdp-file``,
    ``--release``). Raises :class:`privtab.errors.UsageError` unless exactly one is given
    and valid."""
    chosen = [k for k, v in given.items() if v is not None]
    if len(chosen) != 1:
        raise UsageError(
            "give exactly one of --pure E, --approx E,D, --zcdp R, --gdp M, --rdp-file F, "
            f"--release FILE (got {', '.join(chosen) or 'none'}); "
            "or use 'privtab semantics topdown'"
        )
    try:
        return parse_guarantee(chosen[0][2:], given[chosen[0]])
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def release_runs(path: str | None) -> tuple[dict[str, Any], list[ReleaseRun], bool, str]:
    """The release document at ``path``, its runs (each with its guarantee and plan; none
    when ``path`` is not a privtab release), whether it is private (warned loudly when
    not) and its name as the user gave it (the folder; ``release.json`` dropped). Without
    a ``path``: nothing, private. Raises :class:`privtab.errors.UsageError` naming
    ``--release`` for an unreadable release."""
    if path is None:
        return {}, [], True, ""
    from privtab.semantics.release import ReleaseError, load_release_runs, load_release_status

    try:
        _, private = load_release_status(path)
        doc, runs = load_release_runs(path)
    except ReleaseError as exc:
        raise UsageError(f"--release: {exc}") from None
    if not private:
        LOG.warning(NOT_PRIVATE_WARNING.upper())
    if runs:
        LOG.info("computing each run's privacy-loss distribution ...")
    name = Path(path).parent if Path(path).name == "release.json" else Path(path)
    return doc, list(runs), private, str(name)


def person_level(doc: dict[str, Any]) -> dict[str, Any] | None:
    """What a release means per person when DHC-A and DHC-B of one population are both
    released: a SafeTab-H release states it (``person_level``: ρ_P + 2ρ_H, a person
    changing at most one household record, :mod:`privtab.safetab_h.privacy`); a SafeTab-P
    release gets the rule; ``None`` for anything else."""
    from privtab.release.document import KIND, KIND_H

    if doc.get("kind") == KIND_H and isinstance(doc.get("person_level"), dict):
        found = dict(doc["person_level"])
        found["unit_of_guarantee"] = "household (one household record added or removed)"
        return found
    if doc.get("kind") == KIND:
        return {
            "guarantee": doc.get("guarantee"),
            "formula": "rho_P + 2 rho_H",
            "complete": False,
            "note": "per person for DHC-A alone; if DHC-B (SafeTab-H) of the same population "
            "is released too, a person's guarantee is rho_P + 2 rho_H (pure: eps_P + "
            "2 eps_H): see the DHC-B release's person_level",
        }
    return None


def person_level_line(found: dict[str, Any] | None) -> list[str]:
    """The line ``privtab semantics --release`` prints about the person-level guarantee."""
    if found is None:
        return []
    g = found.get("guarantee") or {}
    body = g.get("zcdp") or g.get("pure") or {}
    exact = body.get("rho_exact") or body.get("epsilon_exact")
    if "note" in found:
        return [f"Per person: {found['note']}."]
    part = "" if found.get("complete") else " (DHC-B's part: add DHC-A's guarantee)"
    eps = found.get("epsilon")
    at = "" if not isinstance(eps, float) else f", ε = {eps:.4g} at δ = {found.get('delta'):g}"
    return [
        f"Per person, DHC-A and DHC-B together ({found.get('formula')}): "
        f"{'ρ' if 'zcdp' in g else 'ε'} = {exact}{at}{part}; this release's own guarantee "
        "below is per household."
    ]


def _lists(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in d.items()}


def _as_rho(g: Any) -> float:
    from privtab.accounting import ZCDP, PureDP

    if isinstance(g, ZCDP):
        return g.rho
    if isinstance(g, PureDP):
        return g.epsilon**2 / 2
    return math.inf


def guarantee_overview(
    g: Guarantee,
    levels: Sequence[float],
    ratios: Sequence[float],
    *,
    runs: Sequence[ReleaseRun] = (),
    dg_queries: int = 1,
    priors: Sequence[float] = (0.05, 0.4, 0.75),
    distance: int = 1,
    bound: PosteriorBound = "coherent",
    confidence: float = 0.95,
    private: bool = True,
) -> dict[str, Any]:
    """Power, posterior and prior-to-posterior bounds for ``g`` (semantics seed §§4–6);
    with ``runs`` (a privtab release) the power against each run's worst-case person from
    its privacy-loss distribution. Raises ``ValueError`` on parameters out of range."""
    from privtab.accounting.conversions import epsilon_at
    from privtab.semantics.summary import (
        BOUNDS,
        describe_guarantee,
        posterior_bounds,
        power_bounds,
        prior_posterior_bounds,
        tightest_power,
    )

    pw = power_bounds(g, levels, dg_queries=dg_queries)
    post = posterior_bounds(g, ratios)
    p2p = prior_posterior_bounds(g, priors, distance=distance, bound=bound, confidence=confidence)
    run_power = {r.scope: r.pld.power(levels) for r in runs}
    if runs:  # the run with the largest guarantee: the release's worst-case person
        pw["release_pld"] = run_power[max(runs, key=lambda r: _as_rho(r.guarantee)).scope]
    eps_at: dict[str, float | None] = {}
    for d in (1e-5, 1e-10):
        try:
            eps_at[f"{d:g}"] = epsilon_at(g, d)
        except ValueError:
            eps_at[f"{d:g}"] = None
    out: dict[str, Any] = {
        **({} if private else {"private": False, "warning": NOT_PRIVATE_WARNING}),
        "guarantee": describe_guarantee(g),
        "power": {"levels": list(levels), **_lists(pw)},
        "tightest_bound": tightest_power(pw).tolist(),
        "bounds": {
            k: {
                "kind": BOUNDS[k].kind,
                "description": BOUNDS[k].description,
                "source": BOUNDS[k].source,
            }
            for k in pw
        },
        "posterior": _lists(post),
        "prior_to_posterior": None if p2p is None else _lists(p2p),
        "epsilon_at_delta": eps_at,
    }
    if runs:
        out["runs"] = {
            r.scope: {
                "name": r.name,
                "guarantee": describe_guarantee(r.guarantee),
                "release_pld": run_power[r.scope].tolist(),
                "epsilon_at_delta": {
                    k: v.get("epsilon") for k, v in r.extra.get("privacy", {}).items()
                },
            }
            for r in runs
        }
    if "discrete_gaussian" in pw:
        out["bounds"]["discrete_gaussian"]["queries"] = dg_queries
    return out


def _run_line(r: ReleaseRun) -> str:
    from privtab.semantics.report import guarantee_words

    best = min(
        (
            (float(v["epsilon"]), float(v.get("delta", 0.0)))
            for v in r.extra.get("privacy", {}).values()
            if v.get("valid", True) is not False and isinstance(v.get("epsilon"), int | float)
        ),
        default=None,
    )
    eps = "" if best is None else f"; ε ≤ {round_up_sig(best[0], 4)} at δ = {best[1]:g}"
    return f"  {r.name}: {guarantee_words(r.guarantee, r.exact)}{eps}"


def overview_tables(
    ov: dict[str, Any],
    g: Guarantee,
    runs: Sequence[ReleaseRun] = (),
    name: str = "",
    exact: Fraction | None = None,
) -> tuple[list[str], list[Table]]:
    """The human form of :func:`guarantee_overview`: lines about the runs, then tables
    (``exact``: the release's exact ρ or ε, printed exactly or rounded up)."""
    from privtab.report.text import table
    from privtab.semantics.report import guarantee_words
    from privtab.semantics.summary import BOUNDS, POSTERIOR_ROWS

    private = ov.get("private", True)
    lines = [] if private else [f"NOT PRIVATE: {NOT_PRIVATE_WARNING}"]
    title = guarantee_words(g, exact) + ("" if private else " (NOT PRIVATE release)")
    pw = {k: v for k, v in ov["power"].items() if k not in ("levels", "release_pld")}
    labels = {k: BOUNDS[k].label for k in pw}
    if runs:
        title = f"the release {name}: {title}"
        lines.append(
            "Runs of this release (each person is in exactly one run; 'US: worst case' and "
            "'PR: worst case' below are the power against each run's worst-case person):"
        )
        lines += [_run_line(r) for r in runs]
        for scope, run in ov["runs"].items():
            pw[scope], labels[scope] = run["release_pld"], f"{scope}: worst case"
    lv = ov["power"]["levels"]
    tables = [
        table(
            f"Maximum power of a test against {title}",
            ("level α", *labels.values()),
            [(f"{a:g}", *[f"{float(pw[k][i]):.4f}" for k in pw]) for i, a in enumerate(lv)],
            left=0,
        )
    ]
    post = ov["posterior"]
    keys = [k for k in post if k not in ("ratios", "epsilons")]
    tables.append(
        table(
            "Probability that a posterior moves by more than the ratio",
            ("ratio", "ε = ln ratio", *[POSTERIOR_ROWS[k].label for k in keys]),
            [
                (
                    f"{float(r):g}",
                    f"{float(post['epsilons'][i]):.4f}",
                    *[f"{float(post[k][i]):.4g}" for k in keys],
                )
                for i, r in enumerate(post["ratios"])
            ],
            left=0,
        )
    )
    p2p = ov["prior_to_posterior"]
    if p2p is None:  # said under the last table
        tables[-1] = replace(tables[-1], notes=(*tables[-1].notes, NO_PRIOR_BOUND))
        return lines, tables
    tables.append(
        table(
            f"Posterior of an event with prior π ({p2p['bound']} bound, distance "
            f"{p2p['distance']}, holds {p2p['holds']})",
            ("prior π", "lowest posterior", "highest posterior"),
            [
                (f"{prior:g}", f"{p2p['lower'][i]:.4g}", f"{p2p['upper'][i]:.4g}")
                for i, prior in enumerate(p2p["priors"])
            ],
            left=0,
        )
    )
    return lines, tables


def select_concerns(
    alloc: Allocation, scenario: str | None, concern: str | None, within: str | None
) -> list[Concern]:
    """The named scenarios (``A,B``), plus a custom concern (attributes, ``within`` a
    level), or every scenario of the allocation. Raises ``AllocationError``."""
    from privtab.semantics.allocation import AllocationError

    out: list[Concern] = []
    for n in [p.strip() for p in (scenario or "").split(",") if p.strip()]:
        match = [k for k in alloc.scenarios if k.lower() == n.lower()]
        if not match:
            known = ", ".join(alloc.scenarios) or "none in this allocation"
            raise AllocationError(f"--scenario: unknown scenario {n!r}; known: {known}")
        out.append(alloc.scenarios[match[0]])
    if concern is not None or within is not None:
        try:
            c = alloc.concern((concern or "").split(","), within)
        except AllocationError as exc:
            raise AllocationError(f"--concern/--within: {exc}") from None
        out.append(replace(c, name="custom", description=c.label()))
    if not out:
        if not alloc.scenarios:
            raise AllocationError(
                "this allocation defines no scenarios: give --concern ATTRS and/or --within"
            )
        out = list(alloc.scenarios.values())
    return out


def _concern_detail(
    alloc: Allocation, c: Concern, levels: Sequence[float], ratios: Sequence[float]
) -> dict[str, Any]:
    from privtab.accounting import ZCDP
    from privtab.semantics.bayes import (
        posterior_ratio_tail_arbitrary_prior,
        posterior_ratio_tail_rest_known,
    )
    from privtab.semantics.pbdp import pbdp_delta_gdp
    from privtab.semantics.power import gaussian_power
    from privtab.semantics.renyi import zcdp_power

    rho = float(alloc.concern_rho(c))
    g, eps = ZCDP(rho), np.log(np.asarray(ratios))
    return {
        "description": c.description,
        "concern": c.label(),
        "rho": rho,
        "affected_cells": len(alloc.affected_cells(c)),
        "power": {
            "levels": list(levels),
            "gaussian": np.asarray(gaussian_power(rho, levels)).tolist(),
            "zcdp_bound": np.asarray(zcdp_power(rho, levels)).tolist(),
        },
        "posterior": {
            "ratios": list(ratios),
            "rest_known": np.asarray(posterior_ratio_tail_rest_known(g, eps)).tolist(),
            "arbitrary_prior": np.asarray(posterior_ratio_tail_arbitrary_prior(g, eps)).tolist(),
            "gaussian_pbdp": np.asarray(pbdp_delta_gdp(math.sqrt(2 * rho), eps)).tolist(),
        },
    }


def _proportions(alloc: Allocation) -> dict[str, Any] | None:
    """The published form (Tables 3–5) as exact fraction strings, when the file has it."""
    if not alloc.proportions:
        return None
    return {
        u.name: {
            "rho": str(u.rho),
            "geography": {lv: str(v) for lv, v in u.geography.items()},
            "queries": {q: {lv: str(v) for lv, v in s.items()} for q, s in u.queries.items()},
        }
        for u in alloc.proportions
    }


def topdown_overview(
    alloc: Allocation, chosen: Sequence[Concern], levels: Sequence[float], ratios: Sequence[float]
) -> dict[str, Any]:
    """ρ per block, per level, per attribute, and each concern's ρ with power and
    posterior bounds (semantics seed §7, the 2020 TopDown allocation); warns when the
    allocation spends no budget."""
    details = {c.name: _concern_detail(alloc, c, levels, ratios) for c in chosen}
    per_block = alloc.rho_per_block()
    if per_block["total"] == 0:
        LOG.warning("the allocation spends no budget at all")
    return {
        "allocation": {"name": alloc.name, "source": alloc.source, "levels": list(alloc.levels)},
        "rho_per_block": float(per_block["total"]),
        "rho_per_block_by_universe": {u: float(v) for u, v in per_block.items() if u != "total"},
        "rho_by_level": {
            u: {k: float(v) for k, v in d.items()} for u, d in alloc.rho_by_level().items()
        },
        "rho_by_attribute": {a: float(v) for a, v in alloc.rho_by_attribute().items()},
        "proportions": _proportions(alloc),
        "scenarios": {name: d["rho"] for name, d in details.items()},
        "details": details,
    }


def topdown_tables(alloc: Allocation, ov: dict[str, Any], levels: Sequence[float]) -> list[Table]:
    """The human form of :func:`topdown_overview`."""
    from privtab.report.text import table

    us = list(ov["rho_by_level"])
    rows = [(lv, *[round_up_sig(ov["rho_by_level"][u][lv]) for u in us]) for lv in alloc.levels]
    rows.append(("per block", *[round_up_sig(ov["rho_per_block_by_universe"][u]) for u in us]))
    first = table(
        f"ρ by level — {alloc.name}",
        ("level", *us),
        rows,
        notes=[f"total ρ per block: {round_up_sig(ov['rho_per_block'])}"],
    )
    concerns = [
        (
            name, d["description"] or d["concern"], round_up_sig(d["rho"]),
            *[f"{g:.3f} / {z:.3f}"
              for g, z in zip(d["power"]["gaussian"], d["power"]["zcdp_bound"], strict=True)],
        )
        for name, d in ov["details"].items()
    ]  # fmt: skip
    second = table(
        "ρ and power per concern (Gaussian / zCDP bound)",
        ("concern", "protects", "ρ", *[f"α={a:g}" for a in levels]),
        concerns,
        left=2,
    )
    return [first, second]
