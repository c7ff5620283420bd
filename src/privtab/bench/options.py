"""The options of each benchmark: one declaration for the command and the record.

``privtab bench NAME`` is built from these declarations (one generic command, not one
hand-written function per benchmark), and :func:`privtab.bench.command_line` writes a
record's reproducing command from the same flags. An option's ``parse`` turns the value
given on the command line into the runner's argument and raises
:class:`privtab.errors.UsageError` (exit code 2) on a bad one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privtab._options import choice, numbers
from privtab.errors import UsageError

__all__ = ["Option"]


@dataclass(frozen=True)
class Option:
    """One option of a benchmark: the runner's argument ``name`` and its command-line form.

    ``type`` is the command-line type (``int | None`` when it may be left out), ``flag``
    the option's flag when it is not ``--name-with-dashes`` (``"--stage2/--no-stage2"`` for
    a switch that is on by default), ``minimum`` the smallest value accepted, ``parse`` the
    conversion to the runner's argument and ``replay`` marks an option that replays a run
    made by hand instead of running (``scale --from-log``)."""

    name: str
    default: Any
    help: str
    type: Any = int
    flag: str | None = None
    minimum: float | None = None
    parse: Callable[[Any], Any] | None = None
    replay: bool = False

    @property
    def flags(self) -> str:
        """The flag(s) as typer declares them."""
        return self.flag or "--" + self.name.replace("_", "-")

    def argument(self, value: Any) -> Any:
        """The runner's argument for the command-line ``value``."""
        return value if self.parse is None else self.parse(value)


def _sizes(text: str) -> list[int]:
    return [int(x) for x in numbers(text, "--persons", lo=1)]


def _format(fmt: str) -> str:
    return choice("--format", fmt, ("txt", "parquet"))


def _path(value: str | None) -> Path | None:
    return None if value is None else Path(value)


def _engine(engine: str) -> str:
    if engine not in ("polars", "spark"):
        raise UsageError(f"--engine must be polars or spark, not {engine!r}")
    return engine


def _engines(text: str) -> tuple[str, ...]:
    got = tuple(_engine(e.strip()) for e in text.split(",") if e.strip())
    if not got or len(set(got)) != len(got):
        raise UsageError(f"--engines must name polars and/or spark once each, not {text!r}")
    return got


def _scopes(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(",") if s.strip())


def _lock(lock: str | None) -> str | None:
    from privtab.bench.safetab import DEFAULT_LOCK

    return DEFAULT_LOCK if lock is None else (lock or None)


SAMPLERS = (
    Option("n", 2_000_000, "Samples per timed privtab run.", minimum=1),
    Option("repeat", 3, "Timed runs (best is kept).", minimum=1),
    Option(
        "opendp_n", None, "Samples per OpenDP run (default n/20, ≤ 50,000).", int | None, minimum=1
    ),
)
ACCOUNTING = (Option("n", 2000, "Timed scalar calls.", minimum=1),)
INVARIANTS = (
    Option("replicates", 30, "Tables per setting.", minimum=2),
    Option("n", 1000, "Records per table (Multinomial).", minimum=1),
    Option("big", False, "Add the 4 × 4 K-norm (≈ 3 min hull).", bool),
)
SYNTH = (
    Option("persons", "1e6", "Sizes, e.g. 1e6,1e7.", str, parse=_sizes),
    Option("fmt", "txt", "txt or parquet.", str, "--format", parse=_format),
    Option("seed", 1, "Seed of privtab synth.", minimum=0),
    Option("validate", False, "Also time privtab validate.", bool),
)
SCALE = (
    Option("persons", "1e6", "Sizes, e.g. 1e6,1e7,1e8.", str, parse=_sizes),
    Option("fmt", "parquet", "txt or parquet.", str, "--format", parse=_format),
    Option(
        "data",
        None,
        "Where the synthetic inputs are kept/reused (DATA/synth-N).",
        str | None,
        parse=_path,
    ),
    Option(
        "from_log",
        None,
        "Record a release run by hand from its saved stderr.",
        str | None,
        replay=True,
    ),
    Option(
        "release_json", None, "With --from-log: the run's --json output.", str | None, replay=True
    ),
)
FLOOR = (
    Option("persons", 10_000_000, "Synthetic persons.", minimum=1),
    Option(
        "data",
        None,
        "Where the synthetic input is kept/reused (DATA/synth-N).",
        str | None,
        parse=_path,
    ),
    Option("seed", 7, "Seed of privtab synth.", minimum=0),
)
#: SafeTab-H's: the floor's, with the persons' help naming the households they make
SAFETAB_H = (
    Option(
        "persons",
        10_000_000,
        "Synthetic persons (households: about 0.36 per person; 356000000 ≈ 2020's 1.27e8).",
        minimum=1,
    ),
    *FLOOR[1:],
)
SAFETAB = (
    Option("persons", 1_000_000, "Synthetic persons.", minimum=1),
    Option(
        "data",
        None,
        "Input directory: reused if its synth.json has --persons, else "
        "generated there (default: in the work directory).",
        str | None,
    ),
    Option("seed", 1, "Seed of privtab synth.", minimum=0),
    Option("states", None, "privtab synth --states (default: 50 states + DC + PR).", str | None),
    Option(
        "tumult",
        None,
        "Python with tmlt.analytics (default: $PRIVTAB_TUMULT_PYTHON, else "
        ".bench-peers/tumult/bin/python from make bench-peers).",
        str | None,
        "--tumult-python",
    ),
    Option(
        "tumult_max_groups",
        200_000,
        "Run in Tumult only levels with at most this many groups (0: all).",
        minimum=0,
    ),
    Option("tumult_scopes", "US", "US, PR or US,PR.", str, parse=_scopes),
    Option("stage2", True, "Tumult stage 2 too.", bool, "--stage2/--no-stage2"),
    Option(
        "engine",
        "polars",
        "privtab's engine: polars, or spark (local[--cores] with the "
        "Spark settings of Tumult's session).",
        str,
        parse=_engine,
    ),
    Option(
        "cores",
        None,
        "Spark local[N] of Tumult (and privtab's Spark engine).",
        int | None,
        minimum=1,
    ),
    Option("driver_memory", "6g", "spark.driver.memory of both Spark sessions.", str),
    Option(
        "tumult_max_seconds",
        None,
        "Tumult starts no new level (but the first) after this many seconds.",
        float | None,
        minimum=0,
    ),
    Option(
        "tumult_result",
        None,
        "Reuse the Tumult side of a previous `privtab bench safetab "
        "--json` record (checked: same input, plan and Spark settings; recorded as "
        "reused).",
        str | None,
    ),
    Option(
        "lock",
        None,
        "flock file for heavy steps ('' = none; default in $TMPDIR).",
        str | None,
        parse=_lock,
    ),
)

TOPDOWN_STATE = (
    Option("data", None, "A data folder of privtab synth (one state, e.g. --states DE).",
           str | None),
    Option("seed", 1, "Seed of the (NOT private) production-law noise.", minimum=0),
)  # fmt: skip
TOPDOWN_GLS_ROUND = (
    *TOPDOWN_STATE,
    Option("draws", 1, "Noise draws (seeds SEED, SEED+1, …), each post-processed both ways.",
           minimum=1),
)  # fmt: skip
TOPDOWN = (
    Option("persons", "1e6", "Sizes, e.g. 1e6,1e7 (synthetic nation: 50 states, DC, PR).", str,
           parse=_sizes),
    Option("data", None, "Where the synthetic inputs are kept/reused (DATA/synth-N).",
           str | None, parse=_path),
    Option("seed", 1, "Seed of the (NOT private) production-law noise.", minimum=0),
    Option("workers", 2, "privtab topdown run --workers.", minimum=1),
    Option("sample", 8, "Problems per level solved by both solvers (0: no baseline).",
           minimum=0),
    Option("engines", "polars", "Engines run in turn on each size: polars (embedded), spark, "
           "or polars,spark (the Spark ÷ embedded wall ratio).", str, parse=_engines),
    Option("spark_master", "local[2]", "The Spark run's master (privtab topdown run "
           "--spark-master).", str),
    Option("spark_memory", "6g", "The Spark run's spark.driver.memory and "
           "spark.executor.memory.", str),
    Option("states", None, "privtab synth --states (default: the 50 states, DC and PR); "
           "e.g. GA: one state at its real density.", str | None),
    Option("text", True, "privtab topdown run --text/--no-text (--no-text: Parquet only, "
           "for the nation on a small disk).", bool, "--text/--no-text"),
)  # fmt: skip
