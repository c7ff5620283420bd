"""``--postprocess gls-round`` against production TopDown on the same noisy measurements.

``privtab bench topdown-gls-round --data D --draws N`` draws one state's noisy measurements
at production settings ``N`` times (``privtab topdown run --run us --seed S --nmf`` with
seeds ``S = seed, seed + 1, …``: seeded, NOT private — a benchmark), and post-processes
**each draw's measurements** twice, each in a child process under ``/usr/bin/time -v``
(wall, CPU, peak RSS, the load before):

* ``privtab topdown postprocess --nmf R/nmf`` — production TopDown;
* ``privtab topdown postprocess --nmf R/nmf --postprocess gls-round`` — the tree GLS first
  (:mod:`privtab.topdown.gls_round`).

Both releases are measured against the truth of the synthetic input (never a confidential
one): mean absolute error (MAE) of the total population (``P0010001``) and of all P1 and P2
cells by tabulation geolevel (:mod:`privtab.bench.topdown_state`'s tables). Over the draws:

* each MAE as mean ± standard error over the draws (s.e. = sample s.d. / √N);
* the **paired difference** gls-round − production of each draw's MAE (the same
  measurements post-processed both ways: the draws' common noise cancels), mean ± s.e.;
* for the total, the paired difference also pooled over every geography of every draw
  (``|error_gls| − |error_production|`` per geography; its s.e. treats the geographies as
  independent — they are not quite: the counties of a state sum to its invariant total);
* the time ratio gls-round / production, CPU and wall, from the summed times of all draws.

A state with many counties (``privtab synth --states KS``: 105 counties) gives many county
errors per draw. Issue 30's target: lower county and tract error than production at ≤ 1.5×
its time. Old records (one draw, no ``draws`` key) render as before.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from privtab.bench._common import machine, privtab_exe, run_timed
from privtab.bench.topdown_state import TAB_LEVELS, _truth_tables, input_facts
from privtab.report.text import Table, table

__all__ = ["POSTPROCESSORS", "run", "tables"]

POSTPROCESSORS = ("production", "gls-round")
METRICS = ("total", "P1", "P2")
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


def _errors(release: Path, truth: dict[str, pl.DataFrame]) -> dict[str, dict[str, np.ndarray]]:
    """Per tabulation level and metric (``total``, ``P1``, ``P2``): the release's signed
    errors, one per (geography, cell), in a fixed order (GEOID, CELL) — so two releases'
    errors pair up geography by geography."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for t, want in truth.items():
        got = pl.read_parquet(release / "pl94" / f"{t}.parquet")
        j = want.join(got, on=["GEOID", "GEOLEVEL", "CELL"], suffix="_R").sort("GEOID", "CELL")
        err = (pl.col("COUNT_R").cast(pl.Int64) - pl.col("COUNT").cast(pl.Int64)).alias("E")
        for level in TAB_LEVELS:
            sub = j.filter(pl.col("GEOLEVEL") == level).select("CELL", err)
            row = out.setdefault(level, {})
            row[t] = sub.get_column("E").to_numpy()
            if t == "P1":
                tot = sub.filter(pl.col("CELL") == "P0010001")
                row["total"] = tot.get_column("E").to_numpy()
    return out


def _draw_accuracy(
    prod: dict[str, dict[str, np.ndarray]], gls: dict[str, dict[str, np.ndarray]]
) -> dict[str, Any]:
    """One draw: per level and metric, both MAEs; for the total, the paired per-geography
    differences' count, sum and sum of squares (pooled over draws later)."""
    out: dict[str, Any] = {}
    for level, p in prod.items():
        g = gls[level]
        row: dict[str, Any] = {"geographies": int(p["total"].size)}
        for m in METRICS:
            if p[m].shape != g[m].shape:
                raise ValueError(f"{level} {m}: the two releases tabulate different cells")
            row[m] = {
                "production": float(np.mean(np.abs(p[m]))) if p[m].size else 0.0,
                "gls-round": float(np.mean(np.abs(g[m]))) if g[m].size else 0.0,
            }
        d = (np.abs(g["total"]) - np.abs(p["total"])).astype(np.float64)
        row["total_paired"] = {"n": int(d.size), "sum": float(d.sum()),
                               "sumsq": float((d * d).sum())}  # fmt: skip
        out[level] = row
    return out


def run(
    data: str | None = None, seed: int = 1, draws: int = 1, work: Path | None = None
) -> dict[str, Any]:
    """``draws`` noise draws, each post-processed both ways and timed, and their accuracy
    (module docstring), in ``work``."""
    from privtab.topdown.folder import load_data

    if data is None:
        raise ValueError("give --data: a folder written by privtab synth (e.g. --states KS)")
    if work is None:
        raise ValueError("the topdown-gls-round benchmark needs a work directory")
    if draws < 1:
        raise ValueError("--draws must be at least 1")
    work.mkdir(parents=True, exist_ok=True)
    exe = privtab_exe()
    facts = load_data(data, validated=False)
    truth = _truth_tables(facts)
    runs: list[dict[str, Any]] = []
    for s in range(seed, seed + draws):
        here = work / f"seed-{s}"
        here.mkdir(exist_ok=True)
        measured = here / "measured"
        first = [exe, "topdown", "run", "--data", str(data), "--out", str(measured), "--run",
                 "us", "--seed", str(s), "--nmf", "--no-report", "--overwrite", "--json",
                 "--ledger", str(here / "ledger.json")]  # fmt: skip
        one: dict[str, Any] = {"seed": s, "measurements": _timed(first, here / "measure.log")}
        errors = {}
        for name in POSTPROCESSORS:
            cmd = [exe, "topdown", "postprocess", "--nmf", str(measured / "nmf"), "--out",
                   str(here / name), "--postprocess", name, "--no-report", "--overwrite",
                   "--json"]  # fmt: skip
            one[name] = _timed(cmd, here / f"{name}.log")
            errors[name] = _errors(here / name, truth)
            shutil.rmtree(here / name)  # the draw's errors are kept; the releases are large
        shutil.rmtree(measured)
        one["accuracy"] = _draw_accuracy(errors["production"], errors["gls-round"])
        runs.append(one)
    return {
        "input": {**input_facts(data, facts), "seed": seed, "draws": draws},
        "draws": runs,
        "summary": summarise(runs),
        "machine": machine(),
    }


def _mean_se(values: Sequence[float]) -> dict[str, float | None]:
    """Mean and standard error (sample s.d. / √n; ``None`` for one value)."""
    a = np.asarray(values, dtype=np.float64)
    se = float(a.std(ddof=1) / math.sqrt(a.size)) if a.size > 1 else None
    return {"mean": float(a.mean()), "se": se}


def summarise(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Over the draws: per level and metric, each post-processor's MAE and the paired
    difference (gls-round − production) as mean ± s.e.; the total's pooled per-geography
    paired difference; the time ratios from the summed times."""
    levels: dict[str, Any] = {}
    for level in runs[0]["accuracy"]:
        rows = [r["accuracy"][level] for r in runs]
        entry: dict[str, Any] = {"geographies": rows[0]["geographies"]}
        for m in METRICS:
            p = [r[m]["production"] for r in rows]
            g = [r[m]["gls-round"] for r in rows]
            entry[m] = {
                "production": _mean_se(p),
                "gls-round": _mean_se(g),
                "difference": _mean_se([b - a for a, b in zip(p, g, strict=True)]),
            }
        n = sum(r["total_paired"]["n"] for r in rows)
        s = sum(r["total_paired"]["sum"] for r in rows)
        ss = sum(r["total_paired"]["sumsq"] for r in rows)
        mean = s / n if n else 0.0
        var = (ss - n * mean * mean) / (n - 1) if n > 1 else None
        entry["total_pooled_difference"] = {
            "n": n, "mean": mean,
            "se": math.sqrt(max(var, 0.0) / n) if var is not None else None,
        }  # fmt: skip
        levels[level] = entry
    times: dict[str, Any] = {}
    for name in POSTPROCESSORS:
        times[name] = {
            "wall_seconds": sum(r[name]["wall_seconds"] for r in runs),
            "cpu_seconds": sum(r[name]["cpu_seconds"] for r in runs),
            "peak_rss_mb": max(r[name]["peak_rss_mb"] for r in runs),
            "gls_seconds": sum(r[name]["seconds"].get("gls", 0.0) for r in runs),
            "load_average_before": [r[name]["load_average_before"] for r in runs],
        }
    ratio = {
        k: times["gls-round"][k] / times["production"][k] for k in ("wall_seconds", "cpu_seconds")
    }
    return {"levels": levels, "times": times, "ratio": ratio}


def _pm(v: dict[str, Any], digits: int, signed: bool = False) -> str:
    mean = f"{v['mean']:+.{digits}f}" if signed else f"{v['mean']:.{digits}f}"
    mean = mean.replace("-", "−")
    return mean if v.get("se") is None else f"{mean} ± {v['se']:.{digits}f}"


def tables(res: dict[str, Any]) -> list[Table]:
    """Error by geolevel over the draws (mean ± s.e.) and the paired differences; the
    times. A one-draw record of the first version renders as it did."""
    if "draws" not in res:
        return _tables_one_draw(res)
    summ, inp = res["summary"], res["input"]
    n = inp["draws"]
    seeds = f"seeds {inp['seed']}–{inp['seed'] + n - 1}" if n > 1 else f"seed {inp['seed']}"
    errors, diffs = [], []
    for level, e in summ["levels"].items():
        errors.append([level, f"{e['geographies']:,}",
                       *(_pm(e[m][k], 3 if m != "total" else 2)
                         for m in METRICS for k in POSTPROCESSORS)])  # fmt: skip
        pooled = e["total_pooled_difference"]
        diffs.append([level, f"{e['geographies']:,}",
                      *(_pm(e[m]["difference"], 3, signed=True) for m in METRICS),
                      _pm(pooled, 3, signed=True), f"{pooled['n']:,}"])  # fmt: skip
    note = (f"{inp['persons']:,} synthetic persons, {inp['blocks']:,} blocks; {n} draw"
            f"{'s' if n > 1 else ''} of production-law noise ({seeds}), each post-processed "
            "both ways; mean ± standard error over the draws")  # fmt: skip
    t, ratio = summ["times"], summ["ratio"]
    loads = sorted(x for name in POSTPROCESSORS for lo in t[name]["load_average_before"]
                   for x in lo[:1])  # fmt: skip
    times = [
        [name, f"{t[name]['wall_seconds']:,.1f}", f"{t[name]['cpu_seconds']:,.1f}",
         f"{t[name]['peak_rss_mb']:,.0f}", f"{t[name]['gls_seconds']:,.1f}"]
        for name in POSTPROCESSORS
    ]  # fmt: skip
    return [
        table(
            "Mean absolute error, production TopDown vs gls-round, the same noisy measurements",
            HEADER,
            errors,
            notes=[note],
        ),
        table(
            "Paired difference gls-round − production (negative: gls-round is better)",
            [
                "geolevel",
                "geographies",
                "total",
                "P1 cells",
                "P2 cells",
                "total, pooled over geographies × draws",
                "pairs",
            ],
            diffs,
            notes=[
                "mean ± s.e. over the draws of each draw's MAE difference; the pooled "
                "column: |error| difference per geography, s.e. treating geographies as "
                "independent"
            ],
        ),
        table(
            f"Time of the two post-processings, summed over {n} draw{'s' if n > 1 else ''} "
            "(privtab topdown postprocess, same measurements)",
            ["postprocess", "wall s", "CPU s", "peak RSS MiB", "of which tree GLS, wall s"],
            times,
            notes=[
                f"gls-round / production: wall {ratio['wall_seconds']:.2f}×, CPU "
                f"{ratio['cpu_seconds']:.2f}×; 1-min load before the runs "
                f"{loads[0]:g}–{loads[-1]:g}"
            ],
            left=1,
        ),
    ]


def _tables_one_draw(res: dict[str, Any]) -> list[Table]:
    """The first version's records (one draw): error by geolevel side by side, the times."""
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
