"""``privtab analyze ... --release``: analyses of a whole release, written as a new folder.

Each function reads nothing but the release's noisy tables and its ``release.json``
(:func:`privtab.analysis.safetab.load_release`) and returns the analysed tables with a
JSON-ready summary. :func:`write_derived` writes them as Parquet into a new folder that
carries its own ``release.json``: the source release's document (its plan, guarantee and
privacy status — a test release stays marked **not private**, with the ``NOT_PRIVATE``
file and Parquet metadata of :mod:`privtab.release.marking`) plus ``derived_from`` (the
source folder, the command) and the folder's own ``outputs``. Post-processing of published
values: no privacy cost.

The stage-1 thresholds θ of :func:`combine_release` are the release's own, per level
(``release.json``): an explicit ``thresholds`` that is not the release's is refused
(:class:`~privtab.errors.UsageError` naming both), so the selection diagnostics are never
computed against the wrong θ.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privtab.analysis.safetab import _pct
from privtab.errors import UsageError

if TYPE_CHECKING:
    import polars as pl

    from privtab.analysis.safetab import SafeTabRelease

__all__ = [
    "analyze_release",
    "combine_release",
    "intervals_release",
    "postprocess_release",
    "release_thresholds",
    "write_derived",
]

LOG = logging.getLogger("privtab.analysis")
_LEVEL = re.compile(r"^\((.+), (\d+)\)$")


def intervals_release(rel: SafeTabRelease, level: float) -> dict[str, pl.DataFrame]:
    """T1 (with its stage-1 totals) and T2 with exact interval columns at ``level``."""
    from privtab.analysis.safetab import add_intervals

    LOG.info("exact intervals of T1's %s counts ...", f"{rel.t1.height:,}")
    t1 = add_intervals(rel.t1, level)
    LOG.info("exact intervals of T1's stage-1 totals ...")
    t1 = add_intervals(
        t1,
        level,
        count_col="STAGE1_COUNT",
        scale_col="STAGE1_NOISE_SCALE",
        variance_col="STAGE1_VARIANCE",
        prefix="STAGE1_",
    )
    LOG.info("exact intervals of T2's %s cells ...", f"{rel.t2.height:,}")
    return {"t1": t1, "t2": add_intervals(rel.t2, level)}


def release_thresholds(rel: SafeTabRelease) -> dict[str, tuple[int, ...]]:
    """``"US (COUNTY, 1)"`` → the level's stage-1 thresholds θ, from ``release.json``."""
    return {} if rel.document is None else rel.document.thresholds()


def _row_thresholds(rel: SafeTabRelease) -> pl.DataFrame | None:
    """``REGION_TYPE, ITERATION_CODE`` → the thresholds of the group's level (columns
    ``TH0..``), from ``release.json`` and the public iteration levels of the reference
    files the release names; None when the rows cannot be placed in their levels."""
    import polars as pl

    from privtab.tabulate.report_users import release_reference

    th = release_thresholds(rel)
    sets = set(th.values())
    if len(sets) == 1:
        (one,) = sets
        return pl.DataFrame({f"TH{i}": [float(t)] for i, t in enumerate(one)})
    ref = release_reference(rel.metadata) if th else None
    if ref is None:
        return None
    rows = []
    for key, values in th.items():
        m = _LEVEL.match(key.split(" ", 1)[1])
        if m is None:
            return None
        codes = [c for c, it in ref.iterations.items() if it.level == int(m.group(2))]
        rows += [(m.group(1), c, *map(float, values)) for c in codes]
    names = ["REGION_TYPE", "ITERATION_CODE", *(f"TH{i}" for i in range(len(rows[0]) - 2))]
    return pl.DataFrame(rows, schema=names, orient="row").unique(names[:2])


def combine_release(
    rel: SafeTabRelease,
    *,
    level: float | None = None,
    thresholds: Sequence[float] | None = None,
    min_threshold_sd: float | None = None,
) -> pl.DataFrame:
    """:func:`~privtab.analysis.safetab.combine_totals` with the release's own thresholds.

    ``thresholds`` may be given only for a release whose ``release.json`` has none, or
    equal to the thresholds of every level; otherwise :class:`UsageError` names both."""
    from privtab.analysis.safetab import combine_totals

    own = release_thresholds(rel)
    if thresholds is not None and own:
        given = tuple(float(t) for t in thresholds)
        if any(given != tuple(map(float, v)) for v in own.values()):
            theirs = "; ".join(f"{k}: {','.join(map(str, v))}" for k, v in own.items())
            raise UsageError(
                f"--thresholds {','.join(f'{t:g}' for t in given)} are not the release's "
                f"thresholds ({theirs})",
                hint="leave out --thresholds: the release's own are used",
            )
    table: list[float] | pl.DataFrame | None = list(thresholds) if thresholds else None
    if table is None and own:
        table = _row_thresholds(rel)
        if table is None:
            LOG.warning(
                "cannot place T1's groups in their levels (the release's reference files "
                "were not found): no threshold diagnostics"
            )
    return combine_totals(rel.t1, level=level, thresholds=table, min_threshold_sd=min_threshold_sd)


def postprocess_release(
    rel: SafeTabRelease, *, nonnegative: bool = True, round_: bool = False
) -> pl.DataFrame:
    """T2 with ``FITTED_COUNT`` consistent with the stage-1 totals (optionally rounded)."""
    import polars as pl

    from privtab.analysis.safetab import consistent_t2

    t2 = consistent_t2(rel.t1, rel.t2, nonnegative=nonnegative)
    if round_:
        t2 = t2.with_columns(pl.col("FITTED_COUNT").round().cast(pl.Int64))
    return t2


def _parquet(df: pl.DataFrame, metadata: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    df.write_parquet(buf, metadata=metadata)
    return buf.getvalue()


def write_derived(
    out: str | Path,
    tables: Mapping[str, pl.DataFrame],
    rel: SafeTabRelease,
    command: str,
    *,
    overwrite: bool = False,
) -> list[str]:
    """Write ``tables`` as ``NAME.parquet`` into the new folder ``out`` (atomically, never
    over a folder privtab did not write, never inside the source release; files 0644 like
    every output) with a ``release.json`` pointing to the source and keeping its privacy
    status. Returns the paths written."""
    from dataclasses import replace

    from privtab.atomic import atomic_directory, atomic_write
    from privtab.data.inputs import sha256_file
    from privtab.release.marking import parquet_metadata, write_not_private

    assert rel.path is not None
    stated = rel.private if rel.document is not None else rel.metadata.get("private")
    private = stated is not False
    target = Path(out)
    with atomic_directory(target, kind="analysis", overwrite=overwrite, protect=[rel.path]) as tmp:
        for name, df in tables.items():
            atomic_write(tmp / f"{name}.parquet", _parquet(df, parquet_metadata(private)))
        if not private:
            write_not_private(tmp, f"derived from the test release {rel.path}")
        if rel.document is not None:
            files = {p.name: {"sha256": sha256_file(p)} for p in sorted(tmp.glob("*.parquet"))}
            derived = {"release": str(rel.path.resolve()), "command": command}
            extra = {**rel.document.extra, "derived_from": derived, "outputs": {"files": files}}
            replace(rel.document, extra=extra).write(tmp)
        elif rel.metadata:  # a document privtab.release does not type (a derived GLS folder)
            import json

            files = {p.name: {"sha256": sha256_file(p)} for p in sorted(tmp.glob("*.parquet"))}
            origin = {"release": str(rel.path.resolve()), "kind": str(rel.metadata.get("kind")),
                      "command": command}  # fmt: skip
            doc = {**rel.metadata, "kind": "privtab.analysis", "derived_from": origin,
                   "outputs": {"files": files}}  # fmt: skip
            atomic_write(tmp / "release.json", json.dumps(doc, indent=2, default=str) + "\n")
    return [str(target / f"{name}.parquet") for name in tables]


def load_checked(path: str | Path) -> SafeTabRelease:
    """:func:`~privtab.analysis.safetab.load_release`, logging a warning for a release that
    is not private or clamped counts at zero."""
    from privtab.analysis.safetab import load_release

    rel = load_release(path)
    _warn_not_private(rel.private)
    if rel.clamped:
        LOG.warning(
            "this release clamped counts at zero: intervals stay valid (true counts are "
            "≥ 0, so clamping only widens coverage) but variances and combinations are biased "
            "near zero"
        )
    return rel


def _release_kind(path: str | Path) -> str:
    """The ``kind`` of the folder's ``release.json`` (SafeTab-P's when it has none, or a
    SafeTab-H release of the earlier layout without one: a ``t3/`` folder)."""
    import json

    from privtab.release.document import KIND, KIND_H

    doc = Path(path) / "release.json"
    if not doc.is_file():
        return KIND_H if (Path(path) / "t3").is_dir() else KIND
    try:
        kind = json.loads(doc.read_text(encoding="utf-8")).get("kind")
    except (ValueError, AttributeError):
        return KIND
    return kind if isinstance(kind, str) else KIND


def _warn_not_private(private: bool | None) -> None:
    if private is False:
        LOG.warning(
            "THIS RELEASE IS NOT PRIVATE (seeded or noise-off test run): its counts carry no "
            "protection; every output derived from it is marked not private"
        )


def _analyze_h(
    command: str, path: Path, *, out: str | Path | None, overwrite: bool, **options: Any
) -> dict[str, Any]:
    """``privtab analyze ci --release`` of a SafeTab-H release: exact intervals of every
    published cell of every table (a marginal of ``k`` noisy cells: the ``k``-fold
    convolution; variance ``k σ²``)."""
    from privtab.analysis.safetab import SafeTabRelease, add_intervals
    from privtab.release import read_release_document
    from privtab.safetab_h.tables import read_release_tables

    if command != "ci":
        raise UsageError(
            f"analyze {command} is for SafeTab-P releases (stage-1 totals, T2 cells); a "
            "SafeTab-H release supports analyze ci"
        )
    doc = read_release_document(path) if (path / "release.json").exists() else None
    _warn_not_private(None if doc is None else doc.private)
    tables = {n: add_intervals(df, options["level"]) for n, df in read_release_tables(path).items()}
    summary: dict[str, Any] = {"release": str(path)}
    for name, df in tables.items():
        summary[f"{name}_rows"] = df.height
    if out is not None:
        import polars as pl

        meta = {} if doc is None else doc.to_json()
        rel = SafeTabRelease(pl.DataFrame(), pl.DataFrame(), meta, path, doc)
        summary["written"] = write_derived(out, tables, rel, "analyze ci", overwrite=overwrite)
    else:
        summary["written"] = []
    return summary


def _analyze_gls(
    command: str, path: Path, *, out: str | Path | None, overwrite: bool, **options: Any
) -> dict[str, Any]:
    """``privtab analyze ci --release`` of a derived GLS folder (``privtab topdown gls``):
    per level, ``MOE{L}``, ``LOWER{L}``, ``UPPER{L}`` = ``ESTIMATE ∓ z_{(1+L)/2}·STD_DEV``
    (the normal approximation of the linear estimator's law; its coverage over 10⁴ seeded
    releases is measured by ``tests/topdown/test_gls_coverage.py``, docs/topdown.md). Cells
    the invariants determine (``STD_DEV`` 0) get the degenerate interval."""
    import polars as pl

    from privtab.analysis.safetab import SafeTabRelease
    from privtab.topdown.gls import normal_moe
    from privtab.topdown.gls_output import read_gls_folder

    if command != "ci":
        raise UsageError(
            f"analyze {command} is for SafeTab-P releases; a derived GLS folder supports analyze ci"
        )
    level = float(options["level"])
    doc, frames = read_gls_folder(path)
    _warn_not_private(doc.get("private") is not False)
    pct = _pct(level)
    tables: dict[str, pl.DataFrame] = {}
    for name, df in frames.items():
        moe = normal_moe(df.get_column("STD_DEV").to_numpy(), level)
        est = df.get_column("ESTIMATE")
        tables[f"gls-{name}"] = df.with_columns(
            pl.Series(f"MOE{pct}", moe),
            (est - moe).alias(f"LOWER{pct}"),
            (est + moe).alias(f"UPPER{pct}"),
        )
    summary: dict[str, Any] = {
        "release": str(path),
        "kind": doc.get("kind"),
        "level": level,
        "method": "ESTIMATE ± z·STD_DEV (normal approximation of the GLS estimator)",
        "z": float(normal_moe(1.0, level)),
    }
    for name, df in tables.items():
        summary[f"{name}_rows"] = df.height
    if out is not None:
        rel = SafeTabRelease(pl.DataFrame(), pl.DataFrame(), doc, path, None)
        summary["written"] = write_derived(out, tables, rel, "analyze ci", overwrite=overwrite)
    else:
        summary["written"] = []
    return summary


def _refuse_topdown(command: str, path: Path, **_: Any) -> dict[str, Any]:
    raise UsageError(
        f"{path} is a TopDown release: its published counts were post-processed (non-negative, "
        "integer, consistent) and carry no error law to build intervals from",
        hint=f"run privtab topdown gls --release {path} --out G (a release run with --nmf) "
        f"and then privtab analyze {command} --release G",
    )


def analyze_release(
    command: str,
    path: str | Path,
    *,
    out: str | Path | None = None,
    overwrite: bool = False,
    **options: Any,
) -> dict[str, Any]:
    """``privtab analyze ci|combine|postprocess --release PATH``: the analysed tables
    (written to ``out`` by :func:`write_derived`) and a JSON-ready summary of them."""
    from privtab.release.document import KIND_H
    from privtab.topdown.document import KIND as KIND_TOPDOWN
    from privtab.topdown.gls_output import DOCUMENT_KIND as KIND_GLS

    other = {KIND_H: _analyze_h, KIND_GLS: _analyze_gls, KIND_TOPDOWN: _refuse_topdown}
    by_kind = other.get(_release_kind(path))
    if by_kind is not None:
        return by_kind(command, Path(path), out=out, overwrite=overwrite, **options)
    rel = load_checked(path)
    if command == "ci":
        tables = intervals_release(rel, options["level"])
    elif command == "combine":
        tables = {"t1": combine_release(rel, **options)}
    else:
        tables = {"t2": postprocess_release(rel, **options)}
    source = {"t1": rel.t1, "t2": rel.t2}
    summary: dict[str, Any] = {"release": str(path)}
    for name, df in tables.items():
        summary[f"{name}_rows"] = df.height
        summary[f"{name}_columns_added"] = [c for c in df.columns if c not in source[name]]
    if command == "combine":
        t1 = tables["t1"].filter(tables["t1"]["STAGE1_WEIGHT"] > 0)
        summary["groups_combined"] = t1.height
        summary["mean_variance_ratio"] = (t1["COMBINED_VARIANCE"] / t1["VARIANCE"]).mean()
        summary["thresholds"] = {k: list(v) for k, v in release_thresholds(rel).items()}
    if command == "postprocess":
        summary["negative_before"] = int((rel.t2["COUNT"] < 0).sum())
        summary["negative_after"] = int((tables["t2"]["FITTED_COUNT"] < 0).sum())
        summary["privacy_cost"] = 0
    summary["written"] = (
        []
        if out is None
        else write_derived(out, tables, rel, f"analyze {command}", overwrite=overwrite)
    )
    return summary
