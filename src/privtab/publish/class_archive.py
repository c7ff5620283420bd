"""A class-data-sharing archive of the Spark driver JVM: the Spark engine's sessions start
≈ 2 s sooner.

Creating a Spark session loads several thousand classes from Spark's jars: ≈ 4.9 s on the
2-core benchmark machine, of a release that takes ≈ 10 s with the polars engine at 10⁷
persons. The JVM can map the classes it loaded from an archive written by an earlier JVM
(class data sharing, JDK 13+: ``-XX:ArchiveClassesAtExit`` once, then
``-XX:SharedArchiveFile``); with it the session starts in ≈ 2.6 s (measured, pyspark
4.3.0, OpenJDK 17).

The archive holds JVM classes only — nothing of any input — and lives in the user's cache
(``$XDG_CACHE_HOME/privtab`` or ``~/.cache/privtab``, never in a release folder). It is
built once per Spark installation (environment) and Java, by a separate Python process that
starts a bare local session, runs a small job and exits (:func:`main`); the archive is
moved into place only when that JVM has exited and written it whole, so a run never sees
a partial one (a truncated archive stops the JVM from starting). A failed build leaves
nothing behind and the session starts without the archive. The Spark setting
:data:`ARCHIVE_CONF` ``=false`` turns it off.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from privtab.atomic import atomic_file

__all__ = ["ARCHIVE_CONF", "archive_path", "ensure_archive", "java_options", "main"]

ARCHIVE_CONF = "spark.privtab.classArchive"
"""A Spark setting: ``false`` starts the driver JVM without the class archive."""
BUILD_SECONDS = 300
"""At most this long for building the archive (10–20 s on the benchmark machine)."""


def _java() -> Path | None:
    """The ``java`` that Spark will run (``$JAVA_HOME/bin/java``, else the one on PATH)."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_path() -> Path | None:
    """Where this Spark installation's archive for this Java is kept (``None``: no Java).
    The name changes with the pyspark version and folder (the jars' paths are in the
    archive) and the Java binary (path, size, mtime), so an upgrade or another environment
    never maps an archive written for other classes."""
    java = _java()
    if java is None:
        return None
    import pyspark

    st = java.stat()
    jars = Path(pyspark.__file__).parent  # another environment: other jar paths
    key = f"{pyspark.__version__}|{jars}|{java}|{st.st_size}|{st.st_mtime_ns}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "privtab" / f"spark-{pyspark.__version__}-{digest}.jsa"


def java_options(archive: Path) -> str:
    """The driver JVM options that map ``archive``."""
    return f"-XX:SharedArchiveFile={archive}"


def ensure_archive(say: Callable[[str], None]) -> Path | None:
    """The archive, built first if missing (once per Spark installation and Java: 10–20 s);
    ``None`` when there is no Java or the build failed (the caller starts without it)."""
    path = archive_path()
    if path is None:
        return None
    if path.is_file():
        return path
    say(
        "building Spark's class archive (once per Spark installation and Java): "
        "later sessions start ≈ 2 s sooner"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_file(path) as tmp:
            # stdout/stderr are pipes inherited by the builder's JVM: run() returns when the
            # JVM has exited too, i.e. when it has written the whole archive
            done = subprocess.run(
                [sys.executable, "-m", __name__, str(tmp)],
                capture_output=True,
                timeout=BUILD_SECONDS,
                check=False,
            )
            if done.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
                raise _BuildFailedError(f"exit {done.returncode}")
    except (_BuildFailedError, OSError, subprocess.SubprocessError) as exc:
        say(f"could not build Spark's class archive ({exc}): starting without it")
        return None
    return path


class _BuildFailedError(Exception):
    """The builder exited without writing an archive (it is then removed)."""


def main(argv: list[str]) -> int:
    """The builder: a bare local session whose JVM writes its classes to ``argv[0]`` when
    it exits (after a job with a shuffle and a broadcast, so that the classes of the
    engine's jobs are in the archive too)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.pop("PYSPARK_SUBMIT_ARGS", None)
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("privtab-class-archive")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", f"-XX:ArchiveClassesAtExit={argv[0]}")
        .getOrCreate()
    )
    sc = spark.sparkContext
    shared = sc.broadcast([1])
    pairs = sc.parallelize(range(4), 2).map(lambda x: (x % 2, x + shared.value[0]))
    pairs.reduceByKey(lambda a, b: a + b, 1).collect()
    spark.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover - run by ensure_archive in a subprocess
    sys.exit(main(sys.argv[1:]))
