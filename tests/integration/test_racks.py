"""Racks on real processes: six brokers dealt to three racks (broker.rack), replica.selector.class set to
Kafka's RackAwareReplicaSelector. Every partition of a new RF-3 topic has a replica on each rack; a
confluent-kafka consumer with client.rack reads from its rack's follower (the brokers' per-client fetched
bytes show where), gets every record, survives that follower's kill -9 by falling back to the leader, and
never reads a record that was not committed (every record it reads is one the acks=all producer had
acknowledged, at the same offset)."""

from __future__ import annotations

import json
import re
import subprocess
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
from tests.integration.test_kafkajs import JS, _kafkajs_or_skip

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


def client_bytes(port: int, topic: str, client: str = CLIENT) -> float:
    """The bytes broker at ``port`` served ``client`` from ``topic`` (its Prometheus counter)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    labels = f'client_id="{re.escape(client)}",topic="{re.escape(topic)}"'
    found = re.search(rf"^kafka_server_fetch_client_bytes_total{{{labels}}} (\S+)$", text, re.M)
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


def _topic_on_three_racks(lc: LocalCluster, prefix: str, records: int) -> tuple[str, int, int, dict[bytes, int]]:
    """A one-partition RF-3 topic holding ``records`` acknowledged records: (topic, leader, a follower, the
    acknowledged values and offsets)."""
    topic = topic_name(prefix)
    create_topic(lc.bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})

    def full_isr() -> tuple[int, list[int], list[int]] | None:
        info = partition_info(lc.bootstrap, topic)
        return info if info[0] >= 0 and len(info[2]) == 3 else None

    leader, replicas, _isr = wait_until(full_isr, 30, "ISR of 3")
    producer = AckingProducer(lc.bootstrap, topic).start()
    wait_until(lambda: len(producer.acked) >= records, 60, "records acknowledged")
    producer.stop()
    assert not producer.errors, producer.errors[:5]
    return topic, leader, next(b for b in replicas if b != leader), {v: o for v, (_p, o) in producer.acked.items()}


def _read_kafka_python(lc: LocalCluster, topic: str, client_id: str, rack: str, want: int) -> dict[bytes, int]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    consumer = KafkaConsumer(
        bootstrap_servers=lc.bootstrap, client_id=client_id, client_rack=rack, enable_auto_commit=False
    )
    consumer.assign([KTP(topic, 0)])
    consumer.seek(KTP(topic, 0), 0)
    seen: dict[bytes, int] = {}
    try:
        end = time.monotonic() + 60
        while len(seen) < want and time.monotonic() < end:
            for records in consumer.poll(timeout_ms=500).values():
                seen.update({r.value: r.offset for r in records})
    finally:
        consumer.close()
    return seen


def _read_aiokafka(lc: LocalCluster, topic: str, client_id: str, rack: str, want: int) -> dict[bytes, int]:
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATP

    async def run() -> dict[bytes, int]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=lc.bootstrap, client_id=client_id, client_rack=rack, enable_auto_commit=False
        )
        await consumer.start()
        seen: dict[bytes, int] = {}
        try:
            consumer.assign([ATP(topic, 0)])
            consumer.seek(ATP(topic, 0), 0)
            end = time.monotonic() + 60
            while len(seen) < want and time.monotonic() < end:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    seen.update({r.value: r.offset for r in records if r.value is not None})
        finally:
            await consumer.stop()
        return seen

    return asyncio.run(run())


def _read_kafkajs(lc: LocalCluster, topic: str, client_id: str, rack: str, want: int) -> dict[bytes, int]:
    _kafkajs_or_skip()
    script = str(JS / "rack_reader.js")
    args = ["node", script, lc.bootstrap, topic, str(want), client_id, rack]
    out = subprocess.run(args, capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr[-2000:]
    return {s["value"].encode(): s["offset"] for s in json.loads(out.stdout.strip().splitlines()[-1])["seen"]}


READERS = {"kafka-python": _read_kafka_python, "aiokafka": _read_aiokafka, "kafkajs": _read_kafkajs}
# KafkaJS's run (16 s: node's start and a group join) is in the long tier; the two Python clients run by default.
LIBRARIES = [pytest.param("kafkajs", marks=pytest.mark.long), "kafka-python", "aiokafka"]


@pytest.mark.parametrize("library", LIBRARIES)
def test_python_clients_read_from_their_racks_follower(
    cluster: tuple[LocalCluster, dict[int, int]], library: str
) -> None:
    """client_rack in kafka-python and aiokafka, rackId in KafkaJS: the records come from the follower on
    the client's rack, and a client on the leader's rack (the same library, the same topic) is served by the
    leader: the per-client counters tell the two apart."""
    lc, ports = cluster
    topic, leader, follower, acked = _topic_on_three_racks(lc, library, 300)
    read = READERS[library]
    near = f"{library}-near"
    seen = read(lc, topic, near, rack_of(follower, 3), len(acked))
    assert seen == acked
    assert client_bytes(ports[follower], topic, near) > 0 and client_bytes(ports[leader], topic, near) == 0
    at_leader = f"{library}-at-leader"
    assert read(lc, topic, at_leader, rack_of(leader, 3), len(acked)) == acked
    assert client_bytes(ports[leader], topic, at_leader) > 0 and client_bytes(ports[follower], topic, at_leader) == 0
