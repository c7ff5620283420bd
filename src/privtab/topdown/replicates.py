"""Replicate error bars for a TopDown release (approximate Monte Carlo, AMC).

``privtab topdown replicates --release R --n K --out O`` estimates the error of every
published P1–P5 cell by the approximate Monte Carlo method of the Census Bureau (arXiv
2503.19714; ``uscensusbureau/AMC_Confidence_Intervals``): the **published** output is
taken as the truth, TopDown is run on it again ``K`` times — fresh noisy measurements
with the release's exact per-query budgets, then production's post-processing — and the
replicates' deviations from the published values stand in for the release's deviations
from the (unknown) truth:

- the input (:func:`published_data`): the block histograms of the release's MDF
  (``mdf/persons.parquet``; the housing units' occupancy from ``mdf/units.parquet``), and
  the release's public structure from its noisy measurement folders (``nmf/<SCOPE>-…``:
  every GRF-C block's tabulation columns and its invariant unit counts, the strategies
  with their exact per-query shares). A release made without ``--nmf`` is refused;
- each replicate is a TopDown run of that input (:func:`privtab.topdown.runs.prepare_run`
  and :func:`privtab.topdown.streaming.stream_release`, the code of ``privtab topdown
  run``: one way to measure and post-process), its budgets checked equal to those the
  release's ``release.json`` states (spine and every query's σ²), written to a scratch
  folder and read back as its P1–P5 tables; ``workers`` replicates run at once, each in
  its own process;
- per cell: ``PUBLISHED``, the replicates' mean error ``MEAN_ERROR`` (replicate −
  published), ``RMSE`` = √(mean of the squared errors), and the interval
  ``[LOWER, UPPER]`` at level ``L`` (default 90 %): the published value minus the
  ``(1+L)/2`` and ``(1−L)/2`` empirical quantiles of the errors (the basic bootstrap
  interval; lower end at least 0). With few replicates the quantiles are coarse: the
  document states ``K``.

The derived folder ``O`` (never inside the release; written atomically) holds, per
tabulation geolevel, ``replicates-<GEOLEVEL>.txt`` (pipe-delimited with a header,
``GEOID|CELL|PUBLISHED|MEAN_ERROR|RMSE|LOWER|UPPER``, 6 decimals) and
``replicates-<GEOLEVEL>.parquet`` (float64, privtab's privacy metadata), rows in the
release's order; ``release.json`` (the release's document, ``kind``
:data:`DOCUMENT_KIND`, ``derived_from``, ``replicates``: method, K, level, source, and
``outputs``) and ``NOT_PRIVATE`` when the release or the replicates are not private.

**Privacy.** The replicate noise is applied to the published output, never to confidential
data: every replicate is a function of the release (its MDF and its public structure) and
of fresh noise, so the folder is post-processing of the release and costs no privacy — no
ledger entry. The noise comes from the secure source by default; with a seed (tests and
examples) the folder is marked not private, like every seeded output, and so it is when the
release itself is not private.

Checked on synthetic truth (``tests/topdown/test_replicates.py``, slow): the replicate RMSE
of tract-level P1/P2 cells against the true RMSE of repeated real releases, by size bin
(``docs/topdown.md``).
"""

from __future__ import annotations

import io
import json
import multiprocessing
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import NDArray

from privtab._blas import limit_blas_threads
from privtab.errors import InputError, UsageError
from privtab.random import RandomSource, SeededSource
from privtab.topdown.folder import TopDownData
from privtab.topdown.histogram import SHAPE
from privtab.topdown.runs import SCOPES
from privtab.topdown.strategy import Strategy
from privtab.topdown.tables import TABLE_NAMES

__all__ = [
    "COLUMNS",
    "DOCUMENT_KIND",
    "FOLDER_KIND",
    "ReplicateInput",
    "published_data",
    "replicate_counts",
    "replicate_summary",
    "replicates",
]

#: The kind of folder a derived replicates folder is (:mod:`privtab.atomic`).
FOLDER_KIND = "topdown-replicates"
#: The ``kind`` of its ``release.json``.
DOCUMENT_KIND = "privtab.topdown.replicates"
#: The columns of every ``replicates-<GEOLEVEL>`` file.
COLUMNS: tuple[str, ...] = (
    "GEOID", "CELL", "PUBLISHED", "MEAN_ERROR", "RMSE", "LOWER", "UPPER",
)  # fmt: skip
KEYS = ["GEOLEVEL", "GEOID", "CELL"]
UNIT_GQ = tuple(f"GQ{t}" for t in range(1, 8))


@dataclass(frozen=True, eq=False)
class ReplicateInput:
    """What a replicate is run on (:func:`published_data`): the release's published block
    histograms and public unit invariants as a data folder's aggregate (``data``), the
    runs (``us``/``pr``) and their strategies, whether the spines use production's
    optimized block groups, and the release's own document."""

    release: Path
    data: TopDownData
    runs: tuple[str, ...]
    strategies: dict[str, dict[str, Strategy]]
    optimized_block_groups: bool
    document: dict[str, Any]


def _fail(path: Path, message: str, **kw: Any) -> InputError:
    return InputError(message, file=str(path), **kw)


def _nmf_folders(release: Path, document: Mapping[str, Any]) -> dict[str, dict[str, Path]]:
    runs = document.get("runs") or {}
    out: dict[str, dict[str, Path]] = {}
    for run, scope in SCOPES.items():
        if scope not in runs:
            continue
        folders = {h: release / "nmf" / f"{scope}-{h}" for h in ("persons", "units")}
        for folder in folders.values():
            if not (folder / "nmf.json").is_file():
                raise _fail(
                    folder,
                    "the release has no public structure for its replicates (noisy "
                    "measurement folder missing)",
                    hint="replicates need a release made with privtab topdown run --nmf",
                )
        out[run] = folders
    if not out:
        raise _fail(release / "release.json", "the release lists no run (US, PR)", column="runs")
    return out


def _block_histograms(release: Path) -> pl.DataFrame:
    """``BLOCK|CELL|COUNT`` of the MDF's persons (nonzero cells, sorted)."""
    path = release / "mdf" / "persons.parquet"
    if not path.is_file():
        raise _fail(path, "missing: a TopDown release holds mdf/persons.parquet")
    codes = ("GQTYPE_PL", "VOTING_AGE", "CENHISP", "CENRACE")
    lf = pl.scan_parquet(path).select(
        pl.concat_str("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK").alias("BLOCK"),
        *(pl.col(c).cast(pl.Int64) for c in codes),
    )
    va, hisp, race = SHAPE[1], SHAPE[2], SHAPE[3]
    cell = (
        ((pl.col("GQTYPE_PL") * va + pl.col("VOTING_AGE") - 1) * hisp + pl.col("CENHISP") - 1)
        * race
        + pl.col("CENRACE")
        - 1
    )
    return (
        lf.group_by("BLOCK", cell.alias("CELL"))
        .agg(pl.len().cast(pl.Int64).alias("COUNT"))
        .collect()
        .sort("BLOCK", "CELL")
    )


def _block_units(release: Path, counts: pl.DataFrame) -> pl.DataFrame:
    """``BLOCK|HU|GQ1…GQ7|OCCUPIED|VACANT`` of every block with a unit: the invariant
    counts (``counts``), the occupancy the release published (``mdf/units.parquet``)."""
    path = release / "mdf" / "units.parquet"
    if not path.is_file():
        raise _fail(path, "missing: a TopDown release holds mdf/units.parquet")
    hu = pl.col("RTYPE") == "2"
    status = (
        pl.scan_parquet(path)
        .with_columns(pl.concat_str("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK").alias("BLOCK"))
        .group_by("BLOCK")
        .agg(
            (hu & (pl.col("HH_STATUS") == "1")).sum().cast(pl.Int64).alias("OCCUPIED"),
            (hu & (pl.col("HH_STATUS") == "2")).sum().cast(pl.Int64).alias("VACANT"),
        )
        .collect()
    )
    units = counts.filter(pl.sum_horizontal("HU", *UNIT_GQ) > 0).join(
        status, on="BLOCK", how="left"
    )
    units = units.with_columns(pl.col("OCCUPIED", "VACANT").fill_null(0))
    bad = units.filter(pl.col("OCCUPIED") + pl.col("VACANT") != pl.col("HU"))
    if bad.height:
        raise _fail(
            path,
            "the published housing units differ from the invariant count of the block",
            column="TABBLKST|TABBLKCOU|TABTRACTCE|TABBLK",
            value=str(bad.get_column("BLOCK")[0]),
        )
    return units.sort("BLOCK")


def published_data(release: str | Path) -> ReplicateInput:
    """The input of the replicates of ``release`` (module docstring): public data only."""
    from privtab.topdown.document import read_document
    from privtab.topdown.nmf import read_nmf
    from privtab.topdown.nmf_structure import BLOCKS

    rel = Path(release)
    document = read_document(rel)
    folders = _nmf_folders(rel, document)
    facts = pl.concat([pl.read_parquet(f["persons"] / BLOCKS) for f in folders.values()]).sort(
        "BLOCK"
    )
    counts = facts.select("BLOCK", "HU", *UNIT_GQ)
    grfc = facts.drop("HU", *UNIT_GQ)
    files = {
        "grfc": folders[next(iter(folders))]["persons"] / BLOCKS,
        "persons": rel / "mdf" / "persons.parquet",
        "units": rel / "mdf" / "units.parquet",
    }
    data = TopDownData(rel, grfc, _block_units(rel, counts), _block_histograms(rel), files)
    strategies = {
        run: {h: read_nmf(f).strategy for h, f in pair.items()} for run, pair in folders.items()
    }
    first = document["runs"][SCOPES[next(iter(folders))]]["persons"]
    optimized = "optimized block groups" in str(first.get("spine", {}).get("description", ""))
    return ReplicateInput(rel, data, tuple(folders), strategies, optimized, document)


def _options(inp: ReplicateInput, source: RandomSource | None, noise: bool) -> Any:
    from privtab.topdown.run import TopDownOptions

    return TopDownOptions(
        runs=inp.runs,
        source=source,
        allow_insecure=source is not None or not noise,
        noise=noise,
        nmf=False,
        report=False,
        use_ledger=False,
        strategies=inp.strategies,
        optimized_block_groups=inp.optimized_block_groups,
        workers=1,
    )


def check_budgets(inp: ReplicateInput) -> None:
    """The replicates' runs measure with exactly the budgets ``release.json`` states (the
    spine's geounits and every query's σ², share and ρ); a difference is refused."""
    from privtab.topdown.runs import prepare_run

    for run in inp.runs:
        pair = prepare_run(
            inp.data,
            run,
            source=None,
            strategies=inp.strategies[run],
            optimized_block_groups=inp.optimized_block_groups,
        )
        stated = inp.document["runs"][pair.scope]
        for hist, r in (("persons", pair.persons), ("units", pair.units)):
            mine = json.loads(json.dumps(r.public(), default=str))
            for key in ("queries", "spine", "levels"):
                if mine.get(key) != stated[hist].get(key):
                    raise _fail(
                        inp.release / "release.json",
                        f"the {pair.scope} {hist} run's {key} differ from what a replicate "
                        "would measure with: the release and its nmf/ do not belong together",
                        column=f"runs.{pair.scope}.{hist}.{key}",
                    )


def _published_tables(release: Path) -> pl.DataFrame:
    frames = []
    for t in TABLE_NAMES:
        path = release / "pl94" / f"{t}.parquet"
        if not path.is_file():
            raise _fail(path, "missing: a TopDown release holds pl94/P1 … P5")
        frames.append(pl.read_parquet(path, columns=["GEOLEVEL", "GEOID", "CELL", "COUNT"]))
    return pl.concat(frames)


def replicate_counts(
    inp: ReplicateInput, source: RandomSource | None, *, noise: bool = True
) -> pl.DataFrame:
    """One replicate: TopDown run on the published input with fresh noise from
    ``source`` (``None``: the secure source), its P1–P5 tables
    ``GEOLEVEL|GEOID|CELL|COUNT`` (nothing kept on disk). ``noise=False`` (tests): the
    exact answers, which must give back the published tables."""
    import datetime as dt

    from privtab.random.sources import resolve_source
    from privtab.topdown.run import _Context
    from privtab.topdown.streaming import from_data, stream_release

    opts = _options(inp, source, noise)
    with tempfile.TemporaryDirectory(prefix="privtab-replicate-") as scratch:
        tmp = Path(scratch) / "replicate"
        tmp.mkdir()
        ctx = _Context(
            data_dir=inp.release,
            out=tmp,
            opts=opts,
            source=resolve_source(source),
            say=lambda _m: None,
            cancel=threading.Event(),
            started_utc=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        )
        sources = from_data(ctx, inp.data, tmp, "")
        stream_release(ctx, sources, tmp, {})
        return _published_tables(tmp)


@lru_cache(maxsize=2)
def _input(release: str) -> ReplicateInput:
    return published_data(release)


def _one(release: str, seed: str | None, k: int, order: pl.DataFrame) -> NDArray[np.int64]:
    """Replicate ``k`` (in a worker process): its counts in ``order``'s row order."""
    source = None if seed is None else SeededSource(f"{seed}/replicate/{k}")
    tables = replicate_counts(_input(release), source)
    joined = order.join(tables, on=KEYS, how="left", maintain_order="left")
    if joined.get_column("COUNT").null_count():
        raise AssertionError(f"replicate {k} lacks published cells")
    return joined.get_column("COUNT").to_numpy().astype(np.int64)


def _run_all(
    release: Path, n: int, workers: int, seed: str | None, order: pl.DataFrame,
    say: Callable[[str], None],
) -> Iterator[NDArray[np.int64]]:  # fmt: skip
    """The ``n`` replicates' counts, in replicate order (``workers`` processes)."""
    if workers == 1:
        for k in range(n):
            yield _one(str(release), seed, k, order)
            say(f"[{k + 1}/{n}] replicates")
        return
    ctx = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=limit_blas_threads) as pool:
        futures: list[Future[NDArray[np.int64]]] = [
            pool.submit(_one, str(release), seed, k, order) for k in range(n)
        ]
        try:
            for k, f in enumerate(futures):
                yield f.result()
                say(f"[{k + 1}/{n}] replicates")
        finally:
            for f in futures:
                f.cancel()


def replicate_summary(
    published: NDArray[np.int64], draws: NDArray[np.int64], level: float
) -> dict[str, NDArray[np.float64]]:
    """Per cell, from ``draws`` ``(K, cells)`` replicate counts around ``published``
    ``(cells,)``: ``MEAN_ERROR``, ``RMSE``, ``LOWER``, ``UPPER`` (module docstring)."""
    err = (draws - published[None, :]).astype(np.float64)
    lo_q, hi_q = np.quantile(err, [(1 - level) / 2, (1 + level) / 2], axis=0)
    pub = published.astype(np.float64)
    return {
        "MEAN_ERROR": err.mean(axis=0),
        "RMSE": np.sqrt((err**2).mean(axis=0)),
        "LOWER": np.maximum(pub - hi_q, 0.0),
        "UPPER": np.maximum(pub - lo_q, 0.0),
    }


def _text(df: pl.DataFrame, *, header: bool) -> bytes:
    tidy = [
        pl.when(pl.col(c).abs() < 5e-7).then(0.0).otherwise(pl.col(c)).alias(c) for c in COLUMNS[2:]
    ]
    buf = io.BytesIO()
    df.with_columns(tidy).write_csv(buf, separator="|", float_precision=6, include_header=header)
    return buf.getvalue()


def _write_level(folder: Path, level: str, df: pl.DataFrame, private: bool) -> dict[str, int]:
    import pyarrow.parquet as pq

    from privtab.release.marking import parquet_metadata

    (folder / f"replicates-{level}.txt").write_bytes(_text(df, header=True))
    table = df.to_arrow()
    meta = {k.encode(): v.encode() for k, v in parquet_metadata(private).items()}
    pq.write_table(table.replace_schema_metadata(meta), folder / f"replicates-{level}.parquet")
    return {f"replicates-{level}.txt": df.height, f"replicates-{level}.parquet": df.height}


def _method(n: int, level: float, source: str) -> dict[str, Any]:
    return {
        "method": "approximate Monte Carlo (arXiv 2503.19714): the published output taken as "
        "the truth, TopDown re-run on it with fresh noise at the release's exact per-query "
        "budgets and production's post-processing",
        "replicates": n,
        "level": level,
        "source": source,
        "error": "replicate − published, per cell",
        "rmse": "√(mean squared error over the replicates)",
        "interval": "[PUBLISHED − q((1+level)/2), PUBLISHED − q((1−level)/2)] of the errors "
        "(basic bootstrap), lower end at least 0",
        "privacy": "post-processing of the release: the replicate noise is applied to the "
        "published output, never to confidential data",
    }


def replicates(
    release: str | Path,
    out: str | Path,
    *,
    n: int,
    workers: int = 1,
    seed: int | None = None,
    level: float = 0.9,
    overwrite: bool = False,
    say: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """``privtab topdown replicates``: ``n`` replicates of ``release`` and the derived
    folder ``out`` (module docstring). Returns a JSON-ready summary."""
    from privtab._json import jsonable
    from privtab.atomic import atomic_directory, atomic_write, check_output
    from privtab.data.inputs import sha256_file
    from privtab.release.marking import write_not_private

    tell = say or (lambda _m: None)
    if n < 2:
        raise UsageError(f"--n must be at least 2, got {n}")
    if workers < 1:
        raise UsageError(f"--workers must be at least 1, got {workers}")
    if not 0 < level < 1:
        raise UsageError(f"--level must be between 0 and 1, got {level}")
    rel = Path(release)
    check_output(out, overwrite=overwrite, kind=FOLDER_KIND, protect=[rel])
    tell("reading the published release")
    inp = published_data(rel)
    check_budgets(inp)
    published = _published_tables(rel)
    order = published.select(KEYS)
    seed_text = None if seed is None else str(seed)
    draws = np.empty((n, published.height), dtype=np.int32)
    for k, counts in enumerate(_run_all(rel, n, workers, seed_text, order, tell)):
        draws[k] = counts
    pub = published.get_column("COUNT").to_numpy().astype(np.int64)
    stats = replicate_summary(pub, draws.astype(np.int64), level)
    frame = published.select(
        "GEOLEVEL", "GEOID", "CELL", pl.col("COUNT").cast(pl.Float64).alias("PUBLISHED"),
        *(pl.Series(k, v) for k, v in stats.items()),
    )  # fmt: skip
    private = inp.document.get("private") is not False and seed is None
    source = "secure (privtab.random)" if seed is None else f"seeded {seed} (NOT private)"
    rows: dict[str, int] = {}
    levels = list(dict.fromkeys(frame.get_column("GEOLEVEL").to_list()))
    with atomic_directory(Path(out), kind=FOLDER_KIND, overwrite=overwrite, protect=[rel]) as tmp:
        for lv in levels:
            part = frame.filter(pl.col("GEOLEVEL") == lv).select(COLUMNS)
            rows.update(_write_level(tmp, lv, part, private))
        if not private:
            write_not_private(tmp, f"replicates of {rel} ({source})")
        doc = {
            **inp.document,
            "kind": DOCUMENT_KIND,
            "private": private,
            "derived_from": {
                "release": str(rel.resolve()),
                "kind": inp.document.get("kind"),
                "command": "privtab topdown replicates",
            },
            "replicates": _method(n, level, source),
            "outputs": {
                "files": {
                    f: {"sha256": sha256_file(tmp / f), "rows": r} for f, r in sorted(rows.items())
                }
            },
        }
        atomic_write(tmp / "release.json", json.dumps(jsonable(doc), indent=2) + "\n")
    by_level = (
        frame.group_by("GEOLEVEL", maintain_order=True)
        .agg((pl.col("RMSE") ** 2).mean().sqrt().alias("RMSE"), pl.len().alias("CELLS"))
        .to_dicts()
    )
    return {
        "release": str(rel),
        "out": str(out),
        "replicates": n,
        "level": level,
        "private": private,
        "levels": levels,
        "rmse_by_geolevel": by_level,
        "files": {k: v for k, v in rows.items() if k.endswith(".txt")},
    }
