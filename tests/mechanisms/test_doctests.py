"""The usage examples in the docstrings of privtab.random and privtab.mechanisms run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "privtab.random",
    "privtab.mechanisms",
    "privtab.mechanisms.geometric",
    "privtab.mechanisms.discrete_gaussian",
    "privtab.mechanisms.continuous",
    "privtab.mechanisms.sensitivity",
    "privtab.mechanisms.ranges",
    "privtab.mechanisms.factory",
    "privtab.mechanisms.linear",
    "privtab.mechanisms.randomized_response",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
