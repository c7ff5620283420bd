"""Noisy measurements: the true answers plus exact discrete Gaussian noise of the strategy's
σ² — a chi-square test per query and level (power stated and checked), bypass shares,
partial draws, sources."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from privtab.random import SeededSource
from privtab.topdown.histogram import CELLS, query
from privtab.topdown.inputs import SparseHistograms, block_histograms, block_units
from privtab.topdown.measure import Measurer, needed_cells
from privtab.topdown.spine import Spine, budget_shares, us_spine
from privtab.topdown.strategy import Strategy, parse_strategy, production_strategy
from tests._stats import (  # _bin_edges: private on purpose — the power uses the test's bins
    ALPHA,
    _bin_edges,
    chi_square_pvalue,
    discrete_gaussian_law,
)
from tests.topdown._support import population

N = 200_000  # draws per (level, query)


def _noise(measurer: Measurer, level: str, q: str, n: int = N) -> np.ndarray:
    size = measurer.strategy.schema.query(q).size
    k = -(-n // size)
    m = measurer.draw(level, range(k), q)
    v0 = m.variances[0]
    assert v0 == measurer.strategy.sigma2(level, q)
    assert all(v is v0 for v in m.variances)
    return m.values.ravel()[:n]


def _power(sigma2: float, factor: float, n: int) -> float:
    """Power at level ALPHA of the chi-square test (its own bins) against σ² × factor."""
    null, alt = discrete_gaussian_law(sigma2), discrete_gaussian_law(sigma2 * factor)
    edges = _bin_edges(null, n)
    p0 = np.diff(np.concatenate([[0.0], null.cdf(edges), [1.0]]))
    p1 = np.diff(np.concatenate([[0.0], alt.cdf(edges), [1.0]]))
    lam = n * float(((p1 - p0) ** 2 / p0).sum())
    crit = stats.chi2.isf(ALPHA, df=edges.size)
    return float(stats.ncx2.sf(crit, edges.size, lam))


@pytest.mark.parametrize("run", ["us", "units"])
def test_every_query_at_every_level_has_the_exact_law(run: str) -> None:
    """N = 2·10⁵ seeded draws per (level, query) through the measurer, chi-square at
    α = 10⁻⁶ each (65 tests: family-wise false failure ≤ 7·10⁻⁵). Power: for every pair the
    test rejects a σ² off by 5% (e.g. a wrong query share) with probability ≥ 0.99 —
    computed below from the noncentral chi-square with the test's own bins."""
    s = production_strategy(run)
    measurer = Measurer(s, source=SeededSource(f"law-{run}"))
    for lv in s.levels:
        for q in s.queries(lv):
            sigma2 = float(s.sigma2(lv, q))
            samples = _noise(measurer, lv, q)
            p = chi_square_pvalue(samples, discrete_gaussian_law(sigma2))
            assert p >= ALPHA, (lv, q, sigma2, p)
            assert _power(sigma2, 1.05, N) >= 0.99, (lv, q)
    assert not measurer.private


def test_a_wrong_variance_is_caught() -> None:
    """The mutant: a query share 20/21 of the production one (σ² × 1.05)."""
    doc = production_strategy("us").to_dict()
    doc["query_shares"]["Block"]["detailed"] = str(Fraction(3945, 4097) * Fraction(20, 21))
    doc["query_shares"]["Block"]["total"] = str(Fraction(5, 4097) + Fraction(3945, 4097) / 21)
    mutant = parse_strategy(doc, "mutant")
    samples = _noise(Measurer(mutant, source=SeededSource("mutant")), "Block", "detailed")
    truth = float(production_strategy("us").sigma2("Block", "detailed"))
    assert chi_square_pvalue(samples, discrete_gaussian_law(truth)) < ALPHA


def test_noise_is_independent_across_cells_and_geounits() -> None:
    s = production_strategy("us")
    x = _noise(Measurer(s, source=SeededSource("indep")), "Tract", "detailed").astype(float)
    x /= x.std()
    n = x.size - 1
    r1 = float(np.mean(x[:-1] * x[1:]))  # neighbouring cells (and across geounits)
    r_unit = float(np.mean(x[:-CELLS] * x[CELLS:]))  # same cell, next geounit
    assert abs(r1) < 6 / math.sqrt(n)
    assert abs(r_unit) < 6 / math.sqrt(x.size - CELLS)


def _small() -> tuple[Strategy, Spine, list[SparseHistograms]]:
    pop = population(21)
    units = block_units(pop.units)
    sp = us_spine(pop.grfc, units)
    leaves = SparseHistograms.from_blocks(block_histograms(pop.persons), sp, CELLS)
    return production_strategy("us"), sp, leaves.levels(sp)


def test_without_noise_the_answers_are_the_true_ones() -> None:
    s, sp, levels = _small()
    h = sp.hierarchy
    m = Measurer(s, noise=False)
    k = h.level("County")
    hists = levels[k].dense(range(h.size(k)))
    batch = m.measure("County", range(h.size(k)), hists)
    assert list(batch.queries) == list(s.queries("County"))
    for q, meas in batch.queries.items():
        assert np.array_equal(meas.values, query(q).answer(hists))
        assert meas.variances == (s.sigma2("County", q),) * h.size(k)
    assert batch.draws == 0
    assert not m.private


def test_bypassed_geounits_are_not_measured_and_merged_ones_get_their_chains_share() -> None:
    s, sp, levels = _small()
    h = sp.hierarchy
    bs = budget_shares(h, s.geolevel_shares)
    m = Measurer(s, bs, source=SeededSource(5))
    for k, lv in enumerate(h.levels):
        units = np.arange(h.size(k))
        batch = m.measure(lv, units, levels[k].dense(range(h.size(k))))
        for q, meas in batch.queries.items():
            for i in units:
                share = bs.share(lv, int(i))
                if share == 0:
                    assert meas.variances[i] is None
                    assert not meas.values[i].any()
                else:
                    assert meas.variances[i] == s.global_scale**2 / (share * s.query_shares[lv][q])
    assert m.draws > 0


def test_only_the_needed_cells_are_drawn() -> None:
    s, sp, levels = _small()
    h = sp.hierarchy
    k = h.level("Block")
    kids = h.children("Block_Group", 0)
    hists = levels[k].dense(kids)
    parent = hists.sum(axis=0)
    needed = {"detailed": parent > 0, "total": np.array([True])}
    m = Measurer(s, source=SeededSource(9))
    batch = m.measure("Block", kids, hists, needed)
    det = batch.queries["detailed"]
    assert det.drawn is not None
    assert np.array_equal(det.drawn[0], parent > 0)
    assert not det.values[:, parent == 0].any()
    full = sum(query(q).size for q in s.queries("Block") if q not in needed) * len(kids)
    assert batch.draws == full + len(kids) * (1 + int((parent > 0).sum()))


def test_sources_seeded_reproducible_secure_private() -> None:
    s = production_strategy("pr")
    hists = np.zeros((3, CELLS), dtype=np.int64)
    a = Measurer(s, source=SeededSource(1)).measure("County", range(3), hists)
    b = Measurer(s, source=SeededSource(1)).measure("County", range(3), hists)
    c = Measurer(s, source=SeededSource(2)).measure("County", range(3), hists)
    assert all(np.array_equal(a.queries[q].values, b.queries[q].values) for q in a.queries)
    assert not np.array_equal(a.queries["detailed"].values, c.queries["detailed"].values)
    assert Measurer(s).private
    assert not Measurer(s, source=SeededSource(1)).private
    with pytest.raises(ValueError, match="hists has shape"):
        Measurer(s).measure("County", range(2), hists)
    with pytest.raises(KeyError, match="not measured"):
        Measurer(s).measure("State", range(3), hists, queries=["total"])


def test_measure_adds_exactly_the_noise_to_the_true_answers() -> None:
    s, sp, levels = _small()
    h = sp.hierarchy
    k = h.level("Tract")
    hists = levels[k].dense(range(h.size(k)))
    batch = Measurer(s, source=SeededSource(3)).measure("Tract", range(h.size(k)), hists)
    same = Measurer(s, source=SeededSource(3))
    for q in s.queries("Tract"):
        noise = same.draw("Tract", range(h.size(k)), q)
        assert np.array_equal(batch.queries[q].values, query(q).answer(hists) + noise.values)


def test_needed_cells_are_those_with_parent_mass() -> None:
    s = production_strategy("us")
    rng = np.random.default_rng(2)
    parent = np.where(rng.random(CELLS) < 0.05, rng.integers(1, 9, CELLS), 0)
    need = needed_cells(s, "Block", parent)
    for q in s.queries("Block"):
        mass = query(q).answer(parent)
        assert np.array_equal(need[q], mass > 0), q
    assert need["total"].tolist() == [True]
    assert not any(
        m.any() for m in needed_cells(s, "Block", np.zeros(CELLS, dtype=np.int64)).values()
    )


def test_slice_tasks_derive_their_own_sources() -> None:
    """A slice task's test source is derived from (seed, run key, level, first unit): two
    slices, two levels or two runs never share a stream (a reused key would repeat the
    noise: the correlation check below catches it), the task's shares are the run's, and
    a secure source is never shipped (each process uses its own)."""
    import pickle

    from privtab.random import SecureSource

    pop = population(7)
    units = block_units(pop.units)
    sp = us_spine(pop.grfc, units)
    s = production_strategy("us")
    h = sp.hierarchy
    bs = budget_shares(h, s.geolevel_shares)
    m = Measurer(s, bs, SeededSource(7), key="us-persons")
    k = h.level("Tract")
    a, b = m.slice_noise("Tract", range(0, 3)), m.slice_noise("Tract", range(3, 6))
    c = m.slice_noise("County", range(0, 3))
    d = Measurer(s, bs, SeededSource(7), key="us-units").slice_noise("Tract", range(0, 3))
    assert a.seed == "7-us-persons-Tract-0"
    assert len({a.seed, b.seed, c.seed, d.seed}) == 4
    np.testing.assert_array_equal(a.shares.numerators, bs.numerators[k][0:3])
    x = a.measurer().draw("Tract", range(0, 3), "detailed").values
    np.testing.assert_array_equal(x, pickle.loads(pickle.dumps(a)).measurer().draw(
        "Tract", range(0, 3), "detailed").values)  # fmt: skip
    y = b.measurer().draw("Tract", range(3, 6), "detailed").values
    z = d.measurer().draw("Tract", range(0, 3), "detailed").values
    for other in (y, z):  # 6,048 pairs: |r| < 0.07 fails independent streams w.p. < 1e-7
        assert abs(np.corrcoef(x.ravel(), other.ravel())[0, 1]) < 0.07
    with pytest.raises(ValueError, match="shares are of Tract units from 0"):
        a.measurer().draw("Tract", range(2, 5), "detailed")
    secure = Measurer(s, bs, SecureSource()).slice_noise("Tract", range(0, 3))
    assert secure.seed is None
    assert secure.measurer().private
    assert b"AES" not in pickle.dumps(secure)  # no source travels with a task


def test_a_source_that_cannot_be_split_is_refused() -> None:
    from privtab.random.sources import RandomSource

    class Plain(RandomSource):
        @property
        def description(self) -> str:
            return "plain"

        def _fill_bytes(self, out: memoryview) -> None:
            out[:] = np.random.default_rng(0).bytes(len(out))

    s = production_strategy("us")
    with pytest.raises(ValueError, match="cannot be split among slice tasks"):
        Measurer(s, source=Plain()).slice_noise("Tract", range(0, 3))
    assert Measurer(s, source=Plain(), noise=False).slice_noise("Tract", range(2)).seed is None
