"""The runs of a TopDown release: US and Puerto Rico, each a persons run and a units run.

The 2020 release was four runs (the four signed certificates): the US persons run (50
states and DC; nation root, states split into AIAN and non-AIAN parts), the US units run
(H1), and the Puerto Rico persons and units runs (Puerto Rico as the root). Each run has
its strategy (:func:`privtab.topdown.strategy.production_strategy` ``us``, ``units``,
``pr``, ``units-pr``, or an office's own), its spine (the persons run's optimized block
groups also separate blocks by group-quarters type; the units run's do not — production
``ignore_gqs_in_block_groups``), its budget shares after the bypass, its invariants and
constraints, its measurer and its :class:`~privtab.topdown.engine.TopDownEngine`.

:func:`prepare_run` builds one run's pair from the validated inputs. Persons and units of a
run are disjoint from the other run's (a record's block is in one of them): parallel
composition, the release's guarantee per person is the larger run's (equal here).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from privtab.errors import InputError
from privtab.random import RandomSource
from privtab.topdown.constraints import LevelConstraints, build_constraints, check_feasible
from privtab.topdown.engine import Progress, SolveFn, TopDownEngine, solve_parent
from privtab.topdown.folder import PR_STATE, TopDownData
from privtab.topdown.inputs import SparseHistograms, units_histograms
from privtab.topdown.measure import MeasurementBatch, Measurer
from privtab.topdown.planning import TopDownPlan, plan
from privtab.topdown.problems import ProblemBuilder
from privtab.topdown.spine import BudgetShares, Spine, budget_shares, production_spine
from privtab.topdown.strategy import Strategy, production_strategy

__all__ = [
    "RUNS",
    "HistogramRun",
    "RunPair",
    "invariant_state_totals",
    "pair_from_nmf",
    "prepare_run",
]

#: ``--run`` values: the runs, each with its (persons, units) packaged strategies.
RUNS: dict[str, tuple[str, str]] = {"us": ("us", "units"), "pr": ("pr", "units-pr")}
#: The release's name of each run (``release.json``'s ``runs``).
SCOPES = {"us": "US", "pr": "PR"}


@dataclass(eq=False)
class HistogramRun:
    """One histogram's run (persons or units) of one scope: everything its engine needs
    and the public facts the release states about it."""

    scope: str
    strategy: Strategy
    spine: Spine
    shares: BudgetShares
    constraints: list[LevelConstraints]
    engine: TopDownEngine
    plan: TopDownPlan
    #: a re-run from a noisy measurement file: whether those measurements are private
    measurements_private: bool | None = None

    @property
    def histogram(self) -> str:
        return self.strategy.histogram

    def leaf_blocks(self) -> pl.Series:
        """The BLOCK id of every leaf, in leaf order."""
        return self.spine.blocks.get_column("BLOCK")

    def chunk_states(self) -> list[str]:
        """The state (TABBLKST) of every unit of the chunk level."""
        h = self.spine.hierarchy
        starts = h.leaf_starts(h.chunk_level)
        return self.spine.blocks.get_column("TABBLKST").gather(starts.tolist()).to_list()

    def public(self) -> dict[str, Any]:
        """What ``release.json`` says about this run: strategy, plan, guarantee, spine."""
        h = self.spine.hierarchy
        doc = self.plan.to_dict()
        doc["spine"] = {
            "description": self.spine.description,
            "levels": list(h.levels),
            "geounits": h.describe(),
            "chunk_level": h.chunk_level,
        }
        return doc


@dataclass(eq=False)
class RunPair:
    """A scope's persons and units runs."""

    scope: str
    persons: HistogramRun
    units: HistogramRun


def _persons_in(frame: pl.DataFrame, scope: str) -> pl.DataFrame:
    """The rows of ``frame`` (``BLOCK``, …) in the scope's states: Puerto Rico (72) or the
    others. A frame sorted by ``BLOCK`` (as :func:`~privtab.topdown.inputs.block_histograms`
    and :func:`~privtab.topdown.inputs.units_histograms` give it) is sliced, not copied —
    Puerto Rico's blocks sort last — so the US run does not hold a second copy of the
    nation's block histograms while its run is prepared."""
    blocks = frame.get_column("BLOCK")
    if blocks.flags["SORTED_ASC"] or blocks.is_sorted():
        cut = int(blocks.search_sorted(PR_STATE, side="left"))
        return frame.slice(cut) if scope == "pr" else frame.slice(0, cut)
    st = pl.col("BLOCK").str.slice(0, 2)
    return frame.filter(st == PR_STATE if scope == "pr" else st != PR_STATE)


def _histogram_run(
    scope: str,
    strategy: Strategy,
    spine: Spine,
    blocks: pl.DataFrame,
    units: pl.DataFrame,
    measurer: Callable[[Strategy, BudgetShares], Measurer],
    *,
    solve: SolveFn,
    draw_all: bool,
    sink: Callable[[MeasurementBatch], None] | None,
    progress: Progress | None,
    source: str,
) -> HistogramRun:
    cells = strategy.schema.cells
    leaves = SparseHistograms.from_blocks(blocks, spine, cells, source=source)
    truth = leaves.levels(spine)
    cons = build_constraints(strategy, spine, units, [lv.totals() for lv in truth])
    if strategy.histogram == "persons":
        check_feasible(leaves, cons[-1], spine, source=source)
    shares = budget_shares(spine.hierarchy, strategy.geolevel_shares)
    m = measurer(strategy, shares)
    builder = ProblemBuilder(strategy, spine, truth, cons, m, sink=sink)
    engine = TopDownEngine(builder, solve=solve, draw_all=draw_all, progress=progress)
    return HistogramRun(scope, strategy, spine, shares, cons, engine, plan(strategy, shares))


def prepare_run(
    data: TopDownData,
    run: str,
    *,
    source: RandomSource | None,
    noise: bool = True,
    strategies: Mapping[str, Strategy] | None = None,
    optimized_block_groups: bool = True,
    solve: SolveFn = solve_parent,
    draw_all: bool = False,
    sinks: Mapping[str, Callable[[MeasurementBatch], None]] | None = None,
    progress: Progress | None = None,
) -> RunPair:
    """The persons and units runs of ``run`` (``us`` or ``pr``) on ``data``: spines,
    constraints (infeasible data refused naming the block), measurers drawing from
    ``source`` (``noise=False``: the true answers — tests only), engines.
    ``strategies`` (``persons``/``units`` → :class:`Strategy`) replace the packaged ones;
    ``sinks`` (``persons``/``units``) receive every measurement batch (a noisy measurement
    file)."""
    if run not in RUNS:
        raise ValueError(f"unknown run {run!r}; runs are {sorted(RUNS)}")
    chosen = dict(strategies or {})
    kinds = {"persons": RUNS[run][0], "units": RUNS[run][1]}
    strat = {k: chosen.get(k) or production_strategy(v) for k, v in kinds.items()}
    for k, s in strat.items():
        if s.histogram != k:
            raise ValueError(f"the {k} strategy {s.name!r} is for the {s.histogram} histogram")
    pr = run == "pr"
    spines = {
        k: production_spine(
            data.grfc,
            data.units,
            puerto_rico=pr,
            gq_types_in_block_groups=k == "persons",
            optimized_block_groups=optimized_block_groups,
            source=str(data.files["grfc"]),
        )
        for k in strat
    }
    blocks = {
        "persons": _persons_in(data.persons, run),
        "units": _persons_in(units_histograms(data.units), run),
    }

    def measurer(s: Strategy, shares: BudgetShares) -> Measurer:
        # key: each run's slice tasks derive their own test sources (never a shared stream)
        return Measurer(s, shares, source, noise=noise, key=f"{run}-{s.histogram}")

    files = {"persons": str(data.files["persons"]), "units": str(data.files["units"])}
    runs = {
        k: _histogram_run(
            SCOPES[run],
            strat[k],
            spines[k],
            blocks[k],
            data.units,
            measurer,
            solve=solve,
            draw_all=draw_all,
            sink=(sinks or {}).get(k),
            progress=progress,
            source=files[k],
        )
        for k in ("persons", "units")
    }
    return RunPair(SCOPES[run], runs["persons"], runs["units"])


def invariant_state_totals(run: HistogramRun) -> dict[str, int]:
    """The exact total of every state of the run, from its invariants: the persons run's
    ``total_by_group`` state totals (a US state's two parts together), else the exact
    totals of the first level whose geounits each lie in one state (Puerto Rico's root;
    the units run's blocks' housing units added up)."""
    h = run.spine.hierarchy
    states = run.spine.blocks.get_column("TABBLKST").to_numpy().astype(str)
    for k, c in enumerate(run.constraints):
        if c.group_total is not None and c.group_index is not None:
            _, names = run.spine.unit_groups(h.levels[k])
            return {str(n): int(t) for n, t in zip(names, c.group_total, strict=True)}
    for k, c in enumerate(run.constraints):
        first = h.leaf_starts(k)
        last = np.append(first[1:], states.size) - 1
        if c.total is None or not np.array_equal(states[first], states[last]):
            continue
        out: dict[str, int] = {}
        for st, t in zip(states[first].tolist(), c.total.tolist(), strict=True):
            out[st] = out.get(st, 0) + int(t)
        return out
    raise ValueError(f"the {run.scope} {run.histogram} run has no exact state totals")


def pair_from_nmf(
    persons: Path,
    units: Path,
    *,
    solve: SolveFn = solve_parent,
    progress: Progress | None = None,
) -> RunPair:
    """A scope's runs from its two noisy measurement folders (written by a release with
    ``--nmf``): the strategies, spines and constraints they carry, the measurements read
    from them (:class:`privtab.topdown.nmf.NMFSource`) — no data."""
    from privtab.topdown.nmf import NMFSource, read_nmf
    from privtab.topdown.nmf_structure import read_structure

    runs = {}
    scope = ""
    for hist, folder in (("persons", persons), ("units", units)):
        nmf = read_nmf(folder)
        if nmf.strategy.histogram != hist:
            raise InputError(
                f"{folder} holds {nmf.strategy.histogram} measurements, not {hist}",
                file=str(folder / "nmf.json"),
            )
        st = read_structure(folder)
        shares = budget_shares(st.spine.hierarchy, nmf.strategy.geolevel_shares)
        source = NMFSource(nmf, st.spine.hierarchy)
        builder = ProblemBuilder(nmf.strategy, st.spine, None, st.constraints, source)
        engine = TopDownEngine(builder, solve=solve, progress=progress)
        scope = folder.name.split("-")[0]
        runs[hist] = HistogramRun(
            scope, nmf.strategy, st.spine, shares, st.constraints, engine,
            plan(nmf.strategy, shares), measurements_private=nmf.private,
        )  # fmt: skip
    return RunPair(scope, runs["persons"], runs["units"])
