"""The Census reference files shipped inside privtab (no network, no external paths).

- ``production_config_dir()`` — the 2020 production SafeTab-P parameters ``NMFv7-2020``:
  ``config.json`` (zCDP, US ρ = 4.944) and the four race/ethnicity code and iteration files;
- ``toy_dataset_dir()`` — the Census 10-person toy ``person-records.txt`` with ``GRF-C.txt``
  and ``GRF-C-test.txt``. Note: the toy was written for the Census toy iteration files; four
  of its codes (race 1011, 1012, 1021; ethnicity 2021) are not in the production code list,
  so validating it against ``NMFv7-2020`` reports them (see ``docs/data.md``);
- ``schemas_dir()`` — the original input/output schema descriptions (JSON);
- ``production_config_dir_h()`` — the 2020 production SafeTab-H parameters ``NMFv5``
  (``DAS_2020_DDHCB_Production_Code``); ``toy_dataset_dir_h()`` — its toy data.

Source: ``uscensusbureau/DAS_2020_DDHCA_Production_Code`` (public release of the 2020
Detailed DHC-A disclosure avoidance system), files unchanged.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

PRODUCTION_CONFIG = "nmfv7-2020"
PRODUCTION_CONFIG_H = "nmfv5-2020"
TOY_DATASET = "toy-dataset"
TOY_DATASET_H = "toy-dataset-h"
SCHEMAS = "schemas"


def reference_root() -> Path:
    """Directory of the packaged reference files."""
    root = Path(str(resources.files("privtab.data").joinpath("reference")))
    if not root.is_dir():  # pragma: no cover - only if installed as a zip
        raise FileNotFoundError(f"privtab reference files not found at {root}")
    return root


def production_config_dir() -> Path:
    """The 2020 production parameters directory (config.json + the four reference files)."""
    return reference_root() / PRODUCTION_CONFIG


def production_config_path() -> Path:
    return production_config_dir() / "config.json"


def toy_dataset_dir() -> Path:
    return reference_root() / TOY_DATASET


def schemas_dir() -> Path:
    return reference_root() / SCHEMAS


def production_config_dir_h() -> Path:
    """The 2020 production SafeTab-H parameters ``NMFv5`` (config.json + the four reference
    files), from ``uscensusbureau/DAS_2020_DDHCB_Production_Code``, unchanged."""
    return reference_root() / PRODUCTION_CONFIG_H


def toy_dataset_dir_h() -> Path:
    """The Census SafeTab-H toy data: ``household-records.txt``, ``pop-group-totals.txt``,
    ``GRF-C.txt`` and the toy parameters ``input_dir_zcdp/``, ``input_dir_puredp/``."""
    return reference_root() / TOY_DATASET_H


__all__ = [
    "production_config_dir",
    "production_config_dir_h",
    "production_config_path",
    "reference_root",
    "schemas_dir",
    "toy_dataset_dir",
    "toy_dataset_dir_h",
]
