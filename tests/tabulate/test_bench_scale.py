"""The scale benchmark's log parser (privtab.bench.scale) reads what run_release prints."""

from __future__ import annotations

from privtab.bench.scale import parse_run

LOG = (
    (
        "safetab: 1,000,000 persons in 794,293 cells\n"
        "safetab: [6/19] US (COUNTY, 2): 3,143 regions × 2,150 iterations, "
        "13,540,764 noisy counts, 2 chunk(s) (26.7 s)\n"
    )
    + """safetab: [12/19] PR (PR-STATE, 1): 1 regions × 52 iterations, 169 noisy counts (1.2 s)
	Elapsed (wall clock) time (h:mm:ss or m:ss): 1:05:55.91
	Maximum resident set size (kbytes): 3609716
"""
)


def test_parse_run() -> None:
    r = parse_run(LOG, LOG)
    assert r["persons"] == 1_000_000
    assert r["cells"] == 794_293
    assert r["wall_seconds"] == 3955.91
    assert abs(r["peak_rss_gb"] - 3609716 / 1024**2) < 1e-12
    assert r["levels"][0] == {
        "scope": "US",
        "level": "(COUNTY, 2)",
        "groups": 3143 * 2150,
        "noise_draws": 13_540_764,
        "seconds": 26.7,
    }
    assert r["levels"][1]["level"] == "(PR-STATE, 1)"
