"""kafka-python 3.x (idempotent by default) against a real epochlog process."""

from __future__ import annotations

import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.broker_process import BrokerProcess
from tests.integration.helpers import create_topic, topic_name


def test_produce_consume_assign(broker: BrokerProcess) -> None:
    topic = topic_name("kp")
    create_topic(broker.bootstrap, topic)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    futs = [p.send(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"1")]) for i in range(100)]
    offsets = [f.get(timeout=20).offset for f in futs]
    p.close()
    assert offsets == list(range(100))
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000)
    c.assign([TopicPartition(topic, 0)])
    c.seek_to_beginning()
    got = []
    for m in c:
        got.append(m)
        if len(got) == 100:
            break
    c.close()
    assert [m.value for m in got] == [b"v%d" % i for i in range(100)]
    assert got[3].headers == [("h", b"1")]


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd", "snappy"])
def test_compression(broker: BrokerProcess, codec: str) -> None:
    if codec == "snappy":
        pytest.importorskip("snappy", reason="kafka-python needs python-snappy for snappy")
    topic = topic_name(f"kp{codec}")
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=20)
    for i in range(200):
        p.send(topic, value=b"%d" % i)
    p.flush(20)
    p.close()
    c = KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
        enable_auto_commit=False,
    )
    got = [m.value for _, m in zip(range(200), c, strict=False)]
    c.close()
    assert got == [b"%d" % i for i in range(200)]


def test_group_subscribe_commit_resume(broker: BrokerProcess) -> None:
    topic = topic_name("kpg")
    create_topic(broker.bootstrap, topic, partitions=2)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(40):
        p.send(topic, value=b"%d" % i)
    p.flush(20)
    group = f"kpg-{uuid.uuid4().hex[:6]}"
    c = KafkaConsumer(
        topic,
        group_id=group,
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=8000,
    )
    first = [m.value for _, m in zip(range(40), c, strict=False)]
    c.commit()
    c.close()
    assert len(first) == 40
    for i in range(40, 50):
        p.send(topic, value=b"%d" % i)
    p.flush(20)
    p.close()
    c = KafkaConsumer(
        topic,
        group_id=group,
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=8000,
    )
    rest = [m.value for _, m in zip(range(10), c, strict=False)]
    c.close()
    assert sorted(rest) == sorted(b"%d" % i for i in range(40, 50))
