"""SafeTab-H against its floor, chained to SafeTab-P: one population, one run.

Run: ``privtab bench safetab_h --persons 1e7 [--data DIR] [--keep]``. On one synthetic
population (``privtab synth --seed S --format parquet`` into ``DATA/synth-N`` unless
present: its persons and its households, ``household-records.parquet``, CONTRACTS C1):

1. **SafeTab-P** (``privtab safetab run``, production NMFv7, Parquet output): its T1 is
   SafeTab-H's domain;
2. the **floor** — plain polars, nothing of privtab: a typed read of the household file
   and a group-by to the cell key (block, the eight race codes, ethnicity, household type,
   tenure), counting households — a lower bound of any SafeTab-H run;
3. **SafeTab-H** (``privtab safetab-h run --t1`` the SafeTab-P release, production NMFv5,
   Parquet output, report on, its ledger in the work directory);
4. the floor again (the machine is shared: the faster of the two floors counts).

Each runs in its own process under ``/usr/bin/time -v``. The result gives both ratios,
SafeTab-H ÷ floor in wall-clock and CPU seconds (target ≤ 5×, as SafeTab-P's), and the
SafeTab-H wall time against the 10-minute target at the 2020 size (≈ 1.27 × 10⁸
households: ``--persons 356000000``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from privtab.bench._common import (
    Table,
    machine,
    privtab_exe,
    run_seconds,
    run_timed,
    synthetic_input,
    table,
)
from privtab.bench.floor import around, count_cells, timing_row

ABOUT = """\
One synthetic population (`privtab synth --seed 7 --format parquet`: its persons and its
households, one per occupied housing unit, in the Census layout; records made before
`privtab synth` wrote households derived them from the person file's householders, as
their notes say), four programs, each in its own process under `/usr/bin/time -v`:
SafeTab-P (`privtab safetab run`, NMFv7: its T1 is SafeTab-H's domain), the *floor* —
plain polars, a typed read of the household file and a group-by to the cell key (block,
race codes, ethnicity, household type, tenure), counting households — then SafeTab-H
(`privtab safetab-h run --t1`, NMFv5, Parquet output, report on), then the floor again
(the faster floor counts). Targets: SafeTab-H ≤ 5 × the floor at 10⁷ persons (≈ 3–4 × 10⁶
households); the 2020 size, ≈ 1.27 × 10⁸ households, in ≤ 10 min.
"""

_KEY = (
    "TABBLKST",
    "TABBLKCOU",
    "TABTRACTCE",
    "TABBLK",
    *(f"QRACE{i}" for i in range(1, 9)),
    "QSPAN",
    "HOUSEHOLD_TYPE",
    "TEN",
)
_TYPES = {
    "TABBLKST": "UInt8",
    "TABBLKCOU": "UInt16",
    "TABTRACTCE": "UInt32",
    "TABBLK": "UInt16",
    "QSPAN": "UInt16",
    "HOUSEHOLD_TYPE": "UInt8",
    "TEN": "UInt8",
    **{f"QRACE{i}": "UInt16" for i in range(1, 9)},
}
TARGET_RATIO = 5.0
TARGET_SECONDS = 600.0


def floor_pass(households: Path) -> dict[str, int]:
    """The floor: a typed polars read of ``households`` and a group-by to the cell key
    (:func:`privtab.bench.floor.count_cells`)."""
    found, cells = count_cells(households, _KEY, _TYPES)
    return {"households": found, "cells": cells}


def _households(inputs: Path) -> Path:
    """The population's household file, written by ``privtab synth`` (an input made by an
    older ``privtab synth``, without households, is refused: a benchmark never changes an
    input)."""
    for ext in (".parquet", ".txt"):
        if (inputs / f"household-records{ext}").is_file():
            return inputs / f"household-records{ext}"
    raise RuntimeError(
        f"{inputs} holds no household-records (made by an older privtab synth): remove it "
        "or give another --data"
    )


def run(
    persons: int = 10_000_000,
    data: Path | None = None,
    seed: int = 7,
    work: Path | None = None,
) -> dict[str, Any]:
    """SafeTab-P, the floor, SafeTab-H, the floor (module docstring)."""
    if work is None:
        raise ValueError("the SafeTab-H benchmark needs a work directory")
    work = Path(work)
    inputs = (Path(data) if data is not None else work) / f"synth-{persons}"
    synthetic_input(inputs, persons, seed, "--format", "parquet")
    households = _households(inputs)
    exe = privtab_exe()
    ledger = str(work / "ledger.json")
    rel_p = work / f"rel-p-{persons}"
    p_cmd = [exe, "safetab", "run", "--data", str(inputs), "--out", str(rel_p), "--json",
             "--ledger", ledger, "--overwrite", "--format", "parquet", "--no-report"]  # fmt: skip
    p_run, proc = run_timed(p_cmd, work / "safetab-p.stderr")
    p_seconds = run_seconds(json.loads(proc.stdout))
    h_cmd = [exe, "safetab-h", "run", "--data", str(inputs), "--t1", str(rel_p), "--out",
             str(work / f"rel-h-{persons}"), "--json", "--ledger", ledger, "--overwrite",
             "--format", "parquet"]  # fmt: skip
    floors, release, ratios = around(__name__, households, h_cmd, work, "safetab-h.stderr")
    return {
        "machine": machine(),
        "persons": persons,
        "households": floors[0]["households"],
        "safetab_p": {**p_run, "command": " ".join(p_cmd), "seconds": p_seconds},
        "floor_runs": floors,
        "release": release,
        "floor_command": "python -c 'privtab.bench.safetab_h.floor_pass(HOUSEHOLD_FILE)'",
        **ratios,
        "target_ratio": TARGET_RATIO,
        "target_seconds": TARGET_SECONDS,
    }


def tables(res: dict[str, Any]) -> list[Table]:
    """The four runs, the ratios and the 2020-size target."""
    rows = [timing_row("SafeTab-P (NMFv7, its T1 = the domain)", res["safetab_p"])]
    rows.append(timing_row("floor (1)", res["floor_runs"][0]))
    rows.append(timing_row("SafeTab-H (NMFv5, Parquet, report)", res["release"]))
    rows.append(timing_row("floor (2)", res["floor_runs"][1]))
    cols = ["program", "wall", "CPU (user + sys)", "peak RSS", "load before (1/5/15 min)"]
    wall = res["release"]["wall_seconds"]
    seconds = res["release"].get("seconds", {})
    notes = [
        f"SafeTab-H ÷ floor: {res['ratio_wall']:.1f}× wall, "
        + ("—" if res["ratio_cpu"] is None else f"{res['ratio_cpu']:.1f}× CPU")
        + f" (target ≤ {res['target_ratio']:g}× at 10⁷ persons; floor = the faster of the two"
        " floor runs)",
        f"SafeTab-H wall {wall:,.0f} s for {res['households']:,} households "
        f"(2020-size target: ≤ {res['target_seconds']:g} s at ≈ 1.27 × 10⁸)",
        f"floor: {res['floor_runs'][0]['cells']:,} cells; {res['release'].get('rows', 0):,} "
        "rows published",
    ]
    if seconds:
        notes.append(
            "SafeTab-H phases (s): " + ", ".join(f"{k} {v:,.1f}" for k, v in seconds.items())
        )
    title = f"SafeTab-H vs the floor: {res['persons']:,} persons, {res['households']:,} households"
    return [table(title, cols, rows, notes=notes)]
