"""``privtab semantics``: what a privacy guarantee or a budget allocation protects against.

``privtab semantics --zcdp 2.63`` prints the maximum power of an attacker's test at each
significance level (``--levels``) by every applicable bound, and bounds on the
probability that a posterior moves by more than each ratio (``--ratios``); ``--html``
writes a self-contained report with figures. ``privtab semantics topdown`` does the
fine-grained accounting of a per-query allocation (the 2020 TopDown one by default).
"""

from __future__ import annotations

from typing import Annotated

import typer

from privtab._options import numbers, open_unit, output_file_option
from privtab.cli._render import JsonOption, emit, fail, group, usage_errors

DEFAULT_LEVELS = "0.01,0.05,0.1"
DEFAULT_RATIOS = "1.25,2,5,10,100"
DEFAULT_PRIORS = "0.05,0.4,0.75"

Levels = Annotated[str, typer.Option("--levels", help="Significance levels.")]
HtmlOut = Annotated[str | None, typer.Option("--html", help="Write an HTML report here.")]


def register(app: typer.Typer) -> None:
    sub = group(
        "What a privacy guarantee or budget allocation protects against.",
        invoke_without_command=True,
        no_args_is_help=False,
    )
    sub.callback(invoke_without_command=True)(semantics)
    sub.command("topdown")(topdown)
    app.add_typer(sub, name="semantics")


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
    levels: Levels = DEFAULT_LEVELS,
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
    html_out: HtmlOut = None,
    as_json: JsonOption = False,
) -> None:
    """Power and Bayesian bounds for one guarantee, as a table, JSON or HTML report.

    Example: privtab semantics --zcdp 2.63 --levels 0.01,0.05,0.1 --html report.html
    """
    if ctx.invoked_subcommand is not None:
        return
    from privtab.semantics.bayes import POSTERIOR_BOUNDS
    from privtab.semantics.overview import (
        chosen_guarantee,
        guarantee_overview,
        overview_tables,
        release_runs,
    )
    from privtab.semantics.report import write_guarantee_report

    output_file_option("--html", html_out)
    given = {"--pure": pure, "--approx": approx, "--zcdp": zcdp, "--gdp": gdp,
             "--rdp-file": rdp_file, "--release": release}  # fmt: skip
    g = chosen_guarantee(given)
    lv = numbers(levels, "--levels", lo=0.0, hi=1.0)
    rt = numbers(ratios, "--ratios", lo=1.0, hi=1e300, open_lo=True)
    pr = numbers(priors, "--priors", lo=0.0, hi=1.0)
    if posterior_bound not in POSTERIOR_BOUNDS:
        known = ", ".join(POSTERIOR_BOUNDS)
        fail(f"--posterior-bound must be one of {known}, got {posterior_bound!r}")
    open_unit("--confidence", confidence)
    doc, runs, private, name = release_runs(release)
    p2p = {"priors": pr, "distance": distance, "bound": posterior_bound, "confidence": confidence}
    with usage_errors():
        ov = guarantee_overview(g, lv, rt, runs=runs, dg_queries=dg_queries, private=private, **p2p)  # type: ignore[arg-type]
    ov["html"] = None
    if html_out is not None:
        ov["html"] = write_guarantee_report(
            html_out, g, (doc, runs, name), lv, rt, dg_queries=dg_queries,
            prior_posterior=p2p, bounds=ov["prior_to_posterior"],
        )  # fmt: skip
    from privtab.semantics.release import exact_release_value

    head, tables = overview_tables(ov, g, runs, name, exact_release_value(doc))
    if release is not None:
        from privtab.semantics.overview import person_level, person_level_line

        ov["person_level"] = person_level(doc)
        head = [*person_level_line(ov["person_level"]), *head]
    emit(ov, as_json, tables, head=head)


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
    levels: Levels = DEFAULT_LEVELS,
    ratios: str = typer.Option("2,10", "--ratios", help="Posterior ratios (> 1)."),
    html_out: HtmlOut = None,
    as_json: JsonOption = False,
) -> None:
    """Per-block and per-concern ρ of an allocation, with power and Bayesian bounds.

    Example: privtab semantics topdown --scenario A --json
    """
    from privtab.semantics.allocation import AllocationError, builtin_allocation, load_allocation
    from privtab.semantics.overview import select_concerns, topdown_overview, topdown_tables

    output_file_option("--html", html_out)
    lv = numbers(levels, "--levels", lo=0.0, hi=1.0)
    rt = numbers(ratios, "--ratios", lo=1.0, hi=1e300, open_lo=True)
    with usage_errors(AllocationError):
        alloc = load_allocation(allocation) if allocation else builtin_allocation()
        chosen = select_concerns(alloc, scenario, concern, within)
    ov = topdown_overview(alloc, chosen, lv, rt)
    ov["html"] = None
    if html_out is not None:
        from privtab.semantics.report import write_topdown_report

        ov["html"] = write_topdown_report(html_out, alloc, chosen, lv, rt)
    emit(ov, as_json, topdown_tables(alloc, ov, lv))
