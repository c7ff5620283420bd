"""SafeTab-H's Spark engine against the polars engine: with noise off the same tables row
for row and the same records digest (the data set in the ledger); the same validation
error for bad rows; a seeded release independent of the partitioning. (The default suite
runs them on ``local[2]``; see ``tests/tabulate/test_spark_engine.py`` for SafeTab-P's.)"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from privtab.data import InputValidationError
from privtab.random import SeededSource
from privtab.safetab_h.engine import PolarsHEngine
from privtab.safetab_h.inputs import load_inputs
from privtab.safetab_h.run import run_release
from privtab.safetab_h.spark import SparkHEngine
from privtab.tabulate.context import RunOptions
from tests._spark import start_session

from .reference import read_tables

pytestmark = pytest.mark.filterwarnings(
    "ignore::privtab.mechanisms.InsecureReleaseWarning",
    "ignore::FutureWarning",
    "ignore::DeprecationWarning",
    "ignore::ResourceWarning",
)


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    yield from start_session("local[2]", "privtab-tests-h", tmp_path_factory)


def _release(
    params: Path, data: Path, out: Path, engine: object, source: SeededSource | None = None
) -> Path:
    import privtab.safetab_h.run as run

    opts = RunOptions(
        noise=source is not None,
        source=source,
        allow_insecure=True,
        report=False,
        engine="polars",
    )
    original = run.make_engine
    run.make_engine = lambda _name: engine  # type: ignore[assignment]
    try:
        run_release(params, data, out, opts)
    finally:
        run.make_engine = original
    return out


def test_spark_equals_polars_with_noise_off(
    spark: object, generated: tuple[Path, Path], tmp_path: Path
) -> None:
    params, data = generated
    on_spark, on_polars = SparkHEngine(spark=spark, partitions=3), PolarsHEngine()  # type: ignore[arg-type]
    a = _release(params, data, tmp_path / "spark", on_spark)
    b = _release(params, data, tmp_path / "polars", on_polars)
    assert read_tables(a) == read_tables(b)
    # the same data set in the ledger: the parts' records digests merged are the file's
    assert on_spark.records is not None
    assert on_polars.records is not None
    assert on_spark.records.key == on_polars.records.key
    assert on_spark.records.rows == 400
    for part in sorted(b.rglob("part-*.csv")):
        assert (a / part.relative_to(b)).read_bytes() == part.read_bytes()


def test_spark_reports_the_polars_engine_s_errors(
    spark: object, generated: tuple[Path, Path], tmp_path: Path
) -> None:
    params, data = generated
    bad = tmp_path / "data"
    shutil.copytree(data, bad)
    lines = (bad / "household-records.txt").read_text().splitlines()
    lines[5] = lines[5].replace("|1|", "|9|", 1) if "|1|" in lines[5] else lines[5] + "|x"
    lines[200] = "01|001|000001|0002|99|" + lines[200].split("|", 5)[5]
    (bad / "household-records.txt").write_text("\n".join(lines) + "\n")
    inputs = load_inputs(params, bad)
    errors = []
    for engine in (SparkHEngine(spark=spark, partitions=2), PolarsHEngine()):  # type: ignore[arg-type]
        with pytest.raises(InputValidationError) as err:
            engine.prepare(inputs, lambda _m: None)
        errors.append(str(err.value))
    assert errors[0] == errors[1]
    assert "[invalid_hhrace]" in errors[0]


@pytest.mark.slow  # two more Spark releases (≈ 40 s on a loaded machine); the default suite
# covers the same tasks with noise off (test_spark_equals_polars_with_noise_off)
def test_seeded_spark_release_does_not_depend_on_partitions(
    spark: object, generated: tuple[Path, Path], tmp_path: Path
) -> None:
    params, data = generated
    a = _release(params, data, tmp_path / "p1", SparkHEngine(spark=spark, partitions=1),  # type: ignore[arg-type]
                 SeededSource(9))  # fmt: skip
    b = _release(params, data, tmp_path / "p3", SparkHEngine(spark=spark, partitions=3),  # type: ignore[arg-type]
                 SeededSource(9))  # fmt: skip
    assert read_tables(a) == read_tables(b)
