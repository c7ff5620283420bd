"""Benchmark: exact secure noise samplers, privtab vs OpenDP, measured in the same run.

Run: ``privtab bench samplers [--n N] [--json]``.

For the discrete Gaussian (σ ∈ {1, 10, 1000}) and the discrete Laplace (scale ∈ {1, 10,
1000}) it times

* privtab's exact samplers with the default secure source (AES-256-CTR keyed from
  ``os.urandom``) and, for reference, with raw ``os.urandom`` (:class:`OSEntropySource`);
* OpenDP's exact samplers (``make_gaussian`` / ``make_laplace`` on a vector of ``int`` —
  its discrete Gaussian and discrete Laplace, sampled exactly in Rust from OS entropy),
  when ``opendp`` is installed (``pip install -e '.[bench]'``);
* for the discrete Gaussian, privtab's rejection method beside the default (which is the
  certified CDF table for 1/16 ≤ σ² ≤ 2¹⁴), and both per call size (10³ … 10⁶ draws per
  call, at σ² = 214437516707/21246481300, TopDown's block-level detailed query): the
  per-call overhead that matters when noise is drawn per parent geounit.

Each figure is the best of ``repeat`` timed runs (after a warm-up), in samples per second.
OpenDP is timed on fewer samples (it is ~100× slower) — per-sample rates are comparable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from privtab.bench._common import Table, machine, table, versions
from privtab.random import SecureSource, discrete_gaussian, discrete_laplace
from privtab.random.gaussian_sampler import rejection_discrete_gaussian
from privtab.random.sources import OSEntropySource

#: what the benchmark measures, for docs/benchmarks.md
ABOUT = """\
Both libraries sample exactly and from secure randomness: privtab with its default source
(AES-256-CTR keyed from `os.urandom`), OpenDP with `make_gaussian` / `make_laplace` on a
vector of `int` (its exact discrete Gaussian / discrete Laplace, in Rust). The last column
is privtab with raw `os.urandom` for reference. Each figure is the best of `--repeat` timed
runs after a warm-up; OpenDP is timed on fewer samples (per-sample rates are comparable).
privtab's discrete Gaussian is the certified CDF table for 1/16 ≤ σ² ≤ 2¹⁴ and rejection
from the discrete Laplace otherwise; the "rejection" column times the rejection method at
every σ in the same run. The second table times both per call size at σ² =
214437516707/21246481300 (TopDown's block-level detailed query, ~85,000 draws per
33-block parent), each size repeated to ≥ 2·10⁶ draws.
Targets (σ = scale = 10): discrete Gaussian ≥ 5 M/s and ≥ 50× OpenDP; discrete Laplace
≥ 10 M/s and ≥ 50× OpenDP. Where the time goes: `docs/random.md`.
"""

SCALES = (1, 10, 1000)
#: the call-size table: σ² of TopDown's block-level detailed query, draws per call
CALL_SIGMA2 = Fraction(214437516707, 21246481300)
CALL_SIZES = (1_000, 10_000, 100_000, 1_000_000)
TARGETS = {
    "discrete_gaussian": {"scale": 10, "ours_per_s": 5_000_000, "ratio": 50},
    "discrete_laplace": {"scale": 10, "ours_per_s": 10_000_000, "ratio": 50},
}


def _best_rate(fn: Callable[[], Any], n: int, repeat: int) -> float:
    fn()  # warm-up (caches, first-use checks)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return n / best


def _ours(sampler: str, scale: int, n: int, repeat: int, source: Any) -> float:
    if sampler == "discrete_gaussian":
        sigma2 = scale * scale
        return _best_rate(lambda: discrete_gaussian(sigma2, n, source=source), n, repeat)
    if sampler == "rejection":
        sigma2 = scale * scale
        return _best_rate(lambda: rejection_discrete_gaussian(sigma2, n, source=source), n, repeat)
    return _best_rate(lambda: discrete_laplace(scale, n, source=source), n, repeat)


def _call_sizes(repeat: int, source: Any) -> list[dict[str, Any]]:
    """Draws per second of both discrete Gaussian methods per call size (module doc)."""
    out = []
    for size in CALL_SIZES:
        calls = max(1, 2_000_000 // size)
        rates = {}
        for name, fn in (("table", discrete_gaussian), ("rejection", rejection_discrete_gaussian)):

            def batch(fn: Callable[..., Any] = fn, size: int = size, calls: int = calls) -> None:
                for _ in range(calls):
                    fn(CALL_SIGMA2, size, source=source)

            rates[name] = _best_rate(batch, size * calls, repeat)
        out.append(
            {
                "size": size,
                "calls": calls,
                "table_per_s": rates["table"],
                "rejection_per_s": rates["rejection"],
                "table_us_per_call": 1e6 * size / rates["table"],
                "ratio": rates["table"] / rates["rejection"],
            }
        )
    return out


def _opendp_factory() -> Callable[[str, int], Callable[[list[int]], Any]] | None:
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")

    def make(sampler: str, scale: int) -> Callable[[list[int]], Any]:
        domain = dp.vector_domain(dp.atom_domain(T=int))
        if sampler == "discrete_gaussian":
            return dp.m.make_gaussian(domain, dp.l2_distance(T=int), scale=float(scale))  # type: ignore[no-any-return]
        return dp.m.make_laplace(domain, dp.l1_distance(T=int), scale=float(scale))  # type: ignore[no-any-return]

    return make


def run(
    n: int = 2_000_000, repeat: int = 3, opendp_n: int | None = None, work: Path | None = None
) -> dict[str, Any]:
    """Measure every (sampler, scale); returns the JSON-ready result (no files: ``work``
    is unused)."""
    if n < 1:
        raise ValueError("n must be positive")
    peer_n = opendp_n if opendp_n is not None else max(2_000, min(n // 20, 50_000))
    factory = _opendp_factory()
    secure, urandom = SecureSource(), OSEntropySource()
    results = []
    for sampler in ("discrete_gaussian", "discrete_laplace"):
        for scale in SCALES:
            ours = _ours(sampler, scale, n, repeat, secure)
            ours_os = _ours(sampler, scale, max(n // 4, 1), repeat, urandom)
            rejection = (
                _ours("rejection", scale, n, repeat, secure)
                if sampler == "discrete_gaussian"
                else None
            )
            peer: float | None = None
            if factory is not None:
                meas = factory(sampler, scale)
                zeros = [0] * peer_n

                def draw(meas: Callable[[list[int]], Any] = meas, zeros: list[int] = zeros) -> Any:
                    return meas(zeros)

                peer = _best_rate(draw, peer_n, repeat)
            results.append(
                {
                    "sampler": sampler,
                    "scale": scale,
                    "ours_per_s": ours,
                    "opendp_per_s": peer,
                    "ratio": None if peer is None else ours / peer,
                    "ours_os_urandom_per_s": ours_os,
                    "ours_rejection_per_s": rejection,
                }
            )
    return {
        "results": results,
        "call_sigma2": str(CALL_SIGMA2),
        "call_sizes": _call_sizes(repeat, secure),
        "n": n,
        "opendp_n": peer_n if factory is not None else None,
        "repeat": repeat,
        "targets": TARGETS,
        "targets_met": _targets_met(results),
        "machine": {**machine(), "numpy": np.__version__, **versions("opendp")},
    }


def _targets_met(results: list[dict[str, Any]]) -> dict[str, bool | None]:
    out: dict[str, bool | None] = {}
    for sampler, t in TARGETS.items():
        row = next(r for r in results if r["sampler"] == sampler and r["scale"] == t["scale"])
        fast = row["ours_per_s"] >= t["ours_per_s"]
        out[sampler] = None if row["ratio"] is None else bool(fast and row["ratio"] >= t["ratio"])
        out[sampler + "_throughput"] = bool(fast)
    return out


def tables(res: dict[str, Any]) -> list[Table]:
    """Samples per second of each sampler, privtab and OpenDP in the same run."""
    rows = []
    for r in res["results"]:
        peer = "—" if r["opendp_per_s"] is None else f"{r['opendp_per_s']:,.0f}"
        ratio = "—" if r["ratio"] is None else f"{r['ratio']:,.0f}×"
        rej = r.get("ours_rejection_per_s")
        rows.append(
            [
                r["sampler"].replace("_", " "),
                str(r["scale"]),
                f"{r['ours_per_s']:,.0f}",
                peer,
                ratio,
                f"{r['ours_os_urandom_per_s']:,.0f}",
                "—" if rej is None else f"{rej:,.0f}",
            ]
        )
    said = {True: "yes", False: "no", None: "not measured (no OpenDP)"}
    met = ", ".join(f"{k}: {said[v]}" for k, v in res["targets_met"].items())
    opendp_n = res["opendp_n"]
    title = (
        f"Exact secure samplers (privtab n = {res['n']:,}, OpenDP n = "
        f"{'—' if opendp_n is None else f'{opendp_n:,}'}, best of {res['repeat']})"
    )
    cols = [
        "sampler",
        "σ / scale",
        "privtab /s",
        "OpenDP /s",
        "ratio",
        "privtab, os.urandom /s",
        "privtab, rejection /s",
    ]
    out = [table(title, cols, rows, [f"targets met: {met}"])]
    if res.get("call_sizes"):
        size_rows = [
            [
                f"{c['size']:,}",
                f"{c['calls']:,}",
                f"{c['table_per_s']:,.0f}",
                f"{c['table_us_per_call']:,.1f}",
                f"{c['rejection_per_s']:,.0f}",
                f"{c['ratio']:.1f}×",
            ]
            for c in res["call_sizes"]
        ]
        out.append(
            table(
                f"Discrete Gaussian per call size (σ² = {res['call_sigma2']}, secure source)",
                ["draws per call", "calls", "table /s", "µs per call", "rejection /s", "ratio"],
                size_rows,
                [],
            )
        )
    return out
