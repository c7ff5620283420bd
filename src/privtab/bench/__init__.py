"""privtab's benchmarks against peer libraries, runnable from an installed wheel.

``privtab bench NAME`` runs one (``privtab bench all``: every light one). Each benchmark is
a module of this package with

* ``run(**options, work=DIR) -> dict`` — the JSON-ready result: privtab's figure, the
  peer's measured in the same run (``None`` when the peer is not installed), the machine
  and its load; files (inputs, releases, logs) go to ``work``;
* ``tables(result) -> list[Table]`` — its presentation, printed as rich tables by the CLI
  and as Markdown in ``docs/benchmarks.md`` (:mod:`privtab.bench.render`).

and its options (the runner's arguments, with their flags, help and checks) are declared in
:mod:`privtab.bench.options`: ``privtab bench NAME`` is built from them.

:func:`execute` wraps a run into a *record* (the command, when, the load before and after,
the privtab version and commit, the machine, the result); ``--json`` prints it and
``--record DIR`` saves it, and ``docs/benchmarks.md`` is regenerated from the saved
records (``privtab bench render``). Peers: OpenDP and dp_accounting from the ``bench``
extra, Tumult Analytics in its own venv (it pins numpy < 2) — ``make bench-peers`` sets up
both (``docs/benchmarks.md``, "Rerunning").
"""

from __future__ import annotations

import importlib
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from privtab.bench import options as opts
from privtab.bench.options import Option

if TYPE_CHECKING:
    from privtab.bench._common import Table

# the registry is read when ``privtab`` builds its commands: what runs a benchmark is
# imported by the functions that run one

__all__ = ["BENCHMARKS", "Benchmark", "execute"]
"""What a user calls; ``tables``, ``write_record``, ``record_from_log`` and
``command_line`` serve the ``privtab bench`` command."""


@dataclass(frozen=True)
class Benchmark:
    """A registered benchmark: its module ``privtab.bench.<name>``, the help of its command
    and the options of that command (:mod:`privtab.bench.options`)."""

    name: str
    summary: str
    heavy: bool  # minutes to hours, generates data: ``all`` skips it
    help: str = ""
    options: tuple[Option, ...] = ()

    def module(self) -> ModuleType:
        return importlib.import_module(f"privtab.bench.{self.name.replace('-', '_')}")


BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in (
        Benchmark(
            "samplers",
            "Exact secure noise samplers vs OpenDP",
            heavy=False,
            help="Throughput of the exact discrete Gaussian and Laplace samplers vs OpenDP.",
            options=opts.SAMPLERS,
        ),
        Benchmark(
            "accounting",
            "zCDP → (ε, δ) conversion vs dp_accounting",
            heavy=False,
            help="zCDP → (ε, δ): privtab's conversion vs dp_accounting's RdpAccountant.",
            options=opts.ACCOUNTING,
        ),
        Benchmark(
            "invariants",
            "ℓ₂ cost of Semi-DP table mechanisms vs naive ones",
            heavy=False,
            help="ℓ₂ cost of the Semi-DP table mechanisms vs the naive ones (seed Figures 2–3).",
            options=opts.INVARIANTS,
        ),
        Benchmark(
            "synth",
            "privtab synth and validate: synthetic nation (no peer)",
            heavy=False,
            help="privtab synth (and validate): wall time, persons per second, peak memory.",
            options=opts.SYNTH,
        ),
        Benchmark(
            "safetab",
            "SafeTab-P release vs Tumult Analytics, same input",
            heavy=True,
            help="privtab safetab run vs Tumult Analytics on the same synthetic nation.",
            options=opts.SAFETAB,
        ),
        Benchmark(
            "floor",
            "SafeTab-P release vs plain polars read + group-by, same file",
            heavy=True,
            help="The release against its floor (polars read + group-by to cells), same file.",
            options=opts.FLOOR,
        ),
        Benchmark(
            "safetab_h",
            "SafeTab-H release vs plain polars read + group-by, chained to SafeTab-P",
            heavy=True,
            help="SafeTab-P, then SafeTab-H on its T1, against the floor of the household file.",
            options=opts.SAFETAB_H,
        ),
        Benchmark(
            "scale",
            "SafeTab-P release: time and memory against persons",
            heavy=True,
            help="SafeTab-P release at each size: wall time, peak memory, seconds per level.",
            options=opts.SCALE,
        ),
        Benchmark(
            "topdown-state",
            "TopDown on one synthetic state: time, memory, accuracy",
            heavy=True,
            help="privtab topdown run on one state at production settings: time and memory, "
            "the error of the tables and of the noisy measurements.",
            options=opts.TOPDOWN_STATE,
        ),
        Benchmark(
            "topdown",
            "TopDown end to end on a synthetic nation vs the generic solvers",
            heavy=True,
            help="privtab topdown run (US + PR, production settings) at each size: persons/s, "
            "problems/s, seconds per level; OSQP + HiGHS on a sample of the same problems.",
            options=opts.TOPDOWN,
        ),
        Benchmark(
            "topdown-gls-round",
            "TopDown: --postprocess gls-round vs production, same noisy measurements",
            heavy=True,
            help="One state's noisy measurements post-processed by production TopDown and by "
            "gls-round: error by geolevel (mean ± s.e. over noise draws) and time.",
            options=opts.TOPDOWN_GLS_ROUND,
        ),
    )
}


def command_line(name: str, options: Mapping[str, Any]) -> str:
    """The ``privtab bench`` command that reproduces a run with these options."""
    specs = {o.name: o for o in BENCHMARKS[name].options} if name in BENCHMARKS else {}
    parts = ["privtab", "bench", name]
    for key, value in options.items():
        flag = specs.get(key, Option(key, None, "")).flags
        if "/" in flag:  # a switch that is on by default: only its "off" form is written
            parts += [] if value else [flag.split("/")[1]]
            continue
        if value is None or value is False:
            continue
        if value is True:
            parts.append(flag)
        elif isinstance(value, (list, tuple)):
            parts += [flag, ",".join(str(v) for v in value)]
        else:
            parts += [flag, str(value)]
    return " ".join(parts)


def _commit() -> str | None:
    """The checkout's commit when run from one (``git describe``), else None."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


#: benchmark → (the result field that is null without the peer, what to do about it)
MISSING_PEER = {
    "samplers": ("opendp_n", "opendp is not installed: peer figures are null (make bench-peers)"),
    "accounting": (
        "dp_accounting_epsilon",
        "dp_accounting is not installed: peer figures are null (make bench-peers)",
    ),
    "safetab": (
        "tumult",
        "tmlt.analytics not found: peer figures are null (make bench-peers, or "
        "--tumult-python / $PRIVTAB_TUMULT_PYTHON)",
    ),
}


def execute(
    name: str, options: Mapping[str, Any], *, work: Path | None = None, keep: bool = False
) -> dict[str, Any]:
    """Run benchmark ``name`` with ``options`` and return its record.

    Files go to ``work`` (default: a new temporary directory, removed afterwards unless
    ``keep``); with ``keep`` the record is also written there as ``record.json``.
    """
    import shutil
    import tempfile

    from privtab import __version__
    from privtab._json import jsonable
    from privtab.bench._common import load_average, machine, now

    if name not in BENCHMARKS:
        raise KeyError(f"no benchmark {name!r} (registered: {', '.join(BENCHMARKS)})")
    mod = BENCHMARKS[name].module()
    made = work is None
    where = Path(tempfile.mkdtemp(prefix=f"privtab-bench-{name}-")) if work is None else work
    where.mkdir(parents=True, exist_ok=True)
    try:
        started, before = now(), load_average()
        result = mod.run(**options, work=where)
        field, missing = MISSING_PEER.get(name, ("", ""))
        if field and result.get(field) is None and not options.get("tumult_result"):
            logging.getLogger("privtab.bench").warning(missing)
        record = {
            "benchmark": name,
            "command": command_line(name, options),
            "started_at": started,
            "finished_at": now(),
            "load_average_before": before,
            "load_average_after": load_average(),
            "privtab": __version__,
            "commit": _commit(),
            "machine": machine(),
            "work": str(where) if keep else None,
            "result": result,
        }
        if keep:
            (where / "record.json").write_text(json.dumps(jsonable(record), indent=2))
        return record
    finally:
        if made and not keep:
            shutil.rmtree(where, ignore_errors=True)


def tables(record: Mapping[str, Any]) -> list[Table]:
    """The presentation of a record's result (its benchmark's ``tables``)."""
    tabs: list[Table] = BENCHMARKS[record["benchmark"]].module().tables(record["result"])
    return tabs


def provenance(record: Mapping[str, Any]) -> list[str]:
    """The lines printed under a record's tables: machine, load, command, kept folder."""
    m = record["machine"]
    out = [
        f"machine: {m['cpu']}, {m['cores']} cores; load {record['load_average_before']} → "
        f"{record['load_average_after']}; {record['command']}"
    ]
    return out + ([f"kept: {record['work']}"] if record.get("work") else [])


def record_from_files(log: Path, release_json: Path | None = None) -> dict[str, Any]:
    """A ``scale`` record of a release run by hand, from its saved stderr ``log`` (and its
    ``--json`` output). Raises ``ValueError`` naming an unreadable file."""
    from privtab.bench.scale import from_log

    def read(path: Path) -> str:
        try:
            return path.read_text()
        except OSError as exc:
            raise ValueError(f"cannot read {path}: {exc.strerror}") from None

    rel = None
    if release_json is not None:
        try:
            rel = json.loads(read(release_json))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{release_json} is not JSON: {exc}") from None
    return record_from_log(from_log(read(log), rel), log)


def write_record(record: Mapping[str, Any], directory: Path) -> Path:
    """Save a record as ``DIR/<benchmark>-<started_at>.json`` (the form ``render`` reads)."""
    from privtab._json import jsonable
    from privtab.atomic import atomic_write

    directory.mkdir(parents=True, exist_ok=True)
    stamp = re.sub(r"[^0-9T]", "", str(record["started_at"]))
    path = directory / f"{record['benchmark']}-{stamp}.json"
    return atomic_write(path, json.dumps(jsonable(dict(record)), indent=2) + "\n")


def record_from_log(result: dict[str, Any], log: Path) -> dict[str, Any]:
    """A record for a release run by hand: its provenance is the log, not this command."""
    from privtab import __version__
    from privtab.bench._common import load_average, machine, now

    return {
        "benchmark": "scale",
        "command": f"privtab bench scale --from-log {log}",
        "started_at": now(),
        "finished_at": now(),
        "load_average_before": None,
        "load_average_after": load_average(),
        "privtab": __version__,
        "commit": None,
        "machine": machine(),
        "work": None,
        "note": f"parsed from {log}; the run's own command and load are in the log",
        "result": result,
    }
