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
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from privtab.random import SeededSource
from privtab.tabulate.run import RunOptions, run_release

from .conftest import demo_params

DIGESTS = {
    "t1/part-00000-us-c000.csv": "f5d16601efb2a337f1ca6317be306ee94cac3113afbc50212d3b59cdbdbee24a",
    "t1/part-00000-pr-c000.csv": "efc5e423a9a1fb318ee8e038962df035cb557f95dad6845f3bf2c647038413d3",
    "t2/part-00000-us-c000.csv": "c149da48a3ee332f1d2ff8ab359ccd9842a76a69d95621dbacc945959259736f",
    "t2/part-00000-pr-c000.csv": "50525ac75983c72c124b7705ce0b3f9bda0a4df20f61c06089155b82d81c5c5b",
    "t1-error.parquet": "5a35aa17ff86f6a88c5eea5e300aa26803866bffe35855be74105d998809bf04",
    "t2-error.parquet": "aac54dabc8f67bd30a5e353fb9f2d5b848ad72500d9b4ffc29ae53a80b5745f4",
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
