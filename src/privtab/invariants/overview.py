"""What ``privtab invariants census|table|test`` compute, as JSON-ready results and tables.

* :func:`census_overview` — semantics seed §6.1: ρ-zCDP with an invariant is a²ρ-zCDP on
  invariant-conforming data, with ``a`` given, or computed from an invariant
  specification (:func:`~privtab.invariants.specs.invariant_from_spec`);
* :func:`table_release` — an r × c table released with its one-way margins exact (seed
  §5) by one of :data:`TABLE_MECHANISMS`;
* :func:`odds_ratio_overview` — the semi-private UMPU test of the odds ratio of a 2 × 2
  table (Thm 37), with its exact power against the naive DP and non-private tests.

Bad parameters raise :class:`privtab.errors.UsageError` (or ``ValueError`` from the
mechanisms). ``seed`` draws from a reproducible TEST source: the result is NOT private.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privtab.errors import UsageError

if TYPE_CHECKING:
    from privtab.report.text import Table

__all__ = [
    "TABLE_MECHANISMS",
    "census_overview",
    "census_table",
    "check_table_output",
    "odds_ratio_lines",
    "odds_ratio_overview",
    "table_release",
    "table_view",
    "write_table_csv",
]

LOG = logging.getLogger("privtab.invariants")
TABLE_MECHANISMS = ("projected-gaussian", "optimal-knorm", "naive-gaussian", "naive-l1",
                    "naive-l2", "naive-linf")  # fmt: skip


def _release_quietly(release: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a release whose insecure-source warning the caller has already given."""
    from privtab.mechanisms import InsecureReleaseWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureReleaseWarning)
        return release(*args, **kwargs)


def _source(seed: int | None) -> Any:
    from privtab.random import SeededSource

    return None if seed is None else SeededSource(seed)


def census_overview(
    rho: float, semi_adjacent: int | None, delta: float, invariant: str | None = None
) -> dict[str, Any]:
    """ρ-zCDP → a²ρ-zCDP and ε at δ (seed §6.1); ``a`` defaults to 2 (state totals)."""
    from privtab.invariants import census_semi_dp
    from privtab.invariants.specs import invariant_from_spec

    if not (rho >= 0 and math.isfinite(rho)):
        raise UsageError(f"--rho must be a non-negative number, got {rho}")
    extra: dict[str, Any] | None = None
    if invariant is not None:
        if semi_adjacent is not None:
            raise UsageError("give --semi-adjacent or --invariant, not both")
        description, res = invariant_from_spec(invariant)
        a = res.value
        if not res.exact:
            LOG.warning(
                "the semi-adjacent parameter is only bounded (%s ≤ a ≤ %s); using %s",
                res.lower,
                res.upper,
                a,
            )
        extra = {"description": description, "semi_adjacent": res.to_dict()}
    else:
        a = 2 if semi_adjacent is None else semi_adjacent
    out: dict[str, Any] = dict(census_semi_dp(rho, a, delta).to_dict())
    if extra is not None:
        out["invariant"] = extra
    return out


def census_table(ov: dict[str, Any]) -> Table:
    """The human form of :func:`census_overview`."""
    from privtab.report import round_up_sig as up
    from privtab.report.text import table

    rows = [
        ("advertised", up(ov["rho"]), up(ov["epsilon_advertised"], 5),
         up(ov["epsilon_advertised_optimal"], 5)),
        ("Semi-DP", up(ov["rho_semi"]), up(ov["epsilon_semi"], 5),
         up(ov["epsilon_semi_optimal"], 5)),
    ]  # fmt: skip
    inv = ov.get("invariant")
    notes = [] if inv is None else [
        f"invariant: {inv['description']}; a = {ov['semi_adjacent']} "
        f"({inv['semi_adjacent']['method']})"
    ]  # fmt: skip
    return table(
        f"Semi-DP with semi-adjacent parameter a = {ov['semi_adjacent']} (δ = {ov['delta']:g})",
        ("", "ρ (zCDP)", "ε, Bun–Steinke", "ε, tight"),
        rows,
        notes,
    )


def _table_mechanism(
    name: str, r: int, c: int, a: int, mu: float | None, rho: float | None, eps: float | None
) -> Any:
    from privtab.invariants import NaiveGaussian, NaiveKNorm, OptimalKNorm, ProjectedGaussian

    if name not in TABLE_MECHANISMS:
        raise UsageError(f"--mechanism must be one of {', '.join(TABLE_MECHANISMS)}, got {name!r}")
    if name in ("projected-gaussian", "naive-gaussian"):
        if eps is not None:
            raise UsageError(
                f"--epsilon applies to the K-norm mechanisms; {name} takes --mu or --rho"
            )
        if (mu is None) == (rho is None):
            raise UsageError(f"{name} needs exactly one of --mu or --rho")
        m = float(mu) if mu is not None else math.sqrt(2.0 * float(rho or 0))
        if not (m > 0 and math.isfinite(m)):
            raise UsageError(f"the privacy parameter must be positive, got μ = {m}")
        if name == "projected-gaussian":
            return ProjectedGaussian(r, c, a=a, mu=m)
        return NaiveGaussian(r, c, a=max(a, 1), mu=m)
    if mu is not None or rho is not None:
        raise UsageError(f"{name} is a K-norm mechanism: give --epsilon, not --mu/--rho")
    if eps is None or not (eps > 0 and math.isfinite(eps)):
        raise UsageError(f"{name} needs --epsilon > 0")
    if name == "optimal-knorm":
        if (r - 1) * (c - 1) >= 8:
            LOG.warning(
                "computing the convex hull of the sensitivity space in %d dimensions: this can "
                "take minutes",
                (r - 1) * (c - 1),
            )
        return OptimalKNorm(r, c, a=a, epsilon=eps)
    return NaiveKNorm(r, c, a=max(a, 1), epsilon=eps, norm=name.split("-")[1])  # type: ignore[arg-type]


def table_release(
    rows: Sequence[Sequence[int]],
    mechanism: str = "projected-gaussian",
    *,
    mu: float | None = None,
    rho: float | None = None,
    epsilon: float | None = None,
    semi_adjacent: int | None = None,
    integer: bool = False,
    seed: int | None = None,
) -> tuple[Any, dict[str, Any]]:
    """Release the table ``rows`` keeping its one-way margins exact (seed §5): the
    mechanism's release and its JSON-ready description (``a`` exact from the margins
    unless a larger ``semi_adjacent`` is given). A ``seed`` is a reproducible TEST source:
    warned, the output is NOT private."""
    from privtab.invariants import CountInvariant, Schema, semi_adjacent_parameter

    _warn_seeded(seed)

    x = np.array(rows, dtype=np.int64)
    r, c = x.shape
    exact = semi_adjacent_parameter(CountInvariant.one_way_margins(Schema.grid(r, c), x))
    a = exact.value if semi_adjacent is None else semi_adjacent
    if a < exact.value:
        raise UsageError(
            f"--semi-adjacent {a} is below the semi-adjacent parameter of these margins "
            f"({exact.value})"
        )
    if a == 0:
        LOG.warning("only one table has these margins (a = 0): there is nothing left to protect")
    mech = _table_mechanism(mechanism, r, c, a, mu, rho, epsilon)
    rel = _release_quietly(mech.release, x, source=_source(seed), allow_insecure=seed is not None,
                           integer=integer)  # fmt: skip
    out = rel.to_dict()
    out["semi_adjacent"] = exact.to_dict() | {"used": a}
    out["expected_l2_squared"] = mech.expected_squared_l2()
    if hasattr(mech, "sigma"):
        out["sigma"] = mech.sigma
    return rel, out


def _fmt(v: Any) -> str:
    return str(v) if isinstance(v, int) else f"{float(v):.6g}"


def _released(rel: Any) -> Any:
    return rel.integer_table if rel.integer_table is not None else rel.table


def _warn_seeded(seed: int | None) -> None:
    if seed is not None:
        LOG.warning(f"--seed {seed}: using a reproducible TEST source; the output is NOT private")


def check_table_output(output: Path, input_path: Path | None, overwrite: bool) -> None:
    """Refuse an ``--output`` that would overwrite the ``--input``, is a folder, or exists
    (unless ``overwrite``) — before any noise is drawn. Raises
    :class:`privtab.errors.UsageError`."""
    from privtab.errors import UsageError

    if input_path is not None and output.resolve() == input_path.resolve():
        raise UsageError(f"--output {output} is the --input file; choose another --output")
    if output.is_dir():
        raise UsageError(f"--output {output} is a folder; give a file name")
    if output.exists() and not overwrite:
        raise UsageError(f"--output {output} exists (use --overwrite to replace it)")


def write_table_csv(path: Path, rel: Any) -> None:
    """Write the released table as CSV (atomically, 0644)."""
    from privtab.atomic import atomic_write

    buf = io.StringIO(newline="")
    csv.writer(buf).writerows([list(map(_fmt, row)) for row in _released(rel).tolist()])
    atomic_write(path.resolve(), buf.getvalue())


def table_view(rel: Any, mechanism: str, expected_l2: float) -> Table:
    """The released table with its exact margins, as a table."""
    from privtab.report.text import table

    shown = _released(rel)
    r, c = shown.shape
    rows = [(*[_fmt(v) for v in shown[i].tolist()], str(int(rel.row_margins[i]))) for i in range(r)]
    rows.append((*[str(int(v)) for v in rel.col_margins], str(int(rel.row_margins.sum()))))
    notes = [f"largest margin deviation: {rel.margin_error:.3g}; E‖noise‖₂² = {expected_l2:.4g}"]
    if not rel.private:
        notes.append("NOT PRIVATE: produced with a test seed")
    cols = (*[f"col {j + 1}" for j in range(c)], "row sum")
    return table(f"{mechanism}: {rel.guarantee}", cols, rows, notes, left=0)


def odds_ratio_overview(
    rows: Sequence[Sequence[int]],
    *,
    epsilon: float | None = None,
    mu: float | None = None,
    theta0: float = 1.0,
    alpha: float = 0.05,
    alternative: str = "greater",
    power_at: Sequence[float] = (),
    seed: int | None = None,
) -> dict[str, Any]:
    """The semi-private UMPU test of the odds ratio (Thm 37: Tulap noise for ε-DP,
    Gaussian for μ-GDP) and its exact power at each odds ratio of ``power_at``. A ``seed``
    is a reproducible TEST source: warned, the output is NOT private."""
    from privtab.invariants import OddsRatioTest
    from privtab.invariants.umpu import (
        GaussianCND,
        Margins2x2,
        TulapCND,
        fisher_exact_umpu_power,
        naive_test,
    )

    _warn_seeded(seed)

    x = np.array(rows, dtype=np.int64)
    if x.shape != (2, 2):
        raise UsageError(
            f"the odds-ratio test needs a 2 × 2 table, got {x.shape[0]} × {x.shape[1]}"
        )
    if (epsilon is None) == (mu is None):
        raise UsageError("give exactly one of --epsilon (Tulap noise) or --mu (Gaussian noise)")
    if alternative not in ("greater", "less"):
        raise UsageError(f"--alternative must be 'greater' or 'less', got {alternative!r}")
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha must lie strictly between 0 and 1, got {alpha}")
    cnd: Any = TulapCND(float(epsilon)) if epsilon is not None else GaussianCND(float(mu or 0))
    tst = OddsRatioTest(cnd, theta0=theta0, alternative=alternative)  # type: ignore[arg-type]
    res = _release_quietly(tst.run, x, alpha, source=_source(seed), allow_insecure=seed is not None)
    margins = Margins2x2.of(x)
    naive = naive_test(cnd, 3, theta0=theta0, alternative=alternative)  # type: ignore[arg-type]
    out: dict[str, Any] = res.to_dict()
    power = [
        {
            "theta": th,
            "semi_private": tst.power(th, margins, alpha),
            "naive_dp": naive.power(th, margins, alpha),
            "non_private": (
                fisher_exact_umpu_power(th, margins, alpha, theta0)
                if alternative == "greater"
                else None
            ),
        }
        for th in power_at
    ]
    if power:
        out["power"] = power
    return out


def odds_ratio_lines(ov: dict[str, Any], alpha: float) -> list[str]:
    """The human form of :func:`odds_ratio_overview`: the decision in words."""
    reject = "REJECT" if ov["reject"] else "do not reject"
    lines = [
        f"released statistic T = x₁₁ + noise = {ov['statistic']:.4f}",
        f"p-value = {ov['p_value']:.4g}; critical value m = {ov['critical_value']:.4f}; "
        f"{reject} H₀ at α = {alpha:g}",
        f"guarantee: {ov['guarantee']}",
    ]
    lines += [
        f"power at θ = {p['theta']:g}: semi-private {p['semi_private']:.4f}, "
        f"naive DP {p['naive_dp']:.4f}"
        for p in ov.get("power", [])
    ]
    if not ov.get("private", True):
        lines.append("NOT PRIVATE: produced with a test seed")
    return lines
