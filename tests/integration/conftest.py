from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from epochlog.server.cluster.local import LocalCluster, free_base_port
from tests.broker_process import BrokerProcess
from tests.integration.cluster_helpers import QUORUM


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data").start()
    yield b
    b.stop()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[object]:
    started: list[BrokerProcess] = []

    def make(settings: dict[str, str] | None = None, name: str = "data") -> BrokerProcess:
        b = BrokerProcess(tmp_path / name, settings=settings).start()
        started.append(b)
        return b

    yield make
    for b in started:
        b.stop()


@pytest.fixture
def quorum_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """Three controllers and three brokers on 127.0.0.1, with quorum timeouts at Kafka's defaults."""
    base = free_base_port(3, controllers=3)
    lc = LocalCluster(
        tmp_path / "cluster",
        3,
        base,
        broker_settings={"group.initial.rebalance.delay.ms": "0"},
        controller_settings=dict(QUORUM),
        controllers=3,
    )
    lc.start()
    try:
        yield lc
    finally:
        lc.stop()
