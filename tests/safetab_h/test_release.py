"""A SafeTab-H release chained to privtab's own SafeTab-P release, production configs:
the exact guarantees (ρ = 8.895302 US, 4.754134 PR per household; ρ_P + 2ρ_H per person),
the layout, the ledger, nothing confidential in the folder."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from privtab.random import SeededSource
from privtab.safetab_h.run import run_release
from privtab.tabulate.context import RunOptions

pytestmark = pytest.mark.filterwarnings("ignore::privtab.mechanisms.InsecureReleaseWarning")


@pytest.fixture(scope="module")
def chained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(data, SafeTab-P release, SafeTab-H release) of 20,000 synthetic persons in DE, OK
    and PR with their households (``privtab synth``'s); production configs (NMFv7, NMFv5),
    seeded noise. Oklahoma brings AIANNH areas (most of its tracts lie in one: ≈ 18 areas
    at this size), so every (table, region type, level) of NMFv5 has T1 groups, draws and
    is charged: the run's guarantee is the config's whole budget."""
    from privtab.data.synth import synthesize
    from privtab.tabulate.run import run_release as run_p

    root = tmp_path_factory.mktemp("chained")
    data = root / "data"
    synthesize(data, 20_000, states=["10", "40", "72"], seed=3)
    opts = RunOptions(source=SeededSource(1), allow_insecure=True, report=False)
    run_p(None, data, root / "p", opts)
    opts = RunOptions(source=SeededSource(2), allow_insecure=True)
    run_release(None, data, root / "h", opts, t1=root / "p")
    return data, root / "p", root / "h"


def test_exact_guarantees_of_the_production_config(chained: tuple[Path, Path, Path]) -> None:
    _, _, h = chained
    doc = json.loads((h / "release.json").read_text())
    us = Fraction(doc["runs"]["US"]["guarantee"]["zcdp"]["rho_exact"])
    pr = Fraction(doc["runs"]["PR"]["guarantee"]["zcdp"]["rho_exact"])
    assert us == Fraction("8.895302")
    assert pr == Fraction("4.754134")
    assert Fraction(doc["guarantee"]["zcdp"]["rho_exact"]) == us  # disjoint runs: the larger
    assert doc["guarantee"]["zcdp"]["rho"] >= float(us)  # the float is rounded up
    person = doc["person_level"]
    assert person["complete"] is True
    assert Fraction(person["guarantee"]["zcdp"]["rho_exact"]) == Fraction("4.944") + 2 * us
    assert doc["unit"].startswith("household")
    # the charges are derived from the mechanisms: per query ρ_q, the sum is the run's
    charged = sum(
        Fraction(lv["charged"]["zcdp"]["rho_exact"])
        for lv in doc["runs"]["US"]["levels"]
        if lv["charged"]
    )
    assert charged == us
    # every query of the config drew: nothing below the config's budget
    for scope, rho in (("US", us), ("PR", pr)):
        drawn = doc["budget_drawn"][scope]
        assert drawn["not_drawn"] == []
        assert Fraction(drawn["configured"]["zcdp"]["rho_exact"]) == rho
        assert Fraction(drawn["charged"]["zcdp"]["rho_exact"]) == rho


def test_a_region_type_without_regions_is_not_charged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Delaware and Puerto Rico have no American Indian / Alaska Native / Native Hawaiian
    area (GRF-C: every AIANNHCE is 9999 — a public fact), so SafeTab-P's T1 has no AIANNH
    group and SafeTab-H's AIANNH queries have no domain: nothing is drawn or published for
    them. The reported guarantee is derived from the mechanisms that drew — the config's
    8.895302 minus the two AIANNH level-2 budgets (level 1 has budget 0 in NMFv5) =
    8.609564 — and release.json, the report and a warning say which queries drew nothing
    and that the guarantee is below the config's budget. (Reporting 8.895302 would also be
    true, only looser; the charge never understates: it is the exact sum of the noise that
    was drawn. The decision to skip depends on T1 and GRF-C only, never on households.)"""
    import logging

    import polars as pl

    from privtab.data.resources import production_config_dir_h
    from privtab.data.synth import synthesize
    from privtab.tabulate.run import run_release as run_p

    data = tmp_path / "data"
    synthesize(data, 5_000, states=["10", "72"], seed=8)
    grfc = pl.read_csv(data / "GRF-C.txt", separator="|", infer_schema=False)
    assert set(grfc["AIANNHCE"]) == {"9999"}  # the precondition: no AIANNH area
    run_p(None, data, tmp_path / "p", RunOptions(source=SeededSource(1), allow_insecure=True,
                                                  report=False))  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="privtab"):
        run_release(None, data, tmp_path / "h", RunOptions(source=SeededSource(2),
                    allow_insecure=True), t1=tmp_path / "p")  # fmt: skip
    doc = json.loads((tmp_path / "h" / "release.json").read_text())
    # an independent reading of the production config: Σ budgets, minus AIANNH's
    cfg = json.loads((production_config_dir_h() / "config.json").read_text())
    budgets = {k: Fraction(str(v)) for k, v in cfg.items() if k.startswith("privacy_budget")}
    us_all = sum(v for k, v in budgets.items() if "_pr_" not in k)
    aiannh = sum(v for k, v in budgets.items() if k.endswith("_aiannh"))
    assert us_all == Fraction("8.895302")
    assert aiannh == 2 * Fraction("0.142869")
    us = Fraction(doc["runs"]["US"]["guarantee"]["zcdp"]["rho_exact"])
    assert us == us_all - aiannh == Fraction("8.609564")
    assert Fraction(doc["runs"]["PR"]["guarantee"]["zcdp"]["rho_exact"]) == Fraction("4.754134")
    assert Fraction(doc["guarantee"]["zcdp"]["rho_exact"]) == us
    drawn = doc["budget_drawn"]["US"]
    assert drawn["not_drawn"] == ["T3 (AIANNH, 2)", "T4 (AIANNH, 2)"]
    assert Fraction(drawn["configured"]["zcdp"]["rho_exact"]) == us_all
    assert Fraction(drawn["charged"]["zcdp"]["rho_exact"]) == us
    assert doc["budget_drawn"]["PR"]["not_drawn"] == []
    skipped = [lv for lv in doc["runs"]["US"]["levels"] if lv["region_type"] == "AIANNH"]
    assert {lv["status"] for lv in skipped} == {"no groups", "no budget"}
    assert all(lv["charged"] is None for lv in skipped)
    assert not list((tmp_path / "h").rglob("*AIANNH*"))
    for part in (tmp_path / "h").rglob("part-*.csv"):
        assert "|AIANNH|" not in part.read_text()
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "T3 (AIANNH, 2), T4 (AIANNH, 2)" in warned
    assert "below the config's budget ρ = 8.895302" in warned
    report = (tmp_path / "h" / "report.html").read_text()
    assert "T3 (AIANNH, 2), T4 (AIANNH, 2) had no T1 population group" in report


def test_layout_is_production_s(chained: tuple[Path, Path, Path]) -> None:
    _, _, h = chained
    for t, n in (("t3", 4), ("t4", 2)):
        for k in range(1, n + 1):
            folder = h / t / f"T0{t[1]}00{k}"
            assert sorted(p.name for p in folder.iterdir()) == [
                "_SUCCESS",
                "part-00000-pr-c000.csv",
                "part-00000-us-c000.csv",
            ]
            head = (folder / "part-00000-us-c000.csv").read_text().splitlines()[0]
            assert head == f"REGION_ID|REGION_TYPE|ITERATION_CODE|{t.upper()}_DATA_CELL|COUNT"
    assert (h / "t3-error.parquet").is_file()
    assert (h / "t4-error.parquet").is_file()
    assert (h / "report.html").is_file()
    assert (h / "NOT_PRIVATE").is_file()
    text = (h / "report.html").read_text()
    assert "NOT PRIVATE" in text
    assert "ρ<sub>P</sub> + 2ρ<sub>H</sub>" in text


def test_nothing_confidential_in_the_folder(chained: tuple[Path, Path, Path]) -> None:
    """No hash, size or row count of the household file, no exact household count."""
    import hashlib

    data, _, h = chained
    households = data / "household-records.txt"
    secrets = {
        hashlib.sha256(households.read_bytes()).hexdigest(),
        str(households.stat().st_size),
        str(len(households.read_text().splitlines()) - 1),
    }
    for f in h.rglob("*"):
        if f.is_file() and f.suffix in (".json", ".html", ".csv"):
            text = f.read_text(errors="replace")
            for s in secrets:
                assert s not in text, (f, s)


def test_release_json_names_no_paths_of_the_operator(chained: tuple[Path, Path, Path]) -> None:
    """The config by file name and SHA-256 (as SafeTab-P's), no folder of the machine in
    any file; validate-output finds the packaged config again by its SHA-256."""
    from privtab.data.inputs import sha256_file
    from privtab.data.resources import production_config_dir_h
    from privtab.safetab_h.validation import validate_paths

    data, p, h = chained
    doc = json.loads((h / "release.json").read_text())
    packaged = production_config_dir_h() / "config.json"
    assert doc["config"]["source"] == "config.json"
    assert doc["config"]["source_sha256"] == sha256_file(packaged)
    assert doc["plan"]["source"] == "config.json [US]"
    folders = {str(data), str(p), str(h.parent), str(packaged.parent)}
    for f in h.rglob("*"):
        if f.is_file() and f.suffix in (".json", ".html", ".csv", ".txt"):
            text = f.read_text(errors="replace")
            assert not [d for d in folders if d in text], f
    summary = validate_paths(h, data=data, t1=p)
    assert "domain" in summary.checks


def test_private_run_charges_the_person_level_part_to_the_ledger(
    chained: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    from privtab.accounting.odometer import ReleaseLedger

    data, p, _ = chained
    ledger = tmp_path / "ledger.json"
    opts = RunOptions(ledger=ledger, report=False, dataset_id="population-A")
    res = run_release(None, data, tmp_path / "h", opts, t1=p)
    assert res.private
    entries = ReleaseLedger.open(ledger).entries()
    assert len(entries) == 1
    assert entries[0].dataset == "population-A"
    assert entries[0].guarantee.value == 2 * Fraction("8.895302")
    assert entries[0].status == "published"


def test_seeded_runs_are_reproducible_and_never_in_the_ledger(
    chained: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    data, p, h = chained
    ledger = tmp_path / "ledger.json"
    opts = RunOptions(source=SeededSource(2), allow_insecure=True, ledger=ledger)
    run_release(None, data, tmp_path / "h2", opts, t1=p)
    for part in h.rglob("part-*.csv"):
        assert (tmp_path / "h2" / part.relative_to(h)).read_bytes() == part.read_bytes()
    assert not ledger.exists()


def test_the_demo_hook(chained: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """:func:`privtab.safetab_h.demo.run_demo_h`: what ``privtab demo`` calls after its
    SafeTab-P release (production NMFv5 restricted to the demo's states, no ledger)."""
    from privtab.safetab_h.demo import run_demo_h

    data, p, _ = chained
    res = run_demo_h(data, p, tmp_path / "h", ["10", "40", "72"], source=SeededSource(3))
    doc = res.release
    assert doc["config"]["state_filter_us"] == ["10", "40"]
    assert doc["person_level"]["complete"] is True
    assert (tmp_path / "h" / "t4" / "T04002").is_dir()
