"""Refactors change no published byte: a seeded release of a 10⁵-person synthetic input is
byte-identical to stored digests. A change that is *meant* to change the tables must update
these digests and say why here and in its commit.

History:

- issue 18 (the redesign of ``privtab.tabulate``): digests from commit da0761a, unchanged by
  the redesign.
- issue 17 (the Census product): the layout changed — ``t1/`` and ``t2/`` part files with
  the Census columns only, companion ``t1-error.parquet``/``t2-error.parquet``, production
  zero suppression (the production config has ``zero_suppression_chance``: 535,447 of the
  553,394 T1 rows are not published) and the T2 sex marginals (382 rows). The numbers did
  not change: against the release of commit 18b8dcf (same generator, plan and seed), every
  published T1 ``COUNT`` and every T2 cell is identical, the companion columns equal the
  old extra columns, the missing T1 rows are all stage-2 totals at sub-state geographies,
  and each marginal is the sum of its cells (a one-off comparison, described in the
  issue-17 report).
- issue 26 (one synthetic population for every product): the *input* changed, not the
  release code — the synthetic geography's hierarchy at small sizes (tracts ∝ county
  population, 1–9 block groups of ~30 blocks), the householder flag redrawn to match the
  households and GQ residents' ages and sexes from their facility type; the same seed now
  draws other persons, so the digests were regenerated (this test's body, printing
  ``got``, gives them).
- issue 29 (TopDown speed): the discrete Gaussian draws N_ℤ(σ²) for 1/16 ≤ σ² ≤ 2¹⁴ — every
  σ² of this plan (2.34 … 625) — by inversion from a certified CDF table instead of
  rejection from the discrete Laplace (``privtab.random.gaussian_table``). The law is the
  same (tests/random), the seeded stream is not, so every noisy count changes; and since
  SafeTab-P's stage-2 detail and zero suppression depend on the noisy counts, so do the
  published rows (on the issue-26 population, merged after: T1 US 13,232 rows). Columns and the
  layout are unchanged (a one-off comparison of this release under both samplers).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from privtab.random import SeededSource
from privtab.tabulate.run import RunOptions, run_release

from .conftest import demo_params

DIGESTS = {
    "t1/part-00000-us-c000.csv": "e4656a9876e5980c4c9ea838347110a5ab18f9e901d8e04acaba0788aade4cdc",
    "t1/part-00000-pr-c000.csv": "26b26370944846df3206c08aa16d4df0537fe7b9fa21b4d127139e1bc94517cc",
    "t2/part-00000-us-c000.csv": "3f11633d8b54b694a77ed469f35b8e61d16f7af164f3340cf259a52240fe43f7",
    "t2/part-00000-pr-c000.csv": "153e7eb1087564ada88ea63cb4ba0b319e73474e67ea47205fa154cabbbb1854",
    "t1-error.parquet": "5c138b87c12c27cf18c6ce93ff198f0a91447d4d4b6d68cfafb3c84fdc3312ed",
    "t2-error.parquet": "8926873e50fb65dfe0b6b06de11b0d095e93d051c063b10a95c0b0b4db1ba153",
}


@pytest.mark.filterwarnings("ignore::privtab.mechanisms.InsecureReleaseWarning")
def test_seeded_release_is_byte_identical_to_before_the_redesign(tmp_path: Path) -> None:
    from privtab.data.synth import synthesize

    synthesize(tmp_path / "data", 100_000, states=["10", "44", "50", "72"], seed=5)
    config = demo_params(tmp_path / "params", ["10", "44", "50", "72"])
    opts = RunOptions(source=SeededSource(42), allow_insecure=True, report=False)
    run_release(config, tmp_path / "data", tmp_path / "rel", opts)
    got = {
        name: hashlib.sha256((tmp_path / "rel" / name).read_bytes()).hexdigest() for name in DIGESTS
    }
    assert got == DIGESTS
