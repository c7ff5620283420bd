"""TopDown on one synthetic state at production settings: time, memory, and accuracy.

``privtab bench topdown-state --data D`` runs ``privtab topdown run --data D --run us
--seed S --nmf --no-report`` in a child process under ``/usr/bin/time -v`` (wall time, CPU
seconds, peak RSS, the load before), reads the confidential run record it wrote beside the
release (per-level seconds, problems, the generic path's uses), and measures the release
against the truth of the synthetic input (never a confidential one):

* **tables** — mean absolute error of the total population (``P0010001``) and of all P1
  and all P2 cells, by tabulation geolevel (state, county, tract, block group, block);
* **spine** — on the geounits the measurements were taken on (a state's AIAN and
  non-AIAN parts, the optimized block groups), the same for the raw noisy measurements:
  ``total``, ``cenrace`` (the 63 race cells of P1) and ``hispanic × cenrace`` (P2's by
  Hispanic origin) — TopDown's error beside the noise it started from.

The seeded noise has the production law (exact discrete Gaussian, production σ²) but is
not private: a benchmark, never a release. Record: ``result.privtab`` (wall, CPU, RSS,
levels), ``result.accuracy``; the input's facts are of synthetic data.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from privtab.bench._common import machine, privtab_exe, run_timed
from privtab.report.text import Table, table

__all__ = ["input_facts", "run", "tables"]

TAB_LEVELS = ("STATE", "COUNTY", "TRACT", "BLOCK_GROUP", "BLOCK")
SPINE_QUERIES = ("total", "cenrace", "hispanic * cenrace")


def _mae(a: np.ndarray, b: np.ndarray) -> float:
    return round(float(np.mean(np.abs(np.asarray(a, float) - np.asarray(b, float)))), 4)


def _truth_tables(data: Any) -> dict[str, pl.DataFrame]:
    """P1 and P2 of the true block histograms (the same cell definitions as the release)."""
    import scipy.sparse as sp

    from privtab.topdown.histogram import CELLS
    from privtab.topdown.pl94 import geoid_exprs, table_frame, tabulate

    grfc = data.grfc.filter(pl.col("TABBLKST") != "72")
    index = {b: i for i, b in enumerate(grfc.get_column("BLOCK").to_list())}
    p = data.persons.filter(pl.col("BLOCK").is_in(list(index)))
    rows = np.array([index[b] for b in p.get_column("BLOCK").to_list()], dtype=np.int64)
    hist = sp.csr_matrix(
        (p.get_column("COUNT").to_numpy(), (rows, p.get_column("CELL").to_numpy())),
        shape=(grfc.height, CELLS),
    )
    units = np.zeros((grfc.height, 2), dtype=np.int64)
    keys = grfc.select(**geoid_exprs())
    out: dict[str, list[pl.DataFrame]] = {"P1": [], "P2": []}
    for level in TAB_LEVELS:
        for tab in tabulate(level, keys.get_column(level).to_list(), hist, units):
            for t in out:
                out[t].append(table_frame(tab, t))
    return {t: pl.concat(frames) for t, frames in out.items()}


def _table_accuracy(release: Path, truth: dict[str, pl.DataFrame]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t, want in truth.items():
        got = pl.read_parquet(release / "pl94" / f"{t}.parquet")
        j = want.join(got, on=["GEOID", "GEOLEVEL", "CELL"], suffix="_R")
        for level in TAB_LEVELS:
            sub = j.filter(pl.col("GEOLEVEL") == level)
            row = out.setdefault(level, {"geographies": sub.get_column("GEOID").n_unique()})
            row[f"{t}_cells_mae"] = _mae(
                sub.get_column("COUNT_R").to_numpy(), sub.get_column("COUNT").to_numpy()
            )
            if t == "P1":
                tot = sub.filter(pl.col("CELL") == "P0010001")
                row["total_mae"] = _mae(
                    tot.get_column("COUNT_R").to_numpy(), tot.get_column("COUNT").to_numpy()
                )
    return out


def _spine_accuracy(release: Path, data: Any) -> dict[str, Any]:
    """TopDown and the raw noisy measurements on the persons run's spine geounits."""
    from privtab.topdown.histogram import CELLS, query
    from privtab.topdown.inputs import SparseHistograms
    from privtab.topdown.nmf import read_nmf
    from privtab.topdown.spine import us_spine

    spine = us_spine(data.grfc, data.units)
    h = spine.hierarchy
    persons = data.persons.filter(pl.col("BLOCK").str.slice(0, 2) != "72")
    truth = SparseHistograms.from_blocks(persons, spine, CELLS).levels(spine)
    mdf = pl.read_parquet(release / "mdf" / "persons.parquet")
    block = pl.concat_str("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK")
    cell = (
        (
            (pl.col("GQTYPE_PL").cast(pl.Int64) * 2 + pl.col("VOTING_AGE").cast(pl.Int64) - 1) * 2
            + pl.col("CENHISP").cast(pl.Int64)
            - 1
        )
        * 63
        + pl.col("CENRACE").cast(pl.Int64)
        - 1
    )
    got = mdf.group_by(block.alias("BLOCK"), cell.alias("CELL")).agg(
        pl.len().cast(pl.Int64).alias("COUNT")
    )
    released = SparseHistograms.from_blocks(got, spine, CELLS).levels(spine)
    nmf = read_nmf(release / "nmf" / "US-persons")
    out: dict[str, Any] = {}
    for k, level in enumerate(h.levels):
        ids = h.ids(k)
        measured = nmf.table.filter(pl.col("geolevel") == level)
        row: dict[str, Any] = {"geounits": len(ids)}
        n = len(ids)
        t_hist = truth[k].dense(range(n))
        r_hist = released[k].dense(range(n))
        for q in SPINE_QUERIES:
            qq = query(q)
            entry: dict[str, Any] = {
                "topdown_mae": _mae(qq.answer(r_hist), qq.answer(t_hist)),
            }
            m = measured.filter(pl.col("query") == q)
            if m.height:
                pos = {g: i for i, g in enumerate(ids)}
                where = np.array([pos[g] for g in m.get_column("geocode").to_list()])
                values = m.get_column("value").list.to_array(qq.size).to_numpy()
                entry["noisy_mae"] = _mae(values, qq.answer(t_hist)[where])
                entry["topdown_mae_same_geounits"] = _mae(
                    qq.answer(r_hist)[where], qq.answer(t_hist)[where]
                )
                entry["measured_geounits"] = int(where.size)
            row[q] = entry
        out[level] = row
    return out


def input_facts(data: str, facts: Any) -> dict[str, Any]:
    """What a record says about its synthetic input (``facts``: the loaded folder)."""
    return {
        "data": str(data),
        "persons": int(facts.persons.get_column("COUNT").sum()),
        "blocks": facts.grfc.height,
        "synthetic": True,
    }


def run(data: str | None = None, seed: int = 1, work: Path | None = None) -> dict[str, Any]:
    """The release, timed, and its accuracy (module docstring), in ``work``."""
    from privtab.topdown.folder import load_data

    if data is None:
        raise ValueError("give --data: a folder written by privtab synth (e.g. --states DE)")
    if work is None:
        raise ValueError("the topdown-state benchmark needs a work directory")
    work.mkdir(parents=True, exist_ok=True)
    out = work / "release"
    cmd = [
        privtab_exe(),
        "topdown",
        "run",
        "--data",
        str(data),
        "--out",
        str(out),
        "--run",
        "us",
        "--seed",
        str(seed),
        "--nmf",
        "--no-report",
        "--overwrite",
        "--json",
        "--ledger",
        str(work / "ledger.json"),
    ]
    timed, proc = run_timed(cmd, work / "topdown-run.log")
    summary = json.loads(proc.stdout)
    record = json.loads(Path(summary["run_record"]).read_text())
    levels = [
        {k: lv[k] for k in ("histogram", "level", "parents", "paths", "generic_path", "seconds")}
        for lv in record["levels"]
    ]
    facts = load_data(data, validated=False)
    accuracy = {
        "tables": _table_accuracy(out, _truth_tables(facts)),
        "spine": _spine_accuracy(out, facts),
    }
    return {
        "input": input_facts(data, facts),
        "privtab": {
            **timed,
            "command": " ".join(["/usr/bin/time -v", *cmd]),
            "seconds": record["seconds"],
            "levels": levels,
        },
        "accuracy": accuracy,
        "machine": machine(),
    }


def tables(res: dict[str, Any]) -> list[Table]:
    """Time per level, accuracy on the tables and on the spine."""
    p, a = res["privtab"], res["accuracy"]
    m = res["machine"]
    timing = table(
        "TopDown on one state: time per level (persons and units runs)",
        ["run", "children's level", "parents", "generic path", "measure s", "solve s"],
        [
            [
                lv["histogram"],
                lv["level"],
                f"{lv['parents']:,}",
                ", ".join(f"{k} {v}" for k, v in lv["generic_path"].items()) or "—",
                f"{lv['seconds'].get('measure', 0):.1f}",
                f"{lv['seconds'].get('solve', 0):.1f}",
            ]
            for lv in p["levels"]
        ],
        notes=[
            f"{res['input']['persons']:,} synthetic persons, {res['input']['blocks']:,} blocks; "
            f"wall {p['wall_seconds']:,.1f} s, CPU {p['cpu_seconds']:,.1f} s, peak RSS "
            f"{p['peak_rss_mb']:,.0f} MiB, load before {p['load_average_before']}",
            f"machine: {m['cpu']}, {m['cores']} cores",
        ],
        left=2,
    )
    tabs = table(
        "Mean absolute error of the published tables (persons)",
        ["geolevel", "geographies", "total", "P1 cells", "P2 cells"],
        [
            [
                lv,
                f"{r['geographies']:,}",
                f"{r['total_mae']:.2f}",
                f"{r['P1_cells_mae']:.3f}",
                f"{r['P2_cells_mae']:.3f}",
            ]
            for lv, r in a["tables"].items()
        ],
    )
    spine_rows = []
    for lv, r in a["spine"].items():
        for q in SPINE_QUERIES:
            e = r[q]
            noisy = f"{e['noisy_mae']:.3f}" if "noisy_mae" in e else "—"
            same = f"{e['topdown_mae_same_geounits']:.3f}" if "noisy_mae" in e else "—"
            spine_rows.append([lv, q, f"{r['geounits']:,}", noisy, same, f"{e['topdown_mae']:.3f}"])
    spine = table(
        "Mean absolute error on the spine's geounits: the noisy measurements and TopDown",
        ["level", "query", "geounits", "noisy MAE", "TopDown MAE (measured)", "TopDown MAE (all)"],
        spine_rows,
        notes=[
            "measured: the geounits with their own measurement (the bypass measures a "
            "single child with its parent)"
        ],
        left=2,
    )
    return [timing, tabs, spine]
