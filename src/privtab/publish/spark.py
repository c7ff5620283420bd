"""The Spark session of a release run, whatever the product: found, or created and started
in the background with privtab's settings.

Every product's Spark engine (SafeTab-P: :mod:`privtab.tabulate.engines.spark`, SafeTab-H:
:mod:`privtab.safetab_h.spark`, TopDown: :mod:`privtab.topdown.spark`) holds its session
in a :class:`SparkSessionHolder`:

- a session given by the caller is used as it is and never stopped;
- else the active session (under ``spark-submit``: master and settings from its command
  line);
- else one is created with ``master`` (default ``$PRIVTAB_SPARK_MASTER`` or ``local[2]``;
  a local master runs this interpreter in its Python workers, so privtab is importable) and
  :data:`DEFAULT_CONF`, one thread per task (:data:`TASK_ENV`) and the caller's ``config``;
  its driver JVM maps the class archive (:mod:`privtab.publish.class_archive`) when this
  process launches the JVM, and starts without it if the JVM will not start with it. This
  session is the holder's: :meth:`SparkSessionHolder.stop` stops it.

:meth:`SparkSessionHolder.start` creates it in a background thread (the JVM takes seconds
to start: it overlaps the reading of the run's inputs); a failure is raised where the
session is first used.

Privacy: nothing here touches data; the settings are the operator's.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from privtab.publish.class_archive import ARCHIVE_CONF, ensure_archive, java_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_CONF",
    "DRIVER_OPTIONS",
    "TASK_ENV",
    "SparkSessionHolder",
    "class_archive",
    "get_or_create",
]

DRIVER_OPTIONS = "spark.driver.extraJavaOptions"
_LOG = logging.getLogger("privtab.publish")
DEFAULT_CONF = {
    "spark.ui.showConsoleProgress": "false",
    "spark.ui.enabled": "false",
    # the JVM only moves bytes between Python processes here: its optimising compiler
    # costs more CPU than it saves (10^7 persons, local[2]: −4 CPU s at start-up)
    DRIVER_OPTIONS: "-XX:TieredStopAtLevel=1",
}
TASK_ENV = {"POLARS_MAX_THREADS": "1", "OMP_NUM_THREADS": "1"}
"""Every task runs on one core (Spark runs one task per core): polars and Arrow in a task
use one thread, not a pool per task spinning for the same cores."""


class SparkSessionHolder:
    """A run's Spark session (module docstring): ``spark`` given, the active one, or created
    from ``master``, ``config`` and ``app_name``."""

    def __init__(
        self,
        spark: SparkSession | None = None,
        master: str | None = None,
        config: Mapping[str, str] | None = None,
        app_name: str = "privtab",
    ) -> None:
        self._spark = spark
        self._own = False
        self.master = master or os.environ.get("PRIVTAB_SPARK_MASTER", "local[2]")
        self.config = dict(config or {})
        self.app_name = app_name
        self._starting: threading.Thread | None = None
        self._start_error: BaseException | None = None

    def start(self) -> None:
        """Start creating the session in the background; a failure is raised where the
        session is first used."""
        if self._spark is None and self._starting is None:
            self._starting = threading.Thread(
                target=self._start_quietly, name="privtab-spark-start", daemon=True
            )
            self._starting.start()

    def _start_quietly(self) -> None:
        try:
            self._session()
        except BaseException as exc:  # re-raised by the spark property
            self._start_error = exc

    @property
    def spark(self) -> SparkSession:
        """The session (created on first use, or by :meth:`start`)."""
        if self._starting is not None:
            self._starting.join()
            self._starting = None
            if self._start_error is not None:
                error, self._start_error = self._start_error, None
                raise error
        return self._session()

    @property
    def owned(self) -> bool:
        """Whether the session was created here (:meth:`stop` stops it)."""
        return self._own and self._spark is not None

    def _session(self) -> SparkSession:
        if self._spark is None:
            from pyspark.sql import SparkSession

            active = SparkSession.getActiveSession()
            if active is not None:
                self._spark = active
            else:
                builder = SparkSession.builder.appName(self.app_name)
                if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit
                    builder = builder.master(self.master)
                    if self.master.startswith("local"):
                        # local workers must run this interpreter (privtab importable)
                        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
                task_env = {f"spark.executorEnv.{k}": v for k, v in TASK_ENV.items()}
                conf = {**DEFAULT_CONF, **task_env, **self.config}
                for k, v in conf.items():
                    builder = builder.config(k, v)
                self._spark = get_or_create(builder, conf)
                self._own = True
        return self._spark

    def join(self) -> None:
        """Wait for a background start (its failure, if any, is dropped: nothing will use
        the session)."""
        if self._starting is not None:
            self._starting.join()
            self._starting = None

    def stop(self) -> None:
        """Stop the session if it was created here (frees its cache and broadcasts)."""
        if self.owned and self._spark is not None:
            self._spark.stop()
            self._spark = None
            self._own = False


def get_or_create(builder: SparkSession.Builder, conf: Mapping[str, str]) -> SparkSession:
    """The session, its driver JVM mapping the class archive
    (:mod:`privtab.publish.class_archive`) when this process launches the JVM and nothing
    else sets the driver's Java options; without the archive if the JVM does not start with
    it."""
    archive = class_archive(conf)
    if archive is None:
        return builder.getOrCreate()
    options = f"{conf.get(DRIVER_OPTIONS, '')} {java_options(archive)}".strip()
    try:
        return builder.config(DRIVER_OPTIONS, options).getOrCreate()
    except Exception as exc:
        _LOG.warning("the Spark driver did not start with its class archive (%s): retrying", exc)
        return builder.config(DRIVER_OPTIONS, conf.get(DRIVER_OPTIONS, "")).getOrCreate()


def class_archive(conf: Mapping[str, str]) -> Path | None:
    """The class archive to map, or ``None``: turned off (:data:`ARCHIVE_CONF`), under
    ``spark-submit``, or the caller's ``PYSPARK_SUBMIT_ARGS`` set the driver's Java
    options (they would replace the engine's)."""
    if str(conf.get(ARCHIVE_CONF, "true")).lower() == "false":
        return None
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return None
    if DRIVER_OPTIONS in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        return None
    return ensure_archive(_LOG.info)
