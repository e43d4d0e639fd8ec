"""confluent-kafka (librdkafka) against a real epochlog process."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.broker_process import BrokerProcess
from tests.integration.helpers import consume_assign, create_topic, produce, topic_name


def test_produce_consume_assign_with_keys_headers_timestamps(broker: BrokerProcess) -> None:
    topic = topic_name()
    create_topic(broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    ts0 = 1_700_000_000_000
    for i in range(50):
        p.produce(
            topic,
            key=f"k{i}".encode(),
            value=f"v{i}".encode(),
            timestamp=ts0 + i,
            headers=[("h", f"x{i}".encode()), ("empty", None)],
        )
    assert p.flush(20) == 0
    msgs = consume_assign(broker.bootstrap, topic, 0, 50)
    assert [m.offset() for m in msgs] == list(range(50))
    assert [m.key() for m in msgs] == [f"k{i}".encode() for i in range(50)]
    assert [m.value() for m in msgs] == [f"v{i}".encode() for i in range(50)]
    assert msgs[7].timestamp() == (1, ts0 + 7)
    assert msgs[7].headers() == [("h", b"x7"), ("empty", None)]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_each_compression_codec(broker: BrokerProcess, codec: str) -> None:
    topic = topic_name(codec)
    create_topic(broker.bootstrap, topic)
    values = [(f"{codec}-{i}-" + "x" * (i % 100)).encode() for i in range(300)]
    acked = produce(broker.bootstrap, topic, values, {"compression.type": codec, "linger.ms": 20})
    assert [o for _, o in acked] == list(range(300))
    msgs = consume_assign(broker.bootstrap, topic, 0, 300)
    assert [m.value() for m in msgs] == values


def test_large_messages(broker: BrokerProcess) -> None:
    topic = topic_name("large")
    create_topic(broker.bootstrap, topic)
    values = [bytes([i]) * 900_000 for i in range(5)]
    produce(broker.bootstrap, topic, values, {"message.max.bytes": 1_000_000})
    msgs = consume_assign(broker.bootstrap, topic, 0, 5, conf={"fetch.max.bytes": 1_100_000})
    assert [m.value() for m in msgs] == values


def test_message_too_large_is_refused(broker: BrokerProcess) -> None:
    topic = topic_name("toolarge")
    create_topic(broker.bootstrap, topic, config={"max.message.bytes": "10000"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 100_000})
    errors = []
    p.produce(topic, value=b"x" * 50_000, on_delivery=lambda err, msg: errors.append(err))
    p.flush(20)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE


def test_subscribe_group_commits_and_resumes(broker: BrokerProcess) -> None:
    topic = topic_name("grp")
    create_topic(broker.bootstrap, topic, partitions=3)
    produce(broker.bootstrap, topic, [f"m{i}".encode() for i in range(90)])
    group = f"g-{uuid.uuid4().hex[:6]}"
    conf = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 10000,
    }
    c = Consumer(conf)
    c.subscribe([topic])
    seen = []
    deadline = time.monotonic() + 40
    while len(seen) < 60 and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            seen.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    assert len(seen) == 60
    produce(broker.bootstrap, topic, [f"n{i}".encode() for i in range(10)])
    c = Consumer(conf)
    c.subscribe([topic])
    rest = []
    deadline = time.monotonic() + 40
    while len(rest) < 40 and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            rest.append(m.value())
    c.close()
    assert len(rest) == 40
    assert set(seen) | set(rest) == {f"m{i}".encode() for i in range(90)} | {f"n{i}".encode() for i in range(10)}


def test_auto_topic_creation(broker: BrokerProcess) -> None:
    topic = topic_name("auto")
    acked = produce(broker.bootstrap, topic, [b"a", b"b"])
    assert [o for _, o in acked] == [0, 1]
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(topic, timeout=10)
    assert len(md.topics[topic].partitions) == 1


def test_auto_topic_creation_off(broker_factory) -> None:
    b = broker_factory({"auto.create.topics.enable": "false"})
    md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics("nope", timeout=10)
    assert md.topics["nope"].error is not None
    assert md.topics["nope"].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_idempotent_producer_many_in_flight(broker: BrokerProcess) -> None:
    topic = topic_name("idem")
    create_topic(broker.bootstrap, topic, partitions=2)
    values = [f"{i}".encode() for i in range(5000)]
    acked = produce(
        broker.bootstrap,
        topic,
        values,
        {
            "enable.idempotence": True,
            "acks": "all",
            "max.in.flight.requests.per.connection": 5,
            "batch.num.messages": 50,
        },
    )
    per_part: dict[int, list[int]] = {}
    for p, o in acked:
        per_part.setdefault(p, []).append(o)
    for offs in per_part.values():
        assert sorted(offs) == list(range(len(offs)))
    total = sum(len(consume_assign(broker.bootstrap, topic, p, len(offs))) for p, offs in per_part.items())
    assert total == 5000


def test_list_offsets_by_timestamp_and_epoch(broker: BrokerProcess) -> None:
    topic = topic_name("ts")
    create_topic(broker.bootstrap, topic)
    ts0 = int(time.time() * 1000) - 3_600_000  # in the past: message.timestamp.after.max.ms refuses the future
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        p.produce(topic, value=b"v", timestamp=ts0 + i * 1000)
        p.flush(10)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ts"})
    found = c.offsets_for_times([TopicPartition(topic, 0, ts0 + 4500)], timeout=10)
    assert found[0].offset == 5
    found = c.offsets_for_times([TopicPartition(topic, 0, ts0 + 99_000)], timeout=10)
    assert found[0].offset == -1
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    assert (lo, hi) == (0, 10)
    c.close()


def test_describe_configs(broker: BrokerProcess) -> None:
    topic = topic_name("cfg")
    create_topic(broker.bootstrap, topic, config={"retention.ms": "12345"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["retention.ms"].value == "12345"
    assert configs["cleanup.policy"].value == "delete"


def test_delete_topic_and_create_partitions(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import NewPartitions

    topic = topic_name("del")
    create_topic(broker.bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(10)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 4
    admin.delete_topics([topic])[topic].result(10)
    assert topic not in admin.list_topics(timeout=10).topics


def test_delete_topic_disabled(broker_factory) -> None:
    """delete.topic.enable=false is the controller's to enforce: TOPIC_DELETION_DISABLED, topic kept."""
    from confluent_kafka import KafkaError, KafkaException

    b = broker_factory({"delete.topic.enable": "false"})
    topic = topic_name("keep")
    create_topic(b.bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    try:
        admin.delete_topics([topic])[topic].result(10)
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.TOPIC_DELETION_DISABLED
    else:
        raise AssertionError("a topic was deleted with delete.topic.enable=false")
    assert topic in admin.list_topics(timeout=10).topics


def test_commit_for_a_topic_that_does_not_exist(broker: BrokerProcess) -> None:
    """Kafka answers UNKNOWN_TOPIC_OR_PARTITION per partition and stores nothing; the partition of an
    existing topic in the same request commits."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    real = topic_name("real")
    create_topic(broker.bootstrap, real)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic_name("g"), "enable.auto.commit": False})
    try:
        out = c.commit(
            offsets=[TopicPartition("no-such-topic-x", 0, 5), TopicPartition(real, 0, 0), TopicPartition(real, 7, 1)],
            asynchronous=False,
        )
    except KafkaException as e:
        out = e.args[0] if isinstance(e.args[0], list) else None
        assert out is not None or e.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    if out is not None:
        errors = {(tp.topic, tp.partition): tp.error for tp in out}
        assert errors[("no-such-topic-x", 0)].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        assert errors[(real, 7)].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        assert errors[(real, 0)] is None
    stored = c.committed([TopicPartition("no-such-topic-x", 0)], timeout=10)
    assert stored[0].offset < 0, "an offset was stored for a topic that does not exist"
    c.close()
