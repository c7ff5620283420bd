"""An independent SafeTab-H tabulation with noise off, household by household.

Written from the documentation of the production algorithm (issue 27; the production
``preprocessing.py`` / ``postprocessing.py`` semantics as documented in
``docs/safetab-h.md``), in plain Python over the raw text files — it uses nothing of
privtab's engine (no reader, no membership matrices, no domain code):

- iterations: a household (its householder's race codes R and ethnicity code e) is in a
  race *alone* iteration when every code of R is in its group, in an *alone or in any
  combination* one when some code is, in an ethnicity iteration when e is; only LEVEL 1
  and 2 count; DETAILED_ONLY iterations only at USA / STATE / PR-STATE, COARSE_ONLY ones
  only at the other geographies;
- regions of a block: USA ``1``, STATE, COUNTY, TRACT, PLACE (not ``99999``), AIANNH (not
  ``9999``) for a US block of the state filter; PR-STATE … PR-PLACE for state 72;
- the groups: the T1 rows of the run's region types, in the run's states (USA always;
  AIANNH when its code is an AIANNHCE of a GRF-C block of the run's states);
- T3 level = number of thresholds ≤ T1 count; T4 level = count ≥ threshold; cells per
  level from HOUSEHOLD_TYPE / TEN; marginals as sums; tables T0300{level+1}, T0400{…}.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

US_TYPES = ("USA", "STATE", "COUNTY", "TRACT", "PLACE", "AIANNH")
PR_TYPES = ("PR-STATE", "PR-COUNTY", "PR-TRACT", "PR-PLACE")
DETAILED = {"USA", "STATE", "PR-STATE"}

# T3: level → household type (1..5) → noisy cell; T4: level → tenure (1..4) → noisy cell
T3_CELL = {0: [0, 0, 0, 0, 0], 1: [1, 1, 1, 6, 6], 2: [2, 3, 3, 7, 8], 3: [2, 4, 5, 7, 8]}
T4_CELL = {0: [0, 0, 0, 0], 1: [1, 2, 3, 3]}
T3_PARENT = {1: 0, 6: 0, 2: 1, 3: 1, 4: 3, 5: 3, 7: 6, 8: 6}
T4_PARENT = {1: 0, 2: 0, 3: 0}


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="|"))


def iterations(params: Path) -> dict[str, dict[str, object]]:
    """code → kind, level, alone, detailed_only, coarse_only, codes."""
    members: dict[str, set[str]] = defaultdict(set)
    for r in _rows(params / "race-and-ethnicity-code-to-iteration.txt"):
        members[r["ITERATION_CODE"]].add(r["RACE_ETH_CODE"])
    out: dict[str, dict[str, object]] = {}
    for kind, name in (("race", "race"), ("eth", "ethnicity")):
        for r in _rows(params / f"{name}-characteristic-iterations.txt"):
            out[r["ITERATION_CODE"]] = {
                "kind": kind,
                "level": int(r["LEVEL"]),
                "alone": r.get("ALONE") == "True",
                "detailed_only": r["DETAILED_ONLY"] == "True",
                "coarse_only": r["COARSE_ONLY"] == "True",
                "codes": members[r["ITERATION_CODE"]],
            }
    return out


def in_iteration(it: dict[str, object], races: set[str], eth: str) -> bool:
    codes = it["codes"]
    assert isinstance(codes, set)
    if it["kind"] == "eth":
        return eth in codes
    return races <= codes if it["alone"] else bool(races & codes)


def tabulated_at(it: dict[str, object], region_type: str) -> bool:
    if region_type in DETAILED:
        return not it["coarse_only"]
    return not it["detailed_only"]


def block_regions(row: dict[str, str], us_states: set[str], run_pr: bool) -> dict[str, str]:
    st, cou, tr, pl, ai = (row[c] for c in ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "PLACEFP",
                                            "AIANNHCE"))  # fmt: skip
    out: dict[str, str] = {}
    if st in us_states:
        out = {"USA": "1", "STATE": st, "COUNTY": st + cou, "TRACT": st + cou + tr}
        if pl != "99999":
            out["PLACE"] = st + pl
        if ai != "9999":
            out["AIANNH"] = ai
    elif st == "72" and run_pr:
        out = {"PR-STATE": st, "PR-COUNTY": st + cou, "PR-TRACT": st + cou + tr}
        if pl != "99999":
            out["PR-PLACE"] = st + pl
    return out


def expected_tables(
    params: Path, data: Path, t1: Path | None = None, *, nonnegative: bool = False
) -> dict[str, set[tuple[str, str, str, int, int]]]:
    """table (``T03001`` …) → rows (REGION_ID, REGION_TYPE, ITERATION_CODE, cell, COUNT)."""
    cfg = json.loads((params / "config.json").read_text())
    its = iterations(params)
    us = set(cfg["state_filter_us"]) if cfg["run_us"] else set()
    run_pr = bool(cfg["run_pr"])
    grfc = {tuple(r[c] for c in ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK")): r
            for r in _rows(data / "GRF-C.txt")}  # fmt: skip
    counts: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0] * 20)
    for h in _rows(data / "household-records.txt"):
        st = h["TABBLKST"]
        if st not in us and not (st == "72" and run_pr):
            continue  # the readers keep the run's states only
        block = grfc[(st, h["TABBLKCOU"], h["TABTRACTCE"], h["TABBLK"])]
        races = {h[f"QRACE{i}"] for i in range(1, 9)} - {"Null"}
        slot = 4 * (int(h["HOUSEHOLD_TYPE"]) - 1) + int(h["TEN"]) - 1
        for rtype, rid in block_regions(block, us, run_pr).items():
            for code, it in its.items():
                level_ok = it["level"] in (1, 2) and tabulated_at(it, rtype)
                if level_ok and in_iteration(it, races, h["QSPAN"]):
                    counts[(rtype, rid, code)][slot] += 1
    run_states = us | ({"72"} if run_pr else set())
    aiannh = {r["AIANNHCE"] for r in grfc.values() if r["TABBLKST"] in us}
    types = (US_TYPES if cfg["run_us"] else ()) + (PR_TYPES if run_pr else ())
    out: dict[str, set[tuple[str, str, str, int, int]]] = defaultdict(set)
    for row in _rows(t1 if t1 is not None else data / "pop-group-totals.txt"):
        rtype, rid, code, c = (
            row["REGION_TYPE"],
            row["REGION_ID"],
            row["ITERATION_CODE"],
            int(row["COUNT"]),
        )
        if rtype not in types:
            continue
        if rtype == "AIANNH" and rid not in aiannh:
            continue
        if rtype not in ("USA", "AIANNH") and rid[:2] not in run_states:
            continue
        it = its[code]
        lv = int(it["level"])  # type: ignore[call-overload]
        if lv == 0 or not tabulated_at(it, rtype):
            continue
        key = f"({rtype}, {lv})"
        geo = rtype.lower().replace("-", "_")
        slots = counts.get((rtype, rid, code), [0] * 20)
        for table, cells_of, parent, th in (
            ("3", T3_CELL, T3_PARENT, cfg["thresholds_h_t3"][key][:3]),
            ("4", T4_CELL, T4_PARENT, cfg["thresholds_h_t4"][key]),
        ):
            if cfg[f"privacy_budget_h_t{table}_level_{lv}_{geo}"] == 0:
                continue
            level = sum(c >= t for t in th)
            noisy: dict[int, int] = defaultdict(int)
            for s, n in enumerate(slots):
                value = s // 4 if table == "3" else s % 4  # household type − 1, tenure − 1
                noisy[cells_of[level][value]] += n
            for cell in set(cells_of[level]):
                noisy[cell] += 0
                if nonnegative:
                    noisy[cell] = max(noisy[cell], 0)
            published = dict(noisy)
            for cell, n in noisy.items():
                p = cell
                while p in parent:
                    p = parent[p]
                    published[p] = published.get(p, 0) + n
            name = f"T0{table}00{level + 1}"
            for cell, n in published.items():
                out[name].add((rid, rtype, code, cell, n))
    return dict(out)


def read_tables(release: Path) -> dict[str, set[tuple[str, str, str, int, int]]]:
    """Every row of every table of a release folder, read with csv (Census layout)."""
    out: dict[str, set[tuple[str, str, str, int, int]]] = {}
    for t, n in (("3", 4), ("4", 2)):
        for k in range(1, n + 1):
            name = f"T0{t}00{k}"
            rows: set[tuple[str, str, str, int, int]] = set()
            for part in sorted((release / f"t{t}" / name).glob("part-*.csv")):
                lines = part.read_text().splitlines()
                assert lines[0] == f"REGION_ID|REGION_TYPE|ITERATION_CODE|T{t}_DATA_CELL|COUNT"
                for line in lines[1:]:
                    a, b, c, d, e = line.split("|")
                    rows.add((a, b, c, int(d), int(e)))
            if rows:
                out[name] = rows
    return out
