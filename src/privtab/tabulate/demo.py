"""``privtab demo``: the main job end to end on built-in synthetic data.

Builds a synthetic population (a few states and Puerto Rico, every geography level, with
its households), runs the 2020 production SafeTab-P configuration (zCDP, discrete
Gaussian noise, ρ = 4.944 for the US run) restricted to those states over it with secure
noise (seeded — and then marked NOT private — only when asked), and evaluates the release
against the synthetic truth (a non-private diagnostic a real release never has); then
SafeTab-H (Detailed DHC-B, production NMFv5) on the same population's households with the
T1 just published (:func:`privtab.safetab_h.demo.run_demo_h`). The whole working folder
(input, parameters, both releases, run records) is written atomically.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from privtab.data.synth import SynthResult
    from privtab.safetab_h.run import HRunResult
    from privtab.tabulate.run import RunResult
    from privtab.topdown.run import TopDownResult

__all__ = ["Demo", "run_demo"]

LOG = logging.getLogger("privtab.tabulate")


@dataclass(frozen=True)
class Demo:
    """What the demo wrote: the SafeTab-P run, the SafeTab-H run (``run_h``), the
    synthetic input and the states chosen."""

    root: Path
    run: RunResult
    synth: SynthResult
    states: list[str]
    topdown: TopDownResult | None = None
    """The TopDown release of the same population (``None``: the input has no TopDown
    records)."""
    run_h: HRunResult | None = None
    """The SafeTab-H release of the same population's households (``None``: the input has
    no household records)."""

    def summary(self) -> dict[str, Any]:
        """The release summary of the run (:func:`privtab.tabulate.summary.release_summary`)
        with the synthetic input and where every output is."""
        from privtab.tabulate.summary import release_summary

        release = self.root / "release"
        summary = release_summary(self.run)
        summary.update(
            run_record=str(self.root / "release.CONFIDENTIAL-run-record.json"),
            synthetic_persons=self.synth.persons,
            states=self.states,
            outputs={
                "t1": str(release / "t1"),
                "t2": str(release / "t2"),
                "release_json": str(release / "release.json"),
                "report": str(release / "report.html"),
            },
        )
        if self.run_h is not None:
            h = self.root / "release-h"
            summary["safetab_h"] = {
                **self.run_h.summary(),
                "run_record": str(self.root / "release-h.CONFIDENTIAL-run-record.json"),
                "outputs": {
                    "t3": str(h / "t3"),
                    "t4": str(h / "t4"),
                    "release_json": str(h / "release.json"),
                    "report": str(h / "report.html"),
                },
            }
        if self.topdown is not None:
            g = self.topdown.document["guarantee"]
            summary["topdown"] = {
                "release": str(self.root / "topdown"),
                "rho_per_person": g["persons"]["rho"]["exact"],
                "rho_per_housing_unit": g["housing_units"]["rho"]["exact"],
            }
        return summary

    def where(self) -> str:
        """Where the releases and the synthetic input are."""
        h = (
            ""
            if self.run_h is None
            else f"; T3/T4 of SafeTab-H (Detailed DHC-B), its release.json and report.html "
            f"are in {self.root / 'release-h'}"
        )
        return (
            "T1/T2 (the Census folders t1/ and t2/, with their error tables), release.json "
            f"and report.html are in {self.root / 'release'}{h}; the synthetic input is in "
            f"{self.root / 'input'}."
            + (
                f" TopDown (P.L. 94-171 microdata and P1-P5/H1) is in {self.root / 'topdown'}."
                if self.topdown is not None
                else ""
            )
        )


def demo_parameters(
    directory: Path, states: list[str], run_pr: bool, source: Path | None = None
) -> Path:
    """The production parameters (``source``: default SafeTab-P's) copied to ``directory``
    with ``state_filter_us`` set to the demo's states (FIPS); returns the config path."""
    from privtab.data import production_config_dir

    directory.mkdir(parents=True, exist_ok=True)
    src = source if source is not None else production_config_dir()
    for f in src.iterdir():
        if f.is_file():
            shutil.copy2(f, directory / f.name)
    cfg = json.loads((src / "config.json").read_text())
    us = [s for s in states if s != "72"]
    cfg["state_filter_us"] = us or cfg["state_filter_us"][:1]
    cfg["run_us"] = bool(us)
    cfg["run_pr"] = run_pr
    (directory / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return directory / "config.json"


def run_demo(out: str | Path, persons: int, states: str, seed: int | None = None) -> Demo:
    """Synthesise ``persons`` in ``states`` (USPS or FIPS; PR for Puerto Rico) and release
    them into ``out`` (replacing a folder a previous demo wrote). ``seed``: seeded noise,
    NOT private. Raises ``ValueError`` for unknown states, a ``UserError`` otherwise."""
    from privtab.atomic import InterruptGuard, atomic_directory
    from privtab.data.synth import synthesize
    from privtab.data.synth.states import resolve_states
    from privtab.random import SeededSource
    from privtab.safetab_h.demo import run_demo_h
    from privtab.tabulate.run import RunOptions, run_release

    chosen = [st.fips for st in resolve_states(states)]
    opts = RunOptions(
        source=SeededSource(seed) if seed is not None else None,
        allow_insecure=seed is not None,
        evaluate=True,
        use_ledger=False,  # synthetic data: not a confidential data set to account for
    )
    root = Path(out)
    with (
        InterruptGuard() as guard,
        atomic_directory(root, kind="demo", overwrite=True, guard=guard) as tmp,
    ):
        LOG.info("demo: synthesising %s persons in states %s", f"{persons:,}", ", ".join(chosen))
        synth = synthesize(tmp / "input", persons, states=chosen, seed=2020)
        params = demo_parameters(tmp / "parameters", chosen, "72" in chosen)
        res = run_release(params, tmp / "input", tmp / "release", opts)
        LOG.info("demo: SafeTab-H on the same population's households")
        h_source = SeededSource(f"{seed}-h") if seed is not None else None
        res_h = run_demo_h(tmp / "input", tmp / "release", tmp / "release-h", chosen,
                           source=h_source, parameters=tmp / "parameters-h")  # fmt: skip
        from privtab.topdown.demo import run_demo_topdown

        LOG.info("demo: TopDown (the redistricting data) of the same population")
        td = run_demo_topdown(tmp / "input", tmp / "topdown", chosen, source=opts.source)
    res.out = root / "release"
    res_h.out = root / "release-h"
    if td is not None:
        td.out = root / "topdown"
    return Demo(root, res, synth, chosen, topdown=td, run_h=res_h)
