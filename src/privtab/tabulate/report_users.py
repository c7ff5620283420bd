"""The "for data users" section of ``report.html``: how to read T1/T2, MOE95, intervals.

The example rows are rows of the release's own T1 and T2 files (noisy counts: public, no
privacy cost) at the top geography of the first run, with their iteration names from the
reference files the release was made with — found next to the config the release names,
or in privtab's packaged 2020 production files, and used only when their SHA-256 match the
ones ``release.json`` lists (otherwise the section shows codes without names).
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from privtab.report import table_html
from privtab.tabulate.report_text import GEOGRAPHIES, STAT_LEVELS

if TYPE_CHECKING:
    from privtab.data import ReferenceData

__all__ = ["data_users_section", "iteration_names", "release_reference"]

EXAMPLE_T1_ROWS = 4
SEX = {"1": "male", "2": "female"}


def iteration_names(release: Mapping[str, Any]) -> dict[str, str] | None:
    """Iteration code → name from the reference files this release used (None if they
    cannot be found with the SHA-256 that ``release.json`` lists)."""
    ref = release_reference(release)
    return None if ref is None else {code: it.name for code, it in ref.iterations.items()}


def release_reference(release: Mapping[str, Any]) -> ReferenceData | None:
    """The public reference files (iterations) this release used: next to its config, or
    the packaged production ones, when their SHA-256 match ``release.json``'s
    ``public_inputs`` (None otherwise)."""
    from privtab.data import production_config_dir, read_reference
    from privtab.data.inputs import sha256_file
    from privtab.data.iterations import REFERENCE_FILES

    listed = release.get("public_inputs") or {}
    source = (release.get("config") or {}).get("source")
    candidates = [Path(str(source)).parent] if source else []
    candidates.append(production_config_dir())
    for folder in candidates:
        files = [folder / name for name in REFERENCE_FILES]
        if not all(f.is_file() for f in files):
            continue
        if all(sha256_file(f) == (listed.get(f.name) or {}).get("sha256") for f in files):
            try:
                return read_reference(folder)
            except Exception:  # any reading problem: show codes only
                continue
    return None


def _table(folder: Path, release: Mapping[str, Any], name: str) -> pl.LazyFrame | None:
    """A published table joined with its companion error table (lazily), or ``None``."""
    from privtab.tabulate.output import CENSUS_COLUMNS, ERROR_FILES, part_files

    files = (release.get("outputs") or {}).get("files") or {}
    companion = folder / ERROR_FILES[name]
    if ERROR_FILES[name] not in files or not companion.is_file():
        return None
    if (folder / name).is_dir():
        parts = part_files(folder, name)
        if not parts:
            return None
        census = pl.concat(
            [pl.scan_csv(p, separator="|", infer_schema=False) for p in parts]
        ).with_columns(pl.col("COUNT").cast(pl.Int64))
    elif (folder / f"{name}.parquet").is_file():
        census = pl.scan_parquet(folder / f"{name}.parquet")
    else:
        return None
    keys = [c for c in CENSUS_COLUMNS[name] if c != "COUNT"]
    # in the table's row order: the example rows are shown in the order they were written
    return census.join(pl.scan_parquet(companion), on=keys, how="left", maintain_order="left")


def _examples(folder: Path, release: Mapping[str, Any]) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """Up to four T1 rows of the top geography (largest counts first) and the T2 cells of
    the first of them that has any."""
    t1, t2 = _table(folder, release, "t1"), _table(folder, release, "t2")
    if t1 is None or t2 is None:
        return None
    top = next(iter(release["runs"].values()))["plan"]["levels"][0]["geo"]
    cols = ["REGION_TYPE", "REGION_ID", "ITERATION_CODE", "COUNT", "MOE95", "STAT_LEVEL"]
    rows = (
        t1.filter(pl.col("REGION_TYPE") == top)
        .select(cols)
        .with_columns(pl.col(c).cast(pl.Int64) for c in ("COUNT", "MOE95", "STAT_LEVEL"))
        .collect()
    )
    if rows.height == 0:
        return None
    with_t2 = rows.filter(pl.col("STAT_LEVEL") >= 1).sort("COUNT", descending=True).head(1)
    shown = pl.concat([with_t2, rows.sort("COUNT", descending=True)]).unique(
        ["REGION_ID", "ITERATION_CODE"], keep="first", maintain_order=True
    )
    shown = shown.head(EXAMPLE_T1_ROWS)
    cells = pl.DataFrame()
    if with_t2.height:
        code, region = with_t2["ITERATION_CODE"][0], with_t2["REGION_ID"][0]
        cells = (
            t2.filter(
                (pl.col("REGION_TYPE") == top)
                & (pl.col("REGION_ID") == region)
                & (pl.col("ITERATION_CODE") == code)
            )
            .select("ITERATION_CODE", "SEX", "AGESTART", "AGEEND", "COUNT", "MOE95")
            .with_columns(pl.col(c).cast(pl.Int64) for c in ("COUNT", "MOE95"))
            .collect()
        )
    return shown, cells


def _name(code: str, names: Mapping[str, str] | None) -> str:
    return names.get(code, "(not in the reference files)") if names else "(name not available)"


def _example_tables(
    folder: Path, release: Mapping[str, Any], names: Mapping[str, str] | None
) -> str:
    ex = _examples(folder, release)
    if ex is None:
        return "<p>(The release's T1/T2 files were not found next to the report.)</p>"
    t1, cells = ex
    rows = [
        [
            f"{r['REGION_TYPE']} {r['REGION_ID']} ({GEOGRAPHIES.get(r['REGION_TYPE'], '')})",
            f"{r['ITERATION_CODE']} {_name(r['ITERATION_CODE'], names)}",
            f"{r['COUNT']:,}",
            f"{r['MOE95']:,}",
            f"{r['COUNT'] - r['MOE95']:,} to {r['COUNT'] + r['MOE95']:,}",
            STAT_LEVELS.get(str(r["STAT_LEVEL"]), str(r["STAT_LEVEL"])),
        ]
        for r in t1.iter_rows(named=True)
    ]
    out = "<h3>Example rows of T1</h3>" + table_html(
        ["region", "iteration (race or ethnicity group)", "COUNT", "MOE95", "95% interval", "T2"],
        rows,
    )
    if cells.height:
        code = cells["ITERATION_CODE"][0]
        out += (
            f"<h3>Its T2 cells: {html.escape(code)} {html.escape(_name(code, names))}</h3>"
            + _t2_table(cells)
        )
    return out


def _t2_table(cells: pl.DataFrame) -> str:
    """A group's T2 cells as one row per age group, COUNT (MOE95) per sex."""
    ages: dict[tuple[str, str], dict[str, str]] = {}
    for r in cells.iter_rows(named=True):
        key = (str(r["AGESTART"]), str(r["AGEEND"]))
        ages.setdefault(key, {})[str(r["SEX"])] = f"{r['COUNT']:,} ± {r['MOE95']:,}"
    sexes = sorted({str(s) for s in cells["SEX"].to_list()})
    rows = [
        ["all ages" if a == "*" else f"{a}–{b} years"] + [cols.get(x, "—") for x in sexes]
        for (a, b), cols in ages.items()
    ]
    head = ["AGESTART–AGEEND"] + [f"SEX {x} ({SEX.get(x, '?')}): COUNT ± MOE95" for x in sexes]
    return table_html(head, rows)


def _suppression_text(release: Mapping[str, Any]) -> str:
    """What zero suppression did to this release (from ``release.json``)."""
    post = ((release.get("postprocessing") or {}).get("zero_suppression")) or {}
    if not post.get("applied"):
        return (
            "<p>Every population group of the public domain is published, empty ones too: "
            "the list of groups is public, so a zero or small count says nothing by its "
            "presence (no zero suppression: the config has no "
            "<code>zero_suppression_chance</code>).</p>"
        )
    thresholds = sorted(
        {
            (lv["level"], lv["zero_suppression"]["threshold_stage2_total"])
            for run in (release.get("runs") or {}).values()
            for lv in run.get("levels", [])
            if (lv.get("zero_suppression") or {}).get("threshold_stage2_total") is not None
        }
    )
    listed = ", ".join(f"{html.escape(k)}: {t}" for k, t in thresholds) or "none"
    return (
        f"<p><strong>Zero suppression</strong> (as in the 2020 production code, chance "
        f"{post.get('chance')}): a T1 total of a group without T2 cells, at a geography "
        "below the state, is not published when its noisy count is at most the level's "
        f"threshold ({listed}); {post.get('suppressed_rows', 0):,} rows were left out. It "
        "is post-processing of the noisy counts: it costs no privacy and adds none. A "
        "missing row means the group's noisy count was small — a small group and an empty "
        "one look alike.</p>"
    )


def data_users_section(folder: Path, release: Mapping[str, Any]) -> str:
    """The whole "For data users" section (HTML)."""
    names = iteration_names(release)
    nonneg = (release.get("postprocessing") or {}).get("nonnegative")
    intro = (
        "<h2 id='data-users'>For data users</h2>"
        "<p><strong>T1</strong> (folder <code>t1/</code>: pipe-delimited part files with "
        "the Census columns <code>REGION_ID|REGION_TYPE|ITERATION_CODE|COUNT</code>) has one "
        "row per published population group: a geography (<code>REGION_TYPE</code> and "
        "<code>REGION_ID</code>, e.g. <code>STATE 10</code> is the state with FIPS code 10, "
        "<code>COUNTY</code> ids are 5-digit state + county codes, <code>USA 1</code> the "
        "nation) crossed with a race or ethnicity group, a <em>characteristic iteration</em> "
        "(<code>ITERATION_CODE</code>; names in the reference files "
        "<code>race-characteristic-iterations.txt</code> and "
        "<code>ethnicity-characteristic-iterations.txt</code>). <code>COUNT</code> is the "
        "number of persons in the group with noise added. <strong>T2</strong> (folder "
        "<code>t2/</code>) splits the groups whose first noisy count passed the level's "
        "thresholds into sex (<code>SEX</code> 1 male, 2 female) × age "
        "(<code>AGESTART</code>–<code>AGEEND</code>, in years) cells, plus one row per sex "
        "with <code>AGESTART = AGEEND = *</code> holding the sum of that sex's cells; a "
        "group's T1 count is then the sum of its T2 cells. The error of every row (noise "
        "law, <code>VARIANCE</code>, <code>MOE95</code>, <code>STAT_LEVEL</code>: which "
        "split a group received) is in <code>t1-error.parquet</code> and "
        "<code>t2-error.parquet</code>, keyed by the same columns.</p>"
        + _suppression_text(release)
        + "<p><strong>MOE95</strong> is the exact 95% margin of error of the noise: the "
        "published <code>COUNT</code> is within <code>MOE95</code> of the count before noise "
        "with probability at least 95%, so <code>COUNT ± MOE95</code> is a 95% confidence "
        "interval for it. It covers the privacy noise only (not, for example, errors in the "
        "census responses themselves)"
        + (
            ". Counts below zero were raised to zero (post-processing), which biases counts "
            "near zero upwards."
            if nonneg
            else "; counts can be negative where the true count is small: keep them as "
            "published when adding counts up, so that the noise averages out."
        )
        + "</p>"
    )
    intervals = (
        "<h3>Intervals at any level</h3>"
        "<pre>privtab analyze ci --release RELEASE_FOLDER --level 0.9 --out RELEASE_FOLDER-ci"
        "</pre><p>writes T1 and T2 again with interval columns for every row at the chosen "
        "confidence level, computed exactly from the noise distribution (not from a normal "
        "approximation). The noise of different groups is independent, so the noise "
        "variances (<code>VARIANCE</code>) of counts of different groups add up when the "
        "counts are added: COUNT₁ + COUNT₂ ± 1.96 √(VARIANCE₁ + VARIANCE₂) is an approximate "
        "95% interval for the sum. (A group's T1 count and its own T2 cells share their "
        "noise: do not add them.)</p>"
    )
    return intro + _example_tables(folder, release, names) + intervals
