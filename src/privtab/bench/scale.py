"""Scale runs of the SafeTab-P release (issue 5): time and memory against persons and domain.

Run: ``privtab bench scale --persons 1e6,1e7 [--format parquet] [--data DIR] [--keep]``.
For each size: ``privtab synth`` (seed 7) into ``DATA/synth-N`` unless it is already there,
then ``privtab safetab run`` under ``/usr/bin/time -v`` into the work directory. Each run's
result holds the wall time and peak RSS (``time -v``), persons, cells, per-level seconds and
domain sizes (parsed from the progress lines) and the release summary. A release run by
hand (the 3.31 × 10⁸ one takes half an hour) is turned into the same result from its saved
stderr with ``privtab bench scale --from-log RUN.err --release-json RUN.json``.
:mod:`privtab.bench.render` draws the log-log figure of ``docs/benchmarks.md`` from the
recorded runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privtab.bench._common import (
    Table,
    machine,
    release_command,
    run_timed,
    synthetic_input,
    table,
    time_v_rss_kb,
    time_v_wall,
)

#: what the benchmark measures, for docs/benchmarks.md
ABOUT = """\
Each size: `privtab synth` (Parquet), then `privtab safetab run` of the production config
under `/usr/bin/time -v`. Runs made by hand (the 3.31 × 10⁸ run takes half an hour) are
recorded from their saved stderr with `privtab bench scale --from-log`. The figure shows the
whole release against persons (log-log) and the seconds of every level against its public
domain size.
"""

LEVEL_LINE = re.compile(
    r"\[(\d+)/(\d+)\] (\w+) \((\S+), (\d)\): ([\d,]+) regions × ([\d,]+) iterations, "
    r"([\d,]+) noisy counts(?:, (\d+) chunk\(s\))? \(([\d.]+) s\)"
)


def _num(s: str) -> int:
    return int(s.replace(",", ""))


def parse_run(stderr: str, time_v: str) -> dict[str, Any]:
    """Per-level seconds and domain sizes from the progress lines; wall time and peak RSS
    from ``/usr/bin/time -v``."""
    levels = []
    for m in LEVEL_LINE.finditer(stderr):
        levels.append(
            {
                "scope": m.group(3),
                "level": f"({m.group(4)}, {m.group(5)})",
                "groups": _num(m.group(6)) * _num(m.group(7)),
                "noise_draws": _num(m.group(8)),
                "seconds": float(m.group(10)),
            }
        )
    rss = time_v_rss_kb(time_v)
    cells = re.search(r"([\d,]+) persons in ([\d,]+) cells", stderr)
    return {
        "wall_seconds": time_v_wall(time_v) or 0.0,
        "peak_rss_gb": None if rss is None else rss / 1024**2,
        "persons": _num(cells.group(1)) if cells else None,
        "cells": _num(cells.group(2)) if cells else None,
        "levels": levels,
    }


def run(
    persons: Sequence[int] = (1_000_000,),
    fmt: str = "parquet",
    data: Path | None = None,
    work: Path | None = None,
) -> dict[str, Any]:
    """Synthesise (unless present) and release at every size; see the module docstring."""
    if work is None:
        raise ValueError("the scale benchmark needs a work directory")
    root = Path(data) if data is not None else Path(work)
    mach = machine()
    runs = []
    for n in persons:
        inputs = root / f"synth-{n}"
        synthetic_input(inputs, n, 7, "--format", fmt)
        cmd = release_command(inputs, Path(work) / f"rel-{n}", "--overwrite", "--format", fmt)
        measured, proc = run_timed(cmd, Path(work) / f"rel-{n}.stderr")
        result = parse_run(proc.stderr, proc.stderr)
        result["release"] = json.loads(proc.stdout)
        load = measured["load_average_before"]
        result.update(command=" ".join(["/usr/bin/time -v", *cmd]), load_average_before=load)
        runs.append(result)
    return {"machine": mach, "format": fmt, "runs": runs}


def from_log(stderr: str, release: dict[str, Any] | None) -> dict[str, Any]:
    """The result of a release run by hand, from its saved stderr (progress lines and
    ``/usr/bin/time -v``) and its ``--json`` output."""
    result = parse_run(stderr, stderr)
    if release is not None:
        result["release"] = release
    return {"machine": machine(), "runs": [result], "from_log": True}


def tables(res: dict[str, Any]) -> list[Table]:
    """Whole-release time and memory per size, and where the time goes."""
    rows = []
    for r in res["runs"]:
        rel = r.get("release", {})
        secs = rel.get("seconds", {})
        agg = secs.get("aggregate")
        levels = secs.get("tabulate_and_write", sum(lv["seconds"] for lv in r["levels"]))
        rows.append(
            [
                f"{r['persons']:,}",
                f"{r['cells']:,}" if r.get("cells") else "—",
                f"{rel['t1_rows']:,} + {rel['t2_rows']:,}" if "t1_rows" in rel else "—",
                f"{sum(lv['noise_draws'] for lv in r['levels']) / 1e6:,.1f} M",
                "—" if agg is None else f"{agg:,.0f} s",
                f"{levels:,.0f} s",
                f"{r['wall_seconds']:,.1f} s",
                "—" if r["peak_rss_gb"] is None else f"{r['peak_rss_gb']:.1f} GiB",
            ]
        )
    cols = [
        "persons",
        "cells",
        "released (T1 + T2 rows)",
        "noise draws",
        "validate + aggregate",
        "levels + writing",
        "wall time",
        "peak RSS",
    ]
    return [table("SafeTab-P release, production config, polars engine", cols, rows)]
