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
  ``semi_dp.compare_composition_order``; exact f-DP arithmetic in :class:`TradeOff`);
* provides the **sensitivity space** of a contingency table with invariant margins
  (:class:`TableSpace`) and **mechanisms** that add noise only where the invariant leaves
  freedom (:class:`ProjectedGaussian`, :class:`OptimalKNorm`) next to the naive baselines
  (:class:`NaiveGaussian`, :class:`NaiveKNorm`) and integer post-processing
  (``postprocess.nearest_integer_table``);
* the **semi-private UMPU test** for the odds ratio of a 2 × 2 table (:class:`OddsRatioTest`).

See ``docs/invariants.md``.
"""

from privtab.invariants.mechanisms import NaiveGaussian, NaiveKNorm, OptimalKNorm, ProjectedGaussian
from privtab.invariants.schema import CountInvariant, Schema
from privtab.invariants.semi_adjacency import semi_adjacent_parameter
from privtab.invariants.semi_dp import census_semi_dp, semi_dp
from privtab.invariants.sensitivity import TableSpace
from privtab.invariants.tradeoff import TradeOff
from privtab.invariants.umpu import OddsRatioTest

__all__ = [
    "CountInvariant",
    "NaiveGaussian",
    "NaiveKNorm",
    "OddsRatioTest",
    "OptimalKNorm",
    "ProjectedGaussian",
    "Schema",
    "TableSpace",
    "TradeOff",
    "census_semi_dp",
    "semi_adjacent_parameter",
    "semi_dp",
]
