"""Household records for benchmarks and tests, derived from a synthetic person file.

Until the synthetic population with households lands (``privtab synth``, branch
``synth``, CONTRACTS C1), SafeTab-H's benchmarks and tests make ``household-records`` in
the C1 (Census) layout from a synthetic ``person-records`` file: one household per person
with ``HOUSEHOLDER = True``, in that person's block, with the householder's race codes,
Hispanic-origin code and ``HHRACE = CENRACE`` — so persons and households are one
population (SafeTab-P's T1 of the persons selects SafeTab-H's groups). HOUSEHOLD_TYPE and
TEN are drawn i.i.d. from 2020-like shares (married couple 47 %, other family male
householder 5 %, female 12 %, living alone 28 %, nonfamily not alone 8 %; owned with a
mortgage 40 %, free and clear 23 %, rented 35 %, occupied without rent 2 %) by a seeded
hash of the row: deterministic, streamed (polars ``sink``), any size.

Not a model of households (sizes, types by age or race are independent here); it is the
workload SafeTab-H reads: its speed depends on the rows, codes and blocks, which are the
synthetic population's.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

__all__ = ["households_from_persons"]

TYPE_SHARES = ((1, 47), (2, 5), (3, 12), (4, 28), (5, 8))
TENURE_SHARES = ((1, 40), (2, 23), (3, 35), (4, 2))
COLUMNS = (
    "TABBLKST",
    "TABBLKCOU",
    "TABTRACTCE",
    "TABBLK",
    "HHRACE",
    *(f"QRACE{i}" for i in range(1, 9)),
    "QSPAN",
    "HOUSEHOLD_TYPE",
    "TEN",
)


def _draw(shares: tuple[tuple[int, int], ...], seed: int) -> pl.Expr:
    """A code per row with the given percentage shares, from a seeded hash of the row."""
    u = pl.col("_I").hash(seed) % 100
    bounds = []
    total = 0
    for code, share in shares:
        total += share
        bounds.append((code, total))
    expr: pl.Expr = pl.lit(str(shares[-1][0]))
    for code, bound in reversed(bounds[:-1]):
        expr = pl.when(u < bound).then(pl.lit(str(code))).otherwise(expr)
    return expr


def households_from_persons(
    persons: Path, out: Path, seed: int = 0, *, fmt: str | None = None
) -> Path:
    """Write ``out`` (``fmt``, default from its suffix: ``txt`` — pipe-delimited with a
    header — or ``parquet``) from the synthetic person file ``persons`` (module
    docstring); returns ``out``."""
    persons, out = Path(persons), Path(out)
    parquet = (fmt or out.suffix.lstrip(".")) == "parquet"
    if persons.suffix == ".parquet":
        lf = pl.scan_parquet(persons).select(pl.all().cast(pl.String))
    else:
        lf = pl.scan_csv(persons, separator="|", infer_schema=False)
    frame = (
        lf.filter(pl.col("HOUSEHOLDER") == "True")
        .with_row_index("_I")
        .with_columns(
            pl.col("CENRACE").alias("HHRACE"),
            _draw(TYPE_SHARES, seed).alias("HOUSEHOLD_TYPE"),
            _draw(TENURE_SHARES, seed + 1).alias("TEN"),
        )
        .select(COLUMNS)
    )
    if parquet:
        frame.sink_parquet(out, row_group_size=1 << 19)
    else:
        frame.sink_csv(out, separator="|", quote_style="never")
    return out
