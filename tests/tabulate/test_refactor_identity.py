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
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from privtab.random import SeededSource
from privtab.tabulate.run import RunOptions, run_release

from .conftest import demo_params

DIGESTS = {
    "t1/part-00000-us-c000.csv": "31d72ba658c999dddfae80712777f95e4ba0b6dcd3cc3929913b94053cea7d71",
    "t1/part-00000-pr-c000.csv": "0a9703f0f0beac5cd07fbc9c399575604a9570598386e06fbedff04f51f437b6",
    "t2/part-00000-us-c000.csv": "5548d553f917404d5a57b3bf9dd4ebc2b961f7dacea0df70f0c033b7aae92782",
    "t2/part-00000-pr-c000.csv": "6a51050ae4ed5cdbd618b22ce1734545b64216512478bd4d8f3eda49ddcb7f0a",
    "t1-error.parquet": "5d0563f71484c4cf84ee7879790f284b0302c342213837237d1e3207491dbcea",
    "t2-error.parquet": "4ce194226d1cbd418eab7c24cdcf2481f4a7aa6793b741b205eb88b93944d9af",
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
