"""Small client helpers shared by the integration tests (confluent-kafka)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def topic_name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name]
    fut.result(15)


def produce(
    bootstrap: str, topic: str, values: list[bytes], conf: dict[str, Any] | None = None, **kw: Any
) -> list[tuple[int, int]]:
    """Produce and return (partition, offset) per value, in order; raises on any delivery error."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **(conf or {})})
    results: list[Any] = [None] * len(values)

    def cb(i: int) -> Any:
        def done(err: Any, msg: Any) -> None:
            results[i] = err if err is not None else (msg.partition(), msg.offset())

        return done

    for i, v in enumerate(values):
        p.produce(topic, value=v, on_delivery=cb(i), **kw)
        p.poll(0)
    remaining = p.flush(30)
    assert remaining == 0, f"{remaining} messages not delivered"
    for r in results:
        if not isinstance(r, tuple):
            raise KafkaException(r)
    return results


def consume_assign(
    bootstrap: str,
    topic: str,
    partition: int,
    count: int,
    start: int = 0,
    timeout: float = 30,
    conf: dict[str, Any] | None = None,
) -> list[Any]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **(conf or {}),
        }
    )
    c.assign([TopicPartition(topic, partition, start)])
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                raise KafkaException(m.error())
            out.append(m)
    finally:
        c.close()
    return out


def watermarks(bootstrap: str, topic: str, partition: int = 0, timeout: float = 10) -> tuple[int, int]:
    """The partition's (low, high) watermarks as a consumer sees them."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"w-{uuid.uuid4().hex[:6]}"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
        return int(low), int(high)
    finally:
        c.close()
