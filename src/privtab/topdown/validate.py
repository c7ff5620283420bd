"""Output validation of a TopDown release folder: the files as written, checked by rule.

A release run validates its staging folder before renaming it into place (a failure
publishes nothing); ``privtab topdown validate-output R`` validates a written folder. The
checks use only the folder (and, with ``grfc``, the public GRF-C), never the confidential
data (the run checks the invariants against those before writing:
:func:`privtab.topdown.assemble.check_state`). Rules (``kind``):

====================  =====================================================================
``layout``            ``release.json``, ``mdf/{persons,units}.{txt,parquet}``,
                      ``pl94/<TABLE>.{txt,parquet}`` for P1–P5 and H1 exist
``document``          ``release.json`` is a TopDown release's and states no number below
                      its exact value (:func:`privtab.topdown.document.read_document`)
``manifest``          every file listed under ``outputs`` has its SHA-256 and row count, and
                      no data file is unlisted
``private_marker``    ``NOT_PRIVATE`` exists exactly when ``private`` is false, and every
                      Parquet file's privacy metadata agrees
``header``            each text file's first line is exactly its columns
``pattern``           every value is one of its column's codes (MDF: the Census codes;
                      tables: a GEOLEVEL, the table's cells, a non-negative integer COUNT)
``sort_order``        MDF rows by geography then codes; ``EPNUM`` 0, 1, 2, … in file order;
                      table rows by GEOLEVEL, GEOID, cell
``duplicate``         no (GEOID, GEOLEVEL, CELL) twice; every geography has every cell
``parquet_copy``      each Parquet copy holds the same rows as its text file
``tabulation``        every table cell equals the tabulation of the MDF (persons: P1–P5;
                      units: H1); a geography without MDF rows has only zeros; places and
                      AIANNH areas (they need the GRF-C) with ``grfc``
``children_sum``      within each table: STATE = Σ its COUNTY, COUNTY = Σ TRACT, TRACT = Σ
                      BLOCK_GROUP = Σ BLOCK, NATION = Σ STATE (but 72)
``identity``          P1 and P2 totals equal (P3, P4 too); P2 total = Hispanic + not
                      Hispanic; P5 total = institutional + noninstitutional; H1 total =
                      occupied + vacant
``constraint``        per block (MDF): persons in group quarters ≥ GQ facilities, none
                      without a facility, household persons only with housing units, no
                      persons under 18 in nursing facilities (GQTYPE_PL 3)
====================  =====================================================================

A Parquet-only release (``release.json``'s ``formats``: ``["parquet"]``,
:mod:`privtab.topdown.formats`) needs only the Parquet files; each is read as the text
would be (the same rules, its rows numbered from 1) and ``header`` and ``parquet_copy``
are reported as not checked.

Every failure is a :class:`~privtab.data.errors.Problem` naming the file, the line
(header = line 1; Parquet: the 1-based row), the column and value where they exist, and
the rule; all are raised together as one :class:`OutputValidationError`.

Streaming (memory bounded by one state, not by the nation): every text file is read in
row batches of :data:`BLOCK_BYTES` (pyarrow's streaming CSV reader, every column a string)
and its Parquet copy alongside it, batch against batch. The MDF files are read together
in geographic order: each batch is checked (codes, sort order against the previous row,
``EPNUM``) and aggregated by block (an MDF with a bad code or out of order is reported
and its tabulation not compared); when a state is complete its blocks become sparse
per-block histograms, are checked against the constraints, and their tabulation — every
in-state geography's persons histogram (its non-zero cells) and housing units — is written
to a scratch folder (the nation and the AIANNH areas, which cross states, are summed and
written last). Each table is then read in row batches regrouped into whole geographies:
the rows must be strictly increasing in (GEOLEVEL, GEOID, CELL) (checked against the row
before, so a repeated key is a ``duplicate`` and an earlier one ``sort_order`` — a table
out of order is reported and not compared further, its rows cannot be matched in a
stream), each geography must have all its cells, and the geographies are compared with
the scratch tabulation read in the same GEOID order (``tabulation``: the first problem of
each geolevel), summed into their parents (kept: the nation, states, counties and tracts
of one table — the tract level bounds it, ≈ 85,000 × 73 cells at the 2020 size) and
checked against the in-table identities; the totals the P1 = P2 and P3 = P4 identities
read are kept (one number per geography) until the second table is read. Everything
vectorised (numpy, polars, scipy.sparse) per batch or per state.

The fast way (what a release's own validation takes): each file is read from its Parquet
copy in slices, each slice written back as text and compared byte for byte with the text
file on disk (the text's SHA-256 taken on the way, for the manifest), and checked
vectorised per slice (tables: whole geographies; the cells, codes and order of a perfect
table checked at once); at the first difference or problem the file is validated again
from its text as above, which locates every problem — so a valid release is checked in a
fraction of the time and an invalid one is reported exactly as before.

Parts: :mod:`~privtab.topdown.validate_read` (the problem log, reading text and Parquet),
:mod:`~privtab.topdown.validate_mdf` (the MDF, its constraints and tabulation),
:mod:`~privtab.topdown.validate_tables` (the tables); this module runs them in order.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from privtab.publish.validation import OutputValidationError
from privtab.release.marking import NOT_PRIVATE_FILE
from privtab.topdown.formats import BOTH, release_formats
from privtab.topdown.pl94 import GEOLEVELS, TABLES
from privtab.topdown.validate_mdf import _MDF, _Expected, _scan_mdf
from privtab.topdown.validate_read import _Check
from privtab.topdown.validate_tables import _IDENTITIES, _cross_identities, _Table

__all__ = ["OutputValidationError", "ValidationSummary", "validate_release"]


@dataclass
class ValidationSummary:
    """What :func:`validate_release` checked (when it did not raise)."""

    folder: str
    files: dict[str, int] = field(default_factory=dict)
    checks: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "valid": True,
            "folder": self.folder,
            "files": self.files,
            "checks": self.checks,
            "not_checked": self.skipped,
        }


def _manifest(
    check: _Check, folder: Path, doc: dict[str, Any], rows: dict[str, int],
    hashes: dict[str, str] | None = None,
) -> None:  # fmt: skip
    """``hashes``: the SHA-256 of files whose every byte the validation already read."""
    from privtab.data.inputs import sha256_file

    listed = doc.get("outputs", {}).get("files", {})
    data_files = {
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file()
        and not p.relative_to(folder).as_posix().startswith(".")
        and p.name not in ("release.json", "report.html", NOT_PRIVATE_FILE)
    }
    for rel in sorted(data_files - set(listed)):
        check.add(folder / rel, "manifest", "a file not listed in release.json's outputs")
    for rel, entry in sorted(listed.items()):
        p = folder / rel
        if not p.is_file():
            check.add(p, "manifest", "listed in release.json but missing")
            continue
        if ((hashes or {}).get(rel) or sha256_file(p)) != entry.get("sha256"):
            check.add(
                p,
                "manifest",
                "its SHA-256 differs from release.json's (modified after the release was written)",
                None,
                "sha256",
                entry.get("sha256"),
            )
        if rel in rows and "rows" in entry and entry["rows"] != rows[rel]:
            check.add(p, "manifest", f"{rows[rel]} rows, release.json says {entry['rows']}")


def validate_release(folder: str | Path, *, grfc: str | Path | None = None) -> ValidationSummary:
    """Validate a TopDown release folder (module docstring); ``grfc``: the GRF-C it was made
    from (its SHA-256 is checked against ``release.json``) for the place and AIANNH
    tabulations and the complete block list. Raises :class:`OutputValidationError`."""
    from privtab.topdown.document import DocumentError, read_document

    root = Path(folder)
    check = _Check(root)
    summary = ValidationSummary(str(root))
    try:
        doc = read_document(root)
    except DocumentError as exc:
        check.add(
            Path(exc.file or root / "release.json"),
            "document",
            exc.message,
            None,
            exc.column,
            exc.value,
        )
        doc = None
    exts = BOTH if doc is None else release_formats(doc)
    required = [root / "mdf" / f"{n}.{e}" for n in _MDF for e in exts]
    required += [root / "pl94" / f"{t}.{e}" for t in TABLES for e in exts]
    for p in required:
        if not p.is_file():
            check.add(p, "layout", "missing")
    check.raise_if_any()
    assert doc is not None
    text = "txt" in exts
    private = bool(doc["private"])
    if (root / NOT_PRIVATE_FILE).exists() == private:
        check.add(
            root / NOT_PRIVATE_FILE,
            "private_marker",
            "must exist exactly when release.json says private: false",
        )
    grfc_frame = _grfc(check, doc, grfc)
    if grfc_frame is not None:
        levels = GEOLEVELS
    else:
        levels = tuple(g for g in GEOLEVELS if g not in ("PLACE", "AIANNH"))
    with tempfile.TemporaryDirectory(prefix="privtab-validate-") as scratch:
        # the MDF, state by state: checked, and its tabulation written to the scratch folder
        # the fast way first (the MDF read from its Parquet copies, checked byte for byte
        # against the text); at any problem, again from the text, locating every problem
        hashes: dict[str, str] = {}
        fast = _Check(root)
        expected = _Expected(Path(scratch) / "fast", levels, grfc_frame is not None)
        rows, comparable, complete = _scan_mdf(
            fast, root, private, grfc_frame, expected, hashes, text
        )
        if fast.log or not complete:
            hashes.clear()
            expected = _Expected(Path(scratch) / "text", levels, grfc_frame is not None)
            rows, comparable, _ = _scan_mdf(
                check, root, private, grfc_frame, expected, has_text=text
            )
        del grfc_frame
        want = expected if comparable else None
        # then each table, row batch by row batch, against it
        totals: dict[str, pl.DataFrame] = {}
        checked = 0
        for t in TABLES:
            # the fast way for a table with nothing wrong; else again, locating every problem
            table = _Table(_Check(root), root, t, private, want, text)
            if table.run_from_copy():
                if table.sha256 is not None:
                    hashes[f"pl94/{t}.txt"] = table.sha256
                checked += 1
            else:
                table = _Table(check, root, t, private, want, text)
                checked += table.run()
            rows[f"pl94/{t}.txt"] = rows[f"pl94/{t}.parquet"] = table.rows
            if table.usable and table.ordered and table.totals:
                totals[t] = pl.concat(table.totals)
            del table
            for ta, _ca, tb, _cbs in _IDENTITIES:
                if ta != tb and t == tb:
                    pair = {k: totals[k] for k in (ta, tb) if k in totals}
                    _cross_identities(check, root, pair, exts[0])
                    totals.pop(ta, None)
                    totals.pop(tb, None)
    _manifest(check, root, doc, rows, hashes)
    if want is not None and checked == len(TABLES):
        summary.checks = [
            "layout",
            "document",
            "manifest",
            "private_marker",
            "header",
            "pattern",
            "sort_order",
            "duplicate",
            "parquet_copy",
            "tabulation",
            "children_sum",
            "identity",
            "constraint",
        ]
        if not text:
            summary.checks.remove("header")
            summary.checks.remove("parquet_copy")
            summary.skipped["header, parquet_copy"] = "no text files (formats: parquet)"
        if "PLACE" not in levels:
            summary.skipped["tabulation of PLACE and AIANNH"] = "needs the GRF-C (--grfc)"
    check.raise_if_any()
    summary.files = {k: n for k, n in rows.items() if k.rsplit(".", 1)[-1] in exts}
    return summary


def _grfc(check: _Check, doc: dict[str, Any], grfc: str | Path | None) -> pl.DataFrame | None:
    if grfc is None:
        return None
    from privtab.data.inputs import sha256_file
    from privtab.topdown.folder import read_grfc

    path = Path(grfc)
    if path.is_dir():
        from privtab.topdown.folder import GRFC_STEM, find_input

        path = find_input(path, GRFC_STEM)
    stated = doc.get("public_inputs", {}).get("GRF-C", {}).get("sha256")
    if sha256_file(path) != stated:
        check.add(
            path,
            "document",
            "not the GRF-C this release was made from (SHA-256 differs "
            "from release.json's public_inputs)",
            None,
            "sha256",
            stated,
        )
        return None
    return _in_runs(read_grfc(path), doc)


def _in_runs(grfc: pl.DataFrame, doc: dict[str, Any]) -> pl.DataFrame:
    """The GRF-C blocks of the runs the release holds (``US``: the 50 states and DC;
    ``PR``: Puerto Rico, state 72): a US-only release has no Puerto Rico geography."""
    runs = set(doc.get("runs") or {})
    pr = pl.col("TABBLKST") == "72"
    if runs == {"US"}:
        return grfc.filter(~pr)
    if runs == {"PR"}:
        return grfc.filter(pr)
    return grfc
