"""Seeded noise: each noisy cell's noise has the variance of a discrete Gaussian with
σ² = s/(2ρ_q) (s = 9, the flat map's stability); marginals are exactly the sums of their
cells; each table publishes its number of rows per group."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from privtab.random import SeededSource
from privtab.safetab_h.run import run_release
from privtab.tabulate.context import RunOptions

SEEDS = 8
ROWS = {"T03001": 1, "T03002": 3, "T03003": 7, "T03004": 9, "T04001": 1, "T04002": 4}
KEY = ["REGION_ID", "REGION_TYPE", "ITERATION_CODE"]


def _tables(release: Path) -> dict[str, pl.DataFrame]:
    out = {}
    for name in ROWS:
        fam = f"t{name[2]}"
        parts = sorted((release / fam / name).glob("part-*.csv"))
        out[name] = pl.concat(
            [pl.read_csv(p, separator="|", infer_schema=False) for p in parts]
        ).with_columns(pl.all().exclude(KEY).cast(pl.Int64))
    return out


@pytest.fixture(scope="module")
def seeded(generated: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    params, data = generated
    root = tmp_path_factory.mktemp("noise")
    opts = RunOptions(noise=False, allow_insecure=True, report=False)
    run_release(params, data, root / "exact", opts)
    for seed in range(SEEDS):
        opts = RunOptions(source=SeededSource(100 + seed), allow_insecure=True, report=False)
        run_release(params, data, root / f"s{seed}", opts)
    return root


@pytest.mark.filterwarnings("ignore::privtab.mechanisms.InsecureReleaseWarning")
def test_rows_per_group_and_marginals(seeded: Path) -> None:
    t = _tables(seeded / "s0")
    for name, n in ROWS.items():
        per = t[name].group_by(KEY).len()
        assert per.height > 0, name
        assert (per["len"] == n).all(), name
    tree = {"t3": {1: 0, 6: 0, 2: 1, 3: 1, 4: 3, 5: 3, 7: 6, 8: 6}, "t4": {1: 0, 2: 0, 3: 0}}
    for name, frame in t.items():
        cell = f"T{name[2]}_DATA_CELL"
        parent = tree[f"t{name[2]}"]
        got = {
            (r[0], r[1], r[2], r[3]): r[4] for r in frame.select(*KEY, cell, "COUNT").iter_rows()
        }
        for (a, b, c, x), v in got.items():
            kids = [k for k, p in parent.items() if p == x and (a, b, c, k) in got]
            if kids:
                assert v == sum(got[(a, b, c, k)] for k in kids), (name, a, b, c, x)


@pytest.mark.filterwarnings("ignore::privtab.mechanisms.InsecureReleaseWarning")
def test_noise_variance_is_s_over_2rho(seeded: Path, generated: tuple[Path, Path]) -> None:
    """Pooled over the noisy cells of eight seeded releases, standardised by each query's
    exact variance: T = (Σ z² − N)/√(V N), V = the exact variance of z² of a discrete
    Gaussian (≈ 2) — |T| < 4.5 (false-failure rate 7·10⁻⁶). Power: with N ≈ 2.2 · 10⁴
    cells, a variance off by 10 % gives |T| ≈ 10: detected with probability > 1 − 10⁻⁸;
    stability forgotten (σ² 9× smaller) or squared (9× larger) are far off."""
    import json

    from privtab.safetab_h.queries import HPlan

    _params, _ = generated
    doc = json.loads((seeded / "exact" / "release.json").read_text())
    plans = {s: HPlan.from_dict(r["plan"]) for s, r in doc["runs"].items()}
    rho = {q.key: q.budget for p in plans.values() for q in p.queries}
    for p in plans.values():
        for q in p.queries:  # the mechanism's σ² is exactly s/(2ρ_q), s = 9
            assert q.stability == 9
            assert Fraction(q.cell.mechanism.sigma2_exact) == Fraction(9) / (2 * rho[q.key])
    exact = pl.concat([pl.read_parquet(seeded / "exact" / f"t{k}-error.parquet") for k in (3, 4)],
                      how="diagonal")  # fmt: skip
    base = _counts(seeded / "exact")
    total, n, v4 = 0.0, 0, 0.0
    for seed in range(SEEDS):
        noisy = _counts(seeded / f"s{seed}")
        joined = noisy.join(base, on=["T", *KEY, "CELL"], suffix="_0")
        joined = joined.join(_noisy_cells(seeded / f"s{seed}"), on=["T", *KEY, "CELL"])
        z2 = ((joined["COUNT"] - joined["COUNT_0"]) ** 2 / joined["VARIANCE"]).to_numpy()
        total += float(z2.sum())
        n += z2.size
        v4 += float((joined["K4"]).sum())
    assert exact.height > 0
    assert n > 20_000
    stat = (total - n) / math.sqrt(v4)
    assert abs(stat) < 4.5, (stat, n)


def _counts(release: Path) -> pl.DataFrame:
    frames = []
    for name, frame in _tables(release).items():
        cell = f"T{name[2]}_DATA_CELL"
        frames.append(
            frame.select(pl.lit(name[:3]).alias("T"), *KEY, pl.col(cell).alias("CELL"), "COUNT")
        )
    return pl.concat(frames)


def _noisy_cells(release: Path) -> pl.DataFrame:
    """Keys, variance and the variance of z² (exact, from the discrete Gaussian's 4th
    moment) of every noisy cell (``NOISY_CELLS == 1``)."""
    from privtab.mechanisms import DiscreteGaussian

    frames = []
    for k in (3, 4):
        e = pl.read_parquet(release / f"t{k}-error.parquet").filter(pl.col("NOISY_CELLS") == 1)
        frames.append(
            e.select(
                pl.lit(f"T0{k}").alias("T"),
                *KEY,
                pl.col(f"T{k}_DATA_CELL").cast(pl.Int64).alias("CELL"),
                "VARIANCE",
                "NOISE_SCALE",
            )
        )
    cells = pl.concat(frames)
    k4 = {}
    for s2 in cells["NOISE_SCALE"].unique().to_list():
        law = DiscreteGaussian.from_sigma2(Fraction(s2).limit_denominator(10**9)).law
        var = float(law.variance)
        half = int(60 * math.sqrt(s2)) + 10
        xs = np.arange(-half, half + 1, dtype=np.float64)
        m4 = float((law.pmf(xs) * xs**4).sum())
        k4[s2] = m4 / var**2 - 1.0
    return cells.with_columns(pl.col("NOISE_SCALE").replace_strict(k4).alias("K4"))


@pytest.mark.filterwarnings("ignore::privtab.mechanisms.InsecureReleaseWarning")
def test_published_cells_cover_the_truth_at_their_exact_rate(seeded: Path) -> None:
    """Every published cell (noisy cells and marginals of k of them): the truth lies within
    its MOE95 at the exact coverage of the k-fold convolution, within 6 binomial standard
    errors per (noise, k) class (false-failure rate ≈ 2·10⁻⁹ per class); ``privtab analyze
    ci`` agrees with the release's MOE95 (it checks them against the exact law)."""
    from privtab.analysis.derived import analyze_release
    from privtab.mechanisms import DiscreteGaussian
    from privtab.mechanisms.counts import count_error

    base = _counts(seeded / "exact")
    hits: dict[tuple[float, int], list[bool]] = {}
    for seed in range(SEEDS):
        noisy = _counts(seeded / f"s{seed}")
        err = pl.concat(
            [
                pl.read_parquet(seeded / f"s{seed}" / f"t{k}-error.parquet").select(
                    pl.lit(f"T0{k}").alias("T"), *KEY,
                    pl.col(f"T{k}_DATA_CELL").cast(pl.Int64).alias("CELL"),
                    "NOISE_SCALE", "NOISY_CELLS", "MOE95",
                )
                for k in (3, 4)
            ]
        )  # fmt: skip
        j = noisy.join(base, on=["T", *KEY, "CELL"], suffix="_0").join(err, on=["T", *KEY, "CELL"])
        inside = (j["COUNT"] - j["COUNT_0"]).abs() <= j["MOE95"]
        for s2, k, ok in zip(j["NOISE_SCALE"], j["NOISY_CELLS"], inside, strict=True):
            hits.setdefault((s2, k), []).append(bool(ok))
    checked = 0
    for (s2, k), oks in hits.items():
        if len(oks) < 200:
            continue
        mech = DiscreteGaussian.from_sigma2(Fraction(s2).limit_denominator(10**9))
        p = count_error(mech, k).coverage
        se = math.sqrt(p * (1 - p) / len(oks))
        assert abs(sum(oks) / len(oks) - p) <= 6 * se + 1e-12, (s2, k, sum(oks) / len(oks), p)
        checked += 1
    assert checked >= 4
    summary = analyze_release("ci", seeded / "s0", level=0.95)
    assert summary["T03004_rows"] > 0
