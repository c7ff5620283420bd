"""Census SafeTab-P inputs: readers, validation, reference data, synthetic nation.

Everything an engine needs to run SafeTab-P on the Census formats, read unchanged:

- :func:`load_inputs` — config + reference files + GRF-C + person file, validated together
  (one :class:`InputValidationError` listing file/row/column/value of every problem);
- :class:`SafeTabConfig` (``config.json``), :class:`ReferenceData` (codes and
  characteristic iterations), :class:`Geography` (GRF-C blocks, geo units, public region
  domains), :class:`PersonReader` (validating batch reader → canonical columns);
- :func:`level_stability` / :func:`stabilities` — Δ per population-group level from the
  reference files and ``max_race_codes`` (Census rule h_r·max(2, r) + h_e, checked against
  the exact maximum);
- :func:`iteration_matrix` / :func:`expand_iterations` / :func:`iterations_of` — record →
  iterations (alone vs alone or in combination), by sparse algebra over distinct code
  combinations;
- age bins :data:`AGE4`, :data:`AGE9`, :data:`AGE23`;
- :mod:`privtab.data.synth` — a streaming synthetic nation (``privtab synth``).

This package imports polars and numpy; ``import privtab`` alone does not.
"""

from privtab.data.ages import AGE4, AGE9, AGE23, STAT_LEVEL_BINS, AgeBins
from privtab.data.config import SafeTabConfig, budget_key, load_config, read_config, threshold_key
from privtab.data.convert import convert_file
from privtab.data.errors import InputValidationError, Problem, ProblemLog
from privtab.data.geography import (
    BLOCK,
    GRFC_COLUMNS,
    UNIT,
    Geography,
    block_key_expr,
    load_geography,
    read_geography,
)
from privtab.data.inputs import SafeTabInputs, load_inputs, sha256_file
from privtab.data.iterations import (
    Iteration,
    IterationKind,
    ReferenceData,
    load_reference,
    read_reference,
)
from privtab.data.levels import (
    ITERATION_LEVELS,
    PR_LEVELS,
    US_LEVELS,
    GeoLevel,
    Granularity,
    PopulationGroupLevel,
    Scope,
)
from privtab.data.membership import (
    RACE_KEYS,
    expand_iterations,
    iteration_matrix,
    iteration_table,
    iterations_of,
    pack_race_codes,
    race_keys_expr,
    unpack_race_codes,
    with_race_keys,
)
from privtab.data.persons import (
    CANONICAL_SCHEMA,
    PERSON_COLUMNS,
    PersonReader,
    canonical_persons,
    read_persons,
    scan_canonical,
    scan_persons,
    validate_persons,
)
from privtab.data.resources import production_config_dir, production_config_path, toy_dataset_dir
from privtab.data.stability import Stability, level_stability, stabilities

__all__ = [
    "AGE4",
    "AGE9",
    "AGE23",
    "BLOCK",
    "CANONICAL_SCHEMA",
    "GRFC_COLUMNS",
    "ITERATION_LEVELS",
    "PERSON_COLUMNS",
    "PR_LEVELS",
    "RACE_KEYS",
    "STAT_LEVEL_BINS",
    "UNIT",
    "US_LEVELS",
    "AgeBins",
    "GeoLevel",
    "Geography",
    "Granularity",
    "InputValidationError",
    "Iteration",
    "IterationKind",
    "PersonReader",
    "PopulationGroupLevel",
    "Problem",
    "ProblemLog",
    "ReferenceData",
    "SafeTabConfig",
    "SafeTabInputs",
    "Scope",
    "Stability",
    "block_key_expr",
    "budget_key",
    "canonical_persons",
    "convert_file",
    "expand_iterations",
    "iteration_matrix",
    "iteration_table",
    "iterations_of",
    "level_stability",
    "load_config",
    "load_geography",
    "load_inputs",
    "load_reference",
    "pack_race_codes",
    "production_config_dir",
    "production_config_path",
    "race_keys_expr",
    "read_config",
    "read_geography",
    "read_persons",
    "read_reference",
    "scan_canonical",
    "scan_persons",
    "sha256_file",
    "stabilities",
    "threshold_key",
    "toy_dataset_dir",
    "unpack_race_codes",
    "validate_persons",
    "with_race_keys",
]
