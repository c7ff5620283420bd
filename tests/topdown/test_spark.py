"""TopDown's Spark engine (issue 29 item 4): the embedded engine's release, from Spark tasks.

A seeded release on Spark must have the pinned digest of the embedded engine
(``tests/topdown/test_release_identity.py``: every MDF and P1–P5/H1 file), and a release
folder must be byte-identical file by file except what names the run (``release.json``'s
start time, the folder marker's random id).

Default suite: the pool's logic (jobs of several slices, slices asked for before their job
started, errors from tasks) on an in-process stand-in for Spark that pickles every slice
and answer across as Spark does — no JVM; and one seeded release on a real ``local[1]``
session started by ``engine="spark"`` (the CLI's path: the session helper, the class
archive, the tasks' own Python workers). Slow: ``local-cluster[2,1,2048]`` (two executor
JVMs, each with its own Python workers: the problems cross process boundaries), seeded and
noise-off, whole folders compared with the embedded engine's.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from privtab.errors import UsageError
from privtab.mechanisms import InsecureReleaseWarning
from privtab.random import SeededSource
from privtab.topdown.run import TopDownOptions, run_release
from privtab.topdown.solve import TopDownInfeasibleError
from privtab.topdown.spark import SparkSolvePool
from tests._spark import start_session
from tests.topdown.test_release_identity import PINNED, release_digest
from tests.topdown.test_release_identity import data as data  # the fixture

pyspark = pytest.importorskip("pyspark")

CLUSTER = "local-cluster[2,1,2048]"


# ------------------------------------------------------------------ a stand-in for Spark
class _RDD:
    """``parallelize(items, n).mapPartitions(f).collect()`` in this process, one item per
    partition as Spark cuts a list of ``n`` items, every item and answer pickled."""

    def __init__(self, parts: list[list[Any]]) -> None:
        self.parts = parts

    def mapPartitions(self, f: Callable[[Iterable[Any]], Iterator[Any]]) -> _RDD:  # noqa: N802
        return _RDD([[pickle.loads(pickle.dumps(x)) for x in f(iter(p))] for p in self.parts])

    def collect(self) -> list[Any]:
        return [x for p in self.parts for x in p]


class _Context:
    defaultParallelism = 2  # noqa: N815
    jobs = 0

    def setJobGroup(self, group: str, description: str) -> None:  # noqa: N802
        self.group = group

    def parallelize(self, items: list[Any], n: int) -> _RDD:
        assert n == len(items)
        type(self).jobs += 1
        return _RDD([[pickle.loads(pickle.dumps(x))] for x in items])


class _Session:
    sparkContext = _Context()  # noqa: N815


def _options(engine: Any, seed: int | None = 2026) -> TopDownOptions:
    """A seeded release (a new source each time), or noise off (``seed=None``)."""
    return TopDownOptions(
        allow_insecure=True,
        source=None if seed is None else SeededSource(seed),
        noise=seed is not None,
        report=False,
        use_ledger=False,
        engine=engine,
    )


def _run(data: Path, out: Path, opts: TopDownOptions) -> Path:
    with pytest.warns(InsecureReleaseWarning):
        run_release(data, out, opts, progress=lambda _m: None)
    return out


def _same_folders(a: Path, b: Path) -> None:
    """Every file byte-identical, except the run's start and the marker's random id."""
    names = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
    assert {"mdf/persons.txt", "pl94/P1.txt"} <= set(names)
    for name in names:
        x, y = (a / name).read_bytes(), (b / name).read_bytes()
        if name in ("release.json", ".privtab-folder.json"):
            dx, dy = json.loads(x), json.loads(y)
            for d in (dx, dy):
                d.pop("started_utc", None)
                d.pop("id", None)
                d.pop("engine", None)  # names the engine that ran (test_release.py)
                # the folder marker's sizes include release.json's, which names the engine
                d.get("sizes", {}).pop("release.json", None)
            assert dx == dy, name
        else:
            assert x == y, name


def test_the_pool_gives_the_embedded_release_on_a_stand_in_for_spark(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slices of 2 (the data's levels have at most 32 parents: one slice each at the
    production size), jobs of three slices and shorter ones at each level's end: the
    embedded engine's release with the same slices (a seeded run's sources are derived per
    slice, so the slice size is part of a seeded answer; slices of 32 on Spark give the
    pinned digest: test_a_seeded_release_on_local_spark_is_the_pinned_one)."""
    monkeypatch.setattr("privtab.topdown.engine.SLICE", 2)
    _run(data, tmp_path / "embedded", _options("polars"))
    pool = SparkSolvePool(spark=_Session(), slices_per_job=3)  # type: ignore[arg-type]
    before = _Context.jobs
    _run(data, tmp_path / "r2", _options(pool))
    assert release_digest(tmp_path / "r2") == release_digest(tmp_path / "embedded")
    assert release_digest(tmp_path / "r2") != PINNED  # the slices of 2 were used
    assert pool.slices > pool.jobs == _Context.jobs - before > 0
    assert pool.largest_slice_bytes > 0


def test_an_infeasible_problem_in_a_task_is_raised_as_the_embedded_engine_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def infeasible(problems: list[Any]) -> list[Any]:
        raise TopDownInfeasibleError("Block_Group 010010201001", ["hhgq 3 lower bound 4 > 2"])

    monkeypatch.setattr("privtab.topdown.spark.run_slice", infeasible)
    with SparkSolvePool(spark=_Session(), slices_per_job=2) as pool:  # type: ignore[arg-type]
        first = pool.submit([])  # waits for a second slice ...
        with pytest.raises(TopDownInfeasibleError) as err:
            first.result()  # ... unless asked for: its job starts now
        assert err.value.geounit == "Block_Group 010010201001"
        assert list(err.value.violations) == ["hhgq 3 lower bound 4 > 2"]


def test_an_exception_that_does_not_pickle_arrives_as_its_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class LocalError(Exception):  # a local class: pickle cannot find it
        pass

    def broken(problems: list[Any]) -> list[Any]:
        raise LocalError("solver exploded")

    monkeypatch.setattr("privtab.topdown.spark.run_slice", broken)
    pool = SparkSolvePool(spark=_Session())  # type: ignore[arg-type]
    with pool, pytest.raises(RuntimeError, match="solver exploded"):
        pool.submit([]).result()


def test_closing_the_pool_cancels_its_running_jobs() -> None:
    """A failed or interrupted run closes the pool with a job still running: its Spark job
    group is cancelled (the job ends now) rather than waited for."""
    import threading

    cancelled = threading.Event()

    class Stuck(_RDD):
        def mapPartitions(self, f: Any) -> _RDD:  # noqa: N802
            return self

        def collect(self) -> list[Any]:
            if not cancelled.wait(60):
                raise AssertionError("never cancelled")
            raise RuntimeError("job cancelled")

    class Context(_Context):
        def parallelize(self, items: list[Any], n: int) -> _RDD:
            return Stuck([])

        def cancelJobGroup(self, group: str) -> None:  # noqa: N802
            assert group.startswith("privtab-topdown-")
            cancelled.set()

    class Session:
        sparkContext = Context()  # noqa: N815

    pool = SparkSolvePool(spark=Session(), slices_per_job=1)  # type: ignore[arg-type]
    fut = pool.submit([])  # a whole job: it starts (or is about to)
    pool.close()
    assert cancelled.is_set()
    with pytest.raises(RuntimeError, match=r"cancelled|closed before this job started"):
        fut.result(timeout=0)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"engine": "flink"}, "unknown engine 'flink'"),
        ({"spark_master": "local[1]"}, "need --engine spark"),
        ({"engine": "spark", "workers": 2}, "--workers is the polars engine's"),
        ({"engine": "spark", "postprocess": "gls-round"}, "polars engine only"),
    ],
)
def test_engine_options_are_checked_before_anything_runs(
    data: Path, tmp_path: Path, changes: dict[str, Any], message: str
) -> None:
    opts = TopDownOptions(use_ledger=False, **changes)
    with pytest.raises(UsageError, match=message):
        run_release(data, tmp_path / "r", opts)
    assert not (tmp_path / "r").exists()


def test_the_cli_refuses_a_malformed_spark_setting(data: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from privtab.cli import app

    res = CliRunner().invoke(
        app,
        ["topdown", "run", "-d", str(data), "-o", str(tmp_path / "r"), "--engine", "spark",
         "--spark-conf", "spark.executor.memory"],
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "--spark-conf needs KEY=VALUE" in res.output
    assert not (tmp_path / "r").exists()


# ------------------------------------------------------------------ real Spark
# slow (≈ 8 s idle, a JVM's start): `make test-extras` runs it from a plain install of
# privtab[spark] (CI), `make test-all` here; by default, the same per-slice code runs in
# worker processes (test_the_pool_gives_the_embedded_release_on_a_stand_in_for_spark)
@pytest.mark.slow
def test_a_seeded_release_on_local_spark_is_the_pinned_one(data: Path, tmp_path: Path) -> None:
    """``engine="spark"`` with ``local[1]``: the session helper, tasks in Spark's own Python
    workers (the cluster variant below runs two executors)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    opts = _options("spark")
    opts.spark_master = "local[1]"
    opts.spark_conf = {"spark.ui.enabled": "false"}
    _run(data, tmp_path / "r", opts)
    assert release_digest(tmp_path / "r") == PINNED


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    yield from start_session(CLUSTER, "privtab-tests-topdown", tmp_path_factory)


# slow: two executor JVMs start (≈ 30 s idle, minutes loaded) and three releases run;
# test_a_seeded_release_on_local_spark_is_the_pinned_one covers the same code on local[1]
@pytest.mark.slow
def test_on_a_local_cluster_seeded_and_noise_off_releases_equal_the_embedded_engines(
    data: Path, tmp_path: Path, cluster: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slices of 4 parents (so a job's slices go to both executors), against the
    embedded engine's release with the same slices: a seeded run's sources are derived per
    slice, so the slice size is part of a seeded answer (the pinned digest of slices of 32
    on Spark: test_a_seeded_release_on_local_spark_is_the_pinned_one)."""
    monkeypatch.setattr("privtab.topdown.engine.SLICE", 4)
    pool = SparkSolvePool(spark=cluster)  # type: ignore[arg-type]
    assert pool.workers == 2
    _run(data, tmp_path / "seeded", _options(pool))
    assert release_digest(tmp_path / "seeded") != PINNED  # the slices of 4 were used
    _run(data, tmp_path / "embedded", _options("polars"))
    _same_folders(tmp_path / "seeded", tmp_path / "embedded")
    _run(data, tmp_path / "exact-spark", _options(pool, seed=None))
    _run(data, tmp_path / "exact", _options("polars", seed=None))
    _same_folders(tmp_path / "exact-spark", tmp_path / "exact")
    assert pool.slices > pool.jobs > 0
