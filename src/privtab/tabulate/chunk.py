"""One chunk of a level: exact counts in, noisy counts out (what every engine runs).

:func:`tabulate_groups` is the single entry point of the algorithm for an engine: the
Polars engine calls it in-process, the Spark engine on its executors. It draws the noise
(:mod:`privtab.tabulate.algorithm`), counts the chunk's tallies and — only when asked, for
tests — the non-private evaluation; the result carries noisy counts only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privtab.random import RandomSource
from privtab.tabulate.algorithm import TOTAL_ONLY, ExactCounts, NoiseDraw, run_algorithm
from privtab.tabulate.domain import Domain
from privtab.tabulate.evaluation import evaluate_groups
from privtab.tabulate.plan import LevelPlan
from privtab.tabulate.results import ChunkResult, Tallies

__all__ = ["Drawing", "tabulate_groups"]


@dataclass(frozen=True)
class Drawing:
    """How an engine draws a level's chunks — the settings that travel together from the run
    to :func:`tabulate_groups` on every engine.

    ``source``: the random source (``None``: a fresh secure source per chunk; a seeded one is
    for tests and marks the release not private); ``noise=False``: exact counts, tests only,
    not private; ``evaluate``: keep the non-private comparison with the truth (tests and
    diagnostics, never written to a release).
    """

    source: RandomSource | None = None
    noise: bool = True
    evaluate: bool = False


def tabulate_groups(
    plan: LevelPlan,
    dom: Domain,
    exact: ExactCounts,
    *,
    source: RandomSource | None,
    noise: bool = True,
    evaluate: bool = False,
) -> ChunkResult:
    """SafeTab seed Algorithms 1–3 for the groups of ``dom`` (a level or a slice of its
    regions), whose exact counts are ``exact`` (per group and per (group, sex, age); ``G``
    indexes ``dom`` region-major from 0).

    ``source`` must be secure for a publishable release (the run checks); ``noise=False``
    is for tests only (exact counts, not private). ``evaluate`` compares the released counts
    with the truth — a non-private diagnostic, never written to a release. The result holds
    the raw noisy counts only (the exact ones are dropped here); publishing them —
    suppression, clamping, frames — is :func:`privtab.tabulate.publish.publish_chunk`'s.
    """
    total_only = np.tile(dom.total_only, len(dom.regions))
    out = run_algorithm(plan, total_only, exact, NoiseDraw(source, noise))
    stat = {TOTAL_ONLY: int(out.total_only.sum())}
    for k in (0, 1, 2, 3):
        stat[k] = int(((out.stat == k) & ~out.total_only).sum())
    tallies = Tallies(
        regions=len(dom.regions),
        iterations=len(dom.codes),
        t1_rows=dom.size,
        t2_rows=sum(int(t.noisy.size) for t in out.cells),
        stat_levels=stat,
        noise_draws=out.draws,
        stages_used=out.stages_used,
        memberships=int(exact.total.sum()),
        evaluation=evaluate_groups(plan, out) if evaluate else {},
    )
    return ChunkResult(plan, dom, out.noisy_only(), tallies)
