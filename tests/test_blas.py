"""One BLAS thread reaches every BLAS library the solvers load (privtab._blas).

Each check runs in a fresh interpreter whose environment asks OpenBLAS for four threads
(``OPENBLAS_NUM_THREADS=4``; this suite's own setting of 1 would hide the bug): a limit
set before SciPy's OpenBLAS is loaded — the worker initializer's old behaviour — leaves
SciPy's library at four threads, and these checks fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_PROBE = """
import json, sys
from concurrent.futures import ProcessPoolExecutor
import multiprocessing
from privtab._blas import blas_threads, limit_blas_threads, one_blas_thread
mode = sys.argv[1]
if mode == "process":
    limit_blas_threads()
    import scipy.linalg, numpy as np
    scipy.linalg.cho_factor(np.eye(3) * 2.0)
    out = blas_threads()
elif mode == "context":
    with one_blas_thread():
        import scipy.linalg, numpy as np
        scipy.linalg.cho_factor(np.eye(3) * 2.0)
        out = blas_threads()
else:
    ctx = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(1, mp_context=ctx, initializer=limit_blas_threads) as pool:
        out = pool.submit(blas_threads).result()
print(json.dumps(out))
"""


def _probe(mode: str) -> dict[str, int]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    env["OPENBLAS_NUM_THREADS"] = "4"
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, mode], env=env, capture_output=True, text=True, check=True
    )
    threads: dict[str, int] = json.loads(out.stdout.strip().splitlines()[-1])
    return threads


@pytest.mark.parametrize("mode", ["process", "context", "worker"])
def test_every_loaded_blas_runs_one_thread(mode: str) -> None:
    threads = _probe(mode)
    assert threads, "no BLAS library found loaded"
    assert set(threads.values()) == {1}, threads
