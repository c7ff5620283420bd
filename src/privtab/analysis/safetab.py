"""Analysing a SafeTab release: exact intervals, combined totals, consistent tables.

A release directory holds T1 and T2 in the Census layout (folders ``t1/`` and ``t2/`` of
pipe-delimited part files, or the Parquet copies ``t1.parquet`` / ``t2.parquet``), the
companion tables ``t1-error.parquet`` / ``t2-error.parquet`` and ``release.json``
(:mod:`privtab.tabulate.output`); :func:`load_release` joins each table with its companion,
so every row carries its noise law. Releases of the earlier single-file layout
(``t1.parquet`` / ``t1.txt`` with every column) are read too. Every noisy count carries
``NOISE`` (``discrete_gaussian`` or ``geometric``), ``NOISE_SCALE`` (σ² of one discrete
Gaussian draw, or ``b = 1/ε`` of one geometric draw) and ``VARIANCE`` (the variance of the
count's noise — a T1 ``sum_of_t2`` total and a T2 sex marginal (``AGESTART = AGEEND = *``)
carry the noise of ``n = VARIANCE / Var(one draw)`` independent cells). All noises are
independent. Groups suppressed at publication (zero suppression) have no row at all.

* :func:`add_intervals` adds exact interval columns at any level: the law of one draw for
  a single measurement, the ``n``-fold convolution for a sum of T2 cells, so the bounds are
  the shortest symmetric integer intervals whose exact coverage is ≥ the level (SafeTab
  seed Alg. 4–5; course seed §4.2).
* :func:`combine_totals` combines each group's stage-1 total ``STAGE1_COUNT`` with its
  published ``COUNT`` by inverse variance (course seed §4.1) and states the variance of
  the combination; ``level=`` adds an interval from the exact law of ``w₁e₁ + w₂e₂``.
* :func:`consistent_t2` fits the T2 cells to the stage-1 total by GLS (optionally
  non-negative): the fitted cells add up to the combined total.

**The selection effect.** ``STAT_LEVEL`` was chosen by comparing ``STAGE1_COUNT`` with
thresholds (SafeTab seed Alg. 2), so *conditional on the level* the stage-1 noise is not
mean-zero: a group published at a detailed level is more likely to have had positive
stage-1 noise. What each estimate guarantees:

* ``COUNT`` (stage 2): its noise is drawn after, and independently of, the level choice,
  so given the level it is unbiased with exactly the stated ``VARIANCE`` and the intervals
  of :func:`add_intervals` have their exact coverage *conditionally on the level*.
* ``COMBINED_COUNT``: unconditionally (over both stages' noise) each input is unbiased,
  but the weights depend on the level through ``VARIANCE``, and given the level the
  stage-1 input is biased. The stated ``COMBINED_VARIANCE = 1/(1/V₁ + 1/V₂)`` is its
  exact variance for a group whose level is not in doubt (stage-1 count far from every
  threshold relative to its standard deviation, and for TotalOnly groups, which have no
  stage 1 and no combination); near a threshold the combined estimate can carry a bias of
  up to ``STAGE1_WEIGHT·|E[e₁ | level]|``. :func:`combine_totals` therefore reports
  ``STAGE1_WEIGHT`` and, when thresholds are given, ``STAGE1_THRESHOLD_SD`` (the distance
  from the stage-1 count to the nearest threshold in stage-1 standard deviations); a user
  who needs conditional guarantees uses ``COUNT`` alone where that distance is small
  (``min_threshold_sd=``). The tests measure both effects by simulation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privtab.random import RationalLike

if TYPE_CHECKING:
    import polars as pl

    from privtab.mechanisms import NoiseMechanism
    from privtab.release import ReleaseDocument

__all__ = [
    "SafeTabRelease",
    "add_intervals",
    "combine_totals",
    "consistent_t2",
    "draw_count",
    "load_release",
]

GROUP_KEYS = ["REGION_ID", "REGION_TYPE", "ITERATION_CODE"]


def _t1_schema() -> dict[str, Any]:
    """The engine's T1 layout (:data:`privtab.tabulate.tables.T1_SCHEMA`)."""
    from privtab.tabulate.tables import T1_SCHEMA

    return dict(T1_SCHEMA)


def _t2_schema() -> dict[str, Any]:
    """The engine's T2 layout (:data:`privtab.tabulate.tables.T2_SCHEMA`)."""
    from privtab.tabulate.tables import T2_SCHEMA

    return dict(T2_SCHEMA)


@dataclass
class SafeTabRelease:
    """The tables of a SafeTab release and its ``release.json`` metadata."""

    t1: pl.DataFrame
    t2: pl.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)
    """``release.json`` as a JSON object (empty when the folder has none)."""
    path: Path | None = None
    document: ReleaseDocument | None = None
    """The typed ``release.json`` (:func:`privtab.release.read_release_document`)."""

    @property
    def private(self) -> bool | None:
        """Whether the release is private (``None``: the folder has no ``release.json``)."""
        return None if self.document is None else self.document.private

    @property
    def clamped(self) -> bool:
        """Whether ``release.json`` says counts were clamped at zero (``postprocessing.
        nonnegative``). Intervals stay valid: for a true count ``c ≥ 0`` and a clamped draw
        ``v ≤ 0``, ``|v − c| ≤ m`` implies ``|0 − c| ≤ m``, so clamping can only add coverage;
        variances and combined estimates are biased near zero (docs/analysis.md)."""
        post = self.metadata.get("postprocessing", {})
        return bool(isinstance(post, dict) and post.get("nonnegative"))


def _read_old_table(directory: Path, stem: str, schema: dict[str, Any]) -> pl.DataFrame | None:
    """A table of the earlier single-file layout (every column in ``t1.parquet``/``t1.txt``),
    or ``None`` when the release is in the Census layout."""
    import polars as pl

    pq, txt = directory / f"{stem}.parquet", directory / f"{stem}.txt"
    if (directory / stem).is_dir():
        return None
    if pq.exists():
        if "NOISE" not in pl.read_parquet_schema(pq):
            return None  # a Census-layout Parquet copy: joined with its companion
        df = pl.read_parquet(pq)
    elif txt.exists():
        df = pl.read_csv(txt, separator="|", schema_overrides=schema, null_values=[""])
    else:
        return None
    missing = [c for c in schema if c not in df.columns]
    if missing:
        raise ValueError(f"{stem} in {directory} lacks columns {missing}")
    return df.with_columns([pl.col(c).cast(t) for c, t in schema.items()])


def _read_table(directory: Path, stem: str, schema: dict[str, Any]) -> pl.DataFrame:
    """One table with its error columns: the Census table joined with its companion."""
    import polars as pl

    from privtab.tabulate.output import CENSUS_COLUMNS, ERROR_FILES, read_census_table

    old = _read_old_table(directory, stem, schema)
    if old is not None:
        return old
    census = read_census_table(directory, stem)
    if census is None:
        raise FileNotFoundError(
            f"{directory} has no {stem}/ folder, {stem}.parquet or {stem}.txt: not a release"
        )
    companion = directory / ERROR_FILES[stem]
    if not companion.exists():
        raise FileNotFoundError(
            f"{companion} not found: the release has no error table for {stem} (noise laws "
            "and MOEs of its rows), which the analyses need"
        )
    keys = [c for c in CENSUS_COLUMNS[stem] if c != "COUNT"]
    errors = pl.read_parquet(companion)
    missing = [c for c in schema if c != "COUNT" and c not in errors.columns]
    if missing:
        raise ValueError(f"{companion} lacks columns {missing}")
    errors = errors.with_columns([pl.col(c).cast(schema[c]) for c in schema if c != "COUNT"])
    joined = census.join(errors, on=keys, how="left", maintain_order="left", coalesce=True)
    if joined.height != census.height:
        raise ValueError(f"{companion} has more than one row for some {stem} rows")
    unmatched = joined.filter(pl.col("NOISE").is_null())
    if unmatched.height or errors.height != census.height:
        example = unmatched.row(0, named=True) if unmatched.height else {}
        raise ValueError(
            f"{companion} does not match the published {stem} rows one to one "
            f"({census.height} published, {errors.height} in the error table"
            + (f"; e.g. no error row for { {k: example[k] for k in keys} }" if example else "")
            + ")"
        )
    return joined.select(list(schema)).cast(schema)  # type: ignore[arg-type]


def load_release(path: str | Path) -> SafeTabRelease:
    """Read a release directory: each Census table joined with its companion error table
    (either layout; Parquet preferred to text in the earlier one). T2 includes the sex
    marginals (``AGESTART = AGEEND = "*"``) when the release has them."""
    d = Path(path)
    if not d.is_dir():
        raise FileNotFoundError(f"release directory {d} not found")
    from privtab.release import read_release_document

    doc = read_release_document(d) if (d / "release.json").exists() else None
    meta = doc.to_json() if doc is not None else {}
    return SafeTabRelease(
        _read_table(d, "t1", _t1_schema()), _read_table(d, "t2", _t2_schema()), meta, d, doc
    )


def _measurement(noise: str, scale: float) -> NoiseMechanism:
    """The mechanism of one draw: ``geometric`` with ``b = scale`` or ``discrete_gaussian``
    with ``σ² = scale`` (sensitivity 1)."""
    from privtab.mechanisms import mechanism_from_spec

    if noise not in ("geometric", "discrete_gaussian"):
        raise ValueError(f"unknown NOISE {noise!r} (geometric or discrete_gaussian)")
    return mechanism_from_spec(noise, scale=scale)


def draw_count(noise: str, scale: float, variance: float) -> int:
    """How many independent draws of one measurement's noise a count carries:
    ``VARIANCE / Var(one draw)``, which must be (close to) a positive integer."""
    v1 = _measurement(noise, scale).variance
    n = variance / v1
    k = round(n)
    if k < 1 or abs(n - k) > 1e-6 * max(k, 1):
        raise ValueError(
            f"VARIANCE {variance} is not a whole number of draws of {noise} with scale "
            f"{scale} (variance {v1} each)"
        )
    return int(k)


def _law_moe(noise: str, scale: float, n: int, level: RationalLike) -> tuple[int, float]:
    from privtab.mechanisms import LinearNoise

    m = _measurement(noise, scale)
    if n == 1:
        moe = int(m.moe(level))
        return moe, float(m.law.coverage(moe))
    law = LinearNoise([(1, m)] * n)
    moe = int(law.moe(level))
    return moe, law.central_mass(moe)


def _pct(level: RationalLike) -> str:
    from privtab.mechanisms.laws import as_level

    v = float(as_level(level)) * 100
    return f"{v:g}".replace(".", "_")


def add_intervals(
    df: pl.DataFrame,
    level: RationalLike = 0.9,
    *,
    count_col: str = "COUNT",
    scale_col: str = "NOISE_SCALE",
    variance_col: str = "VARIANCE",
    prefix: str = "",
) -> pl.DataFrame:
    """Add ``{prefix}MOE{L}``, ``{prefix}LOWER{L}``, ``{prefix}UPPER{L}`` (int64) and
    ``{prefix}COVERAGE{L}`` (the exact coverage, ≥ level) for level ``L`` percent. If the
    MOE column already exists (the release's ``MOE95`` at level 0.95) it is *checked*
    against the exact law instead (``ValueError`` naming the first disagreeing row).

    Works on T1 and T2 (and on T1's stage-1 columns with ``count_col="STAGE1_COUNT"``,
    ``scale_col="STAGE1_NOISE_SCALE"``, ``variance_col="STAGE1_VARIANCE"``,
    ``prefix="STAGE1_"``; rows without a stage 1 get nulls). Guarantee: for every row,
    ``P(LOWER ≤ truth ≤ UPPER) = COVERAGE ≥ level`` over that row's noise.
    """
    import polars as pl

    tag = _pct(level)
    keys = ["NOISE", scale_col, variance_col]
    classes = df.select(keys).unique().drop_nulls()
    rows = []
    for noise, scale, var in classes.iter_rows():
        n = draw_count(noise, scale, var)
        moe, cov = _law_moe(noise, scale, n, level)
        rows.append({"NOISE": noise, scale_col: scale, variance_col: var, "_m": moe, "_c": cov})
    table = pl.DataFrame(
        rows,
        schema={
            "NOISE": pl.String,
            scale_col: pl.Float64,
            variance_col: pl.Float64,
            "_m": pl.Int64,
            "_c": pl.Float64,
        },
    )
    out = df.join(table, on=keys, how="left", nulls_equal=False, maintain_order="left")
    moe_col = f"{prefix}MOE{tag}"
    if moe_col in df.columns:  # e.g. the release's own MOE95: check it instead of replacing
        bad = out.filter(pl.col(moe_col).ne_missing(pl.col("_m")))
        if bad.height:
            row = bad.row(0, named=True)
            raise ValueError(
                f"{bad.height} rows' {moe_col} disagree with the exact noise law, e.g. "
                f"{ {k: row[k] for k in [*GROUP_KEYS, moe_col, '_m'] if k in row} }"
            )
    return out.with_columns(
        pl.col("_m").alias(moe_col),
        (pl.col(count_col) - pl.col("_m")).alias(f"{prefix}LOWER{tag}"),
        (pl.col(count_col) + pl.col("_m")).alias(f"{prefix}UPPER{tag}"),
        pl.col("_c").alias(f"{prefix}COVERAGE{tag}"),
    ).drop("_m", "_c")


def combine_totals(
    t1: pl.DataFrame,
    *,
    level: RationalLike | None = None,
    thresholds: list[float] | pl.DataFrame | None = None,
    min_threshold_sd: float | None = None,
) -> pl.DataFrame:
    """Add ``COMBINED_COUNT``, ``COMBINED_VARIANCE`` and ``STAGE1_WEIGHT`` to T1.

    ``COMBINED_COUNT = w·STAGE1_COUNT + (1−w)·COUNT`` with ``w = V₂/(V₁ + V₂)`` and variance
    ``V₁V₂/(V₁ + V₂)`` (inverse variance; course seed §4.1). Groups without a stage 1
    (TotalOnly) keep ``COUNT``. With ``thresholds`` (the release plan's θ's) the column
    ``STAGE1_THRESHOLD_SD`` = distance of ``STAGE1_COUNT`` to the nearest threshold in
    stage-1 standard deviations (a frame of per-group thresholds ``TH0, TH1, …`` keyed by
    any T1 columns it shares, e.g. ``REGION_TYPE, ITERATION_CODE``, gives each group its
    level's θ's: :func:`privtab.analysis.derived.combine_release`); with
    ``min_threshold_sd`` groups closer than that keep ``COUNT`` alone (guarding against the
    selection bias described in the module docstring). ``level`` adds
    ``COMBINED_LOWER{L}``/``COMBINED_UPPER{L}`` from the exact law of the combined noise
    (valid for fixed weights, i.e. given the level when the stage-1 noise is not selected
    on).
    """
    import polars as pl

    v1, v2 = pl.col("STAGE1_VARIANCE"), pl.col("VARIANCE")
    has1 = pl.col("STAGE1_COUNT").is_not_null() & v1.is_not_null()
    out = t1
    use = has1
    if isinstance(thresholds, pl.DataFrame) or thresholds:
        ths: list[Any] = list(thresholds) if isinstance(thresholds, list) else []
        if isinstance(thresholds, pl.DataFrame):
            ths = [pl.col(c) for c in thresholds.columns if c.startswith("TH")]
            keys = [c for c in thresholds.columns if c in t1.columns]
            out = (
                out.join(thresholds, on=keys, how="left", maintain_order="left")
                if keys
                else out.join(thresholds, how="cross")
            )
        sd = v1.sqrt()
        count = pl.col("STAGE1_COUNT").cast(pl.Float64)
        dist = pl.min_horizontal([(count - th).abs() / sd for th in ths])
        out = out.with_columns(
            pl.when(has1).then(dist).otherwise(None).alias("STAGE1_THRESHOLD_SD")
        )
        if isinstance(thresholds, pl.DataFrame):
            out = out.drop([c for c in thresholds.columns if c.startswith("TH")])
        if min_threshold_sd is not None:
            use = has1 & (pl.col("STAGE1_THRESHOLD_SD") >= min_threshold_sd)
    w = pl.when(use).then(v2 / (v1 + v2)).otherwise(0.0)
    out = out.with_columns(w.alias("STAGE1_WEIGHT"))
    w1 = pl.col("STAGE1_WEIGHT")
    out = out.with_columns(
        pl.when(w1 > 0)
        .then(w1 * pl.col("STAGE1_COUNT") + (1 - w1) * pl.col("COUNT"))
        .otherwise(pl.col("COUNT").cast(pl.Float64))
        .alias("COMBINED_COUNT"),
        pl.when(w1 > 0).then(v1 * v2 / (v1 + v2)).otherwise(v2).alias("COMBINED_VARIANCE"),
    )
    if level is None:
        return out
    from privtab.mechanisms import LinearNoise

    tag = _pct(level)
    keys = [
        "NOISE",
        "NOISE_SCALE",
        "VARIANCE",
        "STAGE1_NOISE_SCALE",
        "STAGE1_VARIANCE",
        "STAGE1_WEIGHT",
    ]
    rows = []
    for noise, scale, var, s1, var1, wt in out.select(keys).unique().iter_rows():
        n = draw_count(noise, scale, var)
        m2 = _measurement(noise, scale)
        terms: list[tuple[RationalLike, NoiseMechanism]] = [(1 - wt, m2)] * n
        if wt > 0:
            n1 = draw_count(noise, s1, var1)
            terms += [(wt, _measurement(noise, s1))] * n1
        law = LinearNoise(terms)
        rows.append((noise, scale, var, s1, var1, wt, float(law.moe(level))))
    table = pl.DataFrame(
        rows,
        schema={**{k: out.schema[k] for k in keys}, "_m": pl.Float64},
        orient="row",
    )
    out = out.join(table, on=keys, how="left", nulls_equal=True, maintain_order="left")
    return out.with_columns(
        (pl.col("COMBINED_COUNT") - pl.col("_m")).alias(f"COMBINED_LOWER{tag}"),
        (pl.col("COMBINED_COUNT") + pl.col("_m")).alias(f"COMBINED_UPPER{tag}"),
    ).drop("_m")


def consistent_t2(t1: pl.DataFrame, t2: pl.DataFrame, *, nonnegative: bool = True) -> pl.DataFrame:
    """Fit each group's T2 cells to its stage-1 total by GLS; adds ``FITTED_COUNT``.

    The measurements — T2 cells ``pᵢ`` (variance ``vᵢ``) and the independent stage-1 total
    ``t`` (variance ``V``) — give ``x̂ᵢ = pᵢ + vᵢ(t − Σp)/(V + Σv)``: unbiased for fixed
    levels, each cell's variance reduced, and ``Σx̂`` equals the inverse-variance combined
    total. Groups whose unconstrained fit has a negative cell are refitted with
    non-negative least squares (scipy) when ``nonnegative``. Post-processing: no privacy
    cost. (The same selection caveat as :func:`combine_totals` applies to ``t``.) Sex
    marginal rows (``AGESTART = "*"``) are sums of cells, not measurements: they are not
    fitted but get the sum of their fitted cells.
    """
    import numpy as np
    import polars as pl

    from privtab.analysis.postprocess import consistent_total

    marginal = pl.col("AGESTART") == "*"
    margins = t2.filter(marginal)
    t2 = t2.filter(~marginal)
    s1 = t1.select([*GROUP_KEYS, "STAGE1_COUNT", "STAGE1_VARIANCE"])
    df = t2.join(s1, on=GROUP_KEYS, how="left", maintain_order="left")
    g = df.with_columns(
        pl.col("COUNT").sum().over(GROUP_KEYS).alias("_sp"),
        pl.col("VARIANCE").sum().over(GROUP_KEYS).alias("_sv"),
    )
    has = pl.col("STAGE1_COUNT").is_not_null()
    fit = pl.col("COUNT") + pl.col("VARIANCE") * (pl.col("STAGE1_COUNT") - pl.col("_sp")) / (
        pl.col("STAGE1_VARIANCE") + pl.col("_sv")
    )
    g = g.with_columns(
        pl.when(has).then(fit).otherwise(pl.col("COUNT").cast(pl.Float64)).alias("FITTED_COUNT")
    )
    if nonnegative:
        g = g.with_row_index("_row")
        neg = g.filter((pl.col("FITTED_COUNT") < 0).any().over(GROUP_KEYS))
        fitted = g["FITTED_COUNT"].to_numpy().copy()
        for _, grp in neg.group_by(GROUP_KEYS):
            rows = grp["_row"].to_numpy()
            if grp["STAGE1_COUNT"][0] is None:
                fitted[rows] = np.maximum(grp["COUNT"].to_numpy(), 0)
                continue
            res = consistent_total(
                float(grp["STAGE1_COUNT"][0]),
                grp["COUNT"].to_numpy(),
                float(grp["STAGE1_VARIANCE"][0]),
                grp["VARIANCE"].to_numpy(),
                nonnegative=True,
            )
            fitted[rows] = res.parts
        g = g.with_columns(pl.Series("FITTED_COUNT", fitted)).drop("_row")
    cells = g.drop("_sp", "_sv", "STAGE1_COUNT", "STAGE1_VARIANCE")
    if margins.height == 0:
        return cells
    sums = cells.group_by([*GROUP_KEYS, "SEX"]).agg(pl.col("FITTED_COUNT").sum())
    fitted_margins = margins.join(
        sums, on=[*GROUP_KEYS, "SEX"], how="left", maintain_order="left"
    ).select(cells.columns)
    return pl.concat([cells, fitted_margins])
