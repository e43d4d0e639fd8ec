"""A produce/consume round trip through a real Kafka client, to show a fresh broker works."""

from __future__ import annotations

import sys
import time
import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from confluent_kafka import Message


def run_roundtrip(bootstrap: str, count: int = 5) -> bool:
    from confluent_kafka import Consumer, Producer

    topic = f"roundtrip-{uuid.uuid4().hex[:8]}"
    out = sys.stderr
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    acked: list[tuple[int, int]] = []

    def delivered(err: object, msg: object) -> None:
        if err is None:
            acked.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    for i in range(count):
        producer.produce(topic, key=f"k{i}".encode(), value=f"hello epochlog #{i}".encode(), on_delivery=delivered)
    producer.flush(15)
    print(f"[roundtrip] produced {len(acked)}/{count} messages to {topic}: offsets {[o for _, o in acked]}", file=out)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
        }
    )
    consumer.subscribe([topic])
    got: list[Message] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        got.append(msg)
        print(f"[roundtrip] consumed offset {msg.offset()} key={msg.key()!r} value={msg.value()!r}", file=out)
    consumer.close()
    ok = len(got) == count
    print(f"[roundtrip] {'OK' if ok else 'FAILED'}: {len(got)}/{count} messages came back", file=out)
    return ok
