"""Segment roll and retention on a running broker: the log start offset advances."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition

from tests.integration.helpers import create_topic, produce, topic_name


def test_retention_by_bytes_advances_log_start(broker_factory) -> None:
    b = broker_factory({"log.retention.check.interval.ms": "300"})
    topic = topic_name("ret")
    create_topic(b.bootstrap, topic, config={"segment.bytes": "20000", "retention.bytes": "40000"})
    for i in range(30):
        produce(b.bootstrap, topic, [b"x" * 1000 + b"%d" % i for _ in range(5)], {"linger.ms": 0})
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "ret"})
    part = b.data_dir / f"{topic}-0"

    def size() -> int:
        return sum(s.stat().st_size for s in part.glob("*.log"))

    # Retention runs every 300 ms; wait for a pass after the last write.
    deadline = time.monotonic() + 20
    low, high = 0, 0
    while time.monotonic() < deadline:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        if low > 0 and size() <= 40000 + 21000:
            break
        time.sleep(0.3)
    c.close()
    assert low > 0, "retention never advanced the log start offset"
    assert high == 150
    segments = sorted(part.glob("*.log"))
    assert int(segments[0].name[:-4]) == low
    assert size() <= 40000 + 21000, "more than retention.bytes plus one segment is left"
    # Fetching below the log start is out of range; auto.offset.reset=earliest lands on it.
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "ret2", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    first = None
    deadline = time.monotonic() + 20
    while first is None and time.monotonic() < deadline:
        m = c.poll(0.3)
        if m is not None and not m.error():
            first = m.offset()
    c.close()
    assert first == low
