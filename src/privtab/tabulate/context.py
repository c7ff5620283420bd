"""How one release is run: the options a caller chooses and the context a run carries.

:class:`RunOptions` is the public set of choices (random source, engine, output formats,
post-processing, the release ledger, ...); :class:`RunContext` is what the modules of a run
share while it works (resolved paths, the source, the engine, timings, the ledger
reservation, the cancellation flag the worker checks at its safe points).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privtab._options import choice
from privtab.accounting.exact import ExactGuarantee
from privtab.errors import UsageError
from privtab.publish.context import Progress, ReleaseContext, RunCancelledError
from privtab.random import RandomSource

if TYPE_CHECKING:
    from privtab.tabulate.engines import Engine

__all__ = ["Progress", "RunCancelledError", "RunContext", "RunOptions", "phase"]

LOG = logging.getLogger("privtab.tabulate")


@dataclass(frozen=True)
class RunOptions:
    """How to run a release.

    ``source``: the random source (default: the secure one). A seeded source is refused
    unless ``allow_insecure`` (tests only: every output is then marked not private).
    ``noise=False`` releases exact counts (tests only; needs ``allow_insecure``).
    ``nonnegative``: clamp published counts at 0 (post-processing; default: the config's
    ``allow_negative_counts`` negated). Zero suppression is not an option: it is applied as
    production applies it whenever the config has ``zero_suppression_chance``
    (:mod:`privtab.tabulate.suppression`). ``evaluate``:
    compare with the exact counts — a non-private diagnostic, kept in the confidential run
    record, never in the release. ``allow_empty``: release a person file with no persons.
    ``run_record``: where the confidential run record goes (default: beside the release,
    :func:`privtab.release.record.default_record_path`).
    """

    source: RandomSource | None = None
    allow_insecure: bool = False
    noise: bool = True
    delta: float = 1e-10
    nonnegative: bool | None = None
    evaluate: bool = False
    report: bool = True
    pld_grid: float = 1e-3
    overwrite: bool = False
    formats: tuple[str, ...] = ("txt",)
    """Output formats of T1/T2: ``txt`` (the Census folders ``t1/``, ``t2/``) and/or
    ``parquet`` (``t1.parquet``, ``t2.parquet``); the companion error tables always."""
    engine: str | Engine = "polars"
    """``polars`` (default), ``spark``, or an :class:`~privtab.tabulate.engines.Engine`."""
    allow_empty: bool = False
    run_record: str | Path | None = None
    """Where the confidential run record goes (never inside the release folder)."""
    parents: bool = False
    """Create missing parent folders of the output (default: refused, so that a mistyped
    path creates nothing)."""
    returned: bool = False
    """The release folder is a temporary one handed to the calling program
    (:func:`privtab.safetab.release` without ``out=``): the ledger records the release as
    returned to the caller, not as a folder published at a path."""
    ledger: str | Path | None = None
    """The release ledger (odometer) file: default ``$PRIVTAB_LEDGER`` or the user's state
    directory (:func:`privtab.accounting.odometer.default_ledger_path`)."""
    use_ledger: bool = True
    """Record this release in the ledger (private runs only; ``False`` for synthetic demo
    data that is not a confidential data set)."""
    lifetime: ExactGuarantee | None = None
    """A lifetime budget for the data set (besides any the ledger holds)."""
    allow_more_releases: bool = False
    """Run even past the lifetime budget (recorded as such in the ledger)."""
    dataset_id: str | None = None
    """The data set's declared name in the ledger (default: the digest of its parsed
    records, which a re-encoded or re-sorted copy shares; :mod:`privtab.accounting.digest`)."""

    @classmethod
    def from_flags(
        cls,
        *,
        formats: str = "txt",
        engine: str = "polars",
        spark_master: str | None = None,
        spark_conf: Sequence[str] = (),
        seed: int | None = None,
        no_noise: bool = False,
        lifetime_rho: str | None = None,
        lifetime_epsilon: str | None = None,
        **options: Any,
    ) -> RunOptions:
        """The options of ``privtab safetab run`` from its flags as typed: ``formats``
        "txt,parquet", ``spark_conf`` "KEY=VALUE" items, ``seed`` / ``no_noise`` (tests
        only: warned, the release is marked not private), a lifetime budget read exactly
        ("2.5" is 5/2); ``options`` are the other fields as they are. Raises
        :class:`privtab.errors.UsageError` naming the flag of a bad value."""
        from privtab.random import SeededSource

        fmts = tuple(f.strip() for f in formats.split(",") if f.strip())
        if not fmts or set(fmts) - {"txt", "parquet"}:
            raise UsageError(f"--format must be txt, parquet or txt,parquet, got {formats!r}")
        chosen = _engine(engine, spark_master, spark_conf)
        insecure = seed is not None or no_noise
        if insecure:
            LOG.warning(
                "TEST MODE: seeded or no noise — the release is NOT private; do not publish it"
            )
        return cls(
            source=SeededSource(seed) if seed is not None else None,
            allow_insecure=insecure,
            noise=not no_noise,
            formats=fmts,
            engine=chosen,
            lifetime=_lifetime(lifetime_rho, lifetime_epsilon),
            **options,
        )


def _engine(name: str, master: str | None, items: Sequence[str]) -> str | Engine:
    """``--engine`` with ``--spark-master`` / ``--spark-conf KEY=VALUE``."""
    choice("--engine", name, ("polars", "spark"))
    conf: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--spark-conf needs KEY=VALUE, got {item!r}")
        conf[key.strip()] = value.strip()
    if (master or conf) and name != "spark":
        raise UsageError("--spark-master / --spark-conf need --engine spark")
    if name == "spark" and (master or conf):
        from privtab.tabulate.engines.spark import SparkEngine

        engine = SparkEngine(master=master, config=conf or None)
        engine.start()  # the JVM starts while the run reads its inputs
        return engine
    return name


def _lifetime(rho: str | None, epsilon: str | None) -> ExactGuarantee | None:
    """The --lifetime-rho / --lifetime-epsilon budget, read exactly (``"2.5"`` is 5/2)."""
    if rho is not None and epsilon is not None:
        raise UsageError("give --lifetime-rho or --lifetime-epsilon, not both")
    try:
        if rho is not None:
            return ExactGuarantee.zcdp(rho)
        if epsilon is not None:
            return ExactGuarantee.pure(epsilon)
    except ValueError as exc:
        raise UsageError(f"lifetime budget: {exc}") from None
    return None


def phase(name: str) -> None:
    """A named point of the run (``inputs``, ``level``, ``write``, ``published``): the
    place where tests hold a run to deliver a signal in a known phase. Does nothing."""


@dataclass(kw_only=True)
class RunContext(ReleaseContext):
    """Everything one SafeTab-P run needs (resolved once, read by the worker): the
    product-neutral run state (:class:`privtab.publish.context.ReleaseContext`) with the
    config, the data folder, the engine and the clamping rule."""

    config: Path
    data_dir: Path
    opts: RunOptions
    engine: Engine
    nonnegative: bool = False
    """Clamp published counts at 0 (the option, else the config's rule; set in _build)."""

    def hook(self, name: str) -> None:
        """SafeTab-P's named points call this module's :func:`phase` (the tests' hook)."""
        phase(name)
