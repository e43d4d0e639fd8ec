"""A client held by its byte-rate quota, shared by the quota enforcement tests and bench/quota_bench.py: the
quota windows they run with and a confluent-kafka producer sending flat out (or paced) that keeps what
librdkafka's statistics say about throttling and counts the bytes the broker acknowledged."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

# Kafka's smallest window (quota.window.size.seconds is at least 1), and 5 of them to keep the warm-up short.
WINDOWS = {"quota.window.num": "5", "quota.window.size.seconds": "1"}
WARMUP = 7.0  # seconds: more than quota.window.num windows
PAYLOAD = 1024


def end_offset(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "quota-probe", "client.id": "probe"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        c.close()


class ProducerLoad(threading.Thread):
    """A confluent-kafka producer sending 1 KiB records to ``topic`` as fast as it may (``pace``: bytes per
    second it offers at most), keeping the largest throttle librdkafka's statistics reported, every
    statistics interval's throttle figures, and the payload bytes acknowledged so far. ``conf``: producer
    properties over these."""

    def __init__(
        self, bootstrap: str, topic: str, client_id: str, pace: float | None = None, conf: dict[str, Any] | None = None
    ) -> None:
        super().__init__(daemon=True)
        self.topic, self.pace, self.stop = topic, pace, threading.Event()
        self.throttle_max = 0
        # (monotonic time, avg ms, max ms) of each statistics interval in which the broker reported a throttle
        self.throttles: list[tuple[float, int, int]] = []
        self.acked_bytes = 0
        self.errors: list[str] = []
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "linger.ms": 5,
                # Small requests: the measured span is not at the mercy of one megabyte batch.
                "batch.size": 32768,
                "queue.buffering.max.messages": 2000,
                "statistics.interval.ms": 500,
                "stats_cb": self._stats,
                **(conf or {}),
            }
        )

    def _stats(self, raw: str) -> None:
        for b in json.loads(raw).get("brokers", {}).values():
            t = b.get("throttle", {})
            self.throttle_max = max(self.throttle_max, int(t.get("max", 0)))
            if int(t.get("cnt", 0)) > 0:
                self.throttles.append((time.monotonic(), int(t.get("avg", 0)), int(t.get("max", 0))))

    def _done(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked_bytes += len(msg.value())
        # Purged at the end is expected; anything else is not.
        elif not self.stop.is_set() and len(self.errors) < 5:
            self.errors.append(str(err))

    def run(self) -> None:
        payload = b"x" * PAYLOAD
        start, sent = time.monotonic(), 0
        while not self.stop.is_set():
            if self.pace is not None and sent > self.pace * (time.monotonic() - start):
                self.producer.poll(0.01)
                continue
            try:
                self.producer.produce(self.topic, payload, on_delivery=self._done)
                sent += PAYLOAD
            except BufferError:
                self.producer.poll(0.05)
            self.producer.poll(0)
        self.producer.purge()
        self.producer.flush(10)
        # Dropped here, not at garbage collection: it would go on reconnecting to the stopped broker.
        del self.producer

    def finish(self) -> None:
        self.stop.set()
        self.join(30)
