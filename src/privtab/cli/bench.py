"""``privtab bench``: the benchmarks of :mod:`privtab.bench`, one subcommand each.

Thin: each command is built from its benchmark's options (:mod:`privtab.bench.options`),
calls :func:`privtab.bench.execute` and prints the record — rich tables, or one JSON object
with ``--json``. Every command takes ``--json``, ``--keep``, ``--work`` and ``--record``;
``all`` runs the light benchmarks and ``render`` regenerates ``docs/benchmarks.md``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from privtab.cli._render import emit, fail, group, info, print_json, show, usage_errors
from privtab.report.text import table

if TYPE_CHECKING:
    from privtab.bench import Benchmark

JSON = Annotated[bool, typer.Option("--json", help="Print the record as one JSON object.")]
KEEP = Annotated[bool, typer.Option("--keep", help="Keep the work directory (inputs, outputs, "
                 "logs, record.json).")]  # fmt: skip
WORK = Annotated[str | None, typer.Option("--work", help="Work directory (default: a temporary "
                 "one, removed unless --keep).")]  # fmt: skip
RECORD = Annotated[str | None, typer.Option("--record", help="Also save the record in this "
                   "directory (e.g. bench/records).")]  # fmt: skip


def _show(record: dict[str, Any], json_out: bool, saved_in: str | None = None) -> None:
    from privtab.bench import provenance, tables, write_record

    if saved_in is not None:
        info(f"bench {record['benchmark']}: saved {write_record(record, Path(saved_in))}")
    # --json: the record as it is (no tables built from it)
    emit(record, json_out, [] if json_out else tables(record), lines=provenance(record))


def _execute(name: str, options: dict[str, Any], **kw: Any) -> dict[str, Any]:
    from privtab.bench import execute

    try:
        return execute(name, options, **kw)
    except (RuntimeError, ValueError, OSError) as exc:
        fail(f"bench {name}: {str(exc).splitlines()[0] if str(exc) else exc!r}", 3)


def _command(bench: Benchmark) -> Callable[..., None]:
    """The command of ``bench``: its declared options, then ``--json``, ``--keep``,
    ``--work`` and ``--record``; it runs the benchmark (or replays a run made by hand)."""
    common = {"json_out": JSON, "keep": KEEP, "work": WORK, "record": RECORD}
    defaults = {"json_out": False, "keep": False, "work": None, "record": None}

    def command(**values: Any) -> None:
        json_out, keep, work, record = (values.pop(k) for k in common)
        replay = {o.name: values.pop(o.name) for o in bench.options if o.replay}
        if any(v is not None for v in replay.values()):
            return _replay(replay, json_out, record)
        options = {o.name: o.argument(values[o.name]) for o in bench.options if not o.replay}
        info(f"bench {bench.name}: {bench.summary}…")
        rec = _execute(bench.name, options, work=None if work is None else Path(work), keep=keep)
        _show(rec, json_out, record)

    params = [
        inspect.Parameter(
            o.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(o.default, o.flags, help=o.help, min=o.minimum),
            annotation=o.type,
        )
        for o in bench.options
    ]
    params += [
        inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=defaults[k], annotation=t)
        for k, t in common.items()
    ]
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command


def _replay(replay: dict[str, Any], json_out: bool, record: str | None) -> None:
    """``scale --from-log LOG [--release-json FILE]``: the record of a run made by hand."""
    from privtab.bench import record_from_files

    rel = replay["release_json"]
    with usage_errors():
        rec = record_from_files(Path(replay["from_log"]), None if rel is None else Path(rel))
    _show(rec, json_out, record)


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

    from privtab.bench import BENCHMARKS

    for bench in BENCHMARKS.values():
        bench_app.command(bench.name, help=bench.help)(_command(bench))

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
        """Regenerate docs/benchmarks.md (and its figures in docs/img/) from saved records."""
        from privtab.bench.render import write

        page = Path(out)
        page = write(Path(records), page, page.parent / "img")
        info(f"bench render: wrote {page}")

    app.add_typer(bench_app, name="bench")
