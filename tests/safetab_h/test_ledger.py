"""SafeTab-H on the release floors of issue 31, end to end: the data set is its parsed
households (whatever the file's encoding or row order; the same key on both engines,
``test_spark.py``), every ledger step of the shared run skeleton (a failed run withdraws
its reservation, unconfirmed entries are reported), and the release folder's hygiene
(stamped file times, the marker id in the ledger, no timings on stdout, no symlinked
``--out``, parent folders only with ``--parents``). Private runs (the secure source) on
400 generated households with the toy parameters (about a second each); the ledger is a
file of each test's own."""

from __future__ import annotations

import datetime as dt
import json
from fractions import Fraction
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from privtab.accounting import ExactGuarantee
from privtab.accounting.odometer import ReleaseLedger
from privtab.cli import app
from privtab.release import read_release_document
from tests._links import LINK_KINDS, symlinked_output

runner = CliRunner()


def _run(
    generated: tuple[Path, Path], out: Path, ledger: Path, *extra: str, data: Path | None = None
) -> tuple[int, str, str]:
    params, folder = generated
    res = runner.invoke(
        app,
        ["safetab-h", "run", "--config", str(params), "--data", str(data or folder),
         "--out", str(out), "--ledger", str(ledger), "--no-report", *extra],
    )  # fmt: skip
    return res.exit_code, res.output, res.stdout


def _copy(generated: tuple[Path, Path], dest: Path, how: str) -> Path:
    """The data folder with its household file re-encoded (CRLF), its rows reversed, as
    Parquet, or with one household's tenure changed."""
    dest.mkdir()
    for f in generated[1].iterdir():
        (dest / f.name).write_bytes(f.read_bytes())
    households = dest / "household-records.txt"
    lines = households.read_bytes().splitlines()
    if how == "crlf":
        households.write_bytes(b"\r\n".join(lines) + b"\r\n")
    elif how == "reordered":
        households.write_bytes(b"\n".join([lines[0], *reversed(lines[1:])]) + b"\n")
    elif how == "parquet":
        frame = pl.read_csv(households, separator="|", infer_schema=False)
        frame.write_parquet(dest / "household-records.parquet")
        households.unlink()
    else:  # one household's TEN (the last field) changed
        row = lines[1].rsplit(b"|", 1)
        row[1] = b"2" if row[1] != b"2" else b"3"
        households.write_bytes(b"\n".join([lines[0], b"|".join(row), *lines[2:]]) + b"\n")
    return dest


def _records_key(params: Path, data: Path) -> str:
    from privtab.safetab_h.engine import PolarsHEngine
    from privtab.safetab_h.inputs import load_inputs

    engine = PolarsHEngine()
    engine.prepare(load_inputs(params, data), lambda _m: None)
    assert engine.records is not None
    return engine.records.key


def test_the_records_digest_of_every_layout_of_one_file(
    generated: tuple[Path, Path], tmp_path: Path
) -> None:
    """The household file as written, with CRLF line endings, with its rows reversed, as
    Parquet: one records digest; one changed household: another."""
    params, data = generated
    key = _records_key(params, data)
    assert key.startswith("records:")
    for how in ("crlf", "reordered", "parquet"):
        assert _records_key(params, _copy(generated, tmp_path / how, how)) == key, how
    assert _records_key(params, _copy(generated, tmp_path / "changed", "changed")) != key


def test_a_reordered_copy_is_the_same_data_set(
    generated: tuple[Path, Path], tmp_path: Path
) -> None:
    """The households reordered are the same data set: a second release of them is
    composed with the first and refused past the lifetime budget, before any noise."""
    ledger = tmp_path / "ledger.json"
    code, text, _ = _run(generated, tmp_path / "first", ledger)
    assert code == 0, text
    (entry,) = ReleaseLedger.open(ledger).entries()
    assert entry.dataset.startswith("records:")
    rho = Fraction(entry.guarantee.value)
    assert rho == 2 * Fraction(read_release_document(tmp_path / "first").guarantee.value)
    copy = _copy(generated, tmp_path / "copy", "reordered")
    code, text, _ = _run(
        generated, tmp_path / "second", ledger, "--lifetime-rho", str(rho * 3 / 2), data=copy
    )
    assert code == 2, text
    assert "1 earlier release(s)" in text
    assert not (tmp_path / "second").exists()
    assert len(ReleaseLedger.open(ledger).entries()) == 1  # the refused claim is withdrawn
    code, text, _ = _run(generated, tmp_path / "third", ledger, data=copy)
    assert code == 0, text
    assert "this data set already has 1 release(s)" in " ".join(text.split())
    book = ReleaseLedger.open(ledger)
    assert book.datasets() == [entry.dataset]
    assert book.composed(entry.dataset) == ExactGuarantee.zcdp(2 * rho)


def test_a_failed_run_withdraws_its_reservation(
    generated: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure after the reservation (here: while the tables are written) publishes
    nothing and leaves no pending entry (the shared skeleton's withdrawal)."""
    import privtab.publish.context as context

    def broken(name: str) -> None:
        if name == "write":
            raise RuntimeError("a defect while writing")

    monkeypatch.setattr(context, "phase", broken)
    ledger, out = tmp_path / "ledger.json", tmp_path / "release"
    code, text, _ = _run(generated, out, ledger)
    assert code != 0, text
    assert ReleaseLedger.open(ledger).entries() == []
    assert not out.exists()
    assert not any(p.name.startswith(".release") for p in tmp_path.iterdir())


def test_unconfirmed_entries_are_reported(generated: tuple[Path, Path], tmp_path: Path) -> None:
    """An entry left pending by a run that ended without settling it is reported, with the
    command that settles it, and counts as spent."""
    ledger = tmp_path / "ledger.json"
    book = ReleaseLedger.open(ledger)
    res = book.reserve("another", ExactGuarantee.zcdp(1), release=str(tmp_path / "gone"))
    doc = json.loads(ledger.read_text())
    doc["entries"][0]["process"] = "a-crashed-host:12345"
    ledger.write_text(json.dumps(doc))
    code, text, _ = _run(generated, tmp_path / "release", ledger)
    assert code == 0, text
    flat = " ".join(text.split())
    assert f"ledger entry {res.entry.id}" in flat
    assert "UNCONFIRMED" in flat
    assert f"privtab ledger settle {res.entry.id} --not-published" in flat


def test_json_marker_and_file_times(generated: tuple[Path, Path], tmp_path: Path) -> None:
    """``--json`` prints no timing (they are in the run record); the folder's marker id is
    the ledger entry's; every file carries the run's start as its time."""
    out, ledger = tmp_path / "release", tmp_path / "ledger.json"
    code, text, stdout = _run(generated, out, ledger, "--json")
    assert code == 0, text
    summary = json.loads(stdout)
    assert "seconds" not in stdout
    record = json.loads(Path(summary["run_record"]).read_text())
    assert record["seconds"]["total"] > 0
    assert not Path(summary["run_record"]).is_relative_to(out)
    marker = json.loads((out / ".privtab-folder.json").read_text())
    (entry,) = ReleaseLedger.open(ledger).entries()
    assert record["ledger"]["folder"] == marker["id"] == entry.folder
    assert entry.status == "published"
    assert entry.dataset[len("records:") :] not in json.dumps(record) + stdout
    doc = json.loads((out / "release.json").read_text())
    start = dt.datetime.fromisoformat(doc["started_utc"]).timestamp()
    assert {p.stat().st_mtime for p in [out, *out.rglob("*")]} == {start}


@pytest.mark.parametrize("link", LINK_KINDS)
def test_a_symlinked_out_is_refused_before_any_work(
    generated: tuple[Path, Path], tmp_path: Path, link: str
) -> None:
    out, real = symlinked_output(tmp_path, link)
    code, text, _ = _run(generated, out, tmp_path / "ledger.json")
    assert code == 2, text
    assert "is a symbolic link" in text
    assert out.is_symlink()
    assert list(real.iterdir()) == []
    assert not (tmp_path / "ledger.json").exists()


def test_parent_folders_are_created_only_with_parents(
    generated: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "not" / "there" / "release"
    code, text, _ = _run(generated, out, tmp_path / "ledger.json")
    assert code == 2, text
    assert "does not exist" in text
    assert not (tmp_path / "not").exists()
    code, text, _ = _run(generated, out, tmp_path / "ledger.json", "--parents")
    assert code == 0, text
    assert (out / "release.json").exists()
