from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from epochlog.server.cluster.local import LocalCluster, free_base_port
from tests import trace_harness
from tests.broker_process import BrokerProcess
from tests.integration.cluster_helpers import QUORUM


@pytest.fixture(scope="session", autouse=True)
def _traced_clusters() -> Iterator[None]:
    """Every LocalCluster a test builds runs with tracing on, and its directory is judged after each test."""
    original = LocalCluster.__post_init__

    def traced(self: LocalCluster) -> None:
        self.broker_settings = {**trace_harness.TRACE_ON, **self.broker_settings}
        self.controller_settings = {**trace_harness.TRACE_ON, **self.controller_settings}
        original(self)
        trace_harness.register(self.data_dir)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(LocalCluster, "__post_init__", traced)
        yield


@pytest.fixture(autouse=True)
def _check_traces() -> Iterator[None]:
    """At the end of each test: the trace checker over the traces its processes wrote; a violation fails it."""
    yield
    failures = trace_harness.check_registered()
    if failures:
        pytest.fail("trace invariants broken by real processes:\n" + "\n\n".join(failures), pytrace=False)


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
