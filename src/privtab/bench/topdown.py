"""TopDown end to end at production settings, and the generic solvers on the same problems.

Run: ``privtab bench topdown --persons 1e6[,1e7] [--workers 2] [--data DIR] [--sample 8]``.
For each size, on one synthetic nation (``privtab synth --seed S --format parquet`` into
``DATA/synth-N`` unless present; the 50 states, DC and Puerto Rico):

1. **the release** — ``privtab topdown run --run both --seed S --no-report --workers W``
   (the US and Puerto Rico persons and units runs: every level, MDF, P1–P5/H1, output
   validation) in a child process under ``/usr/bin/time -v``: wall and CPU seconds, peak
   RSS; from the confidential run record it writes beside the release, the seconds, parents
   and solve seconds of every level (the noise drawn and the problems built count as
   "measure", the per-parent solves as "solve");
2. **the generic approach on a sample of the same kind of problems** — in this process,
   the US persons run is rebuilt on the same input and seed (:func:`sample_problems`: the
   root, then the chunks in order, each level's parents solved as the release solves them)
   and, per children's level, the first ``--sample`` optimised problems (of at most
   :data:`MAX_SAMPLE_VARIABLES` variables) are solved again,
   one BLAS thread, in turn: by privtab's structured solver
   (:func:`privtab.topdown.solve.solve_children`) and by the generic approach — OSQP for
   every L2 pass (ε 10⁻⁹, polished: an answer as exact as the structured one) and HiGHS
   for the rounding LP (``solver="osqp"``). The ratio per level is a same-run ratio; the
   generic approach's time for the whole release is estimated as Σ over levels of the
   release's parents × the generic seconds per problem of the level.

The seeded noise has the production law but is not private: a benchmark, never a release.
Record: ``result.runs[]`` (``persons``, ``wall_seconds``, ``peak_rss_gb``,
``persons_per_s``, ``problems_per_s``, the levels, the sample), the 35,000 persons/s
target (the rate that puts the 2020 nation, 3.31 × 10⁸ persons, under 2.5 hours) and the
linear extrapolation of the largest run to that size.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from privtab.bench._common import Table, machine, privtab_exe, run_timed, synthetic_input, table

__all__ = ["run", "sample_problems", "tables"]

ABOUT = """\
One synthetic nation per size (`privtab synth --seed 7 --format parquet`: 50 states, DC,
Puerto Rico). The release — `privtab topdown run --run both --seed 1 --no-report`: the US
and Puerto Rico persons and units runs at production settings, every level, MDF,
P1–P5/H1, output validation — runs in a child process under `/usr/bin/time -v`; its
confidential run record gives the seconds of every level ("measure": noise drawn and
problems built; "solve": the per-parent solves). Then, in the benchmark's process, the US
persons run is rebuilt on the same input and seed and, per level, a sample of its
per-parent problems is solved in turn by privtab's structured solver and by the generic
approach — OSQP (ε 10⁻⁹, polished) for the L2 passes and HiGHS for the rounding LP — one
BLAS thread each: the speed-up is a same-run ratio. Target: 35,000 persons/s end to end
(3.31 × 10⁸ persons in 2.5 hours on 2 cores). `--engines polars,spark` runs the release
again on the Spark engine (same input and seed; `--spark-master`, default `local[2]`):
its wall time ÷ the embedded engine's is a same-run ratio. The synthetic nation keeps every
county at any size and gives a county one tract per 3,700 expected persons, so below the
2020 size its geography is sparser than the nation's (10⁷ persons: 4,823 tracts, 13,731
block groups, 432,952 blocks — the 2020 proportions at 10⁷ would be ≈ 2,550, 7,240 and
243,000); `--states GA` (a whole state at its real population, 10⁷ ≈ Georgia's 1.07 × 10⁷)
has the nation's density (159 counties, 2,714 tracts, 7,722 block groups, 241,177 blocks).
Each run's "nation by level" multiplies each level's measured seconds by the 2020 count of
its geounits ÷ the run's (realistic only at the nation's density). `--no-text` writes the
release in Parquet only (at the 2020 size the text would be ≈ 110 GB); with `--work W
--keep` the release's progress is written to `W/release-N-ENGINE.stderr` as it runs.
"""

#: The 2020 US + Puerto Rico persons (the national run's size).
NATION = 331_449_281 + 3_285_874
#: The 2020 tabulation blocks (≈ 8.1 × 10⁶: 50 states, DC and Puerto Rico).
NATION_BLOCKS = 8_132_968
#: Persons per second that put the nation under 2.5 hours.
TARGET_PERSONS_PER_S = 35_000.0
#: Problems with more variables are not sampled (a state's counties, the nation's states:
#: OSQP to ε 10⁻⁹ on 10⁵ variables takes minutes; the sample measures the many small ones).
MAX_SAMPLE_VARIABLES = 50_000
LEVEL_KEYS = ("scope", "histogram", "level", "parents", "children", "paths", "generic_path")


def sample_problems(data: Path, seed: int, per_level: int) -> dict[str, list[Any]]:
    """Up to ``per_level`` optimised per-parent problems of each children's level of the US
    persons run of ``data`` (seeded noise ``seed``), in the release's order: the root, the
    states' parts, then the chunks in order until every level has its sample. Each parent
    is solved by the release's solver so its children's problems are the release's kind."""
    import warnings

    from privtab.mechanisms import InsecureReleaseWarning
    from privtab.random import SeededSource
    from privtab.topdown.engine import solve_parent
    from privtab.topdown.folder import load_data
    from privtab.topdown.runs import prepare_run
    from privtab.topdown.solve import ChildrenProblem, ChildrenSolution

    got: dict[str, list[ChildrenProblem]] = defaultdict(list)

    def keep(problem: ChildrenProblem) -> ChildrenSolution:
        sol = solve_parent(problem)
        bucket = got[problem.level or "root"]
        d = sol.diagnostics
        small = d.variables <= MAX_SAMPLE_VARIABLES
        if d.path == "optimised" and small and len(bucket) < per_level:
            bucket.append(problem)
        return sol

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureReleaseWarning)
        facts = load_data(data, validated=False)
        pair = prepare_run(facts, "us", source=SeededSource(seed), solve=keep)
    engine = pair.persons.engine
    levels = engine.hierarchy.levels
    for _chunk in engine.chunks():
        if all(len(got[lv]) >= per_level for lv in levels[1:]):
            break
    return {lv: got[lv] for lv in levels if got.get(lv)}


def _time_sample(problems: dict[str, list[Any]]) -> dict[str, dict[str, Any]]:
    """Per level: seconds per problem of the structured solver and of OSQP + HiGHS, the
    same problems in turn (one BLAS thread), and whether they reached the same L2 optimum
    and the same counts."""
    from privtab._blas import one_blas_thread
    from privtab.topdown.solve import solve_children

    out: dict[str, dict[str, Any]] = {}
    with one_blas_thread():
        for level, probs in problems.items():
            secs = {"structured": 0.0, "osqp_highs": 0.0}
            same = same_l2 = variables = 0
            for p in probs:
                t0 = time.process_time()
                mine = solve_children(p)
                t1 = time.process_time()
                generic = solve_children(p, solver="osqp")
                t2 = time.process_time()
                secs["structured"] += t1 - t0
                secs["osqp_highs"] += t2 - t1
                same += int((mine.counts == generic.counts).all())
                same_l2 += int(_same_objectives(mine, generic))
                variables += mine.diagnostics.variables
            n = len(probs)
            out[level] = {
                "problems": n,
                "structured_s": round(secs["structured"] / n, 5),
                "osqp_highs_s": round(secs["osqp_highs"] / n, 5),
                "ratio": round(secs["osqp_highs"] / max(secs["structured"], 1e-9), 2),
                "same_counts": same,
                "same_l2_objective": same_l2,
                "mean_variables": round(variables / n),
            }
    return out


def _same_objectives(a: Any, b: Any, rtol: float = 1e-6) -> bool:
    """Whether two solves of one problem reached the same L2 optimum in every pass
    (objectives within ``rtol`` relative). Their rounded counts may still differ where
    the L2 optimum is not unique or rounding meets a tie: equal counts are reported, not
    required."""
    x, y = a.diagnostics.l2_objectives, b.diagnostics.l2_objectives
    return len(x) == len(y) and all(
        abs(u - v) <= rtol * max(1.0, abs(u), abs(v)) for u, v in zip(x, y, strict=True)
    )


def _release(
    inputs: Path,
    out: Path,
    seed: int,
    workers: int,
    work: Path,
    spark: dict[str, str] | None,
    text: bool = True,
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """One release of ``inputs`` under ``/usr/bin/time -v`` (the embedded engine with
    ``workers`` processes, or — ``spark``: its master and memory — the Spark engine;
    ``text`` false: ``--no-text``): the timed figures, its confidential run record and the
    command."""
    run_record = work / f"{out.name}.CONFIDENTIAL-run-record.json"
    cmd = [
        privtab_exe(), "topdown", "run", "--data", str(inputs), "--out", str(out),
        "--run", "both", "--seed", str(seed), "--no-report", "--overwrite",
        "--ledger", str(work / "ledger.json"), "--run-record", str(run_record),
        *(() if text else ("--no-text",)),
    ]  # fmt: skip
    if spark is None:
        cmd += ["--workers", str(workers)]
    else:
        cmd += ["--engine", "spark", "--spark-master", spark["master"]]
        for key in ("spark.driver.memory", "spark.executor.memory"):
            cmd += ["--spark-conf", f"{key}={spark['memory']}"]
    # no --json: the run's progress (every 10 s) goes to the log as it runs
    timed, _ = run_timed(cmd, work / f"{out.name}.stderr")
    record = json.loads(run_record.read_text())
    return timed, record, cmd


def _figures(persons: int, timed: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """Wall, CPU, peak RSS (``/usr/bin/time -v``'s: the largest process; the process
    tree's sum beside it), persons/s and phases of one release."""
    wall = float(timed["wall_seconds"])
    tree = timed.get("peak_tree_rss_mb")
    return {
        "wall_seconds": wall,
        "cpu_seconds": timed["cpu_seconds"],
        "peak_rss_gb": round(float(timed["peak_rss_mb"] or 0) / 1024, 3),
        "peak_tree_rss_gb": None if tree is None else round(float(tree) / 1024, 3),
        "load_average_before": timed["load_average_before"],
        "persons_per_s": round(persons / wall, 1),
        "phases": {k: round(v, 2) for k, v in record["seconds"].items()},
    }


def _one_size(
    persons: int,
    data: Path | None,
    seed: int,
    workers: int,
    sample: int,
    work: Path,
    engines: tuple[str, ...] = ("polars",),
    spark: dict[str, str] | None = None,
    states: str | None = None,
    text: bool = True,
) -> dict[str, Any]:
    tag = f"synth-{persons}" + (f"-{states.replace(',', '-')}" if states else "")
    inputs = (data if data is not None else work) / tag
    options = ("--format", "parquet", *(("--states", states) if states else ()))
    synth, synth_seconds = synthetic_input(inputs, persons, 7, *options)
    first, *others = engines
    timed, record, cmd = _release(
        inputs, work / f"release-{persons}-{first}", seed, workers, work,
        spark if first == "spark" else None, text,
    )  # fmt: skip
    levels = [
        {**{k: lv.get(k) for k in LEVEL_KEYS}, "seconds": lv["seconds"]} for lv in record["levels"]
    ]
    solve_s = sum(lv["seconds"].get("solve", 0.0) for lv in levels)
    measure_s = sum(lv["seconds"].get("measure", 0.0) for lv in levels)
    optimised = sum(lv["paths"].get("optimised", 0) for lv in levels)
    fig = _figures(persons, timed, record)
    wall = fig["wall_seconds"]
    res: dict[str, Any] = {
        "persons": persons,
        "blocks": synth.get("geography", {}).get("blocks"),
        "geography": synth.get("geography"),
        "states": states,
        "text": text,
        "engine": first,
        "workers": workers if first == "polars" else None,
        **fig,
        "problems": optimised,
        "problems_per_s": round(optimised / wall, 2),
        "solve_seconds": round(solve_s, 2),
        "measure_seconds": round(measure_s, 2),
        "other_seconds": round(wall - solve_s - measure_s, 2),
        "levels": levels,
        "command": " ".join(["/usr/bin/time -v", *cmd]),
        "synth_seconds": synth_seconds,
    }
    for engine in others:  # the same input and seed on the other engine: a same-run ratio
        t2, r2, c2 = _release(
            inputs, work / f"release-{persons}-{engine}", seed, workers, work,
            spark if engine == "spark" else None, text,
        )  # fmt: skip
        other = _figures(persons, t2, r2)
        other["command"] = " ".join(["/usr/bin/time -v", *c2])
        if engine == "spark" and spark is not None:
            other["spark"] = dict(spark)
        other["wall_ratio"] = round(other["wall_seconds"] / wall, 3)
        res.setdefault("engines", {})[engine] = other
    if sample > 0:
        t0 = time.monotonic()
        timed_sample = _time_sample(sample_problems(inputs, seed, sample))
        res["sample"] = timed_sample
        res["sample_seconds"] = round(time.monotonic() - t0, 1)
        res["generic_estimate"] = _generic_estimate(levels, timed_sample)
    res["nation_by_level"] = extrapolate_levels(res)
    return res


def _generic_estimate(levels: list[dict[str, Any]], sample: dict[str, Any]) -> dict[str, Any]:
    """The US persons run's solves as the structured solver and as the generic approach
    would take them on one core: each level's optimised parents × the level's sampled CPU
    seconds per problem of each (like for like; the levels' measured solve seconds, which
    with workers count the wall time waiting for them, are beside them)."""
    mine = generic = measured = 0.0
    for lv in levels:
        s = sample.get(lv["level"])
        if lv["scope"] != "US" or lv["histogram"] != "persons" or s is None:
            continue
        measured += lv["seconds"].get("solve", 0.0)
        mine += lv["paths"].get("optimised", 0) * s["structured_s"]
        generic += lv["paths"].get("optimised", 0) * s["osqp_highs_s"]
    return {
        "us_persons_solve_seconds": round(measured, 2),
        "structured_cpu_seconds": round(mine, 1),
        "generic_cpu_seconds": round(generic, 1),
        "ratio": round(generic / max(mine, 1e-9), 2),
    }


#: The 2020 tabulation geography (50 states, DC and Puerto Rico): what the per-level
#: extrapolation multiplies the measured per-child seconds by.
NATION_GEOGRAPHY = {
    "County": 3_221,
    "Tract": 85_395,
    "Block_Group": 242_335,
    "Block": NATION_BLOCKS,
}
_GEOGRAPHY_KEY = {"County": "counties", "Tract": "tracts", "Block_Group": "block_groups",
                  "Block": "blocks"}  # fmt: skip


def extrapolate_levels(run: dict[str, Any]) -> dict[str, Any]:
    """A run's levels at the nation's size, from its measured costs per unit: each level
    of the county level and below (both runs, both scopes) at its seconds × (the 2020
    count of its geounits ÷ the run's synthetic count) — realistic when the run's
    geography has the nation's density (``--states``: whole states at their real
    population); the levels above (the nation's and the states' problems: one or a few
    problems whose size grows with the populated cells, not with their number) and the
    phases outside the levels (inputs, prepare, writing, validation) are scaled by
    persons. The solve seconds of a level are the wall time its slices were in flight
    (with workers, slices overlap), so the sum is an upper bound of the level work."""
    geo = run.get("geography") or {}
    scale_p = NATION / run["persons"]
    levels: dict[str, float] = defaultdict(float)
    top = 0.0
    for lv in run["levels"]:
        secs = lv["seconds"].get("solve", 0.0) + lv["seconds"].get("measure", 0.0)
        key = _GEOGRAPHY_KEY.get(lv["level"])
        if key and geo.get(key):
            levels[lv["level"]] += secs * NATION_GEOGRAPHY[lv["level"]] / geo[key]
        else:
            top += secs * scale_p
    outside = max(run["wall_seconds"] - run["solve_seconds"] - run["measure_seconds"], 0.0)
    out = {k: round(v / 3600, 2) for k, v in levels.items()}
    out["levels above the counties (× persons)"] = round(top / 3600, 2)
    out["outside the levels (× persons)"] = round(outside * scale_p / 3600, 2)
    return {"hours": out, "total_hours": round(sum(out.values()), 2)}


def extrapolate(big: dict[str, Any]) -> dict[str, Any]:
    """The largest run at the nation's size: time linear in persons, memory linear in
    blocks (the outputs and their validation hold every block's tables)."""
    blocks = big.get("blocks") or 0
    return {
        "from_persons": big["persons"],
        "wall_hours": round(big["wall_seconds"] * NATION / big["persons"] / 3600, 2),
        "peak_rss_gb": round(big["peak_rss_gb"] * NATION_BLOCKS / blocks, 1) if blocks else None,
        "method": f"time linear in persons; memory linear in blocks ({NATION_BLOCKS:,} in 2020)",
    }


def run(
    persons: list[int] | None = None,
    data: Path | None = None,
    seed: int = 1,
    workers: int = 2,
    sample: int = 8,
    work: Path | None = None,
    engines: tuple[str, ...] = ("polars",),
    spark_master: str = "local[2]",
    spark_memory: str = "6g",
    states: str | None = None,
    text: bool = True,
) -> dict[str, Any]:
    """Each size's release(s) and sample (module docstring), in ``work``."""
    if work is None:
        raise ValueError("the TopDown benchmark needs a work directory")
    spark = {"master": spark_master, "memory": spark_memory}
    runs = [
        _one_size(n, data, seed, workers, sample, work, engines, spark, states, text)
        for n in persons or [1_000_000]
    ]
    big = max(runs, key=lambda r: r["persons"])
    return {
        "machine": machine(),
        "runs": runs,
        "target_persons_per_s": TARGET_PERSONS_PER_S,
        "nation_persons": NATION,
        "extrapolation": extrapolate(big),
    }


def _nation_note(res: dict[str, Any]) -> str:
    """The run at the nation's size, or the largest run's extrapolation to it."""
    ex = res["extrapolation"]
    if ex["from_persons"] >= res["nation_persons"]:
        return (f"the nation's size itself ({ex['from_persons']:,} persons): measured, not "
                "extrapolated")  # fmt: skip
    return (
        f"extrapolated to {res['nation_persons']:,} persons ({ex['method']}, from "
        f"{ex['from_persons']:,}): {ex['wall_hours']:.1f} h, {ex['peak_rss_gb'] or 0:.0f} "
        "GiB peak RSS"
    )


def _engine_label(r: dict[str, Any]) -> str:
    """``polars ×W`` (the embedded engine, W worker processes) or ``spark MASTER``."""
    if r.get("engine", "polars") == "spark":
        return "spark " + str((r.get("spark") or {}).get("master", ""))
    return f"polars ×{r['workers']}"


def tables(res: dict[str, Any]) -> list[Table]:
    """The runs, then per run its levels and its sample."""
    target = res["target_persons_per_s"]
    rows = [
        [
            f"{r['persons']:,}" + (f" ({r['states']})" if r.get("states") else ""),
            _engine_label(r),
            f"{r['wall_seconds']:,.1f}",
            f"{r['cpu_seconds'] or 0:,.1f}",
            f"{r['peak_rss_gb']:.2f}",
            f"{r['persons_per_s']:,.0f} ({r['persons_per_s'] / target:.2f}× target)",
            f"{r['problems']:,} ({r['problems_per_s']:,.1f}/s)",
            f"{r['solve_seconds']:,.1f} / {r['measure_seconds']:,.1f} / "
            + (f"{r['other_seconds']:,.1f}" if r["other_seconds"] >= 0 else "— (overlap)"),
            " / ".join(f"{x:g}" for x in r["load_average_before"]),
        ]
        for r in res["runs"]
    ]
    out = [
        table(
            "TopDown end to end (US + PR, or the states named beside the persons; "
            "persons + units runs, MDF, tables, validation)",
            [
                "persons",
                "engine",
                "wall s",
                "CPU s",
                "peak RSS GiB",
                "persons/s",
                "problems",
                "solve / measure / other s",
                "load before",
            ],
            rows,
            notes=[
                f"target {target:,.0f} persons/s (3.31 × 10⁸ in 2.5 h); solve and measure "
                "seconds are summed over the levels (with workers, solve counts the wall "
                "time from a slice's submission to its collection: slices overlap, so the sum "
                "can exceed the wall time and other = wall − solve − measure is not shown)",
                _nation_note(res),
            ],
            left=1,
        )
    ]
    spark_rows = [
        [
            f"{r['persons']:,}",
            _engine_label({**o, "engine": name, "workers": r["workers"]}),
            f"{o['wall_seconds']:,.1f}",
            f"{o['peak_rss_gb']:.2f} / {o.get('peak_tree_rss_gb') or 0:.2f}",
            f"{o['persons_per_s']:,.0f}",
            f"{o['wall_ratio']:.2f}",
        ]
        for r in res["runs"]
        for name, o in (r.get("engines") or {}).items()
    ]
    if spark_rows:
        out.append(
            table(
                "The other engine on the same input and seed, same run",
                ["persons", "engine", "wall s", "peak RSS GiB (largest / tree)", "persons/s",
                 "wall ÷ embedded"],
                spark_rows,
                notes=["the ratio divides this engine's wall seconds by the first engine's "
                       "(the row above) on the same input, seed and machine load"],
                left=1,
            )
        )  # fmt: skip
    for r in res["runs"]:
        out.append(
            table(
                f"{r['persons']:,} persons: seconds per level",
                ["run", "children's level", "parents", "generic path", "measure s", "solve s"],
                [
                    [
                        f"{lv['scope']} {lv['histogram']}",
                        lv["level"],
                        f"{lv['parents']:,}",
                        ", ".join(f"{k} {v}" for k, v in (lv["generic_path"] or {}).items()) or "—",
                        f"{lv['seconds'].get('measure', 0):.1f}",
                        f"{lv['seconds'].get('solve', 0):.1f}",
                    ]
                    for lv in r["levels"]
                ],
                notes=[
                    f"phases (s): {r['phases']}",
                    "at the nation's size, by level (h; module extrapolate_levels): "
                    + ", ".join(
                        f"{k} {v:g}"
                        for k, v in (r.get("nation_by_level") or {}).get("hours", {}).items()
                    ),
                ],
                left=2,
            )
        )
        if "sample" in r:
            g = r["generic_estimate"]
            out.append(
                table(
                    f"{r['persons']:,} persons: structured solver vs OSQP + HiGHS, same "
                    "problems, same run (US persons)",
                    [
                        "children's level",
                        "problems",
                        "structured s/problem",
                        "OSQP + HiGHS s/problem",
                        "speed-up",
                        "same counts",
                    ],
                    [
                        [
                            lv,
                            str(s["problems"]),
                            f"{s['structured_s']:.4f}",
                            f"{s['osqp_highs_s']:.4f}",
                            f"{s['ratio']:.1f}×",
                            f"{s['same_counts']}/{s['problems']}",
                        ]
                        for lv, s in r["sample"].items()
                    ],
                    notes=[
                        "CPU seconds per problem, one BLAS thread, the two solvers in turn on "
                        "each problem",
                        "the US persons run's optimised parents × the sampled CPU seconds: "
                        f"structured ≈ {g['structured_cpu_seconds']:,.0f} s, OSQP + HiGHS ≈ "
                        f"{g['generic_cpu_seconds']:,.0f} s ({g['ratio']:.1f}×); the levels' "
                        f"solve seconds as measured (wall, with workers): "
                        f"{g['us_persons_solve_seconds']:,.0f} s",
                        "same counts: the two rounded solutions agree (the rounding of a "
                        "generic solver's 10⁻⁹-accurate L2 answer can fall on the other side "
                        "of a tie)",
                    ],
                    left=1,
                )
            )
    return out
