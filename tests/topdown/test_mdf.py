"""The MDF writer (:mod:`privtab.topdown.mdf`) writes a state in runs of whole blocks: the
files are the same whatever the run length (a state's rows are never all held)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp

import privtab.topdown.mdf as mdf
from privtab.topdown.histogram import CELLS


def _state(rng: np.random.Generator, n: int) -> tuple[pl.DataFrame, sp.csr_matrix, np.ndarray]:
    blocks = pl.DataFrame(
        {
            "TABBLKST": ["10"] * n,
            "TABBLKCOU": ["001"] * n,
            "TABTRACTCE": ["000100"] * n,
            "TABBLKGRPCE": [str(1 + i // 1000) for i in range(n)],
            "TABBLK": [f"{1000 + i:04d}" for i in range(n)],
        },
        schema=dict.fromkeys(mdf.GEO_COLUMNS, pl.String),
    )
    dense = np.where(rng.random((n, CELLS)) < 0.01, rng.integers(0, 4, (n, CELLS)), 0)
    dense[::7] = 0  # empty blocks too
    units = rng.integers(0, 5, (n, 2))
    return blocks, sp.csr_matrix(dense.astype(np.int64)), units.astype(np.int64)


@pytest.mark.parametrize("rows", [1, 37, 1 << 20])
def test_runs_of_blocks_write_the_same_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: int
) -> None:
    rng = np.random.default_rng(3)
    states = [_state(rng, n) for n in (0, 1, 60)]
    written = {}
    for name, size in (("whole", 1 << 30), ("runs", rows)):
        monkeypatch.setattr(mdf, "ROWS", size)
        w = mdf.MdfWriter(tmp_path / name, private=False)
        for blocks, persons, units in states:
            w.add(blocks, persons, units, np.arange(blocks.height, dtype=np.int64) % 2)
        w.close()
        written[name] = w
    assert written["whole"].persons == sum(int(s[1].sum()) for s in states) > 0
    for kind in ("persons", "units"):
        a, b = (tmp_path / n / "mdf" / f"{kind}.txt" for n in ("whole", "runs"))
        assert a.read_bytes() == b.read_bytes()
        pa, pb = (pl.read_parquet(p.with_suffix(".parquet")) for p in (a, b))
        assert pa.equals(pb)
    assert written["whole"].units == written["runs"].units
