"""Racks on real processes: six brokers dealt to three racks (broker.rack), replica.selector.class set to
Kafka's RackAwareReplicaSelector. Every partition of a new RF-3 topic has a replica on each rack; a
confluent-kafka consumer with client.rack reads from its rack's follower (the brokers' per-client fetched
bytes show where), gets every record, survives that follower's kill -9 by falling back to the leader, and
never reads a record that was not committed (every record it reads is one the acks=all producer had
acknowledged, at the same offset)."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from epochlog.client.reassignments import broker_racks
from epochlog.replication.read_replica import RACK_AWARE_SELECTOR
from epochlog.server.cluster.local import LocalCluster, rack_of
from tests.broker_process import free_port
from tests.integration.cluster_helpers import AckingProducer, create_topic, new_cluster, partition_info, wait_until
from tests.integration.helpers import topic_name

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CLIENT = "rack-reader"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, dict[int, int]]]:
    lc = new_cluster(
        tmp_path_factory.mktemp("racks"),
        6,
        controller={"broker.session.timeout.ms": "2000"},
        broker_heartbeat_interval_ms="300",
        racks=3,
        replica_selector_class=RACK_AWARE_SELECTOR,
    )
    ports = {n: free_port() for n in lc.broker_ids()}
    for n, port in ports.items():
        with open(lc.broker(n).config, "a") as f:
            f.write(f"metrics.port={port}\n")
    lc.start()
    try:
        yield lc, ports
    finally:
        lc.stop()


def client_bytes(port: int, topic: str) -> float:
    """The bytes broker at ``port`` served the consumer CLIENT from ``topic`` (its Prometheus counter)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    pattern = rf'^kafka_server_fetch_client_bytes_total{{client_id="{CLIENT}",topic="{re.escape(topic)}"}} (\S+)$'
    found = re.search(pattern, text, re.M)
    return float(found.group(1)) if found else 0.0


def test_metadata_carries_racks_and_every_partition_spans_three_racks(
    cluster: tuple[LocalCluster, dict[int, int]],
) -> None:
    lc, _ports = cluster
    def six() -> dict[int, str | None] | None:
        r = broker_racks(lc.bootstrap)
        return r if len(r) == 6 else None

    racks = wait_until(six, 30, "six brokers")
    assert racks == {b: rack_of(b, 3) for b in range(1, 7)}
    topic = topic_name("placed")
    create_topic(lc.bootstrap, topic, 12, 3, {})
    md = AdminClient({"bootstrap.servers": lc.bootstrap}).list_topics(topic, timeout=10)
    for p, m in md.topics[topic].partitions.items():
        assert {racks[b] for b in m.replicas} == {"rack-1", "rack-2", "rack-3"}, (p, m.replicas)


def test_a_consumer_reads_from_its_racks_follower_and_falls_back_to_the_leader(
    cluster: tuple[LocalCluster, dict[int, int]],
) -> None:
    lc, ports = cluster
    topic = topic_name("near")
    create_topic(lc.bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})
    def full_isr() -> tuple[int, list[int], list[int]] | None:
        info = partition_info(lc.bootstrap, topic)
        return info if info[0] >= 0 and len(info[2]) == 3 else None

    leader, replicas, _isr = wait_until(full_isr, 30, "ISR of 3")
    follower = next(b for b in replicas if b != leader)
    producer = AckingProducer(lc.bootstrap, topic).start()
    consumer = Consumer(
        {
            "bootstrap.servers": lc.bootstrap,
            "group.id": "rack-readers",
            "client.id": CLIENT,
            "client.rack": rack_of(follower, 3),
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: dict[bytes, int] = {}

    def read_for(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen[msg.value()] = msg.offset()

    try:
        wait_until(lambda: len(producer.acked) > 300, 60, "records acknowledged")
        read_for(3)
        wait_until(lambda: client_bytes(ports[follower], topic) > 0, 30, "reads served by the follower")
        assert client_bytes(ports[leader], topic) == 0, "the leader sent the consumer to its rack's follower"

        lc.kill9(f"broker-{follower}")
        acked_before = len(producer.acked)
        wait_until(lambda: len(producer.acked) > acked_before + 300, 60, "writes after the kill")
        read_for(2)
        wait_until(lambda: client_bytes(ports[leader], topic) > 0, 60, "the leader serving the consumer")
        producer.stop()
        assert not producer.errors, producer.errors[:5]
        acked = {v: off for v, (_p, off) in producer.acked.items()}

        def caught_up() -> bool:
            read_for(0.5)
            return set(acked) <= set(seen)

        wait_until(caught_up, 60, "every acknowledged record read")
        # Nothing above the HW: every record read was acknowledged, at the offset it was read at.
        assert {v: o for v, o in seen.items() if acked.get(v) != o} == {}
    finally:
        consumer.close()
        lc.start_node(f"broker-{follower}")
