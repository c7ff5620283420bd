"""``--postprocess gls-round`` against production TopDown on the same noisy measurements.

``privtab bench topdown-gls-round --data D`` draws one state's noisy measurements at
production settings (``privtab topdown run --run us --seed S --nmf``: seeded, NOT private —
a benchmark), then post-processes **those same measurements** twice, each in a child process
under ``/usr/bin/time -v`` (wall, CPU, peak RSS, the load before):

* ``privtab topdown postprocess --nmf R/nmf`` — production TopDown;
* ``privtab topdown postprocess --nmf R/nmf --postprocess gls-round`` — the tree GLS first
  (:mod:`privtab.topdown.gls_round`).

and measures both releases against the truth of the synthetic input (never a confidential
one): mean absolute error of the total population (``P0010001``) and of all P1 and P2 cells
by tabulation geolevel (:mod:`privtab.bench.topdown_state`'s tables). Issue 30's target:
lower county and tract error than production at ≤ 1.5× its time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from privtab.bench._common import machine, privtab_exe, run_timed
from privtab.bench.topdown_state import _table_accuracy, _truth_tables, input_facts
from privtab.report.text import Table, table

__all__ = ["POSTPROCESSORS", "run", "tables"]

POSTPROCESSORS = ("production", "gls-round")
HEADER = [
    "geolevel", "geographies", "total: production", "total: gls-round", "P1 cells: production",
    "P1 cells: gls-round", "P2 cells: production", "P2 cells: gls-round",
]  # fmt: skip


def _timed(cmd: list[str], log: Path) -> dict[str, Any]:
    timed, proc = run_timed(cmd, log)
    summary = json.loads(proc.stdout)
    record = json.loads(Path(summary["run_record"]).read_text())
    return {**timed, "command": " ".join(["/usr/bin/time -v", *cmd]),
            "seconds": record["seconds"]}  # fmt: skip


def run(data: str | None = None, seed: int = 1, work: Path | None = None) -> dict[str, Any]:
    """The measurements, both post-processings timed, and their accuracy (module
    docstring), in ``work``."""
    from privtab.topdown.folder import load_data

    if data is None:
        raise ValueError("give --data: a folder written by privtab synth (e.g. --states DE)")
    if work is None:
        raise ValueError("the topdown-gls-round benchmark needs a work directory")
    work.mkdir(parents=True, exist_ok=True)
    exe = privtab_exe()
    measured = work / "measured"
    first = [exe, "topdown", "run", "--data", str(data), "--out", str(measured), "--run", "us",
             "--seed", str(seed), "--nmf", "--no-report", "--overwrite", "--json",
             "--ledger", str(work / "ledger.json")]  # fmt: skip
    release = _timed(first, work / "measure.log")
    out: dict[str, Any] = {"measurements": release}
    for name in POSTPROCESSORS:
        cmd = [exe, "topdown", "postprocess", "--nmf", str(measured / "nmf"), "--out",
               str(work / name), "--postprocess", name, "--no-report", "--overwrite",
               "--json"]  # fmt: skip
        out[name] = _timed(cmd, work / f"{name}.log")
    facts = load_data(data, validated=False)
    truth = _truth_tables(facts)
    accuracy = {name: _table_accuracy(work / name, truth) for name in POSTPROCESSORS}
    return {
        "input": {**input_facts(data, facts), "seed": seed},
        "privtab": out,
        "accuracy": accuracy,
        "machine": machine(),
    }


def tables(res: dict[str, Any]) -> list[Table]:
    """Error by geolevel side by side, and the times."""
    acc = res["accuracy"]
    prod, gls = acc["production"], acc["gls-round"]
    rows = []
    for level, p in prod.items():
        g = gls[level]
        rows.append([
            level, f"{p['geographies']:,}",
            f"{p['total_mae']:.2f}", f"{g['total_mae']:.2f}",
            f"{p['P1_cells_mae']:.3f}", f"{g['P1_cells_mae']:.3f}",
            f"{p['P2_cells_mae']:.3f}", f"{g['P2_cells_mae']:.3f}",
        ])  # fmt: skip
    t = res["privtab"]
    times = [
        [
            name,
            f"{t[name]['wall_seconds']:,.1f}",
            f"{t[name]['cpu_seconds']:,.1f}",
            f"{t[name]['peak_rss_mb']:,.0f}",
            f"{t[name]['seconds'].get('gls', 0.0):,.1f}",
            str(t[name]["load_average_before"]),
        ]
        for name in POSTPROCESSORS
    ]
    ratio = t["gls-round"]["wall_seconds"] / t["production"]["wall_seconds"]
    cpu = t["gls-round"]["cpu_seconds"] / t["production"]["cpu_seconds"]
    inp = res["input"]
    errors = table(
        "Mean absolute error, production TopDown vs gls-round, the same noisy measurements",
        HEADER,
        rows,
        notes=[
            f"{inp['persons']:,} synthetic persons, {inp['blocks']:,} blocks; one draw of "
            f"production-law noise (seed {inp.get('seed', '?')}), post-processed both ways"
        ],
    )
    timing = table(
        "Time of the two post-processings (privtab topdown postprocess, same measurements)",
        ["postprocess", "wall s", "CPU s", "peak RSS MiB", "of which tree GLS s", "load before"],
        times,
        notes=[f"gls-round / production: wall {ratio:.2f}×, CPU {cpu:.2f}×"],
        left=1,
    )
    return [errors, timing]
