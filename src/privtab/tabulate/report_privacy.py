"""The privacy part of ``report.html``: the headline sentence, the analyses, the ε(δ) curve.

Everything here comes from ``release.json`` alone — the public plan of each run and the
analyses the run computed at its δ (``runs.<scope>.privacy``, :func:`privtab.tabulate.analyse`)
— so it costs no privacy.

**Which number to quote.** Each analysis is a valid upper bound on the privacy loss of every
person (except ``rdp_paper``, marked ``"valid": false``), so a run is (ε, δ)-DP for the
smallest of them. Persons are in exactly one run (US or Puerto Rico: disjoint blocks), so
the release is (ε, δ)-DP for the largest of the runs' smallest bounds (parallel
composition; SafeTab seed Theorems 1 and 3). That number, rounded up, is the headline.

**The curve.** :func:`privacy_curves` recomputes every valid bound over a range of δ from the
plan (the PLD at the grid the run used) and takes the same minimum-then-maximum, pointwise:
the plotted curve is never above any valid bound, in particular never above the
zero-concentrated DP bound with the optimal conversion (Canonne, Kamath & Steinke 2020).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from privtab.accounting.guarantees import FloatArray
from privtab.report import (
    FigureBlock,
    legend_outside,
    new_figure,
    png,
    power_of_ten,
    round_up_sig,
    table_html,
)
from privtab.report.references import Citations
from privtab.tabulate.plan import ReleasePlan
from privtab.tabulate.report_text import ANALYSES, analysis_name, run_words

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "DEFAULT_DELTAS",
    "NOTHING_AHEAD",
    "NO_CURVES",
    "DrawnAhead",
    "Headline",
    "PldCurves",
    "PrivacyCurves",
    "headline",
    "plain_reading",
    "prefetch_pld_curves",
    "privacy_curves",
    "privacy_figure",
    "privacy_table",
    "runs_that_drew_noise",
    "tightest",
]

#: δ range of the curve: 10⁻¹⁵ … 10⁻², four points per decade (plus the release's own δ)
DEFAULT_DELTAS: FloatArray = np.geomspace(1e-15, 1e-2, 53)


def _valid(entry: Mapping[str, Any]) -> bool:
    eps = entry.get("epsilon")
    return entry.get("valid", True) is not False and isinstance(eps, int | float)


def runs_that_drew_noise(release: Mapping[str, Any]) -> dict[str, Any]:
    """``release`` with only the runs that have a privacy analysis: a run whose every level
    had an empty public domain drew no noise, is charged nothing and has no ε to state (a
    DE-only input leaves the Puerto Rico run empty)."""
    runs = {s: r for s, r in release["runs"].items() if any(map(_valid, r["privacy"].values()))}
    return {**release, "runs": runs}


def release_delta(release: Mapping[str, Any]) -> float:
    """The δ at which the run computed its analyses (``--delta``, 10⁻¹⁰ by default)."""
    ds = [
        float(a["delta"])
        for run in release["runs"].values()
        for a in run["privacy"].values()
        if isinstance(a.get("delta"), int | float) and a["delta"] > 0
    ]
    if not ds:
        raise ValueError("release.json: no analysis states a δ > 0")
    return max(ds)


# ----------------------------------------------------------------------------- headline


@dataclass(frozen=True)
class Headline:
    """The sentence to quote and what stands behind it."""

    epsilon: float  # the release's tightest valid ε at ``delta`` (unrounded)
    delta: float
    analysis: str  # the analysis that gives it
    scope: str  # the run that determines it (the largest of the runs' bounds)
    sentence: str  # HTML
    others: str  # HTML: what the other analyses are and why they are larger


def _guarantee_words(release: Mapping[str, Any]) -> str:
    g = release["guarantee"]
    if "zcdp" in g:
        return f"ρ = {_exact_or_up(g['zcdp'], 'rho')} zero-concentrated differential privacy"
    return f"ε = {_exact_or_up(g['pure'], 'epsilon')} pure differential privacy"


def _exact_or_up(body: Mapping[str, Any], key: str) -> str:
    """A guarantee as published: from its exact value (``rho_exact``), the exact decimal
    when short, else rounded up (:func:`privtab.accounting.exact.exact_or_up`); a document
    without the exact value: its float rounded up."""
    from fractions import Fraction

    from privtab.accounting.exact import exact_or_up

    exact = body.get(f"{key}_exact")
    if isinstance(exact, str):
        return exact_or_up(Fraction(exact))
    return round_up_sig(float(body[key]))


def _run_best(run: Mapping[str, Any]) -> tuple[str, float]:
    valid = {k: float(a["epsilon"]) for k, a in run["privacy"].items() if _valid(a)}
    key = min(valid, key=lambda k: valid[k])
    return key, valid[key]


def tightest(release: Mapping[str, Any]) -> tuple[str, str, float, float]:
    """The release's tightest valid bound: its run, analysis, ε and δ (the largest over
    the runs of each run's smallest valid ε, at the release's δ)."""
    best = {s: _run_best(r) for s, r in release["runs"].items()}
    scope = max(best, key=lambda s: best[s][1])
    key, eps = best[scope]
    return scope, key, eps, release_delta(release)


def headline(release: Mapping[str, Any], cite: Citations) -> Headline:
    """The one sentence a non-specialist can repeat, and the line that follows it."""
    scope, key, eps, delta = tightest(release)
    why = {
        "pld": "the tightest valid bound privtab can prove, from the worst-case person's "
        "privacy-loss distribution",
    }.get(key, f"the tightest valid bound privtab can prove, from {analysis_name(key)}")
    subject = (
        "This release satisfies"
        if release.get("private", True)
        else "This test release is NOT private; made with secure noise, its plan would satisfy"
    )
    if key == "pure":
        sentence = (
            f"{subject} {_guarantee_words(release)}: no analysis privtab can prove does "
            f"better, even allowing δ = {power_of_ten(delta)}."
        )
    else:
        sentence = (
            f"{subject} {_guarantee_words(release)}; for δ = {power_of_ten(delta)} that "
            f"means ε ≤ {round_up_sig(eps, 4)} ({why})."
        )
    return Headline(
        eps, delta, key, scope, html.escape(sentence), _others(release, scope, key, cite)
    )


def plain_reading(release: Mapping[str, Any], cite: Citations) -> str:
    """What the release's guarantee means in attack terms, in words (HTML): the most an
    attacker testing whether one person's record was used can succeed at a 5 % false
    accusation rate, and how likely the release makes a belief about one person 10 times
    (and 10^k times) stronger — the bounds that hold for any attacker, and the one that
    assumes the attacker knows everyone else named as such. From the guarantee alone
    (:mod:`privtab.semantics`: valid for every mechanism with it)."""
    from privtab.release.document import parse_release_document
    from privtab.semantics.report import pct_up, posterior_at_ratio
    from privtab.semantics.summary import power_bounds, tightest_power

    g = parse_release_document(dict(release)).guarantee.to_guarantee()
    p05 = float(tightest_power(power_bounds(g, [0.05]))[0])
    general, assumed = posterior_at_ratio(g, 10.0)
    if_known = "".join(f" ({pct_up(v)} if {info.assumption})" for info, v in assumed)
    far = next((k for k in range(2, 13) if posterior_at_ratio(g, 10.0**k)[0] < 0.05), None)
    far_text = (
        ""
        if far is None
        else f"; 10^{far} times stronger: at most {pct_up(posterior_at_ratio(g, 10.0**far)[0])}"
    )
    return (
        "<p>What this means for one person, whatever else the attacker knows (bounds for "
        f"every mechanism with this guarantee, {cite.cite('semantics', '§§6–7')}): someone "
        "who tests whether one particular person's record was used, and accepts wrongly "
        f"accusing 5% of the people they test, succeeds at most {pct_up(p05)} of the time. "
        "The chance that the release makes some belief about one person 10 times stronger "
        "than it would be had their record been replaced by information about people like "
        f"them is at most {pct_up(general)}{if_known}{far_text}. A guarantee this size "
        "protects mainly against large changes of belief, not against detecting that a "
        "record was used.</p>"
        if p05 > 0.5
        else "<p>What this means for one person, whatever else the attacker knows (bounds "
        f"for every mechanism with this guarantee, {cite.cite('semantics', '§§6–7')}): "
        "someone who tests whether one particular person's record was used, and accepts "
        f"wrongly accusing 5% of the people they test, succeeds at most {pct_up(p05)} of "
        "the time; the chance that the release makes some belief about one person 10 times "
        f"stronger is at most {pct_up(general)}{if_known}{far_text}.</p>"
    )


def _others(release: Mapping[str, Any], scope: str, best: str, cite: Citations) -> str:
    run = release["runs"][scope]
    parts = [
        f"{round_up_sig(float(a['epsilon']), 4)} ({html.escape(analysis_name(k, a))})"
        for k, a in sorted(run["privacy"].items(), key=lambda kv: float(kv[1]["epsilon"]))
        if k != best and _valid(a)
    ]
    defn = run["plan"].get("privacy_defn")
    if defn == "zcdp":
        reason = (
            "they start from the total ρ alone and must hold for every mechanism with that ρ "
            f"({cite.cite('bun-steinke')}; {cite.cite('cks')}), while the privacy-loss "
            "distribution follows this release's exact noise, count by count "
            f"({cite.cite('doroshenko')})"
        )
    else:
        reason = (
            "adding the levels' ε assumes every count's noise is at its worst at once and the "
            "Rényi bounds summarise each level by one curve, while the privacy-loss "
            "distribution follows this release's exact noise, count by count "
            f"({cite.cite('doroshenko')})"
        )
    text = (
        f"Other analyses of the {html.escape(run_words(scope, release))} give larger ε — "
        + ", ".join(parts)
        + f" — because {reason}."
    )
    rest = [s for s in release["runs"] if s != scope]
    if rest:
        others = "; ".join(
            f"{html.escape(run_words(s, release))}: ε ≤ "
            f"{round_up_sig(_run_best(release['runs'][s])[1], 4)}"
            for s in rest
        )
        text += (
            " Each person is in exactly one run, so the release's guarantee is the larger of "
            f"the runs' ({others}; {cite.cite('safetab', 'Theorems 1 and 3')})."
        )
    return text


# ----------------------------------------------------------------------------- table


def privacy_table(release: Mapping[str, Any]) -> str:
    """Every analysis of every run: name, ε at the release's δ, δ, what it starts from."""
    rows = []
    for scope, run in release["runs"].items():
        best, _ = _run_best(run)
        for k, a in sorted(run["privacy"].items(), key=lambda kv: float(kv[1]["epsilon"])):
            valid = _valid(a)
            eps = float(a["epsilon"])
            delta = float(a.get("delta", 0.0))
            rows.append(
                [
                    run_words(scope, release),
                    analysis_name(k, a) + (" — tightest" if k == best else ""),
                    round_up_sig(eps, 6) if math.isfinite(eps) else "∞",
                    power_of_ten(delta),
                    ANALYSES.get(k, ("", str(a.get("method", ""))))[1]
                    + ("" if valid else " — understates the loss; shown only for comparison"),
                ]
            )
    return table_html(["run", "analysis", "ε (rounded up)", "δ", "starts from"], rows)


# ----------------------------------------------------------------------------- curves


@dataclass(frozen=True)
class PrivacyCurves:
    """The data of the ε(δ) figure (what :func:`privacy_figure` draws).

    ``bounds[(scope, analysis)]`` is every valid bound of every run at ``deltas``;
    ``run_tightest[scope]`` their pointwise minimum per run; ``tightest`` the release's
    curve, the pointwise maximum of the runs' minima (persons are in one run only)."""

    deltas: FloatArray
    bounds: dict[tuple[str, str], FloatArray]
    run_tightest: dict[str, FloatArray]
    tightest: FloatArray


def _bound_function(
    key: str, plan: ReleasePlan, entry: Mapping[str, Any], known: PldCurves
) -> Callable[[FloatArray], FloatArray] | None:
    """ε(δ) of one analysis of a run, recomputed from its plan (None: not drawable)."""
    from privtab.accounting.conversions import rdp_epsilon_order, zcdp_epsilon
    from privtab.tabulate.privacy import plan_rdp

    total = float(plan.total_budget)
    if key.startswith("zcdp_") and key[5:] in ("analytic", "grid", "optimal"):
        method: Any = key[5:]
        return lambda d: np.array([float(zcdp_epsilon(total, float(x), method)) for x in d])
    if key == "pure":
        return lambda d: np.full(d.shape, total)
    if key in ("rdp", "rdp_grid"):
        curve = plan_rdp(plan)
        how: Literal["optimal", "grid"] = "optimal" if key == "rdp" else "grid"
        return lambda d: np.array([rdp_epsilon_order(curve, float(x), how)[0] for x in d])
    if key == "pld":
        grid = float(entry.get("grid", 1e-3))
        return lambda d: known.get(plan, grid, d)
    return None


def curve_deltas(delta: float) -> FloatArray:
    """The δ of the curve: :data:`DEFAULT_DELTAS` and the release's own δ."""
    return np.unique(np.append(DEFAULT_DELTAS, delta))


def _plan_key(plan: ReleasePlan, grid: float) -> tuple[str, float]:
    return json.dumps(plan.to_dict(), sort_keys=True, default=str), grid


@dataclass(frozen=True)
class PldCurves:
    """ε(δ) curves of privacy loss distributions computed ahead of the report, by plan and
    grid (:func:`prefetch_pld_curves`). :meth:`get` returns a known curve when it was
    computed for the same plan, grid and δs, and solves it otherwise. Public plans only:
    computing them early costs no privacy."""

    curves: Mapping[tuple[str, float], tuple[FloatArray, FloatArray]]

    def get(self, plan: ReleasePlan, grid: float, deltas: FloatArray) -> FloatArray:
        from privtab.tabulate.privacy import plan_pld

        known = self.curves.get(_plan_key(plan, grid))
        if known is not None and np.array_equal(known[0], deltas):
            return known[1]
        return np.asarray(plan_pld(plan, grid=grid).epsilon_curve(deltas), dtype=np.float64)


NO_CURVES = PldCurves({})
"""No curve computed ahead: the report solves every one."""


@dataclass(frozen=True)
class DrawnAhead:
    """Figures drawn ahead of the report, while the levels run (:func:`privtab.tabulate.
    report.draw_ahead`): figure id → (the data it shows, its PNG). The report reuses a
    PNG only for exactly the data it would draw; anything else is drawn then. Public
    plan data only: drawing early costs no privacy."""

    pngs: dict[str, tuple[object, bytes]] = field(default_factory=dict)
    record: bool = False
    """Keep every figure drawn here (what :func:`~privtab.tabulate.report.draw_ahead`
    does)."""

    def png(self, ident: str, data: object, draw: Callable[[], Figure]) -> bytes:
        """The PNG of figure ``ident`` showing ``data``: drawn ahead, or ``draw()`` now."""
        ahead = self.pngs.get(ident)
        if ahead is not None and ahead[0] == data:
            return ahead[1]
        image = png(draw())
        if self.record:
            self.pngs[ident] = (data, image)
        return image


NOTHING_AHEAD = DrawnAhead()
"""No figure drawn ahead: the report draws every one."""


def prefetch_pld_curves(plans: Iterable[ReleasePlan], delta: float, grid: float) -> PldCurves:
    """The report's PLD curves of ``plans`` at ``delta``'s δ range (a run computes them in a
    background thread while it tabulates, and hands them to the report). A plan whose
    curve cannot be computed is left out: the report solves it and reports the error
    itself if it needs that curve (a run that drew no noise is not drawn at all)."""
    from privtab.tabulate.privacy import plan_pld

    deltas = curve_deltas(delta)
    out: dict[tuple[str, float], tuple[FloatArray, FloatArray]] = {}
    for plan in plans:
        try:
            curve = plan_pld(plan, grid=grid).epsilon_curve(deltas)
        except Exception:  # the report recomputes the curve and reports the error
            continue
        out[_plan_key(plan, grid)] = (deltas, np.asarray(curve, dtype=np.float64))
    return PldCurves(out)


def privacy_curves(
    release: Mapping[str, Any], deltas: FloatArray | None = None, known: PldCurves = NO_CURVES
) -> PrivacyCurves:
    """Every valid bound of every run over ``deltas`` (default :data:`DEFAULT_DELTAS` and the
    release's δ), and their pointwise minimum per run and maximum over runs; PLD curves
    already in ``known`` (same plan, grid and δs) are not solved again."""
    d = (
        curve_deltas(release_delta(release))
        if deltas is None
        else np.unique(np.append(deltas, release_delta(release)))
    )
    bounds: dict[tuple[str, str], FloatArray] = {}
    run_tightest: dict[str, FloatArray] = {}
    for scope, run in release["runs"].items():
        plan = ReleasePlan.from_dict(run["plan"])
        mine = []
        for key, entry in run["privacy"].items():
            fn = _bound_function(key, plan, entry, known) if _valid(entry) else None
            if fn is not None:
                bounds[(scope, key)] = fn(d)
                mine.append(bounds[(scope, key)])
        run_tightest[scope] = np.min(np.vstack(mine), axis=0)
    tightest = np.max(np.vstack(list(run_tightest.values())), axis=0)
    return PrivacyCurves(d, bounds, run_tightest, tightest)


_COLORS = {
    "pld": "#1f77b4",
    "zcdp_optimal": "#2ca02c",
    "zcdp_grid": "#9467bd",
    "zcdp_analytic": "#d62728",
    "pure": "#d62728",
    "rdp": "#2ca02c",
    "rdp_grid": "#9467bd",
}
_STYLES = ["-", ":", "--", "-."]


def privacy_figure(
    release: Mapping[str, Any],
    curves: PrivacyCurves,
    top: Headline | tuple[float, float],
    cite: Citations,
    ahead: DrawnAhead = NOTHING_AHEAD,
) -> FigureBlock:
    """The release's ε(δ): the tightest valid bound (thick), every bound (thin), the
    release's point ``top`` (its headline, or its δ and ε); a PNG in ``ahead`` is reused
    when it shows the same curves, point and runs."""
    delta, eps = (top.delta, top.epsilon) if isinstance(top, Headline) else top
    runs = tuple((s, run_words(s, release)) for s in release["runs"])
    data = (
        runs,
        _exactly(curves.deltas),
        tuple((s, k, _exactly(e)) for (s, k), e in curves.bounds.items()),
        _exactly(curves.tightest),
        delta,
        eps,
    )
    image = ahead.png("fig-privacy-curve", data, lambda: _draw_privacy(runs, curves, delta, eps))
    text = (
        "The release's privacy guarantee as a curve: for every δ, an ε such that the release "
        "is (ε, δ)-differentially private for every person. The thick line is the smallest "
        "valid bound at each δ (the largest over the runs, since each person is in one run "
        "only); the thin lines are the individual analyses, one line style per run. "
        "ε grows as δ shrinks because δ is the probability allowed for the bound to fail: "
        "a smaller δ has to cover rarer, more extreme draws of the noise, under which the "
        "published numbers say more about a person, so the bound ε must be larger. The "
        "privacy-loss distribution follows the exact noise of the release "
        f"({cite.cite('doroshenko')}); the zero-concentrated DP conversions hold for "
        f"every mechanism with the same ρ ({cite.cite('cks')}; {cite.cite('bun-steinke')})."
    )
    return FigureBlock("fig-privacy-curve", "Privacy-loss curve ε(δ)", image, text)


def _exactly(a: FloatArray) -> tuple[str, tuple[int, ...], bytes]:
    """An array as a comparable value: equal exactly when the arrays are identical."""
    return a.dtype.str, a.shape, a.tobytes()


def _draw_privacy(
    runs: tuple[tuple[str, str], ...], curves: PrivacyCurves, delta: float, eps: float
) -> Figure:
    from matplotlib.lines import Line2D

    fig, ax = new_figure(10.0, 4.8)
    scopes = [s for s, _ in runs]
    style = {s: _STYLES[i % len(_STYLES)] for i, s in enumerate(scopes)}
    for (scope, key), bound in curves.bounds.items():
        ax.plot(curves.deltas, bound, lw=1.0, ls=style[scope], color=_COLORS.get(key, "#7f7f7f"))
    order = list(ANALYSES)
    keys = sorted(
        {k for _, k in curves.bounds},
        key=lambda k: order.index(k) if k in order else len(order),
    )
    ax.plot(curves.deltas, curves.tightest, lw=3.2, color="#000000", alpha=0.75)
    ax.plot([delta], [eps], "o", color="#000000", ms=6)
    ax.annotate(
        f"ε ≤ {round_up_sig(eps, 4)} at δ = {power_of_ten(delta)}",
        (delta, eps),
        xytext=(10, 12),
        textcoords="offset points",
        fontsize=9,
    )
    handles = [Line2D([], [], color="#000000", lw=3.2, alpha=0.75)]
    labels = ["the release: tightest valid bound"]
    handles += [Line2D([], [], color=_COLORS.get(k, "#7f7f7f"), lw=1.2) for k in keys]
    labels += [analysis_name(k) for k in keys]
    if len(scopes) > 1:
        handles += [Line2D([], [], color="#555555", lw=1.0, ls=style[s]) for s in scopes]
        labels += [words for _, words in runs]
    legend_outside(ax, handles, labels)
    ax.set_xscale("log")
    ax.set_xlabel("δ (probability that the bound on ε may fail)")
    ax.set_ylabel("ε")
    return fig
