"""The top-down driver on small random hierarchies — an office's own four-level country and
the 2020 US and Puerto Rico spines — over seeds: every property the release relies on.

- children sum to their parent, at every level, for every parent (each problem recorded);
- the root's exact totals (a region's, the nation's, a state's AIAN and non-AIAN parts
  together) hold;
- every leaf's persons by group-quarters type lie within the bounds its units imply, no
  persons under 18 in nursing facilities;
- integral, non-negative; noise off gives back the truth; streaming by chunk gives the same
  leaves in any chunk order (the noise of a parent is drawn when it is solved, so a seeded
  run is reproducible per order).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from privtab.data.hierarchy import HierarchySpec
from privtab.random import SeededSource
from privtab.topdown.constraints import build_constraints, nurse_minor_cells
from privtab.topdown.engine import TopDownEngine
from privtab.topdown.histogram import CELLS, SHAPE, cell_index
from privtab.topdown.inputs import SparseHistograms, block_histograms, block_units
from privtab.topdown.measure import Measurer
from privtab.topdown.problems import ProblemBuilder
from privtab.topdown.solve import ChildrenProblem, ChildrenSolution, solve_children
from privtab.topdown.spine import Spine, budget_shares, spine_from_hierarchy, us_spine
from privtab.topdown.strategy import Strategy, parse_strategy, production_strategy
from tests.topdown._support import population

LEVELS = ("PAIS", "REGION", "PROVINCIA", "COMUNA")
PER_TYPE = SHAPE[1] * SHAPE[2] * SHAPE[3]


class Recorder:
    """A ``solve`` that records every problem's parent and solution."""

    def __init__(self) -> None:
        self.solved: dict[tuple[str, str], np.ndarray] = {}
        self.problems = 0

    def __call__(self, problem: ChildrenProblem) -> ChildrenSolution:
        sol = solve_children(problem)
        self.problems += 1
        assert sol.counts.dtype == np.int64
        assert sol.counts.min(initial=0) >= 0
        if problem.parent is not None:
            np.testing.assert_array_equal(sol.counts.sum(axis=0), problem.parent)
        for child, counts in zip(problem.children, sol.counts, strict=True):
            self.solved[(problem.level, str(child))] = counts
        return sol


def _country(seed: int) -> tuple[Strategy, Spine, pl.DataFrame, pl.DataFrame]:
    """A random country: regions → provinces → comunas; units and persons per comuna
    consistent with the C1 rules (a GQ person only where a facility of its type is)."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(1, int(rng.integers(2, 4)) + 1):
        for p in range(1, int(rng.integers(1, 4)) + 1):
            for c in range(1, int(rng.integers(1, 5)) + 1):
                rows.append((f"{r:02d}", str(p), f"{c:03d}"))
    comunas = pl.DataFrame(rows, schema=["REGION", "PROVINCIA", "COMUNA"], orient="row")
    comunas = comunas.with_columns(pl.concat_str(pl.all()).alias("BLOCK"))
    spec = HierarchySpec.declare(
        [("PAIS", ()), ("REGION", ("REGION",)), ("PROVINCIA", ("PROVINCIA",)),
         ("COMUNA", ("COMUNA",))],
        chunk_level="REGION",
    )  # fmt: skip
    h = spec.build(comunas, source="comunas.txt")
    sp = spine_from_hierarchy(h, comunas)
    units, persons = [], []
    for block in sp.blocks.get_column("BLOCK").to_list():
        hu = int(rng.integers(0, 6))
        gq = [int(rng.random() < 0.25) for _ in range(7)]
        units.append({"BLOCK": block, "HU": hu, **{f"GQ{t + 1}": n for t, n in enumerate(gq)}})
        for t in range(8):
            have = hu if t == 0 else gq[t - 1]
            if not have:
                continue
            for _ in range(int(rng.integers(1, 12)) if t else int(rng.integers(0, 3 * hu + 1))):
                va = 1 if t == 3 else int(rng.random() < 0.8)
                cell = cell_index(t, va, int(rng.random() < 0.2), int(rng.integers(0, 63)))
                persons.append({"BLOCK": block, "CELL": cell})
    u = pl.DataFrame(units).with_columns(pl.lit(0).alias("OCCUPIED"), pl.lit(0).alias("VACANT"))
    p = pl.DataFrame(persons, schema={"BLOCK": pl.String, "CELL": pl.Int64})
    hist = p.group_by("BLOCK", "CELL").agg(pl.len().cast(pl.Int64).alias("COUNT"))
    doc = {
        "name": "a declared country",
        "histogram": "persons",
        "global_scale": "1/2",
        "levels": list(LEVELS),
        "geolevel_shares": {"PAIS": "1/10", "REGION": "2/10", "PROVINCIA": "3/10",
                            "COMUNA": "4/10"},
        "query_shares": {lv: {"total": "1/4", "hhgq": "1/4", "detailed": "1/2"}
                         for lv in LEVELS},
        "l2_passes": {lv: [["total"], ["hhgq", "detailed"]] for lv in LEVELS},
        "rounder_passes": {lv: [["total"], ["hhgq", "detailed"]] for lv in LEVELS},
        "invariants": {"COMUNA": ["gqhh_vect", "gqhh_tot"], "REGION": ["tot"]},
        "constraints": {"COMUNA": ["hhgq_total_lb", "hhgq_total_ub", "nurse_nva_0"],
                        "REGION": ["hhgq_total_lb", "hhgq_total_ub", "total"]},
    }  # fmt: skip
    return parse_strategy(json.loads(json.dumps(doc)), "country.json"), sp, u, hist


def _engine(
    strategy: Strategy,
    spine: Spine,
    units: pl.DataFrame,
    hist: pl.DataFrame,
    seed: int,
    *,
    noise: bool = True,
) -> tuple[TopDownEngine, list[SparseHistograms], Recorder]:
    leaves = SparseHistograms.from_blocks(hist, spine, CELLS)
    truth = leaves.levels(spine)
    cons = build_constraints(strategy, spine, units, [lv.totals() for lv in truth])
    shares = budget_shares(spine.hierarchy, strategy.geolevel_shares)
    m = Measurer(strategy, shares, SeededSource(seed), noise=noise)
    rec = Recorder()
    return TopDownEngine(ProblemBuilder(strategy, spine, truth, cons, m), solve=rec), truth, rec


def _check(engine: TopDownEngine, truth: list[SparseHistograms], rec: Recorder,
           units: pl.DataFrame) -> np.ndarray:  # fmt: skip
    """Every property; returns the leaves' histograms."""
    h = engine.hierarchy
    leaf = len(h.levels) - 1
    out = np.zeros((h.size(leaf), CELLS), dtype=np.int64)
    for ch in engine.chunks():
        out[ch.blocks.start : ch.blocks.stop] = ch.hists.dense(range(ch.hists.n_units))
    # children sum to parents at every level (the recorded solved histograms)
    for k in range(1, leaf):
        ids = h.ids(k)
        off = h.offsets(k)
        child_ids = h.ids(k + 1)
        for u, uid in enumerate(ids):
            kids = [rec.solved[(h.levels[k + 1], child_ids[c])] for c in range(off[u], off[u + 1])]
            np.testing.assert_array_equal(np.sum(kids, axis=0), rec.solved[(h.levels[k], uid)])
    # the leaves add up to every level's solved histograms
    agg = out
    for k in range(leaf, 0, -1):
        for u, uid in enumerate(h.ids(k)):
            np.testing.assert_array_equal(agg[u], rec.solved[(h.levels[k], uid)])
        agg = np.asarray(h.aggregate(agg, k))
    # exact totals: the root's and every unit with an invariant total
    cons = engine.builder.constraints
    for k, c in enumerate(cons):
        solved = np.array([rec.solved[(h.levels[k], i)].sum() for i in
                           (h.ids(k) if k else [h.levels[0]])])  # fmt: skip
        if c.total is not None:
            np.testing.assert_array_equal(solved, c.total)
        if c.group_index is not None and c.group_total is not None:
            np.testing.assert_array_equal(np.bincount(c.group_index, weights=solved), c.group_total)
    # bounds by group-quarters type at the leaves; no minors in nursing
    by_type = out.reshape(-1, SHAPE[0], PER_TYPE).sum(axis=2)
    lo, hi = cons[-1].lower, cons[-1].upper
    assert lo is not None
    assert hi is not None
    assert np.all(by_type >= lo)
    assert np.all(by_type <= hi)
    assert not out[:, nurse_minor_cells()].any()
    assert out.min() >= 0
    return out


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_declared_country_over_seeds(seed: int) -> None:
    s, sp, units, hist = _country(seed)
    engine, truth, rec = _engine(s, sp, units, hist, seed)
    out = _check(engine, truth, rec, units)
    assert out.sum() == truth[0].totals()[0]  # the regions' exact totals add up
    records = engine.level_records()
    assert [r["level"] for r in records] == list(LEVELS)
    assert sum(r["parents"] for r in records) == rec.problems


@pytest.mark.parametrize("seed", [11, 12])
def test_noise_off_gives_back_the_truth_in_any_chunk_order(seed: int) -> None:
    s, sp, units, hist = _country(seed)
    engine, truth, rec = _engine(s, sp, units, hist, seed, noise=False)
    out = _check(engine, truth, rec, units)
    np.testing.assert_array_equal(out, truth[-1].dense(range(truth[-1].n_units)))
    engine2, _, _ = _engine(s, sp, units, hist, seed, noise=False)
    n = sp.hierarchy.size("REGION")
    got = {ch.unit: ch.hists.dense(range(ch.hists.n_units)) for ch in
           engine2.chunks(order=list(range(n))[::-1])}  # fmt: skip
    for u in range(n):
        r = sp.hierarchy.leaf_range("REGION", u)
        np.testing.assert_array_equal(got[u], out[r.start : r.stop])


def test_seeded_runs_are_reproducible() -> None:
    s, sp, units, hist = _country(21)
    a = _check(*_engine(s, sp, units, hist, 5)[:3], units)
    b = _check(*_engine(s, sp, units, hist, 5)[:3], units)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("seed", [31, 32])
def test_the_us_spine_with_aian_parts_over_seeds(seed: int) -> None:
    pop = population(seed)
    units = block_units(pop.units)
    s = production_strategy("us")
    sp = us_spine(pop.grfc, units)
    hist = block_histograms(pop.persons)
    engine, truth, rec = _engine(s, sp, units, hist, seed)
    out = _check(engine, truth, rec, units)
    # each state's total is exact: its AIAN and non-AIAN parts together
    states = sp.blocks.get_column("TABBLKST").to_numpy()
    true_leaf = truth[-1].totals()
    for st in np.unique(states):
        assert out[states == st].sum() == true_leaf[states == st].sum()


def test_progress_counts_every_parent() -> None:
    s, sp, units, hist = _country(41)
    engine, _, rec = _engine(s, sp, units, hist, 41)
    seen: list[tuple[int, int]] = []
    engine.say = lambda done, total, text: seen.append((done, total))
    list(engine.chunks())
    assert seen[-1][0] == seen[-1][1] == engine.total_parents
    assert rec.problems == engine.total_parents


def test_infeasible_children_name_the_geounit(tmp_path: Path) -> None:
    s, sp, units, hist = _country(51)
    engine, _, _ = _engine(s, sp, units, hist, 51)
    # a region's exact total that its units cannot hold: the solver names the geounit
    c = engine.builder.constraints[1]
    assert c.total is not None
    c.total[0] = 10**9
    from privtab.topdown.engine import InfeasibleDataError

    with pytest.raises(InfeasibleDataError, match="infeasible") as err:
        list(engine.chunks())
    assert err.value.value == "PAIS"  # the geounit
    assert "exact total" in str(err.value)  # and the violated constraint


def _measured_engine(
    seed: int, *, draw_all: bool, workers: int, sink: bool = True
) -> tuple[TopDownEngine, list]:
    """The declared country's engine with the default solve (slices run by
    :func:`privtab.topdown.workers.run_slice`) and a sink keeping every batch (or none:
    then two chunks are solved at once with several workers)."""
    from privtab.topdown.measure import MeasurementBatch
    from privtab.topdown.workers import SolvePool

    s, sp, units, hist = _country(seed)
    truth = SparseHistograms.from_blocks(hist, sp, CELLS).levels(sp)
    cons = build_constraints(s, sp, units, [lv.totals() for lv in truth])
    m = Measurer(s, budget_shares(sp.hierarchy, s.geolevel_shares), SeededSource(seed), key="t")
    batches: list[MeasurementBatch] = []
    builder = ProblemBuilder(s, sp, truth, cons, m, sink=batches.append if sink else None)
    return TopDownEngine(builder, draw_all=draw_all, pool=SolvePool(workers)), batches


def _leaves(engine: TopDownEngine, order: list[int] | None = None) -> np.ndarray:
    """The leaves in the hierarchy's order (chunks solved in ``order``, checked handed
    over in that order)."""
    assert engine.pool is not None
    with engine.pool:
        got = list(engine.chunks(order))
    assert [c.unit for c in got] == (order or sorted(c.unit for c in got))
    got.sort(key=lambda c: c.blocks.start)
    return np.concatenate([ch.hists.dense(range(ch.hists.n_units)) for ch in got])


def test_draw_all_measures_every_cell_of_every_geounit_exactly_once() -> None:
    """``--nmf`` (draw_all): the sink receives every measured geounit of every level once,
    every cell drawn (none skipped, none twice), and the draws counted are exactly the
    cells of the measured geounits' queries — with the slices run in two worker
    processes, and the same measurements and leaves as in one process."""
    engine, batches = _measured_engine(61, draw_all=True, workers=2)
    leaves = _leaves(engine)
    h, s = engine.hierarchy, engine.builder.strategy
    expected = 0
    for k, lv in enumerate(h.levels):
        got = [b for b in batches if b.level == lv]
        units = np.concatenate([b.units for b in got])
        assert sorted(units.tolist()) == list(range(h.size(k)))  # each geounit once
        for b in got:
            for q, m in b.queries.items():
                assert m.drawn is None or m.drawn.all()
                measured = sum(v is not None for v in m.variances)
                expected += measured * s.schema.query(q).size
    assert engine.builder.draws == expected
    assert sum(r["noise_draws"] for r in engine.level_records()) == expected
    one, again = _measured_engine(61, draw_all=True, workers=1)
    np.testing.assert_array_equal(_leaves(one), leaves)
    assert len(again) == len(batches)
    for a, b in zip(again, batches, strict=True):
        assert a.level == b.level
        np.testing.assert_array_equal(a.units, b.units)
        for q in a.queries:
            np.testing.assert_array_equal(a.queries[q].values, b.queries[q].values)


def test_without_draw_all_only_cells_positive_in_the_parent_are_drawn() -> None:
    """The default: a child's cell is drawn only where its solved parent's query answer
    is positive; fewer draws than with ``draw_all``; the leaves are identical with one
    and two worker processes."""
    engine, batches = _measured_engine(62, draw_all=False, workers=2)
    leaves = _leaves(engine)
    full, _ = _measured_engine(62, draw_all=True, workers=1)
    _leaves(full)
    assert 0 < engine.builder.draws < full.builder.draws
    assert any(m.drawn is not None and not m.drawn.all() for b in batches
               for m in b.queries.values())  # fmt: skip
    one, _ = _measured_engine(62, draw_all=False, workers=1)
    np.testing.assert_array_equal(_leaves(one), leaves)


def test_two_chunks_at_once_give_the_same_leaves_in_any_order() -> None:
    """Without a sink and with two workers the next chunk starts before the current one
    is finished: the chunks still come in the order asked, each identical to one process
    solving them one at a time (the draws counted too)."""
    one, _ = _measured_engine(63, draw_all=False, workers=1, sink=False)
    two, _ = _measured_engine(63, draw_all=False, workers=2, sink=False)
    n = one.hierarchy.size(one.chunk_level)
    assert n >= 2
    order = list(range(n))[::-1]
    np.testing.assert_array_equal(_leaves(two, order), _leaves(one))
    assert two.builder.draws == one.builder.draws
    assert [r["parents"] for r in two.level_records()] == [
        r["parents"] for r in one.level_records()
    ]


def test_a_level_is_held_sparse_while_it_is_solved(monkeypatch: pytest.MonkeyPatch) -> None:
    """The children solved so far of a level are kept as their nonzero cells, never as
    the solver's dense ``(children, cells)`` arrays: held dense, a state's blocks took
    16 KiB each (≈ 4 GiB for Georgia's, California's ≈ 8 GiB; docs/topdown.md §14)."""
    import privtab.topdown.engine as eng

    s, sp, units, hist = _country(61)
    engine, truth, rec = _engine(s, sp, units, hist, 61)
    kept: list[tuple[int, int]] = []  # (entries held, nonzero cells) per finished level
    solved = eng._Step.solved

    def spy(self: eng._Step) -> eng.SolvedLevel:
        out = solved(self)
        assert all(a.ndim == 1 for part in self.parts for a in part)
        kept.append((sum(part[0].size for part in self.parts), out.hists.unit.size))
        return out

    monkeypatch.setattr(eng._Step, "solved", spy)
    leaves = _check(engine, truth, rec, units)
    assert kept
    assert all(held == nonzero for held, nonzero in kept)
    assert sum(n for _, n in kept) < leaves.size  # far fewer than the dense cells
