"""TopDown on Spark: the per-parent slices of every level solved in Spark tasks.

``privtab topdown run --engine spark`` (or ``TopDownOptions(engine="spark")``) runs the
release with :class:`SparkSolvePool` in place of the embedded engine's worker processes
(:class:`privtab.topdown.workers.SolvePool`). One algorithm, two places to run it: the
driver (:class:`privtab.topdown.engine.TopDownEngine`) walks the spine exactly as the
embedded engine — root, the levels above the chunk level, then each chunk level by level —
cuts each level's parents, in the hierarchy's order, into slice tasks of
:data:`~privtab.topdown.workers.SLICE` parents (:class:`~privtab.topdown.problems.SliceTask`:
the public constraints, the parents' solved histograms, the children's true sparse
histograms and the slice's source key) and hands them over (:meth:`SparkSolvePool.submit`,
the interface of :class:`~privtab.topdown.workers.SolvePool`). The pool gathers a level's
slices into Spark jobs: a job's slices are the partitions of an RDD (one slice per
partition: parents of the level partitioned), each measured and solved in a task by
``mapPartitions`` calling :func:`privtab.topdown.workers.run_slice` — the same pure
function the embedded engine's worker processes call, so a slice's answer never depends on
where it ran. A job holds as many slices as the cluster has cores; two jobs are in flight
while the driver cuts the next slices (the engine keeps at most ``2 × workers`` running).

**Sizing** (docs/topdown.md "Spark"): what crosses to a task is one slice task (pickled:
its children's true sparse histograms and the public constraints), at most :data:`SLICE`
parents; the
pool records the largest (:attr:`SparkSolvePool.largest_slice_bytes`, said at the end of
the run) — the figure the executors' memory is sized from.

**Privacy.** A task draws its slice's noise itself (:mod:`privtab.topdown.measure`: every
needed cell once, exact discrete Gaussian): a secure run's task uses its executor
process's own :class:`~privtab.random.SecureSource` — no source or seed crosses from the
driver — and a seeded test run's task the source derived from the seed and the slice's key,
so a seeded release is byte-identical to the embedded engine's whatever the cluster. The
children's true histograms cross to the executors (confidential data, as every Spark
engine's input: the cluster is inside the office's protected environment); only the
children's solved integer histograms, diagnostics and draw counts come back (and the noisy
measurements when a noisy measurement file is written).

Session: the helper every product's Spark engine uses
(:class:`privtab.publish.spark.SparkSessionHolder`: an active session under
``spark-submit``, else ``master`` — default ``$PRIVTAB_SPARK_MASTER`` or ``local[2]`` —
with ``config``; its JVM started in the background while the inputs are read, the class
archive, one thread per task), stopped at the end of the run if the pool created it.
"""

from __future__ import annotations

import contextlib
import pickle
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from privtab._blas import limit_blas_threads
from privtab.topdown.problems import SliceTask
from privtab.topdown.workers import SliceResult, run_slice

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SparkSolvePool", "solve_partition", "spark_pool"]

#: Jobs run at once (each of up to ``workers`` slices): one solving, one queued, so the
#: cluster never waits for the driver's next job.
JOBS_IN_FLIGHT = 2

_ONE_THREAD: list[bool] = []


def solve_partition(items: Iterable[tuple[int, bytes]]) -> Iterator[tuple[int, bytes]]:
    """A task: each ``(slice number, pickled slice task)`` measured and solved by
    :func:`~privtab.topdown.workers.run_slice` with one BLAS thread; yields the slice
    number and the pickled ``("ok", result)`` — or ``("error", exception)``, so that an
    infeasible problem reaches the driver as the embedded engine raises it (naming the
    geounit), not as a Spark job failure."""
    if not _ONE_THREAD:
        limit_blas_threads()
        _ONE_THREAD.append(True)
    for number, payload in items:
        task: SliceTask = pickle.loads(payload)
        try:
            out: tuple[str, Any] = ("ok", run_slice(task))
        except Exception as exc:  # returned to the driver, raised there
            out = ("error", exc)
        try:
            data = pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # an exception that does not pickle: its text
            data = pickle.dumps(("error", RuntimeError(repr(out[1]))))
        yield number, data


class _Slice(Future[SliceResult]):
    """A slice's answer; asking for it before its job started starts the job."""

    def __init__(self, pool: SparkSolvePool) -> None:
        super().__init__()
        self._pool = pool
        self.started = False

    def result(self, timeout: float | None = None) -> SliceResult:
        if not self.started:
            self._pool.flush()
        return super().result(timeout)


class SparkSolvePool:
    """Slices of per-parent problems solved in Spark tasks: the interface of
    :class:`privtab.topdown.workers.SolvePool` (module docstring). A context manager: the
    session stops with it if the pool created it.

    ``spark``: a session to use (kept running); else ``master`` and ``config`` (any
    ``spark.*`` settings) as every product's Spark engine; ``slices_per_job``: default
    the cluster's cores."""

    name = "spark"
    parallel = True

    def __init__(
        self,
        spark: SparkSession | None = None,
        master: str | None = None,
        config: Mapping[str, str] | None = None,
        *,
        slices_per_job: int | None = None,
    ) -> None:
        from privtab.publish.spark import SparkSessionHolder

        if slices_per_job is not None and slices_per_job < 1:
            raise ValueError("slices_per_job must be at least 1")
        self._session = SparkSessionHolder(spark, master, config, app_name="privtab-topdown")
        self._per_job = slices_per_job
        self._waiting: list[tuple[_Slice, bytes]] = []
        self._lock = threading.Lock()
        self._jobs: ThreadPoolExecutor | None = None
        self._cores: int | None = None
        self.slices = 0
        self.jobs = 0
        self.largest_slice_bytes = 0
        self._quiet = False
        self._running = 0
        self._closing = False
        self._group = f"privtab-topdown-{uuid.uuid4().hex}"

    def __enter__(self) -> SparkSolvePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the session in the background (the JVM takes seconds to start)."""
        self._session.start()

    @property
    def spark(self) -> SparkSession:
        return self._session.spark

    @property
    def workers(self) -> int:
        """The cluster's cores (Spark's default parallelism): slices per job."""
        if self._cores is None:
            self._cores = self._per_job or max(1, int(self.spark.sparkContext.defaultParallelism))
        return self._cores

    def submit(self, task: SliceTask) -> Future[SliceResult]:
        """Queue a slice task; a job starts when ``workers`` wait (or one is asked for)."""
        payload = pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL)
        fut = _Slice(self)
        with self._lock:
            self._waiting.append((fut, payload))
            self.slices += 1
            self.largest_slice_bytes = max(self.largest_slice_bytes, len(payload))
            full = len(self._waiting) >= self.workers
        if full:
            self.flush()
        return fut

    def flush(self) -> None:
        """Start a job for the waiting slices (if any)."""
        with self._lock:
            batch, self._waiting = self._waiting, []
            if not batch:
                return
            if self._jobs is None:
                self._jobs = ThreadPoolExecutor(JOBS_IN_FLIGHT, thread_name_prefix="privtab-spark")
            self.jobs += 1
            self._running += 1
            jobs = self._jobs
        for fut, _ in batch:
            fut.started = True
            fut.set_running_or_notify_cancel()
        jobs.submit(self._run, batch)

    def _run(self, batch: list[tuple[_Slice, bytes]]) -> None:
        """One Spark job: the batch's slices as partitions, solved by :func:`solve_partition`;
        every slice's future resolved whatever happens."""
        try:
            if self._closing:
                raise RuntimeError("the Spark engine was closed before this job started")
            sc = self._context()
            sc.setJobGroup(self._group, "privtab topdown: per-parent slices")
            rdd = sc.parallelize([(i, p) for i, (_, p) in enumerate(batch)], len(batch))
            answers = dict(rdd.mapPartitions(solve_partition).collect())
            results = [pickle.loads(answers[i]) for i in range(len(batch))]
        except BaseException as exc:  # the job failed (or was cancelled): every slice of it
            for fut, _ in batch:
                fut.set_exception(exc)
            return
        finally:
            with self._lock:
                self._running -= 1
        for (fut, _), (kind, value) in zip(batch, results, strict=True):
            if kind == "ok":
                fut.set_result(value)
            else:
                fut.set_exception(value)

    def _context(self) -> Any:
        """The session's SparkContext; on first use, Spark's warning about tasks over 1 MB
        silenced (a slice of block-level problems is several MB by design: it is the
        task's data, not a closure shipped by mistake)."""
        sc = self.spark.sparkContext
        if not self._quiet:
            self._quiet = True
            with contextlib.suppress(Exception):  # another logging backend: keep the warning
                jvm: Any = sc._jvm
                jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
                    "org.apache.spark.scheduler.TaskSetManager",
                    jvm.org.apache.logging.log4j.Level.ERROR,
                )
        return sc

    def summary(self) -> str:
        """What the pool did (for the progress log and sizing)."""
        return (
            f"spark: {self.slices} slices in {self.jobs} jobs, the largest slice "
            f"{self.largest_slice_bytes / 2**20:.1f} MiB"
        )

    def close(self) -> None:
        """Cancel the pool's running jobs (a run that failed or was interrupted; a finished
        run leaves none), then release the session."""
        with self._lock:
            self._waiting.clear()
            jobs, self._jobs = self._jobs, None
            running = self._running
            self._closing = running > 0
        if running:
            with contextlib.suppress(Exception):  # the session is already gone
                self.spark.sparkContext.cancelJobGroup(self._group)
        if jobs is not None:
            jobs.shutdown(wait=True, cancel_futures=True)
        self._closing = False
        self._session.join()
        self._session.stop()


def spark_pool(master: str | None, config: Mapping[str, str] | None) -> SparkSolvePool:
    """The pool of ``--engine spark``, its session starting in the background; a located
    :class:`~privtab.errors.UsageError` when ``privtab[spark]`` is not installed."""
    import importlib.util

    from privtab.errors import UsageError

    missing = [m for m in ("pyspark", "pandas", "pyarrow") if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(
            f"--engine spark needs {', '.join(missing)}, which is not installed",
            hint="install with `pip install 'privtab[spark]'` (and Java 17)",
        )
    pool = SparkSolvePool(master=master, config=config)
    pool.start()  # the JVM starts while the run reads its inputs
    return pool
