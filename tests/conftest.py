"""Marks each test with its layer (unit, sim, integration, spark) from the folder it lives in."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_LAYERS = ("unit", "sim", "integration", "spark")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).parts
        for layer in _LAYERS:
            if layer in parts:
                item.add_marker(getattr(pytest.mark, layer))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    from tests.trace_harness import SESSION

    if SESSION.dirs:
        terminalreporter.write_line(SESSION.summary())


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Any]:
    """A real cluster: `epochlog controller` and three `epochlog broker` processes on free ports."""
    from tests.integration.cluster_helpers import new_cluster

    lc = new_cluster(tmp_path, 3, replica_lag_time_max_ms="3000").start()
    yield lc
    lc.stop()
