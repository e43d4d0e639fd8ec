"""The quick tier's one real-cluster test (`scripts/test --quick`): a controller and three broker processes, a
topic replicated to all three, and every client this project supports producing with acks=all and reading its
records back. One cluster serves the whole module so the tier stays short; each client gets its own topic."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from epochlog.server.cluster.local import LocalCluster
from tests.integration.cluster_helpers import create_topic, new_cluster, partition_info, wait_until
from tests.integration.helpers import consume_assign, produce, topic_name
from tests.integration.test_kafkajs import JS, _kafkajs_or_skip

pytestmark = [pytest.mark.integration, pytest.mark.smoke, pytest.mark.timeout(120)]

COUNT = 20
VALUES = [b"v-%d" % i for i in range(COUNT)]


@pytest.fixture(scope="module")
def smoke_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    lc = new_cluster(tmp_path_factory.mktemp("smoke"), 3).start()
    try:
        yield lc
    finally:
        lc.stop()


def replicated_topic(lc: LocalCluster, prefix: str) -> str:
    """A one-partition topic on all three brokers, in sync, that refuses acks=all writes with fewer than two."""
    topic = topic_name(prefix)
    create_topic(lc.bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})
    wait_until(lambda: len(partition_info(lc.bootstrap, topic)[2]) == 3, 30, f"{topic}'s ISR to hold 3 replicas")
    return topic


def assert_still_replicated(lc: LocalCluster, topic: str) -> None:
    _, replicas, isr = partition_info(lc.bootstrap, topic)
    assert sorted(replicas) == [1, 2, 3]
    assert isr == [1, 2, 3], f"a replica fell out of sync while {topic} was written: ISR {isr}"


def test_confluent_kafka(smoke_cluster: LocalCluster) -> None:
    topic = replicated_topic(smoke_cluster, "smoke-ck")
    acked = produce(smoke_cluster.bootstrap, topic, VALUES, {"acks": "all", "enable.idempotence": True})
    assert acked == [(0, i) for i in range(COUNT)]
    got = consume_assign(smoke_cluster.bootstrap, topic, 0, COUNT)
    assert [(m.offset(), m.value()) for m in got] == list(enumerate(VALUES))
    assert_still_replicated(smoke_cluster, topic)


def test_kafka_python(smoke_cluster: LocalCluster) -> None:
    topic = replicated_topic(smoke_cluster, "smoke-kp")
    p = KafkaProducer(bootstrap_servers=smoke_cluster.bootstrap, acks="all")
    try:
        offsets = [p.send(topic, value=v, partition=0).get(timeout=20).offset for v in VALUES]
    finally:
        p.close(timeout=10)
    assert offsets == list(range(COUNT))
    c = KafkaConsumer(bootstrap_servers=smoke_cluster.bootstrap, enable_auto_commit=False, consumer_timeout_ms=10000)
    try:
        c.assign([KpTopicPartition(topic, 0)])
        c.seek_to_beginning()
        got = [(m.offset, m.value) for _, m in zip(range(COUNT), c, strict=False)]
    finally:
        c.close()
    assert got == list(enumerate(VALUES))
    assert_still_replicated(smoke_cluster, topic)


def test_aiokafka(smoke_cluster: LocalCluster) -> None:
    topic = replicated_topic(smoke_cluster, "smoke-aio")

    async def run() -> tuple[list[int], list[tuple[int, bytes]]]:
        p = AIOKafkaProducer(bootstrap_servers=smoke_cluster.bootstrap, acks="all", enable_idempotence=True)
        await p.start()
        try:
            offsets = [(await p.send_and_wait(topic, value=v, partition=0)).offset for v in VALUES]
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=smoke_cluster.bootstrap, enable_auto_commit=False)
        await c.start()
        got: list[tuple[int, bytes]] = []
        try:
            tp = AioTopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            while len(got) < COUNT:
                batch = await c.getmany(timeout_ms=1000)
                got.extend((m.offset, m.value) for msgs in batch.values() for m in msgs)
        finally:
            await c.stop()
        return offsets, got

    offsets, got = asyncio.run(asyncio.wait_for(run(), 60))
    assert offsets == list(range(COUNT))
    assert got == list(enumerate(VALUES))
    assert_still_replicated(smoke_cluster, topic)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (scripts/setup installs it)")
def test_kcat(smoke_cluster: LocalCluster) -> None:
    topic = replicated_topic(smoke_cluster, "smoke-kcat")
    subprocess.run(
        ["kcat", "-b", smoke_cluster.bootstrap, "-t", topic, "-p", "0", "-P", "-X", "acks=all"],
        input=b"".join(v + b"\n" for v in VALUES),
        check=True,
        timeout=30,
    )
    out = subprocess.run(
        ["kcat", "-b", smoke_cluster.bootstrap, "-t", topic, "-C", "-o", "beginning", "-e", "-f", "%o %s\n"],
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout
    assert out.splitlines() == [b"%d %s" % (i, v) for i, v in enumerate(VALUES)]
    assert_still_replicated(smoke_cluster, topic)


def test_kafkajs(smoke_cluster: LocalCluster) -> None:
    _kafkajs_or_skip()
    topic = replicated_topic(smoke_cluster, "smoke-js")
    out = subprocess.run(
        ["node", str(Path(JS) / "produce_consume.js"), smoke_cluster.bootstrap, topic, str(COUNT)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert [int(a["baseOffset"]) for a in result["acks"]] == [0]
    got = sorted((s["offset"], s["value"].encode()) for s in result["seen"])
    assert got == list(enumerate(VALUES))
    assert_still_replicated(smoke_cluster, topic)
