"""Benchmark: zCDP → (ε, δ) conversion speed and tightness, privtab vs dp_accounting.

Run: ``privtab bench accounting [--json]`` (dp_accounting from the ``bench`` extra).
dp_accounting has no zCDP type; a ρ-zCDP guarantee is the Gaussian mechanism with noise
multiplier σ = 1/√(2ρ), converted by its ``RdpAccountant`` on its default order grid.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from privtab.accounting import zcdp_epsilon
from privtab.bench._common import Table, machine, table, versions

#: what the benchmark measures, for docs/benchmarks.md
ABOUT = """\
ρ = 2.63, δ = 10⁻¹⁰. dp_accounting has no zCDP type; the same guarantee is its
`RdpAccountant` with a `GaussianDpEvent` of noise multiplier 1/√(2ρ). Target: < 1 ms per
call, arrays accepted (`tests/accounting/test_speed.py` guards it on the acceptance grid).
"""


def _rate(fn: Any, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def run(n: int = 2000, work: Path | None = None) -> dict[str, Any]:
    """Time ``zcdp_epsilon`` (scalar and on a 10⁵-element array) and dp_accounting's
    ``RdpAccountant`` on the same guarantee (ρ = 2.63, δ = 10⁻¹⁰); no files."""
    rho, delta = 2.63, 1e-10
    ours_scalar = _rate(lambda: zcdp_epsilon(rho, delta), n)
    rhos = np.geomspace(1e-4, 50, 100_000)
    t0 = time.perf_counter()
    zcdp_epsilon(rhos, delta)
    ours_vec = (time.perf_counter() - t0) / rhos.size
    result: dict[str, Any] = {
        "rho": rho,
        "delta": delta,
        "ours_epsilon": zcdp_epsilon(rho, delta),
        "ours_seconds_per_call": ours_scalar,
        "ours_vectorised_seconds_per_value": ours_vec,
        "dp_accounting_epsilon": None,
        "dp_accounting_seconds_per_call": None,
        "ratio": None,
        "calls": n,
        "machine": {**machine(), **versions("dp-accounting")},
    }
    try:
        import dp_accounting
        from dp_accounting import rdp
    except ImportError:
        return result

    sigma = 1.0 / math.sqrt(2.0 * rho)

    def peer() -> float:
        acc = rdp.RdpAccountant()
        acc.compose(dp_accounting.GaussianDpEvent(sigma))
        return float(acc.get_epsilon(delta))

    result["dp_accounting_epsilon"] = peer()
    result["dp_accounting_seconds_per_call"] = _rate(peer, max(n // 20, 20))
    result["ratio"] = result["dp_accounting_seconds_per_call"] / ours_scalar
    return result


def tables(res: dict[str, Any]) -> list[Table]:
    """ε and time per call, privtab against dp_accounting in the same run."""
    peer_eps, peer_t = res["dp_accounting_epsilon"], res["dp_accounting_seconds_per_call"]
    ratio = "—" if res["ratio"] is None else f"{res['ratio']:,.0f}×"
    rows = [
        [
            "ε",
            f"{res['ours_epsilon']:.6f}",
            "—" if peer_eps is None else f"{peer_eps:.6f}",
            "—" if peer_eps is None else f"privtab tighter by {peer_eps - res['ours_epsilon']:.1e}",
        ],
        [
            "time per scalar call",
            f"{res['ours_seconds_per_call'] * 1e6:,.1f} µs",
            "—" if peer_t is None else f"{peer_t * 1e6:,.0f} µs",
            ratio,
        ],
        [
            "time per value, 10⁵-element array",
            f"{res['ours_vectorised_seconds_per_value'] * 1e6:,.2f} µs",
            "—",
            "",
        ],
    ]
    title = f"zCDP → (ε, δ), ρ = {res['rho']}, δ = {res['delta']:g}"
    cols = ["", "privtab zcdp_epsilon (optimal)", "dp_accounting RdpAccountant", "ratio"]
    return [table(title, cols, rows)]
