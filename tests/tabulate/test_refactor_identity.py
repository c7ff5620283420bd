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
- issue 29 (TopDown speed): the discrete Gaussian draws N_ℤ(σ²) for 1/16 ≤ σ² ≤ 2¹⁴ — every
  σ² of this plan (2.34 … 625) — by inversion from a certified CDF table instead of
  rejection from the discrete Laplace (``privtab.random.gaussian_table``). The law is the
  same (tests/random), the seeded stream is not, so every noisy count changes; and since
  SafeTab-P's stage-2 detail and zero suppression depend on the noisy counts, so do the
  published rows (T1 US 13,215 → 13,205 rows; T2 US the same 1,666 keys). Columns and the
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
    "t1/part-00000-us-c000.csv": "90eb07591f0c967417aa58d825b4623beaddb5e0af08241af1b2a9c86c1860ad",
    "t1/part-00000-pr-c000.csv": "27d8d54d712656f2aa681eb281103d29aea65480d0dbadf5800e1b9000731ad5",
    "t2/part-00000-us-c000.csv": "b86fbf2aede51925537aa521e61d3664cdc4c4b2398df09f1ae1c1b2ff91ec66",
    "t2/part-00000-pr-c000.csv": "e231835c48025c42daab7871aa7871cfe58f36d79e16f18e09345951163c66ce",
    "t1-error.parquet": "92f85cce2da0c219e5490d804ce9fabc92515ea3f51bc4846a15238b9929095a",
    "t2-error.parquet": "2541bf9e2a1f9844de3d5cdf8bfd2e689766cfdabda60f6bb8e2a6747a7139f6",
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
