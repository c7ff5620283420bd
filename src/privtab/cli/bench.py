"""``privtab bench``: the benchmarks of :mod:`privtab.bench`, one subcommand each.

Thin: each command parses its options, calls :func:`privtab.bench.execute` and prints the
record — rich tables, or exactly one JSON object with ``--json``. Every command takes
``--json``, ``--keep``, ``--work`` and ``--record``; ``all`` runs the light benchmarks and
``render`` regenerates ``docs/benchmarks.md`` from saved records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from privtab.cli._render import emit, fail, floats, group, info, print_json, show
from privtab.report.text import table

JSON = Annotated[bool, typer.Option("--json", help="Print the record as one JSON object.")]
KEEP = Annotated[bool, typer.Option("--keep", help="Keep the work directory (inputs, outputs, "
                 "logs, record.json).")]  # fmt: skip
WORK = Annotated[str | None, typer.Option("--work", help="Work directory (default: a temporary "
                 "one, removed unless --keep).")]  # fmt: skip
RECORD = Annotated[str | None, typer.Option("--record", help="Also save the record in this "
                   "directory (e.g. bench/records).")]  # fmt: skip
Format = Annotated[str, typer.Option("--format", help="txt or parquet.")]


def _sizes(text: str, name: str) -> list[int]:
    return [int(x) for x in floats(text, name, lo=1)]


def _format(fmt: str) -> str:
    if fmt not in ("txt", "parquet"):
        fail(f"--format must be txt or parquet, got {fmt!r}")
    return fmt


def _show(record: dict[str, Any], json_out: bool, saved_in: str | None = None) -> None:
    from privtab.bench import provenance, tables, write_record

    if saved_in is not None:
        info(f"bench {record['benchmark']}: saved {write_record(record, Path(saved_in))}")
    if json_out:  # the record as it is (no tables built from it)
        emit(record, True)
    else:
        emit(record, False, tables(record), lines=provenance(record))


def _execute(name: str, options: dict[str, Any], **kw: Any) -> dict[str, Any]:
    from privtab.bench import execute

    try:
        return execute(name, options, **kw)
    except (RuntimeError, ValueError, OSError) as exc:
        fail(f"bench {name}: {str(exc).splitlines()[0] if str(exc) else exc!r}", 3)


def _run(
    name: str,
    options: dict[str, Any],
    json_out: bool,
    keep: bool,
    work: str | None,
    record: str | None,
) -> dict[str, Any]:
    from privtab.bench import BENCHMARKS

    info(f"bench {name}: {BENCHMARKS[name].summary}…")
    rec = _execute(name, options, work=None if work is None else Path(work), keep=keep)
    _show(rec, json_out, record)
    return rec


def register(app: typer.Typer) -> None:
    """Add the ``bench`` group to the top-level app."""
    bench_app = group("Benchmarks against peer libraries (figures recorded in docs/benchmarks.md).")

    @bench_app.command("list")
    def list_(json_out: JSON = False) -> None:
        """The registered benchmarks."""
        from privtab.bench import BENCHMARKS

        rows = {n: {"summary": b.summary, "heavy": b.heavy} for n, b in BENCHMARKS.items()}
        view = [(n, "yes" if b.heavy else "", b.summary) for n, b in BENCHMARKS.items()]
        emit(rows, json_out, [table("benchmarks", ("name", "heavy", "what"), view, left=3)])

    @bench_app.command("samplers")
    def samplers(
        n: int = typer.Option(2_000_000, "--n", min=1, help="Samples per timed privtab run."),
        repeat: int = typer.Option(3, "--repeat", min=1, help="Timed runs (best is kept)."),
        opendp_n: int | None = typer.Option(
            None, "--opendp-n", min=1, help="Samples per OpenDP run (default n/20, ≤ 50,000)."
        ),
        json_out: JSON = False,
        keep: KEEP = False,
        work: WORK = None,
        record: RECORD = None,
    ) -> None:
        """Throughput of the exact discrete Gaussian and Laplace samplers vs OpenDP."""
        opts = {"n": n, "repeat": repeat, "opendp_n": opendp_n}
        _run("samplers", opts, json_out, keep, work, record)

    @bench_app.command("accounting")
    def accounting(
        n: int = typer.Option(2000, "--n", min=1, help="Timed scalar calls."),
        json_out: JSON = False,
        keep: KEEP = False,
        work: WORK = None,
        record: RECORD = None,
    ) -> None:
        """zCDP → (ε, δ): privtab's conversion vs dp_accounting's RdpAccountant."""
        _run("accounting", {"n": n}, json_out, keep, work, record)

    @bench_app.command("invariants")
    def invariants(
        replicates: int = typer.Option(30, "--replicates", min=2, help="Tables per setting."),
        n: int = typer.Option(1000, "--n", min=1, help="Records per table (Multinomial)."),
        big: bool = typer.Option(False, "--big", help="Add the 4 × 4 K-norm (≈ 3 min hull)."),
        json_out: JSON = False,
        keep: KEEP = False,
        work: WORK = None,
        record: RECORD = None,
    ) -> None:
        """ℓ₂ cost of the Semi-DP table mechanisms vs the naive ones (seed Figures 2–3)."""
        opts = {"replicates": replicates, "n": n, "big": big}
        _run("invariants", opts, json_out, keep, work, record)

    @bench_app.command("synth")
    def synth(
        persons: str = typer.Option("1e6", "--persons", help="Sizes, e.g. 1e6,1e7."),
        fmt: Format = "txt",
        seed: int = typer.Option(1, "--seed", min=0, help="Seed of privtab synth."),
        validate: bool = typer.Option(False, "--validate", help="Also time privtab validate."),
        json_out: JSON = False,
        keep: KEEP = False,
        work: WORK = None,
        record: RECORD = None,
    ) -> None:
        """privtab synth (and validate): wall time, persons per second, peak memory."""
        opts = {"persons": _sizes(persons, "--persons"), "fmt": _format(fmt), "seed": seed}
        _run("synth", {**opts, "validate": validate}, json_out, keep, work, record)

    @bench_app.command("scale")
    def scale(
        persons: str = typer.Option("1e6", "--persons", help="Sizes, e.g. 1e6,1e7,1e8."),
        fmt: Format = "parquet",
        data: str | None = typer.Option(
            None, "--data", help="Where the synthetic inputs are kept/reused (DATA/synth-N)."
        ),
        from_log: str | None = typer.Option(
            None, "--from-log", help="Record a release run by hand from its saved stderr."
        ),
        release_json: str | None = typer.Option(
            None, "--release-json", help="With --from-log: the run's --json output."
        ),
        json_out: JSON = False,
        keep: KEEP = False,
        work: WORK = None,
        record: RECORD = None,
    ) -> None:
        """SafeTab-P release at each size: wall time, peak memory, seconds per level."""
        if from_log is not None:
            from privtab.bench import record_from_files

            try:
                rec = record_from_files(
                    Path(from_log), None if release_json is None else Path(release_json)
                )
            except ValueError as exc:
                fail(str(exc))
            return _show(rec, json_out, record)
        where = None if data is None else Path(data)
        opts = {"persons": _sizes(persons, "--persons"), "fmt": _format(fmt), "data": where}
        _run("scale", opts, json_out, keep, work, record)

    @bench_app.command("floor")
    def floor(
        persons: int = typer.Option(10_000_000, "--persons", min=1, help="Synthetic persons."),
        data: str | None = typer.Option(
            None, "--data", help="Where the synthetic input is kept/reused (DATA/synth-N)."
        ),
        seed: int = typer.Option(7, "--seed", min=0, help="Seed of privtab synth."),
        json_out: JSON = False,
        keep: KEEP = False,
        work: WORK = None,
        record: RECORD = None,
    ) -> None:
        """The release against its floor (polars read + group-by to cells), same file."""
        where = None if data is None else Path(data)
        _run(
            "floor", {"persons": persons, "data": where, "seed": seed}, json_out, keep, work, record
        )

    @bench_app.command("safetab")
    def safetab(
        persons: int = typer.Option(1_000_000, "--persons", min=1, help="Synthetic persons."),
        data: str | None = typer.Option(
            None,
            "--data",
            help="Input directory: reused if its synth.json has --persons, else generated "
            "there (default: in the work directory).",
        ),
        seed: int = typer.Option(1, "--seed", min=0, help="Seed of privtab synth."),
        states: str | None = typer.Option(
            None, "--states", help="privtab synth --states (default: 50 states + DC + PR)."
        ),
        tumult_python: str | None = typer.Option(
            None,
            "--tumult-python",
            help="Python with tmlt.analytics (default: $PRIVTAB_TUMULT_PYTHON, else "
            ".bench-peers/tumult/bin/python from make bench-peers).",
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
            help="Reuse the Tumult side of a previous `privtab bench safetab --json` record "
            "(checked: same input, plan and Spark settings; recorded as reused).",
        ),
        lock: str | None = typer.Option(
            None, "--lock", help="flock file for heavy steps ('' = none; default in $TMPDIR)."
        ),
        json_out: JSON = False,
        keep: KEEP = False,
        work: WORK = None,
        record: RECORD = None,
    ) -> None:
        """privtab safetab run vs Tumult Analytics on the same synthetic nation."""
        from privtab.bench.safetab import DEFAULT_LOCK

        if engine not in ("polars", "spark"):
            fail(f"--engine must be polars or spark, not {engine!r}")
        scopes = tuple(s.strip() for s in tumult_scopes.split(",") if s.strip())
        opts: dict[str, Any] = {
            "persons": persons,
            "data": data,
            "seed": seed,
            "states": states,
            "tumult": tumult_python,
            "tumult_max_groups": tumult_max_groups,
            "tumult_scopes": scopes,
            "stage2": stage2,
            "lock": DEFAULT_LOCK if lock is None else (lock or None),
            "engine": engine,
            "cores": cores,
            "driver_memory": driver_memory,
            "tumult_result": tumult_result,
            "tumult_max_seconds": tumult_max_seconds,
        }
        _run("safetab", opts, json_out, keep, work, record)

    @bench_app.command("all")
    def all_(
        json_out: JSON = False,
        record: RECORD = None,
    ) -> None:
        """Every light benchmark with its defaults (``list`` marks the heavy ones)."""
        from privtab.bench import BENCHMARKS, provenance, tables, write_record

        out: dict[str, Any] = {}
        for name, bench in BENCHMARKS.items():
            if bench.heavy:
                info(f"bench all: skipping {name} (heavy: run it by name)")
                continue
            info(f"bench all: {name}…")
            out[name] = _execute(name, {})
            if record is not None:
                info(f"bench all: saved {write_record(out[name], Path(record))}")
        if json_out:
            return print_json(out)
        for rec in out.values():
            show(tables(rec), provenance(rec))

    @bench_app.command("render")
    def render(
        records: str = typer.Option(
            "bench/records", "--records", help="Records directory (of the checkout)."
        ),
        out: str = typer.Option(
            "docs/benchmarks.md", "--out", help="The page to write (of the checkout)."
        ),
    ) -> None:
        """Regenerate docs/benchmarks.md (and docs/img/scale.png) from saved records."""
        from privtab.bench.render import write

        src, page = Path(records), Path(out)
        if not src.is_dir() or not page.parent.is_dir():
            bad = src if not src.is_dir() else page.parent
            fail(
                f"render needs a checkout (run it from the repository root) or --records and "
                f"--out: {bad} is not a directory"
            )
        page = write(src, page, page.parent / "img" / "scale.png")
        info(f"bench render: wrote {page}")

    app.add_typer(bench_app, name="bench")
