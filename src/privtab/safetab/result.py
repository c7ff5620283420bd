"""A SafeTab-P release in Python: typed tables, the exact guarantee, intervals, a folder.

:class:`Release` is what :func:`privtab.safetab.release` returns (and
:meth:`Release.open` reads from a release folder). It is read back from the published
folder through :func:`privtab.analysis.load_release` (tables) and ``release.json``
(:func:`privtab.release.read_release_document`), so it shows exactly what was published.

**Where the folder is.** Without ``out=``, the release folder lives in a temporary folder
owned by the :class:`Release` (``Release.path``): it is deleted by :meth:`Release.close`,
at the end of a ``with`` block, or when the object is garbage-collected. Keep a release
with :meth:`Release.write` (an atomic copy to a folder of your choice) or run with
``out=`` to publish it in place; the tables themselves are in memory (``t1``, ``t2``) and
stay usable after closing.

**Privacy.** ``t1``/``t2`` hold noisy counts and their error only; :attr:`Release.guarantee`
is the exact guarantee derived from the noise that was drawn (``release.json``). A release
made with ``seed=`` used a seeded, predictable source: it is **not private**
(:attr:`Release.private` is ``False``, the repr says so, the folder holds ``NOT_PRIVATE``).
"""

from __future__ import annotations

import dataclasses
import html
import shutil
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from privtab.accounting.exact import ExactGuarantee
from privtab.errors import UsageError
from privtab.safetab.planning import Plan, config_path, describe_guarantee, epsilon_words

if TYPE_CHECKING:
    import polars as pl

    from privtab.release import ReleaseDocument

__all__ = ["Release", "Tables"]

HTML_ROWS = 5
"""Rows of each table shown by :meth:`Release._repr_html_`."""


class Tables(NamedTuple):
    """T1 and T2 (e.g. as pandas DataFrames from :meth:`Release.to_pandas`)."""

    t1: Any
    t2: Any


def _plan_of(doc: ReleaseDocument) -> Plan:
    """The plan of the levels the release tabulated (a level with an empty public domain
    drew nothing and is not charged; a run with none is left out)."""
    from privtab.tabulate import ReleasePlan

    runs = {}
    for scope, run in doc.runs.items():
        done = {lv.level for lv in run.levels if lv.status == "tabulated"}
        whole = ReleasePlan.from_dict(run.plan)
        levels = tuple(lv for lv in whole.levels if lv.key in done)
        if levels:
            runs[scope] = dataclasses.replace(whole, levels=levels)
    config = doc.extra.get("config", {}) if doc.extra else {}
    return Plan(runs, source=str(config.get("source", "")) if isinstance(config, dict) else "")


class Release:
    """A SafeTab-P release: ``t1``/``t2`` (polars), its guarantee, plan and folder."""

    t1: pl.DataFrame
    """T1: one row per population group — the Census columns, ``ITERATION_NAME``,
    ``ITERATION_LEVEL``, the statistic level and the error of every count."""
    t2: pl.DataFrame
    """T2: one row per Sex × Age cell — ages and sex as integers (null for ``*``)."""
    document: ReleaseDocument
    """``release.json``, typed."""

    def __init__(
        self,
        path: Path,
        t1: pl.DataFrame,
        t2: pl.DataFrame,
        document: ReleaseDocument,
        *,
        owned: Path | None = None,
    ) -> None:
        self.t1, self.t2, self.document = t1, t2, document
        self._path = path
        self._owned = owned
        self._cleanup = (
            weakref.finalize(self, shutil.rmtree, owned, True) if owned is not None else None
        )

    # ------------------------------------------------------------------ reading
    @classmethod
    def open(
        cls, path: str | Path, *, config: str | Path | None = None, owned: Path | None = None
    ) -> Release:
        """Read a release folder. ``config`` (default: the packaged production config)
        supplies the iteration names; ``owned`` is a folder this object deletes on
        :meth:`close` (used by :func:`privtab.safetab.release`)."""
        from privtab.analysis import load_release
        from privtab.data import read_reference
        from privtab.release import read_release_document
        from privtab.safetab.tables import iteration_frame, typed_t1, typed_t2

        folder = Path(path)
        document = read_release_document(folder)
        tables = load_release(folder)
        names = iteration_frame(read_reference(config_path(config).parent))
        t1 = typed_t1(tables.t1, names)
        t2 = typed_t2(tables.t2, tables.t1, names)
        return cls(folder, t1, t2, document, owned=owned)

    # ------------------------------------------------------------------ privacy
    @property
    def guarantee(self) -> ExactGuarantee:
        """The exact guarantee of the release (as derived from the noise drawn)."""
        return self.document.guarantee

    @property
    def private(self) -> bool:
        """``False`` for a seeded (or noise-off) test release: never publish one."""
        return self.document.private

    @property
    def plan(self) -> Plan:
        """The plan of the levels this release tabulated (its guarantee is the release's)."""
        return _plan_of(self.document)

    @property
    def delta(self) -> float:
        """The δ at which the run's privacy analyses were computed (default 10⁻¹⁰)."""
        for run in self.document.runs.values():
            for entry in run.privacy.values():
                if isinstance(entry, dict) and isinstance(entry.get("delta"), float):
                    return float(entry["delta"])
        return 1e-10

    def epsilon(self, delta: float | None = None) -> float:
        """The smallest ε privtab can prove for (ε, δ)-DP at ``delta`` (default
        :attr:`delta`): per run, the least of the zCDP/pure conversion of its exact
        guarantee (rounded up) and every valid analysis stored at that δ (the worst-case
        person's privacy-loss distribution among them); the release is the larger run
        (parallel composition over disjoint persons)."""
        from privtab.accounting import epsilon_at

        d = self.delta if delta is None else float(delta)
        worst = 0.0
        for run in self.document.runs.values():
            best = epsilon_at(run.guarantee, d)
            for entry in run.privacy.values():
                if not isinstance(entry, dict) or entry.get("valid", True) is False:
                    continue
                eps, at = entry.get("epsilon"), entry.get("delta")
                if isinstance(eps, float) and isinstance(at, float) and at == d:
                    best = min(best, eps)
            worst = max(worst, best)
        return worst

    # ------------------------------------------------------------------ analysis
    def intervals(self, level: float = 0.95, table: str = "t1") -> pl.DataFrame:
        """``table`` (``"t1"`` or ``"t2"``) with exact confidence intervals: ``MOE``,
        ``LOWER = COUNT − MOE``, ``UPPER = COUNT + MOE`` and ``COVERAGE`` (the exact
        coverage, ≥ ``level``) from each count's noise law
        (:func:`privtab.analysis.add_intervals`; SafeTab seed Alg. 4–5). Post-processing:
        no privacy cost."""
        from privtab.analysis import add_intervals

        if table not in ("t1", "t2"):
            raise ValueError(f"table must be 't1' or 't2', got {table!r}")
        df = self.t1 if table == "t1" else self.t2
        out = add_intervals(df, level, prefix="_")
        added = [c for c in out.columns if c not in df.columns]
        rename = {
            c: n
            for c in added
            for n in ("MOE", "LOWER", "UPPER", "COVERAGE")
            if c.startswith(f"_{n}")
        }
        return out.rename(mapping=rename)

    # ------------------------------------------------------------------ files
    @property
    def path(self) -> Path:
        """The release folder (temporary unless the release was run with ``out=``)."""
        if self._cleanup is not None and not self._cleanup.alive:
            raise UsageError(
                "this release's temporary folder was removed by close(); "
                "write() it before closing, or run with out=PATH"
            )
        return self._path

    def write(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Copy the release folder to ``path`` atomically (all or nothing; an existing
        folder is replaced only with ``overwrite`` and only if privtab wrote it)."""
        from privtab.atomic import MARKER, atomic_directory

        source = self.path
        with atomic_directory(path, kind="release", overwrite=overwrite, protect=[source]) as tmp:
            for entry in source.iterdir():
                if entry.name == MARKER:
                    continue
                if entry.is_dir():
                    shutil.copytree(entry, tmp / entry.name)
                else:
                    shutil.copy2(entry, tmp / entry.name)
        return Path(path)

    def close(self) -> None:
        """Delete the temporary release folder (a no-op for a folder given as ``out=``)."""
        if self._cleanup is not None:
            self._cleanup()

    def __enter__(self) -> Release:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def to_pandas(self) -> Tables:
        """``(t1, t2)`` as pandas DataFrames (needs pandas: ``pip install 'privtab[pandas]'``)."""
        try:
            import pandas  # noqa: F401
        except ImportError:
            raise UsageError(
                "to_pandas() needs pandas", hint="pip install 'privtab[pandas]'"
            ) from None
        return Tables(self.t1.to_pandas(), self.t2.to_pandas())

    # ------------------------------------------------------------------ display
    def _headline(self) -> str:
        d = self.delta
        return f"{describe_guarantee(self.guarantee)} ({epsilon_words(self.epsilon(d), d)})"

    def __repr__(self) -> str:
        runs = " + ".join(self.plan.runs) or "none"
        status = "" if self.private else "NOT PRIVATE (seeded/test noise: never publish) "
        return (
            f"<privtab Release {status}{self._headline()}, T1 {self.t1.height:,} rows, "
            f"T2 {self.t2.height:,} rows, runs {runs}>"
        )

    def _repr_html_(self) -> str:
        banner = (
            ""
            if self.private
            else "<p style='color:#b00;font-weight:600'>NOT PRIVATE — made with seeded or "
            "test noise (privtab.safetab.release(seed=…)): never publish it.</p>"
        )
        runs = "".join(
            f"<tr><td>{html.escape(s)}</td><td>{len(r.levels)}</td>"
            f"<td>{html.escape(describe_guarantee(r.guarantee))}</td></tr>"
            for s, r in self.document.runs.items()
        )
        return (
            "<div><strong>SafeTab-P release</strong>"
            f"{banner}<p>{html.escape(self._headline())}</p>"
            "<table><thead><tr><th>run</th><th>levels</th><th>guarantee</th></tr></thead>"
            f"<tbody>{runs}</tbody></table>"
            f"<p>T1: {self.t1.height:,} rows</p>{_html_head(self.t1, T1_SHOWN)}"
            f"<p>T2: {self.t2.height:,} rows</p>{_html_head(self.t2, T2_SHOWN)}"
            "<p>Exact intervals: <code>release.intervals(0.95)</code>; keep the folder: "
            "<code>release.write(path)</code>.</p></div>"
        )


T1_SHOWN = ("REGION_ID", "REGION_TYPE", "ITERATION_CODE", "ITERATION_NAME", "COUNT", "MOE95")
T2_SHOWN = (
    "REGION_ID",
    "REGION_TYPE",
    "ITERATION_CODE",
    "ITERATION_NAME",
    "AGESTART",
    "AGEEND",
    "SEX",
    "COUNT",
)


def _html_head(df: pl.DataFrame, columns: tuple[str, ...]) -> str:
    cols = [c for c in columns if c in df.columns]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>"
        for row in df.select(cols).head(HTML_ROWS).iter_rows()
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= 60 else text[:57] + "…"
