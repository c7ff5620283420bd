"""Options shared by the commands that run a release (``safetab run``, ``safetab-h run``)."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["ParentsOption"]

ParentsOption = Annotated[
    bool,
    typer.Option(
        "--parents",
        help="Create missing parent folders of --out (default: refused, so that a "
        "mistyped path creates nothing).",
    ),
]
