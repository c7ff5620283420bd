"""TopDown in ``privtab demo``: the redistricting data of the demo's synthetic population.

:func:`run_demo_topdown` is what the demo calls after its SafeTab-P release: the same
synthetic folder's TopDown inputs (``cef-units``, ``cef-persons``, written by ``privtab
synth``), the 2020 production strategies, the US run only (the demo's few small states;
Puerto Rico's run is the same code and would double the time), the same noise (secure;
seeded and marked NOT private only when asked). Synthetic data: no ledger entry.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from privtab.random import RandomSource
    from privtab.topdown.run import TopDownResult

__all__ = ["run_demo_topdown"]


def run_demo_topdown(
    data: Path, out: Path, states: list[str], *, source: RandomSource | None = None
) -> TopDownResult | None:
    """TopDown on the demo's input ``data`` into ``out`` (module docstring); ``None`` when
    the input holds no TopDown records (a ``privtab synth`` that does not write them)."""
    from privtab.topdown.folder import PERSONS_STEM, UNITS_STEM
    from privtab.topdown.run import TopDownOptions, run_release

    have = all(
        (data / f"{stem}{ext}").exists() or (data / f"{stem}.parquet").exists()
        for stem in (UNITS_STEM, PERSONS_STEM)
        for ext in (".txt",)
    )
    if not have:
        return None
    runs = ("us",) if any(s != "72" for s in states) else ("pr",)
    opts = TopDownOptions(
        runs=runs,
        source=source,
        allow_insecure=source is not None and not source.is_private,
        use_ledger=False,
        overwrite=True,
        run_record=out.parent / f"{out.name}.CONFIDENTIAL-run-record.json",
    )
    log = logging.getLogger("privtab.topdown")

    def steps(message: str) -> None:  # the steps, not the count of parents solved
        if not message.startswith("["):
            log.info("topdown: %s", message)

    return run_release(data, out, opts, progress=steps)
