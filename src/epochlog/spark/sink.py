"""The `epochlog` sink: exactly-once streaming writes on Kafka transactions, batch writes idempotent.

Streaming (docs/spark.md has the protocol with a picture). Each write task of micro-batch N:

  1. opens a transactional producer with transactional.id "<prefix>-<queryId>-<sparkPartition>": the same id
     for every attempt of that partition (task retries, speculative copies, replays after a driver restart),
     so `init_transactions` fences every earlier attempt and aborts its open transaction (a worker keeps
     its producer for the next task with that id: `write_task_transactional` says why that is enough);
  2. reads, read_committed, the query's markers in the compacted marker topic (`commitTopic`), after waiting
     until the marker topic's last stable offset has passed its end as it was after step 1;
  3. if its partition's marker (or the driver's batch marker) already says batch >= N, writes nothing;
  4. else begins a transaction, produces its rows and the marker
       key "<queryId>/task/<sparkPartition>"  value {"q", "b": N, "p": sparkPartition, "n": rows}
     into the same transaction, and commits: the rows and "partition p did batch N" become visible together.

The driver's commit(N) appends the batch marker ("<queryId>/batch", "p": -1) once every task succeeded; it
only lets later replays skip the marker read's per-partition answer, correctness rests on the task markers.
Readers see each row once with isolation.level=read_committed (read_uncommitted readers also see the rows
of aborted attempts). Batch writes (DataFrame.write) stay at-least-once through an idempotent producer, as
Spark's Kafka connector: a retried task rewrites its rows.

EPOCHLOG_SINK_FAULT is a test hook, never set in production: see `fault_point`.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from epochlog.spark import sink_clients
from epochlog.spark.options import OptionError, SinkOptions, parse_sink_options
from epochlog.spark.sink_clients import CommitState, read_commit_state

__all__ = ["CommitState", "EpochlogBatchWriter", "EpochlogStreamWriter", "read_commit_state"]

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


def plain_producer(opts: SinkOptions) -> _Producer:
    """The at-least-once writers' idempotent producer. With the output topic given, it fetches that topic's
    metadata first: until a broker connection is up librdkafka retries its producer id request on a 0.5 s
    timer, which a task would otherwise wait out before its first batch is sent."""
    producer = _Producer(producer_conf(opts))
    if opts.topic is not None:
        sink_clients.connect(producer.p, opts.topic)
    return producer


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
        return SinkCommit(write_batches(self.opts, iterator, plain_producer(self.opts)))


# -- test hook ---------------------------------------------------------------------------------------

FAULT_ENV = "EPOCHLOG_SINK_FAULT"
FAULT_FILE_ENV = "EPOCHLOG_SINK_FAULT_FILE"
NO_MARKER_CHECK_ENV = "EPOCHLOG_SINK_TEST_NO_MARKER_CHECK"
NO_TRANSACTIONS_ENV = "EPOCHLOG_SINK_TEST_NO_TRANSACTIONS"
FAULT_STEPS = (
    "after_init",  # task: init_transactions done (earlier attempts fenced), markers not read yet
    "before_marker",  # task: rows produced in the open transaction, the marker not yet
    "before_task_commit",  # task: rows and marker produced, commit_transaction not called
    "after_task_commit",  # task: transaction committed, the commit message not yet returned to Spark
    "before_driver_commit",  # driver: every task reported, the batch marker not written
    "after_driver_commit",  # driver: batch marker written, Spark's commit log not yet
)


def fault_point(step: str, batch_id: int, partition: int) -> None:
    """TEST HOOK. With EPOCHLOG_SINK_FAULT="<step>[:<action>[:<batch>[:<partition>]]]" and
    EPOCHLOG_SINK_FAULT_FILE=<path>, the first process to reach <step> (of that batch id and Spark partition,
    when given) creates <path> (O_EXCL, so the fault fires once across every process and restart) and then:
    "pause" (default) sleeps until killed (the test kill -9s the driver's process tree), "raise" raises
    (Spark fails the task and retries it), "exit" ends the Python worker with os._exit(1). Unset: nothing."""
    spec = os.environ.get(FAULT_ENV)
    path = os.environ.get(FAULT_FILE_ENV)
    if not spec or not path:
        return
    parts = spec.split(":")
    if parts[0] != step:
        return
    action = parts[1] if len(parts) > 1 and parts[1] else "pause"
    if len(parts) > 2 and parts[2] and int(parts[2]) != batch_id:
        return
    if len(parts) > 3 and parts[3] and int(parts[3]) != partition:
        return
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps({"step": step, "batch": batch_id, "partition": partition, "pid": os.getpid()}))
    log.warning("test fault %s at %s (batch %s, partition %s)", action, step, batch_id, partition)
    if action == "raise":
        raise RuntimeError(f"injected sink fault at {step} (batch {batch_id}, partition {partition})")
    if action == "exit":
        os._exit(1)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        time.sleep(0.2)
    raise RuntimeError(f"injected pause at {step} was never killed")


# -- exactly-once streaming --------------------------------------------------------------------------


def _ensure_commit_topic(opts: SinkOptions) -> None:
    from epochlog.client.admin import create_topic, wait_for_partitions

    key, admin = sink_clients.admin(opts)  # the driver's commit process makes a writer, so this, per batch
    md = admin.list_topics(opts.commit_topic, timeout=10)
    t = md.topics.get(opts.commit_topic)
    if t is not None and t.error is None and t.partitions:
        sink_clients.ADMINS.put(key, admin)
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
    sink_clients.ADMINS.put(key, admin)


def _marker_record(query_id: str, batch_id: int, partition: int, rows: int) -> tuple[bytes, bytes]:
    key = f"{query_id}/batch" if partition < 0 else f"{query_id}/task/{partition}"
    value = json.dumps({"q": query_id, "b": batch_id, "p": partition, "n": rows})
    return key.encode(), value.encode()


def transactional_id(opts: SinkOptions, query_id: str, partition: int) -> str:
    """Stable across attempts of one Spark partition of one query (its id survives restarts: the checkpoint
    keeps it), distinct between partitions and queries."""
    return f"{opts.transactional_id_prefix}-{query_id}-{partition}"


def transactional_conf(opts: SinkOptions, txn_id: str) -> dict[str, Any]:
    conf = producer_conf(opts)
    conf["transactional.id"] = txn_id
    conf.setdefault("transaction.timeout.ms", 60_000)
    return conf


@dataclass
class TaskResult:
    rows: int
    skipped: bool


class _CachedProducerFailed(Exception):
    """A cached producer failed before any row beyond the ones still at hand was written."""


def write_task_transactional(
    opts: SinkOptions, batches: Iterator[pa.RecordBatch], query_id: str, batch_id: int, part: int
) -> TaskResult:
    """One Spark partition of micro-batch `batch_id`, exactly once (module docstring, steps 1-4).

    The worker's producer for this transactional.id from an earlier task is used when there is one. Its
    epoch was assigned before this task's marker read, which is all step 1 is for: an attempt that
    initialized the id after it fenced it, and one from before can no longer commit. Another worker
    may have fenced it since (Spark gives a partition to any idle worker), so the first Arrow batch is
    written and flushed before the rest is read: a fenced producer fails there, with every row it wrote
    still at hand, and a fresh producer (init_transactions, then the marker read again) writes the task."""
    conf = transactional_conf(opts, transactional_id(opts, query_id, part))
    key = sink_clients.conf_key(conf)
    rest = iter(batches)
    cached = sink_clients.TXN_PRODUCERS.take(key)
    if cached is not None:
        first = next(rest, None)
        head = [] if first is None else [first]
        try:
            result = _task_transaction(opts, conf, cached, head, rest, query_id, batch_id, part, probe=True)
        except _CachedProducerFailed as e:
            log.info("cached producer for %s failed (%s); initializing a new one", conf["transactional.id"], e)
            sink_clients.STATS["txn_producers_replaced"] += 1
            sink_clients.TXN_PRODUCERS.discard(cached)
            rest = itertools.chain(head, rest)
        else:
            sink_clients.STATS["txn_producers_reused"] += 1
            sink_clients.TXN_PRODUCERS.put(key, cached)
            return result
    producer = _Producer(conf)
    sink_clients.STATS["txn_producers_created"] += 1
    sink_clients.connect(producer.p, opts.commit_topic)
    producer.p.init_transactions(max(_txn_timeout_s(conf), 60.0))
    result = _task_transaction(opts, conf, producer, [], rest, query_id, batch_id, part, probe=False)
    # Only a producer whose transaction ended (committed, or never begun) is kept: one that raised is
    # dropped here, and the next attempt's init_transactions aborts what it left open.
    sink_clients.TXN_PRODUCERS.put(key, producer)
    return result


def _txn_timeout_s(conf: Mapping[str, Any]) -> float:
    return int(conf["transaction.timeout.ms"]) / 1000


def _task_transaction(
    opts: SinkOptions,
    conf: Mapping[str, Any],
    producer: _Producer,
    head: list[pa.RecordBatch],
    rest: Iterator[pa.RecordBatch],
    query_id: str,
    batch_id: int,
    part: int,
    probe: bool,
) -> TaskResult:
    """Steps 2-4 with an initialized producer. With `probe`, a failure before any batch beyond `head` was
    read raises _CachedProducerFailed (the caller has `head` and `rest` to start again)."""
    from confluent_kafka import KafkaException

    txn_timeout_s = _txn_timeout_s(conf)
    fault_point("after_init", batch_id, part)
    if not os.environ.get(NO_MARKER_CHECK_ENV):
        state = read_commit_state(opts, query_id, stable_timeout=txn_timeout_s + 60)
        if state.done(batch_id, part):
            log.info("query %s batch %s partition %s already committed; writing nothing", query_id, batch_id, part)
            for _ in rest:
                pass
            return TaskResult(0, True)
    producer.error = None
    # Until a batch beyond `head` is read, a cached producer's task can start over with a fresh one.
    replayable = probe
    try:
        producer.p.begin_transaction()
        rows = 0
        if head:
            try:
                rows = write_batches(opts, iter(head), producer)  # flushes: a fenced producer fails here
            except Exception as e:
                # Left as it is: the fresh producer's init_transactions aborts whatever it has open.
                raise _CachedProducerFailed(str(e)) from e
            replayable = False
        rows += write_batches(opts, rest, producer)
        fault_point("before_marker", batch_id, part)
        key, value = _marker_record(query_id, batch_id, part, rows)
        producer.produce(opts.commit_topic, value, key, 0)
        fault_point("before_task_commit", batch_id, part)
        producer.p.commit_transaction(max(txn_timeout_s, 60.0))
    except KafkaException as e:
        if replayable:
            # No rows (head is empty and rest was exhausted by taking it): nothing to abort that the fresh
            # producer's init_transactions does not.
            raise _CachedProducerFailed(str(e)) from e
        err = e.args[0] if e.args else None
        if err is not None and getattr(err, "txn_requires_abort", lambda: False)():
            try:
                producer.p.abort_transaction(30.0)
            except KafkaException:
                pass  # the retry's init_transactions aborts it, or the coordinator's timeout does
        raise
    fault_point("after_task_commit", batch_id, part)
    return TaskResult(rows, False)


def write_task_without_transactions(
    opts: SinkOptions, batches: Iterator[pa.RecordBatch], query_id: str, batch_id: int, part: int
) -> TaskResult:
    """TEST HOOK (EPOCHLOG_SINK_TEST_NO_TRANSACTIONS=1): the sink as it was before transactions, for the
    negative controls: check the markers, write the rows with an idempotent producer, flush, then write the
    marker. A task that dies between its flushed rows and its marker leaves rows with no marker."""
    state = read_commit_state(opts, query_id)
    if state.done(batch_id, part):
        for _ in batches:
            pass
        return TaskResult(0, True)
    producer = _Producer(producer_conf(opts))
    rows = write_batches(opts, batches, producer)
    fault_point("before_marker", batch_id, part)
    key, value = _marker_record(query_id, batch_id, part, rows)
    producer.produce(opts.commit_topic, value, key, 0)
    producer.flush()
    fault_point("after_task_commit", batch_id, part)
    return TaskResult(rows, False)


class EpochlogStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = parse_sink_options(options)
        check_schema(schema, self.opts)
        _ensure_commit_topic(self.opts)
        self.transactions = 0  # committed task transactions, counted on the driver from the commit messages

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch_prop = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx else None
        query_id = (ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx else None) or ""
        part = ctx.partitionId() if ctx else -1
        if batch_prop is None or not query_id:
            # Not inside a micro-batch we can identify: plain at-least-once.
            return SinkCommit(write_batches(self.opts, iterator, plain_producer(self.opts)), partition=part)
        write = write_task_without_transactions if os.environ.get(NO_TRANSACTIONS_ENV) else write_task_transactional
        r = write(self.opts, iterator, query_id, int(batch_prop), part)
        return SinkCommit(r.rows, skipped=r.skipped, partition=part, query_id=query_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        done = [m for m in messages if isinstance(m, SinkCommit)]
        qids = {m.query_id for m in done if m.query_id}
        fault_point("before_driver_commit", batchId, -1)
        if not qids:
            return
        conf = {"bootstrap.servers": self.opts.bootstrap, "enable.idempotence": True, "acks": "all", **self.opts.kafka}
        # Spark runs every commit of a query in the same (reused) Python process, with a new writer each time.
        ckey = sink_clients.conf_key(conf)
        producer = sink_clients.DRIVER_PRODUCERS.take(ckey)
        if producer is None:
            sink_clients.STATS["driver_producers_created"] += 1
            producer = _Producer(conf)
            sink_clients.connect(producer.p, self.opts.commit_topic)
        producer.error = None
        rows = sum(m.rows for m in done)
        for qid in qids:
            key, value = _marker_record(qid, batchId, -1, rows)
            producer.produce(self.opts.commit_topic, value, key, 0)
        producer.flush()  # raising, the producer is dropped: a later commit gets a new one
        sink_clients.DRIVER_PRODUCERS.put(ckey, producer)
        committed = sum(1 for m in done if not m.skipped)
        self.transactions += committed
        log.info(
            "sink batch %s committed: %s rows in %s task transactions (%s tasks skipped, already committed)",
            batchId,
            rows,
            committed,
            len(done) - committed,
        )
        fault_point("after_driver_commit", batchId, -1)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning(
            "sink batch %s aborted; tasks that committed keep their transactions and markers, so the retry of "
            "the batch skips them; an open transaction of a failed task is aborted by the next attempt's "
            "init_transactions or by the transaction timeout",
            batchId,
        )
