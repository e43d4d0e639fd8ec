"""Worker side of the source: read one offset range into Arrow record batches.

The common case goes through fetch_reader (plain Fetch requests, records decoded column-wise by
batch_decode); whatever it does not handle, and everything from the first thing it does not handle, is
read with confluent-kafka here, which also owns the data-loss rules.

Everything here runs in a Spark Python worker from a pickled InputPartition, so the split carries all it
needs and nothing is shared with the driver.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from operator import itemgetter

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Message
from pyspark.sql.datasource import InputPartition

from epochlog.spark import fetch_reader
from epochlog.spark.batch_decode import HEADERS_TYPE, SCHEMA, SCHEMA_WITH_HEADERS  # Spark's Kafka schema in Arrow

log = logging.getLogger("epochlog.spark.reader")

SPARK_DDL = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
SPARK_DDL_HEADERS = SPARK_DDL + ", headers array<struct<key:string,value:binary>>"

# How many messages one consume() call may return; also the Arrow batch size. Larger amortizes the
# per-call cost; 20k rows of 100 B values is ~3 MB per batch.
CHUNK = 20_000


class DataLossError(RuntimeError):
    """Records the query was asked to read are gone (failOnDataLoss=true)."""


@dataclass
class RangeSplit(InputPartition):
    """One Spark task: [from_offset, until_offset) of one topic-partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int
    conf: dict[str, str] = field(default_factory=dict)
    include_headers: bool = False
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = 120_000
    group_id_prefix: str = "spark-kafka-source"
    # "auto": plain Fetch first, confluent-kafka for the rest; "confluent": confluent-kafka only.
    reader: str = "auto"

    def __post_init__(self) -> None:
        InputPartition.__init__(self, f"{self.topic}-{self.partition}@{self.from_offset}")


def consumer_conf(split: RangeSplit) -> dict[str, object]:
    conf: dict[str, object] = {
        "group.id": f"{split.group_id_prefix}-{uuid.uuid4()}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_uncommitted",
        # Out-of-range must surface as an error so that data loss is decided here, not silently reset.
        "auto.offset.reset": "error",
        "enable.partition.eof": True,
        # librdkafka stops fetching for fetch.queue.backoff.ms (1 s) once queued.min.messages are waiting;
        # measured: a 250k-record read stalled a whole second. Keep the prefetch queue deep and the backoff short.
        "queued.min.messages": 1_000_000,
        "queued.max.messages.kbytes": 262_144,
        "fetch.queue.backoff.ms": 5,
        "fetch.wait.max.ms": 50,
        "max.partition.fetch.bytes": 8 << 20,
        "fetch.max.bytes": 64 << 20,
    }
    conf.update(split.conf)
    return conf


_FIRST = itemgetter(0)
_SECOND = itemgetter(1)
_VALUE = Message.value
_KEY = Message.key
_TIMESTAMP = Message.timestamp
_OFFSET = Message.offset


def message_offset(m: Message) -> int:
    """The offset of a message a consumer returned (confluent_kafka types it optional, for messages built
    by hand)."""
    offset = m.offset()
    assert offset is not None, "a consumed message has an offset"
    return offset


def _to_batch(msgs: list[Message], topic: str, partition: int, include_headers: bool) -> pa.RecordBatch:
    n = len(msgs)
    # map() over the C methods and itemgetter avoid a Python-level loop per field (measured ~30% faster).
    values = list(map(_VALUE, msgs))
    keys = list(map(_KEY, msgs))
    stamps = list(map(_TIMESTAMP, msgs))
    first = message_offset(msgs[0])
    if message_offset(msgs[-1]) - first + 1 == n:
        # Contiguous (the usual case): no per-message offset() call.
        offsets = pa.array(range(first, first + n), pa.int64())
    else:
        offsets = pa.array(list(map(_OFFSET, msgs)), pa.int64())
    ts_ms = pa.array(list(map(_SECOND, stamps)), pa.int64())
    kinds = list(map(_FIRST, stamps))
    kind = kinds[0]
    # confluent-kafka's types are 0 none, 1 create, 2 log-append; Kafka's (and Spark's) are -1, 0, 1.
    if kinds.count(kind) == n:
        ts_type = pa.repeat(pa.scalar(kind - 1, pa.int32()), n)
    else:
        ts_type = pa.array([k - 1 for k in kinds], pa.int32())
    cols = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        offsets,
        pc.multiply(ts_ms, 1000).cast(pa.timestamp("us", tz="UTC")),
        ts_type,
    ]
    if include_headers:
        cols.append(pa.array([m.headers() or [] for m in msgs], HEADERS_TYPE))
        return pa.RecordBatch.from_arrays(cols, schema=SCHEMA_WITH_HEADERS)
    return pa.RecordBatch.from_arrays(cols, schema=SCHEMA)


def _report(split: RangeSplit, message: str) -> None:
    if split.fail_on_data_loss:
        raise DataLossError(
            message + ". Some data may have been lost because they are not available in Kafka any more; either the"
            " data was aged out by Kafka or the topic may have been deleted before all the data in the topic was"
            " processed. If you don't want your streaming query to fail on such cases, set the source option"
            ' "failOnDataLoss" to "false".'
        )
    log.warning("%s; continuing because failOnDataLoss=false", message)


def read_split(split: RangeSplit) -> Iterator[pa.RecordBatch]:
    """Yield the records of the split as Arrow batches, in offset order, none at or past until_offset.

    Plain Fetch requests read as far as they can (fetch_reader); confluent-kafka reads the rest.
    """
    if split.until_offset <= split.from_offset:
        return
    position = split.from_offset
    why = fetch_reader.unsupported_reason(split.conf, split.reader)
    if why is None:
        position = yield from fetch_reader.read_range(
            bootstrap=split.conf["bootstrap.servers"],
            topic=split.topic,
            partition=split.partition,
            from_offset=split.from_offset,
            until_offset=split.until_offset,
            include_headers=split.include_headers,
        )
    else:
        log.debug("%s-%s: reading with confluent-kafka: %s", split.topic, split.partition, why)
    if position < split.until_offset:
        yield from read_with_consumer(replace(split, from_offset=position))


def read_with_consumer(split: RangeSplit) -> Iterator[pa.RecordBatch]:
    """The general reader: confluent-kafka, for every case (compression, transactions, TLS/SASL, errors).

    Offsets may have gaps (compaction, transaction markers): reaching the log end is what proves a gap is
    data loss rather than a hole in the numbering.
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    if split.until_offset <= split.from_offset:
        return
    tp = TopicPartition(split.topic, split.partition)
    c = Consumer(consumer_conf(split))
    try:
        c.assign([TopicPartition(split.topic, split.partition, split.from_offset)])
        position = split.from_offset
        last_progress = time.monotonic()
        while position < split.until_offset:
            msgs = c.consume(CHUNK, 0.5)
            good = msgs
            eof_at: int | None = None
            if msgs and any(m.error() for m in msgs):
                good = []
                for m in msgs:
                    err = m.error()
                    if err is None:
                        good.append(m)
                        continue
                    code = err.code()
                    if code == KafkaError._PARTITION_EOF:
                        eof_at = m.offset()
                    elif code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        low, high = c.get_watermark_offsets(tp, timeout=10.0)
                        _report(
                            split,
                            f"Offset {position} of {split.topic}-{split.partition} is out of range "
                            f"(log is [{low}, {high}))",
                        )
                        if position < low < split.until_offset:
                            position = low
                            c.seek(TopicPartition(split.topic, split.partition, low))
                        else:
                            position = split.until_offset
                    elif code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION):
                        _report(split, f"{split.topic}-{split.partition} does not exist any more")
                        position = split.until_offset
                    elif not err.retriable() and code != KafkaError._TRANSPORT:
                        raise RuntimeError(f"reading {split.topic}-{split.partition}: {err}")
            if good:
                last_progress = time.monotonic()
                if message_offset(good[-1]) >= split.until_offset:
                    good = [m for m in good if message_offset(m) < split.until_offset]
                if good:
                    position = message_offset(good[-1]) + 1
                    yield _to_batch(good, split.topic, split.partition, split.include_headers)
            if eof_at is not None and position < split.until_offset:
                if eof_at >= split.until_offset:
                    # Offsets past the last record up to until are not data (transaction markers, compaction).
                    position = split.until_offset
                elif c.get_watermark_offsets(tp, timeout=10.0)[1] < split.until_offset:
                    # Asked the leader again: a new leader's high watermark can lag for a moment.
                    _report(
                        split,
                        f"Cannot fetch offsets [{position}, {split.until_offset}) of "
                        f"{split.topic}-{split.partition}: the log now ends at {eof_at}",
                    )
                    position = split.until_offset
            if not good and (time.monotonic() - last_progress) * 1000 > split.poll_timeout_ms:
                raise TimeoutError(
                    f"Cannot fetch record for offset {position} of {split.topic}-{split.partition} "
                    f"in {split.poll_timeout_ms} milliseconds"
                )
    finally:
        c.close()
