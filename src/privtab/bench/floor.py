"""The release against its physical floor (issue 20): one run, one file, two programs.

Run: ``privtab bench floor --persons 1e7 [--data DIR] [--keep]``. On one synthetic person
file (``privtab synth --seed 7 --format parquet`` into ``DATA/synth-N`` unless present):

* the **floor** — plain polars, nothing of privtab: a typed read of the person file (the
  age, sex, geography, race and ethnicity columns cast to integers) and a group-by to the
  cell key (block, the eight race codes, ethnicity, sex, age), counting persons. It is a
  lower bound of any release: every release reads the file and counts persons per cell;
* the **release** — ``privtab safetab run`` of the production config: validation, all 19
  levels, Parquet output, report on (its ledger in the work directory, not the user's).

Each runs in its own process under ``/usr/bin/time -v`` (wall time, user + system CPU,
peak RSS); the floor runs before *and* after the release, and the smaller of the two is the
floor (the machine is shared: load drifts during a run). The result prints both ratios:
wall-clock (what a user waits) and CPU seconds (what the machine spends — less sensitive to
other jobs on a shared machine).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from privtab.bench._common import (
    Table,
    machine,
    release_command,
    run_seconds,
    run_timed,
    synthetic_input,
    table,
)

#: what the benchmark measures, for docs/benchmarks.md
ABOUT = """\
One synthetic person file (Parquet, `privtab synth --seed 7`), two programs, each in its own
process under `/usr/bin/time -v`: the *floor* — plain polars, a typed read of the person
file and a group-by to the cell key (block, race codes, ethnicity, sex, age), counting
persons — and the whole release (`privtab safetab run`, production config, 19 levels,
Parquet output, report on). The floor runs before and after the release; the smaller is
kept. Ratios of wall time and of CPU seconds (user + system) are both shown: on a shared
machine the CPU ratio is the steadier one. Target: release ≤ 5 × the floor at 10⁷ persons.
"""

#: the cell key of the floor's group-by
_KEY = (
    "TABBLKST",
    "TABBLKCOU",
    "TABTRACTCE",
    "TABBLK",
    *(f"QRACE{i}" for i in range(1, 9)),
    "QSPAN",
    "QSEX",
    "QAGE",
)
_TYPES = {
    "TABBLKST": "UInt8",
    "TABBLKCOU": "UInt16",
    "TABTRACTCE": "UInt32",
    "TABBLK": "UInt16",
    "QSPAN": "UInt16",
    "QSEX": "UInt8",
    "QAGE": "UInt8",
    **{f"QRACE{i}": "UInt16" for i in range(1, 9)},
}


def count_cells(path: Path, key: tuple[str, ...], types: dict[str, str]) -> tuple[int, int]:
    """A typed polars read of a record file (Parquet or ``|``-separated text; the columns
    of ``types`` cast to their polars types) and a group-by to ``key``: (records, cells)."""
    import polars as pl

    name = str(path)
    if name.endswith(".parquet"):
        lf = pl.scan_parquet(name)
    else:
        lf = pl.scan_csv(name, separator="|", infer_schema=False)
    # race codes 2-8 are empty when absent: a non-strict cast turns them into nulls
    typed = lf.select(
        pl.col(c).cast(getattr(pl, t), strict=not c.startswith("QRACE")) for c, t in types.items()
    )
    cells = typed.group_by(key).agg(pl.len().alias("N")).collect()
    return int(cells["N"].sum()), cells.height


def floor_pass(persons: Path) -> dict[str, int]:
    """The floor: a typed polars read of ``persons`` (Parquet or ``|``-separated text)
    and a group-by to the cell key. Returns the persons and cells it found."""
    found, cells = count_cells(persons, _KEY, _TYPES)
    return {"persons": found, "cells": cells}


def around(
    module: str, file: Path, cmd: list[str], work: Path, log: str
) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """The floor (``module.floor_pass(file)`` in its own process), then ``cmd`` (a release
    printing its JSON summary), then the floor again, each under ``/usr/bin/time -v``
    (logs ``work/floor-before.stderr``, ``work/LOG``, ``work/floor-after.stderr``).

    Returns (the two floor runs, the release's timing with its command and phase seconds,
    the ratios of the release to the faster floor: ``ratio_wall``, ``ratio_cpu``)."""
    code = (
        f"import json, pathlib; from {module} import floor_pass; "
        f"print(json.dumps(floor_pass(pathlib.Path({str(file)!r}))))"
    )
    floor_cmd = [sys.executable, "-c", code]
    floors = []
    first, proc = run_timed(floor_cmd, work / "floor-before.stderr")
    floors.append({**first, **json.loads(proc.stdout)})
    release, proc = run_timed(cmd, work / log)
    summary = json.loads(proc.stdout)
    second, proc = run_timed(floor_cmd, work / "floor-after.stderr")
    floors.append({**second, **json.loads(proc.stdout)})
    best = min(f["wall_seconds"] for f in floors)
    best_cpu = min(f["cpu_seconds"] or float("inf") for f in floors)
    timing = {**release, "command": " ".join(cmd), "seconds": run_seconds(summary)}
    if "rows" in summary:
        timing["rows"] = sum(summary["rows"].values())
    cpu = release["cpu_seconds"]
    ratios = {
        "ratio_wall": round(release["wall_seconds"] / best, 2),
        "ratio_cpu": round(cpu / best_cpu, 2) if cpu else None,
    }
    return floors, timing, ratios


def run(
    persons: int = 10_000_000,
    data: Path | None = None,
    seed: int = 7,
    work: Path | None = None,
) -> dict[str, Any]:
    """The floor twice around one release, on the same file; see the module docstring."""
    if work is None:
        raise ValueError("the floor benchmark needs a work directory")
    work = Path(work)
    inputs = (Path(data) if data is not None else work) / f"synth-{persons}"
    synthetic_input(inputs, persons, seed, "--format", "parquet")
    file = inputs / "person-records.parquet"
    rel_cmd = release_command(inputs, work / f"rel-{persons}", "--overwrite", "--format", "parquet")
    floors, release, ratios = around(__name__, file, rel_cmd, work, "release.stderr")
    release.pop("rows", None)
    return {
        "machine": machine(),
        "persons": persons,
        "floor_runs": floors,
        "release": release,
        "floor_command": "python -c 'privtab.bench.floor.floor_pass(PERSON_FILE)'",
        **ratios,
        "target_ratio": 5.0,
    }


def timing_row(what: str, m: dict[str, Any]) -> list[str]:
    """One program's row: wall, CPU, peak RSS, load before."""
    cpu = "—" if m.get("cpu_seconds") is None else f"{m['cpu_seconds']:,.1f} s"
    rss = "—" if m.get("peak_rss_mb") is None else f"{m['peak_rss_mb'] / 1024:.2f} GiB"
    load = " / ".join(f"{x:g}" for x in m.get("load_average_before") or [])
    return [what, f"{m['wall_seconds']:,.1f} s", cpu, rss, load or "—"]


def tables(res: dict[str, Any]) -> list[Table]:
    """Floor runs, the release and the two ratios."""
    rows = [timing_row(f"floor ({i})", f) for i, f in enumerate(res["floor_runs"], start=1)]
    rows.append(timing_row("release (19 levels, Parquet, report)", res["release"]))
    cols = ["program", "wall", "CPU (user + sys)", "peak RSS", "load before (1/5/15 min)"]
    seconds = res["release"].get("seconds", {})
    notes = [
        f"release ÷ floor: {res['ratio_wall']:.1f}× wall, "
        + ("—" if res["ratio_cpu"] is None else f"{res['ratio_cpu']:.1f}× CPU")
        + f" (target ≤ {res['target_ratio']:g}×; floor = the faster of the two floor runs)",
        f"floor: {res['floor_runs'][0]['cells']:,} cells of {res['persons']:,} persons",
    ]
    if seconds:
        notes.append(
            "release phases (s): " + ", ".join(f"{k} {v:,.1f}" for k, v in seconds.items())
        )
    title = f"SafeTab-P release vs the floor at {res['persons']:,} persons, same file"
    return [table(title, cols, rows, notes=notes)]
