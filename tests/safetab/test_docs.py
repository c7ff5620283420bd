"""docs/python.md runs: its code blocks, in order, in a fresh interpreter (issue 19)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python.md"


def test_the_python_page_runs_and_prints_what_it_says(tmp_path: Path) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)
    assert len(blocks) >= 5
    out = subprocess.run(
        [sys.executable, "-c", "\n".join(blocks)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("<privtab Release NOT PRIVATE (seeded/test noise: never publish)")
    assert "T1 6,088 rows, T2 20 rows, runs US>" in lines[0]  # as the page shows it
    assert lines[1] == "23.92"
    assert lines[2] == "<privtab Plan: ρ = 4.944 zCDP, 19 levels (US 11, PR 8)>"
