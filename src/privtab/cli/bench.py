"""``privtab bench``: the benchmarks in the source checkout's ``bench/`` directory.

A typer group. Each benchmark is a module ``bench/<module>.py`` with a ``run(...)`` function
returning a JSON-ready dict (our figure, the peer's figure measured in the same run, the
ratio). Register a new one in :data:`BENCHMARKS` and give it a subcommand; ``privtab bench
all`` runs every registered benchmark with its defaults. Peers come from the ``bench``
extra: ``pip install -e '.[dev,bench]'`` (``make bench`` does this).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import typer

from privtab.cli._common import fail, print_json, warn

#: name → (module in bench/, one-line description)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "samplers": ("bench_samplers", "exact secure noise samplers vs OpenDP (issue 3)"),
    "accounting": ("bench_accounting", "zCDP → (ε, δ) conversion vs dp_accounting (issue 2)"),
    "invariants": ("bench_invariants", "ℓ₂ cost of Semi-DP table mechanisms vs naive (issue 7)"),
    "safetab": ("bench_safetab", "SafeTab-P release at 10⁶ persons vs Tumult Analytics (issue 4)"),
}
HEAVY: frozenset[str] = frozenset({"safetab"})
"""Benchmarks that ``all`` skips (minutes to hours, generate data): run them by name."""


def _bench_module(module: str) -> ModuleType:
    root = Path(__file__).resolve().parents[3]
    if not (root / "bench" / f"{module}.py").is_file():
        fail(
            f"benchmark bench/{module}.py not found: benchmarks live in the source checkout "
            "(install privtab with `pip install -e .` from a clone)"
        )
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module(f"bench.{module}")


def _print_samplers(res: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Exact secure samplers (n = {res['n']:,}, best of {res['repeat']})")
    table.add_column("sampler", no_wrap=True)
    for col in ("σ / scale", "privtab /s", "OpenDP /s", "ratio", "urandom /s"):
        table.add_column(col, justify="right", no_wrap=True)
    for r in res["results"]:
        peer = "—" if r["opendp_per_s"] is None else f"{r['opendp_per_s']:,.0f}"
        ratio = "—" if r["ratio"] is None else f"{r['ratio']:,.0f}×"
        table.add_row(
            r["sampler"],
            str(r["scale"]),
            f"{r['ours_per_s']:,.0f}",
            peer,
            ratio,
            f"{r['ours_os_urandom_per_s']:,.0f}",
        )
    console = Console()
    console.print(table)
    m = res["machine"]
    console.print(f"machine: {m['cpu']}, {m['cores']} cores, load {m['load_average']}")
    console.print(f"targets met: {res['targets_met']}")


def register(app: typer.Typer) -> None:
    """Add the ``bench`` group to the top-level app."""
    bench_app = typer.Typer(
        help="Benchmarks against peer libraries (figures recorded in docs/benchmarks.md).",
        no_args_is_help=True,
    )

    @bench_app.command("samplers")
    def samplers(
        n: int = typer.Option(2_000_000, "--n", min=1, help="Samples per timed privtab run."),
        repeat: int = typer.Option(3, "--repeat", min=1, help="Timed runs (best is kept)."),
        opendp_n: int | None = typer.Option(
            None, "--opendp-n", min=1, help="Samples per OpenDP run (default n/20, ≤ 50,000)."
        ),
        json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    ) -> None:
        """Throughput of the exact discrete Gaussian and Laplace samplers vs OpenDP."""
        mod = _bench_module(BENCHMARKS["samplers"][0])
        typer.echo("privtab bench samplers: measuring (about 20 s)…", err=True)
        res = mod.run(n=n, repeat=repeat, opendp_n=opendp_n)
        if res["opendp_n"] is None:
            warn("opendp is not installed: peer figures are null (pip install -e '.[bench]')")
        if json_out:
            print_json(res)
        else:
            _print_samplers(res)

    @bench_app.command("invariants")
    def invariants(
        replicates: int = typer.Option(30, "--replicates", min=2, help="Tables per setting."),
        n: int = typer.Option(1000, "--n", min=1, help="Records per table (Multinomial)."),
        big: bool = typer.Option(False, "--big", help="Add the 4 × 4 K-norm (≈ 3 min hull)."),
        json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    ) -> None:
        """ℓ₂ cost of the Semi-DP table mechanisms vs the naive ones (seed Figures 2–3)."""
        mod = _bench_module(BENCHMARKS["invariants"][0])
        typer.echo("privtab bench invariants: measuring (about 30 s)…", err=True)
        res = mod.run(replicates=replicates, n=n, big=big)
        if json_out:
            print_json(res)
        else:
            typer.echo(mod.markdown(res))

    @bench_app.command("safetab")
    def safetab(
        persons: int = typer.Option(1_000_000, "--persons", min=1, help="Synthetic persons."),
        data: str | None = typer.Option(
            None,
            "--data",
            help="Input directory: reused if its synth.json has --persons, else generated "
            "there (default: a temporary directory).",
        ),
        seed: int = typer.Option(1, "--seed", min=0, help="Seed of privtab synth."),
        states: str | None = typer.Option(
            None, "--states", help="privtab synth --states (default: 50 states + DC + PR)."
        ),
        tumult_python: str | None = typer.Option(
            None,
            "--tumult-python",
            help="Python with tmlt.analytics (default: $PRIVTAB_TUMULT_PYTHON, else "
            "/work/tumult-venv/bin/python).",
        ),
        tumult_max_groups: int = typer.Option(
            200_000,
            "--tumult-max-groups",
            min=0,
            help="Run in Tumult only levels with at most this many groups (0: all).",
        ),
        tumult_scopes: str = typer.Option("US", "--tumult-scopes", help="US, PR or US,PR."),
        stage2: bool = typer.Option(True, "--stage2/--no-stage2", help="Tumult stage 2 too."),
        engine: str = typer.Option(
            "polars",
            "--engine",
            help="privtab's engine: polars, or spark (local[--cores] with the Spark settings "
            "of Tumult's session).",
        ),
        cores: int | None = typer.Option(
            None, "--cores", min=1, help="Spark local[N] of Tumult (and privtab's Spark engine)."
        ),
        driver_memory: str = typer.Option(
            "6g", "--driver-memory", help="spark.driver.memory of both Spark sessions."
        ),
        tumult_max_seconds: float | None = typer.Option(
            None,
            "--tumult-max-seconds",
            min=0,
            help="Tumult starts no new level (but the first) after this many seconds.",
        ),
        tumult_result: str | None = typer.Option(
            None,
            "--tumult-result",
            help="Reuse the Tumult side of a previous `privtab bench safetab --json` output "
            "(checked: same input, plan and Spark settings; recorded as reused).",
        ),
        lock: str = typer.Option(
            "/tmp/privtab-bench.lock", "--lock", help="flock file for heavy steps ('' = none)."
        ),
        json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    ) -> None:
        """privtab safetab run vs Tumult Analytics on the same synthetic nation."""
        if engine not in ("polars", "spark"):
            fail(f"--engine must be polars or spark, not {engine!r}")
        mod = _bench_module(BENCHMARKS["safetab"][0])
        typer.echo("privtab bench safetab: measuring (minutes at 10⁶ persons)…", err=True)
        res = mod.run(
            persons=persons,
            data=data,
            seed=seed,
            states=states,
            tumult=tumult_python,
            tumult_max_groups=tumult_max_groups,
            tumult_scopes=tuple(s.strip() for s in tumult_scopes.split(",") if s.strip()),
            stage2=stage2,
            lock=lock or None,
            engine=engine,
            cores=cores,
            driver_memory=driver_memory,
            tumult_result=tumult_result,
            tumult_max_seconds=tumult_max_seconds,
        )
        if res["tumult"] is None and tumult_result is None:
            warn(
                "tmlt.analytics not found: peer figures are null (install it in a separate "
                "venv and set PRIVTAB_TUMULT_PYTHON; see bench/bench_safetab.py)"
            )
        if json_out:
            print_json(res)
        else:
            typer.echo(mod.markdown(res))

    @bench_app.command("all")
    def all_(json_out: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
        """Run every registered benchmark with its defaults."""
        out: dict[str, Any] = {}
        for name, (module, _) in BENCHMARKS.items():
            if name in HEAVY:
                typer.echo(f"privtab bench all: skipping {name} (run it by name)", err=True)
                continue
            typer.echo(f"privtab bench all: {name}…", err=True)
            out[name] = _bench_module(module).run()
        if json_out:
            print_json(out)
            return
        for name, res in out.items():
            if name == "samplers":
                _print_samplers(res)
            elif name == "invariants":
                typer.echo(_bench_module(BENCHMARKS[name][0]).markdown(res))
            else:
                typer.echo(f"{name}:")
                for key, value in res.items():
                    typer.echo(f"  {key}: {value}")

    app.add_typer(bench_app, name="bench")
