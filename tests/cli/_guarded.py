"""Run ``privtab`` commands in-process under a memory limit and a per-command alarm.

For inputs that used to hang (a named pipe, ``/dev/zero``, an exponent of 10⁹) or to fill
memory (a plan whose noise opens 10⁸ cells): a regression must fail the test, not hang the
suite or exhaust the shared machine. The test starts this module once in a subprocess
(``python -m tests.cli._guarded CASES.json``), with every case in it; each case is an argv
list and an environment. It prints one JSON line per case: exit code, stderr, seconds, and
``"hang"`` or ``"memory"`` when the alarm or the limit cut the command short.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
from typing import Any

MEMORY_LIMIT = 4 << 30
"""Address space of the process (bytes): a regression fails with MemoryError, no swap."""
SECONDS = 60
"""Alarm per command: a refusal takes a second or two; a hang is cut here."""


class _AlarmError(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _AlarmError


def run_case(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    from typer.testing import CliRunner

    from privtab.cli import app

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    t0 = time.monotonic()
    signal.alarm(SECONDS)
    try:
        res = CliRunner().invoke(app, argv, catch_exceptions=True)
        out: dict[str, Any] = {"exit": res.exit_code, "stderr": res.stderr}
        if isinstance(res.exception, _AlarmError):
            out["cut"] = "hang"
        elif isinstance(res.exception, MemoryError):
            out["cut"] = "memory"
    except _AlarmError:
        out = {"exit": None, "stderr": "", "cut": "hang"}
    except MemoryError:
        out = {"exit": None, "stderr": "", "cut": "memory"}
    finally:
        signal.alarm(0)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out["seconds"] = time.monotonic() - t0
    return out


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    signal.signal(signal.SIGALRM, _on_alarm)
    with open(sys.argv[1]) as fh:
        cases = json.load(fh)
    for name, case in cases.items():
        result = run_case(case["argv"], case.get("env", {}))
        print(json.dumps({"name": name, **result}), flush=True)


if __name__ == "__main__":
    main()
