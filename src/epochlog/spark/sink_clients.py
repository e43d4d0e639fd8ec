"""Kafka clients the exactly-once sink keeps between micro-batches, and its marker read.

Spark reuses its Python workers (spark.python.worker.reuse) and the process that runs the driver's commit,
so a client made for one task can serve the next. Starting one is most of a small micro-batch's cost:
librdkafka waits up to 0.5 s for its first broker connection before it asks for a producer id or a
coordinator (measured: init_transactions 0.5 s cold, 3 ms once the client has its metadata), and a fresh
AdminClient and consumer per marker read cost another 0.1-0.2 s.

A client is checked out of its cache while it is in use (`take`) and only handed back after it did its
job without an error (`put`); a client that failed, or was left inside a transaction, is never seen again.
Keys are the client's whole configuration, so bootstrap servers, security settings and the
transactional.id all separate clients.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from epochlog.spark.options import SinkOptions
from epochlog.spark.reader import message_offset

T = TypeVar("T")

# Counters for tests and benchmarks (per process): clients created, reused, replaced after failing.
STATS: Counter[str] = Counter()

CONNECT_TIMEOUT_S = 10.0


def conf_key(conf: Mapping[str, Any]) -> Hashable:
    return tuple(sorted((k, repr(v)) for k, v in conf.items()))


class ClientCache(Generic[T]):
    """Idle clients by key, the least recently used closed beyond `capacity`."""

    def __init__(self, capacity: int, close: Callable[[T], None]) -> None:
        self.capacity = capacity
        self._close = close
        self._idle: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: Hashable) -> T | None:
        with self._lock:
            return self._idle.pop(key, None)

    def put(self, key: Hashable, client: T) -> None:
        closing: list[T] = []
        with self._lock:
            if key in self._idle:
                # Two users had the same key at once (only in tests: Spark runs one task per worker).
                closing.append(self._idle.pop(key))
            self._idle[key] = client
            while len(self._idle) > self.capacity:
                closing.append(self._idle.popitem(last=False)[1])
        for c in closing:
            self.discard(c)

    def discard(self, client: T) -> None:
        try:
            self._close(client)
        except Exception:  # a client that failed may fail to close as well; it is dropped either way
            pass

    def clear(self) -> None:
        with self._lock:
            idle = list(self._idle.values())
            self._idle.clear()
        for c in idle:
            self.discard(c)

    def __len__(self) -> int:
        return len(self._idle)


def _drop(_client: Any) -> None:
    """Producers have no close in confluent-kafka: the last reference going away destroys them."""


# A worker serves partitions of a few queries: one producer per transactional.id it wrote with lately.
TXN_PRODUCERS: ClientCache[Any] = ClientCache(8, _drop)
DRIVER_PRODUCERS: ClientCache[Any] = ClientCache(4, _drop)
ADMINS: ClientCache[Any] = ClientCache(4, _drop)


def connect(client: Any, topic: str) -> None:
    """Have a new client fetch `topic`'s metadata before it is used: librdkafka asks for a producer id or
    a transaction coordinator only once a broker connection is up, and otherwise retries that on a 0.5 s
    timer; with the connection up init_transactions took 3 ms instead of 0.05-0.5 s."""
    client.list_topics(topic, timeout=CONNECT_TIMEOUT_S)


def admin_conf(opts: SinkOptions) -> dict[str, Any]:
    return {
        "bootstrap.servers": opts.bootstrap,
        **{k: v for k, v in opts.kafka.items() if k.startswith(("security", "sasl", "ssl", "log_level"))},
    }


def admin(opts: SinkOptions) -> tuple[Hashable, Any]:
    """(key, AdminClient) checked out of ADMINS; hand it back with ADMINS.put(key, client)."""
    from confluent_kafka.admin import AdminClient

    conf = admin_conf(opts)
    key = conf_key(conf)
    client = ADMINS.take(key)
    if client is None:
        STATS["admins_created"] += 1
        client = AdminClient(conf)
    return key, client


# -- the marker read ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommitState:
    """What the marker topic says about one query."""

    last_batch: int
    tasks: dict[int, int]  # spark partition -> last batch id that partition finished

    def done(self, batch_id: int, partition: int) -> bool:
        return self.last_batch >= batch_id or self.tasks.get(partition, -1) >= batch_id


def _end_offsets(admin_client: Any, tp: Any, timeout: float) -> tuple[int, int]:
    """(high watermark, last stable offset) of one partition."""
    from confluent_kafka import IsolationLevel

    from epochlog.client.admin import LATEST_SPEC

    # Both asked at once: this runs on every poll of a task's marker read.
    futs = [
        admin_client.list_offsets({tp: LATEST_SPEC}, isolation_level=level, request_timeout=timeout)[tp]
        for level in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED)
    ]
    return int(futs[0].result().offset), int(futs[1].result().offset)


class MarkerReader:
    """An AdminClient and a read_committed consumer on the marker topic, kept for the worker's next task."""

    def __init__(self, opts: SinkOptions) -> None:
        from confluent_kafka import Consumer
        from confluent_kafka.admin import AdminClient

        self.topic = opts.commit_topic
        self.admin = AdminClient(admin_conf(opts))
        # Measured: list_offsets on a fresh AdminClient waited 3 s about one time in five (librdkafka 2.16)
        # unless the client already had the topic's metadata; with it, never more than 0.06 s in 40 tries.
        self.admin.list_topics(self.topic, timeout=10)
        self.consumer = Consumer(
            {
                **admin_conf(opts),
                "group.id": "epochlog-sink-markers",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                # The scan ends at end-of-partition, which an empty fetch reports: do not let the broker hold it.
                "fetch.wait.max.ms": 10,
            }
        )

    def close(self) -> None:
        self.consumer.close()

    def read(self, query_id: str, timeout: float, stable_timeout: float) -> CommitState:
        from confluent_kafka import KafkaError, TopicPartition

        tp = TopicPartition(self.topic, 0)
        high, stable = _end_offsets(self.admin, tp, 10.0)
        deadline = time.monotonic() + stable_timeout
        while stable < high:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.topic}: the last stable offset stayed below {high} for {stable_timeout}s "
                    "(an open transaction that was neither committed nor aborted)"
                )
            time.sleep(0.1)
            stable = _end_offsets(self.admin, tp, 10.0)[1]
        last = -1
        tasks: dict[int, int] = {}
        prefix = f"{query_id}/".encode()
        low, _ = self.consumer.get_watermark_offsets(tp, timeout=10.0)
        if high <= low:
            return CommitState(-1, {})
        self.consumer.assign([TopicPartition(self.topic, 0, low)])
        try:
            deadline = time.monotonic() + timeout
            pos = low
            while pos < high:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reading sink markers from {self.topic} took more than {timeout}s")
                # consume(n, timeout) waits out its timeout unless n messages came: take what is there,
                # else wait for the first message only.
                msgs = self.consumer.consume(10_000, 0)
                if not msgs:
                    first = self.consumer.poll(0.1)
                    msgs = [] if first is None else [first]
                for m in msgs:
                    err = m.error()
                    if err:
                        if err.code() == KafkaError._PARTITION_EOF:
                            pos = max(pos, message_offset(m))
                        continue
                    pos = message_offset(m) + 1
                    if not (m.key() or b"").startswith(prefix):
                        continue
                    value = m.value()
                    assert value is not None, "a sink marker always has a JSON value"
                    rec = json.loads(value)
                    if rec["p"] < 0:
                        last = max(last, int(rec["b"]))
                    else:
                        tasks[int(rec["p"])] = max(tasks.get(int(rec["p"]), -1), int(rec["b"]))
        finally:
            # Fetched-ahead messages of this scan must not be returned by the next one.
            self.consumer.unassign()
        return CommitState(last, tasks)


MARKER_READERS: ClientCache[MarkerReader] = ClientCache(4, MarkerReader.close)


def read_commit_state(
    opts: SinkOptions, query_id: str, timeout: float = 30.0, stable_timeout: float = 120.0
) -> CommitState:
    """The query's markers, read_committed, up to the marker topic's end as it is now.

    The read waits until the last stable offset reaches the high watermark seen first: a transaction that
    wrote a marker before this call (an earlier attempt that was committing while it was fenced, another
    task's) is then decided, so a committed marker is never missed because the read stopped at an open
    transaction. A dead task's transaction stays open until its retry's init_transactions or the
    transaction timeout, hence `stable_timeout` (above the producer's transaction.timeout.ms)."""
    key = (conf_key(admin_conf(opts)), opts.commit_topic)
    reader = MARKER_READERS.take(key)
    if reader is None:
        STATS["marker_readers_created"] += 1
        reader = MarkerReader(opts)
    else:
        STATS["marker_readers_reused"] += 1
    try:
        state = reader.read(query_id, timeout, stable_timeout)
    except BaseException:
        MARKER_READERS.discard(reader)
        raise
    MARKER_READERS.put(key, reader)
    return state
