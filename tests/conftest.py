"""Shared pytest configuration: the slow-test switch and common fixtures."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    # timing is not what the property tests check: a loaded 2-core machine must not fail them;
    # derandomized: the same examples on every run (a fixed seed, as every statistical test
    # here), so CI passes or fails on the code, not on the draw. PRIVTAB_HYPOTHESIS=explore
    # draws new examples (to hunt for cases; a find becomes an @example of its test).
    settings.register_profile("privtab", deadline=None, derandomize=True)
    settings.register_profile("explore", deadline=None)
    settings.load_profile("explore" if os.environ.get("PRIVTAB_HYPOTHESIS") == "explore"
                          else "privtab")  # fmt: skip


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


def _cache_cli_commands() -> None:
    """Build the click command of a Typer app once per test process, not once per
    ``CliRunner.invoke``: typer rebuilds the whole tree (≈ 100 commands, each signature and
    type hints inspected) on every call, 18 ms of CPU each idle (test_bad_input_class alone
    invokes 399 times: 30.9 → 18.8 CPU-s with this, load ≈ 5). The built command holds no
    state between invocations (click makes a new context per call) and no test changes an
    app's registrations."""
    try:
        import typer.testing
    except ModuleNotFoundError:  # the extras venvs of `make test-extras` hold pytest only
        return
    build = typer.testing._get_command  # type: ignore[attr-defined]
    built: dict[int, tuple[typer.Typer, Any]] = {}

    def cached(app: typer.Typer) -> Any:
        hit = built.get(id(app))
        if hit is None or hit[0] is not app:
            hit = built[id(app)] = (app, build(app))
        return hit[1]

    typer.testing._get_command = cached  # type: ignore[attr-defined,assignment]


_cache_cli_commands()


def _cache_reference_files() -> None:
    """Read and check each content of the four race/ethnicity reference files once per test
    process: nearly every SafeTab test (runs, validations, plans) loads the same production
    files from the package or from a copy, and a load (1,755 codes, 14,088 mappings, every
    rule checked) takes 0.06 CPU-s idle, several times that on a loaded machine. Only a load
    that found no problem is kept, keyed by the files' bytes; a later load of the same
    bytes (from any folder) gets the same tables with its own folder as ``source``. Files
    that are missing, not regular or large are never hashed: those loads, every edited
    content and every load with a problem run the real checks (tests/data/test_iterations.py
    and the bad-input tests check each rule)."""
    import dataclasses
    import hashlib
    import stat

    import privtab.data.iterations as iterations

    real = iterations.load_reference
    kept: dict[str, iterations.ReferenceData] = {}

    def digest(folder: Path) -> str | None:
        h = hashlib.sha256()
        for name in iterations.REFERENCE_FILES:
            path = folder / name
            try:
                info = path.stat()
            except OSError:
                return None
            if not stat.S_ISREG(info.st_mode) or info.st_size > 4 << 20:
                return None
            h.update(name.encode() + b"\0" + str(info.st_size).encode() + b"\0")
            try:
                h.update(path.read_bytes())
            except OSError:
                return None
        return h.hexdigest()

    def load_reference(directory: str | Path, log: Any) -> Any:
        folder = Path(directory)
        key = digest(folder)
        if key is not None and key in kept:
            return dataclasses.replace(kept[key], source=str(folder))
        before = sum(log.counts.values())
        ref = real(directory, log)
        if key is not None and ref is not None and sum(log.counts.values()) == before:
            kept[key] = ref
        return ref

    # the module's own name (read_reference) and the modules that imported it by name
    import privtab.data.folder
    import privtab.data.inputs
    import privtab.safetab_h.inputs

    modules: tuple[Any, ...] = (
        iterations,
        privtab.data.folder,
        privtab.data.inputs,
        privtab.safetab_h.inputs,
    )
    for module in modules:
        assert module.load_reference is real, module.__name__
        module.load_reference = load_reference


_cache_reference_files()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--runslow",
        action="store_true",
        default=False,
        help="run tests marked slow (also enabled by PRIVTAB_SLOW=1)",
    )


# Modules holding the suite's longest tests (8-12 s each, measured with --durations on an
# idle machine) run first: pytest-xdist hands tests out in collection order, and a
# 10-second test collected last keeps one worker busy while the other has nothing left
# (longest-first scheduling). Order only: every test still runs.
_LONG_FIRST = (
    "tests/test_docs.py",
    "tests/safetab_h/test_spark.py",
    "tests/topdown/test_spark.py",
    "tests/cli/test_columns.py",
    "tests/topdown/test_release.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in _LONG_FIRST)  # stable
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


def shared_folder(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]
) -> Path:
    """A folder built once per test session by ``build(folder)`` and shared by every test
    process (pytest-xdist's workers): the first process to ask builds it under a lock, the
    others wait for it and then read it. Users only read it (a test that edits copies it)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the workers' basetemps are siblings in the session's
    folder, done = root / f"shared-{name}", root / f"shared-{name}.done"
    with (root / f"shared-{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not done.exists():
                if folder.exists():  # a build that failed in another process
                    shutil.rmtree(folder)
                folder.mkdir()
                build(folder)
                done.touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return folder


@pytest.fixture(scope="session")
def demo_de_pr(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``privtab demo --persons 3000 --states DE,PR --seed 1`` (a seeded, NOT private
    SafeTab-P, SafeTab-H and TopDown demo; folders ``input``, ``parameters``, ``release``…)
    in ``demo/``, run once a session at 80 columns; its stdout in ``demo.stdout``. The
    command's own checks (exit 0, no word of a table broken: tests/cli/test_columns.py)
    run while it is built; read by tests/cli/test_columns.py and tests/analysis/
    test_derived.py."""
    from tests.cli.test_columns import run_at_80_columns

    def build(folder: Path) -> None:
        out = run_at_80_columns(
            f"demo --persons 3000 --states DE,PR --seed 1 --out {folder / 'demo'}"
        )
        (folder / "demo.stdout").write_text(out, encoding="utf-8")

    return shared_folder(tmp_path_factory, "demo-de-pr", build)
