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
    real = PersonReader.batches

    def failing(self):  # type: ignore[no-untyped-def]
        it = real(self)
        yield next(it)
        raise OSError("disk went away")

    monkeypatch.setattr(PersonReader, "batches", failing)
    with pytest.raises(OSError, match="disk went away"):
        aggregate_persons(inputs, batch_rows=997)
