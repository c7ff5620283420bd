"""Self-contained HTML reports: what a guarantee or an allocation protects against.

One HTML file, no external resources: every figure is a PNG drawn with matplotlib and
embedded as a data URI, and every figure is followed by a plain-language paragraph with
the numbers filled in, written for the policy maker who signs off on a budget.
:func:`write_html` writes atomically (temporary file + rename).

matplotlib is imported lazily (only when a report is drawn), through its object API
(no pyplot state, no global backend change).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from privtab.accounting.guarantees import ZCDP, ApproxDP, Guarantee, PureDP
from privtab.report import FigureBlock, new_figure, page, png, table_html, write_html
from privtab.semantics._numeric import FloatArray

if TYPE_CHECKING:
    from privtab.semantics.allocation import Allocation, Concern

__all__ = ["FigureBlock", "guarantee_report_html", "topdown_report_html", "write_html"]

#: Levels drawn in the power figures: linear plus log-spaced small levels.
PLOT_LEVELS: FloatArray = np.unique(
    np.concatenate([np.linspace(0.0, 1.0, 81), np.geomspace(1e-4, 0.05, 25)])
)

_STYLE = {
    "pure_bound": ("#1f4e79", "-"),
    "approx_bound": ("#1f4e79", "-"),
    "zcdp_bound": ("#000000", "-"),
    "zcdp_profile_bound": ("#7f7f7f", ":"),
    "rdp_bound": ("#000000", "-"),
    "rdp_profile_bound": ("#7f7f7f", ":"),
    "gdp": ("#1f77b4", "-"),
    "gaussian": ("#1f77b4", "-"),
    "discrete_gaussian": ("#d62728", "--"),
}


def _pct(x: float) -> str:
    if x >= 0.9995:
        return "essentially 100%"
    if x < 0.0005:
        return f"{100 * x:.2g}%"
    return f"{100 * x:.1f}%"


# ---------------------------------------------------------------------------- guarantee


def _power_figure(g: Guarantee, dg_queries: int) -> FigureBlock:
    from privtab.semantics.summary import BOUNDS, power_bounds

    rows = power_bounds(g, PLOT_LEVELS, dg_queries=dg_queries)
    at = power_bounds(g, [0.05], dg_queries=dg_queries)
    fig, ax = new_figure()
    ax.plot([0, 1], [0, 1], color="#bbbbbb", lw=1, label="no information (power = level)")
    for name, vals in rows.items():
        color, ls = _STYLE.get(name, ("#555555", "-"))
        ax.plot(PLOT_LEVELS, vals, color=color, ls=ls, lw=1.8, label=name.replace("_", " "))
    ax.set_xlabel("significance level α (rate of false accusations)")
    ax.set_ylabel("maximum power (rate of correct detections)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.01)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(f"What a test can achieve against {g}")
    bound_rows = {k: v for k, v in at.items() if BOUNDS[k].kind in ("bound", "exact")}
    best = min(float(v[0]) for v in bound_rows.values())
    text = (
        "Imagine an attacker who looks at the published numbers and tries to decide whether "
        "one particular person's record (call her Jessie) is the real one or a substitute. "
        "If the attacker is willing to be wrong about innocent substitutes 5% of the time "
        "(significance level 0.05), then against <em>any</em> mechanism with this guarantee "
        f"they can detect Jessie's real record at most {_pct(best)} of the time. "
        "The grey diagonal is an attacker who learns nothing; curves close to it mean "
        "strong protection."
    )
    if "gaussian" in at:
        text += (
            f" The blue curve is the Gaussian mechanism spending the same budget; it reaches "
            f"only {_pct(float(at['gaussian'][0]))} at level 0.05, which shows how much of "
            "the worst case a typical noise mechanism actually uses."
        )
    if "discrete_gaussian" in at:
        text += (
            " The dashed red curve is the exact power against "
            f"{dg_queries} discrete Gaussian quer{'y' if dg_queries == 1 else 'ies'} "
            "with the same total budget, computed from its probability mass function."
        )
    return FigureBlock("fig-power", "Hypothesis-testing power", png(fig), text)


def _epsilon_delta_figure(g: Guarantee) -> FigureBlock:
    from privtab.semantics.summary import epsilon_delta_curves

    top = 4.0 * g.epsilon if isinstance(g, PureDP | ApproxDP) and g.epsilon > 0 else 20.0
    if isinstance(g, ZCDP):
        top = max(10.0, g.rho + 8.0 * math.sqrt(g.rho) + 4.0)
    eps = np.linspace(0.0, top, 121)
    curves = epsilon_delta_curves(g, eps)
    fig, ax = new_figure()
    labels = {
        "approx_dp": ("(ε, δ)-DP curve", "#d62728", "-"),
        "pbdp": ("pbdp curve (probability of a bad outcome)", "#1f77b4", "-"),
        "zcdp_tail": ("Rényi/zCDP upper bound on the pbdp curve", "#000000", "--"),
    }
    for name, vals in curves.items():
        lab, color, ls = labels[name]
        ax.plot(eps, np.maximum(vals, 1e-16), color=color, ls=ls, lw=1.8, label=lab)
    ax.set_yscale("log")
    ax.set_ylim(1e-12, 1.5)
    ax.set_xlabel("ε (odds of a correct guess change by at most a factor e^ε)")
    ax.set_ylabel("δ")
    ax.legend(loc="lower left", fontsize=8)
    ax.set_title("Privacy-loss curves")
    probe = [e for e in (2.0, 5.0, 10.0) if e <= top] or [top / 2]
    vals = epsilon_delta_curves(g, probe)["pbdp"]
    parts = [
        f"with probability at most {_pct(float(v))} the odds change by more than "
        f"e^{e:g} ≈ {math.exp(e):,.0f}×"
        for e, v in zip(probe, vals, strict=True)
    ]
    text = (
        "A guarantee allows a continuum of (ε, δ) pairs. The blue pbdp curve has the "
        "most direct reading: no analysis of the published data can change the odds of a "
        "correct guess about one person by more than a factor e^ε, except with probability "
        "δ. For this guarantee, " + "; ".join(parts) + ". The red curve is the classical "
        "(ε, δ)-DP curve, whose δ has no such simple meaning"
        + (
            "; the dashed black curve is the conservative bound that Rényi/zCDP accounting "
            "gives for the pbdp curve."
            if "zcdp_tail" in curves
            else "."
        )
    )
    return FigureBlock("fig-epsilon-delta", "ε–δ curves", png(fig), text)


def _bayes_figure(g: Guarantee) -> FigureBlock:
    from privtab.semantics.summary import posterior_bounds

    top = 3.0 * g.epsilon if isinstance(g, PureDP | ApproxDP) and g.epsilon > 0 else 12.0
    if isinstance(g, ZCDP):
        top = max(6.0, g.rho + 6.0 * math.sqrt(g.rho) + 2.0)
    eps = np.linspace(0.05, top, 90)
    rows = posterior_bounds(g, np.exp(eps))
    fig, ax = new_figure()
    labels = {
        "rest_known": ("attacker knows everyone else (Thm 7.4.1)", "#2ca02c", "-"),
        "arbitrary_prior": ("any prior, true record (Thm 7.4.2)", "#000000", "--"),
        "pbdp": ("f-DP / pbdp bound (tightest trade-off)", "#1f77b4", "-"),
        "gaussian_pbdp": ("Gaussian mechanism, same ρ", "#d62728", ":"),
        "pure_bound": ("pure DP: never above e^ε (Thm 7.3)", "#9467bd", "-"),
    }
    for name, vals in rows.items():
        if name in ("ratios", "epsilons"):
            continue
        lab, color, ls = labels[name]
        ax.plot(eps, np.maximum(vals, 1e-16), color=color, ls=ls, lw=1.8, label=lab)
    ax.set_yscale("log")
    ax.set_ylim(1e-8, 1.5)
    ax.set_xlabel("ε (posterior ratio threshold e^ε)")
    ax.set_ylabel("P[posterior ratio > e^ε]")
    ax.legend(loc="lower left", fontsize=8)
    ax.set_title("Bayesian posterior-to-posterior semantics")
    probe = posterior_bounds(g, [10.0])
    best = min(float(v[0]) for k, v in probe.items() if k not in ("ratios", "epsilons"))
    text = (
        "Compare what an attacker believes about Jessie after seeing the release with what "
        "they would believe had Jessie's record been replaced by statistical information "
        "about people like her. The curves bound the probability that the release makes "
        "the first belief more than e^ε times the second. For example, the chance that "
        f"the release makes some belief about Jessie 10 times stronger is at most {_pct(best)}"
        " (best bound shown). These bounds hold whatever the attacker assumed beforehand, "
        "except the green one, which assumes the attacker already knows everyone else."
    )
    return FigureBlock("fig-bayes", "Posterior-to-posterior bounds", png(fig), text)


def _discrete_gaussian_figure(rho: float, dg_queries: int) -> FigureBlock:
    from privtab.semantics.discrete_gaussian import discrete_gaussian_tradeoff
    from privtab.semantics.power import gaussian_power

    fig, ax = new_figure()
    a = PLOT_LEVELS
    ax.plot(a, gaussian_power(rho, a), color="#1f77b4", lw=2, label="continuous Gaussian")
    gaps = []
    for k, ls in ((1, "--"), (max(dg_queries, 16), ":")):
        tr = discrete_gaussian_tradeoff(math.sqrt(k / (2.0 * rho)), 1, k)
        pw = np.asarray(tr.power(a))
        gaps.append((k, float(np.max(np.abs(pw - np.asarray(gaussian_power(rho, a)))))))
        ax.plot(a, pw, ls=ls, lw=1.8, label=f"{k} discrete Gaussian quer{'y' if k == 1 else 'ies'}")
    ax.plot([0, 1], [0, 1], color="#bbbbbb", lw=1)
    ax.set_xlabel("significance level α")
    ax.set_ylabel("power")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(f"Discrete vs continuous Gaussian, total ρ = {rho:g}")
    text = (
        "The 2020 Census adds discrete (integer) Gaussian noise, not the continuous kind. "
        "These curves are the exact attacker power against discrete Gaussian noise, "
        "computed from its probability mass function. When one query spends the whole "
        f"budget the curves differ by up to {gaps[0][1]:.3f}; when the budget is spread over "
        f"{gaps[1][0]} queries the largest difference is {gaps[1][1]:.4f}, so the simple "
        "Gaussian formulas describe the real mechanism well."
    )
    return FigureBlock("fig-discrete-gaussian", "Discrete Gaussian", png(fig), text)


def _prior_posterior_figure(eps: float) -> FigureBlock:
    from matplotlib.figure import Figure

    from privtab.semantics.bayes import (
        laplace_binary_sum_bounds,
        posterior_interval,
        randomized_response_bounds,
    )

    fig = Figure(figsize=(10.5, 3.6), dpi=100, layout="constrained")
    ax1, ax2, ax3 = fig.subplots(1, 3)
    prior = np.linspace(0.0, 1.0, 101)
    lo, hi = posterior_interval(prior, eps)
    raw_lo, raw_hi = posterior_interval(prior, eps, bound="raw", clip=False)
    ax1.fill_between(prior, lo, hi, color="#1f77b4", alpha=0.3, label="possible posterior")
    ax1.plot(prior, raw_hi, "--", color="#7f7f7f", lw=1, label="e^±ε·π (raw)")
    ax1.plot(prior, raw_lo, "--", color="#7f7f7f", lw=1)
    ax1.set_ylim(0.0, 1.0)
    ax1.legend(fontsize=7, loc="upper left")
    ax1.plot(prior, prior, color="#1f77b4")
    ax1.set_xlabel("prior probability π(A)")
    ax1.set_ylabel("possible posterior π(A | s)")
    ax1.set_title("Thm 6.4: posterior interval")
    n = 10
    s = np.linspace(-8, n + 8, 241)
    l, u = laplace_binary_sum_bounds(s, n, eps)
    ax2.plot(s, l, label="lower bound", color="#2ca02c")
    ax2.plot(s, u, label="upper bound", color="#d62728")
    ax2.set_yscale("log")
    ax2.set_xlabel("noisy sum s")
    ax2.set_title(f"Ex. 4.4: binary sum, n = {n}")
    ax2.legend(fontsize=7)
    ns = np.arange(0, 21)
    rl, ru = randomized_response_bounds(ns, eps)
    ax3.plot(ns, rl, "o-", ms=3, color="#2ca02c", label="lower")
    ax3.plot(ns, ru, "o-", ms=3, color="#d62728", label="upper")
    ax3.set_yscale("log")
    ax3.set_xlabel("number of randomized responses n")
    ax3.set_title("Ex. 4.5: randomized response")
    ax3.legend(fontsize=7)
    for ax in (ax1, ax2, ax3):
        ax.grid(True, alpha=0.3)
    p_lo, p_hi = posterior_interval(0.02, eps)
    text = (
        "Pure ε-DP also limits what anyone — attacker or legitimate analyst — can learn "
        "relative to what they believed before (prior-to-posterior). Left: whatever the "
        "data model, a belief held with probability π before the release lies between "
        "max(e^−ε·π, 1 − e^ε·(1−π)) and min(e^ε·π, 1 − e^−ε·(1−π)) afterwards when one "
        "record is at stake (the theorem applied to the event and to its opposite, so the "
        "two statements agree; dashed: e^±ε·π alone); a 2% belief stays between "
        f"{_pct(float(p_lo))} and {_pct(float(p_hi))}. Middle and right: without knowing the "
        "data, the probability of each possible released value is already confined to a "
        "band, for a noisy count of 10 yes/no answers and for randomized response."
    )
    return FigureBlock("fig-prior-posterior", "Prior-to-posterior limits", png(fig), text)


def _fmt(x: Any) -> str:
    if x is None:
        return "—"
    v = float(x)
    if v == 0.0:
        return "0"
    return f"{v:.4f}" if v >= 1e-3 else f"{v:.2e}"


def guarantee_report_html(
    g: Guarantee,
    levels: Sequence[float],
    ratios: Sequence[float],
    *,
    dg_queries: int = 1,
    title: str | None = None,
    prior_posterior: dict[str, Any] | None = None,
) -> str:
    """The full HTML report for one guarantee (tables + figures + explanations).

    ``prior_posterior`` is a :func:`~privtab.semantics.summary.prior_posterior_bounds`
    result (default: the coherent bounds at priors 0.05, 0.4, 0.75, distance 1)."""
    from privtab.semantics.summary import (
        BOUNDS,
        posterior_bounds,
        power_bounds,
        prior_posterior_bounds,
    )

    pw = power_bounds(g, levels, dg_queries=dg_queries)
    power_rows = [[f"{a:g}"] + [_fmt(pw[k][i]) for k in pw] for i, a in enumerate(levels)]
    post = posterior_bounds(g, ratios)
    post_keys = [k for k in post if k not in ("ratios", "epsilons")]
    post_rows = [
        [f"{r:g}", f"{math.log(r):.3f}"] + [_fmt(post[k][i]) for k in post_keys]
        for i, r in enumerate(ratios)
    ]
    figs = [_power_figure(g, dg_queries), _epsilon_delta_figure(g), _bayes_figure(g)]
    if isinstance(g, ZCDP) and g.rho > 0:
        figs.append(_discrete_gaussian_figure(g.rho, dg_queries))
    if isinstance(g, PureDP) and g.epsilon > 0:
        figs.append(_prior_posterior_figure(g.epsilon))
    legend = table_html(
        ["bound", "kind", "meaning", "source"],
        [[k, BOUNDS[k].kind, BOUNDS[k].description, BOUNDS[k].source] for k in pw],
    )
    sections = [
        "<h2>Maximum power of an attacker's test</h2>",
        table_html(["level α", *pw], power_rows),
        legend,
        "<h2>Probability that a posterior moves by more than a ratio</h2>",
        table_html(["ratio", "ε = ln ratio", *post_keys], post_rows),
    ]
    p2p = prior_posterior if prior_posterior is not None else prior_posterior_bounds(g)
    if p2p is not None:
        sections += [
            "<h2>Where a belief can move (prior to posterior)</h2>",
            f"<p>{_p2p_caption(p2p)}</p>",
            table_html(
                ["prior π", "lowest posterior", "highest posterior"],
                [
                    [f"{p:g}", _fmt(p2p["lower"][i]), _fmt(p2p["upper"][i])]
                    for i, p in enumerate(p2p["priors"])
                ],
            ),
        ]
    return _semantics_page(title or f"What {g} protects against", str(g), sections, figs)


def _p2p_caption(p2p: dict[str, Any]) -> str:
    form = {
        "coherent": "the theorem applied to the event and to its opposite",
        "raw": "e^±t·π as printed in the theorem",
        "odds": "posterior odds within a factor e^±t of the prior odds",
    }[p2p["bound"]]
    where = (
        "for every possible output"
        if p2p["holds"] == "for every output"
        else f"with probability at least {p2p['confidence']:g} (zCDP and Rényi guarantees "
        "bound the likelihood ratio only in probability, so no interval holds for every "
        "output)"
    )
    return html.escape(
        f"Inferential-limits seed Thm 6.4: an event about data within distance "
        f"{p2p['distance']} (records) with prior probability π has a posterior in this "
        f"interval, {where}, whatever the data model — {form}, t = {p2p['radius']:.4g}."
    )


# ---------------------------------------------------------------------------- topdown


def topdown_report_html(
    alloc: Allocation,
    concerns: Sequence[Concern],
    levels: Sequence[float],
    ratios: Sequence[float],
) -> str:
    """HTML report of an allocation: ρ per block and level, and each concern's semantics."""
    from privtab.semantics.pbdp import pbdp_delta_gdp
    from privtab.semantics.power import gaussian_power
    from privtab.semantics.renyi import zcdp_power

    per_block = alloc.rho_per_block()
    by_level = alloc.rho_by_level()
    lvl_rows = [
        [lv] + [f"{float(by_level[u][lv]):.6f}" for u in alloc.universes] for lv in alloc.levels
    ]
    lvl_rows.append(["per block"] + [f"{float(per_block[u]):.6f}" for u in alloc.universes])
    rhos = [float(alloc.concern_rho(c)) for c in concerns]
    conc_rows = []
    for c, r in zip(concerns, rhos, strict=True):
        g = gaussian_power(r, levels)
        z = zcdp_power(r, levels)
        conc_rows.append(
            [c.name, c.description or c.label(), f"{r:.6f}"]
            + [
                f"{_fmt(gi)} / {_fmt(zi)}"
                for gi, zi in zip(np.atleast_1d(g), np.atleast_1d(z), strict=True)
            ]
        )
    figs: list[FigureBlock] = []
    fig, ax = new_figure()
    ax.barh([c.name for c in concerns][::-1], rhos[::-1], color="#1f77b4")
    ax.axvline(float(per_block["total"]), color="#d62728", ls="--", label="ρ per block")
    ax.set_xlabel("ρ relevant to the concern (zCDP)")
    ax.legend(fontsize=8)
    ax.set_title("Budget relevant to each concern")
    low = min(zip(rhos, [c.name for c in concerns], strict=True))
    figs.append(
        FigureBlock(
            "fig-concern-rho",
            "ρ per concern",
            png(fig),
            "The whole release spends ρ = "
            f"{float(per_block['total']):.2f} per block, but most queries cannot reveal a "
            "particular aspect of a person. Counting only the queries whose answers change "
            "when that aspect changes gives a much smaller budget for each concern; the "
            f"smallest here is ρ = {low[0]:.3f} ({low[1]}).",
        )
    )
    fig, ax = new_figure()
    a = PLOT_LEVELS
    ax.plot([0, 1], [0, 1], color="#bbbbbb", lw=1)
    for c, r in zip(concerns, rhos, strict=True):
        line = ax.plot(a, gaussian_power(r, a), lw=1.6, label=f"{c.name} (ρ={r:.3f})")
        ax.plot(a, zcdp_power(r, a), lw=1, ls=":", color=line[0].get_color())
    ax.set_xlabel("significance level α")
    ax.set_ylabel("maximum power")
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("Power per concern: Gaussian (solid), zCDP bound (dotted)")
    p05 = float(np.asarray(gaussian_power(low[0], [0.05]))[0])
    figs.append(
        FigureBlock(
            "fig-concern-power",
            "Power per concern",
            png(fig),
            "For each concern, the solid curve is how often an attacker could detect the "
            "sensitive detail (at a given rate of false alarms) if the noise were Gaussian, "
            "and the dotted curve is the guarantee for any mechanism with the same ρ. For "
            f"concern {low[1]}, an attacker with a 5% false-alarm rate succeeds at most "
            f"{_pct(p05)} of the time — close to the 5% of a blind guess.",
        )
    )
    fig, ax = new_figure()
    eps = np.linspace(0.05, 8.0, 80)
    for c, r in zip(concerns, rhos, strict=True):
        ax.plot(eps, np.maximum(pbdp_delta_gdp(math.sqrt(2 * r), eps), 1e-16), label=c.name)
    ax.set_yscale("log")
    ax.set_ylim(1e-8, 1.5)
    ax.set_xlabel("ε (posterior ratio threshold e^ε)")
    ax.set_ylabel("P[posterior ratio > e^ε]")
    ax.legend(fontsize=7)
    ax.set_title("Bayesian (pbdp) curve per concern, Gaussian mechanism")
    d2 = float(np.asarray(pbdp_delta_gdp(math.sqrt(2 * low[0]), [2.0]))[0])
    figs.append(
        FigureBlock(
            "fig-concern-bayes",
            "Bayesian curves per concern",
            png(fig),
            "The probability that the release changes what an attacker believes about the "
            "sensitive detail by more than a factor e^ε, compared with a world where the "
            f"person's record was not used. For concern {low[1]} the belief becomes more "
            f"than e² ≈ 7.4 times stronger with probability at most {_pct(d2)}.",
        )
    )
    sections = [
        f"<p>Allocation: {html.escape(alloc.name)} — {html.escape(alloc.source)}</p>",
        "<h2>ρ by geographic level</h2>",
        table_html(["level", *alloc.universes], lvl_rows),
        "<h2>Concerns</h2>",
        table_html(
            ["concern", "protects", "ρ"]
            + [f"power at α={x:g} (Gaussian / zCDP bound)" for x in levels],
            conc_rows,
        ),
    ]
    return _semantics_page(f"Fine-grained semantics: {alloc.name}", "per-concern ρ", sections, figs)


def _semantics_page(
    title: str, subtitle: str, sections: Sequence[str], figs: Sequence[FigureBlock]
) -> str:
    return page(
        title,
        subtitle,
        sections,
        figs,
        note="bounds from the semantics of differential privacy used for the 2020 Census",
    )
