"""``privtab safetab accuracy``: the exact accuracy report of a plan (and the simulation).

For a plan (the production config or any other), per level and true group size n: the
probability of each workload and of zero suppression, the exact expected MOEs and the
expected published rows — from the noise laws, no data needed
(:mod:`privtab.tabulate.accuracy`). ``--data DIR [--trials K]`` uses an input's true group
sizes and runs K seeded releases against them (the Bureau's simulation; NOT private).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from privtab.cli._render import fail, print_json, warn


def register(app: typer.Typer) -> None:
    app.command("accuracy")(accuracy_cmd)


def accuracy_cmd(
    config: str | None = typer.Option(
        None, "--config", "-c", help="config.json or its directory (default: 2020 production)."
    ),
    scope: str | None = typer.Option(
        None, "--scope", help="US or PR (default: every run of the config)."
    ),
    level: list[str] = typer.Option(  # noqa: B008
        [],
        "--level",
        metavar="LEVEL",
        help='A level, e.g. "(COUNTY, 2)" (repeatable; default: all).',
    ),
    n: str | None = typer.Option(
        None, "--n", help="Group sizes, comma-separated (default: 0, 1, 2, 5, …, 10⁶)."
    ),
    data: str | None = typer.Option(
        None,
        "--data",
        "-d",
        help="An input (person-records + GRF-C): use its true group sizes. NOT PRIVATE: for "
        "synthetic or public data only.",
    ),
    trials: int = typer.Option(
        0, "--trials", min=0, help="With --data: K seeded releases against the truth."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the simulated releases (--trials)."),
    out: str | None = typer.Option(
        None, "--out", "-o", help="Write the report folder (JSON, CSV per level, HTML)."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --out."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress on stderr."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Exact accuracy of a plan: P(workload | n), P(suppressed | n), MOEs, published rows.

    Computed from the noise laws (no data, no simulation). With --data, on the true sizes
    of an input's groups; with --trials K also the Bureau-style simulation beside it.
    Example: privtab safetab accuracy --level "(COUNTY, 2)" --n 0,10,100,1000,10000 --json
    """
    from privtab.data import Scope, read_config, read_reference
    from privtab.data.inputs import load_inputs, resolve_config_path
    from privtab.tabulate import ReleasePlan
    from privtab.tabulate.accuracy_report import build_accuracy, write_accuracy

    if trials and data is None:
        fail("--trials needs --data (the input whose truth the simulated releases are run on)")
    if data is not None and n is not None:
        fail("give --n or --data (whose true group sizes are used), not both")
    sizes = None
    if n is not None:
        try:
            sizes = [int(x) for x in n.split(",") if x.strip()]
        except ValueError:
            fail(f"--n must be comma-separated integers, got {n!r}")
        if not sizes or min(sizes) < 0:
            fail(f"--n needs non-negative integers, got {n!r}")
    path = resolve_config_path(config)
    inputs = None
    if data is not None:
        warn("--data: the report reads the input's TRUE counts: it is NOT private")
        inputs = load_inputs(path, Path(data), validate_persons=False)
        cfg, ref = inputs.config, inputs.reference
    else:
        cfg, ref = read_config(path), read_reference(path.parent)
    scopes = list(cfg.scopes)
    if scope is not None:
        try:
            scopes = [Scope(scope.upper())]
        except ValueError:
            fail(f"--scope must be US or PR, got {scope!r}")
        if scopes[0] not in cfg.scopes:
            fail(f"the config does not run {scope} (run_us/run_pr)")
    plans = {s.value: ReleasePlan.from_config(cfg, ref, s) for s in scopes}

    def say(msg: str) -> None:
        if not quiet:
            print(f"accuracy: {msg}", file=sys.stderr, flush=True)

    report = build_accuracy(
        plans,
        cfg.zero_suppression_chance,
        levels=level or None,
        n=sizes,
        inputs=inputs,
        trials=trials,
        seed=seed,
        nonnegative=not cfg.allow_negative_counts,
        say=say,
    )
    written = [] if out is None else write_accuracy(report, Path(out), overwrite=overwrite)
    if as_json:
        doc = report.to_json()
        if written:
            doc["written"] = [str(p) for p in written]
        print_json(doc)
        return
    _print_accuracy(report.to_json(), written)


def _print_accuracy(doc: dict[str, Any], written: list[Path]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not doc["private"]:
        console.print("[red]NOT PRIVATE[/red]: computed from the true counts of the input")
    for lv in doc["levels"]:
        sup = lv["suppression"]["threshold_stage2_total"]
        t = Table(
            title=f"{lv['scope']} {lv['level']}: thresholds {lv['thresholds']}, totals ≤ "
            f"{sup} suppressed"
            if sup is not None
            else f"{lv['scope']} {lv['level']}: thresholds {lv['thresholds']}, no suppression"
        )
        for c in ("n", "total", "Age4", "Age9", "Age23", "suppressed", "MOE T1", "T2 rows"):
            t.add_column(c, justify="right")
        for r in lv["rows"][:60]:
            p = r["p_workload"]
            t.add_row(
                f"{r['n']:,}",
                *(f"{p[w]:.4f}" for w in ("total", "sex_age4", "sex_age9", "sex_age23")),
                f"{r['p_suppressed']:.4f}",
                f"{r['moe95_t1']:.1f}",
                f"{r['expected_rows']['t2']:.1f}",
            )
        console.print(t)
    for sim in doc.get("simulation", []):
        t = Table(title=f"simulation {sim['scope']} {sim['level']} ({sim['trials']} trials)")
        for c in ("bucket", "workload", "selected sim", "exact ± se", "MOE95 sim", "exact"):
            t.add_column(c, justify="right")
        for r in sim["buckets"]:
            t.add_row(
                r["bucket"],
                r["workload"],
                str(r["selected_simulated"]),
                f"{r['selected_exact']:.1f} ± {r['selected_se']:.1f}",
                "—" if r["moe95_simulated"] is None else f"{r['moe95_simulated']:.1f}",
                str(r["moe95_exact"]),
            )
        console.print(t)
    for p in written:
        console.print(f"wrote {p}")
