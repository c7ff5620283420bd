"""A TopDown run's inputs from a data folder (CONTRACTS.md C1): validated, then aggregated.

A folder written by ``privtab synth`` (or an office's own, in the same layout) holds
``GRF-C``, ``cef-units`` and ``cef-persons`` (``.txt`` pipe-delimited or ``.parquet``;
``household-records`` and ``person-records`` too when present, for the cross-file rules).
:func:`load_data`

1. **validates** every file and every cross-file rule with privtab's CEF readers
   (:func:`privtab.data.folder.validate_folder`, the ``population`` inputs: every problem
   named by file, row, column and value; nothing is aggregated from a folder with one);
2. reads the GRF-C (every block, the spine's and the tabulation geographies' columns, as
   text) and aggregates the records with polars' streaming engine into the per-block unit
   counts and persons histograms of :mod:`privtab.topdown.inputs`.

The unit counts are the invariants of the 2020 design (public to the algorithm); the
persons histograms are the confidential data, read only to draw the noisy measurements
and to check the release's invariants before it is published.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from privtab.errors import InputError
from privtab.topdown.inputs import (
    PERSON_COLUMNS,
    UNIT_COLUMNS,
    block_histograms,
    block_units,
    scan_table,
    state_runs,
)
from privtab.topdown.spine import GRFC_SPINE_COLUMNS

__all__ = ["GRFC_STEM", "PERSONS_STEM", "UNITS_STEM", "TopDownData", "find_input", "load_data"]

GRFC_STEM = "GRF-C"
UNITS_STEM = "cef-units"
PERSONS_STEM = "cef-persons"
PR_STATE = "72"


def find_input(folder: Path, stem: str) -> Path:
    """``folder/stem.txt`` or ``folder/stem.parquet`` — exactly one must exist."""
    found = [folder / f"{stem}{ext}" for ext in (".txt", ".parquet")]
    found = [p for p in found if p.is_file()]
    if not found:
        raise InputError(
            f"no {stem}.txt or {stem}.parquet in {folder}",
            file=str(folder / f"{stem}.txt"),
            hint="a TopDown data folder holds GRF-C, cef-units and cef-persons "
            "(privtab synth writes them)",
        )
    if len(found) > 1:
        raise InputError(
            f"both {stem}.txt and {stem}.parquet exist; keep only one", file=str(folder)
        )
    return found[0]


@dataclass(frozen=True, eq=False)
class TopDownData:
    """A folder's inputs, validated and aggregated: ``grfc`` every block (text columns
    :data:`~privtab.topdown.spine.GRFC_SPINE_COLUMNS` and ``BLOCK``, sorted by block),
    ``units`` the unit counts of every block with units
    (:func:`~privtab.topdown.inputs.block_units`), ``persons`` the persons histograms
    (:func:`~privtab.topdown.inputs.block_histograms`), ``files`` the paths read."""

    folder: Path
    grfc: pl.DataFrame
    units: pl.DataFrame
    persons: pl.DataFrame
    files: dict[str, Path]

    def states(self, run: str) -> list[str]:
        """The states of the GRF-C in the ``us`` run (all but 72) or the ``pr`` run."""
        st = self.grfc.get_column("TABBLKST").unique().sort().to_list()
        return [s for s in st if (s == PR_STATE) == (run == "pr")]


#: The GRF-C codes TopDown reads and their widths (digits).
GRFC_WIDTHS = {
    "TABBLKST": 2, "TABBLKCOU": 3, "TABTRACTCE": 6, "TABBLKGRPCE": 1, "TABBLK": 4,
    "PLACEFP": 5, "COUSUBFP": 5, "AIANNHCE": 4,
}  # fmt: skip


def read_grfc(path: Path) -> pl.DataFrame:
    """The GRF-C's spine and tabulation columns as text, with ``BLOCK``, sorted by block.
    Every code must be digits of its width and every block appear once: each problem is
    refused naming the file, row (text: the line; Parquet: the row), column and value."""
    from privtab.data.errors import Problem, ProblemLog

    lf = _raw_scan(path, GRFC_SPINE_COLUMNS, "the GRF-C lacks a column TopDown needs")
    first = 1 if path.suffix == ".parquet" else 2
    frame = lf.select(*(pl.col(c).cast(pl.String) for c in GRFC_SPINE_COLUMNS)).collect()
    frame = frame.with_row_index("_ROW", offset=first)
    log = ProblemLog()
    for c, width in GRFC_WIDTHS.items():
        bad = frame.filter(~pl.col(c).str.contains(f"^[0-9]{{{width}}}$").fill_null(False))
        log.add_many(
            bad.height,
            (
                Problem(str(path), "bad_code", f"{c} must be {width} digits", int(r), c, v)
                for r, v in bad.select("_ROW", c).head(log.examples).iter_rows()
            ),
        )
    block = pl.concat_str("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK").alias("BLOCK")
    frame = frame.with_columns(block)
    dup = frame.filter(pl.col("BLOCK").is_duplicated()).filter(
        pl.int_range(pl.len()).over("BLOCK") > 0
    )
    log.add_many(
        dup.height,
        (
            Problem(str(path), "duplicate_block", "a block given twice", int(r), "TABBLK", v)
            for r, v in dup.select("_ROW", "BLOCK").head(log.examples).iter_rows()
        ),
    )
    log.raise_if_any()
    return frame.drop("_ROW").sort("BLOCK")


def _raw_scan(path: Path, columns: tuple[str, ...], message: str) -> pl.LazyFrame:
    """A lazy scan of a C1 file as it is (text: every column as text), a missing column
    of ``columns`` refused naming file and column."""
    lf = (
        pl.scan_parquet(path)
        if path.suffix == ".parquet"
        else pl.scan_csv(path, separator="|", infer_schema=False, null_values=["Null"])
    )
    have = lf.collect_schema().names()
    missing = [c for c in columns if c not in have]
    if missing:
        raise InputError(message, file=str(path), row=1, column=missing[0])
    return lf


def _scan(path: Path, columns: tuple[str, ...]) -> pl.LazyFrame:
    """The ``columns`` of a C1 file, as text (a missing one refused, located)."""
    _raw_scan(path, columns, "a column TopDown needs is missing")
    return scan_table(path, columns)


def validate(folder: Path) -> None:
    """Every file and cross-file rule of the folder's population inputs (raises one
    :class:`~privtab.data.errors.InputValidationError` naming file, row, column and value
    of each problem)."""
    import importlib

    try:  # privtab.data.cef and .folder land with the synthetic population (issue 26)
        module = importlib.import_module("privtab.data.folder")
    except ModuleNotFoundError:
        return
    module.validate_folder(folder, inputs=["population"])


def load_data(
    data_dir: str | Path, *, validated: bool = True, say: Callable[[str], None] | None = None
) -> TopDownData:
    """Validate (unless ``validated=False``: the caller did) and aggregate a data folder
    (module docstring)."""
    folder = Path(data_dir)
    tell = say or (lambda _m: None)
    if not folder.is_dir():
        raise InputError(f"the data folder {folder} does not exist", file=str(folder))
    files = {
        "grfc": find_input(folder, GRFC_STEM),
        "units": find_input(folder, UNITS_STEM),
        "persons": find_input(folder, PERSONS_STEM),
    }
    if validated:
        tell("validating GRF-C, cef-units and cef-persons")
        validate(folder)
    tell("aggregating the units and persons by block")
    grfc = read_grfc(files["grfc"])
    units = block_units(_scan(files["units"], UNIT_COLUMNS))
    runs = state_runs(files["persons"]) if files["persons"].suffix == ".parquet" else []
    persons = block_histograms(_scan(files["persons"], PERSON_COLUMNS), runs)
    return TopDownData(folder, grfc, units, persons, files)
