"""Batch aggregation with packed cell keys equals a plain group-by of all rows."""

from __future__ import annotations

import polars as pl

from privtab.data import load_inputs
from privtab.tabulate.aggregate import aggregate_persons, cells_from_frame

COLS = ["UNIT", "RACE_KEY1", "RACE_KEY2", "QSPAN", "QSEX", "QAGE", "N"]


def _long(cells) -> pl.DataFrame:
    return cells.cells.join(cells.combos, on="C").select(COLS).sort(COLS)


def test_batches_and_packed_keys_match_a_plain_group_by(synth_small) -> None:
    config, data = synth_small
    inputs = load_inputs(config, data, validate_persons=False)
    # tiny batches: many partial tables, several merges, combinations first seen late
    cells = aggregate_persons(inputs, batch_rows=997)
    plain = cells_from_frame(pl.concat(list(inputs.person_reader().batches())).lazy())
    assert _long(cells).equals(_long(plain))
    assert cells.persons == 20_000 == plain.persons
    assert cells.combos["C"].to_list() == list(range(cells.combos.height))
    assert set(cells.cells["QSEX"].unique().to_list()) == {1, 2}
    assert cells.cells["QAGE"].max() <= 115


def test_per_state_merges_and_prefetch_give_the_same_exact_cells(synth_small) -> None:
    config, data = synth_small
    inputs = load_inputs(config, data, validate_persons=False)
    plain = cells_from_frame(pl.concat(list(inputs.person_reader().batches())).lazy())
    for prefetch in (True, False):
        # merges every few batches, state by state
        cells = aggregate_persons(inputs, batch_rows=997, merge_rows=500, prefetch=prefetch)
        assert _long(cells).equals(_long(plain))
        assert cells.cells["UNIT"].is_sorted()
        assert cells.cells.select("UNIT", "C", "QSEX", "QAGE").is_duplicated().sum() == 0


def test_a_reader_failure_surfaces_through_the_prefetch_thread(synth_small, monkeypatch) -> None:
    import pytest

    from privtab.data.persons import PersonReader

    config, data = synth_small
    inputs = load_inputs(config, data, validate_persons=False)
    real = PersonReader.typed_batches

    def failing(self):  # type: ignore[no-untyped-def]
        it = real(self)
        yield next(it)
        raise OSError("disk went away")

    monkeypatch.setattr(PersonReader, "typed_batches", failing)
    with pytest.raises(OSError, match="disk went away"):
        aggregate_persons(inputs, batch_rows=997)


def _copy_persons(data, dest, *, bad_last: bool, parquet: bool):  # type: ignore[no-untyped-def]
    """``data`` copied to ``dest``; optionally a bad last row (age 200), optionally as a
    Parquet file of many small row groups (a dictionary per row group)."""
    import shutil

    shutil.copytree(data, dest)
    path = dest / "person-records.txt"
    rows = pl.read_csv(path, separator="|", infer_schema=False)
    if bad_last:
        last = rows.tail(1).with_columns(pl.lit("200").alias("QAGE"))
        rows = pl.concat([rows, last])
        path.write_text(path.read_text() + "|".join(last.row(0)) + "\n")
    if parquet:
        path.unlink()
        rows.write_parquet(dest / "person-records.parquet", row_group_size=1_500)
    return rows.height


def test_parquet_row_groups_give_the_text_file_cells(synth_small, tmp_path) -> None:
    config, data = synth_small
    _copy_persons(data, tmp_path / "pq", bad_last=False, parquet=True)
    text = aggregate_persons(load_inputs(config, data, validate_persons=False), batch_rows=997)
    inputs = load_inputs(config, tmp_path / "pq", validate_persons=False)
    parquet = aggregate_persons(inputs, batch_rows=997)
    assert _long(parquet).equals(_long(text))
    # combinations of more than four codes (their own dictionary) occur and are counted
    assert parquet.combos.filter(pl.col("RACE_KEY2") > 0).height > 0


def test_a_bad_row_in_the_last_batch_is_named_with_its_row(synth_small, tmp_path) -> None:
    import pytest

    from privtab.data import InputValidationError

    config, data = synth_small
    for parquet in (False, True):
        dest = tmp_path / f"bad-{parquet}"
        n = _copy_persons(data, dest, bad_last=True, parquet=parquet)
        inputs = load_inputs(config, dest, validate_persons=False)
        with pytest.raises(InputValidationError) as info:
            aggregate_persons(inputs, batch_rows=997)
        (problem,) = info.value.problems
        # text: the line number (the header is line 1); Parquet: the row's position
        assert problem.row == (n if parquet else n + 1)
        assert (problem.kind, problem.column, problem.value) == ("age_out_of_range", "QAGE", "200")
