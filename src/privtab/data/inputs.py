"""All SafeTab-P inputs at once: parameters directory + data directory, validated together.

Layout (as the Census CSV reader expects):

- parameters: ``config.json`` and, next to it, the four race/ethnicity reference files
  (default: the packaged 2020 production parameters);
- data: ``person-records.txt`` (or ``.parquet``) and ``GRF-C.txt`` (or ``.parquet``).

:func:`load_inputs` checks everything it can, collects every problem of every file and
raises one :class:`~privtab.data.errors.InputValidationError` — before the caller has
written anything. With ``validate_persons=False`` the person file is only header-checked,
so that an engine can validate while it aggregates, in a single pass
(:meth:`SafeTabInputs.person_reader`, then ``raise_if_invalid()`` before writing).
"""

from __future__ import annotations

import hashlib
import stat
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from privtab._files import file_problem
from privtab.data._scan import find_input, has_rows, open_table
from privtab.data.config import SafeTabConfig, load_config
from privtab.data.errors import InputValidationError, Problem, ProblemLog
from privtab.data.geography import GRFC_STEM, Geography, load_geography
from privtab.data.iterations import REFERENCE_FILES, ReferenceData, load_reference
from privtab.data.levels import PopulationGroupLevel, Scope
from privtab.data.noise_limits import check_noise_limits
from privtab.data.persons import (
    DEFAULT_BATCH_ROWS,
    PERSON_COLUMNS,
    PERSON_STEM,
    RACE_COLUMNS,
    PersonReader,
)
from privtab.data.resources import production_config_path
from privtab.data.stability import Stability, stabilities

if TYPE_CHECKING:
    from privtab.report.text import Table


@dataclass(frozen=True)
class SafeTabInputs:
    """Validated configuration, reference data and geography, plus the person file to read."""

    config: SafeTabConfig
    reference: ReferenceData
    geography: Geography
    config_path: Path
    persons_path: Path
    grfc_path: Path
    person_rows: int | None
    """Rows of the person file when it was validated by :func:`load_inputs`, else None."""

    @property
    def parameters_dir(self) -> Path:
        return self.config_path.parent

    def person_reader(
        self, batch_rows: int = DEFAULT_BATCH_ROWS, states: list[str] | None = None
    ) -> PersonReader:
        """A validating batch reader of the person file (canonical columns)."""
        return PersonReader(
            self.persons_path,
            self.reference,
            self.geography,
            self.config.max_race_codes,
            batch_rows=batch_rows,
            states=states,
        )

    def stabilities(self, scope: Scope) -> dict[PopulationGroupLevel, Stability]:
        """Stability of every population-group level of a run (reference files + K)."""
        return stabilities(self.reference, self.config.max_race_codes, scope)

    def input_files(self) -> list[Path]:
        return [
            self.config_path,
            *(self.parameters_dir / f for f in REFERENCE_FILES),
            self.persons_path,
            self.grfc_path,
        ]

    def checksums(self) -> dict[str, str]:
        """SHA-256 of every input file (streamed), for a release's provenance record."""
        return {str(p): sha256_file(p) for p in self.input_files()}

    def summary(self) -> dict[str, Any]:
        """JSON-ready description: files, rows, domain sizes, budgets and stabilities."""
        out: dict[str, Any] = {
            "config": str(self.config_path),
            "persons": str(self.persons_path),
            "grfc": str(self.grfc_path),
            "person_rows": self.person_rows,
            "grfc_blocks": self.geography.blocks.height,
            "codes": len(self.reference.codes),
            "race_iterations": len(self.reference.race_iterations()),
            "ethnicity_iterations": len(self.reference.ethnicity_iterations()),
            "privacy_defn": self.config.privacy_defn,
            "max_race_codes": self.config.max_race_codes,
            "runs": {},
        }
        for scope in self.config.scopes:
            stab = self.stabilities(scope)
            out["runs"][scope.value] = {
                "total_budget": float(self.config.total_budget(scope)),
                "total_budget_exact": str(self.config.total_budget(scope)),
                "levels": [
                    {
                        "geography": g.value,
                        "iteration_level": i,
                        "regions": len(self.geography.domain(g)),
                        "iterations": len(self.reference.select(i, g.granularity)),
                        "budget": float(self.config.budget(g, i)),
                        "budget_exact": str(self.config.budget(g, i)),
                        "stability": stab[(g, i)].value,
                        "stability_census_rule": stab[(g, i)].census_rule,
                        "stability_exact": stab[(g, i)].exact,
                    }
                    for g, i in self.config.levels(scope)
                ],
            }
        return out


def summary_tables(summary: dict[str, Any]) -> tuple[str, list[Table]]:
    """The human form of :meth:`Inputs.summary` (``privtab validate``): a headline and one
    table of levels per run."""
    from privtab.accounting.exact import exact_or_up
    from privtab.report.text import table

    s = summary
    head = (
        f"valid: {s['person_rows']:,} persons, {s['grfc_blocks']:,} blocks, {s['codes']:,} "
        f"codes, {s['race_iterations']:,} race + {s['ethnicity_iterations']} ethnicity "
        f"iterations; privacy_defn {s['privacy_defn']}, max_race_codes {s['max_race_codes']}"
    )
    cols = ("geography", "level", "regions", "iterations", "budget", "stability")
    tables = [
        table(
            f"{scope} run: total budget {exact_or_up(Fraction(run['total_budget_exact']))}",
            cols,
            [
                (
                    lv["geography"],
                    str(lv["iteration_level"]),
                    f"{lv['regions']:,}",
                    f"{lv['iterations']:,}",
                    exact_or_up(Fraction(lv["budget_exact"])),
                    str(lv["stability"]),
                )
                for lv in run["levels"]
            ],
        )
        for scope, run in s["runs"].items()
    ]
    return head, tables


def sha256_file(path: Path, block: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(block):
            h.update(chunk)
    return h.hexdigest()


def resolve_config_path(config: str | Path | None) -> Path:
    """``config.json`` from a file path, a parameters directory, or the packaged default.

    A path that names nothing (no such file or folder, an empty string, a name too long
    for the file system) is refused at once with one located problem
    (:class:`~privtab.data.errors.InputValidationError`), before anything else is read: the
    reference files next to a config that does not exist would only add noise.
    """
    if config is None:
        return production_config_path()
    if str(config) == "":
        _refuse_path("", "the config path is empty: give config.json or the folder that holds it")
    p = Path(config)
    try:
        is_dir = stat.S_ISDIR(p.stat().st_mode)
    except OSError:
        found = file_problem(p)
        assert found is not None
        kind, message = found
        if kind == "missing_file":
            message = (
                "the config path names nothing (no such file or folder): give config.json "
                "or the folder that holds it and the four reference files"
            )
        _refuse_path(str(p), message, kind)
    return p / "config.json" if is_dir else p


def _refuse_path(path: str, message: str, kind: str = "missing_file") -> NoReturn:
    raise InputValidationError([Problem(path, kind, message)])


def _data_folder_ok(data: Path, text: str, log: ProblemLog) -> bool:
    """Whether the data folder exists and is a folder (else one problem naming it)."""
    if text == "":
        log.add(Problem("", "missing_file", "the data folder path is empty"))
        return False
    try:
        if stat.S_ISDIR(data.stat().st_mode):
            return True
        message = "not a folder: give the folder that holds person-records and GRF-C"
        kind = "not_a_folder"
    except OSError:
        found = file_problem(data)
        assert found is not None
        kind, message = found
        if kind == "missing_file":
            message = "no such folder (the folder that holds person-records and GRF-C)"
    log.add(Problem(str(data), kind, message))
    return False


def load_inputs(
    config: str | Path | None,
    data_dir: str | Path,
    *,
    validate_persons: bool = True,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    progress: Any = None,
    allow_empty: bool = False,
) -> SafeTabInputs:
    """Read and validate every input; raise one InputValidationError listing all problems.

    ``config`` is a ``config.json`` path or a parameters directory (``None``: the packaged
    2020 production parameters); the reference files are read from the same directory.
    ``progress``, if given, is called as ``progress(rows_read, seconds)`` after each person
    batch. A person file with a header and no rows is refused (``no_persons``: a release
    of nobody is almost always a mistake) unless ``allow_empty`` — checked cheaply even
    with ``validate_persons=False`` (only the first data line is read).
    """
    log = ProblemLog()
    config_path = resolve_config_path(config)
    data = Path(data_dir)
    cfg = load_config(config_path, log)
    ref = load_reference(config_path.parent, log)
    grfc_path = persons_path = None
    if _data_folder_ok(data, str(data_dir), log):
        grfc_path = find_input(data, GRFC_STEM, log)
        persons_path = find_input(data, PERSON_STEM, log)
    state_filter = cfg.state_filter_us if cfg is not None else ()
    geo = None if grfc_path is None else load_geography(grfc_path, log, state_filter, batch_rows)
    rows: int | None = None
    if cfg is not None and ref is not None and geo is not None:
        _check_some_public_group(cfg, ref, geo, config_path, log)
        check_noise_limits(cfg, ref, geo, config_path, log)
    if persons_path is not None:
        header_ok = open_table(persons_path, PERSON_COLUMNS, log, optional_null=RACE_COLUMNS)
        if header_ok is not None and not allow_empty and not has_rows(persons_path):
            log.add(
                Problem(
                    str(persons_path),
                    "no_persons",
                    "the person file has a header but no rows: nothing to tabulate "
                    "(pass allow_empty / --allow-empty to release an empty population)",
                )
            )
        elif header_ok is not None and validate_persons:
            reader = PersonReader(
                persons_path,
                ref,
                geo,
                cfg.max_race_codes if cfg is not None else 8,
                batch_rows=batch_rows,
                log=log,
            )
            started = time.monotonic()
            for _ in reader.typed_batches():
                if progress is not None:
                    progress(reader.rows_read, time.monotonic() - started)
            rows = reader.rows_read
    log.raise_if_any()
    assert cfg is not None
    assert ref is not None
    assert geo is not None
    assert persons_path is not None
    assert grfc_path is not None
    return SafeTabInputs(
        config=cfg,
        reference=ref,
        geography=geo,
        config_path=config_path,
        persons_path=persons_path,
        grfc_path=grfc_path,
        person_rows=rows,
    )


def _check_some_public_group(
    cfg: SafeTabConfig, ref: ReferenceData, geo: Geography, config_path: Path, log: ProblemLog
) -> None:
    """A release needs at least one level with a public population group: levels whose
    domain (regions of the GRF-C × iterations of the reference files) is empty are skipped
    by a run, but if every level of every run is empty there is nothing to release."""
    for scope in cfg.scopes:
        for g, lv in cfg.levels(scope):
            if cfg.budget(g, lv) > 0 and geo.domain(g) and ref.select(lv, g.granularity):
                return
    log.add(
        Problem(
            str(config_path),
            "no_public_groups",
            "no level of the config has any public population group (every run's domain "
            "is empty): check state_filter_us, run_us/run_pr and the GRF-C",
        )
    )


__all__ = ["SafeTabInputs", "load_inputs", "resolve_config_path", "sha256_file"]
