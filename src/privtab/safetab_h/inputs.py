"""All SafeTab-H inputs at once, validated together before anything is written.

Layout (as production's CSV reader expects; ``docs/safetab-h.md``):

- parameters: ``config.json`` (SafeTab-H keys, :mod:`privtab.safetab_h.config`) and, next to
  it, the four race/ethnicity reference files (default: the packaged 2020 production
  ``NMFv5``);
- data: ``household-records.txt`` (or ``.parquet``), ``GRF-C.txt`` (or ``.parquet``) and —
  unless ``t1`` names another — ``pop-group-totals.txt`` (or ``.parquet``);
- ``t1``: a ``pop-group-totals`` file, a folder holding one, privtab's own SafeTab-P
  release folder (its ``t1/`` part files, or ``t1.parquet``) or that ``t1/`` folder.

:func:`load_inputs` checks the config, the reference files, the GRF-C, the T1 (schema,
unique groups, the run's rows) and the household file's header; the household rows are
validated while they are aggregated (one pass), and the engine raises before anything is
written. Every problem of every file is collected into one
:class:`~privtab.data.InputValidationError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from privtab.data.errors import Problem, ProblemLog
from privtab.data.geography import GRFC_STEM, Geography, load_geography
from privtab.data.households import HouseholdReader, find_household_file
from privtab.data.households import find_input_file as find_input
from privtab.data.inputs import sha256_file
from privtab.data.iterations import REFERENCE_FILES, ReferenceData, load_reference
from privtab.data.levels import Scope
from privtab.data.persons import DEFAULT_BATCH_ROWS
from privtab.data.pop_groups import POP_GROUP_STEM, PopulationGroups, load_pop_groups
from privtab.data.resources import production_config_dir_h
from privtab.safetab_h.config import HConfig, load_config
from privtab.safetab_h.domain import RunGroups, run_groups

if TYPE_CHECKING:
    from privtab.safetab_h.queries import HPlan

__all__ = ["HInputs", "load_domain", "load_inputs", "resolve_config_path", "t1_files"]


@dataclass(frozen=True)
class HInputs:
    """Validated config, reference data, geography and T1 groups, and the household file."""

    config: HConfig
    reference: ReferenceData
    geography: Geography
    t1: PopulationGroups
    groups: dict[Scope, RunGroups]
    config_path: Path
    households_path: Path
    grfc_path: Path

    @property
    def parameters_dir(self) -> Path:
        return self.config_path.parent

    def household_reader(self, batch_rows: int = DEFAULT_BATCH_ROWS) -> HouseholdReader:
        """A validating batch reader of the household file: rows of the run's states only
        (production's readers drop the others before validating)."""
        return HouseholdReader(
            self.households_path,
            self.reference,
            self.geography,
            self.config.max_race_codes,
            batch_rows=batch_rows,
            run_states=self.config.states(),
        )

    def public_files(self) -> list[Path]:
        """The public inputs: config, reference files, GRF-C and the T1 (noisy output)."""
        refs = [self.parameters_dir / f for f in REFERENCE_FILES]
        return [self.config_path, *refs, self.grfc_path, *self.t1.files]

    def input_files(self) -> list[Path]:
        return [*self.public_files(), self.households_path]

    def fingerprints(self) -> dict[str, dict[str, object]]:
        """SHA-256 and size of every input (confidential: run record and ledger only)."""
        return {
            str(p): {"sha256": sha256_file(p), "bytes": p.stat().st_size}
            for p in self.input_files()
        }


def resolve_config_path(config: str | Path | None) -> Path:
    """``config.json`` from a file path, a parameters directory, or the packaged NMFv5."""
    if config is None:
        return production_config_dir_h() / "config.json"
    p = Path(config)
    return p / "config.json" if p.is_dir() else p


def t1_files(t1: Path, log: ProblemLog) -> list[Path]:
    """The T1 files ``t1`` names (module docstring), in order; a problem if none."""
    from privtab.publish.census import part_files

    if t1.is_file():
        return [t1]
    if not t1.is_dir():
        log.add(Problem(str(t1), "missing_file", "no such T1 file or folder"))
        return []
    if (t1 / "t1").is_dir():
        return part_files(t1, "t1")
    if (t1 / "t1.parquet").is_file():
        return [t1 / "t1.parquet"]
    for stem in (POP_GROUP_STEM,):
        for ext in (".txt", ".parquet"):
            if (t1 / f"{stem}{ext}").is_file():
                return [t1 / f"{stem}{ext}"]
    parts = part_files(t1.parent, t1.name)
    if parts:
        return parts
    log.add(
        Problem(
            str(t1),
            "missing_file",
            "holds no T1: expected pop-group-totals.txt, a SafeTab-P release (t1/ or "
            "t1.parquet) or the part files of its t1/ folder",
        )
    )
    return []


def load_inputs(
    config: str | Path | None,
    data_dir: str | Path,
    t1: str | Path | None = None,
    *,
    allow_empty: bool = False,
) -> HInputs:
    """Read and validate every input but the household rows (module docstring); raise one
    :class:`~privtab.data.InputValidationError` listing all problems."""
    log = ProblemLog()
    config_path = resolve_config_path(config)
    data = Path(data_dir)
    cfg = load_config(config_path, log)
    ref = load_reference(config_path.parent, log)
    grfc_path = find_input(data, GRFC_STEM, log)
    households = find_household_file(data, log, allow_empty=allow_empty)
    if t1 is None:
        found = find_input(data, POP_GROUP_STEM, log)
        files = [found] if found is not None else []
    else:
        files = t1_files(Path(t1), log)
    states = cfg.state_filter_us if cfg is not None else ()
    geo = None if grfc_path is None else load_geography(grfc_path, log, states)
    pops = load_pop_groups(files, ref, log) if files else None
    groups: dict[Scope, RunGroups] = {}
    if cfg is not None and ref is not None and geo is not None and pops is not None:
        for scope in cfg.scopes:
            groups[scope] = run_groups(pops, scope, cfg.run_states(scope), geo, ref, log)
    log.raise_if_any()
    assert cfg is not None
    assert ref is not None
    assert geo is not None
    assert pops is not None
    assert households is not None
    assert grfc_path is not None
    return HInputs(cfg, ref, geo, pops, groups, config_path, households, grfc_path)


def load_domain(
    config: str | Path | None, data_dir: Path, t1: Path | None = None
) -> tuple[HConfig, list[RunGroups], list[HPlan]]:
    """The public side of a run — config, each run's T1 groups and plan — without the
    household file (output validation's domain checks, ``privtab safetab-h plan --data``)."""
    from privtab.safetab_h.queries import HPlan

    log = ProblemLog()
    config_path = resolve_config_path(config)
    cfg = load_config(config_path, log)
    ref = load_reference(config_path.parent, log)
    grfc_path = find_input(data_dir, GRFC_STEM, log)
    if t1 is None:
        found = find_input(data_dir, POP_GROUP_STEM, log)
        files = [found] if found is not None else []
    else:
        files = t1_files(t1, log)
    states = cfg.state_filter_us if cfg is not None else ()
    geo = None if grfc_path is None else load_geography(grfc_path, log, states)
    pops = load_pop_groups(files, ref, log) if files else None
    log.raise_if_any()
    assert cfg is not None
    assert ref is not None
    assert geo is not None
    assert pops is not None
    groups = [run_groups(pops, s, cfg.run_states(s), geo, ref, log) for s in cfg.scopes]
    log.raise_if_any()
    plans = [HPlan.from_config(cfg, ref, s) for s in cfg.scopes]
    return cfg, groups, plans
