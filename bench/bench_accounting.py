"""Benchmark: zCDP → (ε, δ) conversion speed and tightness, privtab vs dp_accounting.

Run: ``python bench/bench_accounting.py [--json]`` (dp_accounting from the ``bench`` extra).
dp_accounting has no zCDP type; a ρ-zCDP guarantee is the Gaussian mechanism with noise
multiplier σ = 1/√(2ρ), converted by its ``RdpAccountant`` on its default order grid.
"""

from __future__ import annotations

import json
import math
import sys
import time
from typing import Any

import numpy as np

from privtab.accounting import zcdp_epsilon


def _rate(fn: Any, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def run(n: int = 2000) -> dict[str, Any]:
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


def main() -> None:
    res = run()
    if "--json" in sys.argv:
        print(json.dumps(res, indent=2))
        return
    for k, v in res.items():
        print(f"{k:36s} {v}")


if __name__ == "__main__":
    main()
