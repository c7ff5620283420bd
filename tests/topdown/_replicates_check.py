"""The check of ``privtab topdown replicates`` on synthetic truth (issue 30 item 2).

A population of one state whose tracts span the size bins (log-spaced totals), independent
of privtab's generator; ``RUNS`` real seeded releases of it give the true RMSE of every
tract-level P1/P2 cell by size bin (bin of the tract's true total population); ``K``
replicates of the first release give the replicate RMSE of the same cells. Run alone with
``python -m tests.topdown._replicates_check`` (prints the table for docs/topdown.md).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import polars as pl

from tests.topdown._support import Population, add_facility, write_c1

STATE = "10"
#: true tract totals (persons): 16 tracts, log-spaced over 40 … 2,500
TRACT_SIZES: tuple[int, ...] = tuple(int(x) for x in np.geomspace(40, 2500, 16))


def tract_population(seed: int, sizes: tuple[int, ...] = TRACT_SIZES) -> Population:
    """GRF-C, cef-units, cef-persons of one state whose tract ``i`` holds ``sizes[i]``
    persons (households of 1–4 persons, vacant units, one GQ facility in every other
    tract), every C1 rule kept (householders adults, no minors in nursing facilities)."""
    rng = np.random.default_rng(seed)
    blocks: list[dict[str, str]] = []
    units: list[dict[str, str | None]] = []
    persons: list[dict[str, str | None]] = []
    mafid = 100000000
    for i, size in enumerate(sizes):
        cou = "001" if i % 2 == 0 else "003"
        tract = f"{(i + 1) * 100:06d}"
        nb = max(2, size // 50)
        geos = []
        for b in range(nb):
            blk = f"{1 + b // 30}{b % 30:03d}"
            row = {"TABBLKST": STATE, "TABBLKCOU": cou, "TABTRACTCE": tract,
                   "TABBLKGRPCE": blk[0], "TABBLK": blk,
                   "PLACEFP": f"{int(rng.integers(0, 3)) * 100:05d}", "COUSUBFP": "00010",
                   "AIANNHCE": "9999"}  # fmt: skip
            blocks.append(row)
            geos.append({k: row[k] for k in ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK")})
        left = size
        if i % 2 == 1 and size > 10:
            t = int(rng.integers(1, 8))
            n = int(rng.integers(3, 10))
            geo = geos[int(rng.integers(0, nb))]
            mafid += 1
            add_facility(units, persons, rng, mafid, geo, t, n)
            left -= n
        while left > 0:
            geo = geos[int(rng.integers(0, nb))]
            mafid += 1
            if rng.random() < 0.1:
                units.append(dict(MAFID=str(mafid), **geo, RTYPE="2", QGQTYP=None,
                                  HH_STATUS="2", FINAL_POP="0"))  # fmt: skip
                continue
            n = min(left, int(rng.integers(1, 5)))
            units.append(dict(MAFID=str(mafid), **geo, RTYPE="2", QGQTYP=None,
                              HH_STATUS="1", FINAL_POP=str(n)))  # fmt: skip
            for e in range(n):
                age = int(rng.integers(0 if e else 18, 90))
                persons.append(dict(MAFID=str(mafid), EPNUM=str(e + 1), **geo,
                                    RELSHIP="20" if e == 0 else "21", QGQTYP=None,
                                    QAGE=f"{age:03d}"))  # fmt: skip
            left -= n
    race_p = np.array([0.6, 0.15, 0.05, 0.08, 0.02, 0.05] + [0.05 / 57] * 57)
    race_p /= race_p.sum()
    for p in persons:
        p["QSEX"] = str(int(rng.integers(1, 3)))
        p["CENHISP"] = "2" if rng.random() < 0.2 else "1"
        p["CENRACE"] = f"{int(rng.choice(63, p=race_p)) + 1:02d}"
    unit_cols = ["MAFID", "TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK", "RTYPE", "QGQTYP",
                 "HH_STATUS", "FINAL_POP"]  # fmt: skip
    person_cols = ["MAFID", "EPNUM", "TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK", "RELSHIP",
                   "QGQTYP", "QSEX", "QAGE", "CENHISP", "CENRACE"]  # fmt: skip
    return Population(
        pl.DataFrame(blocks),
        pl.DataFrame(units, schema=dict.fromkeys(unit_cols, pl.Utf8)),
        pl.DataFrame(persons, schema=dict.fromkeys(person_cols, pl.Utf8)),
    )


def write_truth(folder: Path, seed: int = 3) -> Path:
    pop = tract_population(seed)
    folder.mkdir(parents=True, exist_ok=True)
    write_c1(pop.grfc, folder / "GRF-C.txt")
    write_c1(pop.units, folder / "cef-units.txt")
    write_c1(pop.persons, folder / "cef-persons.txt")
    return folder


def _p12_tracts(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.filter(
        (pl.col("GEOLEVEL") == "TRACT") & pl.col("CELL").str.slice(0, 4).is_in(["P001", "P002"])
    )


def _release(data: Path, out: Path, seed: int) -> Path:
    from privtab.random import SeededSource
    from privtab.topdown.run import TopDownOptions, run_release

    opts = TopDownOptions(runs=("us",), source=SeededSource(seed), allow_insecure=True,
                          nmf=True, report=False)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_release(data, out, opts, progress=lambda _m: None)
    return out


def check(
    work: Path, runs: int = 30, k: int = 30, workers: int = 2, base: int = 0, seed: int = 7
) -> pl.DataFrame:
    """``SIZE_BIN|TRACTS|TRUE_RMSE|REPLICATE_RMSE|RATIO`` for tract-level P1/P2 cells
    (module docstring); the replicates start from real release ``base``, seeded ``seed``."""
    from privtab.topdown.accuracy import size_bin, truth_tables
    from privtab.topdown.replicates import replicates

    data = write_truth(work / "truth")
    truth = _p12_tracts(truth_tables(data)).rename({"COUNT": "TRUE"})
    size = truth.filter(pl.col("CELL") == "P0010001").select(
        "GEOID", size_bin(pl.col("TRUE")).alias("SIZE_BIN")
    )
    truth = truth.join(size, on="GEOID")
    sq = []
    for r in range(runs):
        rel = _release(data, work / f"real-{r}", 1000 + r)
        pub = pl.concat(
            [pl.read_parquet(rel / "pl94" / f"{t}.parquet") for t in ("P1", "P2")]
        ).select("GEOLEVEL", "GEOID", "CELL", "COUNT")
        j = truth.join(_p12_tracts(pub), on=["GEOLEVEL", "GEOID", "CELL"])
        sq.append(j.select("SIZE_BIN", ((pl.col("COUNT") - pl.col("TRUE")) ** 2).alias("SQ")))
        if r != base:
            import shutil

            shutil.rmtree(rel)
    true_rmse = (
        pl.concat(sq).group_by("SIZE_BIN").agg(pl.col("SQ").mean().sqrt().alias("TRUE_RMSE"))
    )
    replicates(work / f"real-{base}", work / "reps", n=k, workers=workers, seed=seed)
    reps = pl.read_parquet(work / "reps" / "replicates-TRACT.parquet")
    reps = reps.filter(pl.col("CELL").str.slice(0, 4).is_in(["P001", "P002"])).join(
        size, on="GEOID"
    )
    rep_rmse = reps.group_by("SIZE_BIN").agg(
        (pl.col("RMSE") ** 2).mean().sqrt().alias("REPLICATE_RMSE"),
        pl.col("GEOID").n_unique().alias("TRACTS"),
    )
    out = true_rmse.join(rep_rmse, on="SIZE_BIN").with_columns(
        (pl.col("REPLICATE_RMSE") / pl.col("TRUE_RMSE")).alias("RATIO")
    )
    order = size.unique("GEOID").join(truth.filter(pl.col("CELL") == "P0010001"), on="GEOID")
    first = order.group_by("SIZE_BIN").agg(pl.col("TRUE").min().alias("_LO"))
    return (
        out.join(first, on="SIZE_BIN")
        .sort("_LO")
        .drop("_LO")
        .select("SIZE_BIN", "TRACTS", "TRUE_RMSE", "REPLICATE_RMSE", "RATIO")
    )


if __name__ == "__main__":
    import sys
    import tempfile
    import time

    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    k = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    base = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 7
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        table = check(Path(d), runs=runs, k=k, base=base, seed=seed)
    with pl.Config(tbl_rows=20, tbl_cols=10):
        print(table)
    took = time.monotonic() - t0
    print(f"{runs} real releases, {k} replicates of release {base} (seed {seed}), {took:.0f} s")
