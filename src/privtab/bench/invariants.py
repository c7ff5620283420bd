"""Benchmark: ℓ₂ cost of invariant-aware vs naive table mechanisms (seed §5.2, Figures 2–3).

Run: ``privtab bench invariants [--json] [--replicates 30] [--n 1000] [--big]``.

Set-up of ``semi-dp-invariant-statistics.txt`` §5.2: an r × c table drawn once per replicate
from Multinomial(n, p) with Model I (``p_k = 1/rc``) or Model II (``p_k ∝ k``, cells in
row-major order); all one-way margins published (a = 3); every mechanism calibrated to the
same Semi-DP target (μ-GDP or ε-DP on tables with equal margins ≤ 3 replacements apart).
Reported per mechanism: the mean ℓ₂ cost ``‖M(x) − x‖₂`` over the replicates (± standard
error), the exact root-mean-square cost ``√E‖noise‖₂²``, and the mean cost after the
integer post-processing (non-negative integers with the margins kept; ours only).

There is no peer library: no other library implements Semi-DP mechanisms (OpenDP only warns
that invariants weaken its guarantees). The baselines are the seed's naive mechanisms —
ordinary replace-one mechanisms with sensitivity inflated by a = 3 (group privacy) — which
is what one would run with OpenDP/Tumult/diffprivlib today. The seed's own calibration of
Algorithm 1 (Prop. 32's Δ₂ = 2) is also shown for r, c ≥ 3, where it is not private
(a 3-cycle between two tables has ‖Δ‖₂ = √6; see docs/invariants.md).

Randomness: a seeded source (the outputs are for measurement only and are not private).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from privtab.bench._common import Table, machine, table, versions
from privtab.invariants import NaiveGaussian, NaiveKNorm, OptimalKNorm, ProjectedGaussian
from privtab.invariants.postprocess import nearest_integer_table
from privtab.random import SeededSource

#: what the benchmark measures, for docs/benchmarks.md
ABOUT = """\
Set-up of the Semi-DP seed §5.2: per replicate an r × c table drawn from Multinomial(n, p),
Model I `p_k = 1/rc`, Model II `p_k ∝ k`; both one-way margins invariant (a = 3); every
mechanism calibrated to the same Semi-DP target. Cells: mean ℓ₂ cost `‖M(x) − x‖₂` ± standard
error, and in brackets the exact RMS cost from the closed forms. No library implements
Semi-DP mechanisms, so the peer is the seed's naive baseline (sensitivity × 3, group
privacy), measured in privtab and with OpenDP's exact discrete Gaussian. The last Gaussian
column is the seed's own calibration, which is cheaper for r, c ≥ 3 only because it is not
private there (`docs/invariants.md` §4, §6). Outputs come from a seeded source (not private).
"""


class OpenDPNaiveGaussian:
    """The naive baseline run with OpenDP: its exact discrete Gaussian on the integer vector
    of cells (``make_gaussian`` with ``L2Distance<i32>``), scale ``σ = a√2/μ``. OpenDP's
    zCDP map is ``ρ = d²/(2σ²)``; at the replace-one group distance ``d = a√2`` that is
    ``μ²/2``, the same Semi-DP target (OpenDP's ``map`` only takes integer ``d``: the
    formula is checked at ``d = 4`` in :func:`_opendp_gaussian`)."""

    def __init__(self, r: int, c: int, mu: float, a: int = 3) -> None:
        self.r, self.c = r, c
        self.sigma = a * math.sqrt(2.0) / mu
        self.meas = _opendp_gaussian(self.sigma)

    def expected_squared_l2(self) -> float:
        return self.sigma**2 * self.r * self.c

    def release(self, table: np.ndarray, **_: Any) -> Any:
        out = np.array(self.meas(table.reshape(-1).tolist()), dtype=np.float64).reshape(
            self.r, self.c
        )

        class _Rel:
            pass

        rel = _Rel()
        rel.table = out  # type: ignore[attr-defined]
        return rel


def _opendp_gaussian(sigma: float) -> Any:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    meas = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int), scale=sigma
    )
    assert abs(meas.map(4) - 16 / (2 * sigma**2)) < 1e-9 * max(1.0, 16 / (2 * sigma**2))  # type: ignore[no-untyped-call]
    return meas


def opendp_version() -> str | None:
    return versions("opendp")["opendp"]


def model_probs(model: str, r: int, c: int) -> np.ndarray:
    k = r * c
    if model == "I":
        return np.full(k, 1.0 / k)
    w = np.arange(1, k + 1, dtype=np.float64)
    return np.asarray(w / w.sum())


def measure(mech: Any, tables: list[np.ndarray], seed: int, integer: bool) -> dict[str, float]:
    src = SeededSource(seed)
    costs, int_costs, elapsed = [], [], 0.0
    for t in tables:
        t0 = time.perf_counter()
        rel = mech.release(t, source=src, allow_insecure=True)
        elapsed += time.perf_counter() - t0
        costs.append(float(np.linalg.norm(rel.table - t)))
        if integer:
            it = nearest_integer_table(rel.table, t.sum(axis=1), t.sum(axis=0))
            int_costs.append(float(np.linalg.norm(it - t)))
    out = {
        "mean_l2": float(np.mean(costs)),
        "se_l2": float(np.std(costs, ddof=1) / math.sqrt(len(costs))),
        "rms_exact": math.sqrt(mech.expected_squared_l2()),
        "seconds_per_release": elapsed / len(tables),
    }
    if integer:
        out["mean_l2_integer"] = float(np.mean(int_costs))
    return out


def run(
    replicates: int = 30, n: int = 1000, big: bool = False, work: Path | None = None
) -> dict[str, Any]:
    """Every mechanism on Model I/II tables; see the module docstring (no files)."""
    import warnings

    from privtab.mechanisms import InsecureReleaseWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureReleaseWarning)  # seeded: measurement only
        return _run(replicates, n, big)


def _run(replicates: int, n: int, big: bool) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    gauss_sizes = [(2, 2), (3, 3), (4, 4), (5, 5)]
    knorm_sizes = [(2, 2), (3, 3), (3, 4)] + ([(4, 4)] if big else [])
    seed = 1000
    for model in ("I", "II"):
        for r, c in sorted(set(gauss_sizes) | set(knorm_sizes)):
            rng = np.random.default_rng(1000 * r + 10 * c + (model == "II"))
            tables = [
                rng.multinomial(n, model_probs(model, r, c)).reshape(r, c)
                for _ in range(replicates)
            ]
            if (r, c) in gauss_sizes:
                for mu in (0.5, 1.0, 2.0):
                    mechs: list[tuple[str, Any, bool]] = [
                        ("projected-gaussian (ours)", ProjectedGaussian(r, c, mu=mu), True),
                        ("naive-gaussian", NaiveGaussian(r, c, mu=mu), False),
                    ]
                    if opendp_version() is not None:
                        mechs.append(
                            (
                                "naive, OpenDP discrete Gaussian",
                                OpenDPNaiveGaussian(r, c, mu),
                                False,
                            )
                        )
                    if min(r, c) >= 3:
                        mechs.append(
                            (
                                "projected-gaussian, seed's Δ₂=2 (NOT private)",
                                ProjectedGaussian(r, c, mu=mu, paper_space=True),
                                False,
                            )
                        )
                    for name, mech, integer in mechs:
                        seed += 1
                        results.append(
                            {
                                "model": model,
                                "table": f"{r}x{c}",
                                "family": "gaussian",
                                "param": f"mu={mu:g}",
                                "mechanism": name,
                            }
                            | measure(mech, tables, seed, integer)
                        )
            if (r, c) in knorm_sizes:
                for eps in (0.5, 1.0, 2.0):
                    t0 = time.perf_counter()
                    opt = OptimalKNorm(r, c, epsilon=eps)
                    _ = opt.polytope
                    hull_s = time.perf_counter() - t0
                    kmechs: list[tuple[str, Any, bool]] = [("optimal K-norm (ours)", opt, True)] + [
                        (f"naive {norm}", NaiveKNorm(r, c, epsilon=eps, norm=norm), False)
                        for norm in ("l1", "l2", "linf")
                    ]
                    for name, mech, integer in kmechs:
                        seed += 1
                        row: dict[str, Any] = {
                            "model": model,
                            "table": f"{r}x{c}",
                            "family": "knorm",
                            "param": f"eps={eps:g}",
                            "mechanism": name,
                        }
                        row |= measure(mech, tables, seed, integer)
                        if mech is opt:
                            row["hull_seconds"] = hull_s
                            row["rejection_acceptance"] = opt.polytope.acceptance
                        results.append(row)
            print(f"done model {model} {r}x{c}", file=sys.stderr, flush=True)
    return {
        "machine": {**machine(), **versions("opendp")},
        "opendp": opendp_version(),
        "replicates": replicates,
        "n": n,
        "results": results,
    }


def _cell(r: dict[str, Any] | None) -> str:
    if r is None:
        return "—"
    return f"{r['mean_l2']:.2f} ± {r['se_l2']:.2f} ({r['rms_exact']:.2f})"


def _group(res: list[dict[str, Any]], key: tuple[str, str, str, str]) -> dict[str, dict[str, Any]]:
    return {
        r["mechanism"]: r for r in res if (r["family"], r["model"], r["table"], r["param"]) == key
    }


def _gaussian_rows(res: list[dict[str, Any]], keys: list[tuple[str, str, str, str]]) -> Table:
    cols = [
        "model",
        "table",
        "μ",
        "ours: projected Gaussian",
        "ours, integer",
        "naive (privtab)",
        "naive (OpenDP)",
        "naive/ours",
        "seed's Δ₂ = 2 (not private)",
    ]
    rows = []
    for key in keys:
        g = _group(res, key)
        ours, naive = g["projected-gaussian (ours)"], g["naive-gaussian"]
        paper = next((v for k, v in g.items() if "NOT private" in k), None)
        rows.append(
            [
                key[1],
                key[2],
                key[3].split("=")[1],
                _cell(ours),
                f"{ours['mean_l2_integer']:.2f}",
                _cell(naive),
                _cell(g.get("naive, OpenDP discrete Gaussian")),
                f"{naive['mean_l2'] / ours['mean_l2']:.2f}",
                _cell(paper) if paper else "(same as ours)",
            ]
        )
    title = "Gaussian mechanisms, Semi-DP μ-GDP: mean ℓ₂ cost ± se (exact RMS)"
    return table(title, cols, rows)


def _knorm_rows(res: list[dict[str, Any]], keys: list[tuple[str, str, str, str]]) -> Table:
    cols = [
        "model",
        "table",
        "ε",
        "ours: optimal K-norm",
        "ours, integer",
        "naive ℓ₁ (Laplace)",
        "naive ℓ₂",
        "naive ℓ∞",
        "best naive/ours",
    ]
    rows = []
    for key in keys:
        g = _group(res, key)
        ours = g["optimal K-norm (ours)"]
        naives = [g[f"naive {n}"] for n in ("l1", "l2", "linf")]
        best = min(n["mean_l2"] for n in naives)
        rows.append(
            [key[1], key[2], key[3].split("=")[1], _cell(ours), f"{ours['mean_l2_integer']:.2f}"]
            + [_cell(n) for n in naives]
            + [f"{best / ours['mean_l2']:.2f}"]
        )
    title = "K-norm mechanisms, Semi-DP ε-DP: mean ℓ₂ cost ± se (exact RMS)"
    return table(title, cols, rows)


def _timing_rows(res: list[dict[str, Any]]) -> Table:
    cols = [
        "table",
        "projected Gaussian",
        "naive (privtab)",
        "naive (OpenDP)",
        "optimal K-norm",
        "hull (Qhull)",
        "box acceptance",
    ]
    rows = []
    for tab in sorted({r["table"] for r in res}):
        g = {
            **_group(res, ("gaussian", "I", tab, "mu=1")),
            **_group(res, ("knorm", "I", tab, "eps=1")),
        }

        def us(name: str, g: dict[str, dict[str, Any]] = g) -> str:
            row = g.get(name)
            return f"{row['seconds_per_release'] * 1e6:.0f} µs" if row else "—"

        k = g.get("optimal K-norm (ours)")
        rows.append(
            [
                tab,
                us("projected-gaussian (ours)"),
                us("naive-gaussian"),
                us("naive, OpenDP discrete Gaussian"),
                us("optimal K-norm (ours)"),
                f"{k['hull_seconds'] * 1e3:.1f} ms" if k else "—",
                f"{k['rejection_acceptance']:.3f}" if k else "—",
            ]
        )
    title = "Time per release (model I, μ = 1 / ε = 1) and the one-off convex hull"
    return table(title, cols, rows)


def tables(out: dict[str, Any]) -> list[Table]:
    """The ℓ₂ costs of the Gaussian and K-norm mechanisms, and the time per release."""
    res = out["results"]
    keys = sorted({(r["family"], r["model"], r["table"], r["param"]) for r in res})
    return [
        _gaussian_rows(res, [k for k in keys if k[0] == "gaussian"]),
        _knorm_rows(res, [k for k in keys if k[0] == "knorm"]),
        _timing_rows(res),
    ]
