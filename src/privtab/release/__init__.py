"""What a release is: the public product, its description and the operator's record.

- :mod:`privtab.release.document` — ``release.json``, the one typed, versioned description
  of a release folder (:class:`ReleaseDocument`, :func:`read_release_document`);
- :mod:`privtab.release.marking` — how a folder says it is *not* private (seeded or
  noise-off test runs): the ``NOT_PRIVATE`` file and Parquet key-value metadata;
- :mod:`privtab.release.record` — the confidential run record written *outside* the
  release folder (input hashes, exact counts, timings) for the operator's audit.

Importing this package is cheap (standard library and :mod:`privtab.accounting` only).
"""

from privtab.release.document import ReleaseDocument, ReleaseDocumentError, read_release_document

__all__ = [
    "ReleaseDocument",
    "ReleaseDocumentError",
    "read_release_document",
]
