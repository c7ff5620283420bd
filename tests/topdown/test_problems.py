"""The per-parent problems (CONTRACTS.md C3): measurements of the children, their
constraints, the production pass orders — for the US and PR spines, the units run, a
noisy measurement file, and an office's own three-level country."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from privtab.data.hierarchy import HierarchySpec
from privtab.random import SeededSource
from privtab.topdown.constraints import build_constraints, nurse_minor_cells
from privtab.topdown.histogram import CELLS, query
from privtab.topdown.inputs import SparseHistograms, block_histograms, block_units, units_histograms
from privtab.topdown.measure import Measurer
from privtab.topdown.nmf import NMFSource, NMFWriter, read_nmf
from privtab.topdown.planning import plan
from privtab.topdown.problems import ProblemBuilder
from privtab.topdown.spine import budget_shares, pr_spine, spine_from_hierarchy, us_spine
from privtab.topdown.strategy import parse_strategy, production_strategy
from tests.topdown._support import population


def _builder(run: str = "us", seed: int = 41, noise: bool = False) -> ProblemBuilder:
    pop = population(seed, states=("72", "01") if run == "pr" else ("01", "09"))
    units = block_units(pop.units)
    s = production_strategy(run)
    sp = (pr_spine if run == "pr" else us_spine)(pop.grfc, units)
    st = pl.col("TABBLKST")
    persons = pop.persons.filter(st == "72" if run == "pr" else st != "72")  # a run's states
    levels = SparseHistograms.from_blocks(block_histograms(persons), sp, CELLS).levels(sp)
    cons = build_constraints(s, sp, units, [lv.totals() for lv in levels])
    m = Measurer(s, budget_shares(sp.hierarchy, s.geolevel_shares), SeededSource(seed), noise=noise)
    return ProblemBuilder(s, sp, levels, cons, m)


def test_the_root_problem_holds_the_national_total() -> None:
    b = _builder()
    p = b.root_problem()
    assert p.geounit == "(root)"
    assert p.level == "US"
    assert p.children == ["US"]
    assert p.parent is None
    assert "total" not in p.measurements.answers  # not measured at the root
    assert b.histograms is not None
    truth = b.histograms[0].dense(range(1))
    for q, a in p.measurements.answers.items():
        assert np.array_equal(a, query(q).answer(truth).astype(float))
    assert p.constraints.total is not None
    assert p.constraints.total.tolist() == [int(truth.sum())]
    assert p.l2_passes == production_strategy("us").l2_passes["US"]
    assert p.rounder_passes[0][0] == "total"


def test_children_problems_slice_measurements_and_constraints() -> None:
    b = _builder()
    h = b.spine.hierarchy
    s = b.strategy
    parent_hist = b.histograms[0].dense(range(1))[0]
    p = b.children_problem("US", 0, parent_hist)
    assert p.level == "State"
    assert p.children == h.ids("State")
    assert p.geounit == "US"
    assert np.array_equal(p.parent, parent_hist)  # type: ignore[arg-type]
    # the state totals: one group per state, the parts of a state summing to its total
    c = p.constraints
    assert c.total_group is not None
    assert c.total is not None
    totals = b.histograms[1].totals()
    for g in range(len(c.total)):
        assert c.total[g] == totals[c.total_group == g].sum()
    assert len(c.total) == len({i[1:] for i in p.children})  # one group per state
    assert c.gq_lower is not None
    assert c.gq_upper is not None
    assert np.array_equal(c.structural_zeros, nurse_minor_cells())
    assert p.l2_passes[0] == ("total",)
    for k, lv in enumerate(h.levels[:-1]):
        for parent in range(h.size(k)):
            kids = h.children(k, parent)
            if len(kids) < 2:
                continue
            prob = b.children_problem(lv, parent)
            truth = b.histograms[k + 1].dense(kids)
            assert prob.children == [h.ids(k + 1)[i] for i in kids]
            assert prob.geounit == f"{lv} {h.ids(k)[parent]}" if k else prob.geounit == lv
            for q, a in prob.measurements.answers.items():
                assert a.shape == (len(kids), query(q).size)
                assert np.array_equal(a, query(q).answer(truth).astype(float))
                for i, v in zip(kids, prob.measurements.variances[q], strict=True):
                    share = budget_shares(h, s.geolevel_shares).share(h.levels[k + 1], i)
                    assert v == s.global_scale**2 / (share * s.query_shares[h.levels[k + 1]][q])
            lo = b.constraints[k + 1].lower
            assert lo is not None
            assert np.array_equal(prob.constraints.gq_lower, lo[kids.start : kids.stop])
            assert prob.l2_passes == s.l2_passes[h.levels[k + 1]]
            break  # one multi-child parent per level
    with pytest.raises(ValueError, match="no children"):
        b.children_problem("Block", 0)


def test_noisy_problems_differ_from_the_truth_by_the_noise_law() -> None:
    b = _builder(noise=True, seed=42)
    p = b.children_problem("US", 0)
    truth = b.histograms[1].dense(range(b.spine.hierarchy.size(1)))
    d = p.measurements.answers["detailed"] - truth
    assert d.std() > 1
    assert np.all(d == np.round(d))


def test_puerto_rico_root_total_and_units_run() -> None:
    b = _builder("pr", 43)
    root = b.root_problem()
    assert root.level == "State"
    assert root.constraints.total is not None
    assert root.constraints.total.tolist() == [int(b.histograms[0].totals()[0])]
    assert "total" not in root.measurements.answers
    pop = population(44)
    units = block_units(pop.units)
    s = production_strategy("units")
    sp = us_spine(pop.grfc, units, gq_types_in_block_groups=False)
    levels = SparseHistograms.from_blocks(units_histograms(units), sp, 2, source="units").levels(sp)
    cons = build_constraints(s, sp, units, [lv.totals() for lv in levels])
    ub = ProblemBuilder(s, sp, levels, cons, Measurer(s, noise=False))
    p = ub.children_problem("US", 0)
    assert list(p.measurements.answers) == ["detailed"]
    assert p.constraints.gq_lower is None
    assert p.constraints.total is not None
    assert p.constraints.total_group is None
    assert p.histogram == "units"
    assert np.array_equal(p.constraints.total, levels[1].totals())
    assert not p.constraints.structural_zeros.any()
    assert p.constraints.structural_zeros.size == 2


def test_problems_from_a_noisy_measurement_file_equal_the_drawn_ones(tmp_path: Path) -> None:
    b = _builder(noise=True, seed=45)
    with NMFWriter(tmp_path / "nmf", b.strategy, b.spine, private=False) as w:
        b.sink = w.add
        drawn = [b.root_problem(), b.children_problem("US", 0)]
    b.sink = None
    nmf = read_nmf(tmp_path / "nmf")
    again = ProblemBuilder(
        b.strategy, b.spine, None, b.constraints, NMFSource(nmf, b.spine.hierarchy)
    )
    for p, q in zip(drawn, [again.root_problem(), again.children_problem("US", 0)], strict=True):
        for name in p.measurements.answers:
            assert np.array_equal(p.measurements.answers[name], q.measurements.answers[name])
            assert p.measurements.variances[name] == q.measurements.variances[name]


def test_an_office_declares_its_own_country_and_builds_its_problems(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    rows = [
        (f"{r:02d}", str(p), f"{c:03d}") for r in (1, 2, 3) for p in (1, 2) for c in range(1, 5)
    ]
    comunas = pl.DataFrame(rows, schema=["REGION", "PROVINCIA", "COMUNA"], orient="row")
    spec = HierarchySpec.declare(
        [
            ("PAIS", ()),
            ("REGION", ("REGION",)),
            ("PROVINCIA", ("PROVINCIA",)),
            ("COMUNA", ("COMUNA",)),
        ]
    )
    h = spec.build(comunas, source="comunas.txt")
    sp = spine_from_hierarchy(h, comunas.with_columns(pl.concat_str(pl.all()).alias("BLOCK")))
    doc = {
        "name": "Censo de prueba",
        "histogram": "persons",
        "global_scale": "1/2",
        "levels": ["PAIS", "REGION", "PROVINCIA", "COMUNA"],
        "geolevel_shares": {
            "PAIS": "1/10",
            "REGION": "2/10",
            "PROVINCIA": "3/10",
            "COMUNA": "4/10",
        },
        "query_shares": {
            lv: {"total": "1/4", "hhgq": "1/4", "detailed": "1/2"}
            for lv in ("PAIS", "REGION", "PROVINCIA", "COMUNA")
        },
        "l2_passes": {
            lv: [["total"], ["hhgq", "detailed"]]
            for lv in ("PAIS", "REGION", "PROVINCIA", "COMUNA")
        },
        "rounder_passes": {
            lv: [["total", "hhgq", "detailed"]] for lv in ("PAIS", "REGION", "PROVINCIA", "COMUNA")
        },
        "invariants": {"REGION": ["tot"]},
        "constraints": {"REGION": ["total"], "COMUNA": ["nurse_nva_0"]},
    }
    (tmp_path / "s.json").write_text(json.dumps(doc))
    s = parse_strategy(json.loads((tmp_path / "s.json").read_text()), "s.json")
    n = h.size("COMUNA")
    leaves = SparseHistograms(
        CELLS, n, np.arange(n), rng.integers(0, CELLS, n), rng.integers(1, 50, n)
    )
    levels = leaves.levels(sp)
    cons = build_constraints(s, sp, None, [lv.totals() for lv in levels])
    b = ProblemBuilder(
        s, sp, levels, cons, Measurer(s, budget_shares(h, s.geolevel_shares), SeededSource(1))
    )
    root = b.root_problem()
    assert root.constraints.total is not None  # the regions' exact totals, added up
    p = b.children_problem("PAIS", 0)
    assert p.children == ["01", "02", "03"]
    assert p.l2_passes == (("total",), ("hhgq", "detailed"))
    assert p.constraints.total is not None
    assert np.array_equal(p.constraints.total, levels[1].totals())
    assert plan(s).guarantee.rho == 4 == s.rho
    assert (
        plan(s).guarantee.per_geography["COMUNA-within-REGION"]
        == Fraction(sum((s.geolevel_shares[lv] for lv in ("PROVINCIA", "COMUNA")), Fraction(0))) * 4
    )
