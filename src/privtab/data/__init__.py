"""Census SafeTab-P inputs: readers, validation, reference data, synthetic nation.

Everything an engine needs to run SafeTab-P on the Census formats, read unchanged:

- :func:`load_inputs` — config + reference files + GRF-C + person file, validated together
  (one :class:`InputValidationError` listing file/row/column/value of every problem);
- :class:`SafeTabConfig` (``config.json``, :func:`read_config`), :class:`ReferenceData`
  (codes and characteristic iterations, :func:`read_reference`), :class:`Geography` (GRF-C
  blocks, geo units, public region domains, :func:`read_geography`), :func:`read_persons`
  (a validated person file); :data:`PERSON_COLUMNS` / :data:`GRFC_COLUMNS` — the Census
  columns of the two input files; :class:`Scope` (US, PR) and :class:`GeoLevel`;
- :func:`production_config_dir` (the packaged 2020 parameters) and :func:`toy_dataset_dir`.

Inside (import from the module): ``persons`` (``PersonReader``: validating batch reader →
canonical columns), ``stability`` (Δ per population-group level from the reference files
and ``max_race_codes``: Census rule h_r·max(2, r) + h_e, checked against the exact
maximum), ``membership`` (record → iterations, by sparse algebra over distinct code
combinations: ``iteration_matrix``), ``ages`` (age bins ``AGE4``, ``AGE9``, ``AGE23``),
``levels``, ``errors`` (``Problem``, ``ProblemLog``), ``convert`` and
:mod:`privtab.data.synth` — a streaming synthetic nation (``privtab synth``).

This package imports polars and numpy; ``import privtab`` alone does not.
"""

from privtab.data.config import SafeTabConfig, read_config
from privtab.data.errors import InputValidationError
from privtab.data.geography import GRFC_COLUMNS, Geography, read_geography
from privtab.data.hierarchy import Hierarchy, HierarchySpec
from privtab.data.inputs import SafeTabInputs, load_inputs
from privtab.data.iterations import ReferenceData, read_reference
from privtab.data.levels import GeoLevel, Scope
from privtab.data.persons import PERSON_COLUMNS, read_persons
from privtab.data.resources import production_config_dir, toy_dataset_dir

__all__ = [
    "GRFC_COLUMNS",
    "PERSON_COLUMNS",
    "GeoLevel",
    "Geography",
    "Hierarchy",
    "HierarchySpec",
    "InputValidationError",
    "ReferenceData",
    "SafeTabConfig",
    "SafeTabInputs",
    "Scope",
    "load_inputs",
    "production_config_dir",
    "read_config",
    "read_geography",
    "read_persons",
    "read_reference",
    "toy_dataset_dir",
]
