"""The `epochlog` sink: batch and streaming writes through an idempotent confluent-kafka producer.

Streaming writes are exactly-once into the log by remembering what was committed, per query, in a small
marker topic (one partition, compacted):

  key "<queryId>/task/<sparkPartition>"  value {"q", "b": batchId, "p": sparkPartition, "n": rows}
  key "<queryId>/batch"                   value {"q", "b": batchId, "p": -1}

A write task flushes its records (idempotent producer: no duplicates from its own retries), then writes its
task marker. The driver's commit writes the batch marker after every task succeeded. When Spark replays a
micro-batch (restart after a crash between the write and Spark's commit log, or a re-run of the same batch
id), each task first reads the markers and writes nothing if its batch, or its own part of it, is already
marked. The remaining window is a task that crashes after some of its records were acknowledged but before
its marker: the retry rewrites that task's rows (Kafka transactions would close it; see docs/spark.md).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from epochlog.spark.options import OptionError, SinkOptions, parse_sink_options

log = logging.getLogger("epochlog.spark.sink")

BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"


def check_schema(schema: StructType, opts: SinkOptions) -> None:
    """The connector's rules for the written DataFrame."""
    fields = {f.name.lower(): f for f in schema.fields}
    if "value" not in fields:
        raise OptionError("Required attribute 'value' not found")
    if not isinstance(fields["value"].dataType, StringType | BinaryType):
        raise OptionError(
            f"value attribute type must be a string or binary, got {fields['value'].dataType.simpleString()}"
        )
    if "key" in fields and not isinstance(fields["key"].dataType, StringType | BinaryType):
        raise OptionError(f"key attribute type must be a string or binary, got {fields['key'].dataType.simpleString()}")
    if opts.topic is None:
        if "topic" not in fields:
            raise OptionError(
                "topic option required when no 'topic' attribute is present. Use the topic option for setting a topic."
            )
        if not isinstance(fields["topic"].dataType, StringType):
            raise OptionError(f"topic attribute type must be a string, got {fields['topic'].dataType.simpleString()}")
    if "partition" in fields and not isinstance(fields["partition"].dataType, IntegerType):
        raise OptionError(f"partition attribute type must be an int, got {fields['partition'].dataType.simpleString()}")
    if "headers" in fields:
        t = fields["headers"].dataType
        ok = (
            isinstance(t, ArrayType)
            and isinstance(t.elementType, StructType)
            and [f.name for f in t.elementType.fields] == ["key", "value"]
            and isinstance(t.elementType.fields[0].dataType, StringType)
            and isinstance(t.elementType.fields[1].dataType, BinaryType)
        )
        if not ok:
            raise OptionError(
                f"headers attribute type must be array<struct<key:string,value:binary>>, got {t.simpleString()}"
            )


def producer_conf(opts: SinkOptions) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": opts.bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000,
        # Java's default partitioner, so keyed records land where a Java producer would put them.
        "partitioner": "murmur2_random",
    }
    conf.update(opts.kafka)
    return conf


@dataclass
class SinkCommit(WriterCommitMessage):
    rows: int
    skipped: bool = False
    partition: int = -1
    query_id: str = ""


class _Producer:
    """Wraps a confluent-kafka producer; remembers the first delivery error and raises it at flush."""

    def __init__(self, conf: Mapping[str, Any]) -> None:
        from confluent_kafka import Producer

        self.p = Producer(dict(conf))
        self.error: Any = None

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None and self.error is None:
            self.error = err

    def produce(
        self, topic: str, value: Any, key: Any = None, partition: int | None = None, headers: Any = None
    ) -> None:
        kwargs: dict[str, Any] = {"on_delivery": self._on_delivery}
        if key is not None:
            kwargs["key"] = key
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        while True:
            try:
                self.p.produce(topic, value, **kwargs)
                return
            except BufferError:
                self.p.poll(0.05)

    def flush(self, timeout: float = 120.0) -> None:
        remaining = self.p.flush(timeout)
        if remaining:
            raise RuntimeError(f"{remaining} records were not acknowledged within {timeout}s")
        if self.error is not None:
            raise RuntimeError(f"write to Kafka failed: {self.error}")


def write_batches(opts: SinkOptions, batches: Iterator[pa.RecordBatch], producer: _Producer) -> int:
    rows = 0
    for rb in batches:
        names = [n.lower() for n in rb.schema.names]
        col = {n: rb.column(i) for i, n in enumerate(names)}
        n = rb.num_rows
        values = col["value"].to_pylist()
        keys = col["key"].to_pylist() if "key" in col else [None] * n
        topics = [opts.topic] * n if opts.topic is not None else col["topic"].to_pylist()
        parts = col["partition"].to_pylist() if "partition" in col else [None] * n
        hdrs = col["headers"].to_pylist() if "headers" in col else [None] * n
        for i in range(n):
            topic = topics[i]
            if topic is None:
                raise OptionError("null topic present in the data. Use the topic option for setting a topic.")
            h = hdrs[i]
            producer.produce(
                topic,
                values[i],
                keys[i],
                parts[i],
                [(x["key"], x["value"]) for x in h] if h else None,
            )
        rows += n
        producer.p.poll(0)
    producer.flush()
    return rows


class EpochlogBatchWriter(DataSourceArrowWriter):
    """At-least-once like the connector: a retried Spark task rewrites its rows."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = parse_sink_options(options)
        check_schema(schema, self.opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return SinkCommit(write_batches(self.opts, iterator, _Producer(producer_conf(self.opts))))


# -- exactly-once streaming --------------------------------------------------------------------------


def _ensure_commit_topic(opts: SinkOptions) -> None:
    from confluent_kafka.admin import AdminClient

    from epochlog.client.admin import create_topic, wait_for_partitions

    admin = AdminClient(
        {
            "bootstrap.servers": opts.bootstrap,
            **{k: v for k, v in opts.kafka.items() if k.startswith(("security", "sasl", "ssl"))},
        }
    )
    md = admin.list_topics(opts.commit_topic, timeout=10)
    t = md.topics.get(opts.commit_topic)
    if t is not None and t.error is None and t.partitions:
        return
    cfg = {"cleanup.policy": "compact"}
    try:
        create_topic(admin, opts.commit_topic, 1, opts.commit_topic_replication_factor, cfg)
    except Exception:
        if opts.commit_topic_replication_factor != -1:
            raise
        # Brokers before KIP-464 (and some Kafka-protocol peers) need an explicit factor.
        create_topic(admin, opts.commit_topic, 1, 1, cfg)
    wait_for_partitions(admin, opts.commit_topic, 1)


@dataclass(frozen=True)
class CommitState:
    """What the marker topic says about one query."""

    last_batch: int
    tasks: dict[int, int]  # spark partition -> last batch id that partition finished

    def done(self, batch_id: int, partition: int) -> bool:
        return self.last_batch >= batch_id or self.tasks.get(partition, -1) >= batch_id


def read_commit_state(opts: SinkOptions, query_id: str, timeout: float = 30.0) -> CommitState:
    """Scan the marker topic for one query's markers (the topic is small and compacted)."""
    import time

    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": opts.bootstrap,
            "group.id": "epochlog-sink-markers",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_uncommitted",
            "auto.offset.reset": "earliest",
            **{k: v for k, v in opts.kafka.items() if k.startswith(("security", "sasl", "ssl"))},
        }
    )
    last, tasks = -1, {}
    prefix = f"{query_id}/".encode()
    try:
        tp = TopicPartition(opts.commit_topic, 0)
        low, high = c.get_watermark_offsets(tp, timeout=10.0)
        if high <= low:
            return CommitState(-1, {})
        c.assign([TopicPartition(opts.commit_topic, 0, low)])
        deadline = time.monotonic() + timeout
        pos = low
        while pos < high:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading sink markers from {opts.commit_topic} took more than {timeout}s")
            for m in c.consume(10_000, 0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        pos = max(pos, m.offset())
                    continue
                pos = m.offset() + 1
                if not (m.key() or b"").startswith(prefix):
                    continue
                rec = json.loads(m.value())
                if rec["p"] < 0:
                    last = max(last, int(rec["b"]))
                else:
                    tasks[int(rec["p"])] = max(tasks.get(int(rec["p"]), -1), int(rec["b"]))
    finally:
        c.close()
    return CommitState(last, tasks)


def _marker(producer: _Producer, opts: SinkOptions, query_id: str, batch_id: int, partition: int, rows: int) -> None:
    key = f"{query_id}/batch" if partition < 0 else f"{query_id}/task/{partition}"
    value = json.dumps({"q": query_id, "b": batch_id, "p": partition, "n": rows})
    producer.produce(opts.commit_topic, value.encode(), key.encode(), 0)
    producer.flush()


class EpochlogStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = parse_sink_options(options)
        check_schema(schema, self.opts)
        _ensure_commit_topic(self.opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch_prop = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx else None
        query_id = (ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx else None) or ""
        part = ctx.partitionId() if ctx else -1
        if batch_prop is None or not query_id:
            # Not inside a micro-batch we can identify: plain at-least-once.
            return SinkCommit(write_batches(self.opts, iterator, _Producer(producer_conf(self.opts))), partition=part)
        batch_id = int(batch_prop)
        state = read_commit_state(self.opts, query_id)
        if state.done(batch_id, part):
            log.info("query %s batch %s partition %s already in the log; writing nothing", query_id, batch_id, part)
            for _ in iterator:
                pass
            return SinkCommit(0, skipped=True, partition=part, query_id=query_id)
        producer = _Producer(producer_conf(self.opts))
        rows = write_batches(self.opts, iterator, producer)
        _marker(producer, self.opts, query_id, batch_id, part, rows)
        return SinkCommit(rows, partition=part, query_id=query_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        qids = {m.query_id for m in messages if isinstance(m, SinkCommit) and m.query_id}
        if not qids:
            return
        producer = _Producer(
            {"bootstrap.servers": self.opts.bootstrap, "enable.idempotence": True, "acks": "all", **self.opts.kafka}
        )
        rows = sum(m.rows for m in messages if isinstance(m, SinkCommit))
        for qid in qids:
            _marker(producer, self.opts, qid, batchId, -1, rows)
        log.info("sink batch %s committed: %s rows", batchId, rows)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("sink batch %s aborted; tasks that finished keep their markers, so a retry skips them", batchId)
