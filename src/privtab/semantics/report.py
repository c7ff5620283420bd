"""Self-contained HTML reports: what a guarantee, a release or an allocation protects against.

One HTML file, no external resources: every figure is a PNG drawn with matplotlib and
embedded as a data URI, and every figure is followed by a plain-language paragraph with
the numbers filled in, written for the policy maker who signs off on a budget. Each report
opens with one sentence to quote (the guarantee and its ε at δ = 10⁻¹⁰, or for a release
the same headline as its ``report.html``), names every bound in plain words, cites every
result with a full reference (list at the end) and keeps legends outside the plots.

* :func:`guarantee_report_html` — one guarantee (``privtab semantics --zcdp 2.63 --html``);
* :func:`release_report_html` — every run of a SafeTab-P release, each with the power
  against its worst-case person (``privtab semantics --release R --html``);
* :func:`topdown_report_html` — a per-query allocation (``privtab semantics topdown``).

:func:`write_html` writes atomically (temporary file + rename). matplotlib is imported
lazily (only when a report is drawn), through its object API (no pyplot state, no global
backend change).
"""

from __future__ import annotations

import html
import logging
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from privtab.accounting.exact import exact_or_up
from privtab.accounting.guarantees import GDP, ZCDP, ApproxDP, Guarantee, PureDP
from privtab.report import (
    FigureBlock,
    legend_outside,
    new_figure,
    page,
    png,
    power_of_ten,
    round_up,
    round_up_sig,
    table_html,
    write_html,
)
from privtab.report.references import Citations
from privtab.semantics._numeric import FloatArray

if TYPE_CHECKING:
    from privtab.semantics.allocation import Allocation, Concern
    from privtab.semantics.release import ReleaseRun

__all__ = [
    "FigureBlock",
    "guarantee_headline",
    "guarantee_report_html",
    "guarantee_words",
    "pct_up",
    "posterior_at_ratio",
    "release_report_html",
    "topdown_report_html",
    "write_guarantee_report",
    "write_html",
    "write_topdown_report",
]

LOG = logging.getLogger("privtab.semantics")

#: Levels drawn in the power figures: linear plus log-spaced small levels.
PLOT_LEVELS: FloatArray = np.unique(
    np.concatenate([np.linspace(0.0, 1.0, 81), np.geomspace(1e-4, 0.05, 25)])
)

#: δ of the headline sentence
HEADLINE_DELTA = 1e-10

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
_RUN_COLORS = ("#ff7f0e", "#2ca02c", "#8c564b", "#e377c2")


def pct_up(x: float) -> str:
    """An upper bound on a probability as a percentage, rounded *up* (it is always read
    as "at most …"): 0.96331 → ``96.4%``."""
    if x >= 0.9995:
        return "essentially 100%"
    if x < 0.0005:
        return f"{round_up_sig(100 * x, 2)}%"
    return f"{round_up(100 * x, 1)}%"


def _sentence_case(words: str) -> str:
    """Capitalise a sentence's first letter, but never a symbol (ρ, μ, ε stay lower case)."""
    return words if words[0] in "ρμεδα(" else words[0].upper() + words[1:]


def guarantee_words(g: Guarantee, exact: Fraction | None = None) -> str:
    """The guarantee in words: ``ρ = 2.63 zero-concentrated differential privacy``.

    ``exact``: the exact ρ or ε when known (a privtab release states it), printed exactly
    when it is a short decimal, else rounded up (``4.944``, not the float ``4.94401``);
    without it the float is rounded up (:func:`privtab.report.round_up_sig`)."""

    def up(x: float) -> str:
        return exact_or_up(exact) if exact is not None else round_up_sig(x)

    if isinstance(g, PureDP):
        return f"ε = {up(g.epsilon)} pure differential privacy"
    if isinstance(g, ApproxDP):
        return f"(ε = {round_up_sig(g.epsilon)}, δ = {power_of_ten(g.delta)}) differential privacy"
    if isinstance(g, ZCDP):
        return f"ρ = {up(g.rho)} zero-concentrated differential privacy"
    if isinstance(g, GDP):
        return f"μ = {round_up_sig(g.mu)} Gaussian differential privacy"
    return f"the Rényi differential privacy curve {g.description or ''}".rstrip()


def _short_words(g: Guarantee, exact: Fraction | None = None) -> str:
    """The guarantee in a figure title: ``ρ = 2.63 zero-concentrated DP``."""
    return guarantee_words(g, exact).replace("differential privacy", "DP")


# ---------------------------------------------------------------------------- headline


def guarantee_headline(g: Guarantee, cite: Citations, exact: Fraction | None = None) -> str:
    """The sentence to quote for one guarantee (HTML ``<p class="headline">``) and the
    attack-success line after it (``exact``: see :func:`guarantee_words`)."""
    from privtab.accounting.conversions import epsilon_at
    from privtab.semantics.summary import power_bounds, tightest_power

    words = guarantee_words(g, exact)
    if isinstance(g, PureDP):
        shown = exact_or_up(exact) if exact is not None else round_up_sig(g.epsilon)
        clause = f"ε = {shown} holds at every δ, δ = 0 included"
    elif isinstance(g, ApproxDP):
        clause = "this is the guarantee itself"
    else:
        eps = epsilon_at(g, HEADLINE_DELTA)
        how = cite.cite("dong-roth-su") if isinstance(g, GDP) else cite.cite("cks")
        clause = (
            f"for δ = {power_of_ten(HEADLINE_DELTA)} that means ε ≤ {round_up_sig(eps, 4)} "
            f"(the tightest conversion, {how})"
        )
    p05 = float(tightest_power(power_bounds(g, [0.05]))[0])
    return (
        f'<p class="headline">{html.escape(_sentence_case(words))}: {clause}.</p>'
        '<p class="sub">In attack terms: someone who tests whether one particular person\'s '
        "record was used, and accepts wrongly accusing 5% of the people they test, "
        f"succeeds at most {pct_up(p05)} of the time against <em>any</em> mechanism with this "
        f"guarantee ({cite.cite('semantics', '§6')}).</p>"
    )


# ---------------------------------------------------------------------------- figures


def _power_figure(
    g: Guarantee,
    dg_queries: int,
    cite: Citations,
    runs: Sequence[ReleaseRun] = (),
) -> FigureBlock:
    from privtab.semantics.summary import BOUNDS, power_bounds, tightest_power

    rows = power_bounds(g, PLOT_LEVELS, dg_queries=dg_queries)
    at = power_bounds(g, [0.05], dg_queries=dg_queries)
    fig, ax = new_figure(9.0, 4.4)
    ax.plot([0, 1], [0, 1], color="#bbbbbb", lw=1, label="no information (power = level)")
    for name, vals in rows.items():
        color, ls = _STYLE.get(name, ("#555555", "-"))
        ax.plot(PLOT_LEVELS, vals, color=color, ls=ls, lw=1.8, label=BOUNDS[name].label)
    for i, run in enumerate(runs):
        ax.plot(
            PLOT_LEVELS,
            run.pld.power(PLOT_LEVELS),
            color=_RUN_COLORS[i % len(_RUN_COLORS)],
            lw=1.8,
            ls="-.",
            label=f"{run.name}: its worst-case person",
        )
    ax.set_xlabel("significance level α (rate of false accusations)")
    ax.set_ylabel("maximum power (rate of correct detections)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.01)
    legend_outside(ax)
    ax.set_title(f"What a test can achieve against {_short_words(g)}", fontsize=10)
    best = float(tightest_power(at)[0])
    text = (
        "Imagine an attacker who looks at the published numbers and tries to decide whether "
        "one particular person's record (call her Jessie) is the real one or a substitute "
        f"({cite.cite('semantics', '§2 and §6')}). If the attacker is willing to be wrong "
        "about innocent substitutes 5% of the time (significance level 0.05), then against "
        f"<em>any</em> mechanism with this guarantee they can detect Jessie's real record at "
        f"most {pct_up(best)} of the time. The grey diagonal is an attacker who learns "
        "nothing; curves close to it mean strong protection."
    )
    if "gaussian" in at:
        text += (
            f" The blue curve is the Gaussian mechanism spending the same budget; it reaches "
            f"only {pct_up(float(at['gaussian'][0]))} at level 0.05, which shows how much of "
            "the worst case a typical noise mechanism actually uses."
        )
    if "discrete_gaussian" in at:
        text += (
            " The dashed red curve is the exact power against "
            f"{dg_queries} discrete Gaussian quer{'y' if dg_queries == 1 else 'ies'} "
            "with the same total budget, computed from its probability mass function "
            f"({cite.cite('cks')})."
        )
    if runs:
        parts = [f"{html.escape(r.name)}: {pct_up(float(r.pld.power([0.05])[0]))}" for r in runs]
        text += (
            " The dash-dotted curves are the power against the worst-case person of each run "
            "of this release, from the privacy-loss distribution of the noisy counts that "
            f"person is in ({cite.cite('doroshenko')}); at level 0.05: " + "; ".join(parts) + "."
        )
    return FigureBlock("fig-power", "Hypothesis-testing power", png(fig), text)


def _epsilon_axis_end(
    g: Guarantee, per_epsilon: float, default: float, zcdp: tuple[float, float, float]
) -> float:
    """The right end of an ε axis that shows ``g``'s curves: ``per_epsilon``·ε for an
    (ε[, δ]) guarantee, ``max(floor, ρ + a√ρ + b)`` for ρ-zCDP with ``zcdp = (floor, a, b)``,
    else ``default``."""
    if isinstance(g, ZCDP):
        floor, a, b = zcdp
        return max(floor, g.rho + a * math.sqrt(g.rho) + b)
    return (
        per_epsilon * g.epsilon if isinstance(g, PureDP | ApproxDP) and g.epsilon > 0 else default
    )


def _plot_probability(
    ax: Any, x: FloatArray, p: FloatArray, label: str, color: str, ls: str
) -> None:
    """One probability curve on a log axis (floored at 10⁻¹⁶)."""
    ax.plot(x, np.maximum(p, 1e-16), color=color, ls=ls, lw=1.8, label=label)


def _finish_log_axes(ax: Any, bottom: float, xlabel: str, ylabel: str, title: str) -> None:
    """Log-scale probabilities from ``bottom`` to 1.5, labels, legend outside, title."""
    ax.set_yscale("log")
    ax.set_ylim(bottom, 1.5)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    legend_outside(ax)
    ax.set_title(title, fontsize=10)


def _epsilon_delta_figure(g: Guarantee, cite: Citations) -> FigureBlock:
    from privtab.semantics.summary import epsilon_delta_curves

    top = _epsilon_axis_end(g, 4.0, 20.0, (10.0, 8.0, 4.0))
    eps = np.linspace(0.0, top, 121)
    curves = epsilon_delta_curves(g, eps)
    fig, ax = new_figure(9.0, 4.4)
    labels = {
        "approx_dp": ("(ε, δ)-DP curve", "#d62728", "-"),
        "pbdp": ("probability of a bad outcome (pbdp curve)", "#1f77b4", "-"),
        "zcdp_tail": ("Rényi / zCDP upper bound on it", "#000000", "--"),
    }
    for name, vals in curves.items():
        lab, color, ls = labels[name]
        _plot_probability(ax, eps, vals, lab, color, ls)
    _finish_log_axes(
        ax,
        1e-12,
        "ε (odds of a correct guess change by at most a factor e^ε)",
        "δ",
        f"Privacy-loss curves of {_short_words(g)}",
    )
    probe = [e for e in (2.0, 5.0, 10.0) if e <= top] or [top / 2]
    vals = epsilon_delta_curves(g, probe)["pbdp"]
    parts = [
        f"with probability at most {pct_up(float(v))} the odds change by more than "
        f"e^{e:g} ≈ {math.exp(e):,.0f}×"
        for e, v in zip(probe, vals, strict=True)
    ]
    text = (
        "A guarantee allows a continuum of (ε, δ) pairs. The blue curve, probabilistically "
        f"bounded DP (pbdp, {cite.cite('semantics', '§5.2')}), has the most direct reading: "
        "no analysis of the published data can change the odds of a correct guess about one "
        "person by more than a factor e^ε, except with probability δ. For this guarantee, "
        + "; ".join(parts)
        + ". The red curve is the classical (ε, δ)-DP curve, whose δ has no such simple "
        "meaning"
        + (
            "; the dashed black curve is the conservative bound that Rényi/zCDP accounting "
            f"gives for the pbdp curve ({cite.cite('semantics', '§5.3')})."
            if "zcdp_tail" in curves
            else "."
        )
    )
    return FigureBlock("fig-epsilon-delta", "ε–δ curves", png(fig), text)


def _bayes_figure(g: Guarantee, cite: Citations) -> FigureBlock:
    from privtab.semantics.summary import POSTERIOR_ROWS, posterior_bounds

    top = _epsilon_axis_end(g, 3.0, 12.0, (6.0, 6.0, 2.0))
    eps = np.linspace(0.05, top, 90)
    rows = posterior_bounds(g, np.exp(eps))
    fig, ax = new_figure(9.0, 4.4)
    style = {
        "rest_known": ("#2ca02c", "-"),
        "arbitrary_prior": ("#000000", "--"),
        "pbdp": ("#1f77b4", "-"),
        "gaussian_pbdp": ("#d62728", ":"),
        "pure_bound": ("#9467bd", "-"),
    }
    for name, vals in rows.items():
        if name in ("ratios", "epsilons"):
            continue
        color, ls = style[name]
        _plot_probability(ax, eps, vals, POSTERIOR_ROWS[name].label, color, ls)
    _finish_log_axes(
        ax,
        1e-8,
        "ε (posterior ratio threshold e^ε)",
        "P[posterior ratio > e^ε]",
        "Bayesian posterior-to-posterior semantics",
    )
    general, assumed = posterior_at_ratio(g, 10.0)
    assumption = "".join(
        f" If {info.assumption}, the bound is {pct_up(value)} ({info.label}, green)."
        for info, value in assumed
    )
    text = (
        "Compare what an attacker believes about Jessie after seeing the release with what "
        "they would believe had Jessie's record been replaced by statistical information "
        "about people like her. The curves bound the probability that the release makes "
        "the first belief more than e^ε times the second. For example, whatever the "
        "attacker knew or assumed beforehand, the chance that the release makes some belief "
        f"about Jessie 10 times stronger is at most {pct_up(general)}.{assumption} The red "
        "dotted curve is one mechanism (the Gaussian), not a bound "
        f"({cite.cite('semantics', '§7.3–7.4')})."
    )
    return FigureBlock("fig-bayes", "Posterior-to-posterior bounds", png(fig), text)


def posterior_at_ratio(g: Guarantee, ratio: float) -> tuple[float, list[tuple[Any, float]]]:
    """The bound on ``P[posterior ratio > ratio]`` that holds for any attacker (the
    smallest of the bounds without an assumption), and each bound that needs one, with
    its :class:`~privtab.semantics.summary.BoundInfo` (issue 31: the sentence quoted 10 %
    — the bound for an attacker who knows everyone else — as if it held in general)."""
    from privtab.semantics.summary import POSTERIOR_ROWS, posterior_bounds

    probe = posterior_bounds(g, [ratio])
    rows = {k: float(v[0]) for k, v in probe.items() if k not in ("ratios", "epsilons")}
    general = min(
        v
        for k, v in rows.items()
        if POSTERIOR_ROWS[k].kind == "bound" and not POSTERIOR_ROWS[k].assumption
    )
    assumed = [
        (POSTERIOR_ROWS[k], v)
        for k, v in rows.items()
        if POSTERIOR_ROWS[k].assumption and v < general
    ]
    return general, assumed


def _discrete_gaussian_figure(rho: float, dg_queries: int, cite: Citations) -> FigureBlock:
    from privtab.semantics.discrete_gaussian import discrete_gaussian_tradeoff
    from privtab.semantics.power import gaussian_power

    fig, ax = new_figure(9.0, 4.4)
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
    legend_outside(ax)
    ax.set_title(f"Discrete vs continuous Gaussian, total ρ = {round_up_sig(rho)}", fontsize=10)
    text = (
        "The 2020 Census adds discrete (integer) Gaussian noise, not the continuous kind "
        f"({cite.cite('cks')}). These curves are the exact attacker power against discrete "
        "Gaussian noise, computed from its probability mass function. When one query spends "
        f"the whole budget the curves differ by up to {gaps[0][1]:.3f}; when the budget is "
        f"spread over {gaps[1][0]} queries the largest difference is {gaps[1][1]:.4f}, so "
        "the simple Gaussian formulas describe the real mechanism well "
        f"({cite.cite('semantics', '§6.3')})."
    )
    return FigureBlock("fig-discrete-gaussian", "Discrete Gaussian", png(fig), text)


def _prior_posterior_figure(eps: float, cite: Citations) -> FigureBlock:
    from matplotlib.figure import Figure

    from privtab.semantics.bayes import (
        laplace_binary_sum_bounds,
        posterior_interval,
        randomized_response_bounds,
    )

    fig = Figure(figsize=(10.5, 4.2), dpi=100, layout="constrained")
    ax1, ax2, ax3 = fig.subplots(1, 3)
    prior = np.linspace(0.0, 1.0, 101)
    lo, hi = posterior_interval(prior, eps)
    raw_lo, raw_hi = posterior_interval(prior, eps, bound="raw", clip=False)
    ax1.fill_between(prior, lo, hi, color="#1f77b4", alpha=0.3, label="possible posterior")
    ax1.plot(prior, raw_hi, "--", color="#7f7f7f", lw=1, label="e^±ε·π (raw)")
    ax1.plot(prior, raw_lo, "--", color="#7f7f7f", lw=1)
    ax1.set_ylim(0.0, 1.0)
    legend_outside(ax1, where="top", columns=1)
    ax1.plot(prior, prior, color="#1f77b4")
    ax1.set_xlabel("prior probability π(A)")
    ax1.set_ylabel("possible posterior π(A | s)")
    n = 10
    s = np.linspace(-8, n + 8, 241)
    l, u = laplace_binary_sum_bounds(s, n, eps)
    ax2.plot(s, l, label="lower bound", color="#2ca02c")
    ax2.plot(s, u, label="upper bound", color="#d62728")
    ax2.set_yscale("log")
    ax2.set_xlabel(f"noisy sum s of {n} yes/no answers")
    legend_outside(ax2, where="top", columns=2)
    ns = np.arange(0, 21)
    rl, ru = randomized_response_bounds(ns, eps)
    ax3.plot(ns, rl, "o-", ms=3, color="#2ca02c", label="lower")
    ax3.plot(ns, ru, "o-", ms=3, color="#d62728", label="upper")
    ax3.set_yscale("log")
    ax3.set_xlabel("number of randomized responses n")
    legend_outside(ax3, where="top", columns=2)
    for ax in (ax1, ax2, ax3):
        ax.grid(True, alpha=0.3)
    p_lo, p_hi = posterior_interval(0.02, eps)
    text = (
        "Pure ε-DP also limits what anyone — attacker or legitimate analyst — can learn "
        "relative to what they believed before (prior-to-posterior; "
        f"{cite.cite('inferential', 'Theorem 6.4')}). Left: whatever the data model, a "
        "belief held with probability π before the release lies between "
        "max(e^−ε·π, 1 − e^ε·(1−π)) and min(e^ε·π, 1 − e^−ε·(1−π)) afterwards when one "
        "record is at stake (the theorem applied to the event and to its opposite, so the "
        "two statements agree; dashed: e^±ε·π alone); a 2% belief stays between "
        f"{pct_up(float(p_lo))} and {pct_up(float(p_hi))}. Middle and right: without knowing the "
        "data, the probability of each possible released value is already confined to a "
        "band, for a noisy count of 10 yes/no answers "
        f"({cite.cite('inferential', 'Example 4.4')}) and for randomized response "
        f"({cite.cite('inferential', 'Example 4.5')})."
    )
    return FigureBlock("fig-prior-posterior", "Prior-to-posterior limits", png(fig), text)


# ---------------------------------------------------------------------------- tables


def _fmt(x: Any) -> str:
    if x is None:
        return "—"
    v = float(x)
    if v == 0.0:
        return "0"
    return f"{v:.4f}" if v >= 1e-3 else f"{v:.2e}"


def _cites(refs: Sequence[tuple[str, str]], cite: Citations) -> str:
    return "; ".join(cite.cite(k, w) for k, w in refs)


def _power_section(
    pw: Mapping[str, FloatArray], levels: Sequence[float], cite: Citations, h: str
) -> str:
    from privtab.semantics.summary import BOUNDS, KINDS

    rows = [[f"{a:g}"] + [_fmt(pw[k][i]) for k in pw] for i, a in enumerate(levels)]
    legend = table_html(
        ["column", "what it is", "kind", "source"],
        [
            [
                BOUNDS[k].label,
                BOUNDS[k].description,
                KINDS[BOUNDS[k].kind],
                _cites(BOUNDS[k].refs, cite),
            ]
            for k in pw
        ],
        raw=(3,),
    )
    return (
        f"<{h}>Maximum power of an attacker's test</{h}>"
        "<p>The largest rate at which a test can detect one person's real record, at each "
        "rate α of false accusations (significance level).</p>"
        + table_html(["level α", *[BOUNDS[k].label for k in pw]], rows)
        + legend
    )


def _posterior_section(post: Mapping[str, Any], cite: Citations, h: str) -> str:
    from privtab.semantics.summary import POSTERIOR_ROWS

    keys = [k for k in post if k not in ("ratios", "epsilons")]
    rows = [
        [f"{r:g}", f"{math.log(r):.3f}"] + [_fmt(post[k][i]) for k in keys]
        for i, r in enumerate(post["ratios"])
    ]
    legend = table_html(
        ["column", "what it assumes", "source"],
        [
            [
                POSTERIOR_ROWS[k].label,
                POSTERIOR_ROWS[k].description,
                _cites(POSTERIOR_ROWS[k].refs, cite),
            ]
            for k in keys
        ],
        raw=(2,),
    )
    return (
        f"<{h}>Probability that a posterior moves by more than a ratio</{h}>"
        + table_html(["ratio", "ε = ln ratio", *[POSTERIOR_ROWS[k].label for k in keys]], rows)
        + legend
    )


def _p2p_section(p2p: dict[str, Any] | None, cite: Citations, h: str) -> str:
    if p2p is None:
        return ""
    return (
        f"<{h}>Where a belief can move (prior to posterior)</{h}>"
        f"<p>{_p2p_caption(p2p, cite)}</p>"
        + table_html(
            ["prior π", "lowest posterior", "highest posterior"],
            [
                [f"{p:g}", _fmt(p2p["lower"][i]), _fmt(p2p["upper"][i])]
                for i, p in enumerate(p2p["priors"])
            ],
        )
    )


def _p2p_caption(p2p: dict[str, Any], cite: Citations) -> str:
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
    return (
        html.escape(
            f"An event about data within distance {p2p['distance']} (records) with prior "
            f"probability π has a posterior in this interval, {where}, whatever the data "
            f"model — {form}, t = {p2p['radius']:.4g} "
        )
        + f"({cite.cite('inferential', 'Theorem 6.4, eq. (12)')})."
    )


def _guarantee_sections(
    g: Guarantee,
    levels: Sequence[float],
    ratios: Sequence[float],
    dg_queries: int,
    p2p: dict[str, Any] | None,
    cite: Citations,
    *,
    release_power: FloatArray | None = None,
    h: str = "h2",
) -> list[str]:
    from privtab.semantics.summary import posterior_bounds, power_bounds

    pw = dict(power_bounds(g, levels, dg_queries=dg_queries))
    if release_power is not None:
        pw["release_pld"] = np.asarray(release_power)
    return [
        _power_section(pw, levels, cite, h),
        _posterior_section(posterior_bounds(g, ratios), cite, h),
        _p2p_section(p2p, cite, h),
    ]


def _figures(
    g: Guarantee, dg_queries: int, cite: Citations, runs: Sequence[ReleaseRun] = ()
) -> list[FigureBlock]:
    figs = [_power_figure(g, dg_queries, cite, runs), _epsilon_delta_figure(g, cite)]
    figs.append(_bayes_figure(g, cite))
    if isinstance(g, ZCDP) and g.rho > 0:
        figs.append(_discrete_gaussian_figure(g.rho, dg_queries, cite))
    if isinstance(g, PureDP) and g.epsilon > 0:
        figs.append(_prior_posterior_figure(g.epsilon, cite))
    return figs


def guarantee_report_html(
    g: Guarantee,
    levels: Sequence[float],
    ratios: Sequence[float],
    *,
    dg_queries: int = 1,
    title: str | None = None,
    prior_posterior: dict[str, Any] | None = None,
) -> str:
    """The full HTML report for one guarantee (headline, tables, figures, references).

    ``prior_posterior`` is a :func:`~privtab.semantics.summary.prior_posterior_bounds`
    result (default: the coherent bounds at priors 0.05, 0.4, 0.75, distance 1)."""
    from privtab.semantics.summary import prior_posterior_bounds

    cite = Citations()
    head = guarantee_headline(g, cite)
    p2p = prior_posterior if prior_posterior is not None else prior_posterior_bounds(g)
    sections = _guarantee_sections(g, levels, ratios, dg_queries, p2p, cite)
    figs = _figures(g, dg_queries, cite)
    return _semantics_page(
        title or f"What {_short_words(g)} protects against",
        guarantee_words(g),
        sections,
        figs,
        cite,
        headline=head,
    )


def release_report_html(
    release: Mapping[str, Any],
    runs: Sequence[ReleaseRun],
    name: str,
    levels: Sequence[float],
    ratios: Sequence[float],
    *,
    dg_queries: int = 1,
    prior_posterior: Mapping[str, Any] | None = None,
) -> str:
    """The report for a SafeTab-P release: every run named, with its guarantee and the power
    against its worst-case person (``release_pld``); figures for the release's guarantee.

    ``release`` is ``release.json``'s object, ``runs`` its runs
    (:func:`~privtab.semantics.release.load_release_runs`), ``name`` what to call the
    release (its folder); ``prior_posterior`` the keyword arguments of
    :func:`~privtab.semantics.summary.prior_posterior_bounds` for every run."""
    from privtab.release.document import parse_release_document
    from privtab.semantics.summary import prior_posterior_bounds
    from privtab.tabulate.report_privacy import headline

    cite = Citations()
    top = headline(release, cite)
    g = parse_release_document(dict(release)).guarantee.to_guarantee()
    opts = dict(prior_posterior or {})
    sections: list[str] = []
    for run in runs:
        sections.append(
            f"<h2>{html.escape(run.name)}: "
            f"{html.escape(guarantee_words(run.guarantee, run.exact))}</h2>"
        )
        sections += _guarantee_sections(
            run.guarantee,
            levels,
            ratios,
            dg_queries,
            prior_posterior_bounds(run.guarantee, **opts),
            cite,
            release_power=run.pld.power(levels),
            h="h3",
        )
    banner = (
        ""
        if release.get("private", True)
        else "NOT PRIVATE — this is a test release (seeded or noise-off): its counts carry no "
        "protection; the bounds below describe its plan only."
    )
    return _semantics_page(
        f"What the SafeTab-P release {name} protects against",
        " · ".join(f"{r.name}: {_short_words(r.guarantee, r.exact)}" for r in runs),
        sections,
        _figures(g, dg_queries, cite, runs),
        cite,
        headline=f'<p class="headline">{top.sentence}</p><p class="sub">{top.others}</p>',
        banner=banner,
    )


# ---------------------------------------------------------------------------- topdown


def _topdown_headline(
    alloc: Allocation, concerns: Sequence[Concern], rhos: Sequence[float], cite: Citations
) -> str:
    from privtab.accounting import zcdp_epsilon
    from privtab.semantics.renyi import zcdp_power

    exact_total = alloc.rho_per_block()["total"]
    total = float(exact_total)
    low_rho, low = min(zip(rhos, concerns, strict=True), key=lambda t: t[0])
    eps = float(zcdp_epsilon(total, HEADLINE_DELTA, "optimal")) if total > 0 else 0.0
    p05 = float(np.asarray(zcdp_power(low_rho, [0.05]))[0])
    what = html.escape(low.description or low.label())
    return (
        f'<p class="headline">{html.escape(alloc.name)} spends ρ = {exact_or_up(exact_total)} '
        "per block "
        f"(zero-concentrated DP); for δ = {power_of_ten(HEADLINE_DELTA)} that means "
        f"ε ≤ {round_up_sig(eps, 4)} ({cite.cite('cks')}).</p>"
        '<p class="sub">Most queries cannot reveal a given detail about a person, so the '
        "budget that protects one concern is smaller: the smallest here is ρ = "
        f"{round_up_sig(low_rho, 4)} for concern {html.escape(low.name)} ({what}), against "
        "which an attacker accepting 5% false accusations succeeds at most "
        f"{pct_up(p05)} of the time ({cite.cite('semantics', '§8.2')}).</p>"
    )


def write_guarantee_report(
    path: str,
    g: Guarantee,
    release: tuple[Mapping[str, Any], Sequence[ReleaseRun], str],
    levels: Sequence[float],
    ratios: Sequence[float],
    *,
    dg_queries: int,
    prior_posterior: Mapping[str, Any],
    bounds: dict[str, Any] | None,
) -> str:
    """``privtab semantics --html PATH``: the report of a release's runs (``release``: its
    document, runs and name; with ``prior_posterior`` the options of the bounds) or, with
    no runs, of the guarantee ``g`` (with its computed prior-to-posterior ``bounds``);
    written atomically. Returns the path written."""
    doc, runs, name = release
    LOG.info(f"drawing the report for {g} ...")
    if runs:
        text = release_report_html(
            doc, runs, name, levels, ratios, dg_queries=dg_queries, prior_posterior=prior_posterior
        )
    else:
        text = guarantee_report_html(
            g, levels, ratios, dg_queries=dg_queries, prior_posterior=bounds
        )
    written = str(write_html(path, text))
    LOG.info(f"wrote {written}")
    return written


def write_topdown_report(
    path: str,
    alloc: Allocation,
    concerns: Sequence[Concern],
    levels: Sequence[float],
    ratios: Sequence[float],
) -> str:
    """``privtab semantics topdown --html PATH``: the allocation's report, written
    atomically. Returns the path written."""
    LOG.info("drawing the allocation report ...")
    written = str(write_html(path, topdown_report_html(alloc, concerns, levels, ratios)))
    LOG.info(f"wrote {written}")
    return written


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

    cite = Citations()
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
    names = [c.name for c in concerns]
    fig, ax = new_figure(9.0, 1.6 + 0.35 * len(concerns))
    ax.barh(names[::-1], rhos[::-1], color="#1f77b4")
    ax.axvline(float(per_block["total"]), color="#d62728", ls="--", label="ρ per block")
    ax.set_xlabel("ρ relevant to the concern (zero-concentrated DP)")
    legend_outside(ax)
    ax.set_title("Budget relevant to each concern", fontsize=10)
    low = min(zip(rhos, names, strict=True))
    figs.append(
        FigureBlock(
            "fig-concern-rho",
            "ρ per concern",
            png(fig),
            "The whole release spends ρ = "
            f"{exact_or_up(per_block['total'])} per block, but most queries cannot reveal a "
            "particular aspect of a person. Counting only the queries whose answers change "
            "when that aspect changes gives a much smaller budget for each concern; the "
            f"smallest here is ρ = {round_up_sig(low[0], 4)} ({html.escape(low[1])}; "
            f"{cite.cite('semantics', '§8')}).",
        )
    )
    fig, ax = new_figure(9.0, 4.4)
    a = PLOT_LEVELS
    ax.plot([0, 1], [0, 1], color="#bbbbbb", lw=1)
    for c, r in zip(concerns, rhos, strict=True):
        line = ax.plot(
            a, gaussian_power(r, a), lw=1.6, label=f"{c.name} (ρ = {round_up_sig(r, 4)})"
        )
        ax.plot(a, zcdp_power(r, a), lw=1, ls=":", color=line[0].get_color())
    ax.set_xlabel("significance level α")
    ax.set_ylabel("maximum power")
    legend_outside(ax)
    ax.set_title("Power per concern: Gaussian (solid), zCDP bound (dotted)", fontsize=10)
    p05 = float(np.asarray(gaussian_power(low[0], [0.05]))[0])
    figs.append(
        FigureBlock(
            "fig-concern-power",
            "Power per concern",
            png(fig),
            "For each concern, the solid curve is how often an attacker could detect the "
            "sensitive detail (at a given rate of false alarms) if the noise were Gaussian, "
            "and the dotted curve is the guarantee for any mechanism with the same ρ "
            f"({cite.cite('balle')}). For concern {html.escape(low[1])}, an attacker with a "
            f"5% false-alarm rate succeeds at most {pct_up(p05)} of the time — close to the 5% "
            "of a blind guess.",
        )
    )
    fig, ax = new_figure(9.0, 4.4)
    eps = np.linspace(0.05, 8.0, 80)
    for c, r in zip(concerns, rhos, strict=True):
        ax.plot(eps, np.maximum(pbdp_delta_gdp(math.sqrt(2 * r), eps), 1e-16), label=c.name)
    ax.set_yscale("log")
    ax.set_ylim(1e-8, 1.5)
    ax.set_xlabel("ε (posterior ratio threshold e^ε)")
    ax.set_ylabel("P[posterior ratio > e^ε]")
    legend_outside(ax)
    ax.set_title("Bayesian (pbdp) curve per concern, Gaussian mechanism", fontsize=10)
    d2 = float(np.asarray(pbdp_delta_gdp(math.sqrt(2 * low[0]), [2.0]))[0])
    figs.append(
        FigureBlock(
            "fig-concern-bayes",
            "Bayesian curves per concern",
            png(fig),
            "The probability that the release changes what an attacker believes about the "
            "sensitive detail by more than a factor e^ε, compared with a world where the "
            f"person's record was not used ({cite.cite('semantics', '§7.4.1')}). For concern "
            f"{html.escape(low[1])} the belief becomes more than e² ≈ 7.4 times stronger with "
            f"probability at most {pct_up(d2)}.",
        )
    )
    sections = [
        f"<p>Allocation: {html.escape(alloc.name)} — {cite.source(alloc.source)}</p>",
        "<h2>ρ by geographic level</h2>",
        table_html(["level", *alloc.universes], lvl_rows),
        "<h2>Concerns</h2>",
        table_html(
            ["concern", "protects", "ρ"]
            + [f"power at α = {x:g} (Gaussian / zCDP bound)" for x in levels],
            conc_rows,
        ),
    ]
    return _semantics_page(
        f"Fine-grained semantics: {alloc.name}",
        "ρ per concern",
        sections,
        figs,
        cite,
        headline=_topdown_headline(alloc, concerns, rhos, cite),
    )


def _semantics_page(
    title: str,
    subtitle: str,
    sections: Sequence[str],
    figs: Sequence[FigureBlock],
    cite: Citations,
    *,
    headline: str = "",
    banner: str = "",
) -> str:
    note = (
        "bounds from the semantics of differential privacy used for the 2020 Census "
        f"({cite.cite('semantics')})"
    )
    return page(
        title,
        subtitle,
        sections,
        figs,
        note=note,
        headline=headline,
        banner=banner,
        references=cite.html(),
    )
