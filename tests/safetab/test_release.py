"""privtab.safetab: SafeTab-P in one call (issue 19, Deliver item 1).

One seeded release of a small synthetic nation (2,000 persons in Delaware) is shared by
most tests; a few run their own (paths, pandas, a private release, bad inputs). The
acceptance test runs in a fresh interpreter, exactly as a user would.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from fractions import Fraction
from pathlib import Path

import polars as pl
import pytest

import privtab
from privtab.accounting import ExactGuarantee, epsilon_at
from privtab.analysis import load_release
from privtab.data import InputValidationError
from privtab.data.synth import synthesize
from privtab.mechanisms import InsecureReleaseWarning
from privtab.progress import RichProgress
from privtab.release import read_release_document
from privtab.safetab import Plan, Release, plan, release
from privtab.safetab.tables import typed_t2

PERSONS = 2000


@pytest.fixture(scope="module")
def nation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("nation") / "synth"
    synthesize(out, PERSONS, states="DE", seed=5)
    return out


def _frames(folder: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    def read(name: str) -> pl.DataFrame:
        return pl.read_csv(folder / name, separator="|", infer_schema=False)

    return read("person-records.txt"), read("GRF-C.txt")


@pytest.fixture(scope="module")
def seeded(nation: Path) -> Release:
    persons, grfc = _frames(nation)
    with pytest.warns(InsecureReleaseWarning, match="NOT private"):
        return release(persons, grfc, seed=1, progress=False)


@pytest.fixture(autouse=True)
def _private_scratch(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The scratch-folder checks look at this test's own temporary directory only (the
    shared /tmp also holds other processes' privtab-release-* folders)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path_factory.mktemp("scratch")))


def _scratch_folders() -> set[str]:
    return {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("privtab-release-")}


def test_acceptance_in_a_fresh_interpreter(nation: Path) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        import privtab
        assert "polars" not in sys.modules
        import polars as pl
        persons_df = pl.read_csv({str(nation / "person-records.txt")!r}, separator="|",
                                 infer_schema=False)
        grfc_df = pl.read_csv({str(nation / "GRF-C.txt")!r}, separator="|", infer_schema=False)
        r = privtab.safetab.release(persons_df, grfc_df, seed=1)
        assert "ITERATION_NAME" in r.t1.columns
        assert r.t2["AGESTART"].dtype.is_integer() and r.t2.height > 0
        assert r.guarantee == r.plan.guarantee
        assert r.guarantee == privtab.safetab.plan(geography=grfc_df).guarantee
        iv = r.intervals()
        assert ((iv["LOWER"] <= iv["COUNT"]) & (iv["COUNT"] <= iv["UPPER"])).all()
        assert "\\n" not in repr(r) and "NOT PRIVATE" in repr(r)
        assert len(r._repr_html_().encode()) < 20_000
        assert r.private is False
        print("ok", repr(r))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok <privtab Release NOT PRIVATE")


def test_tables_are_typed_with_names_and_levels(seeded: Release) -> None:
    t1, t2 = seeded.t1, seeded.t2
    at = t1.columns.index("ITERATION_CODE")
    assert t1.columns[at + 1 : at + 3] == ["ITERATION_NAME", "ITERATION_LEVEL"]
    assert t1["ITERATION_NAME"].null_count() == 0
    assert set(t1["ITERATION_LEVEL"].unique()) <= {1, 2}
    for column in ("AGESTART", "AGEEND", "SEX"):
        assert t2.schema[column] == pl.Int64
    assert set(t2["SEX"].unique()) <= {1, 2}
    assert (t2["AGESTART"] <= t2["AGEEND"]).all()
    assert t2["STAT_LEVEL"].min() >= 1  # cells exist only for groups with a detailed level
    # the names are the reference files' names (White alone is iteration 1000 in 2020)
    names = dict(zip(t1["ITERATION_CODE"], t1["ITERATION_NAME"], strict=True))
    assert names.get("1000", "White alone") == "White alone"


def test_star_ages_are_null_and_other_text_is_refused() -> None:
    names = pl.DataFrame(
        {"ITERATION_CODE": ["1000"], "ITERATION_NAME": ["White alone"], "ITERATION_LEVEL": [1]},
        schema={
            "ITERATION_CODE": pl.String,
            "ITERATION_NAME": pl.String,
            "ITERATION_LEVEL": pl.Int8,
        },
    )
    keys = {"REGION_ID": ["10", "10"], "REGION_TYPE": ["STATE"] * 2, "ITERATION_CODE": ["1000"] * 2}
    t1 = pl.DataFrame({**{k: v[:1] for k, v in keys.items()}, "STAT_LEVEL": [1]})
    t2 = pl.DataFrame({**keys, "AGESTART": ["*", "18"], "AGEEND": ["*", "44"], "SEX": ["1", "2"]})
    out = typed_t2(t2, t1, names)
    assert out["AGESTART"].to_list() == [None, 18]
    assert out["AGEEND"].to_list() == [None, 44]
    assert out["STAT_LEVEL"].to_list() == [1, 1]
    with pytest.raises(pl.exceptions.InvalidOperationError):
        typed_t2(t2.with_columns(pl.lit("x").alias("SEX")), t1, names)


def test_guarantee_is_the_plans_and_the_documents(seeded: Release, nation: Path) -> None:
    doc = read_release_document(seeded.path)
    assert seeded.guarantee == doc.guarantee
    assert isinstance(seeded.guarantee, ExactGuarantee)
    assert seeded.guarantee == seeded.plan.guarantee
    assert plan(geography=nation / "GRF-C.txt").guarantee == seeded.guarantee
    # a level the geography cannot tabulate (no AIANNH areas here) is neither planned nor
    # charged: the full production plan is larger
    assert plan().guarantee.value > seeded.guarantee.value
    assert sum(seeded.plan.budgets.values(), Fraction(0)) == seeded.guarantee.value


def test_epsilon_is_the_least_valid_bound(seeded: Release) -> None:
    delta = seeded.delta
    assert delta == 1e-10
    stored = [
        entry["epsilon"]
        for run in seeded.document.runs.values()
        if run.levels and any(lv.status == "tabulated" for lv in run.levels)
        for entry in run.privacy.values()
        if entry.get("valid", True)
    ]
    assert seeded.epsilon() == min(stored)  # the worst-case person's PLD is the least
    assert seeded.epsilon() < epsilon_at(seeded.guarantee, delta)
    # at another δ only the zCDP conversion of the exact guarantee is available
    assert seeded.epsilon(1e-6) == epsilon_at(seeded.guarantee, 1e-6)


@pytest.mark.parametrize("table", ["t1", "t2"])
def test_intervals_cover_the_count_with_their_exact_coverage(seeded: Release, table: str) -> None:
    for level in (0.9, 0.95):
        iv = seeded.intervals(level, table=table)
        assert iv.height == getattr(seeded, table).height
        assert ((iv["LOWER"] <= iv["COUNT"]) & (iv["COUNT"] <= iv["UPPER"])).all()
        assert (iv["UPPER"] - iv["LOWER"] == 2 * iv["MOE"]).all()
        assert (iv["COVERAGE"] >= level).all()
    at95 = seeded.intervals(0.95, table=table)
    assert (at95["MOE"] == at95["MOE95"]).all()  # the release's own MOE95 agrees
    with pytest.raises(ValueError, match="t1"):
        seeded.intervals(table="t3")


def test_repr_is_one_loud_line_and_html_is_small(seeded: Release) -> None:
    text = repr(seeded)
    assert "\n" not in text
    assert text.startswith("<privtab Release NOT PRIVATE")
    assert "ρ = 4.785 zCDP" in text
    page = seeded._repr_html_()
    assert len(page.encode()) < 20_000
    assert "NOT PRIVATE" in page
    assert "ITERATION_NAME" in page
    p = seeded.plan
    assert isinstance(p, Plan)
    assert "\n" not in repr(p)


def test_write_publishes_an_atomic_copy(seeded: Release, tmp_path: Path) -> None:
    out = seeded.write(tmp_path / "kept")
    again = load_release(out)
    assert again.t1.height == seeded.t1.height
    assert read_release_document(out).guarantee == seeded.guarantee
    assert (out / "NOT_PRIVATE").exists()
    with pytest.raises(privtab.errors.UsageError, match="exists"):
        seeded.write(out)
    seeded.write(out, overwrite=True)  # a release folder privtab wrote may be replaced
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(privtab.errors.UsageError):
        seeded.write(foreign, overwrite=True)
    assert (foreign / "notes.txt").read_text() == "keep me"


def test_to_pandas(seeded: Release) -> None:
    pd = pytest.importorskip("pandas")
    tables = seeded.to_pandas()
    assert isinstance(tables.t1, pd.DataFrame)
    t1, t2 = tables
    assert len(t1) == seeded.t1.height
    assert len(t2) == seeded.t2.height
    assert "ITERATION_NAME" in t2.columns


def test_the_temporary_folder_belongs_to_the_release(seeded: Release, tmp_path: Path) -> None:
    copy = tmp_path / "owned"
    shutil.copytree(seeded.path, copy / "release")
    r = Release.open(copy / "release", owned=copy)
    assert r.path == copy / "release"
    with r:
        assert r.t1.height == seeded.t1.height
    assert not copy.exists()  # closed at the end of the block
    assert r.t1.height == seeded.t1.height  # the tables stay in memory
    with pytest.raises(privtab.errors.UsageError, match="close"):
        _ = r.path
    shutil.copytree(seeded.path, copy / "release")
    r = Release.open(copy / "release", owned=copy)
    del r
    gc.collect()
    assert not copy.exists()  # and when it is garbage-collected


def test_paths_pandas_frames_and_a_data_folder_give_the_same_release(
    seeded: Release, nation: Path
) -> None:
    pd = pytest.importorskip("pandas")
    kw = {"seed": 1, "progress": False}
    frames = [
        pd.read_csv(nation / name, sep="|", dtype=str, keep_default_na=False)
        for name in ("person-records.txt", "GRF-C.txt")
    ]
    with pytest.warns(InsecureReleaseWarning):
        by_path = release(nation / "person-records.txt", nation / "GRF-C.txt", **kw)
    with pytest.warns(InsecureReleaseWarning):
        by_folder = release(nation, **kw)
    with pytest.warns(InsecureReleaseWarning):
        by_pandas = release(*frames, **kw)
    for other in (by_path, by_folder, by_pandas):
        assert other.t1.equals(seeded.t1)  # seeded noise: the same draws in the same order
        assert other.t2.equals(seeded.t2)
        other.close()


def test_a_private_release_with_out(nation: Path, tmp_path: Path) -> None:
    before = _scratch_folders()
    r = release(*_frames(nation), out=tmp_path / "rel", progress=False)
    assert r.private is True
    assert "NOT PRIVATE" not in repr(r)
    assert "NOT PRIVATE" not in r._repr_html_()
    assert r.path == tmp_path / "rel"
    assert not (r.path / "NOT_PRIVATE").exists()
    r.close()
    assert (tmp_path / "rel" / "release.json").exists()  # out= is the caller's: kept
    assert (tmp_path / "rel.CONFIDENTIAL-run-record.json").exists()  # beside it, as the CLI
    ledger = json.loads(Path(os.environ["PRIVTAB_LEDGER"]).read_text())
    assert str(tmp_path / "rel") in json.dumps(ledger)  # recorded in the release ledger
    assert _scratch_folders() == before


def test_a_bad_value_is_named_in_the_frame(nation: Path) -> None:
    persons, grfc = _frames(nation)
    bad = persons.with_columns(
        pl.when(pl.int_range(pl.len()) == 4).then(pl.lit("1x0")).otherwise("QAGE").alias("QAGE")
    )
    before = _scratch_folders()
    with pytest.raises(InputValidationError) as err:
        release(bad, grfc, seed=1, progress=False)
    problem = err.value.problems[0]
    assert (problem.file, problem.row, problem.column, problem.value) == (
        "persons DataFrame",
        5,
        "QAGE",
        "1x0",
    )
    assert "persons DataFrame, row 5, column QAGE, value '1x0'" in str(err.value)
    assert "privtab-release-" not in str(err.value)
    assert _scratch_folders() == before  # nothing left behind
    with pytest.raises(InputValidationError, match=r"geography DataFrame.*PLACEFP"):
        release(persons, grfc.drop("PLACEFP"), seed=1, progress=False)


def test_wrong_arguments_are_refused_clearly(nation: Path) -> None:
    persons, grfc = _frames(nation)
    with pytest.raises(TypeError, match=r"unknown option.*colour.*options are"):
        release(persons, grfc, seed=1, colour="red")
    with pytest.raises(TypeError, match="persons must be a path or a polars/pandas"):
        release([1, 2, 3], grfc, seed=1)
    with pytest.raises(privtab.errors.UsageError, match="geography is missing"):
        release(persons)
    with pytest.raises(privtab.errors.UsageError, match="seed"):
        release(persons, grfc, seed=-1)


def test_plan_of_the_production_config() -> None:
    p = plan()
    assert repr(p) == "<privtab Plan: ρ = 4.944 zCDP, 19 levels (US 11, PR 8)>"
    assert p.budgets["US (COUNTY, 1)"] == Fraction(1, 125)
    # the US run is the larger: its budgets add up to the guarantee (parallel over runs)
    us = sum((b for k, b in p.budgets.items() if k.startswith("US ")), Fraction(0))
    assert p.guarantee == ExactGuarantee.zcdp(us)
    assert p.to_frame().height == 19
    assert p.epsilon(1e-10) == epsilon_at(p.guarantee, 1e-10)
    assert len(p._repr_html_().encode()) < 20_000


def test_progress_follows_the_levels() -> None:
    from io import StringIO

    from rich.console import Console

    console = Console(file=StringIO(), force_terminal=True, width=100)
    with RichProgress("SafeTab-P", console=console) as bar:
        bar("validating and aggregating person-records.parquet")
        task = bar.task
        assert task is not None
        assert task.total is None
        assert task.description.startswith("validating")
        bar("[3/18] US (STATE, 1): 1 regions × 52 iterations, 100 noisy counts")
        assert (task.completed, task.total, task.description) == (3, 18, "US (STATE, 1)")
    assert "SafeTab-P" in console.file.getvalue()  # type: ignore[attr-defined]
