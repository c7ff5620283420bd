"""T1 and T2 as a data user wants them: typed, with iteration names and levels attached.

The Census files hold every value as text (``AGESTART = *`` for a sex marginal). For the
Python API (:class:`privtab.safetab.Release`) the tables are typed:

* ``AGESTART``, ``AGEEND`` and ``SEX`` are integers, null where the file says ``*``;
* ``ITERATION_NAME`` (e.g. ``"Chinese alone"``) follows ``ITERATION_CODE``, and
  ``ITERATION_LEVEL`` (1 or 2) says which population-group level the row belongs to —
  with ``REGION_TYPE`` (the geography level) it names the level, e.g. ``(COUNTY, 1)``;
* T2 carries the group's ``STAT_LEVEL`` (from T1): which age bins its cells use.

Post-processing of published values and public reference data only: no privacy cost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

    from privtab.data import ReferenceData

__all__ = ["GROUP_KEYS", "iteration_frame", "typed_t1", "typed_t2"]

GROUP_KEYS = ["REGION_ID", "REGION_TYPE", "ITERATION_CODE"]


def iteration_frame(reference: ReferenceData) -> pl.DataFrame:
    """``ITERATION_CODE`` → ``ITERATION_NAME``, ``ITERATION_LEVEL`` (every iteration)."""
    import polars as pl

    its = list(reference.iterations.values())
    return pl.DataFrame(
        {
            "ITERATION_CODE": [i.code for i in its],
            "ITERATION_NAME": [i.name for i in its],
            "ITERATION_LEVEL": [i.level for i in its],
        },
        schema={
            "ITERATION_CODE": pl.String,
            "ITERATION_NAME": pl.String,
            "ITERATION_LEVEL": pl.Int8,
        },
    )


def _with_names(df: pl.DataFrame, names: pl.DataFrame) -> pl.DataFrame:
    import polars as pl

    out = df.with_columns(pl.col("ITERATION_CODE").cast(pl.String)).join(
        names, on="ITERATION_CODE", how="left", maintain_order="left"
    )
    cols = list(df.columns)
    at = cols.index("ITERATION_CODE") + 1
    return out.select([*cols[:at], "ITERATION_NAME", "ITERATION_LEVEL", *cols[at:]])


def _integer(column: str) -> pl.Expr:
    """A text column of integers (``*`` → null) as Int64; raises on anything else."""
    import polars as pl

    c = pl.col(column)
    return pl.when(c.cast(pl.String) == "*").then(None).otherwise(c).cast(pl.Int64).alias(column)


def typed_t1(t1: pl.DataFrame, names: pl.DataFrame) -> pl.DataFrame:
    """T1 with ``ITERATION_NAME`` and ``ITERATION_LEVEL`` after ``ITERATION_CODE``."""
    return _with_names(t1, names)


def typed_t2(t2: pl.DataFrame, t1: pl.DataFrame, names: pl.DataFrame) -> pl.DataFrame:
    """T2 with integer ages and sex (null for ``*``), iteration names and levels, and the
    group's ``STAT_LEVEL``."""
    import polars as pl

    ints = [_integer(c) for c in ("AGESTART", "AGEEND", "SEX") if c in t2.columns]
    out = _with_names(t2.with_columns(ints), names)
    if "STAT_LEVEL" in t1.columns and "STAT_LEVEL" not in out.columns:
        levels = t1.select(
            pl.col("REGION_ID"),
            pl.col("REGION_TYPE"),
            pl.col("ITERATION_CODE").cast(pl.String),
            pl.col("STAT_LEVEL"),
        )
        out = out.join(levels, on=GROUP_KEYS, how="left", maintain_order="left")
    return out
