"""Reading the topic back and comparing it with what was acknowledged and what Spark wrote."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from epochlog.demo.model import DemoError

log = logging.getLogger("epochlog.demo")


def _consumer(bootstrap: str, isolation: str = "read_uncommitted") -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"epochlog-demo-check-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            # A log may end with a transaction's control record, which is never delivered.
            "enable.partition.eof": True,
            "logger": logging.getLogger("epochlog.demo.librdkafka"),
        }
    )


def _watermarks(c: Any, topic: str, partitions: int, timeout: float = 30.0) -> dict[int, int]:
    """High watermarks, asked through a consumer (which refreshes its metadata when leaders move)."""
    from confluent_kafka import KafkaException, TopicPartition

    out: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    for p in range(partitions):
        while True:
            try:
                high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                if high >= 0:
                    out[p] = high
                    break
            except KafkaException as e:
                log.info("watermarks of %s-%s: %s", topic, p, e)
            if time.monotonic() > deadline:
                raise DemoError(f"no high watermark for {topic}-{p} within {timeout:g} s")
            time.sleep(0.5)
    return out


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    c = _consumer(bootstrap)
    try:
        return _watermarks(c, topic, partitions)
    finally:
        c.close()


def read_log(
    bootstrap: str, topic: str, partitions: int, timeout: float = 60.0, isolation: str = "read_uncommitted"
) -> list[tuple[int, int, str]]:
    """(partition, offset, id) of every record in the topic, read straight from the brokers (read_committed:
    only committed transactions' records, up to the last stable offset)."""
    from confluent_kafka import KafkaError, TopicPartition

    c = _consumer(bootstrap, isolation)
    out: list[tuple[int, int, str]] = []
    try:
        ends = _watermarks(c, topic, partitions)
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions) if ends[p] > 0])
        pos = dict.fromkeys(range(partitions), 0)
        deadline = time.monotonic() + timeout
        while any(pos[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            for m in c.consume(5000, 0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        pos[m.partition()] = max(pos[m.partition()], m.offset())
                    continue
                try:
                    eid = json.loads(m.value())["id"]
                except (ValueError, KeyError, TypeError):
                    eid = f"<unparsable at {m.partition()}:{m.offset()}>"
                out.append((m.partition(), m.offset(), eid))
                pos[m.partition()] = m.offset() + 1
    finally:
        c.close()
    return out


@dataclass
class Comparison:
    rows: int
    lost: int
    duplicated: int
    mismatched: int
    not_acked: int
    lost_examples: list[str]
    duplicate_examples: list[str]


def compare(acked: dict[tuple[int, int], str], rows: list[tuple[int, int, str]]) -> Comparison:
    """Acknowledged records against what was found, by event id and by (partition, offset).

    lost: acknowledged ids not found; duplicated: rows beyond the first for an id; mismatched: an
    acknowledged (partition, offset) that holds a different event (the offset was reused: truncation);
    not_acked: found ids the producer never saw acknowledged (allowed after a failed delivery).
    """
    seen: Counter[str] = Counter(r[2] for r in rows)
    acked_ids = set(acked.values())
    lost_ids = sorted(acked_ids - seen.keys())
    dups = {i: n for i, n in seen.items() if n > 1}
    at = {(p, o): i for p, o, i in rows}
    mismatched = sum(1 for po, i in acked.items() if po in at and at[po] != i)
    id_to_po = {i: po for po, i in acked.items()}
    return Comparison(
        rows=len(rows),
        lost=len(lost_ids),
        duplicated=sum(n - 1 for n in dups.values()),
        mismatched=mismatched,
        not_acked=sum(1 for i in seen if i not in acked_ids),
        lost_examples=[f"{i} (acked at {id_to_po[i][0]}:{id_to_po[i][1]})" for i in lost_ids[:5]],
        duplicate_examples=[f"{i} x{n}" for i, n in list(dups.items())[:5]],
    )
