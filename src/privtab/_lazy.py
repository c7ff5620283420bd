"""Public names that load on first use: the one ``__getattr__``/``__dir__`` of a package.

A package lists its names in ``__all__`` and where each lives in a table; importing the
package then imports none of those modules (``privtab.random.rational``, used by
:mod:`privtab.accounting`, does not pull in the samplers and mpmath; ``privtab.safetab``
does not pull in the engine).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``: ``name`` is imported from
    ``package.<where[name]>`` on first access and kept in the package's namespace."""
    module = sys.modules[package]

    def get(name: str) -> Any:
        if name in where:
            value = getattr(importlib.import_module(f"{package}.{where[name]}"), name)
            setattr(module, name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def names() -> list[str]:
        return sorted(module.__all__)

    return get, names
