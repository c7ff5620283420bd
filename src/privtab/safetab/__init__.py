"""SafeTab-P in one call: DataFrames (or files) in, a typed release out.

Quick start (``docs/python.md``)::

    import privtab
    r = privtab.safetab.release(persons_df, grfc_df)   # Census columns; production config
    r.t1, r.t2                 # polars DataFrames: ITERATION_NAME attached, ages as integers
    r.guarantee, r.epsilon(1e-10)
    r.intervals(0.95)          # exact confidence intervals of every T1 count
    r.write("release-2020")    # the release folder, written atomically

- :func:`release` → :class:`Release` — runs the same engine as ``privtab safetab run``;
  ``seed=`` for tests (the release is then marked not private);
- :func:`plan` → :class:`Plan` — the levels, budgets and exact guarantee of a config
  (optionally restricted to the levels a given GRF-C tabulates), before any data.

Inside: ``inputs`` (paths or DataFrames → the Census input folder), ``planning``, ``run``,
``result``, ``tables`` (typed T1/T2), ``progress`` (the rich display). Importing this
package is cheap: names load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from privtab.safetab.planning import Plan, plan
    from privtab.safetab.result import Release
    from privtab.safetab.run import release

__all__ = ["Plan", "Release", "plan", "release"]

_WHERE = {"Plan": "planning", "plan": "planning", "Release": "result", "release": "run"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(f"privtab.safetab.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'privtab.safetab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
