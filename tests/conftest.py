"""Shared pytest configuration: the slow-test switch and common fixtures."""

from __future__ import annotations

import os

# One BLAS thread per test process (and the subprocesses tests start, which inherit the
# environment), as every production TopDown run already sets at run time (engine.py,
# workers.py). The suite runs one process per core (`-n auto`), so OpenBLAS's extra threads
# only spin against the other worker: the solver tests called outside a run took 57 CPU-s
# (test_solve.py + test_solve_variants.py, -p no:xdist, load ≈ 8) with OpenBLAS's default
# and 10 CPU-s with one thread. Set before NumPy is imported where possible; threadpoolctl
# covers a BLAS that a plugin loaded first. A caller's own setting is left alone.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import pytest  # noqa: E402

try:
    from threadpoolctl import threadpool_limits
except ModuleNotFoundError:  # the extras venvs of `make test-extras` hold pytest only
    pass
else:
    if os.environ["OPENBLAS_NUM_THREADS"] == "1":
        threadpool_limits(limits=1, user_api="blas")

try:
    from hypothesis import settings
except ModuleNotFoundError:  # the extras venvs of `make test-extras` hold pytest only
    pass
else:
    # timing is not what the property tests check: a loaded 2-core machine must not fail them
    settings.register_profile("privtab", deadline=None)
    settings.load_profile("privtab")


# The JVMs of the Spark tests (in process and in the CLI subprocesses they start, which
# inherit the environment): the C1 compiler only and the serial collector. Test jobs are
# small and short, so C2 compilation and parallel GC threads cost CPU that never pays back:
# the default Spark engine tests took 77 s of CPU (their process tree) with the JVM's
# defaults and 46 s with these; a 4-level release on Spark in a subprocess 46-51 s and
# 24-27 s. No Spark UI either (a web server per session; nothing tests it). A
# PYSPARK_SUBMIT_ARGS of the caller's own is left alone.
_TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault(
    "PYSPARK_SUBMIT_ARGS",
    f'--conf "spark.driver.extraJavaOptions={_TEST_JVM_OPTIONS}" '
    f'--conf "spark.executor.extraJavaOptions={_TEST_JVM_OPTIONS}" '
    "--conf spark.ui.enabled=false pyspark-shell",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--runslow",
        action="store_true",
        default=False,
        help="run tests marked slow (also enabled by PRIVTAB_SLOW=1)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow") or os.environ.get("PRIVTAB_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow or PRIVTAB_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _private_release_ledger(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Private releases made by tests go to a release ledger of their own (inherited by
    subprocesses through ``PRIVTAB_LEDGER``), never to the developer's."""
    path = tmp_path_factory.mktemp("ledger") / "ledger.json"
    os.environ.setdefault("PRIVTAB_LEDGER", str(path))
