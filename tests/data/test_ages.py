"""Age bins of T2 (2020 production cut points, census README)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from privtab.data.ages import AGE4, AGE9, AGE23, STAT_LEVEL_BINS, AgeBins


def test_bounds() -> None:
    assert AGE4.bounds() == [(0, 17), (18, 44), (45, 64), (65, 115)]
    assert AGE9.n_bins == 9
    assert AGE23.n_bins == 23
    assert AGE23.bounds()[4:8] == [(18, 19), (20, 20), (21, 21), (22, 24)]
    assert AGE23.bounds()[-1] == (85, 115)
    assert STAT_LEVEL_BINS[0] is None
    assert STAT_LEVEL_BINS[3] is AGE23


@pytest.mark.parametrize("bins", [AGE4, AGE9, AGE23])
def test_lookup_agrees_with_bounds_and_polars(bins: AgeBins) -> None:
    ages = np.arange(116)
    idx = bins.bin_of(ages)
    for b, (lo, hi) in enumerate(bins.bounds()):
        assert (idx[lo : hi + 1] == b).all()
    via_polars = pl.DataFrame({"QAGE": ages.astype(np.uint8)}).select(bins.expr())["QAGE"]
    assert via_polars.to_list() == idx.tolist()


def test_invalid() -> None:
    with pytest.raises(ValueError, match="strictly increasing"):
        AgeBins("x", (18, 18))
    with pytest.raises(ValueError, match=r"0\.\.115"):
        AGE4.bin_of([116])
