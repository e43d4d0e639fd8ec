"""Marks each test with its layer (unit, sim, integration, spark) from the folder it lives in, and skips the
long fault runs (marked ``long``) unless EPOCHLOG_LONG=1 (`scripts/test --long`): they keep the default run
inside its time budget while CI still runs a shorter case of every guarantee."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_LAYERS = ("unit", "sim", "integration", "spark")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    long_runs = bool(os.environ.get("EPOCHLOG_LONG"))
    for item in items:
        if not long_runs and item.get_closest_marker("long") is not None:
            item.add_marker(pytest.mark.skip(reason="a long fault run: EPOCHLOG_LONG=1 (scripts/test --long) runs it"))
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
