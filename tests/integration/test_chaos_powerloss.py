"""Power loss through the chaos cluster's FUSE file system (chaos/powerfs), node by node, with real processes.

- All brokers lose power at once: with the default flush settings acknowledged writes are lost (the test
  can fail: it shows what the file system takes away), with ``log.flush.interval.messages=1`` none are.
- The active controller loses power again and again, and a controller's disk fails under a write: no
  topic that was created is forgotten, every controller restarts, the one whose disk failed stops cleanly.

Skipped, with the reason, where FUSE cannot be mounted here."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from epochlog.chaos.cluster import ChaosCluster
from epochlog.chaos.disks import NodeDisks, why_not
from epochlog.chaos.history import History
from epochlog.chaos.workloads import QUIET, final_read
from epochlog.client.admin import admin_client, create_topic, wait_for_partitions

_why = why_not()
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(_why is not None, reason=f"FUSE cannot be mounted here: {_why}"),
]

TOPIC, PARTITIONS = "durable", 3


class Cluster:
    def __init__(self, data: Path, settings: dict[str, str]) -> None:
        self.chaos = ChaosCluster(data, 3, 3, settings).build()
        self.disks = NodeDisks(self.chaos)

    def __enter__(self) -> Cluster:
        self.disks.mount()
        try:
            self.chaos.start()
        except BaseException:
            self.disks.unmount()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.chaos.stop()
        finally:
            self.disks.unmount()

    def power_off_and_on(self, names: list[str]) -> int:
        """kill -9 every named node at once, drop their unsynced writes, start them again; bytes dropped."""
        lc = self.chaos.lc
        for n in names:
            lc.kill9(n)
        time.sleep(0.1)
        dropped = sum(self.disks.powerloss(n)["dirty_bytes"] for n in names)
        for n in names:
            lc.start_node(n, timeout=60)
        return int(dropped)

    def admin(self) -> Any:
        return admin_client({"bootstrap.servers": self.chaos.bootstrap, **QUIET})


def _produce(bootstrap: str, count: int) -> list[str]:
    """Idempotent acks=all sends; the values acknowledged."""
    acked: list[str] = []

    def done(err: Any, msg: Any) -> None:
        if err is None:
            acked.append(msg.value().decode())

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", **QUIET})
    for i in range(count):
        p.produce(TOPIC, value=str(i).encode(), partition=i % PARTITIONS, on_delivery=done)
        p.poll(0)
        if i % 50 == 49:
            p.flush(30)
    assert p.flush(30) == 0
    return acked


def _lost_after_all_brokers_power_off(tmp: Path, settings: dict[str, str]) -> tuple[int, int, int]:
    """(acknowledged, lost of them, bytes the power loss dropped)."""
    with Cluster(tmp / "data", settings) as c:
        admin = c.admin()
        create_topic(admin, TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        wait_for_partitions(admin, TOPIC, PARTITIONS, timeout=30)
        del admin
        assert c.chaos.wait_healthy([TOPIC], PARTITIONS, 60)
        acked = _produce(c.chaos.bootstrap, 600)
        assert len(acked) == 600
        dropped = c.power_off_and_on([f"broker-{i}" for i in c.chaos.lc.broker_ids()])
        c.chaos.wait_healthy([TOPIC], PARTITIONS, 60)
        history = History()
        assert final_read(c.chaos.bootstrap, TOPIC, PARTITIONS, history, 60)
        read = {r.value for r in history.final}
        return len(acked), len(set(acked) - read), dropped


@pytest.mark.long
@pytest.mark.timeout(240)
def test_all_brokers_losing_power_lose_acknowledged_writes_by_default(tmp_path: Path) -> None:
    """Kafka's defaults acknowledge before fsync: a power loss of every replica at once loses the writes."""
    acked, lost, dropped = _lost_after_all_brokers_power_off(tmp_path, {})
    assert dropped > 0
    assert lost > 0, f"{acked} acknowledged, none lost: the power loss dropped nothing the brokers had not synced"


@pytest.mark.timeout(240)
def test_flushing_every_message_loses_nothing_when_all_brokers_lose_power(tmp_path: Path) -> None:
    acked, lost, _dropped = _lost_after_all_brokers_power_off(tmp_path, {"log.flush.interval.messages": "1"})
    assert lost == 0, f"{lost} of {acked} acknowledged writes lost with log.flush.interval.messages=1"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(tmp_path / "data", {}) as c:
        yield c


def _topics(c: Cluster) -> dict[str, int]:
    md = c.admin().list_topics(timeout=10)
    return {t: len(m.partitions) for t, m in md.topics.items() if not t.startswith("__")}


def _until(what: str, check: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = check()
            if got:
                return got
        except Exception as e:  # mid-election
            got = e
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout} s: last {got!r}")
        time.sleep(0.3)


@pytest.mark.long
@pytest.mark.timeout(300)
def test_the_active_controller_losing_power_again_and_again_forgets_no_topic(cluster: Cluster) -> None:
    created: dict[str, int] = {}
    for round_ in range(4):
        name = f"kept-{round_}"
        admin = cluster.admin()
        assert create_topic(admin, name, round_ + 1, 3)
        created[name] = round_ + 1
        del admin
        active = _until("an active controller", cluster.chaos.active_controller, 30)
        cluster.power_off_and_on([active.name])
        _until(
            f"every created topic after power loss {round_ + 1}",
            lambda: all(_topics(cluster).get(t) == n for t, n in created.items()),
            60,
        )
    controllers = cluster.chaos.lc.controller_nodes()
    assert all(n.alive for n in controllers), [(n.name, n.proc and n.proc.returncode) for n in controllers]


@pytest.mark.long
@pytest.mark.timeout(300)
def test_a_controller_whose_metadata_disk_fails_stops_cleanly(cluster: Cluster) -> None:
    """EIO on the active controller's disk under a write: it stops (exit 1, saying why) rather than answer from
    a state its disk does not hold; the quorum goes on; after the disk is healed it restarts and catches up."""
    active = _until("an active controller", cluster.chaos.active_controller, 30)
    cluster.disks.fail(active.name, "eio")
    admin = cluster.admin()
    try:
        create_topic(admin, "during-failure", 2, 3, timeout=30)
    except Exception:  # the controller that failed may have been the one asked: retried below
        pass
    assert active.proc is not None
    assert active.proc.wait(30) == 1
    assert "metadata log directory failed" in active.log.read_text()
    cluster.disks.heal(active.name)
    _until("the topic created through the new active controller", lambda: create_topic(admin, "after", 1, 3) or 1, 60)
    cluster.chaos.lc.start_node(active.name, timeout=60)
    _until("every topic", lambda: {"after"} <= set(_topics(cluster)), 60)
    time.sleep(2)
    assert active.alive, active.log.read_text()[-2000:]
