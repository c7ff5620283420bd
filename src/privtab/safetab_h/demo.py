"""SafeTab-H in ``privtab demo``: Detailed DHC-B of the demo's synthetic population.

:func:`run_demo_h` is what the demo calls after its SafeTab-P release: the households of
the same synthetic population (``household-records`` of the input folder, written by
``privtab synth``), the 2020 production NMFv5 restricted to the demo's states, the T1 just
published as the domain, and the same kind of noise (secure; seeded and marked NOT
private only when asked). Synthetic data: no ledger.
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
    parameters: Path | None = None,
) -> HRunResult:
    """SafeTab-H on the demo's input ``data`` with the T1 of its SafeTab-P release
    ``t1_release``, into ``out`` (module docstring); its parameters are written to
    ``parameters`` (default: ``out``'s sibling ``<name>-params``)."""
    from privtab.safetab_h.run import run_release
    from privtab.tabulate.context import RunOptions

    where = parameters if parameters is not None else out.parent / f"{out.name}-params"
    config = demo_parameters_h(where, states)
    opts = RunOptions(
        source=source,
        allow_insecure=source is not None and not source.is_private,
        report=report,
        use_ledger=False,
        overwrite=True,
    )
    return run_release(config, data, out, opts, t1=t1_release)
