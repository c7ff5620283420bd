"""Noise off, SafeTab-H publishes exactly what an independent per-household tabulation
(``reference.py``, written from the documentation, not from privtab's engine) computes:
the Census toy data and generated households, every statistic level, pruned groups,
groups without households, negative and zero T1 counts, both runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from privtab.safetab_h.run import run_release
from privtab.tabulate.context import RunOptions

from .conftest import TOY
from .reference import expected_tables, read_tables

NO_NOISE = RunOptions(noise=False, allow_insecure=True, report=False)


def _run(params: Path, data: Path, out: Path, **kw: object) -> dict[str, object]:
    opts = RunOptions(noise=False, allow_insecure=True, report=False, **kw)  # type: ignore[arg-type]
    return run_release(params, data, out, opts).release


def test_census_toy_data_every_level(toy_params: Path, tmp_path: Path) -> None:
    rel = _run(toy_params, TOY, tmp_path / "rel")
    got = read_tables(tmp_path / "rel")
    want = expected_tables(toy_params, TOY)
    assert got == want
    # every statistic level of both tables occurs, with negative and zero T1 counts
    assert set(got) == {"T03001", "T03002", "T03003", "T03004", "T04001", "T04002"}
    t1 = [line.split("|") for line in (TOY / "pop-group-totals.txt").read_text().splitlines()[1:]]
    assert any(int(c) < 0 for *_, c in t1)
    assert any(int(c) == 0 for *_, c in t1)
    assert rel["domain"]["US"]["t1_rows_not_tabulated"]["outside_states"] == 19  # PLACE 22833
    assert rel["domain"]["US"]["t1_rows_not_tabulated"]["other_run"] == 90  # PR rows


def test_generated_households_both_runs(generated: tuple[Path, Path], tmp_path: Path) -> None:
    params, data = generated
    rel = _run(params, data, tmp_path / "rel")
    got = read_tables(tmp_path / "rel")
    assert got == expected_tables(params, data)
    regions = {(r[1], r[0], r[2]) for rows in got.values() for r in rows}
    assert ("PLACE", "0199999", "0002") in regions or ("PLACE", "0199999", "3010") in regions
    assert ("COUNTY", "01001", "0800") not in regions  # DETAILED_ONLY at COUNTY: pruned
    assert ("USA", "1", "0070") not in regions  # COARSE_ONLY at USA: pruned
    assert ("STATE", "01", "0001") not in regions  # LEVEL 0
    assert not any(r[0].startswith("22") for rows in got.values() for r in rows)
    dropped = rel["domain"]["US"]["t1_rows_not_tabulated"]
    assert dropped["pruned"] == 2
    assert dropped["level_0"] == 1
    assert dropped["outside_states"] == 1
    assert {r[1] for r in got["T03001"] | got["T03004"]} & {"PR-STATE", "PR-TRACT"}


def test_groups_without_households_are_released_as_zero(
    generated: tuple[Path, Path], tmp_path: Path
) -> None:
    params, data = generated
    _run(params, data, tmp_path / "rel")
    got = read_tables(tmp_path / "rel")
    zeros = [r for rows in got.values() for r in rows if r[0] == "0199999"]
    assert zeros
    assert all(r[4] == 0 for r in zeros)


def test_seeded_runs_have_the_noise_off_shape(generated: tuple[Path, Path], tmp_path: Path) -> None:
    """The same rows (keys) whatever the noise: only COUNT differs."""
    params, data = generated
    _run(params, data, tmp_path / "off")
    from privtab.random import SeededSource

    opts = RunOptions(source=SeededSource(1), allow_insecure=True, report=False)
    run_release(params, data, tmp_path / "on", opts)
    off, on = read_tables(tmp_path / "off"), read_tables(tmp_path / "on")
    assert {k: {r[:4] for r in v} for k, v in off.items()} == {
        k: {r[:4] for r in v} for k, v in on.items()
    }
    assert off != on


def test_nonnegative_clamps_cells_before_the_marginals(
    generated: tuple[Path, Path], tmp_path: Path
) -> None:
    from privtab.random import SeededSource

    params, data = generated
    opts = RunOptions(source=SeededSource(2), allow_insecure=True, report=False, nonnegative=True)
    rel = run_release(params, data, tmp_path / "rel", opts).release
    got = read_tables(tmp_path / "rel")
    assert all(r[4] >= 0 for rows in got.values() for r in rows)
    assert rel["postprocessing"]["nonnegative"] is True
    doc = json.loads((tmp_path / "rel" / "release.json").read_text())
    assert doc["kind"] == "privtab.safetab-h.release"


@pytest.mark.parametrize("fmt", ["txt,parquet"])
def test_parquet_input_and_copies(generated: tuple[Path, Path], tmp_path: Path, fmt: str) -> None:
    """A Parquet household file and T1 give the same tables; the Parquet copies hold the
    text tables' rows."""
    import polars as pl

    params, data = generated
    pq = tmp_path / "pq"
    pq.mkdir()
    (pq / "GRF-C.txt").write_bytes((data / "GRF-C.txt").read_bytes())
    pl.read_csv(data / "household-records.txt", separator="|", infer_schema=False).write_parquet(
        pq / "household-records.parquet"
    )
    pl.read_csv(data / "pop-group-totals.txt", separator="|", infer_schema=False).write_parquet(
        pq / "pop-group-totals.parquet"
    )
    _run(params, data, tmp_path / "txt")
    _run(params, pq, tmp_path / "rel", formats=tuple(fmt.split(",")))
    assert read_tables(tmp_path / "rel") == read_tables(tmp_path / "txt")
    copy = pl.read_parquet(tmp_path / "rel" / "T03001.parquet")
    assert copy.height == len(read_tables(tmp_path / "rel")["T03001"])
