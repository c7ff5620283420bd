"""SafeTab-H in ``privtab demo``: Detailed DHC-B of the demo's synthetic population.

:func:`run_demo_h` is what the demo calls after its SafeTab-P release: households of the
same synthetic population (``household-records`` of the input folder — from ``privtab
synth`` once it writes them, else derived from the person file by
:func:`privtab.bench.households.households_from_persons`), the 2020 production NMFv5
restricted to the demo's states, the T1 just published as the domain, and the same noise
(secure; seeded and marked NOT private only when asked). Synthetic data: no ledger.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from privtab.random import RandomSource
    from privtab.safetab_h.run import HRunResult

__all__ = ["demo_parameters_h", "run_demo_h"]


def demo_parameters_h(directory: Path, states: list[str]) -> Path:
    """The production NMFv5 parameters copied to ``directory`` with ``state_filter_us`` the
    demo's US states (and ``run_pr`` when 72 is one of them); returns the config path."""
    from privtab.data.resources import production_config_dir_h
    from privtab.tabulate.demo import demo_parameters

    return demo_parameters(directory, states, "72" in states, production_config_dir_h())


def run_demo_h(
    data: Path,
    t1_release: Path,
    out: Path,
    states: list[str],
    *,
    source: RandomSource | None = None,
    report: bool = True,
) -> HRunResult:
    """SafeTab-H on the demo's input ``data`` with the T1 of its SafeTab-P release
    ``t1_release``, into ``out`` (module docstring)."""
    from privtab.safetab_h.run import run_release
    from privtab.tabulate.context import RunOptions

    households = data / "household-records.txt"
    if not households.exists() and not (data / "household-records.parquet").exists():
        from privtab.bench.households import households_from_persons

        persons = data / "person-records.txt"
        if not persons.exists():
            persons = data / "person-records.parquet"
        households_from_persons(persons, households)
    config = demo_parameters_h(out.parent / f"{out.name}-params", states)
    opts = RunOptions(
        source=source,
        allow_insecure=source is not None and not source.is_private,
        report=report,
        use_ledger=False,
        overwrite=True,
    )
    return run_release(config, data, out, opts, t1=t1_release)
