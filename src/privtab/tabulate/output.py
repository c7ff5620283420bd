"""SafeTab-P's tables in the Census layout: see :mod:`privtab.publish.census`, where the
writer and the layout live (moved there, unchanged, for SafeTab-H to share)."""

from privtab.publish.census import (
    CENSUS_COLUMNS,
    ERROR_FILES,
    FORMATS,
    HEADERS_FILE,
    SEPARATOR,
    SUCCESS_FILE,
    CensusWriter,
    OutputFile,
    census_header,
    census_schema,
    error_schema,
    outputs_manifest,
    part_file_name,
    part_files,
    read_census_table,
)

__all__ = [
    "CENSUS_COLUMNS",
    "ERROR_FILES",
    "FORMATS",
    "HEADERS_FILE",
    "SEPARATOR",
    "SUCCESS_FILE",
    "CensusWriter",
    "OutputFile",
    "census_header",
    "census_schema",
    "error_schema",
    "outputs_manifest",
    "part_file_name",
    "part_files",
    "read_census_table",
]
