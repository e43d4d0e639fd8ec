"""Helpers for tests against a real multi-process cluster (`epochlog controller` + N `epochlog broker`)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from epochlog.client.epochs import LeaderEpochClient
from epochlog.server.cluster.local import LocalCluster, free_base_port

# Kafka's defaults for the controller quorum's timeouts, stated so a test says what it runs with.
QUORUM = {"controller.quorum.election.timeout.ms": "1000", "controller.quorum.fetch.timeout.ms": "2000"}


def wait_until(cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = cond()
        except Exception as e:  # the cluster may be mid-failover; keep asking
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def create_topic(bootstrap: str, name: str, partitions: int, rf: int, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf, config=config)])[name].result(15)


def partition_info(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, list[int], list[int]]:
    """(leader, replicas, isr) as Metadata reports them."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=5)
    p = md.topics[topic].partitions[partition]
    return p.leader, list(p.replicas), sorted(p.isrs)


def leader_epoch(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """(leader id, leader epoch) from a Metadata request (librdkafka hides the epoch)."""
    with LeaderEpochClient(bootstrap) as c:
        pl = c.metadata([topic])[(topic, partition)]
    return pl.leader_id, pl.leader_epoch


def dump_batches(log_dir: Path) -> list[dict[str, Any]]:
    """Every batch of a partition directory, through `epochlog dump-log --json`."""
    out = subprocess.run(
        [sys.executable, "-m", "epochlog.cli.main", "dump-log", "--json", str(log_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return [r for r in rows if "base_offset" in r]


class AckingProducer:
    """A confluent-kafka producer thread (acks=all, idempotent, retries) that records every acknowledgement."""

    def __init__(self, bootstrap: str, topic: str, rate_sleep: float = 0.002) -> None:
        self.topic = topic
        self.p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "message.timeout.ms": 60000,
            }
        )
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.errors: list[str] = []
        self.sent = 0
        self.rate_sleep = rate_sleep
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _cb(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked[msg.value()] = (msg.partition(), msg.offset())

    def _run(self) -> None:
        while not self._stop.is_set():
            for _ in range(20):
                try:
                    self.p.produce(self.topic, value=b"m-%08d" % self.sent, on_delivery=self._cb)
                except BufferError:  # the local queue is full while the cluster fails over: wait
                    self.p.poll(0.1)
                    break
                self.sent += 1
            self.p.poll(0)
            time.sleep(self.rate_sleep)

    def start(self) -> AckingProducer:
        self._thread.start()
        return self

    def stop(self, flush_timeout: float = 60) -> None:
        self._stop.set()
        self._thread.join(10)
        left = self.p.flush(flush_timeout)
        assert left == 0, f"{left} messages neither acknowledged nor failed"


def new_cluster(
    tmp_path: Path, brokers: int = 3, controller: dict[str, str] | None = None, racks: int = 0, **settings: str
) -> LocalCluster:
    base = free_base_port(brokers)
    props = {"group.initial.rebalance.delay.ms": "0", **{k.replace("_", "."): v for k, v in settings.items()}}
    return LocalCluster(
        tmp_path / "cluster", brokers, base, broker_settings=props, controller_settings=controller or {}, racks=racks
    )
