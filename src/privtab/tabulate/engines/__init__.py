"""Engines: where exact counts are computed. The algorithm is defined once.

An engine validates and aggregates the person file (:meth:`Engine.prepare`) and yields the
noisy tables of a level in one or more chunks of its public domain
(:meth:`Engine.tabulate`). Every engine tabulates each chunk with
:func:`privtab.tabulate.chunk.tabulate_groups` (SafeTab seed Algorithms 1–3); they differ
only in how persons are aggregated and joined to population groups:

- :class:`~privtab.tabulate.engines.polars.PolarsEngine` (``polars``, the default,
  embedded);
- :class:`~privtab.tabulate.engines.spark.SparkEngine` (``spark``, needs
  ``pip install 'privtab[spark]'`` and Java 17; any cluster via ``spark-submit``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from privtab.accounting.digest import RecordDigest
from privtab.data import SafeTabInputs
from privtab.errors import UsageError
from privtab.tabulate.chunk import Drawing
from privtab.tabulate.plan import LevelPlan
from privtab.tabulate.results import ChunkResult

__all__ = ["ENGINES", "Engine", "make_engine"]

Say = Callable[[str], None]
ENGINES = ("polars", "spark")


class Engine(Protocol):
    """What :func:`privtab.tabulate.run_release` needs from an engine."""

    name: str
    records: RecordDigest | None
    """After :meth:`prepare`: the order-independent digest of the person records it read
    (:data:`privtab.tabulate.aggregate.PERSONS_SCHEMA`) — the data set's identity in the
    release ledger; confidential, never published. ``None`` before."""

    def prepare(self, inputs: SafeTabInputs, say: Say) -> int:
        """Validate and aggregate the person file (and digest its records into
        :attr:`records`); return the number of persons. Raises
        :class:`privtab.data.InputValidationError` before anything is written."""
        ...

    def tabulate(self, plan: LevelPlan, drawing: Drawing) -> Iterator[ChunkResult]:
        """The level's raw noisy counts in one or more chunks of its public domain (a level
        with an empty domain is never asked for); publishing them — zero suppression,
        clamping — is the caller's (:func:`privtab.tabulate.publish.publish_chunk`)."""
        ...

    def close(self) -> None: ...


def make_engine(name: str) -> Engine:
    """An engine by name: ``polars`` (default) or ``spark`` (needs ``privtab[spark]``)."""
    if name == "polars":
        from privtab.tabulate.engines.polars import PolarsEngine

        return PolarsEngine()
    if name == "spark":
        missing = [m for m in ("pyspark", "pandas", "pyarrow") if not _importable(m)]
        if missing:
            raise UsageError(
                f"--engine spark needs {', '.join(missing)}, which is not installed",
                hint="install with `pip install 'privtab[spark]'` (and Java 17)",
            )
        from privtab.tabulate.engines.spark import SparkEngine

        engine = SparkEngine()
        engine.start()  # the JVM starts while the run reads its inputs
        return engine
    raise UsageError(f"unknown engine {name!r}: choose {' or '.join(ENGINES)}")


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
