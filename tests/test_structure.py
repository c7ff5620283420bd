"""The shape of the code (issue 18): rules a reader can rely on, checked on the source.

- no module imports another package's ``_private`` name (a package's private names are its
  own business);
- no function under ``tabulate/`` longer than 80 lines (one job per function);
- no ``# type: ignore`` under ``mechanisms/`` or ``tabulate/`` (one mechanism model, typed);
- exactly one module renames files into place (``privtab.atomic``: every atomic write goes
  through it).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import privtab

SRC = Path(privtab.__file__).parent


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def _package(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_import_of_another_packages_private_names() -> None:
    bad = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        mine = _package(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                parts = node.module.split(".")
                if parts[0] != "privtab" or len(parts) < 2:
                    continue
                theirs = parts[1]
                if theirs == mine:
                    continue
                if any(_private(p) for p in parts[2:]):
                    bad.append(f"{path.relative_to(SRC)}: from {node.module} import ...")
                bad += [
                    f"{path.relative_to(SRC)}: {node.module}.{a.name}"
                    for a in node.names
                    if _private(a.name)
                ]
    assert bad == []


def test_functions_under_tabulate_are_short() -> None:
    long = []
    for path in _modules():
        if _package(path) != "tabulate":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > 80:
                    long.append(f"{path.relative_to(SRC)}::{node.name} ({n} lines)")
    assert long == []


def test_no_type_ignore_in_mechanisms_and_tabulate() -> None:
    hits = [
        f"{p.relative_to(SRC)}:{i}"
        for p in _modules()
        if _package(p) in ("mechanisms", "tabulate")
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if "# type: ignore" in line
    ]
    assert hits == []


def test_one_module_renames_files_into_place() -> None:
    rename = re.compile(
        r"\bos\.replace\(|\bos\.rename\(|\.rename\((?!\{|mapping=)|\.replace\((?:tmp|dst|path)"
    )
    movers = {
        str(p.relative_to(SRC))
        for p in _modules()
        if any(
            rename.search(line) and "str." not in line and "columns" not in line
            for line in p.read_text(encoding="utf-8").splitlines()
            if not line.lstrip().startswith(("#", '"', "'"))
        )
    }
    assert movers == {"atomic.py"}
