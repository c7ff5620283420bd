"""Fixtures of the SafeTab-H tests: the Census toy data (with thresholds so that every
statistic level occurs) and small generated household files in the Census layout."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from privtab.data.resources import toy_dataset_dir_h

from .reference import iterations

TOY = toy_dataset_dir_h()
H_COLUMNS = ("TABBLKST|TABBLKCOU|TABTRACTCE|TABBLK|HHRACE|QRACE1|QRACE2|QRACE3|QRACE4|QRACE5|"
             "QRACE6|QRACE7|QRACE8|QSPAN|HOUSEHOLD_TYPE|TEN")  # fmt: skip


def params_with(directory: Path, source: Path, **overrides: object) -> Path:
    """A copy of the parameters folder ``source`` with config keys replaced."""
    directory.mkdir(parents=True, exist_ok=True)
    for f in source.iterdir():
        if f.is_file():
            shutil.copy(f, directory / f.name)
            (directory / f.name).chmod(0o644)
    cfg = json.loads((directory / "config.json").read_text())
    cfg.update(overrides)
    (directory / "config.json").write_text(json.dumps(cfg, indent=1))
    return directory


def every_level(cfg: dict[str, object]) -> dict[str, object]:
    """Thresholds T3 [0, 2, 5] and T4 [1] at every level: with the toy T1 (counts −59…74)
    and generated T1s every statistic level occurs, negative and zero counts included."""
    t3 = cfg["thresholds_h_t3"]
    assert isinstance(t3, dict)
    return {
        "thresholds_h_t3": {k: [0, 2, 5] for k in t3},
        "thresholds_h_t4": {k: [1] for k in t3},
    }


@pytest.fixture(scope="session")
def toy_params(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy zCDP parameters with thresholds so that every statistic level occurs."""
    src = TOY / "input_dir_zcdp"
    cfg = json.loads((src / "config.json").read_text())
    return params_with(tmp_path_factory.mktemp("toy-params"), src, **every_level(cfg))


def generate(out: Path, *, households: int = 400, seed: int = 3, run_pr: bool = True) -> Path:
    """A data folder in the Census layout over the toy GRF-C and toy code lists:
    ``household-records.txt`` (random householders of states 01, 02, 11 and 72, and a few
    of state 08, outside every run) and ``pop-group-totals.txt`` — a T1 holding most groups
    of every level with counts in −20…30 (zero and negative included), a group whose place
    has no block, pruned groups (a DETAILED_ONLY iteration at COUNTY, a COARSE_ONLY one at
    USA), level-0 iterations, rows of another state and of the other run."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(TOY / "GRF-C.txt", out / "GRF-C.txt")
    blocks = [line.split("|") for line in (TOY / "GRF-C.txt").read_text().splitlines()[1:]]
    codes = [
        line.split("|")[0]
        for line in (TOY / "input_dir_zcdp" / "race-and-ethnicity-codes.txt")
        .read_text()
        .splitlines()[1:]
    ]
    races = [c for c in codes if not c.startswith("2")]
    eths = [c for c in codes if c.startswith("2")] + ["1000"]
    lines = [H_COLUMNS]
    for _ in range(households):
        b = rng.choice(blocks if run_pr else [b for b in blocks if b[0] != "72"])
        k = rng.choice([1, 1, 1, 2, 3])
        qr = rng.sample(races, k) + ["Null"] * (8 - k)
        lines.append("|".join([*b[:4], f"{rng.randint(1, 63):02d}", *qr, rng.choice(eths),
                               str(rng.randint(1, 5)), str(rng.randint(1, 4))]))  # fmt: skip
    lines.append("08|500|000300|0060|01|1000|" + "Null|" * 7 + "1000|1|4")  # another state
    (out / "household-records.txt").write_text("\n".join(lines) + "\n")
    its = iterations(TOY / "input_dir_zcdp")
    types = ("USA", "STATE", "COUNTY", "TRACT", "PLACE", "AIANNH", "PR-STATE", "PR-COUNTY",
             "PR-TRACT", "PR-PLACE")  # fmt: skip
    regions: dict[str, set[str]] = {t: set() for t in types}
    for st, cou, tr, _, pl, ai in blocks:
        pr = "PR-" if st == "72" else ""
        if not pr:
            regions["USA"].add("1")
            if ai != "9999":
                regions["AIANNH"].add(ai)
        regions[f"{pr}STATE"].add(st)
        regions[f"{pr}COUNTY"].add(st + cou)
        regions[f"{pr}TRACT"].add(st + cou + tr)
        if pl != "99999":
            regions[f"{pr}PLACE"].add(st + pl)
    regions["PLACE"].add("0199999")  # a T1 place without a block: 0 households
    t1 = ["REGION_ID|REGION_TYPE|ITERATION_CODE|COUNT"]
    detailed = {"USA", "STATE", "PR-STATE"}
    for rtype, ids in regions.items():
        for rid in sorted(ids):
            for code, it in its.items():
                allowed = not (it["coarse_only"] if rtype in detailed else it["detailed_only"])
                if it["level"] == 0 or not allowed or rng.random() < 0.2:
                    continue  # level 0, pruned or suppressed by SafeTab-P: added below
                t1.append(f"{rid}|{rtype}|{code}|{rng.randint(-20, 30)}")
    t1 += [
        "01001|COUNTY|0800|12",  # DETAILED_ONLY at COUNTY: pruned
        "1|USA|0070|7",  # COARSE_ONLY at USA: pruned
        "01|STATE|0001|40",  # LEVEL 0: not tabulated
        "2222800|PLACE|0002|3",  # another state: not in the run
    ]
    (out / "pop-group-totals.txt").write_text("\n".join(t1) + "\n")
    return out


@pytest.fixture(scope="session")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(parameters, data) of 400 generated households, US and PR runs, every level."""
    root = tmp_path_factory.mktemp("gen-h")
    src = TOY / "input_dir_zcdp"
    cfg = json.loads((src / "config.json").read_text())
    params = params_with(root / "params", src, run_pr=True, **every_level(cfg))
    return params, generate(root / "data")
