"""``tools/mutation.py`` (``make mutation``): every mutant still applies to the code.

The mutation run itself is ``make mutation`` (minutes); this keeps its snippets in step with
the source in ``make test``: a snippet that is gone or ambiguous fails here, loudly.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("privtab_mutation", ROOT / "tools/mutation.py")
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


TOOL = _tool()


@pytest.mark.parametrize("mutant", TOOL.MUTANTS, ids=lambda m: m.name)
def test_every_mutant_applies_once_and_changes_the_code(mutant: object) -> None:
    text = (ROOT / mutant.path).read_text()  # type: ignore[attr-defined]
    mutated = TOOL.apply(text, mutant)
    assert mutated != text
    for test in mutant.tests:  # type: ignore[attr-defined]
        assert (ROOT / test).is_file(), test


def test_a_moved_snippet_fails_loudly() -> None:
    m = TOOL.MUTANTS[0]
    with pytest.raises(TOOL.MutantError, match="is gone"):
        TOOL.apply("nothing here", m)
    snippet = m.edits[0][0]
    with pytest.raises(TOOL.MutantError, match="occurs 2 times"):
        TOOL.apply(snippet + snippet, m)


def test_the_list_names_every_required_mutant(capsys: pytest.CaptureFixture[str]) -> None:
    assert TOOL.main(["--list"]) == 0
    out = capsys.readouterr().out
    for name in (
        "dg-tails-6sigma",
        "dg-slow-path-accepts",
        "dlap-slow-floor-off-by-one",
        "aes-fixed-key",
        "dg-variance-1pct",
        "geometric-scale-1pct",
        "stage1-share",
        "stability-minus-one",
        "fork-key-reuse",
        "secure-env-seed-fallback",
    ):
        assert name in out
