"""privtab: differentially private population tables with end-to-end accounting.

One call runs SafeTab-P on DataFrames (``privtab.safetab.release(persons, geography)``,
``docs/python.md``); the subpackages hold the parts:

- :mod:`privtab.safetab` — the one-call Python API: a release, its plan, intervals;
- :mod:`privtab.safetab_h` — SafeTab-H (Detailed DHC-B: households by type and tenure);
- :mod:`privtab.accounting` — guarantee types, conversions, composition, ledgers;
- :mod:`privtab.random` — secure randomness and exact noise samplers;
- :mod:`privtab.mechanisms` — noise mechanisms that know their guarantee and error;
- :mod:`privtab.data` — the Census input files: readers, validation, reference data;
- :mod:`privtab.tabulate` — the SafeTab-P engine: plans, analyses, runs;
- :mod:`privtab.release` — ``release.json``, the typed description of a release;
- :mod:`privtab.publish` — the shared publishing floors (Census part files, output rules);
- :mod:`privtab.analysis` — using noisy outputs: intervals, combinations, tests;
- :mod:`privtab.semantics` — what a guarantee means to an attacker;
- :mod:`privtab.invariants` — Semi-DP: privacy with counts published exactly;
- :mod:`privtab.report`, :mod:`privtab.bench` — report plumbing and benchmarks.

Importing :mod:`privtab` is cheap: it pulls in no numerical or dataframe library.
Subpackages are imported on first use (``privtab.accounting`` after ``import privtab``
works; it is loaded then). Every public name is listed in ``docs/api.md``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__version__ = "0.1.0"

SUBPACKAGES = (
    "accounting",
    "analysis",
    "bench",
    "data",
    "invariants",
    "mechanisms",
    "publish",
    "random",
    "release",
    "report",
    "safetab",
    "safetab_h",
    "semantics",
    "tabulate",
    "topdown",
)
"""The subpackages, each loaded on first attribute access."""

__all__ = ["__version__", *SUBPACKAGES]


def __getattr__(name: str) -> ModuleType:
    if name in SUBPACKAGES:
        return importlib.import_module(f"privtab.{name}")
    raise AttributeError(f"module 'privtab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *SUBPACKAGES})
