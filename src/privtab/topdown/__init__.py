"""TopDown: the 2020 redistricting data (P.L. 94-171) on open solvers.

Quick start (no data)::

    >>> from privtab.topdown import plan
    >>> p = plan("us")                      # the 2020 US persons run
    >>> str(p.guarantee.rho), round(p.guarantee.epsilon["optimal"], 2)
    ('293764/114921', 17.14)

A release from a data folder (``privtab synth`` layout): ``release("synth-de")`` returns a
:class:`~privtab.topdown.api.TopDownRelease` (the microdata and P1–P5/H1 as polars frames,
the exact guarantee); ``privtab topdown run`` writes the same folder.

The measurement side, one module each:

- :mod:`~privtab.topdown.histogram` — the persons histogram (2,016 cells) and its Kronecker
  queries; :mod:`~privtab.topdown.schema` — persons and units (H1) histograms;
- :mod:`~privtab.topdown.strategy` — exact rational shares per level and query, the pass
  orders, invariants and constraints (packaged: the four 2020 production runs);
- :mod:`~privtab.topdown.spine` — the 2020 US and PR spines (AIAN split, optimized block
  groups) on :mod:`privtab.data.hierarchy`, and the exact budget bypass;
- :mod:`~privtab.topdown.inputs` — C1 files to per-block and per-geounit histograms;
- :mod:`~privtab.topdown.constraints` — invariants and constraints by the production rules;
- :mod:`~privtab.topdown.measure` — exact discrete Gaussian noisy measurements, per batch;
- :mod:`~privtab.topdown.nmf` — the noisy measurement file (Parquet) and its reader;
- :mod:`~privtab.topdown.problems` — the per-parent problems the solver works on;
- :mod:`~privtab.topdown.guarantee` and :mod:`~privtab.topdown.planning` — ρ, ε(δ) by every
  analysis, Semi-DP, per attribute and per geography.

The post-processing and the release:

- :mod:`~privtab.topdown.solve` — the per-parent problem (C3) and its solvers;
- :mod:`~privtab.topdown.engine` — the top-down driver, streamed by chunk;
- :mod:`~privtab.topdown.runs`, :mod:`~privtab.topdown.folder` — the US/PR persons and
  units runs from a data folder;
- :mod:`~privtab.topdown.assemble`, :mod:`~privtab.topdown.mdf`, :mod:`~privtab.topdown.pl94`
  — the microdata and tables, state by state; :mod:`~privtab.topdown.document`,
  :mod:`~privtab.topdown.report`, :mod:`~privtab.topdown.validate` — ``release.json``,
  ``report.html``, output validation; :mod:`~privtab.topdown.run` — the whole release;
  :mod:`~privtab.topdown.api` — :func:`release`.

See ``docs/topdown.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privtab._lazy import lazy_exports

if TYPE_CHECKING:
    from privtab.topdown.api import TopDownRelease, release
    from privtab.topdown.planning import TopDownPlan, plan
    from privtab.topdown.strategy import Strategy, load_strategy, production_strategy

__all__ = [
    "Strategy",
    "TopDownPlan",
    "TopDownRelease",
    "load_strategy",
    "plan",
    "production_strategy",
    "release",
]

_WHERE = {
    "Strategy": "strategy",
    "TopDownRelease": "api",
    "release": "api",
    "TopDownPlan": "planning",
    "load_strategy": "strategy",
    "plan": "planning",
    "production_strategy": "strategy",
}

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
