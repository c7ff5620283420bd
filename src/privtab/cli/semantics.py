"""``privtab semantics``: what a privacy guarantee or a budget allocation protects against.

``privtab semantics --zcdp 2.63`` prints the maximum power of an attacker's test at each
significance level (``--levels``) by every applicable bound, and bounds on the
probability that a posterior moves by more than each ratio (``--ratios``); ``--html``
writes a self-contained report with figures. ``privtab semantics topdown`` does the
fine-grained accounting of a per-query allocation (the 2020 TopDown one by default).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import typer

from privtab.cli._common import fail, print_json, warn

if TYPE_CHECKING:
    from privtab.accounting.guarantees import Guarantee
    from privtab.semantics.allocation import Allocation, Concern

DEFAULT_LEVELS = "0.01,0.05,0.1"
DEFAULT_RATIOS = "1.25,2,5,10,100"
DEFAULT_PRIORS = "0.05,0.4,0.75"


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        help="What a privacy guarantee or budget allocation protects against.",
        invoke_without_command=True,
        no_args_is_help=False,
        add_completion=False,
    )
    sub.callback(invoke_without_command=True)(semantics)
    sub.command("topdown")(topdown)
    app.add_typer(sub, name="semantics")


def _floats(text: str, option: str, *, lo: float, hi: float, open_lo: bool = False) -> list[float]:
    out: list[float] = []
    for part in text.split(","):
        p = part.strip()
        if not p:
            continue
        try:
            v = float(p)
        except ValueError:
            fail(f"{option}: {p!r} is not a number")
        if math.isnan(v) or v < lo or v > hi or (open_lo and v == lo):
            side = "(" if open_lo else "["
            fail(f"{option}: {p!r} must lie in {side}{lo:g}, {hi:g}]")
        out.append(v)
    if not out:
        fail(f"{option}: give at least one value")
    return out


def _guarantee(
    pure: float | None,
    approx: str | None,
    zcdp: float | None,
    gdp: float | None,
    rdp_file: str | None,
    release: str | None,
) -> Guarantee:
    from privtab.accounting import GDP, ZCDP, ApproxDP, PureDP
    from privtab.semantics.release import ReleaseError, load_rdp_file, load_release_guarantee

    given = {
        "--pure": pure,
        "--approx": approx,
        "--zcdp": zcdp,
        "--gdp": gdp,
        "--rdp-file": rdp_file,
        "--release": release,
    }
    chosen = [k for k, v in given.items() if v is not None]
    if len(chosen) != 1:
        fail(
            "give exactly one of --pure E, --approx E,D, --zcdp R, --gdp M, --rdp-file F, "
            f"--release FILE (got {', '.join(chosen) or 'none'}); "
            "or use 'privtab semantics topdown'"
        )
    try:
        if pure is not None:
            return PureDP(pure)
        if zcdp is not None:
            return ZCDP(zcdp)
        if gdp is not None:
            return GDP(gdp)
        if approx is not None:
            parts = [p.strip() for p in approx.split(",")]
            if len(parts) != 2:
                fail(f"--approx expects 'EPSILON,DELTA', got {approx!r}")
            try:
                e, d = float(parts[0]), float(parts[1])
            except ValueError:
                fail(f"--approx expects two numbers 'EPSILON,DELTA', got {approx!r}")
            return ApproxDP(e, d)
        if rdp_file is not None:
            return load_rdp_file(rdp_file)
        assert release is not None
        return load_release_guarantee(release)
    except ReleaseError as exc:
        fail(str(exc))
    except ValueError as exc:
        fail(f"{chosen[0]}: {exc}")


def _release_runs(path: str | None) -> tuple[dict[str, Any], list[Any]]:
    """The release document and its runs (United States, Puerto Rico), each with its
    guarantee and plan; no runs when ``path`` is not a privtab release."""
    if path is None:
        return {}, []
    from privtab.semantics.release import ReleaseError, load_release_runs

    try:
        doc, runs = load_release_runs(path)
    except ReleaseError as exc:
        fail(f"--release: {exc}")
    if runs:
        typer.echo("privtab: computing each run's privacy-loss distribution ...", err=True)
    return doc, runs


def _release_name(path: str) -> str:
    """The release as the user named it (its folder; ``release.json`` dropped)."""
    from pathlib import Path

    p = Path(path)
    return str(p.parent if p.name == "release.json" else p)


def _lists(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in d.items()}


def semantics(
    ctx: typer.Context,
    pure: float | None = typer.Option(None, "--pure", help="Pure ε-DP with this ε."),
    approx: str | None = typer.Option(None, "--approx", help="(ε, δ)-DP, given as 'E,D'."),
    zcdp: float | None = typer.Option(None, "--zcdp", help="ρ-zCDP with this ρ."),
    gdp: float | None = typer.Option(None, "--gdp", help="μ-GDP with this μ."),
    rdp_file: str | None = typer.Option(
        None, "--rdp-file", help="Rényi curve: JSON {alphas, taus} or CSV alpha,tau."
    ),
    release: str | None = typer.Option(
        None,
        "--release",
        help="A release folder or release.json: its guarantee and, for a privtab release, "
        "every run with its worst-case person.",
    ),
    levels: str = typer.Option(DEFAULT_LEVELS, "--levels", help="Significance levels."),
    ratios: str = typer.Option(DEFAULT_RATIOS, "--ratios", help="Posterior ratios (> 1)."),
    dg_queries: int = typer.Option(
        1, "--dg-queries", min=1, help="zCDP: discrete Gaussian queries sharing the budget."
    ),
    priors: str = typer.Option(
        DEFAULT_PRIORS, "--priors", help="Prior probabilities of an event (prior-to-posterior)."
    ),
    distance: int = typer.Option(
        1, "--distance", min=0, help="Group distance d*: records the event may depend on."
    ),
    posterior_bound: str = typer.Option(
        "coherent",
        "--posterior-bound",
        help="Prior-to-posterior form: coherent (default), raw (Thm 6.4 as printed), odds.",
    ),
    confidence: float = typer.Option(
        0.95, "--confidence", help="zCDP/RDP: probability with which the posterior bounds hold."
    ),
    html_out: str | None = typer.Option(None, "--html", help="Write an HTML report here."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Power and Bayesian bounds for one guarantee, as a table, JSON or HTML report.

    Example: privtab semantics --zcdp 2.63 --levels 0.01,0.05,0.1 --html report.html
    """
    if ctx.invoked_subcommand is not None:
        return
    from privtab.semantics.bayes import POSTERIOR_BOUNDS

    g = _guarantee(pure, approx, zcdp, gdp, rdp_file, release)
    private = _release_private(release)
    lv = _floats(levels, "--levels", lo=0.0, hi=1.0)
    rt = _floats(ratios, "--ratios", lo=1.0, hi=1e300, open_lo=True)
    pr = _floats(priors, "--priors", lo=0.0, hi=1.0)
    if posterior_bound not in POSTERIOR_BOUNDS:
        known = ", ".join(POSTERIOR_BOUNDS)
        fail(f"--posterior-bound must be one of {known}, got {posterior_bound!r}")
    if not 0 < confidence < 1:
        fail(f"--confidence must lie strictly between 0 and 1, got {confidence!r}")

    from privtab.accounting.conversions import epsilon_at
    from privtab.semantics.summary import (
        BOUNDS,
        describe_guarantee,
        posterior_bounds,
        power_bounds,
        prior_posterior_bounds,
        tightest_power,
    )

    try:
        pw = power_bounds(g, lv, dg_queries=dg_queries)
        post = posterior_bounds(g, rt)
        p2p = prior_posterior_bounds(
            g,
            pr,
            distance=distance,
            bound=posterior_bound,
            confidence=confidence,
        )
    except ValueError as exc:
        fail(str(exc))
    doc, runs = _release_runs(release)
    run_power = {r.scope: r.pld.power(lv) for r in runs}
    if runs:  # the run with the largest guarantee: the release's worst-case person
        worst = max(runs, key=lambda r: _as_rho(r.guarantee))
        pw["release_pld"] = run_power[worst.scope]
    eps_at: dict[str, float | None] = {}
    for d in (1e-5, 1e-10):
        try:
            eps_at[f"{d:g}"] = epsilon_at(g, d)
        except ValueError:
            eps_at[f"{d:g}"] = None
    html_path = None
    if html_out is not None:
        from privtab.semantics.report import (
            guarantee_report_html,
            release_report_html,
            write_html,
        )

        typer.echo(f"privtab: drawing the report for {g} ...", err=True)
        if runs:
            assert release is not None
            opts = {
                "priors": pr,
                "distance": distance,
                "bound": posterior_bound,
                "confidence": confidence,
            }
            text = release_report_html(
                doc,
                runs,
                _release_name(release),
                lv,
                rt,
                dg_queries=dg_queries,
                prior_posterior=opts,
            )
        else:
            text = guarantee_report_html(g, lv, rt, dg_queries=dg_queries, prior_posterior=p2p)
        html_path = str(write_html(html_out, text))
        typer.echo(f"privtab: wrote {html_path}", err=True)
    payload: dict[str, Any] = {
        **({} if private else {"private": False, "warning": NOT_PRIVATE_WARNING}),
        "guarantee": describe_guarantee(g),
        "power": {"levels": lv, **_lists(pw)},
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
        "html": html_path,
    }
    if runs:
        payload["runs"] = {
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
        payload["bounds"]["discrete_gaussian"]["queries"] = dg_queries
    if as_json:
        print_json(payload)
        return
    if not private:
        from rich.console import Console

        Console().print(f"NOT PRIVATE: {NOT_PRIVATE_WARNING}", highlight=False)
    title = _words(g) + ("" if private else " (NOT PRIVATE release)")
    if runs:
        title = f"the release {_release_name(str(release))}: " + title
        pw.pop("release_pld", None)
        for r in runs:
            pw[f"run:{r.scope}"] = run_power[r.scope]
        _print_runs(runs)
    _print_tables(title, lv, pw, post, p2p)


NOT_PRIVATE_WARNING = (
    "this release is not private (seeded or noise-off test run): its counts carry no "
    "protection; the bounds below describe its plan only"
)


def _release_private(release: str | None) -> bool:
    """Whether ``--release`` names a private release (warns loudly when it does not)."""
    if release is None:
        return True
    from privtab.semantics.release import ReleaseError, load_release_status

    try:
        _, private = load_release_status(release)
    except ReleaseError as exc:
        fail(str(exc))
    if not private:
        warn(NOT_PRIVATE_WARNING.upper())
    return private


def _as_rho(g: Any) -> float:
    from privtab.accounting import ZCDP, PureDP

    if isinstance(g, ZCDP):
        return g.rho
    if isinstance(g, PureDP):
        return g.epsilon**2 / 2
    return math.inf


def _words(g: Guarantee) -> str:
    from privtab.semantics.report import guarantee_words

    return guarantee_words(g)


def _print_runs(runs: list[Any]) -> None:
    from rich.console import Console

    console = Console()
    console.print(
        "Runs of this release (each person is in exactly one run; 'US: worst case' and "
        "'PR: worst case' below are the power against each run's worst-case person):",
        highlight=False,
    )
    for r in runs:
        best = min(
            (
                (float(v["epsilon"]), float(v.get("delta", 0.0)))
                for v in r.extra.get("privacy", {}).values()
                if v.get("valid", True) is not False and isinstance(v.get("epsilon"), int | float)
            ),
            default=None,
        )
        eps = "" if best is None else f"; ε ≤ {_round_up(best[0])} at δ = {best[1]:g}"
        console.print(f"  {r.name}: {_words(r.guarantee)}{eps}", highlight=False)


def _round_up(x: float) -> str:
    from privtab.report import round_up

    return round_up(x)


def _print_tables(
    title: str,
    lv: list[float],
    pw: dict[str, Any],
    post: dict[str, Any],
    p2p: dict[str, Any] | None,
) -> None:
    from rich.console import Console
    from rich.table import Table

    from privtab.semantics.summary import BOUNDS, POSTERIOR_ROWS

    def label(k: str) -> str:
        if k.startswith("run:"):
            return f"{k[4:]}: worst case"
        return BOUNDS[k].label

    console = Console()
    t = Table(title=f"Maximum power of a test against {title}")
    t.add_column("level α", justify="right")
    for k in pw:
        t.add_column(label(k), justify="right", overflow="fold")
    for i, a in enumerate(lv):
        t.add_row(f"{a:g}", *[f"{float(pw[k][i]):.4f}" for k in pw])
    console.print(t)
    keys = [k for k in post if k not in ("ratios", "epsilons")]
    t2 = Table(title="Probability that a posterior moves by more than the ratio")
    t2.add_column("ratio", justify="right")
    t2.add_column("ε = ln ratio", justify="right")
    for k in keys:
        t2.add_column(POSTERIOR_ROWS[k].label, justify="right", overflow="fold")
    for i, r in enumerate(post["ratios"]):
        t2.add_row(
            f"{float(r):g}",
            f"{float(post['epsilons'][i]):.4f}",
            *[f"{float(post[k][i]):.4g}" for k in keys],
        )
    console.print(t2)
    if p2p is None:
        console.print("prior-to-posterior: no bound for (ε, δ)-DP without further assumptions")
        return
    t3 = Table(
        title=f"Posterior of an event with prior π ({p2p['bound']} bound, distance "
        f"{p2p['distance']}, holds {p2p['holds']})"
    )
    for col in ("prior π", "lowest posterior", "highest posterior"):
        t3.add_column(col, justify="right")
    for i, prior in enumerate(p2p["priors"]):
        t3.add_row(f"{prior:g}", f"{p2p['lower'][i]:.4g}", f"{p2p['upper'][i]:.4g}")
    console.print(t3)


# ---------------------------------------------------------------------------- topdown


def _selected_concerns(
    alloc: Allocation, scenario: str | None, concern: str | None, within: str | None
) -> list[Concern]:
    from dataclasses import replace

    from privtab.semantics.allocation import AllocationError

    out: list[Concern] = []
    names: list[str] = []
    if scenario is not None:
        names.extend(p.strip() for p in scenario.split(",") if p.strip())
    for n in names:
        match = [k for k in alloc.scenarios if k.lower() == n.lower()]
        if not match:
            known = ", ".join(alloc.scenarios) or "none in this allocation"
            fail(f"--scenario: unknown scenario {n!r}; known: {known}")
        out.append(alloc.scenarios[match[0]])
    if concern is not None or within is not None:
        try:
            c = alloc.concern((concern or "").split(","), within)
        except AllocationError as exc:
            fail(f"--concern/--within: {exc}")
        out.append(replace(c, name="custom", description=c.label()))
    if not out:
        if not alloc.scenarios:
            fail("this allocation defines no scenarios: give --concern ATTRS and/or --within")
        out = list(alloc.scenarios.values())
    return out


def topdown(
    allocation: str | None = typer.Option(
        None, "--allocation", help="Allocation file (.toml or .csv); default: 2020 TopDown."
    ),
    scenario: str | None = typer.Option(
        None, "--scenario", help="Scenario name(s), e.g. A or A,B,E (default: all)."
    ),
    concern: str | None = typer.Option(
        None, "--concern", help="Attributes of concern, e.g. race,votingage."
    ),
    within: str | None = typer.Option(
        None, "--within", help="Also protect the exact location inside this level's unit."
    ),
    levels: str = typer.Option(DEFAULT_LEVELS, "--levels", help="Significance levels."),
    ratios: str = typer.Option("2,10", "--ratios", help="Posterior ratios (> 1)."),
    html_out: str | None = typer.Option(None, "--html", help="Write an HTML report here."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Per-block and per-concern ρ of an allocation, with power and Bayesian bounds.

    Example: privtab semantics topdown --scenario A --json
    """
    import numpy as np

    from privtab.accounting import ZCDP
    from privtab.semantics.allocation import AllocationError, builtin_allocation, load_allocation
    from privtab.semantics.bayes import (
        posterior_ratio_tail_arbitrary_prior,
        posterior_ratio_tail_rest_known,
    )
    from privtab.semantics.pbdp import pbdp_delta_gdp
    from privtab.semantics.power import gaussian_power
    from privtab.semantics.renyi import zcdp_power

    try:
        alloc = load_allocation(allocation) if allocation else builtin_allocation()
    except AllocationError as exc:
        fail(str(exc))
    lv = _floats(levels, "--levels", lo=0.0, hi=1.0)
    rt = _floats(ratios, "--ratios", lo=1.0, hi=1e300, open_lo=True)
    chosen = _selected_concerns(alloc, scenario, concern, within)
    per_block = alloc.rho_per_block()
    eps = np.log(np.asarray(rt))
    details: dict[str, Any] = {}
    for c in chosen:
        rho = float(alloc.concern_rho(c))
        g = ZCDP(rho)
        details[c.name] = {
            "description": c.description,
            "concern": c.label(),
            "rho": rho,
            "affected_cells": len(alloc.affected_cells(c)),
            "power": {
                "levels": lv,
                "gaussian": np.asarray(gaussian_power(rho, lv)).tolist(),
                "zcdp_bound": np.asarray(zcdp_power(rho, lv)).tolist(),
            },
            "posterior": {
                "ratios": rt,
                "rest_known": np.asarray(posterior_ratio_tail_rest_known(g, eps)).tolist(),
                "arbitrary_prior": np.asarray(
                    posterior_ratio_tail_arbitrary_prior(g, eps)
                ).tolist(),
                "gaussian_pbdp": np.asarray(pbdp_delta_gdp(math.sqrt(2 * rho), eps)).tolist(),
            },
        }
    if per_block["total"] == 0:
        warn("the allocation spends no budget at all")
    html_path = None
    if html_out is not None:
        from privtab.semantics.report import topdown_report_html, write_html

        typer.echo("privtab: drawing the allocation report ...", err=True)
        html_path = str(write_html(html_out, topdown_report_html(alloc, chosen, lv, rt)))
        typer.echo(f"privtab: wrote {html_path}", err=True)
    payload: dict[str, Any] = {
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
        "html": html_path,
    }
    if as_json:
        print_json(payload)
        return
    _print_topdown(alloc, payload, lv)


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


def _print_topdown(alloc: Allocation, payload: dict[str, Any], lv: list[float]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    t = Table(title=f"ρ by level — {alloc.name}")
    t.add_column("level")
    universes = list(payload["rho_by_level"])
    for u in universes:
        t.add_column(u, justify="right")
    for level in alloc.levels:
        t.add_row(level, *[f"{payload['rho_by_level'][u][level]:.6f}" for u in universes])
    t.add_row("per block", *[f"{payload['rho_per_block_by_universe'][u]:.6f}" for u in universes])
    console.print(t)
    console.print(f"total ρ per block: {payload['rho_per_block']:.6f}")
    t2 = Table(title="ρ and power per concern (Gaussian / zCDP bound)")
    t2.add_column("concern")
    t2.add_column("protects")
    t2.add_column("ρ", justify="right")
    for a in lv:
        t2.add_column(f"α={a:g}", justify="right")
    for name, d in payload["details"].items():
        t2.add_row(
            name,
            d["description"] or d["concern"],
            f"{d['rho']:.6f}",
            *[
                f"{g:.3f} / {z:.3f}"
                for g, z in zip(d["power"]["gaussian"], d["power"]["zcdp_bound"], strict=True)
            ],
        )
    console.print(t2)
