"""A release an office can sign: nothing confidential in the folder, the guarantee derived
exactly from the noise drawn, nothing lost on --overwrite, test runs marked everywhere."""

from __future__ import annotations

import hashlib
import json
import random
import re
from fractions import Fraction
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from privtab.accounting.exact import ExactGuarantee, float_up
from privtab.cli import app
from privtab.random import SeededSource
from privtab.release import read_release_document
from privtab.release.marking import NOT_PRIVATE_FILE
from privtab.tabulate.charges import RunLedger, level_charge
from privtab.tabulate.plan import LevelPlan, ReleasePlan
from privtab.tabulate.run import RunOptions, RunResult, run_release

from .conftest import demo_params

PERSONS = 10_427  # not an iteration code, region id or other public number
STATES = ["10", "72"]  # DE and PR: both runs


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from privtab.data.synth import synthesize

    root = tmp_path_factory.mktemp("signable")
    synthesize(root / "data", PERSONS, states=STATES, seed=5)
    return demo_params(root / "params", STATES), root / "data"


@pytest.fixture(scope="module")
def seeded(inputs: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    config, data = inputs
    out = tmp_path_factory.mktemp("seeded") / "release"
    opts = RunOptions(source=SeededSource(7), allow_insecure=True, evaluate=True)
    with pytest.warns(UserWarning, match="private: false"):
        return run_release(config, data, out, opts)


# ----------------------------------------------------------------- published = safe to publish
def _confidential_numbers(res: RunResult, person_file: Path) -> dict[str, list[str]]:
    raw = person_file.read_bytes()
    size = len(raw)
    numbers = {
        "persons": [str(PERSONS), f"{PERSONS:,}"],
        "person file bytes": [str(size), f"{size:,}"],
    }
    # an iteration code is printed in the tables anyway: a count equal to one proves nothing
    from privtab.data import production_config_dir, read_reference

    ref = read_reference(production_config_dir())
    public = {it.code for it in (*ref.race_iterations(), *ref.ethnicity_iterations())}
    for lv in res.record.levels:
        m = lv["memberships"]
        if str(m) not in public:
            numbers[f"memberships {lv['level']}"] = [str(m), f"{m:,}"]
    return numbers


def _public_text(path: Path) -> str:
    """The text a reader of ``path`` sees, minus the noisy counts themselves (which may
    coincide with any number) and embedded images (base64 noise)."""
    if path.suffix == ".parquet":
        f = pq.ParquetFile(path)
        meta = f.schema_arrow.metadata or {}
        table = f.read()
        cols = [c for c in table.column_names if c not in ("COUNT", "STAGE1_COUNT")]
        body = "\n".join(str(v) for c in cols for v in table.column(c).to_pylist())
        return "\n".join(f"{k!r}={v!r}" for k, v in meta.items()) + "\n" + body
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".html":
        return re.sub(r"data:image/[a-z]+;base64,[A-Za-z0-9+/=]+", "", text)
    if path.suffix in (".txt", ".csv"):
        lines = text.splitlines()
        header = lines[0].split("|")
        drop = {i for i, c in enumerate(header) if c in ("COUNT", "STAGE1_COUNT")}
        return "\n".join(
            "|".join(v for i, v in enumerate(line.split("|")) if i not in drop) for line in lines
        )
    return text


def test_release_folder_holds_nothing_confidential(
    seeded: RunResult, inputs: tuple[Path, Path]
) -> None:
    person_file = inputs[1] / "person-records.txt"
    raw = person_file.read_bytes()
    digests = [hashlib.sha256(raw).hexdigest(), hashlib.md5(raw).hexdigest()]
    numbers = _confidential_numbers(seeded, person_file)
    files = sorted(p for p in seeded.out.rglob("*") if p.is_file())
    names = {str(p.relative_to(seeded.out)) for p in files}
    assert names >= {
        "release.json",
        "report.html",
        "t1/part-00000-us-c000.csv",
        "t1/headers.csv",
        "t2/part-00000-us-c000.csv",
        "t1-error.parquet",
        "t2-error.parquet",
    }
    for path in files:
        text = _public_text(path)
        for d in digests:
            assert d not in text.lower(), f"{path.name} holds a digest of the person file"
        for what, forms in numbers.items():
            for form in forms:
                # a number, not part of another one (arXiv:2209.03310 does not hold 2209)
                hit = re.search(rf"(?<![\d.,]){re.escape(form)}(?!\.?\d)", text)
                assert hit is None, f"{path.name} holds the {what} ({form})"
    assert "person-records" not in (seeded.out / "release.json").read_text()


def test_the_run_record_outside_the_folder_holds_the_confidential_facts(
    seeded: RunResult, inputs: tuple[Path, Path]
) -> None:
    assert seeded.record_path is not None
    assert seeded.record_path.parent == seeded.out.parent
    assert seeded.record_path.stat().st_mode & 0o077 == 0  # readable by the operator only
    rec = json.loads(seeded.record_path.read_text())
    person_file = str(inputs[1] / "person-records.txt")
    digest = hashlib.sha256(Path(person_file).read_bytes()).hexdigest()
    assert rec["persons"] == PERSONS
    assert rec["inputs"][person_file]["sha256"] == digest
    assert all("memberships" in lv for lv in rec["levels"])
    assert any("evaluation_nonprivate" in lv for lv in rec["levels"])
    assert "total" in rec["seconds"]


# ----------------------------------------------------------------- the derived guarantee
def _independent_level(lv: LevelPlan) -> Fraction:
    """s · max(γb/s + (1−γ)b/s, b/s) from the level's budget alone (Theorems 1, 3)."""
    per = lv.budget / lv.stability
    two = lv.gamma * per + (1 - lv.gamma) * per
    return lv.stability * max(two, per if lv.has_detailed_only else Fraction(0))


def test_release_json_states_the_exact_composition(seeded: RunResult) -> None:
    doc = read_release_document(seeded.out)
    per_run = {}
    for scope, run in doc.runs.items():
        plan = ReleasePlan.from_dict(run.plan)
        per_run[scope] = sum((_independent_level(lv) for lv in plan.levels), Fraction(0))
        assert run.guarantee == ExactGuarantee("zcdp", per_run[scope])
    expected = max(per_run.values())
    assert doc.guarantee == ExactGuarantee("zcdp", expected)
    stated = json.loads((seeded.out / "release.json").read_text())["guarantee"]["zcdp"]
    assert Fraction(stated["rho_exact"]) == expected
    assert Fraction(stated["rho"]) >= expected  # the float never understates the loss


def _decimal(rng: random.Random) -> Fraction:
    return Fraction(rng.randint(1, 999), rng.choice([10, 100, 1000]))


@pytest.mark.parametrize("defn", ["zcdp", "puredp"])
def test_random_plans_compose_exactly_and_round_up(defn: str) -> None:
    """≥ 30 random plans with decimal budgets (0.1/0.2/0.3-style): the ledger's total equals
    an independent composition and every published float is ≥ its exact value. Rounding to
    nearest would state a value below the exact one for some of these plans."""
    rng = random.Random(2026)
    below_if_nearest = 0
    for _ in range(40):
        levels = []
        for i in range(rng.randint(1, 12)):
            levels.append(
                LevelPlan.build(
                    geo=f"L{i}",
                    iteration_level=1,
                    privacy_defn=defn,  # type: ignore[arg-type]
                    budget=_decimal(rng),
                    gamma=Fraction(rng.randint(1, 9), 10),
                    thresholds=(5, 10, 20),
                    stability=rng.randint(1, 40),
                    has_detailed_only=rng.random() < 0.7,
                )
            )
        plan = ReleasePlan(defn, tuple(levels))  # type: ignore[arg-type]
        ledger = RunLedger(plan)
        for lv in levels:
            used = {"stage1", "stage2"} | ({"total"} if lv.has_detailed_only else set())
            ledger.charge(lv, used)
        exact = sum((_independent_level(lv) for lv in levels), Fraction(0))
        assert ledger.total.value == exact == plan.total_budget
        published = ledger.total.to_json()
        body = next(iter(published.values()))
        (key,) = [k for k in body if not k.endswith("_exact")]
        assert Fraction(body[key]) >= exact
        assert Fraction(body[f"{key}_exact"]) == exact
        below_if_nearest += Fraction(float(exact)) < exact
    assert below_if_nearest > 0  # the test can tell rounding up from rounding to nearest


def test_a_level_that_draws_nothing_costs_nothing_and_overruns_are_refused() -> None:
    lv = LevelPlan.build(
        geo="L",
        iteration_level=1,
        privacy_defn="zcdp",
        budget=Fraction(1, 10),
        gamma=Fraction(1, 10),
        thresholds=(5, 10, 20),
        stability=3,
    )
    assert level_charge(lv, set()).value == 0
    assert level_charge(lv, {"total"}).value == Fraction(1, 10)
    ledger = RunLedger(ReleasePlan("zcdp", (lv,)))
    ledger.charge(lv, {"stage1", "stage2", "total"})
    with pytest.raises(RuntimeError, match="charged twice"):
        ledger.charge(lv, {"total"})


def test_float_up_never_understates() -> None:
    for x in (Fraction(4944, 1000), Fraction(1, 3), Fraction(2, 7), Fraction(10**20 + 1, 3)):
        assert Fraction(float_up(x)) >= x


# ----------------------------------------------------------------- nothing lost
def _digest_tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("where", ["equal", "inside", "containing"])
def test_overwrite_never_touches_the_inputs(
    inputs: tuple[Path, Path], tmp_path: Path, where: str
) -> None:
    import shutil

    config, data0 = inputs
    data = tmp_path / "work" / "data"
    shutil.copytree(data0, data)
    before = _digest_tree(tmp_path / "work")
    out = {"equal": data, "inside": data / "release", "containing": tmp_path / "work"}[where]
    args = ["safetab", "run", "--config", str(config), "--data", str(data), "--out", str(out)]
    res = CliRunner().invoke(app, [*args, "--overwrite", "--seed", "1", "-q"])
    assert res.exit_code == 2, res.output
    assert "input" in res.output
    assert _digest_tree(tmp_path / "work") == before


def test_overwrite_refuses_a_folder_that_is_not_a_release(
    inputs: tuple[Path, Path], tmp_path: Path
) -> None:
    config, data = inputs
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    args = ["safetab", "run", "--config", str(config), "--data", str(data), "--out", str(out)]
    res = CliRunner().invoke(app, [*args, "--overwrite", "--seed", "1", "-q"])
    assert res.exit_code == 2, res.output
    assert "not written by privtab" in res.output
    assert (out / "thesis.tex").read_text() == "years of work"


def test_overwrite_replaces_a_release(seeded: RunResult, inputs: tuple[Path, Path]) -> None:
    import shutil

    config, data = inputs
    out = seeded.out.parent / "again"
    shutil.copytree(seeded.out, out)
    args = ["safetab", "run", "--config", str(config), "--data", str(data), "--out", str(out)]
    runner = CliRunner()
    res = runner.invoke(app, [*args, "--seed", "2", "-q", "--no-report"])
    assert res.exit_code == 2
    assert "exists" in res.output
    res = runner.invoke(app, [*args, "--overwrite", "--seed", "2", "-q", "--no-report"])
    assert res.exit_code == 0, res.output
    assert not (out / "report.html").exists()  # replaced, not merged


# ----------------------------------------------------------------- non-private marked
def test_a_seeded_release_is_marked_not_private_everywhere(seeded: RunResult) -> None:
    doc = json.loads((seeded.out / "release.json").read_text())
    assert doc["private"] is False
    assert (seeded.out / NOT_PRIVATE_FILE).exists()
    parquets = list(seeded.out.glob("*.parquet"))
    assert parquets
    for p in parquets:
        meta = pq.ParquetFile(p).schema_arrow.metadata
        assert meta[b"privtab.private"] == b"false", p.name
        assert b"NOT PRIVATE" in meta[b"privtab.note"]
    assert "NOT PRIVATE" in (seeded.out / "report.html").read_text()
    res = CliRunner().invoke(app, ["semantics", "--release", str(seeded.out / "release.json")])
    assert res.exit_code == 0, res.output
    assert "not private" in res.output.lower()
    js = CliRunner().invoke(
        app, ["semantics", "--release", str(seeded.out / "release.json"), "--json"]
    )
    assert json.loads(js.stdout)["private"] is False


# ----------------------------------------------------------------- the release ledger
def test_lifetime_budget_across_releases(inputs: tuple[Path, Path], tmp_path: Path) -> None:
    """Two private releases of one input with a lifetime of 1.5 × one release's ρ: the
    second is refused before the data are read (nothing written, the message names the
    ledger and the numbers); with --allow-more-releases it runs and the ledger composes
    both exactly (2ρ)."""
    config, data = inputs
    ledger = tmp_path / "ledger.json"
    runner = CliRunner()

    def run(out: str, *extra: str) -> tuple[int, str]:
        args = ["safetab", "run", "--config", str(config), "--data", str(data)]
        args += ["--out", str(tmp_path / out), "--ledger", str(ledger), "--no-report", "-q"]
        res = runner.invoke(app, [*args, *extra])
        return res.exit_code, res.output

    code, text = run("first")
    assert code == 0, text
    rho = Fraction(read_release_document(tmp_path / "first").guarantee.value)
    lifetime = str(rho * 3 / 2)
    code, text = run("second", "--lifetime-rho", lifetime)
    assert code == 2, text
    assert str(ledger) in text
    assert "lifetime" in text
    assert not (tmp_path / "second").exists()
    assert not any(p.name.startswith(".second") for p in tmp_path.iterdir())
    code, text = run("second", "--lifetime-rho", lifetime, "--allow-more-releases")
    assert code == 0, text
    show = runner.invoke(app, ["ledger", "show", "--ledger", str(ledger), "--json"])
    assert show.exit_code == 0, show.output
    doc = json.loads(show.stdout)
    assert len(doc["releases"]) == 2
    assert all(r["status"] == "published" for r in doc["releases"])
    (ds,) = doc["datasets"]
    assert Fraction(ds["composed"]["value"]) == 2 * rho
    assert ds["over_lifetime"] == 1
    # the ledger knows the data set by the digest of its records and the file by its
    # SHA-256; the release folders never hold either
    digest = hashlib.sha256((data / "person-records.txt").read_bytes()).hexdigest()
    assert ds["dataset"].startswith("records:")
    assert all(f"sha256:{digest}" in r["identities"] for r in doc["releases"])
    for out in ("first", "second"):
        text = (tmp_path / out / "release.json").read_text()
        assert digest not in text
        assert ds["dataset"][len("records:") :] not in text


def test_test_runs_are_never_recorded_in_the_ledger(seeded: RunResult) -> None:
    import os

    ledger = Path(os.environ["PRIVTAB_LEDGER"])
    if ledger.exists():
        assert str(seeded.out) not in ledger.read_text()
    assert seeded.record.ledger == {}
