"""The SafeTab-P release in Tumult Analytics — the peer side of :mod:`privtab.bench.safetab`.

Run as a script (never imported by privtab) by a Python environment that has
``tmlt.analytics`` (Spark local mode; it does NOT import privtab, whose numpy/pandas/pyarrow
pins conflict with Tumult's): the venv ``make bench-peers`` creates (``.bench-peers/tumult``)
or ``$PRIVTAB_TUMULT_PYTHON``. Usage::

    python .../privtab/bench/tumult_safetab.py WORKLOAD.json RESULT.json

``WORKLOAD.json`` is written by :mod:`privtab.bench.safetab` from privtab's release plan
(:meth:`privtab.tabulate.ReleasePlan.from_config` of the packaged 2020 production config) and
the public files: per level (geography level × iteration level) its public regions (from
GRF-C), its iterations (from the reference files), which are TotalOnly, its stability, its
thresholds and the per-group ρ of each stage; the code → iteration groups; the age bins.

What is computed, per level, as SafeTab-P did it with Tumult Analytics:

1. persons (``person-records.txt``) joined to the public GRF-C (Spark), region ids of every
   geography level and the Sex × Age bins added as columns (Spark), a Session over them
   (``AddOneRow``, zCDP);
2. a view: ``flat_map`` person → iterations of the level (a Python function over the public
   code → iteration groups: race *alone* = all codes in the group, *alone or in
   combination* = any, ethnicity = QSPAN in the group), ``max_rows`` = the level's
   stability, ``grouping=True`` (cached);
3. stage 1: a discrete-Gaussian noisy count over the public KeySet regions × non-TotalOnly
   iterations with ρ = γ·b/s per group; TotalOnly groups: one count with ρ = b/s;
4. stage 2 (``--stage2``, on by default): statistic levels from the noisy stage-1 totals
   (driver side, post-processing), then a new total (level 0) or Sex × Age4/9/23 cells
   (levels 1–3) with ρ = (1−γ)·b/s, each over the KeySet of the groups at that level.

Every query's budget is calibrated with Tumult's own ``Session._noise_info`` so that its
discrete Gaussian has exactly the σ² = 1/(2ρ) privtab uses for the same count (reported in
the result). Tumult's accountant cannot see that the stage-1, TotalOnly and stage-2 KeySets
are disjoint groups, so it charges more than b per level; the session budget is set to the
sum of the charges (the noise, which is what costs time, is the same as privtab's).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def _spark(cores: int, memory: str) -> Any:
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("privtab-bench-tumult-safetab")
        .config("spark.driver.memory", memory)
        .config("spark.sql.shuffle.partitions", str(max(4, 2 * cores)))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )


def _persons(spark: Any, w: dict[str, Any]) -> Any:
    """Persons ⋈ GRF-C with every level's region id and the age bins as columns."""
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql import types as T  # noqa: N812

    opts = {"sep": "|", "header": "true", "inferSchema": "false"}
    persons = spark.read.options(**opts).csv(w["persons"])
    grfc = spark.read.options(**opts).csv(w["grfc"])
    block = ["TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK"]
    df = persons.join(F.broadcast(grfc.select(*block, "PLACEFP", "AIANNHCE")), on=block)
    st, cou, tract = F.col("TABBLKST"), F.col("TABBLKCOU"), F.col("TABTRACTCE")
    us = ~st.isin("72")
    none = F.lit("NA")  # not a region of the level: no key of any KeySet
    place = F.when(F.col("PLACEFP") != "99999", F.concat(st, F.col("PLACEFP")))
    regions = {
        "USA": F.when(us, F.lit("1")),
        "STATE": F.when(us, st),
        "COUNTY": F.when(us, F.concat(st, cou)),
        "TRACT": F.when(us, F.concat(st, cou, tract)),
        "PLACE": F.when(us, place),
        "AIANNH": F.when(us & (F.col("AIANNHCE") != "9999"), F.col("AIANNHCE")),
        "PR-STATE": F.when(~us, st),
        "PR-COUNTY": F.when(~us, F.concat(st, cou)),
        "PR-TRACT": F.when(~us, F.concat(st, cou, tract)),
        "PR-PLACE": F.when(~us, place),
    }
    age = F.col("QAGE").cast(T.IntegerType())
    cols = [F.coalesce(expr, none).alias(f"R_{name}") for name, expr in regions.items()]
    for k, lookup in w["age_bins"].items():
        arr = F.array(*[F.lit(str(b)) for b in lookup])
        cols.append(F.element_at(arr, age + 1).alias(f"AGEBIN{k}"))
    races = [F.coalesce(F.col(f"QRACE{i}"), none).alias(f"QRACE{i}") for i in range(1, 9)]
    return df.select(F.col("QSEX"), F.col("QSPAN"), *races, *cols)


def _mapper(level: dict[str, Any], groups: dict[str, Any]) -> Any:
    """person → [{ITERATION: code}] for the iterations of one level (SafeTab-P's flat_map)."""
    alone: dict[str, list[str]] = {}  # race code → alone iterations containing it
    combo: dict[str, list[str]] = {}
    eth: dict[str, list[str]] = {}
    for code in level["iterations"]:
        g = groups[code]
        target = eth if g["kind"] == "ethnicity" else alone if g["alone"] else combo
        for c in g["codes"]:
            target.setdefault(str(c), []).append(code)

    def f(row: Any) -> list[dict[str, str]]:
        codes = {row[f"QRACE{i}"] for i in range(1, 9)} - {"NA", "Null", ""}
        out: set[str] = set()
        counts: dict[str, int] = {}
        for c in codes:
            out.update(combo.get(c, ()))
            for it in alone.get(c, ()):
                counts[it] = counts.get(it, 0) + 1
        out.update(it for it, k in counts.items() if k == len(codes))
        out.update(eth.get(row["QSPAN"], ()))
        return [{"ITERATION": it} for it in out]

    return f


class _Runner:
    def __init__(self, w: dict[str, Any], cores: int, memory: str) -> None:
        from tmlt.analytics import AddOneRow, RhoZCDPBudget, Session

        self.w = w
        self.spark = _spark(cores, memory)
        self.spark.sparkContext.setLogLevel("ERROR")
        self.df = _persons(self.spark, w).cache()
        self.persons = self.df.count()
        self.session = Session.from_dataframe(
            privacy_budget=RhoZCDPBudget(float(w["session_rho"])),
            source_id="persons",
            dataframe=self.df,
            protected_change=AddOneRow(),
        )
        self.charged = 0.0
        self.noise_draws = 0
        self.queries: list[dict[str, Any]] = []

    def _count(self, view: str, keys: Any, rho_group: float, what: str) -> Any:
        """Noisy counts over ``keys`` with per-count ρ = ``rho_group`` (calibrated σ²)."""
        from tmlt.analytics import QueryBuilder, RhoZCDPBudget

        query = QueryBuilder(view).groupby(keys).count(name="COUNT", mechanism="gaussian")
        info = self.session._noise_info(query, RhoZCDPBudget(1))
        sigma2_at_1 = float(info[0]["noise_parameter"])  # σ² of the count at budget ρ = 1
        budget = sigma2_at_1 * 2 * rho_group  # σ² = σ²₁ / budget = 1 / (2 ρ_group)
        t0 = time.monotonic()
        out = self.session.evaluate(query, RhoZCDPBudget(budget)).toPandas()
        self.charged += budget
        self.noise_draws += len(out)
        self.queries.append(
            {
                "what": what,
                "counts": len(out),
                "sigma2": sigma2_at_1 / budget,
                "budget_charged": budget,
                "seconds": round(time.monotonic() - t0, 3),
            }
        )
        return out

    def level(self, lv: dict[str, Any], stage2: bool) -> dict[str, Any]:
        import numpy as np
        from tmlt.analytics import KeySet, QueryBuilder

        t0 = time.monotonic()
        name = f"{lv['scope']}_{lv['geo']}_{lv['iteration_level']}".replace("-", "_")
        region_col = f"R_{lv['geo']}"
        view = (
            QueryBuilder("persons")
            .flat_map(
                _mapper(lv, self.w["groups"]),
                new_column_types={"ITERATION": "VARCHAR"},
                augment=True,
                grouping=True,
                max_rows=int(lv["stability"]),
            )
            .rename({region_col: "REGION"})
        )
        self.session.create_view(view, name, cache=True)
        regions = KeySet.from_dict({"REGION": lv["regions"] or ["NA"]})
        total_only = set(lv["total_only"])
        adaptive = [c for c in lv["iterations"] if c not in total_only]
        q0 = len(self.queries)
        out: dict[str, Any] = {"level": f"{lv['scope']} ({lv['geo']}, {lv['iteration_level']})"}
        if lv["regions"] and total_only:
            keys = regions * KeySet.from_dict({"ITERATION": sorted(total_only)})
            self._count(name, keys, lv["rho_total"], "total_only")
        stage1 = None
        if lv["regions"] and adaptive:
            keys = regions * KeySet.from_dict({"ITERATION": adaptive})
            stage1 = self._count(name, keys, lv["rho_stage1"], "stage1")
        stat_levels: dict[str, int] = {}
        if stage2 and stage1 is not None and len(stage1):
            stat = np.digitize(stage1["COUNT"].to_numpy(), lv["thresholds"])
            for k in range(4):
                groups = stage1.loc[stat == k, ["REGION", "ITERATION"]]
                stat_levels[str(k)] = len(groups)
                if groups.empty:
                    continue
                keys = KeySet.from_dataframe(self.spark.createDataFrame(groups))
                if k == 0:
                    self._count(name, keys, lv["rho_stage2"], "stage2_total")
                    continue
                bins = [str(b) for b in sorted(set(self.w["age_bins"][str(k)]))]
                cell_col = f"AGEBIN{k}"
                cells = keys * KeySet.from_dict({"QSEX": ["1", "2"], cell_col: bins})
                self._count(name, cells, lv["rho_stage2"], f"stage2_sex_age{k}")
        self.session.delete_view(name)
        out.update(
            regions=len(lv["regions"]),
            iterations=len(lv["iterations"]),
            noise_draws=sum(q["counts"] for q in self.queries[q0:]),
            stat_levels=stat_levels,
            queries=self.queries[q0:],
            seconds=round(time.monotonic() - t0, 3),
        )
        return out


def main() -> None:
    workload_path, result_path = sys.argv[1], sys.argv[2]
    with open(workload_path) as fh:
        w = json.load(fh)
    cores = int(w.get("cores", os.cpu_count() or 1))
    started = time.monotonic()
    runner = _Runner(w, cores, w.get("driver_memory", "6g"))
    setup = time.monotonic() - started
    print(
        f"tumult: setup (Spark, persons ⋈ GRF-C, cache): {runner.persons:,} persons "
        f"({setup:.1f} s)",
        file=sys.stderr,
        flush=True,
    )
    levels: list[dict[str, Any]] = []
    budget = w.get("max_seconds")  # no new level (but the first) once this is spent
    not_run = []
    for lv in w["levels"]:
        if levels and budget is not None and time.monotonic() - started > float(budget):
            not_run.append(f"{lv['scope']} ({lv['geo']}, {lv['iteration_level']})")
            continue
        res = runner.level(lv, bool(w.get("stage2", True)))
        levels.append(res)
        print(
            f"tumult: {res['level']}: {res['regions']:,} regions × {res['iterations']:,} "
            f"iterations, {res['noise_draws']:,} noisy counts ({res['seconds']:.1f} s)",
            file=sys.stderr,
            flush=True,
        )
    import pyspark
    import tmlt.analytics

    result = {
        "persons": runner.persons,
        "setup_seconds": round(setup, 3),
        "levels_seconds": round(sum(lv["seconds"] for lv in levels), 3),
        "total_seconds": round(time.monotonic() - started, 3),
        "noise_draws": runner.noise_draws,
        "budget_charged_rho": runner.charged,
        "levels": levels,
        "levels_not_run_time_budget": not_run,
        "versions": {
            "tmlt.analytics": getattr(tmlt.analytics, "__version__", "?"),
            "pyspark": pyspark.__version__,
            "python": sys.version.split()[0],
        },
        "spark_master": runner.spark.sparkContext.master,
    }
    with open(result_path, "w") as fh:
        json.dump(result, fh, indent=2)
    runner.spark.stop()


if __name__ == "__main__":
    main()
