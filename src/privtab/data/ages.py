"""Age bins of the SafeTab-P T2 tables (2020 production cut points).

Cut points are upper-exclusive on QAGE (0..115): bin ``j`` holds ages in
``[cuts[j-1], cuts[j])`` with ``cuts[-1] = 0`` and a last bin up to 115 (census README):

- Age4  [18, 45, 65] → 0-17, 18-44, 45-64, 65-115;
- Age9  [5, 18, 25, 35, 45, 55, 65, 75];
- Age23 [5, 10, 15, 18, 20, 21, 22, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65, 67, 70, 75,
  80, 85].

Stage 2 picks, by comparing the stage-1 noisy total with the thresholds, one of: total
only, Sex × Age4, Sex × Age9, Sex × Age23 (statistic levels 0..3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

MIN_AGE = 0
MAX_AGE = 115


@dataclass(frozen=True)
class AgeBins:
    """A partition of ages 0..115 by upper-exclusive cut points."""

    name: str
    cuts: tuple[int, ...]

    def __post_init__(self) -> None:
        c = self.cuts
        if any(not MIN_AGE < x <= MAX_AGE for x in c) or list(c) != sorted(set(c)):
            raise ValueError(f"cut points must be strictly increasing in 1..{MAX_AGE}: {c}")

    @property
    def n_bins(self) -> int:
        return len(self.cuts) + 1

    def bounds(self) -> list[tuple[int, int]]:
        """Inclusive (AGESTART, AGEEND) of every bin, as written in T2 (last ends at 115)."""
        starts = (MIN_AGE, *self.cuts)
        ends = (*(x - 1 for x in self.cuts), MAX_AGE)
        return list(zip(starts, ends, strict=True))

    def lookup(self) -> npt.NDArray[np.uint8]:
        """Bin index of every age 0..115 (an array of length 116)."""
        return np.searchsorted(np.asarray(self.cuts), np.arange(MAX_AGE + 1), side="right").astype(
            np.uint8
        )

    def expr(self, age: str | pl.Expr = "QAGE") -> pl.Expr:
        """Polars expression: bin index (UInt8) of an integer age column."""
        col = pl.col(age) if isinstance(age, str) else age
        return col.replace_strict(
            list(range(MAX_AGE + 1)), self.lookup().tolist(), return_dtype=pl.UInt8
        )

    def bin_of(self, ages: npt.ArrayLike) -> npt.NDArray[np.uint8]:
        a = np.asarray(ages)
        if a.size and (a.min() < MIN_AGE or a.max() > MAX_AGE):
            raise ValueError(f"ages must lie in {MIN_AGE}..{MAX_AGE}")
        out: npt.NDArray[np.uint8] = self.lookup()[a]
        return out


AGE4 = AgeBins("Age4", (18, 45, 65))
AGE9 = AgeBins("Age9", (5, 18, 25, 35, 45, 55, 65, 75))
AGE23 = AgeBins(
    "Age23",
    (5, 10, 15, 18, 20, 21, 22, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65, 67, 70, 75, 80, 85),
)
STAT_LEVEL_BINS: dict[int, AgeBins | None] = {0: None, 1: AGE4, 2: AGE9, 3: AGE23}
"""Statistic level → age bins crossed with sex (0 = total only)."""

__all__ = ["AGE4", "AGE9", "AGE23", "MAX_AGE", "MIN_AGE", "STAT_LEVEL_BINS", "AgeBins"]
