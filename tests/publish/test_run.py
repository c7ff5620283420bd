"""The product-neutral run skeleton's small steps (:mod:`privtab.publish.run`), which every
product's release calls: the confidential file read once and refused if it changed
meanwhile, nothing of the operator's machine in ``release.json``, a failed output check
shown at the output path and publishing nothing. (The whole skeleton runs in every
product's release tests: ``tests/tabulate/test_release_ledger.py``,
``tests/safetab_h/test_ledger.py``.)"""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from privtab.data.errors import Problem
from privtab.errors import InputError, RunFailedError
from privtab.publish.run import check_staged, public_config, public_label, read_unchanged
from privtab.publish.validation import OutputValidationError


def test_read_unchanged_returns_what_the_read_returned(tmp_path: Path) -> None:
    f = tmp_path / "household-records.txt"
    f.write_text("A|B\n1|2\n")
    assert read_unchanged(f, "household", lambda: 7) == 7


@pytest.mark.parametrize("change", ["appended", "rewritten", "removed"])
def test_read_unchanged_refuses_a_file_changed_while_read(tmp_path: Path, change: str) -> None:
    """Its records are not the ones fingerprinted: refused, naming the file (a rewrite of
    the same size is seen by its modification time)."""
    import os

    f = tmp_path / "person-records.txt"
    f.write_text("A|B\n1|2\n")

    def read() -> int:
        if change == "appended":
            with f.open("a") as h:
                h.write("3|4\n")
        elif change == "rewritten":
            st = f.stat()
            f.write_text("A|B\n5|6\n")
            os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        else:
            f.unlink()
        return 1

    with pytest.raises(InputError, match="the person file changed while it was read") as err:
        read_unchanged(f, "person", read)
    assert err.value.file == str(f)


def test_public_config_names_the_file_not_its_folder(tmp_path: Path) -> None:
    cfg = tmp_path / "operator" / "secret-folder" / "config.json"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('{"privacy_defn": "zcdp"}\n')
    out = public_config({"source": str(cfg), "privacy_defn": "zcdp"})
    assert out == {
        "source": "config.json",
        "source_sha256": hashlib.sha256(cfg.read_bytes()).hexdigest(),
        "privacy_defn": "zcdp",
    }
    assert public_config({"source": str(tmp_path / "gone.json")})["source_sha256"] is None
    label = public_label(f"{cfg} [US]", str(cfg))
    assert label == "config.json [US]"
    assert public_label("packaged [US]", "") == "packaged [US]"


def _ctx(out: Path) -> Any:
    said: list[str] = []
    return SimpleNamespace(out=out, seconds={}, progress=said.append, said=said)


def test_check_staged_times_a_passing_check(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path / "release")
    check_staged(ctx, tmp_path / ".staging", lambda: None)
    assert ctx.seconds["validate_output"] >= 0
    assert ctx.said == ["validating the written tables (Census output rules)"]


def test_a_failed_output_check_is_a_run_failure_shown_at_the_output_path(
    tmp_path: Path,
) -> None:
    """The staging folder's path is replaced by ``--out``'s, the first six lines are shown
    and the rest counted; the run fails (nothing is published: the caller's staging
    folder is then discarded by :func:`privtab.atomic.atomic_directory`)."""
    staging, out = tmp_path / ".staging-x", tmp_path / "release"
    problems = [
        Problem(str(staging / "t3" / "T03001" / "part-00000-us-c000.csv"), "cell_table",
                f"bad cell {i}", row=i + 2, column="T3_DATA_CELL", value="7")
        for i in range(10)
    ]  # fmt: skip

    def validate() -> None:
        raise OutputValidationError(problems)

    with pytest.raises(RunFailedError) as err:
        check_staged(_ctx(out), staging, validate)
    text = str(err.value)
    assert "failed output validation, so it was not published" in text
    assert str(staging) not in text
    assert str(out / "t3" / "T03001" / "part-00000-us-c000.csv") in text
    assert "more lines)" in text
    assert "defect of privtab" in text
