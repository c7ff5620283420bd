"""The Census product: the t1/ t2/ layout, the companion error tables, their reader, and
output validation (every rule fails on a release tampered to break it, naming file, line
and rule)."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from privtab.cli import app
from privtab.data import (
    GeoLevel,
    Scope,
    load_inputs,
    read_reference,
    toy_dataset_dir,
)
from privtab.data.ages import STAT_LEVEL_BINS
from privtab.data.levels import Granularity
from privtab.release.marking import PRIVATE_KEY
from privtab.tabulate.output import (
    CENSUS_COLUMNS,
    CensusWriter,
    outputs_manifest,
    read_census_table,
)
from privtab.tabulate.output_validation import (
    OutputRules,
    OutputValidationError,
    validate_output,
    validate_paths,
)
from privtab.tabulate.tables import T1_SCHEMA, T2_SCHEMA
from tests.tabulate._census import write_census_release
from tests.tabulate.conftest import demo_params, reference_tabulation

T1_HEADER = "REGION_ID|REGION_TYPE|ITERATION_CODE|COUNT"
T2_HEADER = "REGION_ID|REGION_TYPE|ITERATION_CODE|AGESTART|AGEEND|SEX|COUNT"
TOY_STATES = ["01", "02", "04", "11"]
LOW = [1, 2, 3]  # thresholds reached by the toy data: every statistic level occurs


# ----------------------------------------------------------------------------- fixtures
def _toy(tmp: Path, **overrides: object) -> tuple[Path, Path]:
    """The Census toy dataset (10 persons) with its toy codes added to the code list."""
    params = tmp / "params"
    config = demo_params(params, TOY_STATES, **overrides)
    codes = params / "race-and-ethnicity-codes.txt"
    codes.write_text(codes.read_text() + "1011|t\r\n1012|t\r\n1021|t\r\n2021|t\r\n")
    data = tmp / "data"
    data.mkdir()
    for f in ("GRF-C.txt", "person-records.txt"):
        shutil.copy(toy_dataset_dir() / f, data / f)
    return config, data


def _low_thresholds(config: Path) -> dict[str, list[int]]:
    raw = json.loads(config.read_text())
    return dict.fromkeys(raw["thresholds_p"], LOW)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory, synth_small) -> Path:
    """A seeded Census-layout release of 20,000 synthetic persons (production config)."""
    config, data = synth_small
    out = tmp_path_factory.mktemp("census") / "release"
    write_census_release(config, data, out, seed=5, formats=("txt", "parquet"))
    return out


def _copy(src: Path, tmp: Path) -> Path:
    dst = tmp / "copy"
    shutil.copytree(src, dst)
    return dst


def _part(d: Path, table: str, scope: str = "us") -> Path:
    return d / table / f"part-00000-{scope}-c000.csv"


# ----------------------------------------------------------------------------- layout
def test_layout_headers_and_companions(seeded: Path, synth_small) -> None:
    for table, header in (("t1", T1_HEADER), ("t2", T2_HEADER)):
        folder = seeded / table
        assert sorted(p.name for p in folder.iterdir()) == [
            "_SUCCESS",
            "headers.csv",
            "part-00000-pr-c000.csv",
            "part-00000-us-c000.csv",
        ]
        assert (folder / "headers.csv").read_text() == header  # no newline, as production
        assert (folder / "_SUCCESS").read_bytes() == b""
        for part in ("us", "pr"):
            lines = _part(seeded, table, part).read_text().split("\n")
            assert lines[0] == header
            assert lines[-1] == ""  # newline-terminated
            assert all(line.count("|") == header.count("|") for line in lines[1:-1])
    # the PR run holds exactly the PR geographies
    pr = pl.read_csv(_part(seeded, "t1", "pr"), separator="|", infer_schema=False)
    assert set(pr["REGION_TYPE"]) <= {"PR-STATE", "PR-COUNTY", "PR-TRACT", "PR-PLACE"}
    us = pl.read_csv(_part(seeded, "t1", "us"), separator="|", infer_schema=False)
    assert not any(t.startswith("PR-") for t in us["REGION_TYPE"])
    # every Parquet file carries the privacy marking; Census copies have Census columns
    for name in ("t1.parquet", "t2.parquet", "t1-error.parquet", "t2-error.parquet"):
        meta = pq.read_schema(seeded / name).metadata
        assert meta[PRIVATE_KEY.encode()] == b"false"
    for t in ("t1", "t2"):
        assert pq.read_schema(seeded / f"{t}.parquet").names == list(CENSUS_COLUMNS[t])
        err = pq.read_schema(seeded / f"{t}-error.parquet").names
        assert "COUNT" not in err
        assert err[: len(CENSUS_COLUMNS[t]) - 1] == list(CENSUS_COLUMNS[t][:-1])
    assert validate_output(seeded).files  # the release is valid


def test_writer_files_and_manifest(tmp_path: Path) -> None:
    t1 = pl.DataFrame(
        {
            "REGION_ID": ["10001"],
            "REGION_TYPE": ["COUNTY"],
            "ITERATION_CODE": ["1000"],
            "COUNT": [7],
            "STAT_LEVEL": [0],
            "COUNT_SOURCE": ["stage2_total"],
            "NOISE": ["discrete_gaussian"],
            "NOISE_SCALE": [31.4],
            "VARIANCE": [31.3],
            "MOE95": [11],
            "STAGE1_COUNT": [3],
            "STAGE1_NOISE_SCALE": [283.0],
            "STAGE1_VARIANCE": [283.0],
        },
        schema=T1_SCHEMA,
    )
    out = tmp_path / "rel"
    out.mkdir()
    with CensusWriter(out, formats=("txt",), metadata={PRIVATE_KEY: "true"}) as w:
        with pytest.raises(ValueError, match="start_run"):
            w.write({"t1": t1, "t2": pl.DataFrame(schema=T2_SCHEMA)})
        w.start_run("US")
        w.write({"t1": t1, "t2": pl.DataFrame(schema=T2_SCHEMA)})
        w.write(
            {
                "t1": t1.with_columns(pl.lit("10003").alias("REGION_ID")),
                "t2": pl.DataFrame(schema=T2_SCHEMA),
            }
        )
        with pytest.raises(ValueError, match="already"):
            w.start_run("US")
    files = {f.path: f for f in w.files}
    assert files["t1/part-00000-us-c000.csv"].rows == 2
    assert files["t2/part-00000-us-c000.csv"].rows == 0
    assert files["t1-error.parquet"].rows == 2
    assert "t1.parquet" not in files  # Parquet copies only with the parquet format
    assert (out / "t1/part-00000-us-c000.csv").read_text() == (
        f"{T1_HEADER}\n10001|COUNTY|1000|7\n10003|COUNTY|1000|7\n"
    )
    assert (out / "t2/part-00000-us-c000.csv").read_text() == f"{T2_HEADER}\n"
    man = outputs_manifest(out, w.files)
    assert man["t1_rows"] == 2
    assert man["t2_rows"] == 0
    import hashlib

    part = out / "t1/part-00000-us-c000.csv"
    assert man["files"]["t1/part-00000-us-c000.csv"]["sha256"] == (
        hashlib.sha256(part.read_bytes()).hexdigest()
    )
    assert read_census_table(out, "t1")["COUNT"].to_list() == [7, 7]


# ----------------------------------------------------------------------------- exactness
def _expected_lines(config: Path, data: Path) -> tuple[list[str], list[str]]:
    """T1 and T2 lines (sorted) of a noise-free release, straight from the definitions:
    statistic levels from the true totals, cells from per-age counts, sex marginals."""
    from privtab.data import read_config

    cfg = read_config(config)
    ref = read_reference(config.parent)
    truth = reference_tabulation(data, ref, TOY_STATES, [Scope.US, Scope.PR])
    t1: list[str] = []
    t2: list[str] = []
    for scope in cfg.scopes:
        for geo in (GeoLevel(g) for g in truth.domains):
            if geo.scope is not scope:
                continue
            for lv in (1, 2):
                if cfg.budget(geo, lv) == 0:
                    continue
                th = [int(x) for x in cfg.threshold(geo, lv)]
                for region in sorted(truth.domains[geo.value]):
                    for it in ref.select(lv, geo.granularity):
                        n = truth.t1.get((geo.value, region, it.code), 0)
                        t1.append(f"{region}|{geo.value}|{it.code}|{n}")
                        detailed = geo.granularity is Granularity.DETAILED
                        if detailed and it.detailed_only:
                            continue
                        k = int(np.digitize(n, th))
                        bins = STAT_LEVEL_BINS[k]
                        if bins is None:
                            continue
                        for sex in (1, 2):
                            total = 0
                            for lo, hi in bins.bounds():
                                c = sum(
                                    truth.ages.get((geo.value, region, it.code, sex, a), 0)
                                    for a in range(lo, hi + 1)
                                )
                                total += c
                                t2.append(f"{region}|{geo.value}|{it.code}|{lo}|{hi}|{sex}|{c}")
                            t2.append(f"{region}|{geo.value}|{it.code}|*|*|{sex}|{total}")
    return sorted(t1), sorted(t2)


def _lines(d: Path, table: str) -> list[str]:
    out = []
    for part in sorted((d / table).glob("part-*.csv")):
        lines = part.read_text().split("\n")
        assert lines[0] == (T1_HEADER if table == "t1" else T2_HEADER)
        out.extend(x for x in lines[1:] if x)
    return sorted(out)


def test_toy_dataset_noise_off_equals_independent_tabulation(tmp_path: Path) -> None:
    """Noise off, suppression disabled: t1/ and t2/ equal an independent plain-Python
    tabulation (sex marginals included) byte for byte after sorting; the folder passes
    validate-output with the domain check."""
    config, data = _toy(tmp_path)
    config.write_text(
        json.dumps({**json.loads(config.read_text()), "thresholds_p": _low_thresholds(config)})
    )
    out = tmp_path / "out"
    write_census_release(config, data, out, seed=None, chance=0)
    want1, want2 = _expected_lines(config, data)
    assert _lines(out, "t1") == want1
    assert _lines(out, "t2") == want2
    assert any("|*|*|" in x for x in want2)
    assert {x.split("|")[3] for x in want2} > {"*", "0"}  # every statistic level occurs
    summary = validate_paths(out, config=config, data=data)
    assert "domain" in summary.checks


def test_noise_off_production_suppression_drops_exact_zeros(tmp_path: Path) -> None:
    """Noise off with the production chance: production thresholds at 0, so exactly the
    sub-state totals equal to 0 disappear; the folder is valid."""
    config, data = _toy(tmp_path)
    out = tmp_path / "out"
    _, removed = write_census_release(config, data, out, seed=None)
    want1, _ = _expected_lines(config, data)
    kept = [
        x
        for x in want1
        if x.split("|")[1] in ("USA", "STATE", "PR-STATE") or int(x.split("|")[3]) > 0
    ]
    assert _lines(out, "t1") == kept
    assert removed == len(want1) - len(kept) > 0
    validate_paths(out, config=config, data=data)


# ----------------------------------------------------------------------------- reader
def test_reader_joins_the_companion_and_analyses_work(seeded: Path, tmp_path: Path) -> None:
    from privtab.analysis import add_intervals, load_release
    from privtab.analysis.safetab import consistent_t2

    d = _copy(seeded, tmp_path)
    (d / "release.json").unlink()  # the helper's minimal document is not a typed one
    shutil.rmtree(d / "t1")  # the Parquet copy is read when the text folder is absent
    rel = load_release(d)
    assert rel.t1.columns == list(T1_SCHEMA)
    assert rel.t2.columns == list(T2_SCHEMA)
    assert rel.t1["NOISE"].null_count() == 0
    assert rel.t1.height == pl.read_parquet(d / "t1.parquet").height
    # every exact MOE95 in the release (sums of cells and sex marginals too) is checked
    # against the exact law of the row's noise: add_intervals raises on a disagreement
    add_intervals(rel.t1, 0.95)
    add_intervals(rel.t2, 0.95)
    marg = rel.t2.filter(pl.col("AGESTART") == "*")
    assert marg.height > 0
    fitted = consistent_t2(rel.t1, rel.t2)
    assert fitted.height == rel.t2.height
    g = ["REGION_ID", "REGION_TYPE", "ITERATION_CODE", "SEX"]
    cells = fitted.filter(pl.col("AGESTART") != "*").group_by(g).agg(pl.col("FITTED_COUNT").sum())
    both = fitted.filter(pl.col("AGESTART") == "*").join(cells, on=g, suffix="_S")
    assert np.allclose(both["FITTED_COUNT"], both["FITTED_COUNT_S"])


def test_reader_refuses_a_mismatched_companion(seeded: Path, tmp_path: Path) -> None:
    from privtab.analysis import load_release

    d = _copy(seeded, tmp_path)
    (d / "release.json").unlink()
    err = pl.read_parquet(d / "t2-error.parquet")
    err.slice(1).write_parquet(d / "t2-error.parquet")
    with pytest.raises(ValueError, match="one to one"):
        load_release(d)
    (d / "t2-error.parquet").unlink()
    with pytest.raises(FileNotFoundError, match="error table"):
        load_release(d)


def test_reader_still_reads_the_single_file_layout(tmp_path: Path) -> None:
    from privtab.analysis import load_release

    t1 = pl.DataFrame(
        [("1", "USA", "1000", 5, -1, "total_only", "discrete_gaussian", 4.0, 3.99, 4, None,
          None, None)],
        schema=T1_SCHEMA,
        orient="row",
    )  # fmt: skip
    for fmt in ("txt", "parquet"):
        d = tmp_path / fmt
        d.mkdir()
        t2 = pl.DataFrame(schema=T2_SCHEMA)
        if fmt == "txt":  # the old layout: every column in t1.txt / t2.txt
            t1.write_csv(d / "t1.txt", separator="|")
            t2.write_csv(d / "t2.txt", separator="|")
        else:
            t1.write_parquet(d / "t1.parquet")
            t2.write_parquet(d / "t2.parquet")
        rel = load_release(d)
        assert rel.t1.height == 1
        assert rel.t1["MOE95"].to_list() == [4]


# ----------------------------------------------------------------------------- tampering
def _problems(d: Path, **kw: object) -> list:
    with pytest.raises(OutputValidationError) as info:
        validate_output(d, **kw)  # type: ignore[arg-type]
    return list(info.value.problems)


def _edit_line(path: Path, line: int, fn) -> str:
    lines = path.read_text().split("\n")
    old = lines[line - 1]
    lines[line - 1] = fn(old)
    path.write_text("\n".join(lines))
    return old


def test_tampered_extra_column(seeded: Path, tmp_path: Path) -> None:
    d = _copy(seeded, tmp_path)
    part = _part(d, "t1")
    text = part.read_text().split("\n")
    text = [line + "|0.5" if line else line for line in text]
    text[0] = T1_HEADER + "|MOE95"
    part.write_text("\n".join(text))
    probs = _problems(d)
    hit = [p for p in probs if p.kind == "header"]
    assert hit
    assert hit[0].file == str(part)
    assert hit[0].row == 1
    assert "MOE95" in (hit[0].value or "")


def test_tampered_negative_count_where_not_allowed(seeded: Path, tmp_path: Path) -> None:
    d = _copy(seeded, tmp_path)
    part = _part(d, "t2")
    old = _edit_line(part, 5, lambda s: s.rsplit("|", 1)[0] + "|-3")
    assert not old.endswith("|-3")
    rules = OutputRules(("10", "44", "72"), False, frozenset(), "test")
    probs = _problems(d, rules=rules)
    neg = [p for p in probs if p.kind == "negative_count"]
    assert (str(part), 5, "COUNT", "-3") in [(p.file, p.row, p.column, p.value) for p in neg]
    # allowed negatives: only the sums break (the cell changed), not the sign
    probs = _problems(d, rules=OutputRules(("10", "44", "72"), True, frozenset()))
    assert not [p for p in probs if p.kind == "negative_count"]


def test_tampered_duplicate_row(seeded: Path, tmp_path: Path) -> None:
    d = _copy(seeded, tmp_path)
    part = _part(d, "t1")
    lines = part.read_text().split("\n")
    n = len(lines) - 1  # the last line is empty
    part.write_text("\n".join([*lines[:-1], lines[1], ""]))
    probs = [p for p in _problems(d) if p.kind == "duplicate"]
    assert [(p.file, p.row) for p in probs] == [(str(part), n + 1)]
    assert "line 2" in (probs[0].value or "")


def test_tampered_row_outside_the_domain(seeded: Path, synth_small, tmp_path: Path) -> None:
    config, data = synth_small
    d = _copy(seeded, tmp_path)
    part = _part(d, "t1")
    lines = part.read_text().split("\n")
    at = next(i for i, x in enumerate(lines) if "|COUNTY|" in x)
    fields = lines[at].split("|")
    fields[0] = "10999"  # a county id of the right shape, in a state of the run
    lines[at] = "|".join(fields)
    part.write_text("\n".join(lines))
    with pytest.raises(OutputValidationError) as info:
        validate_paths(d, config=config, data=data)
    dom = [p for p in info.value.problems if p.kind == "domain"]
    assert [(p.file, p.row, p.column, p.value) for p in dom] == [
        (str(part), at + 1, "REGION_ID", "10999")
    ]
    # the companion no longer matches either; without the GRF-C no domain problem
    assert {p.kind for p in info.value.problems} == {"domain", "companion", "parquet_copy"}
    assert not [p for p in _problems(d) if p.kind == "domain"]


def test_tampered_marginal_and_t1_sum(seeded: Path, tmp_path: Path) -> None:
    d = _copy(seeded, tmp_path)
    part = _part(d, "t2")
    lines = part.read_text().split("\n")
    at = next(i for i, x in enumerate(lines) if "|*|*|" in x)
    f = lines[at].split("|")
    f[-1] = str(int(f[-1]) + 1)
    lines[at] = "|".join(f)
    part.write_text("\n".join(lines))
    probs = _problems(d)
    m = [p for p in probs if p.kind == "marginal_sum"]
    assert [(p.file, p.row) for p in m] == [(str(part), at + 1)]
    assert "≠" in (m[0].value or "")
    assert {p.kind for p in probs} == {"marginal_sum", "parquet_copy"}
    # a T1 total that is not the sum of its cells
    d2 = _copy(seeded, tmp_path / "b")
    t1 = _part(d2, "t1")
    cells = pl.read_csv(_part(d2, "t2"), separator="|", infer_schema=False)
    g = cells.row(0, named=True)
    lines = t1.read_text().split("\n")
    key = f"{g['REGION_ID']}|{g['REGION_TYPE']}|{g['ITERATION_CODE']}|"
    at = next(i for i, x in enumerate(lines) if x.startswith(key))
    lines[at] = key + str(int(lines[at].rsplit("|", 1)[1]) + 2)
    t1.write_text("\n".join(lines))
    sums = [p for p in _problems(d2) if p.kind == "t1_sum"]
    assert [(p.file, p.row) for p in sums] == [(str(t1), at + 1)]


def test_tampered_patterns_cells_companion(seeded: Path, tmp_path: Path) -> None:
    d = _copy(seeded, tmp_path)
    part = _part(d, "t2")
    lines = part.read_text().split("\n")
    f = lines[3].split("|")
    f[5] = "3"  # SEX 3
    lines[3] = "|".join(f)
    lines.insert(4, "just|three|fields")
    part.write_text("\n".join(lines))
    (d / "t1" / "headers.csv").write_text(T1_HEADER + "\n")
    pl.read_parquet(d / "t1-error.parquet").slice(1).write_parquet(d / "t1-error.parquet")
    probs = _problems(d)
    kinds = defaultdict(list)
    for p in probs:
        kinds[p.kind].append(p)
    assert kinds["pattern"][0].column == "SEX"
    assert kinds["pattern"][0].row == 4
    assert kinds["field_count"][0].row == 5
    assert kinds["layout"][0].file.endswith("t1/headers.csv")
    assert kinds["companion"][0].file.endswith("t1-error.parquet") or kinds["companion"][
        0
    ].file.endswith("part-00000-us-c000.csv")
    assert "cell_table" in kinds  # the group lost a cell: no longer a whole table


def test_state_filter(seeded: Path) -> None:
    rules = OutputRules(("10",), True, frozenset())  # only DE: RI and PR rows break it
    probs = _problems(seeded, rules=rules)
    st = [p for p in probs if p.kind == "state_filter"]
    assert st
    assert all(p.column == "REGION_ID" for p in st)
    assert {p.value[:2] for p in st} <= {"44", "72"}


# ----------------------------------------------------------------------------- CLI
def test_cli_validate_output(seeded: Path, synth_small, tmp_path: Path) -> None:
    runner = CliRunner()
    _config, data = synth_small
    res = runner.invoke(app, ["validate-output", str(seeded), "--data", str(data), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["valid"] is True
    assert "domain" in doc["checks"]
    assert doc["files"]["t1/part-00000-us-c000.csv"] > 0
    d = _copy(seeded, tmp_path)
    _edit_line(_part(d, "t1"), 2, lambda s: s.rsplit("|", 1)[0] + "|x")
    res = runner.invoke(app, ["validate-output", str(d)])
    assert res.exit_code == 1
    assert "part-00000-us-c000.csv, line 2, column COUNT" in res.output
    assert "[pattern]" in res.output


def test_census_tables_match_the_inputs_domain(seeded: Path, synth_small) -> None:
    """Every public group of every level is in T1 unless suppressed (suppression only
    removes sub-state totals)."""
    config, data = synth_small
    inputs = load_inputs(config, data)
    t1 = read_census_table(seeded, "t1")
    assert t1 is not None
    state = t1.filter(pl.col("REGION_TYPE").is_in(["USA", "STATE", "PR-STATE"]))
    n = 0
    for scope in inputs.config.scopes:
        for geo in (GeoLevel.USA, GeoLevel.STATE, GeoLevel.PR_STATE):
            if geo.scope is not scope:
                continue
            for lv in (1, 2):
                if inputs.config.budget(geo, lv) > 0:
                    n += len(inputs.geography.domain(geo)) * len(
                        inputs.reference.select(lv, geo.granularity)
                    )
    assert state.height == n


def _publish_a_duplicate_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """A defective publication step: every chunk's T1 gets its first row twice."""
    import privtab.tabulate.runs as runs

    real = runs.publish_chunk

    def duplicating(*args: object, **kw: object):  # type: ignore[no-untyped-def]
        out = real(*args, **kw)  # type: ignore[arg-type]
        return type(out)(pl.concat([out.t1, out.t1.head(1)]), out.t2, out.suppressed)

    monkeypatch.setattr(runs, "publish_chunk", duplicating)


@pytest.mark.parametrize("report", [False, True])
def test_a_release_failing_validation_is_not_published(
    synth_small, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, report: bool
) -> None:
    """The run validates its staged tables before the rename: a defect that writes a
    duplicate T1 row fails the run (RunFailedError, exit 4) and publishes nothing — also
    when the report is being written meanwhile (the check runs beside it)."""
    from privtab.errors import RunFailedError
    from privtab.random import SeededSource
    from privtab.tabulate.run import RunOptions, run_release

    _publish_a_duplicate_row(monkeypatch)
    config, data = synth_small
    opts = RunOptions(source=SeededSource(3), allow_insecure=True, report=report, use_ledger=False)
    with pytest.raises(
        RunFailedError, match=r"(?s)failed output validation.*\[duplicate\]"
    ) as info:
        run_release(config, data, tmp_path / "rel", opts, progress=None)
    assert ".tmp-" not in str(info.value)  # named as the release, not the staging folder
    assert len(str(info.value).splitlines()) <= 8
    assert not (tmp_path / "rel").exists()
    assert list(tmp_path.iterdir()) == []  # no staging folder, no run record


@pytest.mark.parametrize("duplicate", [False, True])
def test_a_failing_report_beside_the_check_publishes_nothing(
    synth_small, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, duplicate: bool
) -> None:
    """The report is written while the tables are checked: when it fails the run fails
    with its error (nothing published), unless the check failed too — the check's error is
    raised then, as when the check ran first."""
    import privtab.tabulate.report as report
    from privtab.errors import RunFailedError
    from privtab.random import SeededSource
    from privtab.tabulate.run import RunOptions, run_release

    def broken(*args: object, **kw: object) -> None:
        raise ZeroDivisionError("the report broke")

    monkeypatch.setattr(report, "write_report", broken)
    if duplicate:
        _publish_a_duplicate_row(monkeypatch)
    config, data = synth_small
    opts = RunOptions(source=SeededSource(3), allow_insecure=True, use_ledger=False)
    expected = RunFailedError if duplicate else ZeroDivisionError
    with pytest.raises(expected):
        run_release(config, data, tmp_path / "rel", opts, progress=None)
    assert list(tmp_path.iterdir()) == []  # no release, no staging folder, no run record


def test_companion_checked_row_by_row_and_by_joins(seeded: Path, tmp_path: Path) -> None:
    """The companion check: aligned with its table (the Parquet copy, as written) it is one
    comparison; a permuted companion is still valid (the joins decide); a changed key or a
    duplicated row in an aligned companion is found and located."""
    d = _copy(seeded, tmp_path)
    for table in ("t1", "t2"):
        shutil.rmtree(d / table)  # the Parquet copies are read: row-aligned with companions
    validate_output(d)
    comp = d / "t1-error.parquet"
    original = pl.read_parquet(comp)
    original.reverse().write_parquet(comp)
    validate_output(d)  # same rows in another order: valid
    changed = original.with_columns(
        pl.when(pl.int_range(pl.len()) == 1)
        .then(pl.lit("9999"))
        .otherwise(pl.col("ITERATION_CODE"))
        .alias("ITERATION_CODE")
    )
    changed.write_parquet(comp)
    probs = [p for p in _problems(d) if p.kind == "companion"]
    assert any(p.file.endswith("t1-error.parquet") and p.row == 2 for p in probs)  # extra
    assert any(p.file.endswith("t1.parquet") and p.row == 2 for p in probs)  # lacking
    pl.concat([original.head(1), original.slice(0, original.height - 1)]).write_parquet(comp)
    messages = {p.message for p in _problems(d) if p.kind == "companion"}
    assert "more than one error row for the same key" in messages
