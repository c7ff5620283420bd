"""Scale runs of the SafeTab-P release (issue 5): time and memory against persons and domain.

Run (each scale: synthesise, then release under ``/usr/bin/time -v``)::

    python bench/bench_scale.py run --persons 1e6,1e7 --work /work/bench-data
    python bench/bench_scale.py plot --work /work/bench-data --out docs/img/scale.png

``run`` writes ``<work>/scale-<N>.json`` (wall time, peak RSS, persons, cells, per-level
seconds and domain sizes, parsed from the run's stderr and ``/usr/bin/time -v``); ``plot``
draws the log-log figure of ``docs/benchmarks.md`` from every such file.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

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
    wall = re.search(r"Elapsed \(wall clock\) time.*: ([\d:.]+)", time_v)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", time_v)
    cells = re.search(r"([\d,]+) persons in ([\d,]+) cells", stderr)
    seconds = 0.0
    if wall:
        for part in wall.group(1).split(":"):
            seconds = seconds * 60 + float(part)
    return {
        "wall_seconds": seconds,
        "peak_rss_gb": int(rss.group(1)) / 1024**2 if rss else None,
        "persons": _num(cells.group(1)) if cells else None,
        "cells": _num(cells.group(2)) if cells else None,
        "levels": levels,
    }


def run(persons: list[int], work: Path, fmt: str) -> None:
    for n in persons:
        data = work / f"synth-{n}"
        if not (data / "synth.json").exists():
            subprocess.run(
                [
                    "privtab",
                    "synth",
                    "--persons",
                    str(n),
                    "--out",
                    str(data),
                    "--seed",
                    "7",
                    "--format",
                    fmt,
                    "--quiet",
                ],
                check=True,
            )
        out = work / f"rel-{n}"
        proc = subprocess.run(
            [
                "/usr/bin/time",
                "-v",
                "privtab",
                "safetab",
                "run",
                "--data",
                str(data),
                "--out",
                str(out),
                "--overwrite",
                "--format",
                fmt,
                "--json",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        result = parse_run(proc.stderr, proc.stderr)
        result["release"] = json.loads(proc.stdout)
        (work / f"scale-{n}.json").write_text(json.dumps(result, indent=2))
        print(f"{n:,} persons: {result['wall_seconds']:.0f} s, {result['peak_rss_gb']:.1f} GB")


def _has_agg(run: dict[str, Any]) -> bool:
    return "aggregate" in run.get("release", {}).get("seconds", {})


def plot(work: Path, out: Path) -> None:
    from matplotlib.figure import Figure

    runs = sorted(
        (json.loads(p.read_text()) for p in work.glob("scale-*.json")),
        key=lambda r: r["persons"],
    )
    fig = Figure(figsize=(10, 4), layout="constrained")
    a, b = fig.subplots(1, 2)
    ps = [r["persons"] for r in runs]
    a.loglog(ps, [r["wall_seconds"] for r in runs], "o-", label="wall time (s)")
    agg = [(r["persons"], r["release"]["seconds"]["aggregate"]) for r in runs if _has_agg(r)]
    if agg:
        a.loglog(*zip(*agg, strict=True), "^:", label="validate + aggregate (s)")
    a.loglog(ps, [r["peak_rss_gb"] for r in runs], "s--", label="peak RSS (GiB)")
    a.loglog(ps, [r["cells"] / 1e6 for r in runs], "d-.", label="cells (millions)")
    a.set_xlabel("persons")
    a.set_title("whole release vs persons")
    a.legend()
    a.grid(True, which="both", alpha=0.3)
    for r in runs:
        g = [lv["groups"] for lv in r["levels"] if lv["groups"] > 0]
        s = [lv["seconds"] for lv in r["levels"] if lv["groups"] > 0]
        b.loglog(g, s, "o", label=f"{r['persons']:.3g} persons")
    b.set_xlabel("population groups in the level's public domain")
    b.set_ylabel("seconds for the level")
    b.set_title("per level vs domain size")
    b.legend()
    b.grid(True, which="both", alpha=0.3)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    print(f"wrote {out}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--persons", required=True, help="comma-separated, e.g. 1e6,1e7")
    r.add_argument("--work", type=Path, required=True)
    r.add_argument("--format", default="parquet", choices=["txt", "parquet"])
    p = sub.add_parser("plot")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--out", type=Path, default=Path("docs/img/scale.png"))
    q = sub.add_parser("parse", help="make scale-N.json from a saved stderr (+ time -v) log")
    q.add_argument("log", type=Path)
    q.add_argument("--json", type=Path, help="the run's --json stdout")
    q.add_argument("--work", type=Path, required=True)
    args = ap.parse_args(argv)
    if args.cmd == "run":
        run([int(float(x)) for x in args.persons.split(",")], args.work, args.format)
    elif args.cmd == "plot":
        plot(args.work, args.out)
    else:
        text = args.log.read_text()
        result = parse_run(text, text)
        if args.json:
            result["release"] = json.loads(args.json.read_text())
        (args.work / f"scale-{result['persons']}.json").write_text(json.dumps(result, indent=2))
        print(f"wrote scale-{result['persons']}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
