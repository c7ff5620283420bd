"""What a run says about itself: ``release.json`` (public) and the run record (confidential).

:func:`release_document` builds the typed :class:`~privtab.release.ReleaseDocument` from
the public plan, the noisy tallies and the exact charges; :func:`run_record` builds the
confidential :class:`~privtab.release.record.RunRecord` (input hashes, exact counts, timings, the
non-private evaluation) that is written outside the release folder.
"""

from __future__ import annotations

import dataclasses
import os
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privtab.accounting.exact import ExactGuarantee
from privtab.data import SafeTabInputs, Scope
from privtab.publish.run import new_release_document, public_config, public_label
from privtab.release.document import KIND, LevelEntry, ReleaseDocument, RunEntry
from privtab.release.record import RunRecord
from privtab.tabulate.context import RunContext
from privtab.tabulate.output import outputs_manifest
from privtab.tabulate.plan import LevelPlan
from privtab.tabulate.results import LevelSummary

if TYPE_CHECKING:
    from privtab.tabulate.runs import ReleaseTables

__all__ = ["empty_entry", "level_entry", "release_document", "run_record"]


def level_entry(
    res: LevelSummary,
    charged: ExactGuarantee,
    inputs: SafeTabInputs,
    scope: Scope,
    published: dict[str, Any],
) -> LevelEntry:
    """A tabulated level for ``release.json``: its public tallies, the rows published
    (after zero suppression, with the sex marginals) and its suppression rule with the
    number of T1 rows it removed (``published``: noisy output and the plan only)."""
    from privtab.data import GeoLevel

    stab = inputs.stabilities(scope)[(GeoLevel(res.plan.geo), res.plan.iteration_level)]
    fields = {
        "status": "tabulated",
        **res.public(),
        "t1_rows_published": published["t1_rows"],
        "t2_rows_published": published["t2_rows"],
        "zero_suppression": published["suppression"],
        "budget": float(res.plan.budget),
        "budget_exact": str(res.plan.budget),
        "charged": charged.to_json(),
        "stability": res.plan.stability,
        "stability_census_rule": stab.census_rule,
        "stability_exact": stab.exact,
        "thresholds": list(res.plan.thresholds),
        "moe95": {
            "stage1": res.plan.stage1.moe95,
            "stage2_cell": res.plan.stage2.moe95,
            "total_only": res.plan.total.moe95,
        },
    }
    return LevelEntry(res.plan.key, "tabulated", charged, res.plan.thresholds, fields)


def empty_entry(lv: LevelPlan) -> LevelEntry:
    fields = {
        "level": lv.key,
        "status": "empty domain",
        "budget": float(lv.budget),
        "budget_exact": str(lv.budget),
        "charged": None,
        "note": "no public population group (no region or no iteration): not tabulated, "
        "not charged",
    }
    return LevelEntry(lv.key, "empty domain", None, (), fields)


def release_document(
    ctx: RunContext, inputs: SafeTabInputs, runs: dict[Scope, RunEntry], tables: ReleaseTables
) -> ReleaseDocument:
    """``release.json`` of the tabulated runs; its ``plan`` is that of the run with the
    largest guarantee (a run that drew noise: a skipped run is charged nothing)."""
    guarantee = ExactGuarantee.parallel(r.guarantee for r in runs.values())
    runs = {s: _public_run(r, inputs.config.source) for s, r in runs.items()}
    worst = max(runs, key=lambda s: runs[s].guarantee.as_zcdp().value)
    outputs = outputs_manifest(tables.directory, tables.writer.files)
    public = [p for p in inputs.input_files() if p != inputs.persons_path]
    extra = {
        "algorithm": "SafeTab-P two-stage adaptive algorithm (SafeTab seed Alg. 1-3)",
        "guarantee_note": (
            "derived from the mechanisms that drew the noise, composed exactly: each run is "
            "the sequential composition of its levels; the US and PR runs hold disjoint "
            "persons, so the release satisfies the larger of their guarantees (parallel "
            "composition). Floats are rounded up; the exact value is beside them."
        ),
        "plan": dict(runs[worst].plan),
        "engine": ctx.engine.name,
        "config": public_config(inputs.config.to_dict()),
    }
    return new_release_document(
        ctx,
        guarantee=guarantee,
        runs={s.value: r for s, r in runs.items()},
        postprocessing=postprocessing(ctx, inputs, tables),
        extra=extra,
        kind=KIND,
        public=public,
        outputs=outputs,
    )


def _public_run(run: RunEntry, source: str) -> RunEntry:
    """``run`` with the config's path in its plan's label replaced by the file's name."""
    label = str(run.plan.get("source", ""))
    if not source or source not in label:
        return run
    return dataclasses.replace(run, plan={**run.plan, "source": public_label(label, source)})


def postprocessing(ctx: RunContext, inputs: SafeTabInputs, tables: ReleaseTables) -> dict[str, Any]:
    chance = inputs.config.zero_suppression_chance or Fraction(0)
    return {
        "nonnegative": ctx.nonnegative,
        "zero_suppression": {
            "applied": chance > 0,
            "chance": float(chance),
            "chance_exact": str(chance),
            "rule": "production (safetab_p_analytics.py): a T1 stage-2 or TotalOnly total "
            "at a geography other than USA, STATE and PR-STATE is not published when its "
            "noisy count, before clamping, is at most the smallest t with P(noise <= t) >= "
            "chance for that row's noise law (per level: runs.*.levels[*].zero_suppression)",
            "suppressed_rows": tables.suppressed,
        },
        "t1_count_of_groups_with_t2": "sum of the group's published T2 cells",
        "t2_sex_marginals": "per group with cells and sex: the sum of that sex's published "
        "cells (AGESTART = AGEEND = *)",
        "note": "post-processing of noisy output only: no privacy cost",
    }


def run_record(
    ctx: RunContext, inputs: SafeTabInputs, persons: int, levels: list[LevelSummary]
) -> RunRecord:
    """The confidential run record (never published)."""
    return RunRecord(
        release=str(Path(os.path.abspath(ctx.out))),
        started_utc=ctx.started_utc,
        private=ctx.private,
        inputs=ctx.inputs_record,
        persons=persons,
        seconds=ctx.seconds,
        levels=[
            {
                "level": lv.plan.key,
                "memberships": lv.memberships,
                **({"evaluation_nonprivate": lv.evaluation} if lv.evaluation else {}),
            }
            for lv in levels
        ],
    )
