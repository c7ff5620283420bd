"""``privtab analyze ci|combine|test|postprocess``: analyse noisy releases correctly.

Works on values given on the command line or on a SafeTab release directory
(``--release DIR``; ``--out DIR`` writes the augmented tables as Parquet). See
``docs/analysis.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from privtab.cli._common import fail, print_json, warn

if TYPE_CHECKING:
    from privtab.mechanisms import NoiseMechanism

MECHANISMS = "laplace, geometric, gaussian, discrete_gaussian"


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        name="analyze",
        help="Intervals, combined estimates, DP-aware tests and post-processing of noisy releases.",
        no_args_is_help=True,
    )
    sub.command("ci")(ci)
    sub.command("combine")(combine)
    sub.command("test")(dp_test)
    sub.command("postprocess")(postprocess)
    app.add_typer(sub, name="analyze")


# --------------------------------------------------------------------------- helpers
def _floats(text: str, name: str) -> list[float]:
    try:
        return [float(x) for x in text.replace(";", ",").split(",") if x.strip()]
    except ValueError:
        fail(f"{name} must be comma-separated numbers, got {text!r}")


def _mechanism(
    name: str | None, epsilon: float | None, rho: float | None, sensitivity: float
) -> NoiseMechanism:
    from privtab.mechanisms import mechanism_from_spec

    if name is None:
        fail(f"--mechanism is required ({MECHANISMS})")
    try:
        return mechanism_from_spec(name, epsilon=epsilon, rho=rho, sensitivity=sensitivity)
    except ValueError as exc:
        fail(str(exc))


def _num(x: float, integer: bool) -> float | int:
    return int(round(x)) if integer and float(x).is_integer() else x


def _write(out: Path | None, tables: dict[str, Any], rel: Any, overwrite: bool) -> list[str]:
    """Write ``tables`` as Parquet into the folder ``out`` (atomically, never over a folder
    privtab did not write, never inside the source release); each file keeps the source
    release's privacy status in its metadata, and a test release's NOT_PRIVATE marker."""
    if out is None:
        return []
    from privtab.atomic import atomic_directory
    from privtab.errors import UserError
    from privtab.release.marking import parquet_metadata, write_not_private

    private = rel.private is not False
    try:
        with atomic_directory(out, kind="analysis", overwrite=overwrite, protect=[rel.path]) as tmp:
            for name, df in tables.items():
                df.write_parquet(tmp / f"{name}.parquet", metadata=parquet_metadata(private))
            if not private:
                write_not_private(tmp, f"derived from the test release {rel.path}")
    except UserError as err:
        fail(str(err), code=err.exit_code)
    return [str(out / f"{name}.parquet") for name in tables]


def _load(release: Path) -> Any:
    from privtab.analysis.safetab import load_release

    try:
        rel = load_release(release)
    except (FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    if rel.private is False:
        warn(
            "THIS RELEASE IS NOT PRIVATE (seeded or noise-off test run): its counts carry no "
            "protection; every output derived from it is marked not private"
        )
    if rel.clamped:
        warn(
            "this release clamped counts at zero: intervals stay valid (true counts are "
            "≥ 0, so clamping only widens coverage) but variances and combinations are biased "
            "near zero"
        )
    return rel


# --------------------------------------------------------------------------- ci
def ci(
    mechanism: str | None = typer.Option(None, "--mechanism", help=f"One of: {MECHANISMS}."),
    epsilon: float | None = typer.Option(None, "--epsilon", help="ε (laplace, geometric)."),
    rho: float | None = typer.Option(None, "--rho", help="ρ (gaussian, discrete_gaussian)."),
    sensitivity: float = typer.Option(1.0, "--sensitivity", help="Sensitivity Δ (default 1)."),
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
    release: Annotated[
        Path | None, typer.Option("--release", help="A SafeTab release directory.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write t1/t2 with interval columns.")
    ] = None,
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace an --out folder privtab's analyze wrote."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Exact noise intervals for released values (course §4.2).

    Example: privtab analyze ci --mechanism laplace --epsilon 1 --value 4 --level 0.9
    """
    from privtab.analysis import intervals as iv
    from privtab.mechanisms.linear import is_discrete

    if not 0 < level < 1:
        fail(f"--level must lie strictly between 0 and 1, got {level}")
    payload: dict[str, Any]
    if release is not None:
        from privtab.analysis.safetab import add_intervals

        rel = _load(release)
        try:
            t1 = add_intervals(rel.t1, level)
            t1 = add_intervals(
                t1,
                level,
                count_col="STAGE1_COUNT",
                scale_col="STAGE1_NOISE_SCALE",
                variance_col="STAGE1_VARIANCE",
                prefix="STAGE1_",
            )
            t2 = add_intervals(rel.t2, level)
        except ValueError as exc:
            fail(str(exc))
        added = [c for c in t1.columns if c not in rel.t1.columns]
        payload = {
            "release": str(release),
            "level": level,
            "t1_rows": t1.height,
            "t2_rows": t2.height,
            "t1_columns_added": added,
            "t2_columns_added": [c for c in t2.columns if c not in rel.t2.columns],
            "written": _write(out, {"t1": t1, "t2": t2}, rel, overwrite),
        }
        if as_json:
            print_json(payload)
        else:
            typer.echo(t1.head(10))
            typer.echo(t2.head(10))
        return
    mech = _mechanism(mechanism, epsilon, rho, sensitivity)
    integer = is_discrete(mech)
    try:
        if value is not None and values is None:
            r = iv.noise_interval(value, mech, level)
            payload = {
                "lower": _num(r.lower, integer),
                "upper": _num(r.upper, integer),
                "estimate": _num(r.estimate, integer),
                "moe": r.moe,
                "level": r.level,
                "coverage": r.coverage,
                "method": r.method,
                "mechanism": mech.describe(),
            }
        elif values is not None and value is None:
            vs = _floats(values, "--values")
            if combination is not None:
                if combination == "sum":
                    r = iv.sum_interval(vs, mech, level)
                elif combination in ("difference", "ratio") and len(vs) != 2:
                    fail(f"--combination {combination} needs exactly two --values")
                elif combination == "difference":
                    r = iv.difference_interval(vs[0], vs[1], mech, mech, level)
                elif combination == "ratio":
                    r = iv.ratio_interval(vs[0], vs[1], mech, mech, level)
                else:
                    fail("--combination must be sum, difference or ratio")
                payload = {"combination": combination, **r.to_dict()}
                if combination != "ratio":
                    payload["lower"] = _num(r.lower, integer)
                    payload["upper"] = _num(r.upper, integer)
            else:
                method = simultaneous or "exact"
                if method not in ("exact", "bonferroni"):
                    fail("--simultaneous must be exact or bonferroni")
                s = iv.simultaneous_intervals(vs, mech, level, method)  # type: ignore[arg-type]
                payload = s.to_dict()
                if integer:
                    payload["lower"] = [_num(x, True) for x in s.lower.tolist()]
                    payload["upper"] = [_num(x, True) for x in s.upper.tolist()]
            payload["mechanism"] = mech.describe()
        else:
            fail("give exactly one of --value, --values or --release")
    except (ValueError, TypeError) as exc:
        fail(str(exc))
    if as_json:
        print_json(payload)
    else:
        for k, v in payload.items():
            typer.echo(f"{k}: {v}")


# --------------------------------------------------------------------------- combine
def combine(
    values: str | None = typer.Option(None, "--values", help="Measurements of one target."),
    variances: str | None = typer.Option(None, "--variances", help="Their noise variances."),
    design: str | None = typer.Option(
        None, "--design", help="GLS design matrix, rows separated by ';' ('1,0;0,1;1,1')."
    ),
    contrast: str | None = typer.Option(
        None, "--contrast", help="With --design: the linear combination of unknowns to report."
    ),
    release: Annotated[
        Path | None, typer.Option("--release", help="A SafeTab release directory.")
    ] = None,
    level: float | None = typer.Option(None, "--level", help="Add exact combined intervals."),
    thresholds: str | None = typer.Option(
        None, "--thresholds", help="The release's stage-1 thresholds θ (selection diagnostics)."
    ),
    min_threshold_sd: float | None = typer.Option(
        None, "--min-threshold-sd", help="Keep COUNT alone where stage 1 is this close to a θ."
    ),
    out: Annotated[
        Path | None, typer.Option("--out", help="Write t1 with the combined columns.")
    ] = None,
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace an --out folder privtab's analyze wrote."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Inverse-variance / GLS combination of noisy measurements (course §4.1).

    Example: privtab analyze combine --values 2,7 --variances 17.834,35.669 --json
    """
    from privtab.analysis.combine import gls, inverse_variance

    payload: dict[str, Any]
    try:
        if release is not None:
            from privtab.analysis.safetab import combine_totals

            rel = _load(release)
            th = _floats(thresholds, "--thresholds") if thresholds else None
            t1 = combine_totals(
                rel.t1, level=level, thresholds=th, min_threshold_sd=min_threshold_sd
            )
            combined = t1.filter(t1["STAGE1_WEIGHT"] > 0)
            ratio = (combined["COMBINED_VARIANCE"] / combined["VARIANCE"]).mean()
            payload = {
                "release": str(release),
                "t1_rows": t1.height,
                "groups_combined": combined.height,
                "mean_variance_ratio": ratio,
                "columns_added": [c for c in t1.columns if c not in rel.t1.columns],
                "written": _write(out, {"t1": t1}, rel, overwrite),
            }
        else:
            if values is None or variances is None:
                fail("give --values and --variances (or --release)")
            y, v = _floats(values, "--values"), _floats(variances, "--variances")
            if design is None:
                c = inverse_variance(y, v)
                payload = {"method": "inverse_variance", **c.to_dict()}
            else:
                rows = [_floats(r, "--design") for r in design.split(";")]
                g = gls(rows, y, v)
                payload = {
                    "method": "gls",
                    "coef": g.coef.tolist(),
                    "covariance": g.covariance.tolist(),
                }
                if contrast is not None:
                    est, var = g.estimate(_floats(contrast, "--contrast"))
                    payload["estimate"], payload["variance"] = est, var
    except ValueError as exc:
        fail(str(exc))
    if as_json:
        print_json(payload)
    else:
        for k, val in payload.items():
            typer.echo(f"{k}: {val}")


# --------------------------------------------------------------------------- test
def dp_test(
    observed: float = typer.Option(..., "--observed", help="The released (noisy) count."),
    n: int = typer.Option(..., "--n", min=1, help="Sample size."),
    p0: float = typer.Option(..., "--p0", help="Null proportion."),
    mechanism: str | None = typer.Option(None, "--mechanism", help=f"One of: {MECHANISMS}."),
    epsilon: float | None = typer.Option(None, "--epsilon", help="ε (laplace, geometric)."),
    rho: float | None = typer.Option(None, "--rho", help="ρ (gaussian, discrete_gaussian)."),
    sensitivity: float = typer.Option(1.0, "--sensitivity", help="Sensitivity Δ (default 1)."),
    method: str = typer.Option("exact", "--method", help="exact or monte-carlo."),
    alternative: str = typer.Option("two-sided", "--alternative", help="two-sided|greater|less"),
    reps: int = typer.Option(10_000, "--reps", min=1, help="Monte Carlo draws."),
    seed: int | None = typer.Option(
        None, "--seed", help="Seed the Monte Carlo simulation (reproducible; not secure)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Test H0: p = p0 from a noisy count with the correct null law (course §4.4).

    Example: privtab analyze test --observed 34.21 --n 100 --p0 0.255 --mechanism laplace
    --epsilon 0.5
    """
    from privtab.analysis.dptests import proportion_test

    mech = _mechanism(mechanism, epsilon, rho, sensitivity)
    m = method.replace("-", "_")
    if m not in ("exact", "monte_carlo") or alternative not in ("two-sided", "greater", "less"):
        fail("--method is exact or monte-carlo; --alternative two-sided, greater or less")
    source = None
    if seed is not None:
        from privtab.random import SeededSource

        source = SeededSource(seed)
        warn("Monte Carlo simulation uses a seeded (insecure) source: fine for a p-value")
    try:
        r = proportion_test(
            observed,
            n,
            p0,
            mech,
            method=m,  # type: ignore[arg-type]
            alternative=alternative,  # type: ignore[arg-type]
            reps=reps,
            source=source,
            seed=seed,
        )
    except (ValueError, TypeError) as exc:
        fail(str(exc))
    payload = {**r.to_dict(), "mechanism": mech.describe(), "seeded": seed is not None}
    if as_json:
        print_json(payload)
    else:
        for k, val in payload.items():
            typer.echo(f"{k}: {val}")


# --------------------------------------------------------------------------- postprocess
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
    release: Annotated[
        Path | None, typer.Option("--release", help="A SafeTab release directory.")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write t2 with FITTED_COUNT.")] = None,
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace an --out folder privtab's analyze wrote."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Non-negativity, rounding and total/parts consistency (no privacy cost).

    Example: privtab analyze postprocess --values 5,-2,7 --total 12 --variance 2
    --total-variance 2 --json
    """
    import numpy as np

    from privtab.analysis.postprocess import clip_nonnegative, consistent_total, round_counts

    payload: dict[str, Any]
    try:
        if release is not None:
            import polars as pl

            from privtab.analysis.safetab import consistent_t2

            rel = _load(release)
            t2 = consistent_t2(rel.t1, rel.t2, nonnegative=nonnegative)
            if round_:
                t2 = t2.with_columns(pl.col("FITTED_COUNT").round().cast(pl.Int64))
            payload = {
                "release": str(release),
                "t2_rows": t2.height,
                "negative_before": int((rel.t2["COUNT"] < 0).sum()),
                "negative_after": int((t2["FITTED_COUNT"] < 0).sum()),
                "written": _write(out, {"t2": t2}, rel, overwrite),
                "privacy_cost": 0,
            }
        else:
            if values is None:
                fail("give --values (or --release)")
            parts = np.array(_floats(values, "--values"))
            if total is not None:
                if variance is None or total_variance is None:
                    fail("--total needs --variance and --total-variance")
                res = consistent_total(
                    total, parts, total_variance, variance, nonnegative=nonnegative
                )
                fitted, method = res.parts, res.method
            elif nonnegative:
                fitted, method = clip_nonnegative(parts), "clip at zero"
            else:
                fitted, method = parts, "none"
            out_vals: list[Any] = fitted.tolist()
            if round_:
                out_vals = round_counts(fitted).tolist()
            payload = {
                "values": out_vals,
                "total": float(np.sum(out_vals)),
                "method": method + (", rounded" if round_ else ""),
                "privacy_cost": 0,
            }
    except ValueError as exc:
        fail(str(exc))
    if as_json:
        print_json(payload)
    else:
        for k, val in payload.items():
            typer.echo(f"{k}: {val}")
