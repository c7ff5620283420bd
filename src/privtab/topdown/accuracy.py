"""The accuracy of a TopDown release against a non-confidential truth (synthetic data).

``privtab topdown accuracy --release R --truth T`` compares a release's published P1–P5
tables with the same tables tabulated from the data folder ``T`` the release was run on
(``privtab synth`` layout; it must be *non-confidential*: a synthetic population, or
any data whose exact tables may be shown — the comparison publishes true counts):

**Errors by geolevel, table and population size** (:func:`error_summary`): for every
tabulation geography of the release (NATION … AIANNH, :mod:`privtab.topdown.pl94`), the
error ``published − true`` of every cell; per (geolevel, table, size bin of the
geography's true total population): the geographies, cells, mean absolute error (MAE),
root mean squared error (RMSE) and mean error (ME, the bias). ``TOTAL`` is the total
population cell ``P0010001`` alone; ``P1`` … ``P5`` are all the table's cells.

**The Census's reliability criterion** (:func:`reliability`): for block groups and places,
the share of geographies, by 50-person bins of true total population, whose *largest
group's* share of the population is within 5 percentage points of the truth. The groups
are P2's mutually exclusive major groups (Hispanic or Latino; not Hispanic and one of the
six races alone; not Hispanic and two or more races), the largest is the largest in the
truth. The Census (working paper SSS2021-02, Aug. 2021) calls a size bin reliable
when ≥ 95 % of its geographies pass, and found production TopDown reliable from 450–499
persons for block groups and 200–249 for places and MCDs (against the *swapped* 2010
tables, not an enumeration). ``threshold`` is the lower edge of the first bin from which
every bin with geographies passes.

**The noisy measurements' own error** (:func:`measurement_errors`, when the release has
``nmf/``): on the spine's geounits (where the measurements were taken), for every
measured query whose rows are P1–P5 cells (``total``: P0010001; ``cenrace``: P1's 63
race cells), the noisy answers' error beside TopDown's (the published blocks summed over
the geounit) and the RMSE the noise's exact variance predicts (a check of the file).

Privacy: none of this is a release — it reads the truth. It is for synthetic or
otherwise public data only (the command says so in its output).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import scipy.sparse as sp
from numpy.typing import NDArray

from privtab.errors import InputError
from privtab.report.text import Table
from privtab.topdown.histogram import CELLS
from privtab.topdown.pl94 import GEOLEVELS, geoid_exprs, table_frame, tabulate
from privtab.topdown.tables import TABLE_NAMES, pl94_person_cells

__all__ = [
    "GROUP_CELLS",
    "SIZE_BINS",
    "Accuracy",
    "accuracy",
    "error_summary",
    "measurement_errors",
    "reliability",
    "truth_tables",
]

#: Lower edges of the size bins (true total population of the geography).
SIZE_BINS: tuple[int, ...] = (0, 1, 10, 100, 250, 500, 1_000, 10_000, 100_000)
#: P2's mutually exclusive major groups (the reliability criterion's groups).
GROUP_CELLS: tuple[str, ...] = (
    "P0020002",
    "P0020005",
    "P0020006",
    "P0020007",
    "P0020008",
    "P0020009",
    "P0020010",
    "P0020011",
)
#: The geolevels of the reliability criterion, the bin width and the share and distance.
RELIABILITY_LEVELS: tuple[str, ...] = ("BLOCK_GROUP", "PLACE")
RELIABILITY_BIN = 50
RELIABILITY_TOP = 1_000
RELIABILITY_POINTS = 5.0
RELIABILITY_SHARE = 0.95
TOTAL = "P0010001"
KEYS = ["GEOLEVEL", "GEOID", "CELL"]


def _bin_label(lo: int, hi: int | None) -> str:
    if hi is None:
        return f"{lo:,}+"
    return f"{lo:,}" if hi == lo + 1 else f"{lo:,}-{hi - 1:,}"


def size_bin(total: pl.Expr) -> pl.Expr:
    """The size-bin label of a true total population (:data:`SIZE_BINS`)."""
    highs = [*SIZE_BINS[1:], None]
    expr = pl.lit(_bin_label(SIZE_BINS[-1], None))
    for lo, hi in reversed(list(zip(SIZE_BINS[:-1], highs[:-1], strict=True))):
        expr = pl.when(total < hi).then(pl.lit(_bin_label(lo, hi))).otherwise(expr)
    return expr


# --------------------------------------------------------------------------- the truth
def truth_tables(data: str | Path, *, say: Callable[[str], None] | None = None) -> pl.DataFrame:
    """P1–P5 of every tabulation geography of the data folder (``GEOID|GEOLEVEL|CELL|
    COUNT``, :mod:`privtab.topdown.pl94`'s layout), tabulated from ``cef-persons`` and the
    GRF-C (validated and aggregated by :func:`privtab.topdown.folder.load_data`)."""
    from privtab.topdown.folder import load_data

    d = load_data(data, say=say)
    grfc = d.grfc
    index = grfc.select("BLOCK").with_row_index("_I")
    p = d.persons.join(index, on="BLOCK", how="left")
    lost = p.filter(pl.col("_I").is_null())
    if lost.height:
        raise InputError(
            "persons in a block the GRF-C does not list",
            file=str(d.files["persons"]),
            column="TABBLKST|TABBLKCOU|TABTRACTCE|TABBLK",
            value=str(lost.get_column("BLOCK")[0]),
        )
    hist = sp.csr_matrix(
        (
            p.get_column("COUNT").to_numpy().astype(np.int64),
            (p.get_column("_I").to_numpy().astype(np.int64), p.get_column("CELL").to_numpy()),
        ),
        shape=(grfc.height, CELLS),
    )
    units = np.zeros((grfc.height, 2), dtype=np.int64)
    keys = grfc.select(**geoid_exprs())
    frames = []
    for level in GEOLEVELS:
        for tab in tabulate(level, keys.get_column(level).to_list(), hist, units):
            frames += [table_frame(tab, t) for t in TABLE_NAMES]
    return pl.concat(frames)


def _release_tables(release: Path) -> pl.DataFrame:
    from privtab.topdown.document import read_document

    read_document(release)
    frames = []
    for t in TABLE_NAMES:
        path = release / "pl94" / f"{t}.parquet"
        if not path.is_file():
            raise InputError("missing: a TopDown release holds pl94/P1 … P5", file=str(path))
        frames.append(pl.read_parquet(path, columns=["GEOID", "GEOLEVEL", "CELL", "COUNT"]))
    return pl.concat(frames)


def _joined(published: pl.DataFrame, truth: pl.DataFrame, release: Path) -> pl.DataFrame:
    """Published and true counts of every published cell (``PUBLISHED``, ``TRUE``),
    ``TABLE``, and the geography's true total ``SIZE``."""
    j = published.rename({"COUNT": "PUBLISHED"}).join(
        truth.rename({"COUNT": "TRUE"}), on=KEYS, how="left"
    )
    missing = j.filter(pl.col("TRUE").is_null())
    if missing.height:
        row = missing.row(0, named=True)
        raise InputError(
            f"{missing.height} published cells have no geography in the truth's GRF-C: the "
            "truth is not the data the release was made from",
            file=str(release / "pl94"),
            column="GEOID",
            value=f"{row['GEOLEVEL']} {row['GEOID']}",
        )
    size = j.filter(pl.col("CELL") == TOTAL).select(
        "GEOLEVEL", "GEOID", pl.col("TRUE").alias("SIZE")
    )
    return j.join(size, on=["GEOLEVEL", "GEOID"], how="left").with_columns(
        pl.concat_str(pl.lit("P"), pl.col("CELL").str.slice(3, 1)).alias("TABLE"),
        (pl.col("PUBLISHED") - pl.col("TRUE")).cast(pl.Float64).alias("ERROR"),
    )


# --------------------------------------------------------------------------- summaries
def _metrics(error: pl.Expr) -> list[pl.Expr]:
    return [
        error.abs().mean().alias("MAE"),
        (error**2).mean().sqrt().alias("RMSE"),
        error.mean().alias("ME"),
    ]


def error_summary(joined: pl.DataFrame) -> pl.DataFrame:
    """``GEOLEVEL|TABLE|SIZE_BIN|GEOGRAPHIES|CELLS|MAE|RMSE|ME`` (module docstring), by
    geolevel in publication order, table (``TOTAL``, ``P1`` … ``P5``), bin, and an ``all``
    bin per geolevel and table."""
    with_total = pl.concat(
        [
            joined.filter(pl.col("CELL") == TOTAL).with_columns(pl.lit("TOTAL").alias("TABLE")),
            joined,
        ]
    )
    aggs = [pl.col("GEOID").n_unique().alias("GEOGRAPHIES"), pl.len().alias("CELLS")]
    aggs += _metrics(pl.col("ERROR"))
    binned = with_total.with_columns(size_bin(pl.col("SIZE")).alias("SIZE_BIN"))
    by_bin = binned.group_by("GEOLEVEL", "TABLE", "SIZE_BIN").agg(aggs)
    every = (
        binned.group_by("GEOLEVEL", "TABLE").agg(aggs).with_columns(pl.lit("all").alias("SIZE_BIN"))
    )
    out = pl.concat([by_bin, every.select(by_bin.columns)])
    order = {
        "GEOLEVEL": list(GEOLEVELS),
        "TABLE": ["TOTAL", *TABLE_NAMES],
        "SIZE_BIN": [_bin_label(lo, hi) for lo, hi in zip(SIZE_BINS, [*SIZE_BINS[1:], None],
                                                           strict=True)] + ["all"],
    }  # fmt: skip
    ranks = [pl.col(c).replace_strict(v, list(range(len(v)))) for c, v in order.items()]
    return out.sort(ranks).with_columns(pl.col("GEOGRAPHIES", "CELLS").cast(pl.Int64))


def reliability(joined: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, int | None]]:
    """The reliability criterion (module docstring): ``GEOLEVEL|BIN|GEOGRAPHIES|PASS_SHARE``
    by 50-person bins up to 1,000 (then ``1,000+``), and per geolevel the threshold (the
    lower edge of the first bin from which every non-empty bin passes; ``None``: none)."""
    cells = (*GROUP_CELLS, TOTAL)
    sub = joined.filter(pl.col("GEOLEVEL").is_in(RELIABILITY_LEVELS) & pl.col("CELL").is_in(cells))
    if sub.filter((pl.col("CELL") == TOTAL) & (pl.col("TRUE") > 0)).is_empty():
        empty = pl.DataFrame(
            schema={"GEOLEVEL": pl.String, "BIN": pl.String, "GEOGRAPHIES": pl.UInt32,
                    "PASS_SHARE": pl.Float64}
        )  # fmt: skip
        return empty, dict.fromkeys(RELIABILITY_LEVELS)
    wide_t = sub.pivot("CELL", index=["GEOLEVEL", "GEOID"], values="TRUE")
    wide_p = sub.pivot("CELL", index=["GEOLEVEL", "GEOID"], values="PUBLISHED")
    w = wide_t.join(wide_p, on=["GEOLEVEL", "GEOID"], suffix="_P").filter(pl.col(TOTAL) > 0)
    t = w.select(GROUP_CELLS).to_numpy().astype(np.float64)
    p = w.select([f"{c}_P" for c in GROUP_CELLS]).to_numpy().astype(np.float64)
    tt = w.get_column(TOTAL).to_numpy().astype(np.float64)
    pt = w.get_column(f"{TOTAL}_P").to_numpy().astype(np.float64)
    top = np.argmax(t, axis=1)
    rows = np.arange(t.shape[0])
    true_share = 100 * t[rows, top] / tt
    pub_share = np.divide(100 * p[rows, top], pt, out=np.zeros_like(pt), where=pt > 0)
    ok = np.abs(pub_share - true_share) <= RELIABILITY_POINTS
    lo = np.minimum(tt // RELIABILITY_BIN * RELIABILITY_BIN, RELIABILITY_TOP).astype(np.int64)
    frame = pl.DataFrame({"GEOLEVEL": w.get_column("GEOLEVEL"), "LO": lo, "OK": ok})
    table = (
        frame.group_by("GEOLEVEL", "LO")
        .agg(pl.len().alias("GEOGRAPHIES"), pl.col("OK").mean().alias("PASS_SHARE"))
        .sort(pl.col("GEOLEVEL").replace_strict(list(RELIABILITY_LEVELS), [0, 1]), "LO")
    )
    table = table.with_columns(
        pl.when(pl.col("LO") >= RELIABILITY_TOP)
        .then(pl.format("{}+", pl.col("LO")))
        .otherwise(pl.format("{}-{}", pl.col("LO"), pl.col("LO") + RELIABILITY_BIN - 1))
        .alias("BIN")
    )
    thresholds: dict[str, int | None] = {}
    for level in RELIABILITY_LEVELS:
        sub_t = table.filter(pl.col("GEOLEVEL") == level)
        los = sub_t.get_column("LO").to_list()
        passes = (sub_t.get_column("PASS_SHARE") >= RELIABILITY_SHARE).to_list()
        thresholds[level] = None
        for i in range(len(los) - 1, -1, -1):
            if not passes[i]:
                break
            thresholds[level] = int(los[i])
    return table.select("GEOLEVEL", "BIN", "GEOGRAPHIES", "PASS_SHARE"), thresholds


# ------------------------------------------------------------------ the noisy measurements
def _query_cells(matrix: NDArray[np.float64]) -> list[int] | None:
    """The P1–P5 cell (index) equal to each row of a measured query, or None."""
    rows = pl94_person_cells().rows()
    lookup = {r.tobytes(): i for i, r in enumerate(np.ascontiguousarray(rows))}
    out = []
    for r in np.ascontiguousarray(matrix.astype(np.float64)):
        i = lookup.get(r.tobytes())
        if i is None:
            return None
        out.append(i)
    return out


def _block_cells(tables: pl.DataFrame, blocks: Sequence[str]) -> NDArray[np.float64]:
    """(blocks, 298) counts of ``tables``' BLOCK rows in the order ``blocks`` (0: absent)."""
    names = pl94_person_cells().names
    wide = (
        tables.filter(pl.col("GEOLEVEL") == "BLOCK")
        .pivot("CELL", index="GEOID", values="COUNT")
        .select("GEOID", *names)
    )
    order = pl.DataFrame({"GEOID": list(blocks)})
    return (
        order.join(wide, on="GEOID", how="left")
        .select(names)
        .fill_null(0)
        .to_numpy()
        .astype(np.float64)
    )


def measurement_errors(
    release: Path, published: pl.DataFrame, truth: pl.DataFrame
) -> pl.DataFrame | None:
    """``RUN|SPINE_LEVEL|QUERY|GEOUNITS|NOISY_MAE|NOISY_RMSE|STATED_RMSE|TOPDOWN_MAE|
    TOPDOWN_RMSE|TOPDOWN_ME`` per persons run, spine level and measured query made of
    P1–P5 cells (module docstring); None when the release has no noisy measurements."""
    from privtab.topdown.gls_release import persons_runs
    from privtab.topdown.nmf import read_nmf
    from privtab.topdown.nmf_structure import read_structure

    try:
        runs = persons_runs(release)
    except InputError:
        return None
    rows: list[dict[str, Any]] = []
    for folder in runs:
        nmf, st = read_nmf(folder), read_structure(folder)
        h = st.spine.hierarchy
        blocks = st.spine.blocks.get_column("BLOCK").to_list()
        true_b, pub_b = _block_cells(truth, blocks), _block_cells(published, blocks)
        sch = nmf.strategy.schema
        for k, level in enumerate(h.levels):
            starts = h.leaf_starts(k)
            true_g, pub_g = np.add.reduceat(true_b, starts), np.add.reduceat(pub_b, starts)
            index = {g: i for i, g in enumerate(h.ids(k))}
            at = nmf.table.filter(pl.col("geolevel") == level)
            for (q,), sub in at.group_by("query", maintain_order=True):
                cells = _query_cells(np.asarray(sch.query(str(q)).matrix().toarray()))
                if cells is None:
                    continue
                units = np.array([index[g] for g in sub.get_column("geocode").to_list()])
                noisy = np.asarray(sub.get_column("value").to_list(), dtype=np.float64)
                var = np.array([_variance(v) for v in sub.get_column("variance").to_list()])
                e_noisy = noisy - true_g[units][:, cells]
                e_td = pub_g[units][:, cells] - true_g[units][:, cells]
                rows.append({
                    "RUN": folder.name, "SPINE_LEVEL": level, "QUERY": str(q),
                    "GEOUNITS": int(units.size),
                    "NOISY_MAE": float(np.abs(e_noisy).mean()),
                    "NOISY_RMSE": float(np.sqrt((e_noisy**2).mean())),
                    "STATED_RMSE": float(np.sqrt(var.mean())),
                    "TOPDOWN_MAE": float(np.abs(e_td).mean()),
                    "TOPDOWN_RMSE": float(np.sqrt((e_td**2).mean())),
                    "TOPDOWN_ME": float(e_td.mean()),
                })  # fmt: skip
    return pl.DataFrame(rows) if rows else None


def _variance(sigma2: str) -> float:
    from fractions import Fraction

    from privtab.topdown.gls import noise_variance

    return float(noise_variance(Fraction(sigma2)))


# ------------------------------------------------------------------------ the whole
@dataclass(frozen=True)
class Accuracy:
    """:func:`accuracy`'s result: the error summary, the reliability table and
    thresholds, the noisy measurements' errors (None without ``nmf/``)."""

    release: Path
    truth: Path
    private: bool
    errors: pl.DataFrame
    reliability: pl.DataFrame
    thresholds: dict[str, int | None]
    measurements: pl.DataFrame | None

    def tables(self) -> list[Table]:
        """The summary as text tables: total population and P1/P2 cells by geolevel and size
        bin, the reliability bins, the noisy measurements beside TopDown."""
        wide = self.errors.pivot("TABLE", index=["GEOLEVEL", "SIZE_BIN"], values=["MAE", "ME"])
        n = self.errors.filter(pl.col("TABLE") == "TOTAL").select(
            "GEOLEVEL", "SIZE_BIN", "GEOGRAPHIES"
        )
        wide = n.join(wide, on=["GEOLEVEL", "SIZE_BIN"], how="left", maintain_order="left")

        def f(x: float | None, digits: int = 2) -> str:
            return "" if x is None else f"{x:,.{digits}f}"

        rows = tuple(
            (
                r["GEOLEVEL"],
                r["SIZE_BIN"],
                f"{r['GEOGRAPHIES']:,}",
                f(r["MAE_TOTAL"]),
                f(r["ME_TOTAL"]),
                f(r["MAE_P1"]),
                f(r["MAE_P2"]),
            )
            for r in wide.iter_rows(named=True)
        )
        out = [
            Table(
                "Mean absolute error (ME: mean error) by geolevel and true population size",
                (
                    "geolevel",
                    "persons",
                    "geographies",
                    "total MAE",
                    "total ME",
                    "P1 cells MAE",
                    "P2 cells MAE",
                ),
                rows,
                left=2,
            )
        ]
        rel = tuple(
            (r["GEOLEVEL"], r["BIN"], f"{r['GEOGRAPHIES']:,}", f"{100 * r['PASS_SHARE']:.1f}")
            for r in self.reliability.iter_rows(named=True)
        )
        notes = tuple(
            f"{lv}: reliable from {'—' if t is None else f'{t:,}'} persons"
            for lv, t in self.thresholds.items()
        )
        out.append(
            Table(
                f"Largest group's share within {RELIABILITY_POINTS:g} points of the truth (%)",
                ("geolevel", "persons", "geographies", "% within"),
                rel,
                notes,
                left=2,
            )
        )
        if self.measurements is not None:
            m = tuple(
                (
                    r["RUN"],
                    r["SPINE_LEVEL"],
                    r["QUERY"],
                    f"{r['GEOUNITS']:,}",
                    f(r["NOISY_MAE"]),
                    f(r["STATED_RMSE"]),
                    f(r["NOISY_RMSE"]),
                    f(r["TOPDOWN_MAE"]),
                    f(r["TOPDOWN_RMSE"]),
                )
                for r in self.measurements.iter_rows(named=True)
            )
            out.append(
                Table(
                    "Noisy measurements and TopDown on the spine's geounits (per cell)",
                    (
                        "run",
                        "spine level",
                        "query",
                        "geounits",
                        "noisy MAE",
                        "noise RMSE (law)",
                        "noisy RMSE",
                        "TopDown MAE",
                        "TopDown RMSE",
                    ),
                    m,
                    left=3,
                )
            )
        return out

    def html(self) -> str:
        """A standalone HTML report of :meth:`tables` (privtab's report scaffolding). It
        shows errors against the truth: never part of a release folder."""
        import html

        from privtab.report import page, table_html

        sections = [
            "<p>Every published P1–P5 cell of the release compared with the same cell "
            "tabulated from the data it was made from (errors = published − true). Size "
            "bins are by the geography's true total population. The Census's reliability "
            "criterion (U.S. Census Bureau working paper SSS2021-02, 2021): a size bin is "
            "reliable when ≥ 95 % of its geographies have their largest group's share "
            "within 5 points of the truth.</p>"
        ]
        for t in self.tables():
            sections.append(f"<h2>{html.escape(t.title)}</h2>")
            sections.append(table_html(t.columns, t.rows))
            sections += [f"<p>{html.escape(n)}</p>" for n in t.notes]
        return page(
            "TopDown release: accuracy against the truth",
            f"{self.release} against {self.truth}",
            sections,
            [],
            banner="Compares with the true tables: for synthetic or public data only.",
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready summary (every table as a list of rows)."""
        return {
            "release": str(self.release),
            "truth": str(self.truth),
            "release_private": self.private,
            "note": "compares with the truth: for synthetic or public data only",
            "errors": self.errors.to_dicts(),
            "reliability": {
                "criterion": f"largest P2 group's share within {RELIABILITY_POINTS:g} points "
                f"of the truth in ≥ {RELIABILITY_SHARE:.0%} of a size bin's geographies",
                "bins": self.reliability.to_dicts(),
                "threshold": self.thresholds,
            },
            "measurements": None if self.measurements is None else self.measurements.to_dicts(),
        }


def accuracy(
    release: str | Path, truth: str | Path, *, say: Callable[[str], None] | None = None
) -> Accuracy:
    """The accuracy of the TopDown release ``release`` against the data folder ``truth``
    it was made from (module docstring)."""
    tell = say or (lambda _m: None)
    rel = Path(release)
    published = _release_tables(rel)
    tell("tabulating the truth")
    true = truth_tables(truth, say=say)
    tell("comparing")
    joined = _joined(published, true, rel)
    table, thresholds = reliability(joined)
    private = json.loads((rel / "release.json").read_text(encoding="utf-8")).get("private")
    tell("the noisy measurements")
    return Accuracy(
        rel,
        Path(truth),
        private is not False,
        error_summary(joined),
        table,
        thresholds,
        measurement_errors(rel, published, true),
    )
