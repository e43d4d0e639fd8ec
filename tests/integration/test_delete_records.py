"""DeleteRecords against real `epochlog up` processes with real clients: confluent-kafka's and kafka-python's
admin delete_records; consumers start at the new log start; it survives kill -9; bad input gets Kafka's codes."""

from __future__ import annotations

import datetime
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition

from tests.broker_process import BrokerProcess
from tests.integration.helpers import create_topic, produce, topic_name
from tests.integration.kafka_wire import WireClient, schema_module

pytestmark = pytest.mark.timeout(120)

OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
POLICY_VIOLATION = 44


def first_offset(bootstrap: str, topic: str, start: int = OFFSET_BEGINNING, timeout: float = 20) -> int:
    """The offset of the first record a consumer gets from ``start`` (auto.offset.reset=earliest)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"dr-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.assign([TopicPartition(topic, 0, start)])
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is not None and m.error() is None:
                return int(m.offset())
    finally:
        c.close()
    raise AssertionError("no record consumed")


def watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(low), int(high)
    finally:
        c.close()


def confluent_delete(bootstrap: str, topic: str, offset: int, partition: int = 0) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futs = admin.delete_records([TopicPartition(topic, partition, offset)], request_timeout=30, operation_timeout=20)
    (fut,) = futs.values()
    return int(fut.result(30).low_watermark)


def segment_bases(part_dir: Path) -> list[int]:
    return sorted(int(p.name[:-4]) for p in part_dir.glob("*.log"))


def delete_records_wire(
    port: int, topics: list[tuple[str, list[tuple[int, int]]]], version: int = 2, timeout_ms: int = 10_000
) -> Any:
    m = schema_module(21, version)
    wire = WireClient(port)
    try:
        return wire.request(
            21,
            version,
            topics=tuple(
                m.DeleteRecordsTopic(
                    name=t, partitions=tuple(m.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in parts)
                )
                for t, parts in topics
            ),
            timeout=datetime.timedelta(milliseconds=timeout_ms),
        )
    finally:
        wire.close()


def rows(resp: Any) -> dict[tuple[str, int], tuple[int, int]]:
    return {
        (t.name, int(p.partition_index)): (int(p.error_code), int(p.low_watermark))
        for t in resp.topics
        for p in t.partitions
    }


def test_confluent_delete_records_moves_the_start_and_survives_kill9(broker_factory: Any) -> None:
    b: BrokerProcess = broker_factory()
    topic = topic_name("dr")
    create_topic(b.bootstrap, topic, config={"segment.bytes": "3000"})
    for i in range(0, 100, 5):  # one produce each: separate batches, several segments
        produce(b.bootstrap, topic, [b"v%03d" % j + b"x" * 200 for j in range(i, i + 5)], {"linger.ms": 0})
    part_dir = b.data_dir / f"{topic}-0"
    assert len(segment_bases(part_dir)) > 5

    assert confluent_delete(b.bootstrap, topic, 37) == 37
    assert watermarks(b.bootstrap, topic) == (37, 100)
    assert first_offset(b.bootstrap, topic) == 37
    # A consumer positioned below the start gets OFFSET_OUT_OF_RANGE and resets to the earliest: 37.
    assert first_offset(b.bootstrap, topic, start=5) == 37
    bases = segment_bases(part_dir)
    assert bases[0] <= 37 and (len(bases) == 1 or bases[1] > 37), f"a segment wholly below 37 remains: {bases}"

    # kill -9 long before any periodic checkpoint: the start offset must come back from the checkpoint
    # written with the deletion (records 37-bases[0] are still in the first segment on disk).
    b.kill9()
    b.start()
    assert watermarks(b.bootstrap, topic) == (37, 100)
    assert first_offset(b.bootstrap, topic) == 37

    # OFFSET_END (-1) deletes up to the high watermark; new records are then the first ones.
    assert confluent_delete(b.bootstrap, topic, OFFSET_END) == 100
    produce(b.bootstrap, topic, [b"after"], {"linger.ms": 0})
    assert first_offset(b.bootstrap, topic) == 100
    assert segment_bases(part_dir)[0] == 100
    b.stop()
    b.start()
    assert watermarks(b.bootstrap, topic) == (100, 101)


def test_kafka_python_delete_records(broker_factory: Any) -> None:
    b: BrokerProcess = broker_factory()
    topic = topic_name("drkp")
    create_topic(b.bootstrap, topic)
    produce(b.bootstrap, topic, [b"r%d" % i for i in range(20)], {"linger.ms": 0})
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=20000)
    try:
        out = admin.delete_records({KTopicPartition(topic, 0): 12}, timeout_ms=20000)
        (result,) = out.values()
        assert result["low_watermark"] == 12 and result["error_code"] == 0
    finally:
        admin.close()
    assert first_offset(b.bootstrap, topic) == 12


def test_bad_delete_records_get_kafkas_codes_and_the_broker_keeps_serving(broker_factory: Any) -> None:
    b: BrokerProcess = broker_factory()
    topic, compacted = topic_name("drbad"), topic_name("drcompact")
    create_topic(b.bootstrap, topic, partitions=2)
    create_topic(b.bootstrap, compacted, config={"cleanup.policy": "compact"})
    produce(b.bootstrap, topic, [b"x"] * 10, {"linger.ms": 0}, partition=0)
    produce(b.bootstrap, compacted, [b"x"], {"linger.ms": 0}, key=b"k")

    resp = delete_records_wire(
        b.port,
        [
            (topic, [(0, -5), (1, 3)]),  # negative other than -1; above partition 1's HW (0)
            ("no-such-topic", [(0, 1)]),
            (compacted, [(0, 1)]),
        ],
    )
    assert rows(resp) == {
        (topic, 0): (OFFSET_OUT_OF_RANGE, -1),
        (topic, 1): (OFFSET_OUT_OF_RANGE, -1),
        ("no-such-topic", 0): (UNKNOWN_TOPIC_OR_PARTITION, -1),
        (compacted, 0): (POLICY_VIOLATION, -1),
    }
    resp = delete_records_wire(b.port, [(topic, [(7, 1), (0, 11)])])  # a missing partition; past the HW (10)
    assert rows(resp) == {(topic, 7): (UNKNOWN_TOPIC_OR_PARTITION, -1), (topic, 0): (OFFSET_OUT_OF_RANGE, -1)}
    # A partition named twice is answered once, for the last offset asked (Kafka keys the request by partition).
    resp = delete_records_wire(b.port, [(topic, [(0, 2), (0, 4)])])
    assert rows(resp) == {(topic, 0): (0, 4)}
    # Version 0 decodes too.
    assert rows(delete_records_wire(b.port, [(topic, [(0, 6)])], version=0)) == {(topic, 0): (0, 6)}
    assert watermarks(b.bootstrap, topic) == (6, 10)
    with pytest.raises(KafkaException):
        confluent_delete(b.bootstrap, topic, 99)
    # Still serving, and nothing was lost above the start.
    produce(b.bootstrap, topic, [b"more"], {"linger.ms": 0}, partition=0)
    assert watermarks(b.bootstrap, topic) == (6, 11)
    assert first_offset(b.bootstrap, topic) == 6
