"""Shared pytest configuration: the slow-test switch and common fixtures."""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--runslow",
        action="store_true",
        default=False,
        help="run tests marked slow (also enabled by PRIVTAB_SLOW=1)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow") or os.environ.get("PRIVTAB_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow or PRIVTAB_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
