"""What every benchmark shares: the machine and its load, result tables, child processes.

A benchmark's result is a JSON-ready dict; :class:`Table` is its presentation, rendered as a
rich table in the terminal (``privtab bench NAME``) and as Markdown in
``docs/benchmarks.md`` (:mod:`privtab.bench.render`) — one source for both.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from privtab.report.text import Table as Table
from privtab.report.text import table as table


def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load averages (other jobs share the machine)."""
    return [round(x, 2) for x in os.getloadavg()]


def now() -> str:
    """The current UTC time, ISO 8601."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return None


def versions(*dists: str) -> dict[str, str | None]:
    """Installed versions of the given distributions (None when absent)."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for d in dists:
        try:
            out[d] = version(d)
        except PackageNotFoundError:
            out[d] = None
    return out


def machine() -> dict[str, Any]:
    """The machine the figures are measured on, and its load now."""
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": _ram_gib(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average": load_average(),
    }


def privtab_exe() -> str:
    """The ``privtab`` console script next to this interpreter (child processes)."""
    return str(Path(sys.executable).with_name("privtab"))


def release_command(data: Path, out: Path, *options: str) -> list[str]:
    """``privtab safetab run`` of the input ``data`` into ``out`` with ``--json`` and
    ``options``, recorded in a ledger of its own beside ``out``: a benchmark on synthetic
    data never charges the user's release ledger."""
    cmd = [privtab_exe(), "safetab", "run", "--data", str(data), "--out", str(out), "--json"]
    return [*cmd, "--ledger", str(out.parent / "ledger.json"), *options]


def run_seconds(summary: dict[str, Any]) -> dict[str, float]:
    """The per-phase seconds of a release run, from the confidential run record its
    ``--json`` summary names (the summary itself holds no timing: timings depend on the
    data; a benchmark's data is synthetic)."""
    path = summary.get("run_record")
    if not path:
        return {}
    seconds = json.loads(Path(path).read_text(encoding="utf-8")).get("seconds", {})
    return {str(k): float(v) for k, v in seconds.items()}


def time_v() -> list[str]:
    """``/usr/bin/time -v`` when available (wall time and peak RSS of a child)."""
    return ["/usr/bin/time", "-v"] if Path("/usr/bin/time").exists() else []


def time_v_rss_kb(stderr: str) -> int | None:
    """Peak RSS (kB, as printed) from ``/usr/bin/time -v`` output."""
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr)
    return None if m is None else int(m.group(1))


def time_v_rss_mb(stderr: str) -> float | None:
    """Peak RSS (MiB) from ``/usr/bin/time -v`` output."""
    kb = time_v_rss_kb(stderr)
    return None if kb is None else round(kb / 1024, 1)


def time_v_wall(stderr: str) -> float | None:
    """Wall seconds from ``/usr/bin/time -v`` output."""
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", stderr)
    if m is None:
        return None
    seconds = 0.0
    for part in m.group(1).split(":"):
        seconds = seconds * 60.0 + float(part)
    return round(seconds, 2)


def time_v_cpu(stderr: str) -> float | None:
    """CPU seconds (user + system) from ``/usr/bin/time -v`` output."""
    user = re.search(r"User time \(seconds\): ([\d.]+)", stderr)
    system = re.search(r"System time \(seconds\): ([\d.]+)", stderr)
    if user is None or system is None:
        return None
    return round(float(user.group(1)) + float(system.group(1)), 2)


def run_timed(cmd: list[str], log: Path) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """Run ``cmd`` under ``/usr/bin/time -v``, its stderr written to ``log`` as it comes (a
    long run's progress: ``tail -f LOG``; also when it fails: ``RuntimeError`` with its
    last lines). Returns its figures — wall seconds
    (time -v's, else measured here), CPU seconds (user + system), peak RSS (MiB: time -v's,
    the largest single process), the peak summed RSS of the whole process tree (MiB:
    worker processes, a JVM; sampled every 0.2 s) and the load average before — and the
    finished process."""
    load = load_average()
    start = time.perf_counter()
    full = [*time_v(), *cmd]
    with log.open("w", encoding="utf-8") as fh:
        child = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=fh, text=True)
        with TreeRSS(child.pid) as tree:
            out, _ = child.communicate()
    wall = time.perf_counter() - start
    err = log.read_text(encoding="utf-8", errors="replace")
    proc = subprocess.CompletedProcess(full, child.returncode, out, err)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(cmd[:3])} failed ({proc.returncode}): {' '.join(tail)}")
    return {
        "wall_seconds": time_v_wall(proc.stderr) or round(wall, 2),
        "cpu_seconds": time_v_cpu(proc.stderr),
        "peak_rss_mb": time_v_rss_mb(proc.stderr),
        "peak_tree_rss_mb": round(tree.peak_mb, 1),
        "load_average_before": load,
    }, proc


# --------------------------------------------------------------------------- process tree RSS
class TreeRSS:
    """Peak summed RSS (MiB) of a process and all its descendants, sampled every ``period``."""

    def __init__(self, pid: int, period: float = 0.2) -> None:
        self.pid, self.period, self.peak_mb = pid, period, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, _tree_rss_mb(self.pid))
            self._stop.wait(self.period)


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(d.name))
    return kids


def _tree_rss_mb(pid: int) -> float:
    kids, stack, total = _children(), [pid], 0
    while stack:
        p = stack.pop()
        stack += kids.get(p, [])
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def run_measured(
    cmd: list[str], lock: str | None, log: Path | None = None, **kw: Any
) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """Run ``cmd`` (under ``flock lock`` when given); return (completed process, wall
    seconds, peak tree RSS MiB). Its whole stderr is also written to ``log`` (kept even when
    the command fails); under the lock the child first reports when it got it and the load
    average at that moment (:func:`lock_acquired`)."""
    stamp = 'echo "lock acquired $(date -u +%FT%TZ) load $(cut -d" " -f1-3 /proc/loadavg)" >&2'
    full = ["flock", lock, "sh", "-c", f'{stamp}; exec "$@"', "sh", *cmd] if lock else cmd
    t0 = time.monotonic()
    proc = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    with TreeRSS(proc.pid) as rss:
        out, err = proc.communicate()
    wall = time.monotonic() - t0
    res = subprocess.CompletedProcess(full, proc.returncode, out, err)
    if log is not None:
        log.write_text(err)
    if proc.returncode != 0:
        where = f" (stderr: {log})" if log is not None else ""
        raise RuntimeError(f"{' '.join(full)} failed ({proc.returncode}){where}:\n{err[-4000:]}")
    return res, wall, rss.peak_mb


def lock_acquired(stderr: str) -> dict[str, Any]:
    """When a child run by :func:`run_measured` got the lock, and the load then."""
    m = re.search(r"lock acquired (\S+) load ([\d.]+) ([\d.]+) ([\d.]+)", stderr)
    if m is None:
        return {"started_at": now(), "load_average_before": load_average()}
    return {"started_at": m[1], "load_average_before": [float(m[i]) for i in (2, 3, 4)]}


def synthetic_input(
    data: Path,
    persons: int,
    seed: int,
    *options: str,
    lock: str | None = None,
    same_seed: bool = False,
) -> tuple[dict[str, Any], float | None]:
    """The synthetic input in ``data`` that every heavy benchmark reads: reused when its
    ``synth.json`` records ``persons`` persons (and ``seed`` too, with ``same_seed``), else
    made there by ``privtab synth --persons N --out DATA --seed S --quiet --json OPTIONS``
    (:func:`run_measured`, under ``flock lock`` when given). A folder that holds another
    synthetic input is an error: a benchmark never replaces an input. Returns the input's
    record (``synth.json``, what ``privtab synth --json`` prints) and the seconds
    ``privtab synth`` took (``None``: reused)."""
    meta = data / "synth.json"
    if meta.is_file():
        got: dict[str, Any] = json.loads(meta.read_text())
        if got.get("persons") == persons and (not same_seed or got.get("seed") == seed):
            return got, None
        raise RuntimeError(f"{data} holds a different synthetic input ({got.get('persons')})")
    data.parent.mkdir(parents=True, exist_ok=True)  # the benchmark's own input cache
    cmd = [privtab_exe(), "synth", "--persons", str(persons), "--out", str(data)]
    cmd += ["--seed", str(seed), "--quiet", "--json", *options]
    res, wall, _ = run_measured(cmd, lock)
    return json.loads(res.stdout), wall
