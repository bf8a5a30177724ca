"""Shared test settings: integration tests run only with --integration (they need a Docker engine)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--integration",
        action="store_true",
        default=False,
        help="run integration tests against the real Docker engine (scripts/start-docker.sh starts one)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--integration"):
        return
    skip = pytest.mark.skip(reason="needs a Docker engine: run pytest --integration (after scripts/setup.sh)")
    for item in items:
        if "integration" in item.keywords:
            item.add_marker(skip)
