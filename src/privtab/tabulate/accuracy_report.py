"""``privtab safetab accuracy``: the exact accuracy report, and the simulation beside it.

:func:`build_accuracy` computes, for the levels of a plan, the exact figures of
:mod:`privtab.tabulate.accuracy` on a grid of group sizes n — or on the true group sizes of
an input, when one is given — and, with ``trials > 0``, the Bureau-style simulation of
:mod:`privtab.tabulate.accuracy_sim` on that input. :func:`write_accuracy` writes a folder:

- ``accuracy.json`` — everything (the ``--json`` output);
- ``exact-<scope>-<level>.csv`` — one row per n: P(workload | n), P(suppressed | n), the
  MOE of T1 for each workload and the 0.95-quantile of the mixture, expected published
  rows (and the number of groups of that size);
- ``simulation-<scope>-<level>.csv`` — per size bucket and workload: simulated vs exact
  selections, suppressions, MOE95 and errors within the exact MOE;
- ``accuracy.html`` — the tables and the plots (probability of each workload vs n, MOE vs
  n per level; simulated vs exact selections).

The exact figures use the public plan only. Anything computed from an input's true counts
(``--data``) is NOT private: the folder then holds the ``NOT_PRIVATE`` marker and the JSON
says so — run it on synthetic or public data.
"""

from __future__ import annotations

import csv
import html
import io
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privtab.errors import UsageError
from privtab.report.text import Table, table
from privtab.tabulate.accuracy import WORKLOADS, LevelAccuracy, level_accuracy

if TYPE_CHECKING:
    from privtab.data import SafeTabInputs
    from privtab.report import FigureBlock
    from privtab.tabulate.accuracy_sim import LevelSimulation
    from privtab.tabulate.plan import ReleasePlan

__all__ = [
    "DEFAULT_N",
    "AccuracyReport",
    "accuracy_tables",
    "build_accuracy",
    "config_accuracy",
    "write_accuracy",
]

LOG = logging.getLogger("privtab.tabulate")

DEFAULT_N = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000,
             100_000, 200_000, 500_000, 1_000_000)  # fmt: skip
"""The default grid of group sizes."""
Say = Callable[[str], None]


@dataclass
class AccuracyReport:
    """The report: exact figures per level, the simulations, and what they were run on."""

    levels: list[dict[str, Any]]
    simulations: list[LevelSimulation] = field(default_factory=list)
    accuracies: list[LevelAccuracy] = field(default_factory=list)
    source: str = ""
    data: str | None = None
    """The input whose true sizes were used (NOT private), if any."""

    @property
    def private(self) -> bool:
        """True when nothing in the report was computed from an input's true counts."""
        return self.data is None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "private": self.private,
            "source": self.source,
            "levels": self.levels,
        }
        if self.data is not None:
            out["data"] = self.data
            out["note"] = (
                "NOT PRIVATE: computed from the true counts of the input (the group sizes "
                "and, with trials, simulated releases against the truth); for synthetic or "
                "public data only"
            )
        if self.simulations:
            out["simulation"] = [s.to_json() for s in self.simulations]
        return out


def _select(plans: dict[str, ReleasePlan], levels: Sequence[str] | None) -> list[tuple[str, Any]]:
    chosen = []
    keys = {(lv.key.replace(" ", "")): (scope, lv) for scope, p in plans.items() for lv in p.levels}
    if not levels:
        return [(scope, lv) for scope, p in plans.items() for lv in p.levels]
    for name in levels:
        hit = keys.get(name.replace(" ", "").upper())
        if hit is None:
            from privtab.errors import UsageError

            raise UsageError(
                f"no level {name!r} in the plan",
                hint=f"levels: {', '.join(lv.key for _, p in plans.items() for lv in p.levels)}",
            )
        chosen.append(hit)
    return chosen


def build_accuracy(
    plans: dict[str, ReleasePlan],
    zero_suppression_chance: Fraction | float | None,
    *,
    levels: Sequence[str] | None = None,
    n: Sequence[int] | None = None,
    inputs: SafeTabInputs | None = None,
    trials: int = 0,
    seed: int = 0,
    nonnegative: bool = False,
    engine: str = "polars",
    say: Say | None = None,
) -> AccuracyReport:
    """The accuracy report of ``plans`` (per scope) at ``levels`` (default: all). ``n`` is
    the grid of sizes (default :data:`DEFAULT_N`); with ``inputs`` the sizes are the true
    sizes of its groups (NOT private) and ``trials`` K > 0 adds the simulation."""
    chosen = _select(plans, levels)
    report = AccuracyReport(levels=[], source=" + ".join(p.source for p in plans.values()))
    eng = None
    if inputs is not None:
        from privtab.tabulate.accuracy_sim import prepare_engine

        report.data = str(inputs.persons_path)
        if say is not None:
            say(f"aggregating {inputs.persons_path} (NOT private: true counts are read)")
        eng = prepare_engine(inputs, engine)
    try:
        for scope, lv in chosen:
            acc = level_accuracy(lv, zero_suppression_chance, scope=scope)
            report.accuracies.append(acc)
            if eng is None:
                report.levels.append(acc.to_json(list(n) if n is not None else DEFAULT_N))
                continue
            from privtab.tabulate.accuracy_sim import simulate_level, true_sizes

            sizes = true_sizes(eng, lv)
            report.levels.append(_on_sizes(acc, sizes))
            if trials > 0:
                report.simulations.append(
                    simulate_level(
                        eng, acc, trials=trials, seed=seed, nonnegative=nonnegative, say=say
                    )
                )
    finally:
        if eng is not None:
            eng.close()
    return report


def _sizes(n: str) -> list[int]:
    """``--n``: comma-separated non-negative group sizes."""
    try:
        sizes = [int(x) for x in n.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--n must be comma-separated integers, got {n!r}") from None
    if not sizes or min(sizes) < 0:
        raise UsageError(f"--n needs non-negative integers, got {n!r}")
    return sizes


def config_accuracy(
    config: str | None,
    *,
    scope: str | None = None,
    levels: Sequence[str] | None = None,
    n: str | None = None,
    data: str | None = None,
    trials: int = 0,
    seed: int = 0,
    say: Say | None = None,
) -> AccuracyReport:
    """``privtab safetab accuracy``: the report of a config (``None``: 2020 production) at
    ``levels`` of ``scope`` (default: every run), on the sizes ``n`` ("0,10,100") or on the
    true sizes of the input ``data`` (NOT private; ``trials`` K adds the simulation).
    Raises :class:`privtab.errors.UsageError` on a bad combination of options."""
    from privtab.data import read_config, read_reference
    from privtab.data.inputs import load_inputs, resolve_config_path
    from privtab.tabulate.plan import ReleasePlan, config_scope

    if trials and data is None:
        raise UsageError(
            "--trials needs --data (the input whose truth the simulated releases are run on)"
        )
    if data is not None and n is not None:
        raise UsageError("give --n or --data (whose true group sizes are used), not both")
    sizes = None if n is None else _sizes(n)
    path = resolve_config_path(config)
    inputs = None
    if data is not None:
        LOG.warning("--data: the report reads the input's TRUE counts: it is NOT private")
        inputs = load_inputs(path, Path(data), validate_persons=False)
        cfg, ref = inputs.config, inputs.reference
    else:
        cfg, ref = read_config(path), read_reference(path.parent)
    scopes = cfg.scopes if scope is None else (config_scope(cfg, scope),)
    plans = {s.value: ReleasePlan.from_config(cfg, ref, s) for s in scopes}
    return build_accuracy(
        plans,
        cfg.zero_suppression_chance,
        levels=levels or None,
        n=sizes,
        inputs=inputs,
        trials=trials,
        seed=seed,
        nonnegative=not cfg.allow_negative_counts,
        say=say,
    )


WORKLOAD_NAMES = {"total": "total", "sex_age4": "Sex×Age4", "sex_age9": "Sex×Age9",
                  "sex_age23": "Sex×Age23"}  # fmt: skip


def accuracy_tables(doc: dict[str, Any]) -> list[Table]:
    """The terminal presentation of a report's JSON: per level the probability of each
    stage-2 outcome (workload) and of suppression by n (the first 60 sizes), the MOE of
    the T1 row under each outcome (in the notes), and, as one number per n, the 0.95
    quantile of the T1 row's error over the mixture of outcomes; per simulation,
    simulated vs exact selections and MOE95 by size bucket."""
    out = []
    for lv in doc["levels"]:
        sup = lv["suppression"]["threshold_stage2_total"]
        title = f"{lv['scope']} {lv['level']}: thresholds {lv['thresholds']}, " + (
            "no suppression" if sup is None else f"totals ≤ {sup} suppressed"
        )
        rows = [
            (
                f"{r['n']:,}",
                *(f"{r['p_workload'][w]:.4f}" for w in WORKLOADS),
                f"{r['p_suppressed']:.4f}",
                str(r["moe95_t1_mixture"]),
                f"{r['expected_rows']['t2']:.1f}",
            )
            for r in lv["rows"][:60]
        ]
        head = ("n", "P total", "P Age4", "P Age9", "P Age23", "P supp.", "T1 q95", "T2 rows")
        t1 = lv["moe95"]["t1"]
        notes = (
            "MOE95 of the T1 row by stage-2 outcome: "
            + ", ".join(f"{WORKLOAD_NAMES[w]} {t1[w]}" for w in WORKLOADS)
            + " (persons).",
            "T1 q95: the 95% quantile of the T1 row's |error| over the mixture of outcomes "
            "at n (one number when the outcome is not known; not an average of MOEs).",
        )
        out.append(table(title, head, rows, left=0, notes=notes))
    for sim in doc.get("simulation", []):
        rows = [
            (
                r["bucket"],
                r["workload"],
                str(r["selected_simulated"]),
                f"{r['selected_exact']:.1f} ± {r['selected_se']:.1f}",
                "—" if r["moe95_simulated"] is None else f"{r['moe95_simulated']:.1f}",
                str(r["moe95_exact"]),
            )
            for r in sim["buckets"]
        ]
        cols = ("bucket", "workload", "selected sim", "exact ± se", "MOE95 sim", "exact")
        title = f"simulation {sim['scope']} {sim['level']} ({sim['trials']} trials)"
        out.append(table(title, cols, rows, left=0))
    return out


def _on_sizes(acc: LevelAccuracy, sizes: Any) -> dict[str, Any]:
    """The exact figures on the distinct true sizes of an input's groups, with the number
    of groups of each size and the level's expected totals."""
    import polars as pl

    adaptive = sizes.filter(~pl.col("TO")).group_by("N").len().sort("N")
    total_only = sizes.filter(pl.col("TO")).group_by("N").len().sort("N")
    ns = adaptive["N"].to_numpy()
    count = adaptive["len"].to_numpy()
    out = acc.to_json(ns)
    for row, c in zip(out["rows"], count.tolist(), strict=True):
        row["groups"] = int(c)
    pw = acc.p_workload(ns)
    r1, r2 = acc.expected_rows(ns)
    to_n = total_only["N"].to_numpy()
    to_c = total_only["len"].to_numpy()
    out["input"] = {
        "groups": int(count.sum()),
        "total_only_groups": int(to_c.sum()),
        "expected_groups_per_workload": {
            w: float((pw[:, j] * count).sum()) for j, w in enumerate(WORKLOADS)
        },
        "expected_suppressed": float((acc.p_suppressed(ns) * count).sum())
        + float((acc.p_suppressed_total_only(to_n) * to_c).sum()),
        "expected_rows": {
            "t1": float((r1 * count).sum())
            + float(((1 - acc.p_suppressed_total_only(to_n)) * to_c).sum()),
            "t2": float((r2 * count).sum()),
        },
    }
    return out


# ----------------------------------------------------------------------------- files
def _flat_exact(level: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    head = ["n"]
    has_groups = bool(level["rows"]) and "groups" in level["rows"][0]
    if has_groups:
        head.append("groups")
    head += [f"p_{w}" for w in WORKLOADS]
    head += ["p_suppressed", "p_published", *[f"moe95_t1_{w}" for w in WORKLOADS]]
    head += ["moe95_t1_mixture", "expected_rows_t1", "expected_rows_t2"]
    rows = []
    for r in level["rows"]:
        row: list[Any] = [r["n"]]
        if has_groups:
            row.append(r["groups"])
        row += [r["p_workload"][w] for w in WORKLOADS]
        row += [r["p_suppressed"], r["p_published"]]
        row += [r["moe95_t1"][w]["moe95"] for w in WORKLOADS]
        row += [r["moe95_t1_mixture"], r["expected_rows"]["t1"], r["expected_rows"]["t2"]]
        rows.append(row)
    return head, rows


SIM_COLUMNS = (
    "bucket",
    "workload",
    "groups",
    "selected_simulated",
    "selected_exact",
    "selected_se",
    "suppressed_simulated",
    "suppressed_exact",
    "suppressed_se",
    "statistics",
    "moe95_simulated",
    "moe95_exact",
    "within_simulated",
    "within_exact",
    "within_se",
)


def _csv(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(head)
    for r in rows:
        w.writerow(["" if v is None else (repr(v) if isinstance(v, float) else v) for v in r])
    return buf.getvalue()


def _slug(scope: str, level: str) -> str:
    name = level.strip("()").replace(", ", "-").replace(",", "-").replace(" ", "").lower()
    return f"{scope.lower()}-{name}" if scope else name


def write_accuracy(report: AccuracyReport, out: Path, *, overwrite: bool = False) -> list[Path]:
    """Write the report folder ``out`` atomically (see the module docstring)."""
    import json

    from privtab._json import jsonable
    from privtab.atomic import atomic_directory
    from privtab.release.marking import write_not_private
    from privtab.report import write_html

    names: list[str] = []
    with atomic_directory(out, kind="accuracy report", overwrite=overwrite) as tmp:
        (tmp / "accuracy.json").write_text(json.dumps(jsonable(report.to_json()), indent=1) + "\n")
        names.append("accuracy.json")
        for lv in report.levels:
            head, rows = _flat_exact(lv)
            name = f"exact-{_slug(lv['scope'], lv['level'])}.csv"
            (tmp / name).write_text(_csv(head, rows))
            names.append(name)
        for sim in report.simulations:
            rows = [[r.get(c) for c in SIM_COLUMNS] for r in sim.rows]
            name = f"simulation-{_slug(sim.scope, sim.level)}.csv"
            (tmp / name).write_text(_csv(SIM_COLUMNS, rows))
            names.append(name)
        write_html(tmp / "accuracy.html", accuracy_html(report)).chmod(0o644)
        names.append("accuracy.html")
        if not report.private:
            write_not_private(tmp, f"computed from the true counts of {report.data}")
            names.append("NOT_PRIVATE")
    return [Path(out) / n for n in names]


# ----------------------------------------------------------------------------- HTML
def _dense_grid(acc: LevelAccuracy) -> np.ndarray:
    top = max(3 * acc.plan.thresholds[2], 100)
    return np.unique(np.r_[0, np.geomspace(1, top, 400).astype(np.int64)])


def _level_figure(accs: Sequence[LevelAccuracy], ident: str) -> FigureBlock:
    from matplotlib.figure import Figure

    from privtab.report import FigureBlock, png

    acc = accs[0]
    names = ", ".join(f"{a.scope} {a.plan.key}".strip() for a in accs)
    n = _dense_grid(acc)
    fig = Figure(figsize=(10.0, 3.8), dpi=100, layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    pw = acc.p_workload(n)
    labels = {"total": "total", "sex_age4": "Sex×Age4", "sex_age9": "Sex×Age9",
              "sex_age23": "Sex×Age23"}  # fmt: skip
    for j, w in enumerate(WORKLOADS):
        ax1.plot(n, pw[:, j], label=f"P({labels[w]} | n)")
    if acc.rule.active:
        ax1.plot(n, acc.p_suppressed(n), "k--", label="P(suppressed | n)")
    ax1.set_xscale("symlog", linthresh=1)
    ax1.set_xlabel("true group size n")
    ax1.set_ylabel("probability")
    ax1.set_ylim(-0.02, 1.02)
    ax1.grid(True, alpha=0.3)
    ax1.legend(fontsize=7)
    ax2.plot(n, acc.moe95_t1_mixture(n), color="k", label="T1: 95% quantile over the outcomes")
    for j, w in enumerate(WORKLOADS):
        ax2.axhline(acc.moe95["t1"][w], color=f"C{j}", ls="--", lw=0.8, label=f"T1 if {labels[w]}")
    ax2.axhline(acc.moe95["t2_cell"], color="C5", ls=":", label="T2 cell")
    ax2.set_xscale("symlog", linthresh=1)
    for ax in (ax1, ax2):
        ax.set_xlim(0, float(n.max()))
    ax2.set_xlabel("true group size n")
    ax2.set_ylabel("exact 95% MOE (persons)")
    ax2.grid(True, alpha=0.3)
    ax2.legend(fontsize=7)
    th = ", ".join(str(t) for t in acc.plan.thresholds)
    sup = (
        f"Totals of at most {acc.rule.stage2_total} are suppressed (zero suppression at "
        f"{float(acc.rule.chance):g})."
        if acc.rule.stage2_total is not None
        else "No zero suppression at this level."
    )
    text = html.escape(
        f"{names}: the probability that a population group of true size n receives each "
        f"workload (stage-1 thresholds {th}) and the exact margin of error of what it "
        "publishes: dashed, the T1 row's margin under each workload; solid, the 95% "
        "quantile of its error over the mixture of workloads at n (the one number to use "
        f"when the workload is not known). {sup} Computed exactly from the noise laws, not "
        "simulated."
    )
    return FigureBlock(ident, f"Workload and MOE vs n — {names}", png(fig), text)


def _sim_figure(sims: Sequence[LevelSimulation]) -> FigureBlock:
    from privtab.report import FigureBlock, new_figure, png

    fig, ax = new_figure(6.0, 4.6)
    xs, ys = [], []
    for s in sims:
        for r in s.rows:
            if r["selected_exact"] > 0 or r["selected_simulated"] > 0:
                xs.append(r["selected_exact"])
                ys.append(r["selected_simulated"])
    if xs:
        ax.scatter(xs, ys, s=12)
        top = max(max(xs), max(ys), 1.0)
        ax.plot([0.5, top], [0.5, top], color="#999", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("expected selections (exact)")
    ax.set_ylabel("simulated selections")
    text = (
        "Each point is one level, size bucket and workload: how many times (groups × trials) "
        "the workload was selected in the simulation against the exact expectation. Points "
        "on the diagonal agree; the tables give the standard error of each."
    )
    return FigureBlock("fig-sim", "Simulated vs exact workload selections", png(fig), text)


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def accuracy_html(report: AccuracyReport) -> str:
    """The report page (tables, plots, explanations)."""
    from privtab.report import page, table_html

    sections = []
    if not report.private:
        sections.append(
            '<p style="color:#b00"><strong>NOT PRIVATE</strong>: computed from the true '
            f"counts of {html.escape(str(report.data))}. For synthetic or public data only."
            "</p>"
        )
    head = ["run", "level", "thresholds", "suppressed if ≤", "MOE total", "MOE T1 Age4/9/23",
            "MOE cell", "MOE stage 1"]  # fmt: skip
    rows = []
    for lv in report.levels:
        m = lv["moe95"]
        s = lv["suppression"]
        rows.append(
            [
                lv["scope"],
                lv["level"],
                ", ".join(str(t) for t in lv["thresholds"]),
                _fmt(s["threshold_stage2_total"]),
                str(m["t1"]["total"]),
                "/".join(str(m["t1"][w]) for w in WORKLOADS[1:]),
                str(m["t2_cell"]),
                str(m["stage1"]),
            ]
        )
    sections.append("<h2>Levels (exact)</h2>" + table_html(head, rows))
    input_head = ["groups", "TotalOnly groups", "expected suppressed", "expected T1 rows",
                  "expected T2 rows", *[f"expected {w}" for w in WORKLOADS]]  # fmt: skip
    for lv in report.levels:
        if "input" not in lv:
            continue
        inp = lv["input"]
        cells = [
            str(inp["groups"]),
            str(inp["total_only_groups"]),
            _fmt(inp["expected_suppressed"]),
            _fmt(inp["expected_rows"]["t1"]),
            _fmt(inp["expected_rows"]["t2"]),
            *[_fmt(inp["expected_groups_per_workload"][w]) for w in WORKLOADS],
        ]
        title = html.escape(f"{lv['scope']} {lv['level']}")
        sections.append(f"<h3>{title}: the input's groups</h3>" + table_html(input_head, [cells]))
    for sim in report.simulations:
        sections.append(
            f"<h2>Simulation: {html.escape(sim.scope + ' ' + sim.level)} ({sim.trials} "
            "trials, NOT private) vs exact</h2>"
            + table_html(
                [c.replace("_", " ") for c in SIM_COLUMNS],
                [[_fmt(r.get(c)) for c in SIM_COLUMNS] for r in sim.rows],
            )
        )
    figs = []
    seen: dict[tuple[Any, ...], list[LevelAccuracy]] = {}
    for acc in report.accuracies:
        key = (
            acc.plan.thresholds,
            acc.plan.stage1.parameter,
            acc.plan.stage2.parameter,
            acc.rule.stage2_total,
        )
        seen.setdefault(key, []).append(acc)
    for i, group in enumerate(seen.values()):
        figs.append(_level_figure(group, f"fig-level-{i}"))
    if report.simulations:
        figs.append(_sim_figure(report.simulations))
    return page(
        "SafeTab-P accuracy report",
        report.source,
        sections,
        figs,
    )
