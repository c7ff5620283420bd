"""Publishing a release, whatever the product: the floors SafeTab-P, SafeTab-H and TopDown
share.

- :mod:`privtab.publish.run` — the run skeleton: refuse early (:func:`~privtab.publish.run.
  start_release`), build in a staging folder in a worker thread with signals honoured,
  publish, commit the ledger entry, write the run record outside the folder
  (:func:`~privtab.publish.run.publish_release`); validate the staged tables while
  ``release.json`` and the report are written (:func:`~privtab.publish.run.finish_staged`);
  the common result (:class:`~privtab.publish.run.ReleaseResult`);
- :mod:`privtab.publish.context` — the product-neutral state of a run
  (:class:`~privtab.publish.context.ReleaseContext`, subclassed by each product) and the
  options every run reads (:class:`~privtab.publish.context.ReleaseOptions`);
- :mod:`privtab.publish.ledgering` — the release ledger's steps (reserve before reading,
  identify with the records digest, report, commit, withdraw), against small protocols;
- :mod:`privtab.publish.worker` — the worker thread, background threads, in-order jobs;
- :mod:`privtab.publish.census` — the Census part-file layout (pipe-delimited part files
  with a header, ``_SUCCESS``; companion error tables; Parquet copies) and its writer;
- :mod:`privtab.publish.validation` — the output-validation framework: reading written
  tables back with file and line, schema patterns, negativity, state filter, duplicates,
  companion tables, Parquet copies; located problems;
- :mod:`privtab.publish.spark` — the Spark session of a run (given, active, or created in
  the background with privtab's settings) and :mod:`privtab.publish.class_archive`, the
  driver JVM's class-data-sharing archive: every product's Spark engine starts its session
  here;

Nothing here names a product: each product declares its tables (names, folders, columns)
and its own rules on top. Internal plumbing: no public names (``docs/api.md``).
"""

__all__: list[str] = []
