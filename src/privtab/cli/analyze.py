"""``privtab analyze ci|combine|test|postprocess``: analyse noisy releases correctly.

Works on values given on the command line or on a SafeTab release directory
(``--release DIR``, its thresholds and plan read from its ``release.json``; ``--out DIR``
writes the analysed tables as Parquet with a ``release.json`` pointing to the source);
``analyze ci`` also on the derived folder of ``privtab topdown gls`` (intervals from each
estimate and its standard deviation). See ``docs/analysis.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from privtab._options import numbers, open_unit
from privtab.cli._render import JsonOption, add_group, emit, fail, usage_errors
from privtab.report.text import fields_table

if TYPE_CHECKING:
    from privtab.mechanisms import NoiseMechanism

MECHANISMS = "laplace, geometric, gaussian, discrete_gaussian"
Mechanism = Annotated[str | None, typer.Option("--mechanism", help=f"One of: {MECHANISMS}.")]
Epsilon = Annotated[float | None, typer.Option("--epsilon", help="ε (laplace, geometric).")]
Rho = Annotated[float | None, typer.Option("--rho", help="ρ (gaussian, discrete_gaussian).")]
Sensitivity = Annotated[float, typer.Option("--sensitivity", help="Sensitivity Δ.")]
Release = Annotated[
    Path | None,
    typer.Option(
        "--release",
        help="A SafeTab-P or SafeTab-H release, or (analyze ci) a folder of privtab topdown gls.",
    ),
]
Out = Annotated[
    Path | None, typer.Option("--out", help="With --release: write the tables to this folder.")
]
Overwrite = Annotated[
    bool, typer.Option("--overwrite", help="Replace an --out folder privtab's analyze wrote.")
]


def register(app: typer.Typer) -> None:
    help = "Intervals, combined estimates, DP-aware tests and post-processing of noisy releases."
    commands = {"ci": ci, "combine": combine, "test": dp_test, "postprocess": postprocess}
    add_group(app, "analyze", help, commands)


def _mechanism(
    name: str | None, epsilon: float | None, rho: float | None, sensitivity: float
) -> NoiseMechanism:
    from privtab.mechanisms import mechanism_from_spec

    if name is None:
        fail(f"--mechanism is required ({MECHANISMS})")
    with usage_errors():
        return mechanism_from_spec(name, epsilon=epsilon, rho=rho, sensitivity=sensitivity)


def _on_release(
    command: str, release: Path, out: Path | None, overwrite: bool, as_json: bool, **opts: Any
) -> None:
    """``analyze COMMAND --release``: :func:`privtab.analysis.derived.analyze_release`."""
    from privtab.analysis.derived import analyze_release

    with usage_errors(FileNotFoundError, ValueError):
        payload = analyze_release(command, release, out=out, overwrite=overwrite, **opts)
    emit(payload, as_json, title=f"analyze {command} of {release}")


def ci(
    mechanism: Mechanism = None,
    epsilon: Epsilon = None,
    rho: Rho = None,
    sensitivity: Sensitivity = 1.0,
    value: float | None = typer.Option(None, "--value", help="One released value."),
    values: str | None = typer.Option(None, "--values", help="Released values 'a,b,c'."),
    level: float = typer.Option(0.95, "--level", help="Confidence level."),
    simultaneous: str | None = typer.Option(
        None, "--simultaneous", help="For --values: a joint box, 'exact' or 'bonferroni'."
    ),
    combination: str | None = typer.Option(
        None,
        "--combination",
        help="For --values: an interval for their 'sum', 'difference' "
        "(first minus second) or 'ratio' (first over second).",
    ),
    release: Release = None,
    out: Out = None,
    overwrite: Overwrite = False,
    as_json: JsonOption = False,
) -> None:
    """Exact noise intervals for released values (course §4.2).

    Example: privtab analyze ci --mechanism laplace --epsilon 1 --value 4 --level 0.9
    """
    from privtab.analysis.summaries import interval_summary

    open_unit("--level", level)
    if release is not None:
        return _on_release("ci", release, out, overwrite, as_json, level=level)
    if (value is None) == (values is None):
        fail("give exactly one of --value, --values or --release")
    mech = _mechanism(mechanism, epsilon, rho, sensitivity)
    vs = [value] if value is not None else numbers(str(values), "--values")
    box = None if value is not None or combination else simultaneous or "exact"
    with usage_errors(ValueError, TypeError):
        payload = interval_summary(mech, level, vs, combination=combination, simultaneous=box)
    emit(payload, as_json, title=f"{level:.0%} interval")


def combine(
    values: str | None = typer.Option(None, "--values", help="Measurements of one target."),
    variances: str | None = typer.Option(None, "--variances", help="Their noise variances."),
    design: str | None = typer.Option(
        None, "--design", help="GLS design matrix, rows separated by ';' ('1,0;0,1;1,1')."
    ),
    contrast: str | None = typer.Option(
        None, "--contrast", help="With --design: the linear combination of unknowns to report."
    ),
    release: Release = None,
    level: float | None = typer.Option(None, "--level", help="Add exact combined intervals."),
    thresholds: str | None = typer.Option(
        None,
        "--thresholds",
        help="Stage-1 thresholds θ (default and only allowed value: the release's own).",
    ),
    min_threshold_sd: float | None = typer.Option(
        None, "--min-threshold-sd", help="Keep COUNT alone where stage 1 is this close to a θ."
    ),
    out: Out = None,
    overwrite: Overwrite = False,
    as_json: JsonOption = False,
) -> None:
    """Inverse-variance / GLS combination of noisy measurements (course §4.1).

    Example: privtab analyze combine --values 2,7 --variances 17.834,35.669 --json
    """
    from privtab.analysis.summaries import combine_values

    if release is not None:
        th = numbers(thresholds, "--thresholds") if thresholds else None
        return _on_release(
            "combine", release, out, overwrite, as_json,
            level=level, thresholds=th, min_threshold_sd=min_threshold_sd,
        )  # fmt: skip
    if values is None or variances is None:
        fail("give --values and --variances (or --release)")
    rows = None if design is None else [numbers(r, "--design") for r in design.split(";")]
    c = None if contrast is None else numbers(contrast, "--contrast")
    with usage_errors():
        payload = combine_values(numbers(values, "--values"), numbers(variances, "--variances"),
                                 rows, c)  # fmt: skip
    emit(payload, as_json, title="combined estimate")


def dp_test(
    observed: float = typer.Option(..., "--observed", help="The released (noisy) count."),
    n: int = typer.Option(..., "--n", min=1, help="Sample size."),
    p0: float = typer.Option(..., "--p0", help="Null proportion."),
    mechanism: Mechanism = None,
    epsilon: Epsilon = None,
    rho: Rho = None,
    sensitivity: Sensitivity = 1.0,
    method: str = typer.Option("exact", "--method", help="exact or monte-carlo."),
    alternative: str = typer.Option("two-sided", "--alternative", help="two-sided|greater|less"),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level of the conclusion."),
    reps: int = typer.Option(10_000, "--reps", min=1, help="Monte Carlo draws."),
    seed: int | None = typer.Option(
        None, "--seed", help="Seed the Monte Carlo simulation (reproducible; not secure)."
    ),
    as_json: JsonOption = False,
) -> None:
    """Test H0: p = p0 from a noisy count with the correct null law (course §4.4).

    Example: privtab analyze test --observed 34.21 --n 100 --p0 0.255 --mechanism laplace
    --epsilon 0.5
    """
    from privtab.analysis.summaries import proportion_test_summary

    mech = _mechanism(mechanism, epsilon, rho, sensitivity)
    with usage_errors(ValueError, TypeError):
        payload = proportion_test_summary(
            observed, n, p0, mech, method=method, alternative=alternative, reps=reps,
            seed=seed, alpha=alpha,
        )  # fmt: skip
    shown = fields_table("DP-aware test", {k: v for k, v in payload.items() if k != "conclusion"})
    emit(payload, as_json, [shown], lines=[payload["conclusion"]])


def postprocess(
    values: str | None = typer.Option(None, "--values", help="Noisy parts 'a,b,c'."),
    total: float | None = typer.Option(None, "--total", help="Noisy total of the parts."),
    variance: float | None = typer.Option(None, "--variance", help="Noise variance of a part."),
    total_variance: float | None = typer.Option(
        None, "--total-variance", help="Noise variance of the total."
    ),
    nonnegative: bool = typer.Option(
        True, "--nonnegative/--allow-negative", help="Constrain to non-negative values."
    ),
    round_: bool = typer.Option(False, "--round", help="Also round to integers."),
    release: Release = None,
    out: Out = None,
    overwrite: Overwrite = False,
    as_json: JsonOption = False,
) -> None:
    """Non-negativity, rounding and total/parts consistency (no privacy cost).

    Example: privtab analyze postprocess --values 5,-2,7 --total 12 --variance 2
    --total-variance 2 --json
    """
    from privtab.analysis.summaries import postprocess_values

    if release is not None:
        opts = {"nonnegative": nonnegative, "round_": round_}
        return _on_release("postprocess", release, out, overwrite, as_json, **opts)
    if values is None:
        fail("give --values (or --release)")
    with usage_errors():
        payload = postprocess_values(
            numbers(values, "--values"), total=total, variance=variance,
            total_variance=total_variance, nonnegative=nonnegative, round_=round_,
        )  # fmt: skip
    emit(payload, as_json, title="post-processed values")
