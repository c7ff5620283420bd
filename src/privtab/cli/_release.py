"""Options shared by the commands that run a release (``safetab run``, ``safetab-h run``)."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["ParentsOption", "SparkConfOption", "SparkMasterOption", "spark_settings"]

ParentsOption = Annotated[
    bool,
    typer.Option(
        "--parents",
        help="Create missing parent folders of --out (default: refused, so that a "
        "mistyped path creates nothing).",
    ),
]

SparkMasterOption = Annotated[
    str | None,
    typer.Option(
        "--spark-master", help="With --engine spark: the Spark master (default local[2])."
    ),
]

SparkConfOption = Annotated[
    list[str] | None,
    typer.Option(
        "--spark-conf",
        metavar="KEY=VALUE",
        help="With --engine spark: a Spark setting (repeatable).",
    ),
]


def spark_settings(items: list[str] | None) -> dict[str, str]:
    """``--spark-conf KEY=VALUE`` options as a mapping (a located error for anything else)."""
    from privtab.errors import UsageError

    conf: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--spark-conf needs KEY=VALUE, got {item!r}")
        conf[key.strip()] = value.strip()
    return conf
