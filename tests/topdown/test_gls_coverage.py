"""Monte Carlo coverage of the tree GLS's intervals ``estimate ± z·sd`` on a synthetic
county measured like production TopDown (``_gls_county``: the 2020 US run's σ², privtab's
exact discrete Gaussian noise from a seeded source, the root total exact, structural zeros
at the blocks), for every P1–P5 cell of every geounit.

The estimator is linear in the noise and the noise is not Gaussian (discrete Gaussian), so
these tests measure what the normal approximation delivers. Cells the constraints determine
(standard deviation 0) are exact and left out. Statistics, per level and nominal level
p ∈ {90 %, 95 %}: the mean coverage over the level's cells and replicates, and each cell's
coverage over the replicates.

* slow (10⁴ replicates, a county of 15 geounits): every level mean within 1 point of p.
  Its standard error is at most ``√(p(1−p)/R)`` ≤ 0.30 points (every cell fully
  correlated; the observed spread is far smaller), so a false failure needs a 3.3-SE
  deviation: ≤ 8.7·10⁻⁴ per check, < 0.7 % for the 8 checks. Power: a standard deviation
  misstated by 5 % either way moves the 90 % coverage by ≥ 1.7 points, detected with
  probability > 0.99. Each cell within 5 of its binomial standard errors (1.5 points at
  90 %, 1.1 at 95 %): false failure 5.7·10⁻⁷ per cell, < 0.5 % over the ≈ 4,000 cells × 2;
  detects one cell whose sd is 10 % off (3 points). Measured (this test, 4,356 live
  cells): level means 89.95–90.00 % and 94.99–95.00 %, every cell within 4.3 binomial
  SEs (1.1 points); docs/topdown.md §15.
* default (600 replicates, a county of 9 geounits): level means within 1 point. Over 20 seeds the
  level means' standard deviation was ≤ 0.10 points (largest deviation 0.24), so 1 point is
  ≈ 10 SDs (false failure < 10⁻⁶); a 10 % misstated sd moves them by ≥ 2.7 points (95 %)
  and ≥ 3.8 points (90 %): detected with probability > 0.999.
"""

from __future__ import annotations

import numpy as np
import pytest

from privtab.topdown.gls import normal_moe, tree_gls
from privtab.topdown.tables import pl94_person_cells
from tests.topdown._gls_county import LEVELS, County, replicate_chunks, synthetic_county

NOMINAL = (0.90, 0.95)


def coverage(
    county: County, reps: int, chunk: int, seed: int
) -> dict[tuple[str, float], tuple[float, np.ndarray]]:
    """Per (level, p): the mean coverage and each live cell's coverage."""
    cells = pl94_person_cells()
    hits: dict[tuple[str, float], np.ndarray] = {}
    live: dict[str, np.ndarray] = {}
    for ms in replicate_chunks(county, reps, chunk, seed):
        res = tree_gls(county.hierarchy, ms, county.constraints)
        for lvl, name in enumerate(LEVELS):
            est = res.estimates(cells, lvl)
            truth = np.stack([cells.answer(county.truth[g].astype(float)) for g in est.geounits])
            err = np.abs(est.estimate - truth[:, None, :])  # (geounits, R, cells)
            live[name] = est.std > 0
            for p in NOMINAL:
                inside = (err <= normal_moe(est.std, p)[:, None, :]).sum(axis=1)
                hits[name, p] = hits.get((name, p), 0) + inside
    out = {}
    for (name, p), h in hits.items():
        per_cell = h[live[name]] / reps
        out[name, p] = (float(per_cell.mean()), per_cell)
    return out


def test_coverage_small_county() -> None:
    county = synthetic_county((2, 1, 2), seed=1)
    for (name, p), (mean, _) in coverage(county, 600, 300, seed=7).items():
        assert abs(mean - p) <= 0.01, (name, p, mean)


@pytest.mark.slow  # 10⁴ replicates (≈ 2 min CPU); test_coverage_small_county covers the code
def test_coverage_10k_replicates() -> None:
    county = synthetic_county((2, 2, 2), seed=2)
    reps = 10_000
    for (name, p), (mean, per_cell) in coverage(county, reps, 500, seed=11).items():
        assert abs(mean - p) <= 0.01, (name, p, mean)
        se = np.sqrt(p * (1 - p) / reps)
        assert np.abs(per_cell - p).max() <= 5 * se, (name, p)
