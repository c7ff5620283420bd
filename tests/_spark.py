"""The Spark session of the tests: one builder for every product's Spark tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest


def start_session(
    master: str, app: str, tmp_path_factory: pytest.TempPathFactory, **conf: str
) -> Iterator[object]:
    """A session on ``master`` (UI and console progress off, 1 GiB driver and executors,
    the workers' logs in a temporary folder, ``conf`` added), stopped after the caller's
    tests; a generator for a fixture to ``yield from``."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # local-cluster workers keep their executors' logs here (default: inside SPARK_HOME)
    os.environ["SPARK_WORKER_DIR"] = str(tmp_path_factory.mktemp("spark-worker"))
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.executor.memory", "1g")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
