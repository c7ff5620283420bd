"""The Spark driver's class archive (issue 20: the Spark engine within 2x of polars; the
session starts ≈ 2 s sooner with it). The default tests check where the archive is kept,
that a failed build leaves nothing behind, that a finished one is moved into place whole,
when the engine uses one and that a JVM that will not start with it is started without;
the slow test builds a real archive and starts a session with it."""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from privtab.publish import class_archive
from privtab.publish.class_archive import archive_path, ensure_archive
from privtab.publish.spark import DRIVER_OPTIONS
from privtab.publish.spark import class_archive as _class_archive
from privtab.publish.spark import get_or_create as _get_or_create


@pytest.fixture
def fake_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``java`` under a fake JAVA_HOME and the cache in the test's directory."""
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return java


def test_the_archive_is_kept_per_spark_and_java(fake_java: Path, tmp_path: Path) -> None:
    import pyspark

    first = archive_path()
    assert first is not None
    assert first.parent == tmp_path / "cache" / "privtab"
    assert first.name.startswith(f"spark-{pyspark.__version__}-")
    os.utime(fake_java, ns=(1, 1))  # another Java installed at the same path
    assert archive_path() not in (None, first)


def test_no_java_no_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "none"))
    assert archive_path() is None
    assert ensure_archive(lambda _m: None) is None


def test_a_failed_build_leaves_nothing(fake_java: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []

    def failing(cmd: list[str], **_kw: Any) -> subprocess.CompletedProcess[bytes]:
        Path(cmd[-1]).write_bytes(b"half an archive")  # the JVM died while writing it
        return subprocess.CompletedProcess(cmd, 1, b"", b"")

    monkeypatch.setattr(class_archive.subprocess, "run", failing)
    assert ensure_archive(said.append) is None
    path = archive_path()
    assert path is not None
    assert list(path.parent.iterdir()) == []
    assert "could not build" in said[-1]


def test_a_finished_build_is_moved_into_place_once(
    fake_java: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds: list[list[str]] = []

    def building(cmd: list[str], **_kw: Any) -> subprocess.CompletedProcess[bytes]:
        builds.append(cmd)
        Path(cmd[-1]).write_bytes(b"classes")
        return subprocess.CompletedProcess(cmd, 0, b"", b"")

    monkeypatch.setattr(class_archive.subprocess, "run", building)
    got = ensure_archive(lambda _m: None)
    assert got is not None
    assert got.read_bytes() == b"classes"
    assert [p.name for p in got.parent.iterdir()] == [got.name]
    assert ensure_archive(lambda _m: None) == got
    assert len(builds) == 1


def test_the_engine_uses_an_archive_only_where_it_sets_the_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def never(_say: object) -> Path:
        raise AssertionError("no archive should be built")

    monkeypatch.setattr("privtab.publish.spark.ensure_archive", never)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert _class_archive({"spark.privtab.classArchive": "false"}) is None
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f'--conf "{DRIVER_OPTIONS}=-Xmx1g" pyspark-shell')
    assert _class_archive({}) is None
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")  # under spark-submit
    assert _class_archive({}) is None


class _Builder:
    """A session builder whose JVM will not start with a class archive."""

    def __init__(self) -> None:
        self.options: list[str] = []

    def config(self, key: str, value: str) -> _Builder:
        assert key == DRIVER_OPTIONS
        self.options.append(value)
        return self

    def getOrCreate(self) -> str:  # noqa: N802 - pyspark's name
        if "SharedArchiveFile" in self.options[-1]:
            raise RuntimeError("Java gateway process exited before sending its port number")
        return "session"


def test_a_jvm_that_will_not_start_with_the_archive_starts_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    archive = tmp_path / "a.jsa"
    monkeypatch.setattr("privtab.publish.spark.class_archive", lambda _c: archive)
    builder = _Builder()
    conf: Mapping[str, str] = {DRIVER_OPTIONS: "-XX:TieredStopAtLevel=1"}
    with caplog.at_level(logging.WARNING, logger="privtab.publish"):
        assert _get_or_create(builder, conf) == "session"  # type: ignore[arg-type]
    assert builder.options == [
        f"-XX:TieredStopAtLevel=1 -XX:SharedArchiveFile={archive}",
        "-XX:TieredStopAtLevel=1",
    ]
    assert "retrying" in caplog.text


@pytest.mark.slow  # ≈ 20 s: builds a real archive (a JVM) and starts a session with it; the
# default tests above cover the paths, the build and the fallback with fakes
def test_a_real_archive_starts_a_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark.sql import SparkSession

    if SparkSession.getActiveSession() is not None:
        pytest.skip("a session is already active in this process")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    from privtab.tabulate.engines.spark import SparkEngine

    engine = SparkEngine(master="local[1]")
    try:
        sc = engine.spark.sparkContext
        options = sc.getConf().get(DRIVER_OPTIONS) or ""
        path = archive_path()
        assert path is not None
        assert path.is_file()
        assert path.stat().st_size > 1_000_000
        assert f"-XX:SharedArchiveFile={path}" in options
        assert sc.parallelize(range(10), 2).sum() == 45
    finally:
        engine.close()
