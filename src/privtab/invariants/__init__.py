"""Semi-DP: privacy with invariants (counts published without noise).

Seed: ``semi-dp-invariant-statistics.txt`` (Kim & Awan, *Formal privacy guarantees with
invariant statistics*). Publishing exact counts next to a DP release shrinks the set of
datasets an adversary must consider to the invariant-conforming ones, ``D_t``, and there
neighbouring datasets may be several replacements apart. This package

* computes the **semi-adjacent parameter** ``a`` of an invariant — exactly by search for
  small domains, by closed forms or the seed's bounds for large ones
  (:func:`semi_adjacent_parameter`);
* turns a guarantee into its **Semi-DP** guarantee in every definition (:func:`semi_dp`;
  the Census analysis of §6.1 is :func:`census_semi_dp`; Prop. 21 is
  :func:`compare_composition_order`; exact f-DP arithmetic in :class:`TradeOff`);
* provides the **sensitivity space** of a contingency table with invariant margins
  (:class:`TableSpace`) and **mechanisms** that add noise only where the invariant leaves
  freedom (:class:`ProjectedGaussian`, :class:`OptimalKNorm`) next to the naive baselines
  (:class:`NaiveGaussian`, :class:`NaiveKNorm`) and integer post-processing;
* the **semi-private UMPU test** for the odds ratio of a 2 × 2 table (:class:`OddsRatioTest`).

See ``docs/invariants.md``.
"""

from privtab.invariants.audit import GDPAudit, audit_gdp
from privtab.invariants.knorm import SubspacePolytope
from privtab.invariants.mechanisms import (
    NaiveGaussian,
    NaiveKNorm,
    OptimalKNorm,
    ProjectedGaussian,
    SemiGuarantee,
    TableRelease,
)
from privtab.invariants.postprocess import nearest_integer_table
from privtab.invariants.schema import CountInvariant, Schema, histogram_from_records
from privtab.invariants.semi_adjacency import (
    SemiAdjacency,
    conforming_datasets,
    semi_adjacent_exact,
    semi_adjacent_parameter,
    theorem16_bound,
)
from privtab.invariants.semi_dp import (
    CensusSemiDP,
    CompositionOrder,
    census_semi_dp,
    compare_composition_order,
    semi_dp,
    semi_dp_summary,
)
from privtab.invariants.sensitivity import (
    TableSpace,
    naive_sensitivities,
    orthonormal_basis,
    projection_matrix,
    table_sensitivity_space,
    zero_margin_moves,
)
from privtab.invariants.tradeoff import TradeOff, gaussian_tradeoff
from privtab.invariants.umpu import (
    GaussianCND,
    Margins2x2,
    OddsRatioTest,
    TestResult,
    TradeOffCND,
    TulapCND,
    fisher_exact_umpu_power,
    fisher_nch_pmf,
    naive_test,
)

__all__ = [
    "CensusSemiDP",
    "CompositionOrder",
    "CountInvariant",
    "GDPAudit",
    "GaussianCND",
    "Margins2x2",
    "NaiveGaussian",
    "NaiveKNorm",
    "OddsRatioTest",
    "OptimalKNorm",
    "ProjectedGaussian",
    "Schema",
    "SemiAdjacency",
    "SemiGuarantee",
    "SubspacePolytope",
    "TableRelease",
    "TableSpace",
    "TestResult",
    "TradeOff",
    "TradeOffCND",
    "TulapCND",
    "audit_gdp",
    "census_semi_dp",
    "compare_composition_order",
    "conforming_datasets",
    "fisher_exact_umpu_power",
    "fisher_nch_pmf",
    "gaussian_tradeoff",
    "histogram_from_records",
    "naive_sensitivities",
    "naive_test",
    "nearest_integer_table",
    "orthonormal_basis",
    "projection_matrix",
    "semi_adjacent_exact",
    "semi_adjacent_parameter",
    "semi_dp",
    "semi_dp_summary",
    "table_sensitivity_space",
    "theorem16_bound",
    "zero_margin_moves",
]
