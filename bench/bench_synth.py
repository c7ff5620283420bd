"""Benchmark of ``privtab synth``: wall time, throughput and peak memory at 10⁶ and 10⁷ persons.

Run: ``python bench/bench_synth.py [--persons 1000000 10000000] [--format txt] [--validate]``.
Each size runs ``privtab synth`` in a child process under ``/usr/bin/time -v`` (peak RSS),
writing to a temporary directory that is removed afterwards (``--validate`` also times
``privtab validate`` on the output), and prints one JSON line per run with the 1-minute
load average before it (other jobs share this machine). There is
no peer library for this step (Tumult Analytics and OpenDP do not generate census-like
microdata), so the figures stand alone; the target is ≥ 1-2 M persons/s written.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(persons: int, fmt: str, seed: int, check: bool) -> dict[str, object]:
    privtab = Path(sys.executable).with_name("privtab")
    load = round(os.getloadavg()[0], 2)
    out_root = Path(tempfile.mkdtemp(prefix="privtab-bench-synth-"))
    out = out_root / "nation"
    cmd = [str(privtab), "synth", "--persons", str(persons), "--out", str(out)]
    cmd += ["--format", fmt, "--seed", str(seed), "--json", "--quiet"]
    timer = ["/usr/bin/time", "-v"] if Path("/usr/bin/time").exists() else []
    started = time.monotonic()
    res = subprocess.run([*timer, *cmd], capture_output=True, text=True, check=True)
    wall = time.monotonic() - started
    summary = json.loads(res.stdout)
    rss = _rss_mb(res.stderr)
    validate: dict[str, object] = {}
    if check:
        vcmd = [str(privtab), "validate", "--data", str(out), "--json", "--quiet"]
        t0 = time.monotonic()
        vres = subprocess.run([*timer, *vcmd], capture_output=True, text=True, check=True)
        vwall = time.monotonic() - t0
        validate = {
            "validate_wall_seconds": round(vwall, 2),
            "validate_rows_per_second": round(persons / vwall),
            "validate_peak_rss_mb": _rss_mb(vres.stderr),
        }
    shutil.rmtree(out_root, ignore_errors=True)
    return {
        "persons": persons,
        "format": fmt,
        "command": " ".join(["/usr/bin/time -v", *cmd[:1], *cmd[1:]]) if timer else " ".join(cmd),
        "wall_seconds": round(wall, 2),
        "persons_per_second": round(persons / wall),
        "peak_rss_mb": rss,
        "bytes_written": sum(summary["files"].values()),
        "blocks": summary["geography"]["blocks"],
        "load_average_before": load,
        **validate,
    }


def _rss_mb(stderr: str) -> float | None:
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr)
    return None if m is None else round(int(m.group(1)) / 1024, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--persons", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--format", default="txt", choices=["txt", "parquet"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--validate", action="store_true", help="also time privtab validate")
    args = ap.parse_args()
    print(
        json.dumps(
            {
                "machine": platform.machine(),
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
            }
        )
    )
    for n in args.persons:
        print(json.dumps(run(n, args.format, args.seed, args.validate)), flush=True)


if __name__ == "__main__":
    main()
