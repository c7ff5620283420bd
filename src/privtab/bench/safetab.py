"""SafeTab-P release: privtab vs Tumult Analytics on the same synthetic input (issue 4).

Run: ``privtab bench safetab [--persons 1000000] [--data DIR] [--json] [--keep]``. Steps,
each heavy one under ``flock LOCK`` (default ``$TMPDIR/privtab-bench.lock``) so that
benchmarks sharing the machine do not overlap:

1. input: ``privtab synth --persons N --out DATA --seed S`` (50 states + DC + PR), reused
   when ``DATA/synth.json`` already records the same persons, seed and states;
2. privtab: ``privtab safetab run --data DATA --out OUT --json`` — the packaged 2020
   production config (zCDP, discrete Gaussian), every US and PR level, T1/T2 (txt +
   Parquet), release.json, report.html — in a child process under ``/usr/bin/time -v``
   (peak RSS); per-level times come from its progress lines on stderr;
3. Tumult Analytics: :mod:`privtab.bench.tumult_safetab` run as a script by the Python
   given by ``--tumult-python`` / ``$PRIVTAB_TUMULT_PYTHON`` (default: the venv that
   ``make bench-peers`` creates, ``.bench-peers/tumult`` in the checkout: tmlt.analytics
   pins numpy < 2, pandas < 2 and pyarrow 18, which conflict with privtab's, so it lives in
   its own venv), Spark ``local[cores]``, on the same files and the same plan
   (:meth:`privtab.tabulate.ReleasePlan.from_config`): per level a stage-1 count over the
   public KeySet regions × iterations (persons → iterations by ``flat_map``), TotalOnly
   counts, then the adaptive stage 2, each count with privtab's per-group ρ. Peak memory of
   the Tumult side is the sampled RSS of its whole process tree (Python + the Spark JVM).

``--engine spark`` (issue 5) runs privtab's Spark engine instead of the embedded polars one:
``privtab safetab run --engine spark --spark-master local[N]`` with N = ``--cores`` (the
cores Tumult gets) and the settings of Tumult's session (:func:`spark_settings`:
``spark.driver.memory`` = ``--driver-memory``, shuffle partitions, UI off, Arrow on), so both
sides run Spark with equal settings; the peak memory is then that of the whole process tree
(driver, JVM, Python workers), sampled. ``--tumult-result FILE`` reuses the Tumult side of a
previous run's JSON output instead of re-running it (:func:`reuse_tumult` checks that it
measured the same input, plan and Spark settings; the result records ``reused``, the file, the
date and the load of that run). ``--tumult-max-seconds S``: Tumult starts no new level once S
seconds have passed, the first one excepted (the levels not started count as skipped,
reason ``time``). The whole stderr of each side is kept in ``privtab.stderr`` /
``tumult.stderr`` of the work directory (kept with ``--keep``).

Levels whose public domain has more than ``--tumult-max-groups`` groups are not run in
Tumult (at its measured ≈ 10³–10⁴ noisy counts per second the biggest levels would take
hours); the ratio is then computed over the levels both ran — privtab's time for those
levels is the sum of its per-level times — and the whole-release ratio is an extrapolation
(marked as such) from Tumult's measured seconds per noisy count.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from privtab.bench._common import (
    Table,
    load_average,
    lock_acquired,
    machine,
    release_command,
    run_measured,
    run_seconds,
    synthetic_input,
    table,
    time_v,
    time_v_rss_mb,
    time_v_wall,
)

#: what the benchmark measures, for docs/benchmarks.md
ABOUT = """\
privtab's whole release (`privtab safetab run`, production config: validation, aggregation,
every US and PR level, T1/T2, release.json with every privacy analysis, report.html) against
Tumult Analytics running the same plan on the same files (stage 1, TotalOnly and the adaptive
stage 2 of the US levels with at most `--tumult-max-groups` groups, each query's σ² equal to
privtab's; collected to pandas, no files). The ratio is over the levels both ran; a
whole-release ratio from Tumult's seconds per noisy count is an extrapolation and marked as
such. `--engine spark` runs privtab's Spark engine with the settings of Tumult's session.
"""

#: where ``make bench-peers`` puts Tumult Analytics' venv, relative to the checkout
#: (the current directory) unless ``$PRIVTAB_BENCH_PEERS`` says otherwise
PEERS_DIR = ".bench-peers"
DEFAULT_LOCK = os.path.join(os.environ.get("TMPDIR", "/tmp"), "privtab-bench.lock")
LEVEL_LINE = re.compile(
    r"\[\d+/\d+\] (?P<scope>\w+) \((?P<geo>[\w-]+), (?P<it>\d)\): .*\((?P<sec>[\d.]+) s\)$",
    re.MULTILINE,
)


# --------------------------------------------------------------------------- input
def ensure_input(
    data: Path, persons: int, seed: int, states: str | None, lock: str | None
) -> dict[str, Any]:
    """Reuse ``data`` if its synth.json matches, else generate it with ``privtab synth``
    (:func:`~privtab.bench._common.synthetic_input`)."""
    options = ("--states", states) if states else ()
    got, seconds = synthetic_input(
        data, persons, seed, *options, lock=lock, same_seed=states is not None
    )
    if seconds is None:
        return {"generated": False, **_synth_facts(got)}
    return {"generated": True, "synth_seconds": round(seconds, 2), **_synth_facts(got)}


def _synth_facts(s: dict[str, Any]) -> dict[str, Any]:
    return {k: s.get(k) for k in ("persons", "seed", "states", "geography")}


# --------------------------------------------------------------------------- workload
def workload(data: Path) -> dict[str, Any]:
    """The release plan and public domains of every level, for the Tumult side."""
    from privtab.data import GeoLevel, load_inputs
    from privtab.data.ages import STAT_LEVEL_BINS
    from privtab.data.iterations import IterationKind
    from privtab.tabulate import ReleasePlan

    inputs = load_inputs(None, data, validate_persons=False)
    ref, geo = inputs.reference, inputs.geography
    levels: list[dict[str, Any]] = []
    used: set[str] = set()
    for scope in inputs.config.scopes:
        plan = ReleasePlan.from_config(inputs.config, ref, scope)
        for lp in plan.levels:
            g = GeoLevel(lp.geo)
            its = ref.select(lp.iteration_level, g.granularity)
            detailed = g.granularity.value == "detailed"
            used.update(i.code for i in its)
            levels.append(
                {
                    "scope": scope.value,
                    "geo": lp.geo,
                    "iteration_level": lp.iteration_level,
                    "regions": list(geo.domain(g)),
                    "iterations": [i.code for i in its],
                    "total_only": [i.code for i in its if detailed and i.detailed_only],
                    "stability": lp.stability,
                    "thresholds": list(lp.thresholds),
                    "rho_stage1": float(lp.stage1.parameter),
                    "rho_stage2": float(lp.stage2.parameter),
                    "rho_total": float(lp.total.parameter),
                    "budget": float(lp.budget),
                }
            )
    groups = {
        code: {
            "kind": it.kind.value,
            "alone": bool(it.alone) if it.kind is IterationKind.RACE else None,
            "codes": sorted(it.codes),
        }
        for code, it in ref.iterations.items()
        if code in used
    }
    bins = {}
    for k in (1, 2, 3):
        b = STAT_LEVEL_BINS[k]
        assert b is not None
        bins[str(k)] = [int(x) for x in b.lookup()]
    return {
        "persons": str(inputs.persons_path),
        "grfc": str(data / "GRF-C.txt"),
        "levels": levels,
        "groups": groups,
        "age_bins": bins,
    }


def _groups(lv: dict[str, Any]) -> int:
    return len(lv["regions"]) * len(lv["iterations"])


def _key(scope: str, geo: str, it: int) -> str:
    return f"{scope} ({geo}, {it})"


# --------------------------------------------------------------------------- the two sides
def spark_settings(cores: int, driver_memory: str) -> dict[str, str]:
    """The Spark settings of Tumult's session (``tumult_safetab._spark``), given to privtab's
    Spark engine too so that both sides run with equal settings."""
    return {
        "spark.driver.memory": driver_memory,
        "spark.sql.shuffle.partitions": str(max(4, 2 * cores)),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }


def privtab_command(
    data: Path, out: Path, engine: str = "polars", cores: int = 1, driver_memory: str = "6g"
) -> list[str]:
    """``privtab safetab run`` for ``engine`` (spark: ``local[cores]`` + Tumult's settings)."""
    cmd = release_command(data, out)
    if engine == "spark":
        cmd += ["--engine", "spark", "--spark-master", f"local[{cores}]"]
        for k, v in spark_settings(cores, driver_memory).items():
            cmd += ["--spark-conf", f"{k}={v}"]
    elif engine != "polars":
        raise ValueError(f"engine must be polars or spark, not {engine!r}")
    return cmd


def run_privtab(
    data: Path,
    out: Path,
    lock: str | None,
    engine: str = "polars",
    cores: int = 1,
    driver_memory: str = "6g",
) -> dict[str, Any]:
    cmd = privtab_command(data, out, engine, cores, driver_memory)
    timer = time_v()
    res, wall, tree_mb = run_measured([*timer, *cmd], lock, out.parent / "privtab.stderr")
    load_after = load_average()
    wall = time_v_wall(res.stderr) or wall  # without the wait for the lock
    summary = json.loads(res.stdout)
    # the release's summary names no person count (it is confidential); the benchmark's
    # input is synthetic and its synth.json says how many persons it holds
    persons = int(json.loads((data / "synth.json").read_text())["persons"])
    per_level = {}
    for m in LEVEL_LINE.finditer(res.stderr):
        per_level[_key(m["scope"], m["geo"], int(m["it"]))] = float(m["sec"])
    # a level with an empty public domain is skipped (no groups, no noise): not measured
    tabulated = [lv for lv in summary["levels"] if lv.get("status") == "tabulated"]
    draws = sum(int(lv["noise_draws"]) for lv in tabulated)
    cells = int(summary["t1_rows"]) + int(summary["t2_rows"])
    secs = run_seconds(summary)
    time_v_rss = time_v_rss_mb(res.stderr)
    # Spark: the JVM and the Python workers are separate processes, and time -v reports
    # the largest single one; the peak of the whole tree is the relevant figure
    peak = round(tree_mb, 1) if engine == "spark" or time_v_rss is None else time_v_rss
    return {
        "engine": engine,
        "spark_settings": (
            {"master": f"local[{cores}]", **spark_settings(cores, driver_memory)}
            if engine == "spark"
            else None
        ),
        "command": " ".join([*(["/usr/bin/time -v"] if timer else []), *cmd]),
        **lock_acquired(res.stderr),
        "load_average_after": load_after,
        "wall_seconds": round(wall, 2),
        "time_v_wall_seconds": time_v_wall(res.stderr),
        "peak_rss_mb": peak,
        "time_v_max_rss_mb": time_v_rss,
        "peak_tree_rss_mb_sampled": round(tree_mb, 1),
        "persons": persons,
        "t1_rows": summary["t1_rows"],
        "t2_rows": summary["t2_rows"],
        "cells_released": cells,
        "noise_draws": draws,
        "noise_draws_per_second": round(draws / wall),
        "persons_per_second": round(persons / wall),
        "seconds": {k: round(v, 2) for k, v in secs.items()},
        "level_seconds": per_level,
        "levels": [
            {
                "level": _key(lv["scope"], *lv["level"].strip("()").split(", ")),
                "groups": lv["groups"],
                "noise_draws": lv["noise_draws"],
                "stat_levels": lv["stat_levels"],
            }
            for lv in tabulated
        ],
    }


def run_tumult(
    w: dict[str, Any],
    python: str,
    tmp: Path,
    lock: str | None,
    cores: int,
    memory: str,
    max_seconds: float | None = None,
) -> dict[str, Any]:
    w = {**w, "cores": cores, "driver_memory": memory, "session_rho": 1e6}
    if max_seconds:
        w["max_seconds"] = max_seconds
    wpath, rpath = tmp / "tumult-workload.json", tmp / "tumult-result.json"
    wpath.write_text(json.dumps(w))
    script = Path(__file__).with_name("tumult_safetab.py")
    cmd = [python, "-W", "ignore", str(script), str(wpath), str(rpath)]
    env = {**os.environ, "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python}
    timer = time_v()
    res, wall, tree_mb = run_measured([*timer, *cmd], lock, tmp / "tumult.stderr", env=env)
    load_after = load_average()
    wall = time_v_wall(res.stderr) or wall  # without the wait for the lock
    out: dict[str, Any] = json.loads(rpath.read_text())
    out.update(
        reused=False,
        **lock_acquired(res.stderr),
        load_average_after=load_after,
        spark_settings={"master": f"local[{cores}]", **spark_settings(cores, memory)},
        command=" ".join(cmd),
        wall_seconds=round(wall, 2),
        peak_tree_rss_mb_sampled=round(tree_mb, 1),
        stderr_tail=res.stderr.splitlines()[-3:],
    )
    return out


_RHO_OF = {"total_only": "rho_total", "stage1": "rho_stage1"}


def reuse_tumult(
    path: str | Path,
    facts: dict[str, Any],
    w: dict[str, Any],
    cores: int,
    driver_memory: str,
    stage2: bool = True,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A previous run's Tumult side (``--tumult-result``: the JSON printed by this
    benchmark), after checking that it measured the same input, plan and Spark settings.

    Same input: persons, seed, states and geography of ``synth.json``; same plan: every
    level it ran exists in ``w`` with the same regions × iterations, and every query's σ² is
    1/(2ρ) of that level's stage in ``w``; same Spark settings: ``local[cores]`` and the
    driver memory (results written before the settings were recorded carry only the master:
    the driver memory is then this benchmark's default, 6g, marked as assumed). Returns the
    Tumult block (with ``reused``, ``reused_from``, the date and the load of the original run) and
    its skipped levels. Raises ``ValueError`` when anything differs.
    """
    path = Path(path)
    old = json.loads(path.read_text())
    peer = old.get("tumult")
    if not isinstance(peer, dict):
        raise ValueError(f"{path}: no Tumult result (expected this benchmark's JSON output)")
    keys = ("persons", "seed", "states", "geography")
    diff = [k for k in keys if old.get("input", {}).get(k) != facts.get(k)]
    if diff:
        raise ValueError(f"{path}: measured on another input ({', '.join(diff)} differ)")
    plan = {_key(lv["scope"], lv["geo"], lv["iteration_level"]): lv for lv in w["levels"]}
    for lv in peer["levels"]:
        mine = plan.get(lv["level"])
        if mine is None or (lv["regions"], lv["iterations"]) != (
            len(mine["regions"]),
            len(mine["iterations"]),
        ):
            raise ValueError(f"{path}: level {lv['level']} differs from the current plan")
        for q in lv["queries"]:
            rho = float(mine[_RHO_OF.get(q["what"], "rho_stage2")])
            if abs(float(q["sigma2"]) * 2 * rho - 1) > 1e-6:
                raise ValueError(f"{path}: {lv['level']} {q['what']}: σ² differs from the plan")
        if not stage2 and any(q["what"].startswith("stage2") for q in lv["queries"]):
            raise ValueError(f"{path}: ran stage 2, the current run is --no-stage2")
    settings = peer.get("spark_settings")
    want = {"master": f"local[{cores}]", **spark_settings(cores, driver_memory)}
    assumed = settings is None
    if settings is None:
        settings = {"master": peer.get("spark_master"), **spark_settings(cores, "6g")}
    if settings != want:
        raise ValueError(f"{path}: other Spark settings ({settings} != {want})")
    measured = peer.get("started_at") or time.strftime(
        "%Y-%m-%dT%H:%M:%SZ (file time)", time.gmtime(path.stat().st_mtime)
    )
    reused = {
        **peer,
        "reused": True,
        "reused_from": str(path),
        "measured_at": measured,
        "measured_load_average": peer.get("load_average_before")
        or old.get("machine", {}).get("load_average"),
        "spark_settings": settings,
        "spark_settings_assumed": assumed,
    }
    return reused, list(old.get("tumult_skipped_levels", []))


def peers_dir() -> Path:
    """Where ``make bench-peers`` created the peer environments: ``$PRIVTAB_BENCH_PEERS``,
    else ``.bench-peers`` in the current directory (the checkout)."""
    return Path(os.environ.get("PRIVTAB_BENCH_PEERS") or PEERS_DIR)


def tumult_python(explicit: str | None = None) -> str | None:
    """The Python with tmlt.analytics: the argument, else ``$PRIVTAB_TUMULT_PYTHON``, else
    the venv of ``make bench-peers`` (:func:`peers_dir` ``/tumult``); None when it has no
    tmlt.analytics."""
    default = peers_dir() / "tumult" / "bin" / "python"
    cand = explicit or os.environ.get("PRIVTAB_TUMULT_PYTHON") or str(default)
    if not Path(cand).exists():
        return None
    ok = subprocess.run([cand, "-c", "import tmlt.analytics"], capture_output=True)
    return cand if ok.returncode == 0 else None


# --------------------------------------------------------------------------- run
def run(
    persons: int = 1_000_000,
    data: str | None = None,
    seed: int = 1,
    states: str | None = None,
    tumult: str | None = None,
    tumult_max_groups: int = 200_000,
    tumult_scopes: tuple[str, ...] = ("US",),
    stage2: bool = True,
    cores: int | None = None,
    driver_memory: str = "6g",
    lock: str | None = DEFAULT_LOCK,
    work: Path | None = None,
    engine: str = "polars",
    tumult_result: str | None = None,
    tumult_max_seconds: float | None = None,
) -> dict[str, Any]:
    """Measure both sides on the same input, in the directory ``work`` (the release, both
    sides' stderr, Tumult's workload); see the module docstring."""
    if lock and shutil.which("flock") is None:
        lock = None
    cores = cores or os.cpu_count() or 1
    if work is None:
        raise ValueError("the safetab benchmark needs a work directory")
    tmp = Path(work)
    tmp.mkdir(parents=True, exist_ok=True)
    data_dir = Path(data) if data else tmp / "synth"
    facts = ensure_input(data_dir, persons, seed, states, lock)
    mach = machine()
    w = workload(data_dir)
    peer: dict[str, Any] | None = None
    skipped: list[dict[str, Any]] = []
    tumult_error: str | None = None
    python: str | None = None
    if tumult_result:  # checked before the long privtab run
        peer, skipped = reuse_tumult(tumult_result, facts, w, cores, driver_memory, stage2)
    ours: dict[str, Any] | None = None
    privtab_error: str | None = None
    try:
        ours = run_privtab(data_dir, tmp / "release", lock, engine, cores, driver_memory)
    except RuntimeError as exc:  # still measure Tumult; the per-level lines are in the log
        privtab_error = str(exc)[-2000:]
        print(f"privtab failed: {privtab_error}", file=sys.stderr)
    if peer is None:
        python = tumult_python(tumult)
    if peer is None and python is not None:
        keep_levels = []
        for lv in w["levels"]:
            if lv["scope"] not in tumult_scopes:
                continue
            if tumult_max_groups and _groups(lv) > tumult_max_groups:
                skipped.append(
                    {
                        "level": _key(lv["scope"], lv["geo"], lv["iteration_level"]),
                        "groups": _groups(lv),
                    }
                )
            else:
                keep_levels.append(lv)
        try:
            peer = run_tumult(
                {**w, "levels": keep_levels, "stage2": stage2},
                python,
                tmp,
                lock,
                cores,
                driver_memory,
                tumult_max_seconds,
            )
        except RuntimeError as exc:  # keep privtab's measurement; say why Tumult has none
            tumult_error = str(exc)[-2000:]
            print(f"Tumult failed: {tumult_error}", file=sys.stderr)
            keep_levels = []
        ran = {lv["level"] for lv in peer["levels"]} if peer else set()
        for lv in keep_levels:  # not started: the --tumult-max-seconds budget was spent
            key = _key(lv["scope"], lv["geo"], lv["iteration_level"])
            if key not in ran:
                skipped.append({"level": key, "groups": _groups(lv), "reason": "time"})
    return {
        "benchmark": "safetab",
        "machine": mach,
        "input": {"data": str(data_dir) if data else None, **facts},
        "privtab": ours,
        "tumult": peer,
        "tumult_python": python,
        "tumult_skipped_levels": skipped,
        "tumult_error": tumult_error,
        "privtab_error": privtab_error,
        "comparison": None if ours is None else compare(ours, peer, w, skipped),
    }


def compare(
    ours: dict[str, Any], peer: dict[str, Any] | None, w: dict[str, Any], skipped: list[Any]
) -> dict[str, Any] | None:
    """Ratios over the levels both sides ran (privtab per-level times vs Tumult's)."""
    if peer is None:
        return None
    common = [lv["level"] for lv in peer["levels"]]
    ours_levels = sum(ours["level_seconds"].get(k, 0.0) for k in common)
    ours_draws = {lv["level"]: lv["noise_draws"] for lv in ours["levels"]}
    t_levels = float(peer["levels_seconds"])
    out: dict[str, Any] = {
        "levels_compared": common,
        "privtab_seconds_common_levels": round(ours_levels, 3),
        "privtab_noise_draws_common_levels": sum(ours_draws.get(k, 0) for k in common),
        "tumult_seconds_common_levels": round(t_levels, 3),
        "tumult_noise_draws": peer["noise_draws"],
        "ratio_levels": round(t_levels / ours_levels, 1) if ours_levels else None,
        "tumult_wall_seconds": peer["wall_seconds"],
    }
    if not skipped:
        out["ratio_whole_release"] = round(peer["wall_seconds"] / ours["wall_seconds"], 1)
    else:
        per_draw = t_levels / max(peer["noise_draws"], 1)
        missing = sum(ours_draws.get(s["level"], 0) for s in skipped)
        est = peer["wall_seconds"] + per_draw * missing
        out.update(
            tumult_seconds_per_noisy_count=per_draw,
            tumult_whole_release_seconds_extrapolated=round(est),
            ratio_whole_release_extrapolated=round(est / ours["wall_seconds"], 1),
        )
    return out


def tables(res: dict[str, Any]) -> list[Table]:
    """privtab's release against Tumult's, whole runs and the levels both ran."""
    p, t, c, m = res["privtab"], res["tumult"], res["comparison"], res["machine"]
    if p is None:
        return [table("privtab failed", ["error"], [[str(res.get("privtab_error"))]])]
    engine = p.get("engine", "polars")
    tw = "—" if t is None else f"{t['wall_seconds']:,.1f} s"
    trss = "—" if t is None else f"{t['peak_tree_rss_mb_sampled']:,.0f} MiB"
    tn = "—" if t is None else f"{t['noise_draws']:,}"
    rows = [
        ["wall time (whole run)", f"{p['wall_seconds']:,.1f} s", tw],
        ["peak RSS", f"{p['peak_rss_mb']:,.0f} MiB", trss],
        ["noisy counts", f"{p['noise_draws']:,}", tn],
        ["cells released (T1 + T2)", f"{p['cells_released']:,}", ""],
    ]
    if t is not None and t.get("reused"):
        rows.append(
            [
                "Tumult measured",
                "",
                f"reused from {t['reused_from']} ({t['measured_at']}, "
                f"load {t['measured_load_average']})",
            ]
        )
    notes = [
        f"machine: {m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB, load {m['load_average']}",
        f"input: {res['input']['persons']:,} synthetic persons",
    ]
    if c is not None:
        rows.append(
            [
                f"levels both ran ({len(c['levels_compared'])})",
                f"{c['privtab_seconds_common_levels']:,.2f} s",
                f"{c['tumult_seconds_common_levels']:,.1f} s",
            ]
        )
        notes.append(f"ratio over the common levels: {c['ratio_levels']}×")
        if "ratio_whole_release" in c:
            notes.append(f"ratio, whole release: {c['ratio_whole_release']}×")
        else:
            notes.append(
                "whole release, Tumult extrapolated: "
                f"{c['tumult_whole_release_seconds_extrapolated']:,} s → "
                f"{c['ratio_whole_release_extrapolated']}× (an extrapolation, not a measurement)"
            )
    title = f"SafeTab-P release: privtab ({engine} engine) vs Tumult Analytics"
    return [table(title, ["", "privtab", "Tumult Analytics"], rows, notes)]
