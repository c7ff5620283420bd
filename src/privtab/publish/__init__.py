"""Publishing a release, whatever the product: the floors SafeTab-P and SafeTab-H share.

- :mod:`privtab.publish.census` — the Census part-file layout (pipe-delimited part files
  with a header, ``_SUCCESS``; companion error tables; Parquet copies) and its writer;
- :mod:`privtab.publish.validation` — the output-validation framework: reading written
  tables back with file and line, schema patterns, negativity, state filter, duplicates,
  companion tables, Parquet copies; located problems;

Nothing here names a product: each product declares its tables (names, folders, columns)
and its own rules on top. Internal plumbing: no public names (``docs/api.md``).
"""

__all__: list[str] = []
