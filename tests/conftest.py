"""Marks each test with its layer (unit, sim, integration, spark) from the folder it lives in."""

from __future__ import annotations

from pathlib import Path

import pytest

_LAYERS = ("unit", "sim", "integration", "spark")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).parts
        for layer in _LAYERS:
            if layer in parts:
                item.add_marker(getattr(pytest.mark, layer))
