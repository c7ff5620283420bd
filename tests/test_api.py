"""The public API a user can hold in their head (issues 18 and 19).

- ``docs/api.md`` lists exactly the names of every subpackage's ``__all__``, at most 120;
- every listed name resolves (lazy packages included);
- ``import privtab`` is cheap and gives every subpackage lazily; ``privtab.accounting``
  loads numpy and nothing heavier; ``python -m privtab`` is the command line;
- a test that imports a private name says why (a comment saying "private on purpose").
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import privtab

ROOT = Path(__file__).resolve().parents[1]
API_DOC = ROOT / "docs" / "api.md"
MAX_PUBLIC_NAMES = 120


def _documented() -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in API_DOC.read_text(encoding="utf-8").splitlines():
        head = re.match(r"^## `privtab\.(\w+)`\s*$", line)
        if head:
            current = sections.setdefault(head.group(1), [])
            continue
        item = re.match(r"^- `(\w+)` — \S", line)
        if item and current is not None:
            current.append(item.group(1))
    return sections


def test_api_doc_lists_exactly_the_public_names() -> None:
    documented = _documented()
    assert sorted(documented) == sorted(privtab.SUBPACKAGES)
    for pkg in privtab.SUBPACKAGES:
        names = importlib.import_module(f"privtab.{pkg}").__all__
        assert sorted(documented[pkg]) == sorted(names), pkg
        assert len(documented[pkg]) == len(set(documented[pkg])), f"{pkg}: listed twice"


def test_at_most_120_public_names_and_each_resolves() -> None:
    total = 0
    for pkg in privtab.SUBPACKAGES:
        mod = importlib.import_module(f"privtab.{pkg}")
        total += len(mod.__all__)
        for name in mod.__all__:
            assert getattr(mod, name) is not None, f"privtab.{pkg}.{name}"
    assert total <= MAX_PUBLIC_NAMES
    assert f"{total} names in all" in API_DOC.read_text(encoding="utf-8")


def _fresh(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return out.stdout.strip()


HEAVY = ("numpy", "scipy", "polars", "pandas", "mpmath", "matplotlib", "pyarrow", "rich")


def test_import_privtab_is_cheap_and_gives_the_subpackages_lazily() -> None:
    code = (
        "import sys, privtab\n"
        f"heavy = {HEAVY!r}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
        "print(sorted(m for m in sys.modules if m.startswith('privtab.')))\n"
        "print(all(s in dir(privtab) for s in privtab.SUBPACKAGES))\n"
        "print(privtab.accounting.ZCDP(1.0), callable(privtab.safetab.release))\n"
    )
    heavy, loaded, listed, used = _fresh(code).splitlines()
    assert heavy == "[]"
    assert loaded == "[]"
    assert listed == "True"
    assert used == "1-zCDP True"


def test_privtab_accounting_loads_numpy_only() -> None:
    code = (
        "import sys, privtab.accounting\n"
        f"heavy = {HEAVY!r}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
    )
    assert _fresh(code) == "['numpy']"


def test_python_dash_m_privtab_runs_the_cli() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "privtab", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip() == f"privtab {privtab.__version__}"


def _private_imports(tree: ast.Module) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("privtab"):
            parts = node.module.split(".")
            names = [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            parts = [
                p for a in node.names if a.name.startswith("privtab") for p in a.name.split(".")
            ]
            names = []
        else:
            continue
        if any(p.startswith("_") and not p.startswith("__") for p in [*parts, *names]):
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("path", sorted((ROOT / "tests").rglob("test_*.py")), ids=lambda p: p.name)
def test_a_test_importing_a_private_name_says_why(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    for lineno in _private_imports(ast.parse(text)):
        above = lines[max(0, lineno - 16) : lineno]
        assert any("private on purpose" in line for line in above), (
            f"{path.name}:{lineno} imports a private name: test the public API, or say why "
            "in a comment ('# private on purpose: ...')"
        )
