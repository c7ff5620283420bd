"""``privtab safetab-h plan|accuracy|run|validate-output`` and ``privtab safetab run
--products p,h``: one JSON object each, the production numbers, the ledger composing
DHC-A and DHC-B per person."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privtab.cli import app

runner = CliRunner()


def _json(args: list[str]) -> dict[str, object]:
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert isinstance(out, dict)
    return out


def test_plan_of_the_2020_production_config() -> None:
    """NMFv5: ρ = 8.895302 per household (US), 4.754134 (PR); per-cell 95 % MOE 50 (level
    1), 3 (USA/STATE level 2), 11 (sub-state level 2); σ² = 9/(2ρ_q); per person with
    NMFv7 (ρ = 4.944): 4.944 + 2 · 8.895302."""
    out = _json(["safetab-h", "plan"])
    g = out["guarantee_per_household"]
    assert Fraction(g["zcdp"]["rho_exact"]) == Fraction("8.895302")  # type: ignore[index]
    runs = out["runs"]
    assert isinstance(runs, dict)
    pr = Fraction(runs["PR"]["guarantee_per_household"]["zcdp"]["rho_exact"])
    assert pr == Fraction("4.754134")
    moes = {q["query"]: q["cell"]["moe95"] for q in runs["US"]["queries"]}
    assert moes["T3 (USA, 1)"] == 50
    assert moes["T3 (STATE, 2)"] == 3
    assert moes["T4 (COUNTY, 2)"] == 11
    for q in runs["US"]["queries"]:
        assert q["stability"] == 9
        assert Fraction(q["cell"]["parameter_exact"]) == Fraction(q["budget_exact"]) / 9
    person = out["person_level"]
    assert isinstance(person, dict)
    assert Fraction(person["guarantee"]["zcdp"]["rho_exact"]) == Fraction("4.944") + 2 * Fraction(
        "8.895302"
    )
    for analysis in ("zcdp_analytic", "zcdp_optimal", "pld"):
        assert runs["US"]["privacy"][analysis]["epsilon"] > 0
    assert (
        runs["US"]["privacy"]["pld"]["epsilon"] <= runs["US"]["privacy"]["zcdp_optimal"]["epsilon"]
    )


def test_accuracy_is_deterministic_given_t1() -> None:
    out = _json(["safetab-h", "accuracy", "--n", "-5,470,471,970,971,6970,6971"])
    assert out["deterministic"] is True
    runs = out["runs"]
    assert isinstance(runs, dict)
    q = next(q for q in runs["US"]["queries"] if q["query"] == "T3 (USA, 2)")
    tables = [r["table"] for r in q["rows"]]
    assert tables == ["T03001", "T03001", "T03002", "T03002", "T03003", "T03003", "T03004"]
    for r in q["rows"]:
        assert sorted(r["p_table"].values()) == [0.0, 0.0, 0.0, 1.0]
    t4 = next(q for q in runs["US"]["queries"] if q["query"] == "T4 (USA, 2)")
    assert [r["table"] for r in t4["rows"]] == ["T04001", "T04001", "T04002", *["T04002"] * 4]


@pytest.mark.filterwarnings("ignore::privtab.mechanisms.InsecureReleaseWarning")
def test_both_products_compose_per_person_in_the_ledger(tmp_path: Path) -> None:
    from privtab.accounting.odometer import ReleaseLedger
    from privtab.data.synth import synthesize

    data = tmp_path / "data"
    synthesize(data, 5_000, states=["10", "72"], seed=8)
    ledger = tmp_path / "ledger.json"
    out = _json(
        ["safetab", "run", "--products", "p,h", "--data", str(data), "--out",
         str(tmp_path / "rel"), "--ledger", str(ledger), "--no-report"]
    )  # fmt: skip
    assert set(out) == {"p", "h"}
    assert (tmp_path / "rel" / "t1").is_dir()
    assert (tmp_path / "rel-h" / "t3" / "T03001").is_dir()
    h = out["h"]
    assert isinstance(h, dict)
    person = Fraction(h["person_level"]["guarantee"]["zcdp"]["rho_exact"])
    book = ReleaseLedger.open(ledger)
    [dataset] = book.datasets()
    composed = book.composed(dataset)
    assert composed is not None
    p_doc = json.loads((tmp_path / "rel" / "release.json").read_text())
    h_doc = json.loads((tmp_path / "rel-h" / "release.json").read_text())
    rho_p = Fraction(p_doc["guarantee"]["zcdp"]["rho_exact"])
    rho_h = Fraction(h_doc["guarantee"]["zcdp"]["rho_exact"])
    assert composed.value == person == rho_p + 2 * rho_h
    # one entry per product, both published, against SafeTab-P's data set (the digest of
    # its persons): SafeTab-H takes the data set of the T1 folder it chains to
    p_entry, h_entry = book.entries()
    assert p_entry.dataset == h_entry.dataset == dataset
    assert dataset.startswith("records:")
    assert p_entry.status == h_entry.status == "published"
    assert p_entry.guarantee.value == rho_p
    assert h_entry.guarantee.value == 2 * rho_h
    marker = json.loads((tmp_path / "rel" / ".privtab-folder.json").read_text())
    assert p_entry.folder == marker["id"]
    # SafeTab-H run again on its own, chained to the same T1 folder: the same data set
    # again, now with three releases composed
    again = _json(
        ["safetab-h", "run", "--data", str(data), "--t1", str(tmp_path / "rel"), "--out",
         str(tmp_path / "rel-h2"), "--ledger", str(ledger), "--no-report"]
    )  # fmt: skip
    assert isinstance(again, dict)
    book = ReleaseLedger.open(ledger)
    assert book.datasets() == [dataset]
    composed = book.composed(dataset)
    assert composed is not None
    assert composed.value == rho_p + 4 * rho_h
    res = runner.invoke(app, ["safetab-h", "validate-output", str(tmp_path / "rel-h"), "--json"])
    assert res.exit_code == 0, res.output
    # privtab semantics --release shows the person-level guarantee for both folders
    sem_h = _json(["semantics", "--release", str(tmp_path / "rel-h")])
    level = sem_h["person_level"]
    assert isinstance(level, dict)
    assert Fraction(level["guarantee"]["zcdp"]["rho_exact"]) == person
    assert level["complete"] is True
    sem_p = _json(["semantics", "--release", str(tmp_path / "rel")])
    note = sem_p["person_level"]
    assert isinstance(note, dict)
    assert "rho_P + 2 rho_H" in note["note"]


def test_validate_output_names_the_problem(tmp_path: Path) -> None:
    from privtab.data.resources import toy_dataset_dir_h

    toy = toy_dataset_dir_h()
    rel = tmp_path / "rel"
    res = runner.invoke(
        app,
        ["safetab-h", "run", "--config", str(toy / "input_dir_zcdp"), "--data", str(toy),
         "--out", str(rel), "--insecure-no-noise", "--json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    part = rel / "t3" / "T03001" / "part-00000-us-c000.csv"
    lines = part.read_text().splitlines()
    lines[3] = lines[3].replace("|0|", "|7|")
    part.write_text("\n".join(lines) + "\n")
    res = runner.invoke(app, ["safetab-h", "validate-output", str(rel)])
    assert res.exit_code == 1
    assert "part-00000-us-c000.csv, line 4" in res.output
    assert "[cell_table]" in res.output
