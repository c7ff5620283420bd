"""The SafeTab-P engine: release plans, privacy analyses, the algorithm and releases.

- :class:`ReleasePlan` / :class:`LevelPlan` — budgets, noise and exact MOE per level
  (:mod:`~privtab.tabulate.plan`, with ``StagePlan``);
- :func:`analyse` — the end-to-end guarantee under every analysis (:mod:`~.privacy`);
- :func:`run_release` with :class:`RunOptions` → :class:`RunResult` — a whole release,
  published atomically (:mod:`~.run`); the tables' columns are ``T1_SCHEMA`` /
  ``T2_SCHEMA`` of :mod:`~.tables`.

Most users want :mod:`privtab.safetab` (one call: DataFrames in, a release out).

Inside (one job per module): ``domain`` (the public domain of a level and its chunks),
``aggregate`` and ``counts`` (exact counts from the person file), ``algorithm`` (Algorithms
1–3 over arrays; the noise draw), ``tables`` (T1/T2 frames), ``chunk`` (one chunk: counts
in, tables out), ``results`` (chunk and level tallies), ``evaluation`` (the non-private
diagnostic), ``engines`` (Polars, Spark), ``charges`` (the derived guarantee), ``output``
(writers), ``runs`` / ``describe`` / ``context`` / ``run``
(SafeTab-P's part of a release; the run skeleton, the ledger steps and the worker thread
are :mod:`privtab.publish`'s), ``report`` (report.html). See ``docs/safetab.md``.

Importing :mod:`privtab.tabulate` is cheap: names are loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from privtab.tabulate.context import RunOptions
    from privtab.tabulate.plan import LevelPlan, ReleasePlan
    from privtab.tabulate.privacy import analyse
    from privtab.tabulate.run import RunResult, run_release

__all__ = [
    "LevelPlan",
    "ReleasePlan",
    "RunOptions",
    "RunResult",
    "analyse",
    "run_release",
]

_WHERE = {
    "LevelPlan": "plan",
    "ReleasePlan": "plan",
    "RunOptions": "context",
    "RunResult": "run",
    "run_release": "run",
    "analyse": "privacy",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"privtab.tabulate.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'privtab.tabulate' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
